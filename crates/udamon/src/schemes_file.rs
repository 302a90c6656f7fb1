//! Scheme files for `--schemes FILE`: damo's JSON schema, so that a damo user's file works. The
//! file is a JSON list of scheme objects, or damo's whole parameters (`{"kdamonds": [...]}`, as
//! `damo args damon --format json` writes them), whose schemes are taken.
//!
//! Values follow damo: plain numbers or strings with units (`"30 s"`, `"1 GiB"`, `"0 %"`,
//! `"5 samples"`, `"3 aggr_intervals"`, `"max"`). Access rates and ages need a unit, because
//! a bare number could mean either of two (damo's legacy `nr_accesses_unit`/`age_unit` keys give
//! it). Keys are checked: a misspelt key is an error, not a silently ignored setting. Every
//! error names the field, e.g. `schemes[0].access_pattern.age.min`.

use anyhow::{Context as _, Result, anyhow, bail};
use serde::Deserialize;
use serde::de::IgnoredAny;
use std::path::Path;
use udamon_core::damos::{
    AccessPattern, Action, Filter, FilterKind, GoalMetric, GoalTuner, Quota, QuotaGoal, Scheme,
    Watermarks, WmarkMetric,
};
use udamon_core::{AddrRange, Attrs};
use udamon_record::damo::number::{Num, Unit};

/// Reads `path` and builds its schemes for monitoring with `attrs` (percentages and ages become
/// sample and aggregation-interval counts).
pub fn load(path: &Path, attrs: &Attrs) -> Result<Vec<Scheme>> {
    let text = crate::small_file::read_text(path, "schemes file")?;
    parse(&text, attrs).with_context(|| format!("{}", path.display()))
}

pub fn parse(text: &str, attrs: &Attrs) -> Result<Vec<Scheme>> {
    let labelled = read_schemes(text)?;
    check_total(0, labelled.len())?;
    labelled
        .iter()
        .map(|(label, s)| s.to_scheme(attrs).with_context(|| label.clone()))
        .collect()
}

/// The most schemes a target may have. Every scheme is checked against every region at every
/// aggregation, so tens of thousands would pin a CPU to apply nothing in particular; damo's
/// users run a handful.
pub const MAX_SCHEMES: usize = 256;

/// Whether a target with `existing` schemes may take `adding` more (from a file or `ctl
/// add-schemes`): `Err` says why not.
pub fn check_total(existing: usize, adding: usize) -> Result<()> {
    if existing.saturating_add(adding) > MAX_SCHEMES {
        bail!(
            "{adding} scheme(s) on top of {existing} would be more than udamon applies to a \
             target ({MAX_SCHEMES}): merge schemes that do the same (an access pattern takes \
             ranges), or remove some first"
        );
    }
    Ok(())
}

/// A list of schemes that stops at [`MAX_SCHEMES`] + 1 rather than reading a file of a million
/// whole (so that the count, not the memory, is what a huge file runs into).
struct Bounded(Vec<SchemeJson>);

impl<'de> Deserialize<'de> for Bounded {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Each;
        impl<'de> serde::de::Visitor<'de> for Each {
            type Value = Bounded;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of schemes")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Bounded, A::Error> {
                let mut out = Vec::new();
                while let Some(scheme) = seq.next_element()? {
                    if out.len() == MAX_SCHEMES {
                        return Err(serde::de::Error::custom(format!(
                            "more than {MAX_SCHEMES} schemes, the most udamon applies to a \
                             target: merge schemes that do the same (an access pattern takes \
                             ranges)"
                        )));
                    }
                    out.push(scheme);
                }
                Ok(Bounded(out))
            }
        }
        d.deserialize_seq(Each)
    }
}

/// The file's schemes, each with the path that names it in errors (`schemes[0]`, or
/// `kdamonds[0].contexts[0].schemes[0]` in damo's parameters). The shape is told from the
/// JSON's top-level value, and each shape is read on its own, so that a mistake is reported at
/// its field rather than as "no shape matched".
fn read_schemes(text: &str) -> Result<Vec<(String, SchemeJson)>> {
    // The syntax first, holding nothing, then the shape from the top-level value.
    serde_json::from_str::<IgnoredAny>(text).map_err(|e| anyhow!("not JSON: {e}"))?;
    let top = text.trim_start().as_bytes().first();
    let params = top == Some(&b'{')
        && serde_json::from_str::<Shape>(text).is_ok_and(|s| s.kdamonds.is_some());
    match top {
        Some(b'[') => {
            let list: Bounded = typed(text, "schemes", 1)?;
            Ok(list
                .0
                .into_iter()
                .enumerate()
                .map(|(i, s)| (format!("schemes[{i}]"), s))
                .collect())
        }
        Some(b'{') if params => {
            let params: Params = typed(text, "", 6)?;
            let mut schemes = Vec::new();
            for (k, kdamond) in params.kdamonds.into_iter().enumerate() {
                for (c, context) in kdamond.contexts.into_iter().enumerate() {
                    for (s, scheme) in context.schemes.into_iter().enumerate() {
                        schemes.push((format!("kdamonds[{k}].contexts[{c}].schemes[{s}]"), scheme));
                    }
                }
            }
            Ok(schemes)
        }
        _ => bail!(
            "not a damo scheme file: expected a list of schemes or damo's parameters \
             ({{\"kdamonds\": [...]}}); see docs/schemes.md"
        ),
    }
}

/// `text` read as `T`; an error names the scheme (the first `scheme_depth` steps of its path,
/// after `prefix`) and then the field within it: `schemes[0]: action: invalid type: ...`.
fn typed<T: serde::de::DeserializeOwned>(
    text: &str,
    prefix: &str,
    scheme_depth: usize,
) -> Result<T> {
    let mut de = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let segments: Vec<_> = e.path().iter().collect();
        let (scheme, field) = segments.split_at(scheme_depth.min(segments.len()));
        let mut at = format!("{prefix}{}", join(scheme));
        if !field.is_empty() {
            at = format!("{at}: {}", join(field));
        }
        if at.is_empty() {
            anyhow!("{}", e.inner())
        } else {
            anyhow!("{at}: {}", e.inner())
        }
    })
}

/// Path steps written as serde_path_to_error writes them: `a.b[0].c`.
fn join(segments: &[&serde_path_to_error::Segment]) -> String {
    let mut out = String::new();
    for s in segments {
        if !out.is_empty() && !matches!(s, serde_path_to_error::Segment::Seq { .. }) {
            out.push('.');
        }
        out.push_str(&s.to_string());
    }
    out
}

/// Whether a JSON object is damo's parameters.
#[derive(Deserialize)]
struct Shape {
    kdamonds: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct Params {
    kdamonds: Vec<KdamondJson>,
}

#[derive(Deserialize)]
struct KdamondJson {
    #[serde(default)]
    contexts: Vec<ContextJson>,
}

#[derive(Deserialize)]
struct ContextJson {
    #[serde(default, deserialize_with = "bounded")]
    schemes: Vec<SchemeJson>,
}

fn bounded<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<SchemeJson>, D::Error> {
    Bounded::deserialize(d).map(|b| b.0)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a scheme (a JSON object)")]
struct SchemeJson {
    #[serde(default = "default_action")]
    action: String,
    access_pattern: Option<PatternJson>,
    apply_interval_us: Option<Num>,
    quotas: Option<QuotasJson>,
    watermarks: Option<WmarksJson>,
    #[serde(default)]
    filters: Vec<FilterJson>,
    target_nid: Option<u32>,
    // What damo's status dumps carry besides the parameters.
    #[serde(rename = "dests")]
    _dests: Option<IgnoredAny>,
    #[serde(rename = "stats")]
    _stats: Option<IgnoredAny>,
    #[serde(rename = "tried_regions")]
    _tried_regions: Option<IgnoredAny>,
    #[serde(rename = "core_filters")]
    _core_filters: Option<IgnoredAny>,
    #[serde(rename = "ops_filters")]
    _ops_filters: Option<IgnoredAny>,
    max_nr_snapshots: Option<Num>,
}

/// damo's default action.
fn default_action() -> String {
    "stat".to_string()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PatternJson {
    sz_bytes: Option<Range>,
    nr_accesses: Option<Range>,
    age: Option<Range>,
    nr_accesses_unit: Option<String>,
    age_unit: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Range {
    min: Num,
    max: Num,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QuotasJson {
    time_ms: Option<Num>,
    sz_bytes: Option<Num>,
    reset_interval_ms: Option<Num>,
    weights: Option<WeightsJson>,
    #[serde(default)]
    goals: Vec<GoalJson>,
    goal_tuner: Option<String>,
    fail_charge_num: Option<Num>,
    fail_charge_denom: Option<Num>,
    #[serde(rename = "effective_sz_bytes")]
    _effective_sz_bytes: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WeightsJson {
    sz_permil: Option<Num>,
    nr_accesses_permil: Option<Num>,
    age_permil: Option<Num>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GoalJson {
    metric: String,
    target_value: Num,
    current_value: Option<Num>,
    nid: Option<u32>,
    memcg_path: Option<String>,
    /// udamon's `target_rss_bytes` goal: which target.
    target: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WmarksJson {
    metric: String,
    interval_us: Option<Num>,
    high_permil: Option<Num>,
    mid_permil: Option<Num>,
    low_permil: Option<Num>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FilterJson {
    filter_type: String,
    #[serde(default = "yes")]
    matching: bool,
    #[serde(default = "yes")]
    allow: bool,
    memcg_path: Option<String>,
    address_range: Option<AddrJson>,
    damon_target_idx: Option<usize>,
    hugepage_size: Option<[Num; 2]>,
    /// udamon's `tid` filter: the thread.
    tid: Option<u32>,
    /// udamon's `cpu` filter: the CPU.
    cpu: Option<u32>,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddrJson {
    start: Num,
    end: Num,
}

/// A number in `unit`, or an error naming `field`.
fn num(n: &Num, unit: Unit, field: &str) -> Result<u64> {
    n.u64(unit).map_err(|e| anyhow!("{field}: {e}"))
}

/// The unit a damo value is written in: `%`, samples, aggregation intervals, a time, or none.
fn text_unit(n: &Num) -> Option<&str> {
    match n {
        Num::Text(t) => {
            let t = t.trim();
            if t == "max" {
                return None;
            }
            let i = t.find(|c: char| c.is_ascii_alphabetic() || c == '%')?;
            Some(t[i..].trim())
        }
        _ => None,
    }
}

/// The number in front of a unit such as `samples` that [`Num`] does not know.
fn leading_number(n: &Num, field: &str) -> Result<f64> {
    let Num::Text(t) = n else {
        return n.value(Unit::Count).map_err(|e| anyhow!("{field}: {e}"));
    };
    let end = t
        .find(|c: char| c.is_ascii_alphabetic() || c == '%')
        .unwrap_or(t.len());
    Num::Text(t[..end].trim().to_string())
        .value(Unit::Count)
        .map_err(|_| {
            anyhow!(
                "{field}: cannot read {t:?}: expected a number and its unit, such as \"5 %\", \
                 \"3 samples\", \"2 aggr_intervals\" or \"1 s\""
            )
        })
}

fn is_max(n: &Num) -> bool {
    matches!(n, Num::Text(t) if t.trim() == "max")
}

impl SchemeJson {
    fn to_scheme(&self, attrs: &Attrs) -> Result<Scheme> {
        let action: Action = self.action.parse().map_err(|e| anyhow!("action: {e}"))?;
        let pattern = match &self.access_pattern {
            Some(p) => p.to_pattern(attrs)?,
            None => AccessPattern::default(),
        };
        let mut scheme = Scheme::new(pattern, action);
        if let Some(n) = &self.apply_interval_us {
            scheme.apply_interval_us = num(n, Unit::Microseconds, "apply_interval_us")?;
        }
        if let Some(q) = &self.quotas {
            scheme.quota = q.to_quota()?;
        }
        if let Some(w) = &self.watermarks {
            scheme.wmarks = w.to_wmarks()?;
        }
        for (i, f) in self.filters.iter().enumerate() {
            scheme
                .filters
                .push(f.to_filter().with_context(|| format!("filters[{i}]"))?);
        }
        scheme.target_nid = self.target_nid;
        if let Some(n) = &self.max_nr_snapshots {
            scheme.max_nr_snapshots = num(n, Unit::Count, "max_nr_snapshots")?;
        }
        scheme.validate()?;
        Ok(scheme)
    }
}

impl PatternJson {
    fn to_pattern(&self, attrs: &Attrs) -> Result<AccessPattern> {
        let mut p = AccessPattern::default();
        if let Some(r) = &self.sz_bytes {
            let field = "access_pattern.sz_bytes";
            p.min_sz_region = num(&r.min, Unit::Bytes, &format!("{field}.min"))?;
            p.max_sz_region = num(&r.max, Unit::Bytes, &format!("{field}.max"))?;
            ordered(field, p.min_sz_region, p.max_sz_region)?;
        }
        if let Some(r) = &self.nr_accesses {
            let field = "access_pattern.nr_accesses";
            let max = attrs.max_nr_accesses();
            let to_samples = |n: &Num, which: &str| -> Result<u32> {
                let field = format!("{field}.{which}");
                if is_max(n) {
                    return Ok(max);
                }
                let unit = text_unit(n).or(self.nr_accesses_unit.as_deref());
                let v = leading_number(n, &field)?;
                match unit {
                    Some("%" | "percent") => {
                        Ok((v * max as f64 / 100.0).round().min(max as f64) as u32)
                    }
                    Some("samples" | "sample_intervals" | "sample") => Ok(v.round() as u32),
                    Some(u) => bail!("{field}: unknown unit {u:?}: use % or samples"),
                    None => bail!(
                        "{field}: {} has no unit: write e.g. \"0 %\" or \"5 samples\"",
                        describe(n)
                    ),
                }
            };
            p.min_nr_accesses = to_samples(&r.min, "min")?;
            p.max_nr_accesses = to_samples(&r.max, "max")?;
            ordered(field, p.min_nr_accesses.into(), p.max_nr_accesses.into())?;
        }
        if let Some(r) = &self.age {
            let field = "access_pattern.age";
            let aggr = attrs.aggr_interval_us.max(1);
            let to_aggrs = |n: &Num, which: &str| -> Result<u32> {
                let field = format!("{field}.{which}");
                if is_max(n) {
                    return Ok(u32::MAX);
                }
                let unit = text_unit(n)
                    .map(str::to_string)
                    .or_else(|| self.age_unit.clone());
                let aggrs = match unit.as_deref() {
                    Some("aggr_intervals" | "aggr_interval") => leading_number(n, &field)?,
                    Some("usec" | "us") if !matches!(n, Num::Text(_)) => {
                        leading_number(n, &field)? / aggr as f64
                    }
                    Some(_) => num(n, Unit::Microseconds, &field)? as f64 / aggr as f64,
                    None => bail!(
                        "{field}: {} has no unit: write e.g. \"30 s\" or \"3 aggr_intervals\"",
                        describe(n)
                    ),
                };
                Ok(aggrs.round().min(u32::MAX as f64) as u32)
            };
            p.min_age_region = to_aggrs(&r.min, "min")?;
            p.max_age_region = to_aggrs(&r.max, "max")?;
            ordered(field, p.min_age_region.into(), p.max_age_region.into())?;
        }
        Ok(p)
    }
}

fn describe(n: &Num) -> String {
    match n {
        Num::Text(t) => format!("{t:?}"),
        Num::Unsigned(v) => v.to_string(),
        Num::Signed(v) => v.to_string(),
        Num::Float(v) => v.to_string(),
    }
}

fn ordered(field: &str, min: u64, max: u64) -> Result<()> {
    if min > max {
        bail!("{field}: the range is reversed (min {min} > max {max})");
    }
    Ok(())
}

/// Milliseconds: a plain number is ms, a string may carry a time unit.
fn millis(n: &Num, field: &str) -> Result<u64> {
    match n {
        Num::Text(_) if text_unit(n).is_some() => Ok(num(n, Unit::Microseconds, field)? / 1000),
        _ => num(n, Unit::Count, field),
    }
}

/// Per-mille: a plain number is per-mille; damo writes `"0.3 %"` for 3 per-mille.
fn permil(n: &Num, field: &str) -> Result<u64> {
    match text_unit(n) {
        Some("%") => Ok((n
            .value(Unit::Percent)
            .map_err(|e| anyhow!("{field}: {e}"))?
            * 10.0)
            .round() as u64),
        _ => num(n, Unit::Count, field),
    }
}

impl QuotasJson {
    fn to_quota(&self) -> Result<Quota> {
        let mut q = Quota::default();
        if let Some(n) = &self.time_ms {
            q.ms = millis(n, "quotas.time_ms")?;
        }
        if let Some(n) = &self.sz_bytes {
            q.sz = num(n, Unit::Bytes, "quotas.sz_bytes")?;
        }
        if let Some(n) = &self.reset_interval_ms {
            q.reset_interval_ms = millis(n, "quotas.reset_interval_ms")?;
        }
        if let Some(w) = &self.weights {
            let get = |n: &Option<Num>, f: &str| n.as_ref().map(|n| permil(n, f)).transpose();
            q.weight_sz = get(&w.sz_permil, "quotas.weights.sz_permil")?.unwrap_or(0) as u32;
            q.weight_nr_accesses = get(&w.nr_accesses_permil, "quotas.weights.nr_accesses_permil")?
                .unwrap_or(0) as u32;
            q.weight_age = get(&w.age_permil, "quotas.weights.age_permil")?.unwrap_or(0) as u32;
        }
        for (i, g) in self.goals.iter().enumerate() {
            q.goals
                .push(g.to_goal().with_context(|| format!("quotas.goals[{i}]"))?);
        }
        if let Some(t) = &self.goal_tuner {
            q.goal_tuner = match t.as_str() {
                "consist" => GoalTuner::Consist,
                "temporal" => GoalTuner::Temporal,
                other => {
                    bail!("quotas.goal_tuner: unknown tuner {other:?}: use consist or temporal")
                }
            };
        }
        if let Some(n) = &self.fail_charge_num {
            q.fail_charge_num = num(n, Unit::Count, "quotas.fail_charge_num")? as u32;
        }
        if let Some(n) = &self.fail_charge_denom {
            q.fail_charge_denom = num(n, Unit::Count, "quotas.fail_charge_denom")? as u32;
        }
        Ok(q)
    }
}

impl GoalJson {
    fn to_goal(&self) -> Result<QuotaGoal> {
        let nid = || {
            self.nid
                .ok_or_else(|| anyhow!("metric {} needs a nid", self.metric))
        };
        let memcg = || {
            self.memcg_path
                .clone()
                .ok_or_else(|| anyhow!("metric {} needs a memcg_path", self.metric))
        };
        let metric = match self.metric.as_str() {
            "user_input" => GoalMetric::UserInput,
            "some_mem_psi_us" => GoalMetric::SomeMemPsiUs,
            "node_mem_used_bp" => GoalMetric::NodeMemUsedBp { nid: nid()? },
            "node_mem_free_bp" => GoalMetric::NodeMemFreeBp { nid: nid()? },
            "node_memcg_used_bp" => GoalMetric::NodeMemcgUsedBp {
                nid: nid()?,
                memcg_path: memcg()?,
            },
            "node_memcg_free_bp" => GoalMetric::NodeMemcgFreeBp {
                nid: nid()?,
                memcg_path: memcg()?,
            },
            "active_mem_bp" => GoalMetric::ActiveMemBp,
            "inactive_mem_bp" => GoalMetric::InactiveMemBp,
            "target_rss_bytes" => GoalMetric::TargetRssBytes {
                target: self.target.unwrap_or(0),
            },
            other => bail!(
                "metric: unknown metric {other:?}: use user_input, some_mem_psi_us, node_mem_used_bp, \
                 node_mem_free_bp, node_memcg_used_bp, node_memcg_free_bp, active_mem_bp, \
                 inactive_mem_bp or target_rss_bytes"
            ),
        };
        let unit = if matches!(metric, GoalMetric::TargetRssBytes { .. }) {
            Unit::Bytes
        } else {
            Unit::Count
        };
        let mut goal = QuotaGoal::new(metric, num(&self.target_value, unit, "target_value")?);
        if let Some(n) = &self.current_value {
            goal.current_value = num(n, unit, "current_value")?;
        }
        Ok(goal)
    }
}

impl WmarksJson {
    fn to_wmarks(&self) -> Result<Watermarks> {
        let metric = match self.metric.as_str() {
            "none" => WmarkMetric::None,
            "free_mem_rate" => WmarkMetric::FreeMemRate,
            other => {
                bail!("watermarks.metric: unknown metric {other:?}: use none or free_mem_rate")
            }
        };
        let get = |n: &Option<Num>, f: &str| n.as_ref().map(|n| permil(n, f)).transpose();
        Ok(Watermarks {
            metric,
            interval_us: self
                .interval_us
                .as_ref()
                .map(|n| num(n, Unit::Microseconds, "watermarks.interval_us"))
                .transpose()?
                .unwrap_or(0),
            high: get(&self.high_permil, "watermarks.high_permil")?.unwrap_or(0),
            mid: get(&self.mid_permil, "watermarks.mid_permil")?.unwrap_or(0),
            low: get(&self.low_permil, "watermarks.low_permil")?.unwrap_or(0),
        })
    }
}

impl FilterJson {
    fn to_filter(&self) -> Result<Filter> {
        let need = |what: &str| anyhow!("filter type {} needs {what}", self.filter_type);
        let kind = match self.filter_type.as_str() {
            "anon" => FilterKind::Anon,
            "active" => FilterKind::Active,
            "memcg" => FilterKind::Memcg {
                path: self.memcg_path.clone().ok_or_else(|| need("memcg_path"))?,
            },
            "young" => FilterKind::Young,
            "unmapped" => FilterKind::Unmapped,
            "hugepage_size" => {
                let [min, max] = self
                    .hugepage_size
                    .as_ref()
                    .ok_or_else(|| need("hugepage_size [min, max]"))?;
                let (min, max) = (
                    num(min, Unit::Bytes, "hugepage_size[0]")?,
                    num(max, Unit::Bytes, "hugepage_size[1]")?,
                );
                ordered("hugepage_size", min, max)?;
                FilterKind::HugepageSize { min, max }
            }
            "addr" => {
                let r = self
                    .address_range
                    .as_ref()
                    .ok_or_else(|| need("address_range {start, end}"))?;
                let (start, end) = (
                    num(&r.start, Unit::Bytes, "address_range.start")?,
                    num(&r.end, Unit::Bytes, "address_range.end")?,
                );
                if start >= end {
                    bail!("address_range: the range is empty or reversed ({start:#x}-{end:#x})");
                }
                FilterKind::Addr(AddrRange::new(start, end))
            }
            "target" => FilterKind::Target {
                idx: self
                    .damon_target_idx
                    .ok_or_else(|| need("damon_target_idx"))?,
            },
            "reads" => FilterKind::Reads,
            "writes" => FilterKind::Writes,
            "tid" => FilterKind::Tid(self.tid.ok_or_else(|| need("tid (a thread id)"))?),
            "cpu" => FilterKind::Cpu(self.cpu.ok_or_else(|| need("cpu (a CPU number)"))?),
            other => bail!(
                "filter_type: unknown type {other:?}: use anon, active, memcg, young, hugepage_size, unmapped, addr, target, reads, writes, tid or cpu"
            ),
        };
        Ok(Filter::new(kind, self.matching, self.allow))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs() -> Attrs {
        Attrs::default() // 5 ms / 100 ms: 20 samples per window
    }

    fn err(text: &str) -> String {
        format!("{:#}", parse(text, &attrs()).unwrap_err())
    }

    /// damo's own example (damo-and-masim.md §1.8), values as damo writes them.
    #[test]
    fn reads_damos_generated_parameters() {
        let text = r#"{"kdamonds": [{"state": "off", "contexts": [{"ops": "vaddr", "schemes": [{
            "action": "pageout",
            "access_pattern": {"sz_bytes": {"min": "0 B", "max": "max"},
                               "nr_accesses": {"min": "0 %", "max": "0 %"},
                               "age": {"min": "30 s", "max": "max"}},
            "apply_interval_us": "0 ns",
            "quotas": {"time_ms": "100 ms", "sz_bytes": "1024.000 MiB", "reset_interval_ms": "1 s",
                       "fail_charge_num": "0", "fail_charge_denom": "0",
                       "goals": [{"metric": "some_mem_psi_us", "nid": null, "memcg_path": null,
                                  "target_value": "1,000", "current_value": "0"}],
                       "goal_tuner": "consist", "effective_sz_bytes": "0 B",
                       "weights": {"sz_permil": "0 %", "nr_accesses_permil": "0.3 %", "age_permil": "0.7 %"}},
            "watermarks": {"metric": "free_mem_rate", "interval_us": "5 s",
                           "high_permil": "50 %", "mid_permil": "40 %", "low_permil": "20 %"},
            "filters": [{"filter_type": "anon", "matching": true, "allow": true, "memcg_path": null,
                         "address_range": null, "damon_target_idx": null, "hugepage_size": null}]
        }]}]}]}"#;
        let s = &parse(text, &attrs()).unwrap()[0];
        assert_eq!(s.action, Action::Pageout);
        let p = s.pattern;
        assert_eq!((p.min_sz_region, p.max_sz_region), (0, u64::MAX));
        assert_eq!((p.min_nr_accesses, p.max_nr_accesses), (0, 0));
        assert_eq!(
            (p.min_age_region, p.max_age_region),
            (300, u32::MAX),
            "30 s of 100 ms windows"
        );
        assert_eq!(
            (s.quota.ms, s.quota.sz, s.quota.reset_interval_ms),
            (100, 1 << 30, 1000)
        );
        assert_eq!(
            (
                s.quota.weight_sz,
                s.quota.weight_nr_accesses,
                s.quota.weight_age
            ),
            (0, 3, 7)
        );
        assert_eq!(s.quota.goals[0].metric, GoalMetric::SomeMemPsiUs);
        assert_eq!(s.quota.goals[0].target_value, 1000);
        assert_eq!(
            (s.wmarks.metric, s.wmarks.interval_us),
            (WmarkMetric::FreeMemRate, 5_000_000)
        );
        assert_eq!((s.wmarks.high, s.wmarks.mid, s.wmarks.low), (500, 400, 200));
        assert_eq!(s.filters.ops().len(), 1);
    }

    #[test]
    fn a_bare_list_with_samples_and_aggregation_intervals() {
        let text = r#"[{"action": "collapse",
            "access_pattern": {"nr_accesses": {"min": "5 samples", "max": "100 %"},
                               "age": {"min": "3 aggr_intervals", "max": "max"}}},
            {"access_pattern": {"nr_accesses": {"min": 0, "max": 10}, "nr_accesses_unit": "percent",
                                "age": {"min": 5000000, "max": "max"}, "age_unit": "usec"}}]"#;
        let s = parse(text, &attrs()).unwrap();
        assert_eq!(
            (s[0].pattern.min_nr_accesses, s[0].pattern.max_nr_accesses),
            (5, 20)
        );
        assert_eq!(s[0].pattern.min_age_region, 3);
        assert_eq!(s[1].action, Action::Stat, "damo's default action");
        assert_eq!(
            (s[1].pattern.max_nr_accesses, s[1].pattern.min_age_region),
            (2, 50)
        );
    }

    #[test]
    fn mistakes_name_the_field() {
        assert!(
            err(r#"[{"action": "pageot"}]"#)
                .contains("schemes[0]: action: unknown DAMOS action `pageot`")
        );
        let reversed = r#"[{"access_pattern": {"sz_bytes": {"min": "2 MiB", "max": "4 KiB"}}}]"#;
        assert!(
            err(reversed).contains("schemes[0]: access_pattern.sz_bytes: the range is reversed")
        );
        let no_unit =
            r#"[{"action": "pageout", "access_pattern": {"age": {"min": "30", "max": "max"}}}]"#;
        assert!(
            err(no_unit).contains("access_pattern.age.min: \"30\" has no unit"),
            "{}",
            err(no_unit)
        );
        let typo = r#"[{"action": "pageout", "acess_pattern": {}}]"#;
        assert!(
            err(typo).starts_with(
                "schemes[0]: acess_pattern: unknown field `acess_pattern`, expected one of"
            ),
            "{}",
            err(typo)
        );
        let filter = r#"[{"filters": [{"filter_type": "addr"}]}]"#;
        assert!(
            err(filter).contains("schemes[0]: filters[0]: filter type addr needs address_range")
        );
        let no_tid = r#"[{"filters": [{"filter_type": "anon"}, {"filter_type": "tid"}]}]"#;
        assert!(
            err(no_tid).contains("schemes[0]: filters[1]: filter type tid needs tid (a thread id)"),
            "{}",
            err(no_tid)
        );
        let bad_cpu = r#"[{"filters": [{"filter_type": "cpu", "cpu": -1}]}]"#;
        assert!(err(bad_cpu).contains("cpu"), "{}", err(bad_cpu));
    }

    #[test]
    fn sample_filters_read_with_their_arguments() {
        let text = r#"[{"action": "pageout", "filters": [
            {"filter_type": "writes", "matching": false, "allow": true},
            {"filter_type": "reads", "matching": true, "allow": false},
            {"filter_type": "tid", "tid": 4242, "matching": true, "allow": true},
            {"filter_type": "cpu", "cpu": 3, "matching": false, "allow": false}]}]"#;
        let s = &parse(text, &attrs()).unwrap()[0];
        assert_eq!(
            s.filters.core(),
            [
                Filter::new(FilterKind::Writes, false, true),
                Filter::new(FilterKind::Reads, true, false)
            ]
        );
        assert_eq!(
            s.filters.ops(),
            [
                Filter::new(FilterKind::Tid(4242), true, true),
                Filter::new(FilterKind::Cpu(3), false, false)
            ]
        );
    }

    #[test]
    fn a_value_that_is_no_number_is_quoted_whole() {
        for bad in ["nan %", "% 5", "fast samples"] {
            let text = format!(
                r#"[{{"access_pattern": {{"nr_accesses": {{"min": "{bad}", "max": "max"}}}}}}]"#
            );
            let e = err(&text);
            assert!(
                e.contains(&format!(
                    "cannot read {bad:?}: expected a number and its unit"
                )),
                "{e}"
            );
        }
    }

    #[test]
    fn a_file_of_too_many_schemes_is_refused_by_count() {
        let one = r#"{"action": "stat"}"#;
        let list = |n: usize| format!("[{}]", vec![one; n].join(","));
        assert_eq!(
            parse(&list(MAX_SCHEMES), &attrs()).unwrap().len(),
            MAX_SCHEMES
        );
        let e = err(&list(MAX_SCHEMES + 1));
        assert!(
            e.contains(&format!("more than {MAX_SCHEMES} schemes")),
            "{e}"
        );
        // Counted over the contexts of damo's parameters too.
        let context = format!(r#"{{"schemes": {}}}"#, list(MAX_SCHEMES / 2 + 1));
        let params = format!(r#"{{"kdamonds": [{{"contexts": [{context}, {context}]}}]}}"#);
        let e = err(&params);
        assert!(e.contains("more than udamon applies to a target"), "{e}");
        // What ctl add-schemes checks against a target's schemes.
        assert!(check_total(MAX_SCHEMES - 1, 1).is_ok());
        assert!(check_total(MAX_SCHEMES, 1).is_err());
    }

    /// Serde's own mistakes (a wrong type, an unknown or missing field) name the scheme and
    /// the field too, in both shapes of file, rather than "no variant matched".
    #[test]
    fn shape_mistakes_name_the_field() {
        let wrong_type = err(r#"[{"action": 1}]"#);
        assert!(
            wrong_type
                .starts_with("schemes[0]: action: invalid type: integer `1`, expected a string"),
            "{wrong_type}"
        );
        let nested = err(r#"[{"action": "stat"}, {"watermarks": {"interval_us": "1 s"}}]"#);
        assert!(
            nested.starts_with("schemes[1]: watermarks: missing field `metric`"),
            "{nested}"
        );
        let unknown =
            err(r#"[{"access_pattern": {"age": {"min": "1 s", "max": "max", "mx": 1}}}]"#);
        assert!(
            unknown.starts_with("schemes[0]: access_pattern.age.mx: unknown field `mx`"),
            "{unknown}"
        );
        let params =
            r#"{"kdamonds": [{"contexts": [{"schemes": [{"action": "stat"}, {"action": []}]}]}]}"#;
        assert!(
            err(params).starts_with(
                "kdamonds[0].contexts[0].schemes[1]: action: invalid type: sequence, expected a string"
            ),
            "{}",
            err(params)
        );
        let outer = err(r#"{"kdamonds": [{"contexts": 3}]}"#);
        assert!(
            outer.starts_with("kdamonds[0].contexts: invalid type: integer `3`"),
            "{outer}"
        );
        let not_a_number = err(r#"[{"access_pattern": {"age": {"min": true, "max": "max"}}}]"#);
        assert!(
            not_a_number.starts_with(
                "schemes[0]: access_pattern.age.min: expected a number, or a string such as \"30 s\""
            ),
            "{not_a_number}"
        );
        let not_a_scheme = err(r#"["pageout"]"#);
        assert!(
            not_a_scheme
                .starts_with("schemes[0]: invalid type: string \"pageout\", expected a scheme"),
            "{not_a_scheme}"
        );
        assert!(err(r#"{"schemes": []}"#).starts_with("not a damo scheme file: expected a list"));
        assert!(err("[{").starts_with("not JSON: "), "{}", err("[{"));
        for e in [
            wrong_type,
            nested,
            unknown,
            outer,
            not_a_number,
            not_a_scheme,
        ] {
            assert!(!e.contains('\n'), "one line: {e}");
        }
    }
}
