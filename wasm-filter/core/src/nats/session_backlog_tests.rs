//! The NATS session's tests of what it owes the client (crate::backlog): holds past the bound,
//! their release, the slow-consumer deadline.

use super::tests::{client, connected, server, text, FakeGate};
use super::*;
use crate::backlog::Standing;
use crate::source::Ranges;

/// A client that refusals are owed to past the bound is read no further (crate::backlog): what
/// it sent after is held, not refused, until PONGs carry what it is owed; what was owed is the
/// length of the errors it is sent.
#[test]
fn a_client_owed_more_than_the_bound_is_held_until_its_errors_go_out() {
    let mut g = FakeGate::default();
    let mut s = connected(&mut g);
    let refusal = "Permissions Violation for Publish to \"b\" (rate)";
    let err = format!("-ERR '{refusal}'\r\n");
    s.set_backlog_limit(2 * err.len() as u64);
    g.verdicts = VecDeque::from(vec![Verdict::Refuse(refusal.into()); 3]);
    let o = s.client_data(
        &mut Ranges::new(b"PUB b 1\r\n1\r\nPUB b 1\r\n2\r\nPUB b 1\r\n3\r\n"),
        &mut g,
    );
    assert!(o.hold, "the third message waits");
    assert_eq!(g.published, 2, "and is not decided, so not refused");
    assert_eq!(s.owed(), 2 * err.len() as u64);
    assert_eq!(s.backlog_standing(0, 10), Standing::Held { until: 10 });
    assert!(!s.release_held());
    s.forwarded(o.decided);

    let got = text(&server(&mut s, &mut g, b"PONG\r\n"));
    assert_eq!(got, err);
    assert_eq!(s.owed(), err.len() as u64);
    assert!(s.release_held(), "under the bound: the held message is decided now");
    assert!(!s.release_held());
    let o = s.client_data(&mut Ranges::new(b"PUB b 1\r\n3\r\n"), &mut g);
    assert!(!o.hold);
    assert_eq!(g.published, 3);
}

/// A client's own PINGs count too: a flood of them unread is held like refusals.
#[test]
fn unread_pongs_count_against_the_bound() {
    let mut g = FakeGate::default();
    let mut s = connected(&mut g);
    s.set_backlog_limit(12);
    let sent = b"PING\r\nPING\r\nPING\r\n";
    let o = s.client_data(&mut Ranges::new(sent), &mut g);
    assert!(o.hold);
    assert_eq!(o.decided, 12, "two PINGs go ahead, the third waits");
    assert_eq!(s.owed(), 12);
}

/// Past the bound with nothing taken for the deadline, the client is a slow consumer.
#[test]
fn a_client_that_takes_nothing_for_the_deadline_is_a_slow_consumer() {
    let mut g = FakeGate::default();
    let mut s = connected(&mut g);
    s.set_backlog_limit(1);
    g.verdicts = VecDeque::from(vec![Verdict::Refuse("rate".into()); 2]);
    client(&mut s, &mut g, b"PUB b 1\r\n1\r\n");
    assert_eq!(s.backlog_standing(100, 50), Standing::Held { until: 150 });
    assert_eq!(s.backlog_standing(150, 50), Standing::SlowConsumer);
}

/// Past the bound mid-read, a hold waits until what follows fits the glue's carry: a hold whose
/// bytes behind do not fit would forward nothing decided ahead of it — the PINGs whose PONGs
/// pay what is owed — and the client would wait for nothing.
#[test]
fn a_hold_for_the_backlog_waits_until_what_follows_fits_the_carry() {
    let mut g = FakeGate::default();
    let mut s = connected(&mut g);
    s.set_backlog_limit(1);
    s.set_carry_limit(12);
    g.verdicts = VecDeque::from(vec![Verdict::Refuse("rate".into()); 4]);
    let three = b"PUB b 1\r\n1\r\nPUB b 1\r\n2\r\nPUB b 1\r\n3\r\n";
    let o = s.client_data(&mut Ranges::new(three), &mut g);
    assert!(o.hold);
    assert_eq!(
        g.published, 2,
        "the second is decided though the first is owed: 24 bytes follow it"
    );
    s.forwarded(o.decided);
    let o = s.client_data(&mut Ranges::new(&three[24..]), &mut g);
    assert!(o.hold, "nothing decided ahead of it: the third is held at once");
    assert_eq!((o.decided, g.published), (0, 2));
}
