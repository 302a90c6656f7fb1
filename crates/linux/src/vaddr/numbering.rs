//! Numbers for what the record names once and then refers to by number (code sites, call
//! stacks), with a bounded memory: a number is good for the next [`Numbering::kept`] numbers
//! after it, then its key is forgotten, and gets a new number (and is named again) when seen
//! again.
//!
//! Without the bound, a program whose code keeps moving (a JIT compiler's output) would grow
//! the monitor's tables for as long as it is monitored. With it, a reader that needs the names
//! again (serve's rotated records) knows which numbers can still come: only those within
//! `kept` of the newest.

use std::borrow::Borrow;
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

pub(super) struct Numbering<K> {
    numbers: HashMap<K, u32>,
    /// Keys in the order they were numbered, to forget the oldest.
    order: VecDeque<(u32, K)>,
    next: u32,
    kept: u32,
}

impl<K: Hash + Eq + Clone> Numbering<K> {
    pub(super) fn new(kept: u32) -> Self {
        Numbering {
            numbers: HashMap::new(),
            order: VecDeque::new(),
            next: 0,
            kept,
        }
    }

    /// The number `key` has, if it still has one.
    pub(super) fn get<Q>(&self, key: &Q) -> Option<u32>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.numbers.get(key).copied()
    }

    /// Numbers `key`, which has no number: the next one. Keys numbered `kept` numbers before
    /// it are forgotten.
    pub(super) fn assign(&mut self, key: K) -> u32 {
        let number = self.next;
        self.next += 1;
        while let Some((oldest, _)) = self.order.front()
            && oldest + self.kept <= number
        {
            let (oldest, key) = self.order.pop_front().expect("a front");
            // The key may have been forgotten already, or numbered again since.
            if self.numbers.get(&key) == Some(&oldest) {
                self.numbers.remove(&key);
            }
        }
        self.numbers.insert(key.clone(), number);
        self.order.push_back((number, key));
        number
    }

    /// Forgets every key `forget` picks.
    pub(super) fn forget(&mut self, forget: impl Fn(&K) -> bool) {
        self.numbers.retain(|k, _| !forget(k));
    }

    /// Keys that have a number.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.numbers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_is_good_for_the_next_kept_numbers_then_forgotten() {
        let mut n = Numbering::new(3);
        assert_eq!((n.assign('a'), n.assign('b'), n.assign('c')), (0, 1, 2));
        assert_eq!(n.get(&'a'), Some(0));
        assert_eq!(n.assign('d'), 3);
        assert_eq!(n.get(&'a'), None, "three numbers after it");
        assert_eq!(n.get(&'b'), Some(1));
        assert_eq!(n.assign('a'), 4, "seen again: a new number");
        assert_eq!(n.len(), 3, "memory stays within kept");
        for (i, k) in ('e'..='z').enumerate() {
            assert_eq!(n.assign(k), 5 + i as u32);
            assert!(n.len() <= 3);
        }
    }

    #[test]
    fn forgotten_keys_are_numbered_again_and_their_old_numbers_go_quietly() {
        let mut n = Numbering::new(4);
        n.assign((0, 10));
        n.assign((1, 10));
        n.forget(|&(target, _)| target == 0);
        assert_eq!(n.get(&(0, 10)), None);
        assert_eq!(n.assign((0, 10)), 2);
        // Number 0's turn to be forgotten comes: the key holds number 2 now and keeps it.
        n.assign((2, 10));
        n.assign((3, 10));
        n.assign((4, 10));
        assert_eq!(n.get(&(0, 10)), Some(2));
        assert_eq!(n.get(&(1, 10)), None);
    }
}
