//! Builds a replacement for a buffer from the edits made while scanning it. The edits are kept
//! as ranges and the buffer is read whole only when the replacement is built: an unedited buffer
//! is forwarded as it is, without a byte of it read beyond the headers the scanner asked for.

use crate::source::{Source, Whole};

#[derive(Debug, Default)]
pub(crate) struct Editor {
    /// (start, end, bytes in place of start..end), in order and not overlapping.
    edits: Vec<(usize, usize, Vec<u8>)>,
    /// Output length minus input length, over the edits so far.
    growth: isize,
}

impl Editor {
    /// Replaces `start..end` of a buffer of `len` bytes with `with` (`end` may exceed the
    /// buffer: the rest is dropped).
    pub(crate) fn replace(&mut self, len: usize, start: usize, end: usize, with: &[u8]) {
        let end = end.min(len).max(start);
        self.growth += with.len() as isize - (end - start) as isize;
        self.edits.push((start, end, with.to_vec()));
    }

    /// Where input offset `pos` (at or after every edit) lands in the output.
    pub(crate) fn output_offset(&self, pos: usize) -> usize {
        pos.saturating_add_signed(self.growth)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.edits.is_empty()
    }

    /// The replacement for the buffer's first `upto` bytes, if anything was edited.
    pub(crate) fn finish(self, src: &mut dyn Source, upto: usize) -> Option<Vec<u8>> {
        if self.edits.is_empty() {
            return None;
        }
        let buf = src.all();
        let upto = upto.min(buf.len());
        let mut out = Vec::with_capacity(self.output_offset(upto));
        let mut copied = 0;
        for (start, end, with) in &self.edits {
            out.extend_from_slice(buf.get(copied..*start).unwrap_or_default());
            out.extend_from_slice(with);
            copied = *end;
        }
        out.extend_from_slice(buf.get(copied..upto).unwrap_or_default());
        Some(out)
    }
}

/// Scans a read of a direction that is never paused, after the bytes carried from the previous
/// read. `scan` returns its edits and where the last complete unit ends; what follows is carried
/// into the next read (so it is cut from what is forwarded now). Returns the bytes to forward
/// instead of the read, if they differ.
pub(crate) fn scan_carried(
    carry: &mut Vec<u8>,
    src: &mut dyn Source,
    scan: impl FnOnce(&mut dyn Source) -> (Editor, usize),
) -> Option<Vec<u8>> {
    if carry.is_empty() {
        return cut_carried(carry, src, scan, false);
    }
    // Rare: a control line or frame header split across reads.
    let joined = [std::mem::take(carry).as_slice(), src.all()].concat();
    cut_carried(carry, &mut Whole(&joined), scan, true)
}

fn cut_carried(
    carry: &mut Vec<u8>,
    data: &mut dyn Source,
    scan: impl FnOnce(&mut dyn Source) -> (Editor, usize),
    carried: bool,
) -> Option<Vec<u8>> {
    let len = data.len();
    let (edit, cut) = scan(data);
    let cut = cut.min(len);
    if cut < len {
        *carry = data.at(cut, len - cut).to_vec();
    }
    if !edit.is_empty() {
        return edit.finish(data, cut);
    }
    (carried || cut < len).then(|| data.at(0, cut).get(..cut).unwrap_or_default().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Ranges;

    #[test]
    fn edits_build_the_replacement_in_order() {
        let input = b"0123456789";
        let mut e = Editor::default();
        e.replace(input.len(), 1, 3, b"ab");
        e.replace(input.len(), 5, 5, b"+");
        e.replace(input.len(), 8, 99, b"");
        assert_eq!(e.output_offset(10), 9);
        assert_eq!(
            e.finish(&mut Ranges::new(input), 10).as_deref(),
            Some(&b"0ab34+567"[..])
        );
    }

    #[test]
    fn no_edit_reads_nothing() {
        let mut src = Ranges::new(b"0123");
        assert_eq!(Editor::default().finish(&mut src, 4), None);
        assert_eq!(src.served, 0);
    }
}
