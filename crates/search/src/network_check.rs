//! The in-network check: each tuned kernel timed inside whole network runs against its
//! default schedule, and the verdict kept in the record log.
//!
//! A kernel is tuned alone: its inputs and weights warm in the caches from the run
//! before, the machine otherwise idle. Inside a network it runs after other kernels,
//! with their outputs in the caches and its weights often not, and the program that
//! was fastest alone is not always fastest there. On a 2-core VM a ResNet-50 v2 tuned
//! for 1800 trials had a stride-2 3×3 conv whose tuned program ran 1.82 ms alone (the
//! median of four measurements) and 2.55 ms in the network, where its default ran
//! 1.69 ms. So after tuning, the network is built twice from the same graph — with the
//! history best and with every default schedule — and both are profiled in alternating
//! rounds ([`check_in_network`]). Each tuned group's per-round times go to the log as a
//! [`NetworkCheck`] line; `ApplyHistoryBest` then builds with the default schedule a
//! group whose latest check found its history best slower in the network than the
//! default (`NetworkCheck::default_faster`).
//!
//! A check line is not a measurement record (its times are of a step inside a run, not
//! of a kernel alone, and they must never compete with isolated costs), so the log
//! reader returns them apart (`LoadedLog::checks`); a build that does not know them
//! skips them as lines it cannot read.

use crate::record::{stable_cost, ApplyHistoryBest, EncodeError, RECORD_VERSION};
use crate::types::ScheduleDesc;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tessera_graph::{GraphError, GraphModule};
use tessera_runtime::timer::{alternate, runs_within, time_once_ms, Side};

/// The value of a check line's `check` field.
pub const NETWORK_CHECK: &str = "network";

/// One tuned group timed inside whole runs against its default schedule: a line of the
/// log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NetworkCheck {
    /// The format version ([`RECORD_VERSION`] when written by this build).
    pub v: u64,
    /// What was checked: always [`NETWORK_CHECK`] (what tells the line from a record).
    pub check: String,
    pub workload_key: String,
    pub target: String,
    pub task: String,
    /// The schedule checked: the history best of the workload when the check ran.
    pub schedule: ScheduleDesc,
    /// Milliseconds per run that the group's steps took with `schedule`, one per round
    /// (a group computed at several places in the network: the sum of its steps).
    pub tuned_ms: Vec<f64>,
    /// The same with the default schedule, in the same rounds.
    pub default_ms: Vec<f64>,
    /// Seconds since the Unix epoch when the check finished.
    pub timestamp: u64,
}

impl NetworkCheck {
    /// Whether the default schedule ran faster in the network than `schedule`: its
    /// median over the rounds is lower ([`stable_cost`]).
    pub fn default_faster(&self) -> bool {
        stable_cost(self.default_ms.clone()) < stable_cost(self.tuned_ms.clone())
    }

    /// The check as one JSON line, without the newline; fails on a time JSON cannot
    /// hold.
    pub fn to_json_line(&self) -> Result<String, EncodeError> {
        if let Some(t) = self
            .tuned_ms
            .iter()
            .chain(&self.default_ms)
            .find(|t| !t.is_finite())
        {
            return Err(EncodeError::NotFinite {
                field: "time",
                value: *t,
            });
        }
        serde_json::to_string(self).map_err(|e| EncodeError::Json(e.to_string()))
    }

    /// Parses a log line as a check: `None` when the line is not one (no `check`
    /// field: a record or junk, for the record parser to judge), else the check or why
    /// the line cannot be one.
    pub fn from_json_line(text: &str) -> Option<Result<NetworkCheck, String>> {
        let value: serde_json::Value = serde_json::from_str(text).ok()?;
        let kind = value.as_object()?.get("check")?.clone();
        Some(Self::from_value(value, &kind))
    }

    fn from_value(value: serde_json::Value, kind: &serde_json::Value) -> Result<Self, String> {
        if kind.as_str() != Some(NETWORK_CHECK) {
            return Err(format!(
                "not a record: a check of kind {kind}, not \"{NETWORK_CHECK}\""
            ));
        }
        let c =
            NetworkCheck::deserialize(value).map_err(|e| format!("not a network check: {e}"))?;
        if c.v == 0 || c.v > RECORD_VERSION {
            return Err(format!(
                "network check of format version {}, which this build does not read ({RECORD_VERSION})",
                c.v
            ));
        }
        if c.tuned_ms.len() != c.default_ms.len() || c.tuned_ms.is_empty() {
            return Err(format!(
                "network check with {} tuned and {} default times (equal, at least one)",
                c.tuned_ms.len(),
                c.default_ms.len()
            ));
        }
        Ok(c)
    }
}

/// The latest check of each (workload key, target): the one with the latest timestamp,
/// the later in `checks` on a tie.
pub fn latest_checks(checks: &[NetworkCheck]) -> BTreeMap<(String, String), &NetworkCheck> {
    let mut latest: BTreeMap<(String, String), &NetworkCheck> = BTreeMap::new();
    for c in checks {
        let pair = (c.workload_key.clone(), c.target.clone());
        if latest.get(&pair).is_none_or(|l| l.timestamp <= c.timestamp) {
            latest.insert(pair, c);
        }
    }
    latest
}

/// How the check times the two builds.
#[derive(Clone, Copy, Debug)]
pub struct CheckOptions {
    /// Rounds, each profiling both builds (their order alternating round to round).
    pub rounds: usize,
    /// The most whole runs per build and round, each step's time averaged over them.
    pub runs: usize,
    /// How long one build's share of a round may take: a network whose warm-up run
    /// takes longer than `round_ms / runs` gets fewer runs per round (at least one;
    /// `runtime::timer::runs_within`).
    pub round_ms: f64,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            rounds: 5,
            runs: 10,
            round_ms: 1000.0,
        }
    }
}

/// Profiles `tuned` (a network built with the history best of `best`) and `default`
/// (the same graph built with default schedules) in alternating rounds, and returns a
/// check of every group whose history best on `target` is not its default schedule,
/// in the order the groups first run. Both builds get the same random inputs. Fails
/// when the two builds do not run the same workloads in the same order (built from
/// different graphs) or a run fails.
pub fn check_in_network(
    tuned: &mut GraphModule,
    default: &mut GraphModule,
    best: &ApplyHistoryBest,
    target: &str,
    opts: &CheckOptions,
) -> Result<Vec<NetworkCheck>, GraphError> {
    check_in_network_with(tuned, default, best, target, opts, &mut |_, _| {})
}

/// [`check_in_network`], calling `progress(done, total)` after each round (for a
/// command's progress bar: the check takes seconds).
pub fn check_in_network_with(
    tuned: &mut GraphModule,
    default: &mut GraphModule,
    best: &ApplyHistoryBest,
    target: &str,
    opts: &CheckOptions,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Vec<NetworkCheck>, GraphError> {
    let keys: Vec<String> = tuned
        .step_workload_keys()
        .into_iter()
        .map(str::to_string)
        .collect();
    if default.step_workload_keys() != keys {
        return Err(GraphError::Invalid(
            "the in-network check compares two builds of one graph, but these run different \
             kernels"
                .into(),
        ));
    }
    // the groups built with a schedule of the log, each once, in the order they run
    let mut checked: Vec<(&str, &crate::record::Record)> = Vec::new();
    for k in &keys {
        if let Some(r) = best.query(k, target) {
            let tuned_schedule = !matches!(r.schedule, ScheduleDesc::Default);
            if tuned_schedule && checked.iter().all(|(c, _)| c != k) {
                checked.push((k, r));
            }
        }
    }
    if checked.is_empty() {
        return Ok(Vec::new());
    }
    tuned.set_random_inputs()?;
    default.set_random_inputs()?;
    tuned.run()?;
    default.run()?;
    // timed after the warm-up runs, which may compile kernels or move weights
    let two_runs_ms = time_once_ms(|| {
        tuned.run()?;
        default.run()
    })?;
    let runs = runs_within(two_runs_ms / 2.0, opts.round_ms, opts.runs);
    let rounds = opts.rounds.max(1);
    let mut times = vec![(Vec::with_capacity(rounds), Vec::with_capacity(rounds)); checked.len()];
    alternate(
        rounds,
        |side| match side {
            Side::A => tuned.profile(runs),
            Side::B => default.profile(runs),
        },
        |round, t, d| {
            for (i, (key, _)) in checked.iter().enumerate() {
                let sum = |p: &[(String, f64)]| {
                    p.iter()
                        .zip(&keys)
                        .filter(|(_, k)| k == key)
                        .map(|((_, ms), _)| ms)
                        .sum::<f64>()
                };
                times[i].0.push(sum(&t));
                times[i].1.push(sum(&d));
            }
            progress(round + 1, rounds);
        },
    )?;
    let timestamp = crate::types::now();
    Ok(checked
        .into_iter()
        .zip(times)
        .map(|((key, r), (tuned_ms, default_ms))| NetworkCheck {
            v: RECORD_VERSION,
            check: NETWORK_CHECK.to_string(),
            workload_key: key.to_string(),
            target: target.to_string(),
            task: r.task.clone(),
            schedule: r.schedule.clone(),
            tuned_ms,
            default_ms,
            timestamp,
        })
        .collect())
}
