//! Produce request bodies, versions 3 to 12 (v9+ flexible). v13 names topics by id; the glue
//! caps the Produce version it advertises (ApiVersions) to what is parsed here.

use crate::source::Source;

pub const MIN_PRODUCE_VERSION: i16 = 3;
pub const MAX_PRODUCE_VERSION: i16 = 12;
use super::FIRST_FLEXIBLE_PRODUCE as FIRST_FLEXIBLE_VERSION;

/// RecordBatch v2 header: base offset (8) and batch length (4) frame the batch; the record count
/// is the int32 at offset 57; magic is the byte at offset 16, followed by the CRC-32C of the rest.
const BATCH_FRAMING: usize = 12;
const BATCH_MAGIC_OFFSET: usize = 16;
const BATCH_CRC_OFFSET: usize = 17;
const BATCH_PRODUCER_ID_OFFSET: usize = 43;
const BATCH_BASE_SEQUENCE_OFFSET: usize = 53;
const BATCH_RECORDS_OFFSET: usize = 57;
pub(crate) const BATCH_HEADER_LEN: usize = 61;

/// One partition's record set in a Produce request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionBatch<'a> {
    pub topic: &'a [u8],
    /// Where the topic's name starts in the body.
    pub topic_at: usize,
    pub partition: i32,
    /// Size of the record set as sent (Kafka's max.message.bytes applies to one batch).
    pub bytes: usize,
    /// The largest single batch in the record set.
    pub largest_batch: usize,
    pub records: u64,
    /// The batches' CRCs (each covers everything after it: producer id, sequence, records),
    /// combined: a retry of the same batches carries the same value.
    pub crc: u32,
    /// The first batch's producer id and base sequence: -1 unless the producer is idempotent.
    pub producer_id: i64,
    pub base_sequence: i32,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProduceSummary {
    pub acks: i16,
    pub partitions: u32,
    pub records: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProduceError {
    UnsupportedVersion(i16),
    Truncated,
    /// A record batch whose magic is not 2 (message format v0/v1 is gone since Kafka 4.0).
    BadBatch,
    /// A header the walk needs has not arrived yet (the body is longer than what Envoy holds).
    NotYet,
}

/// What is fetched at a time while the walk reads the small fields between record sets.
const WALK_AHEAD: usize = 256;

/// Reads a Produce body by range: fields are copied out a few bytes at a time and record sets
/// are stepped over, so only the headers are ever fetched.
struct Walk<'s> {
    body: &'s mut dyn Source,
    pos: usize,
}

impl Walk<'_> {
    /// `n` bytes from the walk's position: Truncated past the body's end, NotYet past what is
    /// at hand.
    fn take<const N: usize>(&mut self) -> Result<[u8; N], ProduceError> {
        let end = self.pos.checked_add(N).ok_or(ProduceError::Truncated)?;
        if end > self.body.len() {
            return Err(ProduceError::Truncated);
        }
        let got = self.body.fetch(self.pos, N, WALK_AHEAD);
        let out = got
            .get(..N)
            .and_then(|b| b.try_into().ok())
            .ok_or(ProduceError::NotYet)?;
        self.pos = end;
        Ok(out)
    }

    fn skip(&mut self, n: usize) -> Result<(), ProduceError> {
        let end = self.pos.checked_add(n).ok_or(ProduceError::Truncated)?;
        if end > self.body.len() {
            return Err(ProduceError::Truncated);
        }
        self.pos = end;
        Ok(())
    }

    fn i16(&mut self) -> Result<i16, ProduceError> {
        self.take().map(i16::from_be_bytes)
    }

    fn i32(&mut self) -> Result<i32, ProduceError> {
        self.take().map(i32::from_be_bytes)
    }

    /// Unsigned LEB128 varint, at most 5 bytes (a 32-bit value).
    fn uvarint(&mut self) -> Result<u32, ProduceError> {
        let mut value: u32 = 0;
        for i in 0..5 {
            let [b] = self.take::<1>()?;
            value |= u32::from(b & 0x7f).checked_shl(7 * i).ok_or(ProduceError::Truncated)?;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(ProduceError::Truncated)
    }

    /// A length-prefixed field (nullable string or bytes, classic or compact), stepped over:
    /// where it starts and its length (0 for null).
    fn field(&mut self, flexible: bool, bytes: bool) -> Result<(usize, usize), ProduceError> {
        let len = match (flexible, bytes) {
            (true, _) => usize::try_from(self.uvarint()?).map_or(0, |n| n.saturating_sub(1)),
            (false, false) => usize::try_from(self.i16()?).unwrap_or(0),
            (false, true) => usize::try_from(self.i32()?).unwrap_or(0),
        };
        let at = self.pos;
        self.skip(len)?;
        Ok((at, len))
    }

    fn array_len(&mut self, flexible: bool) -> Result<usize, ProduceError> {
        if flexible {
            return Ok(usize::try_from(self.uvarint()?).map_or(0, |n| n.saturating_sub(1)));
        }
        Ok(usize::try_from(self.i32()?.max(0)).unwrap_or(0))
    }

    fn skip_tagged_fields(&mut self) -> Result<(), ProduceError> {
        for _ in 0..self.uvarint()? {
            self.uvarint()?;
            let size = self.uvarint()?;
            self.skip(usize::try_from(size).map_err(|_| ProduceError::Truncated)?)?;
        }
        Ok(())
    }
}

/// Walks a Produce request body (after the request header), calling `visit` once per partition
/// with the topic's name copied into `topic`. Only headers are read: the body's length may
/// exceed what the source holds (a request still arriving) as long as every header the walk
/// needs is there, else NotYet.
pub fn visit_produce(
    body: &mut dyn Source,
    version: i16,
    topic: &mut Vec<u8>,
    mut visit: impl FnMut(&PartitionBatch<'_>),
) -> Result<ProduceSummary, ProduceError> {
    if !(MIN_PRODUCE_VERSION..=MAX_PRODUCE_VERSION).contains(&version) {
        return Err(ProduceError::UnsupportedVersion(version));
    }
    let flexible = version >= FIRST_FLEXIBLE_VERSION;
    let mut c = Walk { body, pos: 0 };
    c.field(flexible, false)?; // transactional id
    let mut summary = ProduceSummary {
        acks: c.i16()?,
        ..ProduceSummary::default()
    };
    c.i32()?; // timeout_ms
    let topics = c.array_len(flexible)?;
    for t in 0..topics {
        let (topic_at, topic_len) = c.field(flexible, false)?;
        topic.clear();
        let name = c.body.at(topic_at, topic_len);
        topic.extend_from_slice(name.get(..topic_len).ok_or(ProduceError::NotYet)?);
        let partitions = c.array_len(flexible)?;
        for p in 0..partitions {
            let partition = c.i32()?;
            let (at, len) = c.field(flexible, true)?;
            let RecordSet {
                count,
                largest,
                crc,
                producer_id,
                base_sequence,
            } = count_records(&mut c, at, len)?;
            // The last partition's tagged fields end the request: nothing after them is read.
            let last = t + 1 == topics && p + 1 == partitions;
            if flexible && !last {
                c.skip_tagged_fields()?;
            }
            summary.partitions += 1;
            summary.records += count;
            summary.bytes += len as u64;
            visit(&PartitionBatch {
                topic,
                topic_at,
                partition,
                bytes: len,
                largest_batch: largest,
                records: count,
                crc,
                producer_id,
                base_sequence,
            });
        }
        if flexible && t + 1 < topics {
            c.skip_tagged_fields()?;
        }
    }
    Ok(summary)
}

struct RecordSet {
    count: u64,
    largest: usize,
    crc: u32,
    producer_id: i64,
    base_sequence: i32,
}

/// Sums the record counts of the batches in the record set at `at`, reading each batch's header
/// only.
fn count_records(c: &mut Walk<'_>, at: usize, len: usize) -> Result<RecordSet, ProduceError> {
    let end = at + len;
    let (mut records, mut largest, mut crc) = (0u64, 0usize, 0u32);
    let (mut producer_id, mut base_sequence) = (-1i64, -1i32);
    let mut pos = at;
    while pos < end {
        if end - pos < BATCH_HEADER_LEN {
            return Err(ProduceError::Truncated);
        }
        let got = c.body.fetch(pos, BATCH_HEADER_LEN, WALK_AHEAD);
        let header: [u8; BATCH_HEADER_LEN] = got
            .get(..BATCH_HEADER_LEN)
            .and_then(|b| b.try_into().ok())
            .ok_or(ProduceError::NotYet)?;
        let length = i32::from_be_bytes(array(&header, 8)?);
        let total = BATCH_FRAMING + usize::try_from(length).map_err(|_| ProduceError::BadBatch)?;
        if header[BATCH_MAGIC_OFFSET] != 2 || total < BATCH_HEADER_LEN {
            return Err(ProduceError::BadBatch);
        }
        if total > end - pos {
            return Err(ProduceError::Truncated);
        }
        let count = i32::from_be_bytes(array(&header, BATCH_RECORDS_OFFSET)?);
        records += u64::try_from(count).map_err(|_| ProduceError::BadBatch)?;
        largest = largest.max(total);
        crc = crc.rotate_left(5) ^ u32::from_be_bytes(array(&header, BATCH_CRC_OFFSET)?);
        if pos == at {
            let id = header.get(BATCH_PRODUCER_ID_OFFSET..BATCH_PRODUCER_ID_OFFSET + 8);
            producer_id = id.and_then(|b| b.try_into().ok()).map_or(-1, i64::from_be_bytes);
            base_sequence = i32::from_be_bytes(array(&header, BATCH_BASE_SEQUENCE_OFFSET)?);
        }
        pos += total;
    }
    Ok(RecordSet {
        count: records,
        largest,
        crc,
        producer_id,
        base_sequence,
    })
}

fn array(b: &[u8], at: usize) -> Result<[u8; 4], ProduceError> {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .ok_or(ProduceError::Truncated)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::kafka::encode::{array_len, bytes, string};
    use crate::source::{Ranges, Whole, Window};

    /// A RecordBatch v2 header claiming `records` records, padded to `len` bytes in all.
    pub(crate) fn batch(records: i32, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len.max(BATCH_HEADER_LEN)];
        let length = (b.len() - BATCH_FRAMING) as i32;
        b[8..12].copy_from_slice(&length.to_be_bytes());
        b[BATCH_MAGIC_OFFSET] = 2;
        b[BATCH_RECORDS_OFFSET..BATCH_RECORDS_OFFSET + 4].copy_from_slice(&records.to_be_bytes());
        b
    }

    /// A Produce body for `version` with one topic and the given partitions' record sets.
    pub(crate) fn produce_body(version: i16, topic: &str, acks: i16, partitions: &[(i32, Vec<u8>)]) -> Vec<u8> {
        let flexible = version >= FIRST_FLEXIBLE_VERSION;
        let mut b = Vec::new();
        if flexible {
            b.push(0); // null transactional id
        } else {
            b.extend_from_slice(&(-1i16).to_be_bytes());
        }
        b.extend_from_slice(&acks.to_be_bytes());
        b.extend_from_slice(&30000i32.to_be_bytes());
        array_len(&mut b, 1, flexible);
        string(&mut b, topic.as_bytes(), flexible);
        array_len(&mut b, partitions.len(), flexible);
        for (p, records) in partitions {
            b.extend_from_slice(&p.to_be_bytes());
            bytes(&mut b, records, flexible);
            if flexible {
                b.push(0);
            }
        }
        if flexible {
            b.push(0);
            b.push(0);
        }
        b
    }

    #[test]
    fn counts_records_and_bytes_in_every_supported_version() {
        for version in MIN_PRODUCE_VERSION..=MAX_PRODUCE_VERSION {
            let mut two = batch(3, 100);
            two.extend(batch(4, 80));
            let body = produce_body(version, "orders", -1, &[(0, batch(5, 200)), (1, two)]);
            let mut seen = Vec::new();
            let s = visit_produce(&mut Whole(&body), version, &mut Vec::new(), |p| {
                seen.push((p.topic.to_vec(), p.partition, p.records, p.largest_batch))
            });
            assert_eq!(
                s,
                Ok(ProduceSummary {
                    acks: -1,
                    partitions: 2,
                    records: 12,
                    bytes: 380
                }),
                "v{version}"
            );
            assert_eq!(
                seen,
                vec![(b"orders".to_vec(), 0, 5, 200), (b"orders".to_vec(), 1, 7, 100)],
                "v{version}"
            );
        }
    }

    #[test]
    fn refuses_unsupported_versions_and_truncation() {
        let body = produce_body(7, "t", 1, &[(0, batch(1, 70))]);
        assert_eq!(
            visit_produce(&mut Whole(&body), 13, &mut Vec::new(), |_| {}),
            Err(ProduceError::UnsupportedVersion(13))
        );
        for cut in 0..body.len() {
            assert!(
                visit_produce(&mut Whole(&body[..cut]), 7, &mut Vec::new(), |_| {}).is_err(),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn only_headers_are_read_and_records_may_still_be_arriving() {
        for version in [7, MAX_PRODUCE_VERSION] {
            let body = produce_body(version, "orders", 1, &[(0, batch(1000, 100_000))]);
            // Only the first 200 bytes have arrived: every header is in them.
            let mut arrived = Ranges::new(&body[..200]);
            let mut window = Window::new(&mut arrived, 0, body.len());
            let summary = visit_produce(&mut window, version, &mut Vec::new(), |p| {
                assert_eq!((p.topic, p.records), (&b"orders"[..], 1000));
            });
            assert_eq!(summary.map(|s| s.records), Ok(1000), "v{version}");
            assert!(arrived.served <= 256, "v{version}: {} bytes read", arrived.served);
        }
    }

    #[test]
    fn a_header_not_arrived_yet_is_not_yet() {
        let mut two = batch(3, 100);
        two.extend(batch(4, 80));
        let body = produce_body(7, "t", 1, &[(0, batch(1, 5000)), (1, two)]);
        let mut arrived = Ranges::new(&body[..1000]);
        let mut window = Window::new(&mut arrived, 0, body.len());
        assert_eq!(
            visit_produce(&mut window, 7, &mut Vec::new(), |_| {}),
            Err(ProduceError::NotYet),
            "the second partition's header is behind the first's records"
        );
    }

    #[test]
    fn rejects_old_message_formats() {
        let mut b = batch(1, 70);
        b[BATCH_MAGIC_OFFSET] = 1;
        let body = produce_body(7, "t", 1, &[(0, b)]);
        assert_eq!(
            visit_produce(&mut Whole(&body), 7, &mut Vec::new(), |_| {}),
            Err(ProduceError::BadBatch)
        );
    }
}
