//! A finished tuning session as text and JSON — the same words for every face (the
//! CLI prints them; a Python caller gets them): the in-network check's outcome, the
//! comparison of the untuned and tuned builds with its verdict (a speed-up claimed only
//! where every round agrees, `runtime::timer::Comparison`), and `tessera tune --json`'s
//! summary.

use crate::tune::{CheckStep, CompareStep, PointEstimates, TuneReport, NO_COST};
use crate::{BuildComparison, NetworkCheckOutcome};
use std::fmt::Write as _;
use std::path::Path;
use tessera_runtime::timer::Verdict;
use tessera_search::record::stable_cost;
use tessera_search::ScheduleDesc;

impl TuneReport {
    /// What a network's session ends with, as lines: the in-network check, then the
    /// comparison (empty for one operator).
    pub fn closing_text(&self) -> String {
        let Some(name) = &self.network else {
            return String::new();
        };
        let mut s = match &self.check {
            CheckStep::Stands => {
                "in-network check: the log's check stands (nothing new was measured)\n".into()
            }
            CheckStep::Ran(outcome) => check_text(outcome),
            CheckStep::NotRun => String::new(),
        };
        s.push_str(&comparison_text(name, &self.comparison));
        if let Some(p) = &self.per_point {
            s.push_str(&per_point_text(p));
        }
        s
    }

    /// The comparison as JSON (`null` for one operator).
    pub fn comparison_json(&self) -> serde_json::Value {
        if self.network.is_none() {
            return serde_json::Value::Null;
        }
        match &self.comparison {
            CompareStep::Skipped => serde_json::json!({ "skipped": true }),
            CompareStep::Ranges(sizes) => {
                serde_json::json!({ "skipped": true, "runtime_sizes": sizes })
            }
            CompareStep::NothingApplied => serde_json::json!({ "applied": 0 }),
            CompareStep::Compared(c) => comparison_json(c),
            CompareStep::ComparedAtPoints(at) => serde_json::Value::Array(
                at.iter()
                    .map(|(point, c)| {
                        let mut v = comparison_json(c);
                        v["point"] = serde_json::json!(point);
                        v
                    })
                    .collect(),
            ),
        }
    }

    /// `tessera tune --json`: the log, trials, each task's best, the estimated latency,
    /// the share never tuned and the comparison.
    pub fn to_json(&self, log: &Path) -> serde_json::Value {
        let ms = |c: f64| (c.is_finite() && c < NO_COST).then_some(c * 1e3);
        let tasks: Vec<serde_json::Value> = self
            .tasks
            .iter()
            .map(|t| {
                serde_json::json!({"task": t.name, "workload_key": t.workload_key,
                    "weight": t.weight, "best_ms": ms(t.best)})
            })
            .collect();
        serde_json::json!({
            "log": log.display().to_string(),
            "trials": self.summary.trials,
            "tasks": tasks,
            "estimated_latency_ms": self.summary.estimated_latency.map(|l| l * 1e3),
            "untuned_share": self.summary.untuned_share,
            "network": self.comparison_json(),
            "per_point": self.per_point.as_ref().map(per_point_json),
        })
    }
}

/// One comparison as JSON.
fn comparison_json(c: &BuildComparison) -> serde_json::Value {
    serde_json::json!({
        "applied": c.applied,
        "untuned_median_ms": c.untuned.median_ms(),
        "tuned_median_ms": c.tuned.median_ms(),
        "round_speedups": c.per_round.speedups(),
        "verdict": verdict(c),
    })
}

/// The estimate at each point of a tune for ranges, untuned and tuned.
fn per_point_text(p: &PointEstimates) -> String {
    let mut s = "estimated latency at each point of the sample (the sum over the tasks of \
                 their weight times their time there; host steps aside):\n"
        .to_string();
    let ms = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{:.3} ms", v * 1e3));
    for k in 0..p.points.len() {
        let ratio = match (p.untuned[k], p.tuned[k]) {
            (Some(u), Some(t)) if u > 0.0 => format!("  ({:.2}×)", t / u),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "  {:<24} untuned {:>12}  tuned {:>12}{ratio}",
            p.name(k),
            ms(p.untuned[k]),
            ms(p.tuned[k])
        );
    }
    s
}

fn per_point_json(p: &PointEstimates) -> serde_json::Value {
    let points: Vec<serde_json::Value> = (0..p.points.len())
        .map(|k| {
            let at: serde_json::Map<String, serde_json::Value> = (p.sizes.iter().zip(&p.points[k]))
                .map(|(n, v)| (n.clone(), serde_json::json!(v)))
                .collect();
            serde_json::json!({
                "point": at,
                "untuned_ms": p.untuned[k].map(|v| v * 1e3),
                "tuned_ms": p.tuned[k].map(|v| v * 1e3),
            })
        })
        .collect();
    serde_json::Value::Array(points)
}

/// The in-network check: how many groups were timed and which run faster with another
/// schedule, which builds with the log now use.
fn check_text(outcome: &NetworkCheckOutcome) -> String {
    let (checks, opts) = (&outcome.checks, &outcome.options);
    if checks.is_empty() {
        return "in-network check: no group is built with a tuned schedule, nothing to check\n"
            .into();
    }
    let groups: std::collections::BTreeSet<&str> =
        checks.iter().map(|c| c.workload_key.as_str()).collect();
    let to_default = outcome
        .overruled
        .iter()
        .filter(|o| matches!(o.instead.schedule, ScheduleDesc::Default))
        .count();
    let mut s = format!(
        "in-network check: {} tuned groups timed inside whole runs ({} candidate schedules \
         and the default; {} rounds of at most {} runs); {} run faster with another schedule, \
         which builds with this log now use ({} with the default, {} with another candidate)\n",
        groups.len(),
        checks.len(),
        opts.rounds,
        opts.runs,
        outcome.overruled.len(),
        to_default,
        outcome.overruled.len() - to_default
    );
    let median = |v: &[f64]| stable_cost(v.to_vec());
    for o in &outcome.overruled {
        let other = match o.instead.schedule {
            ScheduleDesc::Default => String::new(),
            _ => format!(", another candidate {:.3} ms: built with it", o.instead_ms),
        };
        let _ = writeln!(
            s,
            "  {:<36} in the network: the best alone {:>7.3} ms, the default {:>7.3} ms{other}   {}",
            o.check.task,
            median(&o.check.tuned_ms),
            median(&o.check.default_ms),
            o.check.workload_key.chars().take(60).collect::<String>()
        );
    }
    s
}

/// The comparison: what was built with tuned schedules, both builds' times, the verdict.
fn comparison_text(name: &str, step: &CompareStep) -> String {
    let c = match step {
        CompareStep::Skipped => {
            return format!(
                "network `{name}`: no comparison of the untuned and tuned builds (--compare-rounds 0); \
                 `tessera run` with and without --log times each\n"
            )
        }
        CompareStep::Ranges(sizes) => {
            return format!(
                "network `{name}`: its selections count sizes at run time ({sizes}): a \
                 template tune of it has no in-network check nor comparison; `tessera \
                 compile --log` builds its module with the log's choice for every group\n"
            )
        }
        CompareStep::NothingApplied => {
            return format!(
                "network `{name}`: no fused group is built with a tuned schedule (each kept its \
                 default schedule, measured faster or untuned), so the tuned build is the \
                 untuned one: nothing to compare\n"
            )
        }
        CompareStep::Compared(c) => c,
        CompareStep::ComparedAtPoints(at) => {
            let texts = at
                .iter()
                .map(|(point, c)| compared_text(&format!("{name}` at `{point}"), c));
            return texts.collect();
        }
    };
    compared_text(name, c)
}

/// A comparison that ran: what was built with tuned schedules, both builds' times, the
/// verdict.
fn compared_text(name: &str, c: &BuildComparison) -> String {
    let (rounds, runs) = (c.rounds, c.runs);
    let mut s = format!(
        "network `{name}`: {} distinct fused groups built with tuned schedules (the others: their default schedule, measured faster or untuned); {rounds} alternating rounds of {runs} run{} each\n",
        c.applied,
        if runs == 1 { "" } else { "s" }
    );
    let _ = writeln!(
        s,
        "{:>8}  {:>10}  {:>11}  {:>8}",
        "", "mean (ms)", "median (ms)", "std (ms)"
    );
    for (name, r) in [("untuned", &c.untuned), ("tuned", &c.tuned)] {
        let _ = writeln!(
            s,
            "{name:>8}  {:>10.4}  {:>11.4}  {:>8.4}",
            r.mean_ms(),
            r.median_ms(),
            r.std_ms()
        );
    }
    let _ = writeln!(s, "{}", verdict(c));
    s
}

/// The comparison's verdict: a speed-up (or slow-down) only where every round agrees.
fn verdict(c: &BuildComparison) -> String {
    let cmp = &c.per_round;
    let ratios = tessera_runtime::Stats::of(&cmp.speedups());
    match cmp.verdict() {
        Verdict::BFaster(x) => format!(
            "tuned runs {x:.2}x as fast as untuned (every round agrees: {:.2}x to {:.2}x)",
            ratios.min, ratios.max
        ),
        Verdict::AFaster(x) => format!(
            "tuned runs {x:.2}x slower than untuned (every round agrees: {:.2}x to {:.2}x as fast)",
            ratios.min, ratios.max
        ),
        Verdict::WithinNoise => format!(
            "the difference is inside this run's noise (the rounds' untuned/tuned ratios go \
             from {:.2} to {:.2}): no speed-up is claimed",
            ratios.min, ratios.max
        ),
    }
}
