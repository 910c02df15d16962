//! Forwarding while a message is held, shared by the protocols. Envoy keeps a paused filter's
//! buffer reachable (and clears it on Continue), and `resume_downstream` passes it on to the
//! next filter without asking this one again. So while anything is held the filter never
//! returns Continue: what was admitted ahead of the held message is forwarded by rewriting the
//! buffer to it and resuming, and the bytes behind it are carried by the filter — up to the
//! protocol's LIMIT, beyond which they stay in Envoy's buffer, which fills up to
//! per_connection_buffer_limit_bytes and then pushes back on the client through TCP.
//!
//! Forwarding always empties Envoy's buffer (it forwards all of it), and Envoy then reads up to
//! its limit again. So under sustained overload, once LIMIT is reached, the admitted prefix goes
//! out in steps of about one Envoy buffer: that buffer (a listener's
//! per_connection_buffer_limit_bytes, 32 KiB by default) sets how bursty a held connection's
//! forwarding is, and LIMIT how much the filter itself keeps per connection.

use proxy_wasm::types::{Action, BufferType, Status};

use crate::host;
use weighstation_core::scan::Outcome;

/// What to do with Envoy's buffer after a scan.
pub enum Plan {
    /// Forward the buffer (replaced by this first, if given) and leave the paused state.
    Forward(Option<Vec<u8>>),
    /// Stay paused, with Envoy's buffer replaced by `buffer` if given; `resume` forwards it.
    Hold { buffer: Option<Vec<u8>>, resume: bool },
}

/// Held bytes that precede Envoy's buffer, at most LIMIT of them.
#[derive(Default)]
pub struct Carry<const LIMIT: usize>(Vec<u8>);

impl<const LIMIT: usize> Carry<LIMIT> {
    /// Runs `scan` over the carried bytes followed by Envoy's. Also returns how many bytes of a
    /// held buffer the plan forwards: the scanner must be told, as its next buffer starts there.
    pub fn scan<E>(
        &mut self,
        envoy: &[u8],
        scan: impl FnOnce(&[u8]) -> Result<Outcome, E>,
    ) -> Result<(Plan, usize), E> {
        let input: Vec<u8>;
        let buf: &[u8] = if self.0.is_empty() {
            envoy
        } else {
            input = [std::mem::take(&mut self.0).as_slice(), envoy].concat();
            &input
        };
        let outcome = scan(buf)?;
        let changed = outcome.replace.is_some() || buf.len() != envoy.len();
        let output = outcome.replace.as_deref().unwrap_or(buf);
        if !outcome.hold {
            return Ok((Plan::Forward(changed.then(|| output.to_vec())), 0));
        }
        let (ahead, behind) = output.split_at(outcome.decided.min(output.len()));
        if behind.len() > LIMIT {
            return Ok((
                Plan::Hold {
                    buffer: changed.then(|| output.to_vec()),
                    resume: false,
                },
                0,
            ));
        }
        self.0 = behind.to_vec();
        Ok((
            Plan::Hold {
                buffer: Some(ahead.to_vec()),
                resume: !ahead.is_empty(),
            },
            ahead.len(),
        ))
    }
}

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
