//! Any bytes, in any split, in either direction, with any decisions: the NATS session never
//! panics and never forwards more than it was given plus what it inserts.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weighstation_core::nats::{Gate, Publish, Session, Verdict};

/// Decisions drawn from the input, so the fuzzer explores holds, refusals and closes too.
struct DrawnGate<'a> {
    choices: &'a [u8],
    next: usize,
}

impl DrawnGate<'_> {
    fn draw(&mut self) -> u8 {
        let c = self
            .choices
            .get(self.next % self.choices.len().max(1))
            .copied()
            .unwrap_or(0);
        self.next += 1;
        c
    }
}

impl Gate for DrawnGate<'_> {
    fn connect(&mut self, _user: Option<&str>) -> Result<(), String> {
        if self.draw() % 7 == 0 {
            Err("maximum connections exceeded".into())
        } else {
            Ok(())
        }
    }
    fn publish(&mut self, _p: &Publish<'_>) -> Verdict {
        match self.draw() % 5 {
            0 => Verdict::Hold,
            1 => Verdict::Refuse("refused".into()),
            2 => Verdict::Close,
            _ => Verdict::Forward,
        }
    }
    fn delivered(&mut self, _subject: &[u8]) {}
    fn max_payload(&self) -> Option<u64> {
        Some(1024)
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let (choices, stream) = rest.split_at(rest.len().min(8));
    let mut gate = DrawnGate { choices, next: 0 };
    let mut session = Session::default();
    let mut held: Vec<u8> = Vec::new();
    for (i, chunk) in stream.chunks(usize::from(split).max(1)).enumerate() {
        if i % 2 == 0 {
            held.extend_from_slice(chunk);
            let o = session.client_data(&held, &mut gate);
            if let Some(r) = o.replace {
                held = r;
            }
            if o.hold {
                let decided = o.decided.min(held.len());
                held.drain(..decided);
                session.forwarded(decided);
            } else {
                held.clear();
            }
        } else {
            let _ = session.server_data(chunk, &mut gate);
        }
    }
});
