//! In-flight slots in blocks. A tenant's shared count is of slots taken by workers, whether in
//! use or idle in a worker's hands; so the count never exceeds the limit and no more than the
//! limit are ever in use. Idle slots are kept from other workers: a worker takes and keeps at
//! most two blocks of 1/512 of the limit, so each worker holds back at most ~0.4% of it, and a
//! limit under 1,024 is taken one slot at a time, exactly as without leases.

/// A block is this share of the limit.
const BLOCK_SHARE: u64 = 512;

/// One worker's idle slots of one tenant's in-flight limit.
#[derive(Debug, Default, Clone)]
pub struct SlotLease {
    idle: u64,
}

fn block(limit: u64) -> u64 {
    limit / BLOCK_SHARE
}

impl SlotLease {
    /// Takes an idle slot, if the worker has one. No shared state is touched.
    pub fn take(&mut self) -> bool {
        let had = self.idle > 0;
        self.idle = self.idle.saturating_sub(1);
        had
    }

    /// The work of one compare-and-swap on the shared count `taken`: the new count and the
    /// slots granted (the one asked for and a block to keep), or None if the limit is reached.
    pub fn take_shared(limit: u64, taken: u64) -> Option<(u64, u64)> {
        let room = limit.checked_sub(taken).filter(|r| *r > 0)?;
        let slots = room.min(1 + block(limit));
        Some((taken + slots, slots))
    }

    /// `slots` were granted by [`SlotLease::take_shared`]: one is in use, the rest idle.
    pub fn granted(&mut self, slots: u64) {
        self.idle += slots.saturating_sub(1);
    }

    /// A slot is no longer in use. It is kept for the worker's next request unless more than
    /// two blocks are idle; then the slots to give back to the shared count, down to one block.
    pub fn put_back(&mut self, limit: u64) -> u64 {
        self.idle += 1;
        let keep = block(limit);
        if self.idle > 2 * keep {
            let surplus = self.idle - keep;
            self.idle = keep;
            surplus
        } else {
            0
        }
    }

    /// Gives every idle slot back: how many.
    pub fn surrender(&mut self) -> u64 {
        std::mem::take(&mut self.idle)
    }
}
