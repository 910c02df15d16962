//! One read of Envoy's buffer, served by range. Weighing a message means reading its header, not
//! its payload: the scanners ask for the bytes at the offsets the protocol gives (a control line,
//! a frame header) and step over the rest, so what the filter copies into the VM does not grow
//! with the messages. Envoy's `proxy_get_buffer_bytes` takes a start and a length; the glue's
//! source asks it for ranges, [`Whole`] serves bytes already at hand, and [`Ranges`] is the model
//! the tests and fuzz targets scan with.

/// Messages up to this size are read through: see [`ahead_after`].
pub const READ_THROUGH_MESSAGE: usize = 32 << 10;

/// What to fetch at the next header after a message of `last_size` bytes, when the header itself
/// takes `header` bytes. A host read costs about what Envoy's call into the VM for a read costs
/// (Envoy allocates its answer inside the VM, a second call in), and the bytes it copies next to
/// nothing (measured: docs/architecture.md). So, while messages fit a read, the first header a
/// read needs is fetched with the rest of the buffer, and the headers behind it come from that
/// copy: one host read per read at most. Messages larger than that have about one header per
/// read: it is fetched alone, and their payloads are never copied.
pub fn ahead_after(last_size: usize, header: usize) -> usize {
    if last_size > READ_THROUGH_MESSAGE {
        header
    } else {
        usize::MAX
    }
}

/// A buffer the scanners read by range.
pub trait Source {
    /// The buffer's length.
    fn len(&self) -> usize;

    /// The bytes from `start`: at least `want` of them (fewer only where the buffer ends), and
    /// possibly more that were already at hand; when they are not, `ahead` bytes are fetched
    /// (a scanner that expects to read on asks for more at once). Empty when `start` is at or
    /// past the end, or the host refused to serve them (the glue then closes the connection:
    /// see [`Source::failed`]).
    fn fetch(&mut self, start: usize, want: usize, ahead: usize) -> &[u8];

    /// At least `want` bytes from `start`, as [`Source::fetch`].
    fn at(&mut self, start: usize, want: usize) -> &[u8] {
        self.fetch(start, want, want)
    }

    /// The host refused a read: what the scanner saw is not the buffer.
    fn failed(&self) -> bool {
        false
    }

    /// Every byte: for the rare paths that rebuild the buffer (an edit, a hold).
    fn all(&mut self) -> &[u8] {
        let n = self.len();
        self.at(0, n)
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Bytes already in the VM (carried bytes joined with a read, a held buffer on retry).
#[derive(Debug, Clone, Copy)]
pub struct Whole<'a>(pub &'a [u8]);

impl Source for Whole<'_> {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn fetch(&mut self, start: usize, _want: usize, _ahead: usize) -> &[u8] {
        self.0.get(start..).unwrap_or_default()
    }
}

/// A range of another source, addressed from its own start: a frame's body. Its length is the
/// range's, which may run past what the source holds (a frame still arriving): reads there come
/// back short.
pub struct Window<'s> {
    src: &'s mut dyn Source,
    start: usize,
    len: usize,
}

impl<'s> Window<'s> {
    pub fn new(src: &'s mut dyn Source, start: usize, len: usize) -> Self {
        Window { src, start, len }
    }
}

impl Source for Window<'_> {
    fn len(&self) -> usize {
        self.len
    }

    fn fetch(&mut self, start: usize, want: usize, ahead: usize) -> &[u8] {
        let Some(left) = self.len.checked_sub(start).filter(|&l| l > 0) else {
            return &[];
        };
        let got = self.src.fetch(self.start + start, want.min(left), ahead.min(left));
        &got[..got.len().min(left)]
    }

    fn failed(&self) -> bool {
        self.src.failed()
    }
}

/// A model of Envoy's buffer as the glue reads it, for tests and fuzzing: a read within the
/// last range fetched is served from it, any other fetches exactly the range asked for (no more,
/// so a scanner that uses bytes it did not ask for sees the buffer end early and is caught). It
/// counts what it fetched, as the host would copy it into the VM.
#[derive(Debug)]
pub struct Ranges<'a> {
    buf: &'a [u8],
    /// The last range fetched.
    cached: std::ops::Range<usize>,
    /// Bytes fetched, summed over every fetch.
    pub served: usize,
    /// Fetches: host calls.
    pub reads: usize,
}

impl<'a> Ranges<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Ranges {
            buf,
            cached: 0..0,
            served: 0,
            reads: 0,
        }
    }
}

impl Source for Ranges<'_> {
    fn len(&self) -> usize {
        self.buf.len()
    }

    fn fetch(&mut self, start: usize, want: usize, ahead: usize) -> &[u8] {
        let end = start.saturating_add(want).min(self.buf.len());
        if start >= end {
            return &[];
        }
        if !(self.cached.start <= start && end <= self.cached.end) {
            self.cached = start..start.saturating_add(want.max(ahead)).min(self.buf.len());
            self.served += self.cached.len();
            self.reads += 1;
        }
        &self.buf[start..self.cached.end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_serve_what_is_asked_and_count_it() {
        let mut r = Ranges::new(b"PUB a 3\r\nabc\r\n");
        assert_eq!(r.at(0, 9), b"PUB a 3\r\n");
        assert_eq!(r.at(4, 1), b"a 3\r\n", "served from the range fetched");
        assert_eq!(r.at(12, 100), b"\r\n");
        assert_eq!(r.at(20, 1), b"");
        assert_eq!((r.served, r.reads), (11, 2));
        assert_eq!(r.all(), b"PUB a 3\r\nabc\r\n");
    }

    #[test]
    fn a_window_is_addressed_from_its_start_and_may_run_past_the_source() {
        let mut r = Ranges::new(b"....body");
        let mut w = Window::new(&mut r, 4, 10);
        assert_eq!(w.len(), 10);
        assert_eq!(w.at(1, 3), b"ody");
        assert_eq!(w.at(2, 8), b"dy", "short: the rest has not arrived");
        assert_eq!(w.at(10, 1), b"");
    }

    #[test]
    fn whole_serves_everything_from_start() {
        let mut w = Whole(b"abc");
        assert_eq!(w.at(1, 0), b"bc");
        assert!(!w.failed());
    }
}
