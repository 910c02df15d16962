//! A proxy-wasm network filter that does nothing: every connection and every read and write
//! continues at once. `make bench-cpu` runs it ahead of tcp_proxy, on its own listeners, to
//! measure the least any Wasm filter costs a message — the VM calls, the SDK's dispatch by
//! context id — apart from what weighstation's filter does with the bytes. It goes through the
//! same SDK (proxy-wasm) and runtime (V8) as that filter, so the two differ only in the work.

use proxy_wasm::traits::{Context, RootContext, StreamContext};
use proxy_wasm::types::ContextType;

proxy_wasm::main! {{
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root) });
}}

struct Root;

impl Context for Root {}

impl RootContext for Root {
    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::StreamContext)
    }

    fn create_stream_context(&self, _context_id: u32) -> Option<Box<dyn StreamContext>> {
        Some(Box::new(Connection))
    }
}

/// One client connection. StreamContext's defaults continue on every event.
struct Connection;

impl Context for Connection {}

impl StreamContext for Connection {}
