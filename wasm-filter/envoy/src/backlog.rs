//! A client the gateway owes too much (weighstation_core::backlog): held while it is past the
//! bound, retried when the deadline comes, closed as a slow consumer if it took nothing by then.

use weighstation_core::backlog::Standing;
use weighstation_core::config::Protocol;
use weighstation_core::metrics::{connections_closed_metric_name, CloseReason};

use crate::tenancy::Attribution;
use crate::{metrics, waiters};

/// Why a slow consumer's connection ends (the glue's close log says it).
pub const SLOW_CONSUMER: &str = "slow consumer: it took nothing the gateway sent it for the deadline";

/// Whether this connection waits in the worker's wait list for its backlog.
#[derive(Debug, Default)]
pub struct BacklogWait {
    waiting: bool,
}

impl BacklogWait {
    /// Applies where the client stands after a scan of its bytes. `held` says whether the scan
    /// held anything (for its backlog or another reason). Err closes the connection.
    pub fn apply(
        &mut self,
        standing: Standing,
        held: bool,
        me: u32,
        who: &Attribution,
        client: &[u8],
        protocol: Protocol,
    ) -> Result<(), &'static str> {
        let tenant = who.current().map(|w| w.name()).unwrap_or_default();
        match standing {
            Standing::Open => {
                // Another hold re-armed the same entry during the scan: it is that hold's now.
                if std::mem::take(&mut self.waiting) && !held {
                    waiters::release(me);
                }
                Ok(())
            }
            Standing::Held { until } | Standing::Owing { until } => {
                self.waiting = true;
                waiters::hold(me, tenant, until, until);
                Ok(())
            }
            Standing::SlowConsumer => {
                log::warn!(
                    "weighstation: closing {} connection of tenant {tenant}, client {}: {SLOW_CONSUMER}",
                    protocol.as_str(),
                    String::from_utf8_lossy(client)
                );
                metrics::count(
                    &connections_closed_metric_name(protocol, CloseReason::SlowConsumer, tenant),
                    1,
                );
                Err(SLOW_CONSUMER)
            }
        }
    }
}
