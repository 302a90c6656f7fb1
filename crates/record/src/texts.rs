//! What a reader keeps of a record's strings (command lines, mapping and function names,
//! reasons), whatever the file claims: each string at most [`MAX_TEXT`] bytes, and once a
//! record's strings have taken [`TEXT_BUDGET`] in all, each further one at most
//! [`MAX_TEXT_OVER_BUDGET`]. A frame holds at most `MAX_PAYLOAD` bytes, but compression lets a
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
    /// Bytes of text kept so far (at most the payloads the strings came in).
    kept: usize,
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
            self.kept += text.len();
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
        self.kept += kept.len();
        kept
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
            Value::String(s) => self.kept += s.len(),
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
        while texts.limit() == MAX_TEXT {
            texts.keep(&long[..MAX_TEXT]);
        }
        assert_eq!(texts.keep(&long).len(), MAX_TEXT_OVER_BUDGET);
    }
}
