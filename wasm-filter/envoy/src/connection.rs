//! One client connection, whatever the protocol: the Envoy stream context and the retry hook
//! the waiters registry calls. The protocol's state does the work.

use proxy_wasm::traits::{Context, StreamContext};
use proxy_wasm::types::{Action, BufferType, PeerType};
use std::cell::RefCell;
use std::rc::Rc;
use weighstation_core::carry::Plan;
use weighstation_core::source::{Source, Whole};

use crate::buffer::HostBuffer;
use crate::host;
use crate::metrics;
use crate::paused;
use crate::waiters::{self, Retry};

/// What a protocol does with a connection's bytes.
pub trait Protocol: 'static {
    /// Client bytes (carried bytes first, see weighstation_core::carry); Err closes the
    /// connection.
    fn client_data(&mut self, envoy: &mut dyn Source) -> Result<Plan, &'static str>;
    /// Server bytes; Some replaces them.
    fn server_data(&mut self, buf: &mut dyn Source) -> Option<Vec<u8>>;
    /// True once after server bytes resolved what held client bytes were waiting for (the
    /// broker's verdict on the client's credentials, or refusals owed that went out): they are
    /// decided at once.
    fn release_held(&mut self) -> bool {
        false
    }
    /// True once the server's bytes ended the connection (a NATS slow consumer): the filter
    /// closes it.
    fn ended(&self) -> bool {
        false
    }
    /// Gives back everything the connection holds. Safe to call twice.
    fn close(&mut self);
}

/// The protocol state, shared with the waiters registry so a tick can retry it.
struct Shared<P>(RefCell<P>);

impl<P: Protocol> Retry for Shared<P> {
    fn retry(&self) {
        // Busy means this connection is inside its own callback; the next tick retries it.
        let Ok(mut st) = self.0.try_borrow_mut() else { return };
        let applied = match paused::held_buffer() {
            Ok(held) => match st.client_data(&mut Whole(&held)) {
                Ok(plan) => paused::in_retry(plan)
                    .map_err(|s| format!("host refused to rewrite or resume the held buffer: {s:?}")),
                Err(why) => Err(why.to_owned()),
            },
            Err(s) => Err(format!("host refused to read the held buffer: {s:?}")),
        };
        if let Err(why) = applied {
            // The scanner and the bytes no longer agree, or the client asked for it: close
            // the connection (giving back what it holds) rather than guess.
            log::warn!("weighstation: closing connection: {why}");
            st.close();
            let _ = host::close_downstream();
        }
        metrics::flush();
    }
}

pub struct Connection<P> {
    id: u32,
    state: Rc<Shared<P>>,
    /// The broker closed. Envoy only half-closes the client's side and goes on reading it.
    upstream_closed: bool,
}

impl<P: Protocol> Connection<P> {
    pub fn new(context_id: u32, protocol: P) -> Self {
        let state = Rc::new(Shared(RefCell::new(protocol)));
        let handle: Rc<dyn Retry> = state.clone();
        waiters::register(context_id, Rc::downgrade(&handle));
        Connection {
            id: context_id,
            state,
            upstream_closed: false,
        }
    }

    fn close(&self) {
        if let Ok(mut st) = self.state.0.try_borrow_mut() {
            st.close();
        }
        waiters::retry_freed(self.id);
        metrics::flush();
    }
}

impl<P: Protocol> Context for Connection<P> {}

impl<P: Protocol> StreamContext for Connection<P> {
    fn on_downstream_data(&mut self, size: usize, _end_of_stream: bool) -> Action {
        if size == 0 {
            return Action::Continue;
        }
        if self.upstream_closed {
            // Nothing sent now reaches the broker, and a client that goes on sending after its
            // broker closed (one streaming a 2 GiB payload the filter discards) would keep Envoy
            // reading for as long as it likes. The broker's last words were written to the
            // client before its close: closing now loses nothing it had said.
            let _ = host::close_downstream();
            return Action::Pause;
        }
        let Ok(mut st) = self.state.0.try_borrow_mut() else {
            return Action::Pause;
        };
        let mut envoy = HostBuffer::new(BufferType::DownstreamData, size);
        let applied = match st.client_data(&mut envoy) {
            _ if envoy.failed() => Err("host refused to read the buffer".to_owned()),
            Ok(plan) => paused::in_callback(plan).map_err(|s| format!("host refused the buffer: {s:?}")),
            Err(why) => Err(why.to_owned()),
        };
        let action = applied.unwrap_or_else(|why| {
            log::warn!("weighstation: closing connection: {why}");
            st.close();
            let _ = host::close_downstream();
            Action::Pause
        });
        drop(st);
        waiters::retry_freed(self.id);
        metrics::flush();
        action
    }

    fn on_upstream_data(&mut self, size: usize, _end_of_stream: bool) -> Action {
        if size == 0 {
            return Action::Continue;
        }
        let Ok(mut st) = self.state.0.try_borrow_mut() else {
            return Action::Continue;
        };
        let mut server = HostBuffer::new(BufferType::UpstreamData, size);
        let replaced = st.server_data(&mut server);
        let applied = match replaced {
            _ if server.failed() => Err("host refused to read the server's bytes".to_owned()),
            Some(replacement) => host::replace_buffer(BufferType::UpstreamData, &replacement)
                .map_err(|s| format!("host refused the server's bytes: {s:?}")),
            None => Ok(()),
        };
        if let Err(why) = applied {
            log::warn!("weighstation: closing connection: {why}");
            st.close();
            let _ = host::close_downstream();
        } else if st.ended() {
            st.close();
            let _ = host::close_downstream();
        }
        let release = st.release_held();
        drop(st);
        if release {
            // The stream is the effective context, as a retry needs.
            self.state.retry();
        }
        waiters::retry_freed(self.id);
        metrics::flush();
        Action::Continue
    }

    fn on_downstream_close(&mut self, _peer: PeerType) {
        self.close();
    }

    fn on_upstream_close(&mut self, _peer: PeerType) {
        self.close();
        self.upstream_closed = true;
    }
}
