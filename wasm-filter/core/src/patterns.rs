//! Override patterns: NATS subject wildcards (`*` one token, `>` the rest) and Kafka topic globs
//! (`*` any run of characters, `?` one character). Matching allocates nothing.

use crate::protocol::Protocol;

/// Whether `subject` matches the NATS subject pattern.
pub fn nats_matches(pattern: &str, subject: &[u8]) -> bool {
    let mut subject_tokens = subject.split(|&b| b == b'.');
    for p in pattern.split('.') {
        match (p, subject_tokens.next()) {
            (">", Some(t)) => return !t.is_empty(),
            ("*", Some(t)) if !t.is_empty() => {}
            (lit, Some(t)) if lit.as_bytes() == t => {}
            _ => return false,
        }
    }
    subject_tokens.next().is_none()
}

/// Whether `topic` matches the glob.
pub fn glob_matches(glob: &str, topic: &[u8]) -> bool {
    let g = glob.as_bytes();
    let (mut gi, mut ti) = (0usize, 0usize);
    let mut backtrack: Option<(usize, usize)> = None; // (glob index after '*', topic index it covers to)
    while ti < topic.len() {
        match g.get(gi) {
            Some(b'*') => {
                gi += 1;
                backtrack = Some((gi, ti));
            }
            Some(&c) if c == b'?' || Some(&c) == topic.get(ti) => {
                gi += 1;
                ti += 1;
            }
            _ => match backtrack {
                Some((bg, bt)) => {
                    gi = bg;
                    ti = bt + 1;
                    backtrack = Some((bg, bt + 1));
                }
                None => return false,
            },
        }
    }
    g.get(gi..).is_some_and(|rest| rest.iter().all(|&c| c == b'*'))
}

/// How specific a pattern is: more literal characters (NATS: literal tokens first) win, then
/// fewer wildcards. Higher sorts first.
pub fn specificity(protocol: Protocol, pattern: &str) -> (usize, usize, usize) {
    match protocol {
        Protocol::Nats => {
            let tokens = pattern.split('.');
            let literal = tokens.clone().filter(|t| *t != "*" && *t != ">").count();
            let wildcards = tokens.clone().filter(|t| *t == "*" || *t == ">").count();
            let full_wildcard = usize::from(pattern.ends_with('>'));
            (literal, usize::MAX - wildcards, usize::MAX - full_wildcard)
        }
        Protocol::Kafka => {
            let wildcards = pattern.bytes().filter(|&c| c == b'*' || c == b'?').count();
            (pattern.len() - wildcards, usize::MAX - wildcards, 0)
        }
    }
}

pub fn matches(protocol: Protocol, pattern: &str, name: &[u8]) -> bool {
    match protocol {
        Protocol::Nats => nats_matches(pattern, name),
        Protocol::Kafka => glob_matches(pattern, name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nats_wildcards() {
        let cases = [
            ("orders.>", "orders.new", true),
            ("orders.>", "orders.eu.new", true),
            ("orders.>", "orders", false),
            ("orders.*", "orders.new", true),
            ("orders.*", "orders.eu.new", false),
            ("*.new", "orders.new", true),
            ("orders.new", "orders.new", true),
            ("orders.new", "orders.newer", false),
            ("orders.*", "orders.", false),
            (">", "anything.at.all", true),
        ];
        for (p, s, want) in cases {
            assert_eq!(nats_matches(p, s.as_bytes()), want, "{p} vs {s}");
        }
    }

    #[test]
    fn kafka_globs() {
        let cases = [
            ("orders-*", "orders-eu", true),
            ("orders-*", "orders-", true),
            ("orders-*", "order", false),
            ("*-audit", "billing-audit", true),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
            ("t?pic", "topic", true),
            ("t?pic", "tpic", false),
            ("exact", "exact", true),
        ];
        for (g, t, want) in cases {
            assert_eq!(glob_matches(g, t.as_bytes()), want, "{g} vs {t}");
        }
    }

    #[test]
    fn more_literal_patterns_are_more_specific() {
        assert!(specificity(Protocol::Nats, "orders.eu.>") > specificity(Protocol::Nats, "orders.>"));
        assert!(specificity(Protocol::Nats, "orders.*") > specificity(Protocol::Nats, "orders.>"));
        assert!(specificity(Protocol::Nats, "orders.new") > specificity(Protocol::Nats, "orders.*"));
        assert!(specificity(Protocol::Kafka, "orders-eu-*") > specificity(Protocol::Kafka, "orders-*"));
    }
}
