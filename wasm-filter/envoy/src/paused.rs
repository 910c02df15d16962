//! Forwarding while a message is held, shared by the protocols. Envoy keeps a paused filter's
//! buffer reachable (and clears it on Continue), and `resume_downstream` passes it on to the
//! next filter without asking this one again. So while anything is held the filter never
//! returns Continue: it carries the bytes behind the held message itself and applies the
//! core's [`Plan`] (see weighstation_core::carry) to Envoy's buffer, rewriting it to what was
//! admitted ahead of the held message and resuming.

use proxy_wasm::types::{Action, BufferType, Status};
use weighstation_core::carry::Plan;

use crate::host;

/// Applies a plan to the held buffer; a Forward resumes only when `resume_forward` (a retry: the
/// connection was paused). Err if the host refused: the caller closes the connection.
fn apply(plan: Plan, resume_forward: bool) -> Result<bool, Status> {
    let (buffer, resume, paused) = match plan {
        Plan::Forward(buffer) => (buffer, resume_forward, false),
        Plan::Hold { buffer, resume } => (buffer, resume, true),
    };
    if let Some(b) = buffer {
        host::replace_buffer(BufferType::DownstreamData, &b)?;
    }
    if resume {
        // Runs after this callback: forwards the buffer while the connection stays paused
        // (so its buffer stays reachable for retries).
        host::resume_downstream()?;
    }
    Ok(paused)
}

/// Applies a plan from within on_downstream_data.
pub fn in_callback(plan: Plan) -> Result<Action, Status> {
    Ok(if apply(plan, false)? {
        Action::Pause
    } else {
        Action::Continue
    })
}

/// Reads the held buffer in a retry (the stream is the effective context).
pub fn held_buffer() -> Result<Vec<u8>, Status> {
    host::get_buffer(BufferType::DownstreamData)
}

/// Applies a plan from a retry: a Forward resumes too (the connection was paused).
pub fn in_retry(plan: Plan) -> Result<(), Status> {
    apply(plan, true).map(|_| ())
}
