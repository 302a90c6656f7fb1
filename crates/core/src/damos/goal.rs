//! Quota goals (docs/algorithms.md#damos-goals): a target value for a system (or target) metric,
//! turned into a score that drives the effective quota's feedback loop.
//!
//! The core reads no metric itself: a [`MetricSource`] supplies raw readings, and the
//! conversions (basis points, invalid-node fallbacks, the PSI delta) happen here.

use super::mult_frac_sat;

/// The metric a goal is about. Node, cgroup and target arguments are part of the metric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GoalMetric {
    /// Whatever the user last wrote into the goal's `current_value`.
    UserInput,
    /// System-wide "some" memory pressure stall time since the last evaluation, µs.
    SomeMemPsiUs,
    /// Used memory of a NUMA node, basis points of its total.
    NodeMemUsedBp { nid: u32 },
    /// Free memory of a NUMA node, basis points of its total.
    NodeMemFreeBp { nid: u32 },
    /// A cgroup's (active + inactive, anon + file) memory on a node, basis points of the node.
    NodeMemcgUsedBp { nid: u32, memcg_path: String },
    /// The node's memory not used by the cgroup, basis points of the node.
    NodeMemcgFreeBp { nid: u32, memcg_path: String },
    /// Active LRU memory, basis points of all LRU memory.
    ActiveMemBp,
    /// Inactive LRU memory, basis points of all LRU memory.
    InactiveMemBp,
    /// udamon: the resident set of monitoring target `target` (list index), bytes. Unlike the
    /// upstream metrics this one is a limit: the goal is met while the resident set is at most
    /// `target_value`, so the score is `target_value / rss` and the quota grows while the
    /// target is above the value (what a `pageout` scheme with a memory budget wants).
    TargetRssBytes { target: usize },
}

impl GoalMetric {
    /// The sysfs/damo keyword.
    pub fn name(&self) -> &'static str {
        match self {
            GoalMetric::UserInput => "user_input",
            GoalMetric::SomeMemPsiUs => "some_mem_psi_us",
            GoalMetric::NodeMemUsedBp { .. } => "node_mem_used_bp",
            GoalMetric::NodeMemFreeBp { .. } => "node_mem_free_bp",
            GoalMetric::NodeMemcgUsedBp { .. } => "node_memcg_used_bp",
            GoalMetric::NodeMemcgFreeBp { .. } => "node_memcg_free_bp",
            GoalMetric::ActiveMemBp => "active_mem_bp",
            GoalMetric::InactiveMemBp => "inactive_mem_bp",
            GoalMetric::TargetRssBytes { .. } => "target_rss_bytes",
        }
    }
}

/// Memory of one NUMA node, bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeMem {
    pub total: u64,
    pub free: u64,
}

/// System LRU list sizes, bytes (`/proc/meminfo` `Active:` and `Inactive:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LruMem {
    pub active: u64,
    pub inactive: u64,
}

/// Raw readings for goal metrics; the live implementation reads `/proc` and `/sys`.
pub trait MetricSource {
    /// Total "some" memory stall time since boot, µs (`/proc/pressure/memory`); 0 without PSI.
    fn some_mem_psi_total_us(&mut self) -> u64;
    /// Node `nid`'s memory; `None` if there is no such memory node.
    fn node_mem(&mut self, nid: u32) -> Option<NodeMem>;
    /// Bytes of the cgroup at `memcg_path` on node `nid`; `None` if there is no such cgroup.
    fn memcg_node_used(&mut self, nid: u32, memcg_path: &str) -> Option<u64>;
    fn lru_mem(&mut self) -> LruMem;
    /// Resident set of monitoring target `target`, bytes; `None` once it is gone.
    fn target_rss(&mut self, target: usize) -> Option<u64>;
    /// System-wide free memory, per-mille of all memory (the watermarks' `free_mem_rate`). By
    /// default node 0's; `None` when there is no such node, and then watermarks gate nothing.
    fn free_mem_rate(&mut self) -> Option<u64> {
        self.node_mem(0)
            .map(|n| super::watermarks::free_mem_rate(n.free, n.total))
    }
}

/// A source with nothing to report: no PSI, no nodes, no cgroups, empty LRU lists, no targets.
/// Goals then see upstream's fallbacks (used 0, free 10,000 bp).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoMetrics;

impl MetricSource for NoMetrics {
    fn some_mem_psi_total_us(&mut self) -> u64 {
        0
    }
    fn node_mem(&mut self, _nid: u32) -> Option<NodeMem> {
        None
    }
    fn memcg_node_used(&mut self, _nid: u32, _memcg_path: &str) -> Option<u64> {
        None
    }
    fn lru_mem(&mut self) -> LruMem {
        LruMem::default()
    }
    fn target_rss(&mut self, _target: usize) -> Option<u64> {
        None
    }
}

/// One goal of a quota (`damos_quota_goal`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaGoal {
    pub metric: GoalMetric,
    pub target_value: u64,
    /// The metric's value at the last evaluation (set by the user for `user_input`).
    pub current_value: u64,
    /// The PSI total at the last evaluation, so that `some_mem_psi_us` measures a delta.
    pub last_psi_total: u64,
}

impl QuotaGoal {
    pub fn new(metric: GoalMetric, target_value: u64) -> Self {
        QuotaGoal {
            metric,
            target_value,
            current_value: 0,
            last_psi_total: 0,
        }
    }

    /// `damos_set_quota_goal_current_value`.
    pub fn update_current_value(&mut self, metrics: &mut dyn MetricSource) {
        let bp = |part: u64, total: u64| mult_frac_sat(part, 10_000, total);
        self.current_value = match &self.metric {
            GoalMetric::UserInput => return,
            GoalMetric::SomeMemPsiUs => {
                let now = metrics.some_mem_psi_total_us();
                let delta = now.saturating_sub(self.last_psi_total);
                self.last_psi_total = now;
                delta
            }
            // NEW: an invalid node reads as 0 used / 10,000 free; a zero-sized node likewise.
            GoalMetric::NodeMemUsedBp { nid } => match metrics.node_mem(*nid) {
                Some(m) if m.total > 0 => bp(m.total.saturating_sub(m.free), m.total),
                _ => 0,
            },
            GoalMetric::NodeMemFreeBp { nid } => match metrics.node_mem(*nid) {
                Some(m) if m.total > 0 => bp(m.free.min(m.total), m.total),
                _ => 10_000,
            },
            GoalMetric::NodeMemcgUsedBp { nid, memcg_path } => {
                match memcg_on_node(metrics, *nid, memcg_path) {
                    Some((used, total)) => bp(used.min(total), total),
                    None => 0,
                }
            }
            GoalMetric::NodeMemcgFreeBp { nid, memcg_path } => {
                match memcg_on_node(metrics, *nid, memcg_path) {
                    Some((used, total)) => bp(total.saturating_sub(used), total),
                    None => 10_000,
                }
            }
            GoalMetric::ActiveMemBp | GoalMetric::InactiveMemBp => {
                let lru = metrics.lru_mem();
                let total = lru.active.saturating_add(lru.inactive);
                let part = if self.metric == GoalMetric::ActiveMemBp {
                    lru.active
                } else {
                    lru.inactive
                };
                if total == 0 { 0 } else { bp(part, total) }
            }
            GoalMetric::TargetRssBytes { target } => metrics.target_rss(*target).unwrap_or(0),
        };
    }

    /// How well the goal is met, in basis points (10,000 = exactly): `current / target` for the
    /// upstream metrics, `target / current` for the `target_rss_bytes` limit. A zero denominator
    /// counts as met by far.
    pub fn score(&self) -> u64 {
        let (num, den) = match self.metric {
            GoalMetric::TargetRssBytes { .. } => (self.target_value, self.current_value),
            _ => (self.current_value, self.target_value),
        };
        if den == 0 {
            u64::MAX
        } else {
            mult_frac_sat(num, 10_000, den)
        }
    }

    /// `damos_commit_quota_goal`: the metric (with its node, cgroup or target) and the target
    /// value come from `src`; the current value only for `user_input`; the PSI baseline stays, as
    /// it will be refreshed at the next evaluation.
    pub fn commit(&mut self, src: &QuotaGoal) {
        self.metric.clone_from(&src.metric);
        self.target_value = src.target_value;
        if self.metric == GoalMetric::UserInput {
            self.current_value = src.current_value;
        }
    }
}

/// The cgroup's bytes on the node and the node's total, if both exist.
fn memcg_on_node(metrics: &mut dyn MetricSource, nid: u32, path: &str) -> Option<(u64, u64)> {
    let node = metrics.node_mem(nid).filter(|m| m.total > 0)?;
    let used = metrics.memcg_node_used(nid, path)?;
    Some((used, node.total))
}

/// `damos_quota_score`: evaluate every goal and return the highest score, the one that makes the
/// scheme least aggressive. 0 without goals.
pub fn quota_score(goals: &mut [QuotaGoal], metrics: &mut dyn MetricSource) -> u64 {
    goals
        .iter_mut()
        .map(|g| {
            g.update_current_value(metrics);
            g.score()
        })
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source with fixed readings; PSI advances by `psi_step` per read.
    struct Fixed {
        psi: u64,
        psi_step: u64,
        node: Option<NodeMem>,
        memcg: Option<u64>,
        lru: LruMem,
        rss: Option<u64>,
    }

    impl MetricSource for Fixed {
        fn some_mem_psi_total_us(&mut self) -> u64 {
            self.psi += self.psi_step;
            self.psi
        }
        fn node_mem(&mut self, _nid: u32) -> Option<NodeMem> {
            self.node
        }
        fn memcg_node_used(&mut self, _nid: u32, _path: &str) -> Option<u64> {
            self.memcg
        }
        fn lru_mem(&mut self) -> LruMem {
            self.lru
        }
        fn target_rss(&mut self, _target: usize) -> Option<u64> {
            self.rss
        }
    }

    fn fixed() -> Fixed {
        Fixed {
            psi: 1000,
            psi_step: 250,
            node: Some(NodeMem {
                total: 1000,
                free: 250,
            }),
            memcg: Some(100),
            lru: LruMem {
                active: 300,
                inactive: 100,
            },
            rss: Some(2048),
        }
    }

    fn current(metric: GoalMetric, src: &mut dyn MetricSource) -> u64 {
        let mut g = QuotaGoal::new(metric, 1);
        g.update_current_value(src);
        g.current_value
    }

    #[test]
    fn metrics_convert_to_basis_points() {
        let mut m = fixed();
        assert_eq!(current(GoalMetric::NodeMemUsedBp { nid: 0 }, &mut m), 7500);
        assert_eq!(current(GoalMetric::NodeMemFreeBp { nid: 0 }, &mut m), 2500);
        let cg = |nid| (nid, "/a".to_string());
        let (nid, memcg_path) = cg(0);
        assert_eq!(
            current(GoalMetric::NodeMemcgUsedBp { nid, memcg_path }, &mut m),
            1000
        );
        let (nid, memcg_path) = cg(0);
        assert_eq!(
            current(GoalMetric::NodeMemcgFreeBp { nid, memcg_path }, &mut m),
            9000
        );
        assert_eq!(current(GoalMetric::ActiveMemBp, &mut m), 7500);
        assert_eq!(current(GoalMetric::InactiveMemBp, &mut m), 2500);
        assert_eq!(
            current(GoalMetric::TargetRssBytes { target: 0 }, &mut m),
            2048
        );
    }

    #[test]
    fn invalid_nodes_and_cgroups_fall_back() {
        let mut m = NoMetrics;
        assert_eq!(current(GoalMetric::NodeMemUsedBp { nid: 9 }, &mut m), 0);
        assert_eq!(
            current(GoalMetric::NodeMemFreeBp { nid: 9 }, &mut m),
            10_000
        );
        let mut m = Fixed {
            memcg: None,
            ..fixed()
        };
        let path = "/gone".to_string();
        assert_eq!(
            current(
                GoalMetric::NodeMemcgUsedBp {
                    nid: 0,
                    memcg_path: path.clone()
                },
                &mut m
            ),
            0
        );
        assert_eq!(
            current(
                GoalMetric::NodeMemcgFreeBp {
                    nid: 0,
                    memcg_path: path
                },
                &mut m
            ),
            10_000
        );
        assert_eq!(current(GoalMetric::ActiveMemBp, &mut NoMetrics), 0);
    }

    #[test]
    fn psi_is_a_delta_since_the_last_evaluation() {
        let mut m = fixed();
        let mut g = QuotaGoal::new(GoalMetric::SomeMemPsiUs, 100);
        g.update_current_value(&mut m);
        // The first evaluation sees everything since boot, as upstream.
        assert_eq!((g.current_value, g.last_psi_total), (1250, 1250));
        g.update_current_value(&mut m);
        assert_eq!((g.current_value, g.last_psi_total), (250, 1500));
        assert_eq!(g.score(), 25_000);
    }

    #[test]
    fn user_input_is_left_alone_and_scores_are_ratios() {
        let mut g = QuotaGoal::new(GoalMetric::UserInput, 400);
        g.current_value = 100;
        g.update_current_value(&mut fixed());
        assert_eq!(g.current_value, 100);
        assert_eq!(g.score(), 2500);
        // The rss limit inverts the ratio: 2048 bytes resident against a 1024-byte budget.
        let mut g = QuotaGoal::new(GoalMetric::TargetRssBytes { target: 0 }, 1024);
        g.update_current_value(&mut fixed());
        assert_eq!(g.score(), 5000, "above budget: under-achieving");
        g.current_value = 0;
        assert_eq!(g.score(), u64::MAX, "nothing resident: met");
    }

    #[test]
    fn the_highest_goal_score_wins() {
        let mut goals = vec![
            QuotaGoal::new(GoalMetric::NodeMemFreeBp { nid: 0 }, 5000),
            QuotaGoal::new(GoalMetric::UserInput, 10),
        ];
        goals[1].current_value = 30;
        assert_eq!(quota_score(&mut goals, &mut fixed()), 30_000);
        assert_eq!(goals[0].current_value, 2500, "every goal was evaluated");
        assert_eq!(quota_score(&mut [], &mut fixed()), 0);
    }
}
