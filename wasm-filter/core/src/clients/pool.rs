//! A tenant's pool of client buckets. Each slot is a rate bucket and an owner word (the owning
//! client's hash, 0 for none) in shared data. A client looks for its slot among a few probed
//! from its hash: one it owns, else one no client owns or whose bucket has refilled (taking it
//! then loses its last owner nothing: a refilled bucket is what a new one would be). While every
//! probed slot is busy the client shares the overflow bucket.

/// Slots a client tries before it overflows: enough that a pool less than full rarely sends a
/// client to the overflow bucket, few enough that a new client costs a handful of host calls.
pub const PROBES: u32 = 8;

/// The slots a client tries, in order.
pub fn probes(hash: u64, pool: u32) -> impl Iterator<Item = u32> {
    let pool = pool.max(1);
    let start = u32::try_from(hash % u64::from(pool)).unwrap_or(0);
    (0..PROBES.min(pool)).map(move |i| (start + i) % pool)
}

/// What a slot is to a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// The client owns it.
    Mine,
    /// No client owns it, or its bucket has refilled: the client may take it.
    Free,
    /// Another client owns it and has spent from its bucket lately.
    Busy,
}

/// Judges a slot by its owner word and whether its bucket is full.
pub fn judge(owner: u64, me: u64, refilled: bool) -> Slot {
    match owner {
        o if o == me => Slot::Mine,
        0 => Slot::Free,
        _ if refilled => Slot::Free,
        _ => Slot::Busy,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_slot_is_reused_only_once_its_bucket_has_refilled() {
        assert_eq!(judge(7, 7, false), Slot::Mine);
        assert_eq!(judge(0, 7, false), Slot::Free);
        assert_eq!(judge(9, 7, false), Slot::Busy);
        assert_eq!(judge(9, 7, true), Slot::Free);
    }

    #[test]
    fn a_small_pool_is_probed_whole_and_once() {
        let mut seen: Vec<u32> = probes(5, 3).collect();
        seen.sort_unstable();
        assert_eq!(seen, vec![0, 1, 2]);
        assert_eq!(probes(5, 1).collect::<Vec<_>>(), vec![0]);
        assert_eq!(probes(5, 0).collect::<Vec<_>>(), vec![0], "a pool is never empty");
    }

    proptest! {
        #[test]
        fn probes_stay_in_the_pool_and_never_repeat(hash: u64, pool in 1u32..5000) {
            let p: Vec<u32> = probes(hash, pool).collect();
            prop_assert_eq!(p.len() as u32, PROBES.min(pool));
            prop_assert!(p.iter().all(|&s| s < pool));
            let mut d = p.clone();
            d.sort_unstable();
            d.dedup();
            prop_assert_eq!(d.len(), p.len());
        }

        /// Clients placed by their probes find their own slot again, and a client overflows
        /// only when every slot it probes is another's.
        #[test]
        fn a_placed_client_keeps_its_slot(clients in proptest::collection::vec(any::<u64>(), 1..300), pool in 1u32..50) {
            let mut owners = vec![0u64; pool as usize];
            let place = |owners: &mut Vec<u64>, me: u64| -> Option<u32> {
                for s in probes(me, pool) {
                    match judge(owners[s as usize], me, false) {
                        Slot::Mine => return Some(s),
                        Slot::Free => { owners[s as usize] = me; return Some(s) }
                        Slot::Busy => {}
                    }
                }
                None
            };
            let mut placed = Vec::new();
            for me in clients.into_iter().map(|c| c.max(1)) {
                match place(&mut owners, me) {
                    Some(s) => placed.push((me, s)),
                    None => prop_assert!(probes(me, pool).all(|s| owners[s as usize] != 0 && owners[s as usize] != me)),
                }
            }
            for (me, s) in placed {
                prop_assert_eq!(place(&mut owners, me), Some(s));
            }
        }
    }
}
