//! The glue of weighstation_core::kafka::authz: a request of an API the gateway does not pass
//! closes the connection; an admin request is decided against its tenant's grants, and a
//! refused one goes to the broker as an ApiVersions request whose answer is swapped for the
//! refusal (as a refused Produce's is), counted and logged with the operation and the resource.

use weighstation_core::kafka::authz::{self, Api, Verdict};
use weighstation_core::kafka::{api_versions_request, RequestHeader};
use weighstation_core::limits::Reason;
use weighstation_core::scan::Admission;
use weighstation_core::source::Source;

use super::{Conn, Pending};
use crate::clock::now_ns;
use crate::reports;

impl Conn {
    /// Decides a request by its API's class: None when it passes on (to the limits, the
    /// rewriters, or the broker as it is).
    pub(super) fn authorize<'s>(
        &mut self,
        h: &RequestHeader<'_>,
        body: Option<&mut (dyn Source + 's)>,
    ) -> Option<Admission> {
        let Some(api) = authz::api_of(h.api_key) else {
            log::info!(
                "weighstation: kafka request with API key {} v{} closes the connection: not one a client sends through the gateway (docs/security.md)",
                h.api_key,
                h.api_version
            );
            return Some(Admission::Close(Vec::new()));
        };
        if !api.class.decided_per_resource() {
            return None;
        }
        let Some(body) = body else {
            log::info!(
                "weighstation: kafka {} request larger than the gateway reads closes the connection",
                api.name
            );
            return Some(Admission::Close(Vec::new()));
        };
        Some(self.admin(h, api, body.all()))
    }

    fn admin(&mut self, h: &RequestHeader<'_>, api: &Api, body: &[u8]) -> Admission {
        self.who.ensure_attributed();
        let Some(tenant) = self.who.current().and_then(|w| w.tenant()) else {
            return Admission::Forward;
        };
        let verdict = authz::decide(
            api,
            h.api_version,
            h.correlation_id,
            body,
            &tenant.name,
            &tenant.permissions,
        );
        match verdict {
            Verdict::Forward => Admission::Forward,
            Verdict::Close(why) => {
                log::info!("weighstation: kafka {} request closes the connection: {why}", api.name);
                Admission::Close(Vec::new())
            }
            Verdict::Refuse { response, denied, of } => {
                let resource = String::from_utf8_lossy(&denied).into_owned();
                let detail = match of {
                    1 => format!("{} of {resource} not granted", api.name),
                    n => format!("{} of {resource} and {} more not granted", api.name, n - 1),
                };
                log::debug!("weighstation: kafka request refused: {detail}");
                if let Some(who) = self.who.current() {
                    who.metrics.refused(Reason::Permission, 1);
                }
                if let Some(site) = self.who.site(None, now_ns()) {
                    let told = reports::Told {
                        detail: &detail,
                        code: "*_AUTHORIZATION_FAILED (29-31)",
                        retry_after_ms: 0,
                    };
                    reports::refused(&site, Reason::Permission, &told, || denied, || detail.clone());
                }
                self.pending.insert(h.correlation_id, Pending::Refused { response });
                Admission::Replace(api_versions_request(h.correlation_id, h.client_id))
            }
        }
    }
}
