//! Produce request bodies, versions 3 to 12 (v9+ flexible). v13 names topics by id; the glue
//! caps the Produce version it advertises (ApiVersions) to what is parsed here.

use super::cursor::Cursor;

pub const MIN_PRODUCE_VERSION: i16 = 3;
pub const MAX_PRODUCE_VERSION: i16 = 12;
use super::FIRST_FLEXIBLE_PRODUCE as FIRST_FLEXIBLE_VERSION;

/// RecordBatch v2 header: base offset (8) and batch length (4) frame the batch; the record count
/// is the int32 at offset 57; magic is the byte at offset 16, followed by the CRC-32C of the rest.
const BATCH_FRAMING: usize = 12;
const BATCH_MAGIC_OFFSET: usize = 16;
const BATCH_CRC_OFFSET: usize = 17;
const BATCH_RECORDS_OFFSET: usize = 57;
pub(crate) const BATCH_HEADER_LEN: usize = 61;

/// One partition's record set in a Produce request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionBatch<'a> {
    pub topic: &'a [u8],
    pub partition: i32,
    /// Size of the record set as sent (Kafka's max.message.bytes applies to one batch).
    pub bytes: usize,
    /// The largest single batch in the record set.
    pub largest_batch: usize,
    pub records: u64,
    /// The batches' CRCs (each covers everything after it: producer id, sequence, records),
    /// combined: a retry of the same batches carries the same value.
    pub crc: u32,
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
}

/// Walks a Produce request body (after the request header), calling `visit` once per partition.
pub fn visit_produce<'a>(
    body: &'a [u8],
    version: i16,
    mut visit: impl FnMut(&PartitionBatch<'a>),
) -> Result<ProduceSummary, ProduceError> {
    if !(MIN_PRODUCE_VERSION..=MAX_PRODUCE_VERSION).contains(&version) {
        return Err(ProduceError::UnsupportedVersion(version));
    }
    let flexible = version >= FIRST_FLEXIBLE_VERSION;
    let mut c = Cursor::new(body);
    let t = ProduceError::Truncated;
    if flexible {
        c.compact_nullable().ok_or(t)?;
    } else {
        c.nullable_string().ok_or(t)?;
    }
    let mut summary = ProduceSummary {
        acks: c.i16().ok_or(t)?,
        ..ProduceSummary::default()
    };
    c.i32().ok_or(t)?; // timeout_ms
    let topics = c.array_len(flexible).ok_or(t)?;
    for _ in 0..topics {
        let topic = if flexible {
            c.compact_nullable()
        } else {
            c.nullable_string()
        }
        .ok_or(t)?
        .unwrap_or_default();
        let partitions = c.array_len(flexible).ok_or(t)?;
        for _ in 0..partitions {
            let partition = c.i32().ok_or(t)?;
            let records = if flexible {
                c.compact_nullable()
            } else {
                c.nullable_bytes()
            }
            .ok_or(t)?
            .unwrap_or_default();
            let RecordSet { count, largest, crc } = count_records(records)?;
            if flexible {
                c.skip_tagged_fields().ok_or(t)?;
            }
            summary.partitions += 1;
            summary.records += count;
            summary.bytes += records.len() as u64;
            visit(&PartitionBatch {
                topic,
                partition,
                bytes: records.len(),
                largest_batch: largest,
                records: count,
                crc,
            });
        }
        if flexible {
            c.skip_tagged_fields().ok_or(t)?;
        }
    }
    if flexible {
        c.skip_tagged_fields().ok_or(t)?;
    }
    Ok(summary)
}

struct RecordSet {
    count: u64,
    largest: usize,
    crc: u32,
}

/// Sums the record counts of the batches in a record set.
fn count_records(set: &[u8]) -> Result<RecordSet, ProduceError> {
    let mut c = Cursor::new(set);
    let (mut records, mut largest, mut crc) = (0u64, 0usize, 0u32);
    while c.position() < set.len() {
        let start = c.position();
        let header = set
            .get(start..start + BATCH_HEADER_LEN)
            .ok_or(ProduceError::Truncated)?;
        let length = i32::from_be_bytes(array(header, 8)?);
        let total = BATCH_FRAMING + usize::try_from(length).map_err(|_| ProduceError::BadBatch)?;
        if header.get(BATCH_MAGIC_OFFSET) != Some(&2) || total < BATCH_HEADER_LEN {
            return Err(ProduceError::BadBatch);
        }
        let count = i32::from_be_bytes(array(header, BATCH_RECORDS_OFFSET)?);
        records += u64::try_from(count).map_err(|_| ProduceError::BadBatch)?;
        largest = largest.max(total);
        crc = crc.rotate_left(5) ^ u32::from_be_bytes(array(header, BATCH_CRC_OFFSET)?);
        c.bytes(total).ok_or(ProduceError::Truncated)?;
    }
    Ok(RecordSet {
        count: records,
        largest,
        crc,
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
        let uv = |b: &mut Vec<u8>, mut v: u32| loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                b.push(byte);
                break;
            }
            b.push(byte | 0x80);
        };
        if flexible {
            uv(&mut b, 2);
            uv(&mut b, topic.len() as u32 + 1);
        } else {
            b.extend_from_slice(&1i32.to_be_bytes());
            b.extend_from_slice(&(topic.len() as i16).to_be_bytes());
        }
        b.extend_from_slice(topic.as_bytes());
        if flexible {
            uv(&mut b, partitions.len() as u32 + 1);
        } else {
            b.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
        }
        for (p, records) in partitions {
            b.extend_from_slice(&p.to_be_bytes());
            if flexible {
                uv(&mut b, records.len() as u32 + 1);
            } else {
                b.extend_from_slice(&(records.len() as i32).to_be_bytes());
            }
            b.extend_from_slice(records);
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
            let s = visit_produce(&body, version, |p| {
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
            visit_produce(&body, 13, |_| {}),
            Err(ProduceError::UnsupportedVersion(13))
        );
        for cut in 0..body.len() {
            assert!(visit_produce(&body[..cut], 7, |_| {}).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn rejects_old_message_formats() {
        let mut b = batch(1, 70);
        b[BATCH_MAGIC_OFFSET] = 1;
        let body = produce_body(7, "t", 1, &[(0, b)]);
        assert_eq!(visit_produce(&body, 7, |_| {}), Err(ProduceError::BadBatch));
    }
}
