//! Writes the responses of refused admin requests, field by field, in the classic or the
//! flexible encoding of their version.

use crate::kafka::encode::{array_len, string, uvarint};

pub(super) struct Writer {
    out: Vec<u8>,
    flexible: bool,
}

impl Writer {
    /// A response to `correlation_id`: header v1 (with tagged fields) when `flexible`.
    pub(super) fn response(correlation_id: i32, flexible: bool) -> Writer {
        let mut out = Vec::with_capacity(128);
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&correlation_id.to_be_bytes());
        let mut w = Writer { out, flexible };
        w.tags();
        w
    }

    pub(super) fn i8(&mut self, v: i8) -> &mut Self {
        self.out.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub(super) fn i16(&mut self, v: i16) -> &mut Self {
        self.out.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub(super) fn i32(&mut self, v: i32) -> &mut Self {
        self.out.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub(super) fn i64(&mut self, v: i64) -> &mut Self {
        self.out.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub(super) fn string(&mut self, s: &[u8]) -> &mut Self {
        string(&mut self.out, s, self.flexible);
        self
    }

    pub(super) fn nullable_string(&mut self, s: Option<&[u8]>) -> &mut Self {
        match s {
            Some(s) => self.string(s),
            None if self.flexible => {
                self.out.push(0);
                self
            }
            None => self.i16(-1),
        }
    }

    /// Bytes copied as they are (a topic id).
    pub(super) fn raw(&mut self, b: &[u8]) -> &mut Self {
        self.out.extend_from_slice(b);
        self
    }

    /// Empty BYTES: encoded as an empty array's length.
    pub(super) fn no_bytes(&mut self) -> &mut Self {
        self.array(0)
    }

    pub(super) fn array(&mut self, n: usize) -> &mut Self {
        array_len(&mut self.out, n, self.flexible);
        self
    }

    /// An empty tagged-field section, in flexible versions.
    pub(super) fn tags(&mut self) -> &mut Self {
        if self.flexible {
            uvarint(&mut self.out, 0);
        }
        self
    }

    pub(super) fn finish(mut self) -> Vec<u8> {
        let size = (self.out.len() - 4) as i32;
        self.out[..4].copy_from_slice(&size.to_be_bytes());
        self.out
    }
}
