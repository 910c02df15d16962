//! Envoy's buffer of one read, served to the core's scanners by range (see
//! weighstation_core::source): each miss is one `proxy_get_buffer_bytes` call for the range the
//! scanner asked for, so payloads it steps over are never copied into the VM.

use proxy_wasm::types::BufferType;
use weighstation_core::source::Source;

use crate::host;

pub struct HostBuffer {
    buffer_type: BufferType,
    len: usize,
    /// The last range read: its bytes and where they start.
    start: usize,
    bytes: Vec<u8>,
    failed: bool,
}

impl HostBuffer {
    /// The buffer of this callback, of the length Envoy announced.
    pub fn new(buffer_type: BufferType, len: usize) -> Self {
        HostBuffer {
            buffer_type,
            len,
            start: 0,
            bytes: Vec::new(),
            failed: false,
        }
    }
}

impl Source for HostBuffer {
    fn len(&self) -> usize {
        self.len
    }

    fn fetch(&mut self, start: usize, want: usize, ahead: usize) -> &[u8] {
        let end = start.saturating_add(want).min(self.len);
        if start >= end {
            return &[];
        }
        let cached = start >= self.start && end <= self.start + self.bytes.len();
        if !cached {
            let fetch = want.max(ahead).min(self.len - start);
            match host::get_range(self.buffer_type, start, fetch) {
                Ok(bytes) => {
                    self.start = start;
                    self.bytes = bytes;
                }
                Err(_) => {
                    self.failed = true;
                    self.bytes.clear();
                    return &[];
                }
            }
        }
        self.bytes.get(start - self.start..).unwrap_or_default()
    }

    fn failed(&self) -> bool {
        self.failed
    }
}
