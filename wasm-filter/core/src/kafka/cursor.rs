//! A bounds-checked reader over one Kafka message. Every read returns None past the end, so a
//! truncated or hostile frame ends parsing instead of panicking.

pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }

    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    /// Everything was read.
    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let out = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(out)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.bytes(N)?.try_into().ok()
    }

    pub(crate) fn i16(&mut self) -> Option<i16> {
        self.array().map(i16::from_be_bytes)
    }

    pub(crate) fn i32(&mut self) -> Option<i32> {
        self.array().map(i32::from_be_bytes)
    }

    /// Unsigned LEB128 varint, at most 5 bytes (a 32-bit value).
    pub(crate) fn uvarint(&mut self) -> Option<u32> {
        let mut value: u32 = 0;
        for i in 0..5 {
            let b = *self.bytes(1)?.first()?;
            value |= u32::from(b & 0x7f).checked_shl(7 * i)?;
            if b & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }

    /// A nullable string (int16 length, -1 = null).
    pub(crate) fn nullable_string(&mut self) -> Option<Option<&'a [u8]>> {
        let len = self.i16()?;
        if len < 0 {
            return Some(None);
        }
        self.bytes(usize::try_from(len).ok()?).map(Some)
    }

    /// A compact nullable string or bytes (uvarint length + 1, 0 = null).
    pub(crate) fn compact_nullable(&mut self) -> Option<Option<&'a [u8]>> {
        let n = self.uvarint()?;
        if n == 0 {
            return Some(None);
        }
        self.bytes(usize::try_from(n - 1).ok()?).map(Some)
    }

    /// A nullable string in a flexible (compact) or classic encoding.
    pub(crate) fn string_field(&mut self, compact: bool) -> Option<Option<&'a [u8]>> {
        if compact {
            self.compact_nullable()
        } else {
            self.nullable_string()
        }
    }

    /// Nullable bytes (int32 length, -1 = null).
    pub(crate) fn nullable_bytes(&mut self) -> Option<Option<&'a [u8]>> {
        let len = self.i32()?;
        if len < 0 {
            return Some(None);
        }
        self.bytes(usize::try_from(len).ok()?).map(Some)
    }

    /// A cursor after the header of a whole response frame: its size prefix matches its length;
    /// the header's tagged fields are read when `flexible`. None: not whole, or cut.
    pub(crate) fn after_response_header(frame: &'a [u8], flexible: bool) -> Option<Cursor<'a>> {
        let mut c = Cursor::new(frame);
        if usize::try_from(c.i32()?).ok()? != frame.len() - 4 {
            return None;
        }
        c.i32()?; // correlation id
        if flexible {
            c.skip_tagged_fields()?;
        }
        Some(c)
    }

    /// Array length: int32 (-1 = null, read as 0) or compact uvarint (n + 1).
    pub(crate) fn array_len(&mut self, compact: bool) -> Option<usize> {
        if compact {
            let n = self.uvarint()?;
            return usize::try_from(n.saturating_sub(1)).ok();
        }
        let n = self.i32()?;
        usize::try_from(n.max(0)).ok()
    }

    /// Skips a tagged-field section of a flexible version.
    pub(crate) fn skip_tagged_fields(&mut self) -> Option<()> {
        let count = self.uvarint()?;
        for _ in 0..count {
            self.uvarint()?;
            let size = self.uvarint()?;
            self.bytes(usize::try_from(size).ok()?)?;
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_varints_and_rejects_overlong_ones() {
        assert_eq!(Cursor::new(&[0x00]).uvarint(), Some(0));
        assert_eq!(Cursor::new(&[0xac, 0x02]).uvarint(), Some(300));
        assert_eq!(Cursor::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]).uvarint(), None);
        assert_eq!(Cursor::new(&[0x80]).uvarint(), None, "truncated");
    }

    #[test]
    fn reads_past_the_end_return_none() {
        let mut c = Cursor::new(&[0, 5, b'a']);
        assert_eq!(c.nullable_string(), None);
        let mut c = Cursor::new(&[0xff, 0xff]);
        assert_eq!(c.nullable_string(), Some(None));
    }
}
