//! The glue of weighstation_core::kafka::quotas: a DescribeClientQuotas goes to the broker, and
//! its answer to the client is cut down to the caller's own entities, with its tenant's limits
//! in place of the broker's where the gateway has one (docs/kafka.md).

use weighstation_core::kafka::{describe_client_quotas, quota_filter, Caller, GatewayQuotas, RequestHeader};
use weighstation_core::scan::Admission;

use super::{Conn, Pending};

impl Conn {
    pub(super) fn describe_client_quotas(&mut self, h: &RequestHeader<'_>, body: &[u8]) -> Admission {
        let Some(filter) = quota_filter(body, h.api_version) else {
            log::info!("weighstation: kafka DescribeClientQuotas request closes the connection: malformed");
            return Admission::Close(Vec::new());
        };
        let pending = Pending::ClientQuotas {
            version: h.api_version,
            filter,
            client_id: h.client_id.map(<[u8]>::to_vec),
        };
        self.pending.insert(h.correlation_id, pending);
        Admission::Forward
    }

    /// The broker's answer, for the caller. None: as it is (an error names no entity).
    pub(super) fn client_quotas_answered(
        &mut self,
        frame: &[u8],
        version: i16,
        filter: &weighstation_core::kafka::QuotaFilter,
        client_id: Option<&[u8]>,
    ) -> Option<Vec<u8>> {
        let gateway = self
            .who
            .current()
            .and_then(|w| w.tenant())
            .map(|t| GatewayQuotas {
                producer_byte_rate: t.limits.bytes_per_second,
                consumer_byte_rate: t.limits.consume_bytes_per_second,
            })
            .unwrap_or_default();
        let caller = Caller {
            user: self.who.kafka_principal().map(str::as_bytes),
            client_id,
        };
        describe_client_quotas(frame, version, filter, &caller, &gateway)
    }
}
