//! The second level of the lease hierarchy (docs/architecture.md), as the filter sees it: one
//! worker per Envoy process reports, about once a second, what the process admitted under each
//! global limit to the quota service (`weighstation quota`), and stores the share it gets back
//! in the limit's shared state (crate::leases::SharedRate), where every worker's lease renewal
//! finds it. The wire format is the service's JSON (control-plane/internal/quota/service.go);
//! it is built and read here, off the data path.

use serde::{Deserialize, Serialize};

use crate::leases::{Usage, PPM};
use crate::limits::RateLimit;

/// Where the quota service is, as the control plane configures it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuotaService {
    /// The Envoy cluster the control plane made for the service.
    pub cluster: String,
    /// The service's host:port, for the request's :authority.
    pub authority: String,
    /// Live gateway replicas (the control plane's count of connected Envoys): a replica with no
    /// share enforces limit ÷ replicas.
    pub replicas: u64,
    /// How long an answer may take before the replica falls back.
    pub timeout_ms: u64,
}

/// The path replicas post their reports to.
pub const SHARES_PATH: &str = "/v1/shares";

/// How often a replica reports, and how long a share holds without a newer one: long enough to
/// outlive one lost report, short enough that a replica cut off from the service falls back
/// within about two seconds.
pub const REPORT_PERIOD_NS: u64 = 1_000_000_000;
/// A limit the replica refused or held messages under is reported four times as often: the
/// replica is the one waiting for a part another stopped using, which comes free at the other's
/// next report of it and is this one's at its own next one; and a stalled replica, saturated
/// until it stalled, gives its part up within two of these. Limits that are not saturated keep
/// the slower period, so the quota service's load grows with the saturated limits only.
pub const SATURATED_REPORT_PERIOD_NS: u64 = 250_000_000;
pub const SHARE_TTL_NS: u64 = 2_500_000_000;

/// One replica's reports, one per global limit it carried traffic for.
#[derive(Debug, Serialize)]
struct SharesRequest<'a> {
    replica: &'a str,
    /// The live replicas this one knows of: the service keeps a part of what nobody wants for
    /// those that have not reported yet.
    replicas: u64,
    limits: &'a [LimitReport],
}

/// The body of a replica's report.
pub fn shares_request(replica: &str, replicas: u64, limits: &[LimitReport]) -> Vec<u8> {
    // Strings and finite numbers only: serialising cannot fail.
    serde_json::to_vec(&SharesRequest {
        replica,
        replicas,
        limits,
    })
    .unwrap_or_default()
}

/// A report on one limit, in the unit the limit is divided by: messages if it has a message
/// rate, bytes otherwise.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LimitReport {
    pub key: String,
    pub per_second: f64,
    /// Units admitted per second since the last report.
    pub admitted: f64,
    /// Units per second the replica's clients wanted (see [`Demand`]): what the quota service
    /// divides the limit by.
    pub demand: f64,
    pub connections: u64,
    pub saturated: bool,
}

/// How a limit's refusals tell what its replica's clients wanted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Demand {
    /// Refused messages are not sent again by the gateway's doing: demand is what was admitted
    /// and refused.
    Reject,
    /// Held messages wait, so a client sends no faster than it is admitted and its demand is
    /// hidden by the backpressure. What shows it is the time its connections spent held: a
    /// client held a fraction h of the time would have sent 1 / (1 − h) times as much. And a
    /// replica whose connections are held most of the time wants at least that fraction of its
    /// even part of the limit (`replicas` live): so a replica that was given almost nothing,
    /// and admitted almost nothing, still asks for a part.
    Delay { replicas: u64 },
}

/// The most of its time a connection is counted as held: a replica never claims more than
/// 1 / (1 − this) times what it admitted.
const MAX_HELD: f64 = 0.95;

impl LimitReport {
    /// The report on `limit` of a period of `period_ns`; None if the limit has no rate or the
    /// process had nothing to do with it (no connection, nothing admitted, refused or held
    /// back), so that a replica the tenant does not use takes no share from those it does.
    pub fn new(
        key: String,
        limit: &RateLimit,
        usage: Usage,
        connections: u64,
        period_ns: u64,
        demand: Demand,
    ) -> Option<LimitReport> {
        let (bucket, unit) = match (limit.messages, limit.bytes) {
            (Some(g), _) => (g, 0),
            (None, Some(g)) => (g, 1),
            (None, None) => return None,
        };
        if connections == 0 && usage.admitted[unit] == 0 && usage.refused[unit] == 0 && !usage.saturated {
            return None;
        }
        let seconds = period_ns.max(1) as f64 / 1e9;
        let per_second = bucket.parameters().0 as f64;
        let admitted = usage.admitted[unit] as f64 / seconds;
        let wanted = match demand {
            Demand::Reject => admitted + usage.refused[unit] as f64 / seconds,
            Demand::Delay { replicas } => {
                let held = (usage.waited_ns as f64 / 1e9 / (connections.max(1) as f64 * seconds)).min(MAX_HELD);
                (admitted / (1.0 - held)).max(held * per_second / replicas.max(1) as f64)
            }
        };
        Some(LimitReport {
            key,
            per_second,
            admitted,
            demand: wanted,
            connections,
            saturated: usage.saturated,
        })
    }
}

/// The demand a replica reports: what it measured, but a rise only once it has lasted two
/// reports (`previous` is the last report's measurement, None for a limit it did not report).
/// A demand that rises for one report and falls back — a client that stalls between bursts,
/// as librdkafka does after a refusal — would claim a share that arrives after the burst, when
/// the replica is idle again, and that the others wait for meanwhile: the tenant loses it. A
/// fall is reported at once, so a share nobody uses comes free at the next report.
pub fn steady_demand(previous: Option<f64>, measured: f64) -> f64 {
    previous.map_or(measured, |p| p.min(measured))
}

#[derive(Debug, Deserialize)]
struct SharesResponse {
    limits: Vec<Share>,
}

#[derive(Debug, Deserialize)]
struct Share {
    key: String,
    share: f64,
}

/// The shares in the service's answer, as (limit key, ppm).
pub fn parse_shares(body: &[u8]) -> Result<Vec<(String, u64)>, String> {
    let resp: SharesResponse = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    resp.limits
        .into_iter()
        .map(|s| {
            if !(0.0..=1.0).contains(&s.share) {
                return Err(format!("share {} of {} is not within 0..1", s.share, s.key));
            }
            Ok((s.key, (s.share * PPM as f64).round() as u64))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_a_limit_in_the_unit_it_is_divided_by() {
        let usage = Usage {
            admitted: [500, 80_000],
            refused: [250, 40_000],
            waited_ns: 0,
            saturated: true,
        };
        let by_messages = RateLimit::new(Some((1_000, 1_000)), Some((1 << 20, 1 << 20)));
        let r = LimitReport::new(
            "nats/acme/rate/1".into(),
            &by_messages,
            usage,
            3,
            500_000_000,
            Demand::Reject,
        );
        assert_eq!(
            r,
            Some(LimitReport {
                key: "nats/acme/rate/1".into(),
                per_second: 1_000.0,
                admitted: 1_000.0,
                demand: 1_500.0,
                connections: 3,
                saturated: true
            })
        );
        let by_bytes = RateLimit::new(None, Some((1 << 20, 1 << 20)));
        let r = LimitReport::new("k".into(), &by_bytes, usage, 3, 1_000_000_000, Demand::Reject);
        assert_eq!(
            r.map(|r| (r.per_second, r.admitted, r.demand)),
            Some((1_048_576.0, 80_000.0, 120_000.0))
        );
    }

    /// Delay: connections held half the time wanted twice what was admitted; held all the time
    /// with nothing admitted (a share of almost nothing), at least their even part.
    #[test]
    fn a_delayed_replica_wants_what_holding_hid() {
        let l = RateLimit::new(Some((1_000, 1_000)), None);
        let delay = Demand::Delay { replicas: 4 };
        let half = Usage {
            admitted: [300, 0],
            refused: [9_999, 0],
            waited_ns: 2 * 500_000_000,
            saturated: true,
        };
        let r = LimitReport::new("k".into(), &l, half, 2, 1_000_000_000, delay).unwrap();
        assert!((r.demand - 600.0).abs() < 1e-6, "{r:?}");
        let starved = Usage {
            admitted: [0, 0],
            refused: [50, 0],
            waited_ns: 1_000_000_000,
            saturated: true,
        };
        let r = LimitReport::new("k".into(), &l, starved, 1, 1_000_000_000, delay).unwrap();
        assert!((r.demand - MAX_HELD * 250.0).abs() < 1e-6, "{r:?}");
        let calm = Usage {
            admitted: [100, 0],
            ..Usage::default()
        };
        let r = LimitReport::new("k".into(), &l, calm, 1, 1_000_000_000, delay).unwrap();
        assert_eq!(r.demand, 100.0);
    }

    #[test]
    fn a_rise_in_demand_counts_once_it_lasts() {
        assert_eq!(steady_demand(None, 120.0), 120.0, "a limit's first report");
        assert_eq!(steady_demand(Some(0.0), 120.0), 0.0, "a burst after an idle report");
        assert_eq!(steady_demand(Some(120.0), 0.0), 0.0, "a stall, at once");
        assert_eq!(steady_demand(Some(90.0), 120.0), 90.0);
        assert_eq!(steady_demand(Some(120.0), 130.0), 120.0, "two high reports in a row");
    }

    #[test]
    fn an_unused_limit_is_not_reported() {
        let l = RateLimit::new(Some((1_000, 1_000)), None);
        assert_eq!(
            LimitReport::new("k".into(), &l, Usage::default(), 0, 1, Demand::Reject),
            None
        );
        assert_eq!(
            LimitReport::new(
                "k".into(),
                &RateLimit::default(),
                Usage::default(),
                5,
                1,
                Demand::Reject
            ),
            None
        );
    }

    #[test]
    fn reads_shares_and_refuses_nonsense() {
        let ok = br#"{"limits":[{"key":"a","share":0.7,"replicas":3},{"key":"b","share":1}]}"#;
        assert_eq!(parse_shares(ok), Ok(vec![("a".into(), 700_000), ("b".into(), PPM)]));
        assert!(parse_shares(br#"{"limits":[{"key":"a","share":1.5}]}"#).is_err());
        assert!(parse_shares(b"503 service unavailable").is_err());
    }
}
