//! What a reader keeps of a record's strings (command lines, mapping and function names,
//! reasons), whatever the file claims: each string at most [`MAX_TEXT`] bytes, and once a
//! record's different strings have taken [`TEXT_BUDGET`] in all, each further one at most
//! [`MAX_TEXT_OVER_BUDGET`] (a name repeated in every `mappings` event counts once). A frame holds at most `MAX_PAYLOAD` bytes, but compression lets a
//! small file hold many frames of one long string: 300 command lines of 16 MiB in a 183 KB file
//! once cost a report 9 GB. A cut string ends with `…`, and the reader tells how many were cut
//! (a [`DamageKind::TextCut`](crate::DamageKind::TextCut)).

use serde::de::DeserializeOwned;
use serde_json::Value;

/// The longest string kept: a path (`PATH_MAX`) with the kernel's ` (deleted)` and room to
/// spare, far more than any report shows of one.
pub const MAX_TEXT: usize = crate::model::MAX_MAPPING_NAME;

/// The text a record's strings may take in a reader's hands before each is cut shorter.
pub const TEXT_BUDGET: usize = 64 << 20;

/// The longest string kept once [`TEXT_BUDGET`] is spent.
pub const MAX_TEXT_OVER_BUDGET: usize = 64;

/// The marker that ends a cut string.
const CUT: char = '…';

/// A reader's account of the strings it kept and cut.
#[derive(Debug, Default)]
pub struct Texts {
    /// Bytes of the different strings kept so far (those of small payloads counted by the
    /// payload). A string seen before costs nothing new to a report that keeps it again as
    /// it did (a process's mapping names, in every `mappings` event), so only new ones count.
    kept: usize,
    /// Hashes of the strings counted in `kept`.
    seen: std::collections::HashSet<u64>,
    /// Strings cut, and the bytes not kept, since [`Texts::take_cut`] last asked.
    cut: u64,
    cut_bytes: u64,
}

impl Texts {
    /// The longest string kept now.
    pub fn limit(&self) -> usize {
        if self.kept < TEXT_BUDGET {
            MAX_TEXT
        } else {
            MAX_TEXT_OVER_BUDGET
        }
    }

    /// What is kept of `text`: all of it within [`Texts::limit`], else its start (whole
    /// characters) and `…`.
    pub fn keep(&mut self, text: &str) -> String {
        let limit = self.limit();
        if text.len() <= limit {
            self.count(text);
            return text.to_string();
        }
        let mut end = limit - CUT.len_utf8();
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let mut kept = String::with_capacity(end + CUT.len_utf8());
        kept.push_str(&text[..end]);
        kept.push(CUT);
        self.cut += 1;
        self.cut_bytes += (text.len() - end) as u64;
        self.count(&kept);
        kept
    }

    /// Counts `text` against the budget, unless it was counted before.
    fn count(&mut self, text: &str) {
        use std::hash::BuildHasher;
        let hash =
            std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
                .hash_one(text);
        if self.seen.insert(hash) {
            self.kept += text.len();
        }
    }

    /// Decodes a JSON payload with every string in it (object keys too) kept by
    /// [`Texts::keep`]. A payload no longer than the limit holds no string to cut and is
    /// decoded as it is.
    pub fn json<T: DeserializeOwned>(&mut self, payload: &[u8]) -> serde_json::Result<T> {
        if payload.len() <= self.limit() {
            self.kept += payload.len();
            return serde_json::from_slice(payload);
        }
        let mut value: Value = serde_json::from_slice(payload)?;
        self.keep_in(&mut value);
        serde_json::from_value(value)
    }

    fn keep_in(&mut self, value: &mut Value) {
        match value {
            Value::String(s) if s.len() > self.limit() => *s = self.keep(s),
            Value::String(s) => self.count(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.keep_in(v)),
            Value::Object(map) => {
                let long_key = map.keys().any(|k| k.len() > self.limit());
                if long_key {
                    *map = std::mem::take(map)
                        .into_iter()
                        .map(|(k, v)| (self.keep(&k), v))
                        .collect();
                }
                map.values_mut().for_each(|v| self.keep_in(v));
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// The strings cut, and the bytes they lost, since the last call; `None` when none were.
    pub fn take_cut(&mut self) -> Option<(u64, u64)> {
        let cut = (self.cut > 0).then_some((self.cut, self.cut_bytes));
        (self.cut, self.cut_bytes) = (0, 0);
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_strings_are_cut_at_a_character_and_counted() {
        let mut texts = Texts::default();
        assert_eq!(texts.keep("short"), "short");
        assert_eq!(texts.take_cut(), None);
        let long = "é".repeat(MAX_TEXT);
        let kept = texts.keep(&long);
        assert!(
            kept.len() <= MAX_TEXT && kept.ends_with(CUT),
            "{}",
            kept.len()
        );
        assert!(long.starts_with(kept.trim_end_matches(CUT)));
        assert_eq!(
            texts.take_cut(),
            Some((1, (long.len() - (kept.len() - CUT.len_utf8())) as u64))
        );
    }

    #[test]
    fn json_strings_and_keys_are_cut_and_past_the_budget_cut_shorter() {
        let mut texts = Texts::default();
        let long = "x".repeat(1 << 20);
        let payload = serde_json::json!({ "cmdline": long, "counters": { long.clone(): 1 } });
        let value: Value = texts.json(&serde_json::to_vec(&payload).unwrap()).unwrap();
        let cmdline = value["cmdline"].as_str().unwrap();
        assert!(cmdline.len() <= MAX_TEXT, "{}", cmdline.len());
        let keys: Vec<&String> = value["counters"].as_object().unwrap().keys().collect();
        assert!(keys[0].len() <= MAX_TEXT);
        assert_eq!(texts.take_cut().map(|c| c.0), Some(2));
        // The same string again and again costs nothing more ...
        for _ in 0..2 * TEXT_BUDGET / MAX_TEXT {
            texts.keep(&long[..MAX_TEXT]);
        }
        assert_eq!(texts.limit(), MAX_TEXT);
        // ... but different ones do, until the budget is spent.
        let mut n = 0u64;
        while texts.limit() == MAX_TEXT {
            n += 1;
            texts.keep(&format!("{n}{}", &long[..MAX_TEXT - 20]));
        }
        assert_eq!(texts.keep(&long).len(), MAX_TEXT_OVER_BUDGET);
    }
}
