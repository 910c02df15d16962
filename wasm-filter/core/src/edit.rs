//! Builds a replacement for a buffer from the parts kept, dropped and inserted while scanning.
//! Nothing is allocated until the first edit: an unedited buffer is forwarded as it is.

#[derive(Debug, Default)]
pub(crate) struct Editor {
    out: Option<Vec<u8>>,
    /// Input before this offset has been copied or dropped.
    copied: usize,
}

impl Editor {
    /// Replaces `buf[start..end]` with `with` (`end` may exceed the buffer: the rest is dropped).
    pub(crate) fn replace(&mut self, buf: &[u8], start: usize, end: usize, with: &[u8]) {
        let out = self
            .out
            .get_or_insert_with(|| Vec::with_capacity(buf.len() + with.len()));
        out.extend_from_slice(buf.get(self.copied..start).unwrap_or_default());
        out.extend_from_slice(with);
        self.copied = end.min(buf.len());
    }

    /// Where input offset `pos` lands in the output.
    pub(crate) fn output_offset(&self, pos: usize) -> usize {
        match &self.out {
            Some(out) => out.len() + pos.saturating_sub(self.copied),
            None => pos,
        }
    }

    /// The replacement buffer, if anything was edited.
    pub(crate) fn finish(mut self, buf: &[u8], upto: usize) -> Option<Vec<u8>> {
        let copied = self.copied;
        if let Some(out) = self.out.as_mut() {
            out.extend_from_slice(buf.get(copied..upto).unwrap_or_default());
        }
        self.out
    }
}
