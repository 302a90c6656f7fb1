//! `report code --pprof`: a [`StackProfile`] as a gzipped pprof `profile.proto`, which
//! `go tool pprof`, Pyroscope, Parca and speedscope read.
//!
//! Two sample types: `samples/count` and `hot_bytes/bytes` (see [`stacks`](crate::stacks) for
//! how bytes are shared). Each code site is a location at its instruction pointer, with one line
//! naming its function (or, without one, its object in brackets); a function is one per
//! distinct (name, object), a mapping one per object, spanning its sites. The few
//! `profile.proto` messages are written out here with prost's derive, field numbers as in
//! <https://github.com/google/pprof/blob/main/proto/profile.proto>.

use crate::stacks::StackProfile;
use flate2::Compression;
use flate2::write::GzEncoder;
use prost::Message;
use std::collections::HashMap;
use std::io::Write;

#[derive(Clone, PartialEq, prost::Message)]
pub struct Profile {
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueType {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    /// Innermost first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
}

/// An object holding code: its sites' addresses, already symbolized (`has_functions`), so
/// that pprof's tools look for no binary.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Mapping {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    #[prost(int64, tag = "5")]
    pub filename: i64,
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Location {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    #[prost(uint64, tag = "3")]
    pub address: u64,
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Line {
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Function {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(int64, tag = "2")]
    pub name: i64,
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    #[prost(int64, tag = "4")]
    pub filename: i64,
}

/// The strings of a profile: index 0 is the empty string, as the format requires.
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Self {
        let mut s = Strings {
            table: Vec::new(),
            index: HashMap::new(),
        };
        s.get("");
        s
    }

    fn get(&mut self, text: &str) -> i64 {
        if let Some(&i) = self.index.get(text) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(text.to_string());
        self.index.insert(text.to_string(), i);
        i
    }
}

/// The profile message for `p`; `comment` goes into the profile's comments (what was looked at).
pub fn profile(p: &StackProfile, comment: &str) -> Profile {
    let mut strings = Strings::new();
    let sample_type = vec![
        ValueType {
            r#type: strings.get("samples"),
            unit: strings.get("count"),
        },
        ValueType {
            r#type: strings.get("hot_bytes"),
            unit: strings.get("bytes"),
        },
    ];
    let mut functions: Vec<Function> = Vec::new();
    let mut function_ids: HashMap<(String, String), u64> = HashMap::new();
    let mut locations: Vec<Location> = Vec::new();
    let mut location_ids: HashMap<u32, u64> = HashMap::new();
    let mut mappings: Vec<Mapping> = Vec::new();
    let mut mapping_ids: HashMap<String, u64> = HashMap::new();
    let mut location = |site: u32| -> u64 {
        if let Some(&id) = location_ids.get(&site) {
            return id;
        }
        let name = p.frame_name(site);
        let code = p.sites.get(&site);
        let object = code.and_then(|c| c.object.clone()).unwrap_or_default();
        let next_function = functions.len() as u64 + 1;
        let function_id = *function_ids
            .entry((name.clone(), object.clone()))
            .or_insert_with(|| {
                let name = strings.get(&name);
                functions.push(Function {
                    id: next_function,
                    name,
                    system_name: name,
                    filename: strings.get(&object),
                });
                next_function
            });
        let address = code.map_or(0, |c| c.ip);
        let next_mapping = mappings.len() as u64 + 1;
        let mapping_id = *mapping_ids.entry(object.clone()).or_insert_with(|| {
            mappings.push(Mapping {
                id: next_mapping,
                memory_start: address,
                memory_limit: address + 1,
                filename: strings.get(&object),
                has_functions: true,
            });
            next_mapping
        });
        let m = &mut mappings[mapping_id as usize - 1];
        (m.memory_start, m.memory_limit) =
            (m.memory_start.min(address), m.memory_limit.max(address + 1));
        let id = locations.len() as u64 + 1;
        locations.push(Location {
            id,
            mapping_id,
            address,
            line: vec![Line { function_id }],
        });
        location_ids.insert(site, id);
        id
    };
    let sample = p
        .stacks
        .iter()
        .map(|row| Sample {
            location_id: row.sites.iter().map(|&s| location(s)).collect(),
            value: vec![row.samples as i64, row.bytes.round() as i64],
        })
        .collect();
    let comment = vec![strings.get(comment)];
    let default_sample_type = strings.get("hot_bytes");
    Profile {
        sample_type,
        sample,
        mapping: mappings,
        location: locations,
        function: functions,
        string_table: strings.table,
        comment,
        default_sample_type,
    }
}

/// `profile` encoded and gzipped, as pprof's tools read it.
pub fn gzipped(profile: &Profile) -> std::io::Result<Vec<u8>> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(&profile.encode_to_vec())?;
    gz.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code::CodeOptions;
    use crate::stacks::{stack_profile, tests::frames};
    use flate2::read::GzDecoder;
    use std::io::Read;

    #[test]
    fn the_profile_decodes_with_named_stacks_and_values_that_add_up() {
        let p = stack_profile(frames(true), &CodeOptions::default()).unwrap();
        let bytes = gzipped(&profile(&p, "test")).unwrap();
        let mut raw = Vec::new();
        GzDecoder::new(&bytes[..]).read_to_end(&mut raw).unwrap();
        let decoded = Profile::decode(&raw[..]).unwrap();
        let s = &decoded.string_table;
        assert_eq!(s[0], "");
        let types: Vec<(&str, &str)> = decoded
            .sample_type
            .iter()
            .map(|t| (s[t.r#type as usize].as_str(), s[t.unit as usize].as_str()))
            .collect();
        assert_eq!(types, [("samples", "count"), ("hot_bytes", "bytes")]);
        let function_of = |location: u64| {
            let l = &decoded.location[location as usize - 1];
            assert_eq!(l.id, location);
            let f = &decoded.function[l.line[0].function_id as usize - 1];
            s[f.name as usize].as_str()
        };
        let stacks: Vec<(Vec<&str>, i64, i64)> = decoded
            .sample
            .iter()
            .map(|x| {
                let names = x.location_id.iter().map(|&l| function_of(l)).collect();
                (names, x.value[0], x.value[1])
            })
            .collect();
        assert_eq!(stacks[0], (vec!["touch", "caller_a", "main"], 4, 8192));
        assert!(stacks.contains(&(vec!["[libfoo.so]", "caller_b", "main"], 2, 2048)));
        let total: i64 = stacks.iter().map(|x| x.2).sum();
        assert_eq!(total, 12288, "the hot bytes of a window");
        assert_eq!(decoded.sample.len(), 3);
        assert_eq!(decoded.function.len(), 5);
        assert_eq!(decoded.mapping.len(), 1, "one object");
        let m = &decoded.mapping[0];
        assert!(decoded.location.iter().all(|l| l.mapping_id == 1
            && (m.memory_start..m.memory_limit).contains(&l.address)));
    }
}
