//! One control line of the client protocol. Like nats-server, operation names are
//! case-insensitive, arguments are separated by spaces or tabs, and a line ends at LF with an
//! optional CR before it.

/// nats-server's default max_control_line.
pub const MAX_CONTROL_LINE: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientOp<'a> {
    Connect {
        json: &'a [u8],
    },
    /// PUB or HPUB. `header_bytes` is 0 for PUB; `total_bytes` counts headers and payload.
    Pub {
        subject: &'a [u8],
        reply: Option<&'a [u8]>,
        header_bytes: usize,
        total_bytes: usize,
    },
    /// SUB `subject` [queue] sid: the subject, when the arguments are there (else nats-server
    /// answers the malformed line).
    Sub {
        subject: Option<&'a [u8]>,
    },
    Unsub,
    Ping,
    Pong,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolError {
    /// No line end within MAX_CONTROL_LINE bytes.
    ControlLineTooLong,
    UnknownOperation,
    /// A PUB/HPUB whose arguments are missing or not numbers.
    BadPublishArguments,
}

impl ProtocolError {
    /// The -ERR text nats-server sends for the same fault.
    pub fn nats_error(self) -> &'static str {
        match self {
            ProtocolError::ControlLineTooLong => "Maximum Control Line Exceeded",
            ProtocolError::UnknownOperation => "Unknown Protocol Operation",
            ProtocolError::BadPublishArguments => "Processing Error",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// No complete line yet (and not over the limit).
    Incomplete,
    /// An operation and the length of its control line, line end included.
    Op(ClientOp<'a>, usize),
    Error(ProtocolError),
}

/// Parses the control line at the start of `buf`.
pub fn parse_client_line(buf: &[u8]) -> Parsed<'_> {
    let window = &buf[..buf.len().min(MAX_CONTROL_LINE)];
    let Some(lf) = window.iter().position(|&b| b == b'\n') else {
        return if buf.len() >= MAX_CONTROL_LINE {
            Parsed::Error(ProtocolError::ControlLineTooLong)
        } else {
            Parsed::Incomplete
        };
    };
    let line_len = lf + 1;
    let mut line = &window[..lf];
    if let [rest @ .., b'\r'] = line {
        line = rest;
    }
    let (op, args) = split_op(line);
    let parsed = if op.eq_ignore_ascii_case(b"PUB") {
        parse_pub(args, false)
    } else if op.eq_ignore_ascii_case(b"HPUB") {
        parse_pub(args, true)
    } else if op.eq_ignore_ascii_case(b"PING") {
        Ok(ClientOp::Ping)
    } else if op.eq_ignore_ascii_case(b"PONG") {
        Ok(ClientOp::Pong)
    } else if op.eq_ignore_ascii_case(b"SUB") {
        let (a, n) = split_args(args);
        Ok(ClientOp::Sub {
            subject: matches!(n, 2 | 3).then_some(a[0]),
        })
    } else if op.eq_ignore_ascii_case(b"UNSUB") {
        Ok(ClientOp::Unsub)
    } else if op.eq_ignore_ascii_case(b"CONNECT") {
        Ok(ClientOp::Connect { json: args })
    } else {
        Err(ProtocolError::UnknownOperation)
    };
    match parsed {
        Ok(op) => Parsed::Op(op, line_len),
        Err(e) => Parsed::Error(e),
    }
}

fn is_space(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn trim_start(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|&&b| is_space(b)).count();
    &s[n..]
}

fn split_op(line: &[u8]) -> (&[u8], &[u8]) {
    let line = trim_start(line);
    let end = line.iter().position(|&b| is_space(b)).unwrap_or(line.len());
    (&line[..end], trim_start(&line[end..]))
}

/// Splits arguments on runs of spaces/tabs into at most 4 slices without allocating.
fn split_args(args: &[u8]) -> ([&[u8]; 4], usize) {
    let mut out: [&[u8]; 4] = [&[]; 4];
    let mut n = 0;
    for part in args.split(|&b| is_space(b)).filter(|p| !p.is_empty()) {
        if n == out.len() {
            return (out, n + 1); // too many: reported as a count over 4
        }
        out[n] = part;
        n += 1;
    }
    (out, n)
}

fn parse_size(digits: &[u8]) -> Option<usize> {
    if digits.is_empty() || digits.len() > 12 {
        return None;
    }
    digits.iter().try_fold(0usize, |acc, &d| {
        if d.is_ascii_digit() {
            acc.checked_mul(10)?.checked_add(usize::from(d - b'0'))
        } else {
            None
        }
    })
}

fn parse_pub(args: &[u8], with_headers: bool) -> Result<ClientOp<'_>, ProtocolError> {
    let (a, n) = split_args(args);
    let bad = ProtocolError::BadPublishArguments;
    let (subject, reply, sizes): (&[u8], Option<&[u8]>, &[&[u8]]) = match (with_headers, n) {
        (false, 2) => (a[0], None, &a[1..2]),
        (false, 3) => (a[0], Some(a[1]), &a[2..3]),
        (true, 3) => (a[0], None, &a[1..3]),
        (true, 4) => (a[0], Some(a[1]), &a[2..4]),
        _ => return Err(bad),
    };
    let (header_bytes, total_bytes) = match sizes {
        [total] => (0, parse_size(total).ok_or(bad)?),
        [hdr, total] => (parse_size(hdr).ok_or(bad)?, parse_size(total).ok_or(bad)?),
        _ => return Err(bad),
    };
    if header_bytes > total_bytes {
        return Err(bad);
    }
    Ok(ClientOp::Pub {
        subject,
        reply,
        header_bytes,
        total_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_client_operation() {
        let cases: &[(&[u8], Parsed)] = &[
            (b"PING\r\n", Parsed::Op(ClientOp::Ping, 6)),
            (b"pong\n", Parsed::Op(ClientOp::Pong, 5)),
            (
                b"SUB foo 1\r\n",
                Parsed::Op(ClientOp::Sub { subject: Some(b"foo") }, 11),
            ),
            (
                b"SUB foo q 1\r\n",
                Parsed::Op(ClientOp::Sub { subject: Some(b"foo") }, 13),
            ),
            (b"SUB foo\r\n", Parsed::Op(ClientOp::Sub { subject: None }, 9)),
            (b"UNSUB 1\r\n", Parsed::Op(ClientOp::Unsub, 9)),
            (
                b"CONNECT {\"user\":\"a\"}\r\n",
                Parsed::Op(
                    ClientOp::Connect {
                        json: b"{\"user\":\"a\"}",
                    },
                    22,
                ),
            ),
            (
                b"PUB foo 5\r\nhello\r\n",
                Parsed::Op(
                    ClientOp::Pub {
                        subject: b"foo",
                        reply: None,
                        header_bytes: 0,
                        total_bytes: 5,
                    },
                    11,
                ),
            ),
            (
                b"pub foo\t_INBOX.1   12\r\n",
                Parsed::Op(
                    ClientOp::Pub {
                        subject: b"foo",
                        reply: Some(b"_INBOX.1"),
                        header_bytes: 0,
                        total_bytes: 12,
                    },
                    23,
                ),
            ),
            (
                b"HPUB foo 22 33\r\n",
                Parsed::Op(
                    ClientOp::Pub {
                        subject: b"foo",
                        reply: None,
                        header_bytes: 22,
                        total_bytes: 33,
                    },
                    16,
                ),
            ),
            (
                b"HPUB foo r 22 33\r\n",
                Parsed::Op(
                    ClientOp::Pub {
                        subject: b"foo",
                        reply: Some(b"r"),
                        header_bytes: 22,
                        total_bytes: 33,
                    },
                    18,
                ),
            ),
            (b"PUB foo", Parsed::Incomplete),
            (b"", Parsed::Incomplete),
            (b"FOO bar\r\n", Parsed::Error(ProtocolError::UnknownOperation)),
            (b"PUB foo x\r\n", Parsed::Error(ProtocolError::BadPublishArguments)),
            (b"PUB foo\r\n", Parsed::Error(ProtocolError::BadPublishArguments)),
            (b"PUB a b c d e\r\n", Parsed::Error(ProtocolError::BadPublishArguments)),
            (b"HPUB foo 34 33\r\n", Parsed::Error(ProtocolError::BadPublishArguments)),
            (
                b"PUB foo 99999999999999999999\r\n",
                Parsed::Error(ProtocolError::BadPublishArguments),
            ),
        ];
        for (input, want) in cases {
            assert_eq!(
                &parse_client_line(input),
                want,
                "input {:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn control_line_is_bounded_like_nats_server() {
        let long = vec![b'A'; MAX_CONTROL_LINE];
        assert_eq!(
            parse_client_line(&long),
            Parsed::Error(ProtocolError::ControlLineTooLong)
        );
        assert_eq!(parse_client_line(&long[..MAX_CONTROL_LINE - 1]), Parsed::Incomplete);
    }
}
