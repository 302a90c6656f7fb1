//! A size-bounded map from code addresses to per-IP analyses.
//!
//! Two generations approximate LRU without per-hit bookkeeping: inserts go to the young
//! generation; when it is full, the old generation is dropped and the young one becomes old. A
//! hit in the old generation moves the entry back to the young one, so entries used at least
//! once per generation survive, and the map never holds more than twice the generation size.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A cheap hasher for `u64` keys (the splitmix64 finaliser): code addresses are not chosen by
/// an adversary, and SipHash would dominate the warm path.
#[derive(Default)]
pub(crate) struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 ^= n;
    }
}

type Map<V> = HashMap<u64, V, BuildHasherDefault<AddrHasher>>;

pub(crate) struct BoundedMap<V: Copy> {
    young: Map<V>,
    old: Map<V>,
    generation: usize,
}

impl<V: Copy> BoundedMap<V> {
    /// A map holding at most `max_entries` (at least 2).
    pub(crate) fn new(max_entries: usize) -> Self {
        Self {
            young: Map::default(),
            old: Map::default(),
            generation: (max_entries / 2).max(1),
        }
    }

    pub(crate) fn get(&mut self, key: u64) -> Option<V> {
        if let Some(&value) = self.young.get(&key) {
            return Some(value);
        }
        let value = self.old.remove(&key)?;
        self.insert(key, value);
        Some(value)
    }

    pub(crate) fn insert(&mut self, key: u64, value: V) {
        if self.young.len() >= self.generation {
            // Swapping keeps both tables' allocations, so a full map stops allocating.
            std::mem::swap(&mut self.young, &mut self.old);
            self.young.clear();
        }
        self.young.insert(key, value);
    }

    /// Removes every key in `start..end`.
    pub(crate) fn remove_range(&mut self, start: u64, end: u64) {
        let keep = |key: &u64, _: &mut V| !(start..end).contains(key);
        self.young.retain(keep);
        self.old.retain(keep);
    }

    pub(crate) fn clear(&mut self) {
        self.young.clear();
        self.old.clear();
    }

    pub(crate) fn len(&self) -> usize {
        self.young.len() + self.old.len()
    }
}
