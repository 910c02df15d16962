//! The ABI `weighstation impact` (control-plane/internal/impact) calls: the host copies a JSON
//! [`Trace`] into memory it got from `impact_alloc`, calls `impact_replay`, and reads the JSON
//! outcomes (or `{"error": …}`) at the returned pointer and length, which it gives back with
//! `impact_free`. The replay itself is weighstation_core::impact, the filter's own limiter.

use weighstation_core::impact::{replay, Trace};

/// Memory for `len` bytes of input.
#[no_mangle]
pub extern "C" fn impact_alloc(len: u32) -> *mut u8 {
    let mut buf = Vec::<u8>::with_capacity(len as usize);
    let ptr = buf.as_mut_ptr();
    std::mem::forget(buf);
    ptr
}

/// Gives back memory from `impact_alloc` or an answer.
///
/// # Safety
/// `ptr` and `len` must be what `impact_alloc` or `impact_replay` returned, given back once.
#[no_mangle]
pub unsafe extern "C" fn impact_free(ptr: *mut u8, len: u32) {
    drop(Vec::from_raw_parts(ptr, 0, len as usize));
}

/// Replays the trace at `ptr`; returns the answer's pointer (high 32 bits) and length.
///
/// # Safety
/// `ptr` must hold `len` bytes the host wrote into memory from `impact_alloc(len)`; that memory
/// is freed here.
#[no_mangle]
pub unsafe extern "C" fn impact_replay(ptr: *mut u8, len: u32) -> u64 {
    let input = Vec::from_raw_parts(ptr, len as usize, len as usize);
    let answer = match serde_json::from_slice::<Trace>(&input) {
        Ok(trace) => serde_json::to_vec(&replay(&trace)),
        Err(e) => serde_json::to_vec(&serde_json::json!({ "error": e.to_string() })),
    }
    .unwrap_or_default();
    let mut answer = answer.into_boxed_slice();
    let (out, out_len) = (answer.as_mut_ptr(), answer.len());
    std::mem::forget(answer);
    ((out as u64) << 32) | out_len as u64
}
