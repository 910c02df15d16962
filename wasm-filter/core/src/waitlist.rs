//! The connections held by a limit (onLimit: delay) on one worker, and the order they are
//! retried in: longest waiting first. A retry frees a few tokens and the first retried take
//! them, so a fixed order would starve the last until its maxWait.

use std::collections::HashMap;

#[derive(Debug)]
struct Waiter {
    wake_at: u64,
    /// When its message started waiting: its place in line.
    since: u64,
    tenant: String,
}

/// Held connections by id (the glue's stream context id).
#[derive(Debug, Default)]
pub struct WaitList {
    waiters: HashMap<u32, Waiter>,
}

impl WaitList {
    /// Registers a held connection to retry at `wake_at`, `since` when its held message started
    /// waiting; one already waiting is only re-armed, and keeps its place in line.
    pub fn hold(&mut self, id: u32, tenant: &str, since: u64, wake_at: u64) {
        match self.waiters.get_mut(&id) {
            Some(existing) => existing.wake_at = wake_at,
            None => {
                let tenant = tenant.to_owned();
                self.waiters.insert(id, Waiter { wake_at, since, tenant });
            }
        }
    }

    pub fn release(&mut self, id: u32) {
        self.waiters.remove(&id);
    }

    pub fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    /// The connections due for a retry at `now`, longest waiting first.
    pub fn due(&self, now: u64) -> Vec<u32> {
        self.in_line(|_, w| w.wake_at <= now)
    }

    /// The waiting connections of any of `tenants` but `me`, each once, longest waiting first.
    pub fn waiters_of(&self, tenants: &[String], me: u32) -> Vec<u32> {
        self.in_line(|id, w| id != me && tenants.contains(&w.tenant))
    }

    fn in_line(&self, wanted: impl Fn(u32, &Waiter) -> bool) -> Vec<u32> {
        let mut line: Vec<(u64, u32)> = self
            .waiters
            .iter()
            .filter(|(id, w)| wanted(**id, w))
            .map(|(id, w)| (w.since, *id))
            .collect();
        line.sort_unstable();
        line.into_iter().map(|(_, id)| id).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_waiters_come_longest_waiting_first() {
        let mut list = WaitList::default();
        list.hold(1, "acme", 30, 100);
        list.hold(2, "acme", 10, 100);
        list.hold(3, "globex", 20, 90);
        list.hold(4, "acme", 5, 101);
        assert_eq!(list.due(99), vec![3]);
        assert_eq!(list.due(100), vec![2, 3, 1]);
        assert_eq!(list.due(101), vec![4, 2, 3, 1]);
    }

    #[test]
    fn re_arming_keeps_the_place_in_line() {
        let mut list = WaitList::default();
        list.hold(1, "acme", 10, 100);
        list.hold(2, "acme", 20, 100);
        list.hold(1, "acme", 30, 200);
        assert_eq!(list.due(100), vec![2], "re-armed to 200");
        assert_eq!(list.due(200), vec![1, 2], "still waiting since 10");
    }

    #[test]
    fn a_tenants_waiters_leave_out_the_caller_and_other_tenants() {
        let mut list = WaitList::default();
        list.hold(1, "acme", 30, 100);
        list.hold(2, "globex", 10, 100);
        list.hold(3, "acme", 20, 500);
        list.hold(4, "acme", 5, 100);
        let of = |tenants: &[&str], me| list.waiters_of(&tenants.iter().map(|t| t.to_string()).collect::<Vec<_>>(), me);
        assert_eq!(of(&["acme"], 4), vec![3, 1], "due or not");
        assert_eq!(of(&["globex"], 4), vec![2]);
        assert_eq!(of(&["acme", "globex"], 4), vec![2, 3, 1], "each once, in one line");
        assert_eq!(of(&["initech"], 4), Vec::<u32>::new());
    }

    #[test]
    fn a_released_waiter_is_gone() {
        let mut list = WaitList::default();
        list.hold(1, "acme", 10, 100);
        list.hold(2, "acme", 20, 100);
        list.release(1);
        list.release(3);
        assert_eq!(list.due(100), vec![2]);
        assert_eq!(list.waiters_of(&["acme".to_string()], 0), vec![2]);
        list.release(2);
        assert!(list.is_empty());
        list.hold(1, "acme", 40, 300);
        assert_eq!(list.due(300), vec![1], "held again: a new place in line");
    }
}
