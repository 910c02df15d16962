//! The read side of Kafka: Fetch requests and responses, versions 4 to 12 (v12 flexible). v13
//! names topics by id; the glue caps the Fetch version it advertises (ApiVersions) to what is
//! parsed here, so a topic is always known by the name the overrides match.
//!
//! A request is small and read whole: the filter clamps the sizes it asks for. A response can
//! be many megabytes and is walked as it streams by: only its topic and partition headers and
//! each record batch's offset and length are read, and the batches are stepped over. What counts
//! is each partition's whole batches: a broker fills a response to its max_bytes with the start
//! of the next batch, which the consumer drops and fetches again whole.

use super::cursor::Cursor;
use crate::edit::Editor;
use crate::source::Source;

pub const API_FETCH: i16 = 1;
pub const MIN_FETCH_VERSION: i16 = 4;
pub const MAX_FETCH_VERSION: i16 = 12;
const FIRST_FLEXIBLE_FETCH: i16 = 12;

/// Whether a Fetch request header carries tagged fields (request header v2).
pub(crate) fn flexible_fetch(version: i16) -> bool {
    version >= FIRST_FLEXIBLE_FETCH
}

/// Whether this filter parses Fetch requests and responses of `version`.
pub(crate) fn fetch_parsed(version: i16) -> bool {
    (MIN_FETCH_VERSION..=MAX_FETCH_VERSION).contains(&version)
}

/// Lowers every size a Fetch request asks for (max_bytes, and each partition_max_bytes) to at
/// most `most`, recording the edits at `body_at` (where the body starts in the edited buffer of
/// `len` bytes): the broker then answers with at most one batch more than `most` (it returns a
/// first batch whole, whatever its size). None: not a Fetch this filter parses, left as it is.
pub(crate) fn clamp_fetch(
    body: &[u8],
    version: i16,
    most: i32,
    body_at: usize,
    len: usize,
    edit: &mut Editor,
) -> Option<()> {
    let mut sizes: Vec<usize> = Vec::new();
    walk_request(body, version, &mut sizes, |_, _| {})?;
    for at in sizes {
        let asked = i32::from_be_bytes(body.get(at..at + 4)?.try_into().ok()?);
        if asked > most {
            edit.replace(len, body_at + at, body_at + at + 4, &most.to_be_bytes());
        }
    }
    Some(())
}

/// The topics a Fetch request asks for. None: not a Fetch this filter parses.
pub fn fetch_topics(body: &[u8], version: i16, mut topic: impl FnMut(&[u8])) -> Option<()> {
    walk_request(body, version, &mut Vec::new(), |t, p| {
        if p.is_none() {
            topic(t)
        }
    })
}

/// The topics a Fetch request asks for, each with its partitions. None: not a Fetch this
/// filter parses.
pub(crate) fn fetch_partitions(body: &[u8], version: i16) -> Option<Vec<(&[u8], Vec<i32>)>> {
    let mut topics: Vec<(&[u8], Vec<i32>)> = Vec::new();
    walk_request(body, version, &mut Vec::new(), |t, p| match (p, topics.last_mut()) {
        (Some(p), Some((_, ps))) => ps.push(p),
        _ => topics.push((t, Vec::new())),
    })?;
    Some(topics)
}

/// Walks a Fetch request body: `visit` sees each topic (None), then each of its partitions;
/// `sizes` gets where each size asked for is (max_bytes, then each partition_max_bytes).
fn walk_request<'b>(
    body: &'b [u8],
    version: i16,
    sizes: &mut Vec<usize>,
    mut visit: impl FnMut(&'b [u8], Option<i32>),
) -> Option<()> {
    if !fetch_parsed(version) {
        return None;
    }
    let flexible = flexible_fetch(version);
    let mut c = Cursor::new(body);
    c.bytes(4 + 4 + 4)?; // replica id, max wait, min bytes
    sizes.push(c.position());
    c.i32()?; // max_bytes
    c.bytes(1)?; // isolation level
    if version >= 7 {
        c.bytes(4 + 4)?; // session id, epoch
    }
    let topics = c.array_len(flexible)?;
    for _ in 0..topics {
        let topic = c.string_field(flexible)?.unwrap_or_default();
        visit(topic, None);
        let partitions = c.array_len(flexible)?;
        for _ in 0..partitions {
            visit(topic, Some(c.i32()?));
            if version >= 9 {
                c.i32()?; // current leader epoch
            }
            c.bytes(8)?; // fetch offset
            if version >= 12 {
                c.i32()?; // last fetched epoch
            }
            if version >= 5 {
                c.bytes(8)?; // log start offset
            }
            sizes.push(c.position());
            c.i32()?; // partition_max_bytes
            if flexible {
                c.skip_tagged_fields()?;
            }
        }
        if flexible {
            c.skip_tagged_fields()?;
        }
    }
    Some(())
}

/// What a walked Fetch response reports, in order.
pub(crate) trait FetchHandler {
    /// The response's head has arrived: its whole size (the frame after its length prefix) and
    /// the broker's throttle_time_ms. Some raises that to the value returned.
    fn head(&mut self, size: usize, throttle_ms: i32) -> Option<i32>;
    /// One partition's record bytes, of `topic`.
    fn records(&mut self, topic: &[u8], bytes: u64);
    /// The walk is over (reported once, after [`FetchHandler::head`]): `complete` unless the
    /// response did not parse (then the records of the partitions not yet reported are not
    /// known).
    fn done(&mut self, complete: bool);
}

/// Where a walk is in the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    /// The size, correlation id, header tags, throttle, error code and session id.
    Head,
    /// A topic's name and partition count; `left` topics to go.
    Topic { left: usize },
    /// A partition's fields up to its records' length.
    Partition { topics: usize, left: usize },
    /// A partition's record batches: `rest` bytes of them to go, `whole` counted so far (whole
    /// batches), `skip` of the current batch still to step over.
    Records {
        topics: usize,
        left: usize,
        rest: usize,
        whole: u64,
        skip: usize,
    },
    /// A partition's tagged fields (flexible versions).
    PartitionTags { topics: usize, left: usize },
    /// A topic's tagged fields (flexible versions).
    TopicTags { topics: usize },
    /// Everything after the topics (or after a part that did not parse): stepped over.
    Rest,
}

/// The most of one header that is read: a topic name (249 bytes at most) with its lengths, a
/// partition with a short list of aborted transactions.
pub(crate) const HEADER_READ: usize = 512;

/// A record batch's base offset and length: what frames it.
pub(crate) const BATCH_FRAMING: usize = 12;

/// Batches up to this size are read through (the rest of the read fetched with the first
/// batch header it needs, as crate::source::ahead_after does for messages); after a larger one,
/// each batch header is fetched alone. Measured with 16 KiB batches (`make bench-cpu`, kafka
/// fetch, gateway over gateway-unlimited): read through, walking and charging added 0.18 µs per
/// KiB of response; each header alone, 0.16 — about one host read per batch either way, so
/// small batches, many to a read, are read through.
const BATCH_READ_THROUGH: usize = 4 << 10;

/// A Fetch response being walked across reads.
#[derive(Debug)]
pub(crate) struct FetchWalk {
    version: i16,
    at: At,
    /// Bytes of the frame (size prefix included) not yet walked.
    left: usize,
    /// The current topic's name (copied: its partitions may arrive in later reads; reused).
    topic: Vec<u8>,
    /// The size of the last batch (see BATCH_READ_THROUGH).
    last_batch: usize,
}

/// What one step of the walk found.
enum Step {
    /// Consumed this many bytes.
    Took(usize),
    /// The bytes the step needs have not all arrived: carry from here.
    Short,
    /// The response does not parse: step over the rest.
    Bad,
}

impl FetchWalk {
    /// A walk of a response of `total` bytes (size prefix included) to a Fetch of `version`.
    pub(crate) fn new(version: i16, total: usize) -> Option<FetchWalk> {
        fetch_parsed(version).then(|| FetchWalk {
            version,
            at: At::Head,
            left: total,
            topic: Vec::new(),
            // Until a batch is seen, its header is fetched alone.
            last_batch: usize::MAX,
        })
    }

    /// Walks `data[pos..end]` (`end`: where the read ends); returns where it stopped and
    /// whether the frame is walked to its end. Stopping short of `end` means the next header
    /// has not all arrived: the caller carries from there. The throttle edit, if any, is
    /// recorded in `edit` (`len`: the read's length).
    pub(crate) fn walk(
        &mut self,
        data: &mut dyn Source,
        mut pos: usize,
        end: usize,
        len: usize,
        edit: &mut Editor,
        h: &mut impl FetchHandler,
    ) -> (usize, bool) {
        while self.left > 0 && pos < end {
            let avail = (end - pos).min(self.left);
            let step = match self.at {
                At::Rest => Step::Took(avail),
                At::Records {
                    topics,
                    left,
                    rest,
                    whole,
                    skip,
                } if skip > 0 => {
                    let n = skip.min(avail);
                    self.at = At::Records {
                        topics,
                        left,
                        rest: rest - n,
                        whole,
                        skip: skip - n,
                    };
                    Step::Took(n)
                }
                At::Records {
                    topics,
                    left,
                    rest,
                    whole,
                    ..
                } => self.batch(data, pos, avail, (topics, left, rest, whole), h),
                _ => self.header(data, pos, avail, len, edit, h),
            };
            match step {
                Step::Took(n) => {
                    pos += n;
                    self.left -= n;
                }
                Step::Short if avail < self.left => return (pos, false),
                Step::Short | Step::Bad => {
                    // A walk ends once, and only one whose head was reported.
                    if self.at != At::Head {
                        h.done(false);
                    }
                    self.at = At::Rest;
                }
            }
        }
        let finished = self.left == 0;
        // The frame's last bytes were a partition's last batch: its count is still to report.
        if let (
            true,
            At::Records {
                topics,
                left,
                rest: 0,
                whole,
                skip: 0,
            },
        ) = (finished, self.at)
        {
            self.batch(data, pos, 0, (topics, left, 0, whole), h);
        }
        if finished {
            match self.at {
                At::Rest | At::Head => {}
                At::Topic { left: 0 } => h.done(true),
                _ => h.done(false),
            }
            self.at = At::Rest;
        }
        (pos, finished)
    }

    /// At a record batch of a partition (`rest` bytes of its records to go, `whole` counted):
    /// a whole batch is counted and stepped over; a batch cut short by the response's end is
    /// stepped over uncounted; with none to go, the partition's count is reported.
    fn batch(
        &mut self,
        data: &mut dyn Source,
        pos: usize,
        avail: usize,
        (topics, left, rest, whole): (usize, usize, usize, u64),
        h: &mut impl FetchHandler,
    ) -> Step {
        let records = |whole, skip| At::Records {
            topics,
            left,
            rest,
            whole,
            skip,
        };
        if rest == 0 {
            h.records(&self.topic, whole);
            self.at = if flexible_fetch(self.version) {
                At::PartitionTags { topics, left }
            } else {
                self.next_partition(topics, left)
            };
            return Step::Took(0);
        }
        if rest < BATCH_FRAMING {
            self.at = records(whole, rest);
            return Step::Took(0);
        }
        let ahead = if self.last_batch > BATCH_READ_THROUGH {
            BATCH_FRAMING
        } else {
            usize::MAX
        };
        let head = data.fetch(pos, BATCH_FRAMING.min(avail), ahead);
        let Some(length) = head.get(8..12).and_then(|b| b.try_into().ok()).map(i32::from_be_bytes) else {
            return Step::Short;
        };
        let size = usize::try_from(length).map_or(usize::MAX, |l| l.saturating_add(BATCH_FRAMING));
        self.last_batch = size;
        self.at = if size <= rest {
            records(whole + size as u64, size)
        } else {
            records(whole, rest)
        };
        Step::Took(0)
    }

    fn next_partition(&self, topics: usize, left: usize) -> At {
        match (left, self.version >= FIRST_FLEXIBLE_FETCH) {
            (0, true) => At::TopicTags { topics },
            (0, false) => At::Topic { left: topics },
            _ => At::Partition { topics, left },
        }
    }

    /// Parses the header at `pos` (at most `avail` bytes of it are the frame's and here).
    fn header(
        &mut self,
        data: &mut dyn Source,
        pos: usize,
        avail: usize,
        len: usize,
        edit: &mut Editor,
        h: &mut impl FetchHandler,
    ) -> Step {
        let flexible = flexible_fetch(self.version);
        let version = self.version;
        let bytes = data.fetch(pos, avail.min(HEADER_READ), HEADER_READ);
        let bytes = &bytes[..bytes.len().min(avail).min(HEADER_READ)];
        let parsed = match self.at {
            At::Head => parse_head(bytes, version).map(|(n, throttle_at, throttle, topics)| {
                if let Some(raised) = h.head(self.left - 4, throttle).filter(|&t| t > throttle) {
                    edit.replace(len, pos + throttle_at, pos + throttle_at + 4, &raised.to_be_bytes());
                }
                self.at = At::Topic { left: topics };
                n
            }),
            At::Topic { left: 0 } => {
                h.done(true);
                self.at = At::Rest;
                Some(0)
            }
            At::Topic { left } => {
                let mut c = Cursor::new(bytes);
                parse_topic(&mut c, flexible).map(|(name, partitions)| {
                    self.topic.clear();
                    self.topic.extend_from_slice(name);
                    self.at = self.next_partition(left - 1, partitions);
                    c.position()
                })
            }
            At::Partition { topics, left } => parse_partition(bytes, version).map(|(n, records)| {
                self.at = At::Records {
                    topics,
                    left: left - 1,
                    rest: records,
                    whole: 0,
                    skip: 0,
                };
                n
            }),
            At::PartitionTags { topics, left } => {
                let mut c = Cursor::new(bytes);
                c.skip_tagged_fields().map(|()| {
                    self.at = self.next_partition(topics, left);
                    c.position()
                })
            }
            At::TopicTags { topics } => {
                let mut c = Cursor::new(bytes);
                c.skip_tagged_fields().map(|()| {
                    self.at = At::Topic { left: topics };
                    c.position()
                })
            }
            At::Records { .. } | At::Rest => Some(0),
        };
        match parsed {
            Some(n) => Step::Took(n),
            // A header longer than what is read at once (a long aborted-transaction list) is
            // not walked: the response is passed on uncounted from there.
            None if bytes.len() >= HEADER_READ => Step::Bad,
            None => Step::Short,
        }
    }
}

/// The head: its length, where throttle_time_ms is, its value, and the topic count.
fn parse_head(b: &[u8], version: i16) -> Option<(usize, usize, i32, usize)> {
    let flexible = flexible_fetch(version);
    let mut c = Cursor::new(b);
    c.i32()?; // size
    c.i32()?; // correlation id
    if flexible {
        c.skip_tagged_fields()?;
    }
    let throttle_at = c.position();
    let throttle = c.i32()?;
    if version >= 7 {
        c.bytes(2 + 4)?; // error code, session id
    }
    let topics = c.array_len(flexible)?;
    Some((c.position(), throttle_at, throttle, topics))
}

fn parse_topic<'a>(c: &mut Cursor<'a>, flexible: bool) -> Option<(&'a [u8], usize)> {
    let name = c.string_field(flexible)?.unwrap_or_default();
    let partitions = c.array_len(flexible)?;
    Some((name, partitions))
}

/// A partition's fields up to and including its records' length: their length and that of
/// the records.
fn parse_partition(b: &[u8], version: i16) -> Option<(usize, usize)> {
    let flexible = flexible_fetch(version);
    let mut c = Cursor::new(b);
    c.bytes(4 + 2 + 8 + 8)?; // index, error, high watermark, last stable offset
    if version >= 5 {
        c.bytes(8)?; // log start offset
    }
    let aborted = c.array_len(flexible)?;
    for _ in 0..aborted {
        c.bytes(8 + 8)?; // producer id, first offset
        if flexible {
            c.skip_tagged_fields()?;
        }
    }
    if version >= 11 {
        c.i32()?; // preferred read replica
    }
    let records = if flexible {
        usize::try_from(c.uvarint()?.saturating_sub(1)).ok()?
    } else {
        usize::try_from(c.i32()?.max(0)).ok()?
    };
    Some((c.position(), records))
}
