//! The glue of weighstation_core::kafka::authz: a request of an API the gateway does not pass
//! closes the connection; an admin request, and a data request naming a group, a transactional
//! id or a topic to create, is decided against its tenant's grants. A refused one goes to the
//! broker as an ApiVersions request whose answer is swapped for the refusal (as a refused
//! Produce's is), counted and logged with the operation and the resource. Metadata is filtered
//! by what the tenant may see (metadata.rs).

mod metadata;

use weighstation_core::kafka::authz::{self, Class, Verdict};
use weighstation_core::kafka::{RequestHeader, API_FETCH, API_METADATA, API_PRODUCE};
use weighstation_core::limits::Reason;
use weighstation_core::scan::Admission;
use weighstation_core::source::Source;

use super::Conn;
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
        if body.is_none() && self.lists_topics_of(h.api_key) {
            // A Produce or Fetch the filter does not read (above the hold limit, or a version
            // it does not parse: Fetch v13+ names topics by id) cannot be decided against the
            // tenant's topic lists.
            log::info!(
                "weighstation: kafka {} v{} the gateway cannot read closes the connection: the tenant's topics are listed",
                api.name,
                h.api_version
            );
            return Some(Admission::Close(Vec::new()));
        }
        // Only the requests the table gives a highest version are read and decided here.
        api.max_version?;
        let Some(body) = body else {
            log::info!(
                "weighstation: kafka {} request larger than the gateway reads closes the connection",
                api.name
            );
            return Some(Admission::Close(Vec::new()));
        };
        if h.api_key == API_METADATA {
            // Decided with its response (metadata.rs).
            return None;
        }
        self.who.ensure_attributed();
        let tenant = self.who.current().and_then(|w| w.tenant())?;
        let decide = match api.class {
            Class::Destructive | Class::AlterConfigs | Class::Cluster(_) => authz::decide,
            _ => authz::decide_data,
        };
        let verdict = decide(
            api,
            h.api_version,
            h.correlation_id,
            body.all(),
            &tenant.name,
            &tenant.permissions,
        );
        match verdict {
            // A data request forwarded may still have its response rewritten.
            Verdict::Forward if !api.class.decided_per_resource() => None,
            verdict => Some(self.verdict(h, api.name, verdict)),
        }
    }

    /// Whether requests of the key (Produce, Fetch) name topics the tenant's lists decide.
    fn lists_topics_of(&mut self, api_key: i16) -> bool {
        self.who.ensure_attributed();
        let Some(grants) = self.who.current().and_then(|w| w.tenant()).map(|t| &t.permissions) else {
            return false;
        };
        match api_key {
            API_PRODUCE => grants.produce.is_some(),
            API_FETCH => grants.consume.is_some(),
            _ => false,
        }
    }

    /// A Fetch naming a topic the tenant may not consume from is refused (Some).
    pub(super) fn authorize_fetch(&mut self, h: &RequestHeader<'_>, body: &[u8]) -> Option<Admission> {
        let tenant = self.who.current().and_then(|w| w.tenant())?;
        match authz::decide_fetch(h.api_version, h.correlation_id, body, &tenant.permissions) {
            Verdict::Forward => None,
            verdict => Some(self.verdict(h, "Fetch", verdict)),
        }
    }

    /// Carries out a decision: a refusal is counted, logged, and answered in the broker's place.
    fn verdict(&mut self, h: &RequestHeader<'_>, api: &str, verdict: Verdict) -> Admission {
        match verdict {
            Verdict::Forward => Admission::Forward,
            Verdict::Close(why) => {
                log::info!("weighstation: kafka {api} request closes the connection: {why}");
                Admission::Close(Vec::new())
            }
            Verdict::Refuse { response, denied, of } => {
                let resource = String::from_utf8_lossy(&denied).into_owned();
                let detail = match of {
                    1 => format!("{api} of {resource} not granted"),
                    n => format!("{api} of {resource} and {} more not granted", n - 1),
                };
                self.refused_permission(&detail, denied);
                self.answer_refused(h, response)
            }
        }
    }

    /// Counts and logs a refusal for a permission not granted.
    pub(super) fn refused_permission(&self, detail: &str, resource: Vec<u8>) {
        log::debug!("weighstation: kafka request refused: {detail}");
        if let Some(who) = self.who.current() {
            who.metrics.refused(Reason::Permission, 1);
        }
        if let Some(site) = self.who.site(None, now_ns()) {
            let told = reports::Told {
                detail,
                code: "*_AUTHORIZATION_FAILED (29-31, 53)",
                retry_after_ms: 0,
            };
            reports::refused(&site, Reason::Permission, &told, || resource, || detail.to_string());
        }
    }
}
