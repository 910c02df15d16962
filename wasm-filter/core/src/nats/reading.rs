//! How the NATS scanners read Envoy's buffer: a control line at a time, by range (see
//! crate::source::ahead_after for how much is fetched with it).

use crate::source::{self, Source};

/// What is read at a control line that follows a large message: the line, and a little more.
pub(crate) const LINE_READ: usize = 256;

/// What to fetch at the control line after a message of `size` bytes.
pub(crate) fn ahead_after(size: usize) -> usize {
    source::ahead_after(size, LINE_READ)
}

/// The control line at `pos`, read by range: what is at hand if the line ends in it (fetching
/// `ahead` bytes when nothing is), the line's whole limit when it does not.
pub(crate) fn line_at(src: &mut dyn Source, pos: usize, ahead: usize, limit: usize) -> &[u8] {
    let len = src.len();
    let more = {
        let w = src.fetch(pos, 1, ahead);
        w.len() < limit && pos + w.len() < len && !w[..w.len().min(limit)].contains(&b'\n')
    };
    if more {
        src.at(pos, limit)
    } else {
        src.fetch(pos, 1, ahead)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Ranges;

    #[test]
    fn a_line_longer_than_the_first_read_is_read_to_its_limit() {
        let buf = [vec![b'x'; 300], b"\r\nrest".to_vec()].concat();
        let mut src = Ranges::new(&buf);
        assert_eq!(line_at(&mut src, 0, LINE_READ, 4096).len(), buf.len());
        assert_eq!(src.reads, 2);
    }

    #[test]
    fn a_line_in_hand_costs_no_read() {
        let mut src = Ranges::new(b"PING\r\nPING\r\n");
        line_at(&mut src, 0, usize::MAX, 4096);
        line_at(&mut src, 6, usize::MAX, 4096);
        assert_eq!(src.reads, 1);
    }
}
