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

/// Scans a read of a direction that is never paused, after the bytes carried from the previous
/// read. `scan` returns its edits and where the last complete unit ends; what follows is carried
/// into the next read (so it is cut from what is forwarded now). Returns the bytes to forward
/// instead of `chunk`, if they differ.
pub(crate) fn scan_carried(
    carry: &mut Vec<u8>,
    chunk: &[u8],
    scan: impl FnOnce(&[u8]) -> (Editor, usize),
) -> Option<Vec<u8>> {
    let carried = !carry.is_empty();
    let owned;
    let data: &[u8] = if carried {
        owned = [std::mem::take(carry).as_slice(), chunk].concat();
        &owned
    } else {
        chunk
    };
    let (edit, cut) = scan(data);
    let cut = cut.min(data.len());
    if let Some(rest) = data.get(cut..).filter(|r| !r.is_empty()) {
        *carry = rest.to_vec();
    }
    match edit.finish(data, cut) {
        Some(out) => Some(out),
        None if carried || cut < data.len() => Some(data.get(..cut).unwrap_or_default().to_vec()),
        None => None,
    }
}
