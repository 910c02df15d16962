//! The few host calls whose failure Envoy can legitimately report on the data path (a buffer no
//! longer reachable, a stream already gone). The SDK's wrappers panic on such a status, and a
//! panic traps the VM and every connection on its worker; these return it instead.

use proxy_wasm::types::{BufferType, Status, StreamType};
use std::ptr::null_mut;

#[link(wasm_import_module = "env")]
extern "C" {
    fn proxy_get_buffer_bytes(
        buffer_type: BufferType,
        start: usize,
        max_size: usize,
        return_buffer_data: *mut *mut u8,
        return_buffer_size: *mut usize,
    ) -> Status;
    fn proxy_set_buffer_bytes(
        buffer_type: BufferType,
        start: usize,
        size: usize,
        buffer_data: *const u8,
        buffer_size: usize,
    ) -> Status;
    fn proxy_continue_stream(stream_type: StreamType) -> Status;
    fn proxy_close_stream(stream_type: StreamType) -> Status;
}

fn ok(status: Status) -> Result<(), Status> {
    match status {
        Status::Ok => Ok(()),
        other => Err(other),
    }
}

/// `len` bytes of a buffer from `start` (fewer where it ends); Ok(empty) when the host has none.
pub fn get_range(buffer_type: BufferType, start: usize, len: usize) -> Result<Vec<u8>, Status> {
    let mut data: *mut u8 = null_mut();
    let mut size: usize = 0;
    // SAFETY: the host writes a pointer it allocated through this module's allocator (as the
    // SDK's get_buffer relies on) and its size; ownership passes to the Vec.
    unsafe {
        match proxy_get_buffer_bytes(buffer_type, start, len, &mut data, &mut size) {
            Status::Ok if !data.is_null() => Ok(Vec::from_raw_parts(data, size, size)),
            Status::Ok | Status::NotFound => Ok(Vec::new()),
            other => Err(other),
        }
    }
}

/// The whole buffer; Ok(empty) when the host has none to give.
pub fn get_buffer(buffer_type: BufferType) -> Result<Vec<u8>, Status> {
    get_range(buffer_type, 0, usize::MAX)
}

/// Envoy replaces a whole network buffer only when asked for at least its length (a shorter
/// length is refused), so ask for more than any buffer holds.
const WHOLE_BUFFER: usize = i32::MAX as usize;

/// Replaces the whole buffer with `value`.
pub fn replace_buffer(buffer_type: BufferType, value: &[u8]) -> Result<(), Status> {
    // SAFETY: the host only reads `value.len()` bytes from `value`.
    ok(unsafe { proxy_set_buffer_bytes(buffer_type, 0, WHOLE_BUFFER, value.as_ptr(), value.len()) })
}

pub fn resume_downstream() -> Result<(), Status> {
    // SAFETY: a plain host call with no pointers.
    ok(unsafe { proxy_continue_stream(StreamType::Downstream) })
}

pub fn close_downstream() -> Result<(), Status> {
    // SAFETY: a plain host call with no pointers.
    ok(unsafe { proxy_close_stream(StreamType::Downstream) })
}
