//! A connection's recent permission decisions, by name (a subject, a topic), so that a name's
//! permission is decided once, not per message: at most `CACHED` names, forgotten together
//! when full or when the configuration in force changes (`Config::built`), since a permission
//! change applies to open connections.

#[derive(Debug)]
pub struct Decisions<D> {
    built: u64,
    names: Vec<(Box<[u8]>, D)>,
}

impl<D> Default for Decisions<D> {
    fn default() -> Self {
        Decisions {
            built: 0,
            names: Vec::new(),
        }
    }
}

pub const CACHED: usize = 64;

impl<D: Copy> Decisions<D> {
    /// The decision for `name` under the configuration `built`: kept, or made by `decide`.
    pub fn decide(&mut self, built: u64, name: &[u8], decide: impl FnOnce(&[u8]) -> D) -> D {
        if self.built != built {
            self.built = built;
            self.names.clear();
        }
        if let Some((_, d)) = self.names.iter().find(|(n, _)| &**n == name) {
            return *d;
        }
        let d = decide(name);
        if self.names.len() == CACHED {
            self.names.clear();
        }
        self.names.push((name.into(), d));
        d
    }

    #[cfg(test)]
    pub fn kept(&self) -> usize {
        self.names.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decided_once_per_name_until_the_policy_changes_and_bounded() {
        let mut d = Decisions::default();
        let mut asked = 0;
        for _ in 0..3 {
            assert!(!d.decide(1, b"t", |_| {
                asked += 1;
                false
            }));
        }
        assert_eq!(asked, 1, "decided once");
        assert!(!d.decide(1, b"t", |_| true), "kept while configuration 1 holds");
        assert!(d.decide(2, b"t", |_| true), "dropped with the policy that changed it");
        for i in 0..200 {
            d.decide(2, format!("n{i}").as_bytes(), |_| true);
        }
        assert!(d.kept() <= CACHED);
    }
}
