//! The in-network check: each tuned kernel timed inside whole network runs against its
//! default schedule, and the verdict kept in the record log.
//!
//! A kernel is tuned alone: its inputs and weights warm in the caches from the run
//! before, the machine otherwise idle. Inside a network it runs after other kernels,
//! with their outputs in the caches and its weights often not, and the program that
//! was fastest alone is not always fastest there. On a 2-core VM a ResNet-50 v2 tuned
//! for 1800 trials had a stride-2 3×3 conv whose tuned program ran 1.82 ms alone (the
//! median of four measurements) and 2.55 ms in the network, where its default ran
//! 1.69 ms. So after tuning, the network is built with every default schedule and
//! with each of the [`CANDIDATES`] fastest tuned schedules of every tuned group (the
//! history best, then the next fastest distinct ones alone: [`candidate_histories`]),
//! and the builds are profiled in rounds that rotate which goes first
//! ([`check_candidates_in_network`]). Each (group, candidate)'s per-round times go to
//! the log as a [`NetworkCheck`] line beside the default's in the same rounds;
//! `ApplyHistoryBest` then builds each group with the schedule its latest check run
//! timed fastest inside the network — the default's, another candidate's, or the
//! history best's ([`overrules`], [`network_choice`]).
//!
//! A check line is not a measurement record (its times are of a step inside a run, not
//! of a kernel alone, and they must never compete with isolated costs), so the log
//! reader returns them apart (`LoadedLog::checks`); a build that does not know them
//! skips them as lines it cannot read.

use crate::record::{stable_cost, ApplyHistoryBest, EncodeError, Record, RECORD_VERSION};
use crate::types::ScheduleDesc;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tessera_graph::{GraphError, GraphModule};
use tessera_runtime::timer::{rotate, runs_within, time_once_ms};

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
    pub fn from_json_line(text: &str) -> Option<Result<NetworkCheck, CheckLineError>> {
        let value: serde_json::Value = serde_json::from_str(text).ok()?;
        let kind = value.as_object()?.get("check")?.clone();
        Some(Self::from_value(value, kind))
    }

    fn from_value(
        value: serde_json::Value,
        kind: serde_json::Value,
    ) -> Result<Self, CheckLineError> {
        if kind.as_str() != Some(NETWORK_CHECK) {
            return Err(CheckLineError::OtherKind(kind));
        }
        let c = NetworkCheck::deserialize(value).map_err(CheckLineError::Malformed)?;
        if c.v == 0 || c.v > RECORD_VERSION {
            return Err(CheckLineError::Version(c.v));
        }
        if c.tuned_ms.len() != c.default_ms.len() || c.tuned_ms.is_empty() {
            return Err(CheckLineError::Times {
                tuned: c.tuned_ms.len(),
                default: c.default_ms.len(),
            });
        }
        Ok(c)
    }
}

/// Why a log line with a `check` field is not a [`NetworkCheck`] this build reads.
#[derive(Debug, thiserror::Error)]
pub enum CheckLineError {
    /// A check of another kind than [`NETWORK_CHECK`] (its `check` field, as JSON).
    #[error("not a record: a check of kind {0}, not \"{NETWORK_CHECK}\"")]
    OtherKind(serde_json::Value),
    /// Fields missing or of the wrong type.
    #[error("not a network check: {0}")]
    Malformed(#[source] serde_json::Error),
    /// A format version this build does not read (0, or newer than [`RECORD_VERSION`]).
    #[error(
        "network check of format version {0}, which this build does not read ({RECORD_VERSION})"
    )]
    Version(u64),
    /// Tuned and default times that do not pair up.
    #[error("network check with {tuned} tuned and {default} default times (equal, at least one)")]
    Times { tuned: usize, default: usize },
}

/// How the check times the builds.
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

/// How many schedules of each tuned group the check times inside the network: the
/// history best and the next fastest distinct tuned schedules alone
/// ([`candidate_histories`]). A program fastest alone is often not fastest in the
/// network; one of the few next to it often is.
pub const CANDIDATES: usize = 3;

/// The history bests a check builds the network with, `n` of them: the first is
/// `ApplyHistoryBest::new(records)`; the `j`-th gives each pair whose best is a tuned
/// schedule its `j`-th fastest distinct tuned schedule alone (its slowest, when it
/// has fewer: that build then times no new candidate of it).
pub fn candidate_histories(records: &[Record], n: usize) -> Vec<ApplyHistoryBest> {
    let first = ApplyHistoryBest::new(records);
    let mut out = vec![first.clone()];
    let tuned: Vec<&Record> = records
        .iter()
        .filter(|r| !matches!(r.schedule, ScheduleDesc::Default))
        .collect();
    let mut ranked: BTreeMap<(String, String), Vec<&Record>> = BTreeMap::new();
    for ((w, t), group) in crate::record::by_pair(tuned.iter().copied()) {
        let best_is_tuned = first
            .query(w, t)
            .is_some_and(|b| !matches!(b.schedule, ScheduleDesc::Default) && b.target == t);
        if best_is_tuned {
            let list = crate::record::ranked_of(group).into_iter().map(|(_, r)| r);
            ranked.insert((w.to_string(), t.to_string()), list.collect());
        }
    }
    for j in 1..n {
        let mut chosen: Vec<Record> = Vec::new();
        for list in ranked.values() {
            let pick = list[j.min(list.len() - 1)];
            chosen.extend(
                tuned
                    .iter()
                    .filter(|r| {
                        r.workload_key == pick.workload_key
                            && r.target == pick.target
                            && r.schedule == pick.schedule
                    })
                    .map(|r| (*r).clone()),
            );
        }
        // the pairs not ranked keep their own best (the default's, or another target's)
        let rest: Vec<Record> = records
            .iter()
            .filter(|r| !ranked.contains_key(&(r.workload_key.clone(), r.target.clone())))
            .cloned()
            .collect();
        chosen.extend(rest);
        out.push(ApplyHistoryBest::new(&chosen));
    }
    out
}

/// A best record that an in-network check overruled.
#[derive(Clone, Debug, PartialEq)]
pub struct Overruled {
    /// The latest check of the best record's schedule (its times and the default's).
    pub check: NetworkCheck,
    /// The record builds use instead: the default schedule's or another candidate's.
    pub instead: Record,
    /// Its median inside the network (ms).
    pub instead_ms: f64,
    /// The whole check run that chose it (every candidate's line).
    pub run: Vec<NetworkCheck>,
}

/// The records of `best` (one per workload and target) that their latest check run
/// overruled: it timed the record's schedule and found another faster inside the
/// network ([`network_choice`]) — the default schedule, or another candidate — with a
/// successful record in `records` to build with instead.
pub fn overrules(records: &[Record], best: &[Record], checks: &[NetworkCheck]) -> Vec<Overruled> {
    let runs = latest_runs(checks);
    best.iter()
        .filter(|b| !matches!(b.schedule, ScheduleDesc::Default))
        .filter_map(|b| {
            let run = runs.get(&(b.workload_key.clone(), b.target.clone()))?;
            let check = run.iter().find(|c| c.schedule == b.schedule)?;
            let (choice, instead_ms) = network_choice(run);
            let wanted = match choice {
                Some(s) if *s == b.schedule => return None,
                Some(s) => s.clone(),
                None => ScheduleDesc::Default,
            };
            let instead = crate::record::best_of(records.iter().filter(|r| {
                r.workload_key == b.workload_key && r.target == b.target && r.schedule == wanted
            }))?;
            Some(Overruled {
                check: (*check).clone(),
                instead: instead.clone(),
                instead_ms,
                run: run.iter().map(|c| (*c).clone()).collect(),
            })
        })
        .collect()
}

/// The latest check run of each (workload key, target): every check of it with the
/// latest timestamp (a run checks each candidate once, all with one timestamp).
pub fn latest_runs(checks: &[NetworkCheck]) -> BTreeMap<(String, String), Vec<&NetworkCheck>> {
    let mut runs: BTreeMap<(String, String), Vec<&NetworkCheck>> = BTreeMap::new();
    for c in checks {
        let run = runs
            .entry((c.workload_key.clone(), c.target.clone()))
            .or_default();
        match run.first().map(|l| l.timestamp) {
            Some(t) if t > c.timestamp => {}
            Some(t) if t == c.timestamp => run.push(c),
            _ => *run = vec![c],
        }
    }
    runs
}

/// What one check run chose: the schedule with the lowest median inside the network,
/// `None` for the default schedule (which wins ties), with that median (ms).
pub fn network_choice<'c>(run: &[&'c NetworkCheck]) -> (Option<&'c ScheduleDesc>, f64) {
    let default = run
        .iter()
        .map(|c| stable_cost(c.default_ms.clone()))
        .fold(f64::INFINITY, f64::min);
    let mut choice = (None, default);
    for c in run {
        let t = stable_cost(c.tuned_ms.clone());
        if t < choice.1 {
            choice = (Some(&c.schedule), t);
        }
    }
    choice
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
    check_candidates_in_network(
        std::slice::from_mut(tuned),
        default,
        std::slice::from_ref(best),
        target,
        opts,
        &mut |_, _| {},
    )
}

/// [`check_in_network`] over several candidate builds (`tuned[j]` built with
/// `bests[j]`, [`candidate_histories`]), all timed in rounds that rotate which build
/// goes first, calling `progress(done, total)` after each round (for a command's
/// progress bar: the check takes seconds). A group gets a check per distinct tuned
/// schedule the builds give it: its first build's schedule, and every other build's
/// that differs.
pub fn check_candidates_in_network(
    tuned: &mut [GraphModule],
    default: &mut GraphModule,
    bests: &[ApplyHistoryBest],
    target: &str,
    opts: &CheckOptions,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Vec<NetworkCheck>, GraphError> {
    let mut inputs = |b: &mut GraphModule| b.set_random_inputs();
    check_with_inputs(tuned, default, bests, target, opts, &mut inputs, progress)
}

/// [`check_candidates_in_network`] for builds of a module compiled for ranges of sizes
/// (issue 61): the check runs at each of `points` (one value per range, and the
/// point's weight), and a candidate is judged by its worst point: its time in a round
/// is the default's there (the points' times weighted as a tune for the ranges weighs
/// them) times its largest ratio to the default at any point (of the medians). So a
/// schedule faster at 8 tokens and slower at 64 keeps the default: a module for a range
/// is never made slower at a point of the sample by its tuned kernels.
pub fn check_candidates_at_points(
    tuned: &mut [GraphModule],
    default: &mut GraphModule,
    bests: &[ApplyHistoryBest],
    target: &str,
    opts: &CheckOptions,
    points: &[(Vec<i64>, f64)],
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Vec<NetworkCheck>, GraphError> {
    let rounds = opts.rounds.max(1);
    let mut at_points: Vec<Vec<NetworkCheck>> = Vec::with_capacity(points.len());
    for (k, (values, _)) in points.iter().enumerate() {
        let mut inputs = |b: &mut GraphModule| b.set_random_inputs_at(values);
        let mut said = |done: usize, _: usize| progress(k * rounds + done, points.len() * rounds);
        at_points.push(check_with_inputs(
            tuned,
            default,
            bests,
            target,
            opts,
            &mut inputs,
            &mut said,
        )?);
    }
    let weights: Vec<f64> = points.iter().map(|(_, w)| *w).collect();
    judged_by_worst_point(&at_points, &weights)
}

/// One check per (group, candidate) from the checks of the same run at each point
/// (`at_points[p]`, weighted `weights[p]`): the default's times the weighted sum of
/// its times at the points, the candidate's those times its largest ratio of medians
/// to the default at any point.
fn judged_by_worst_point(
    at_points: &[Vec<NetworkCheck>],
    weights: &[f64],
) -> Result<Vec<NetworkCheck>, GraphError> {
    let Some(first) = at_points.first() else {
        return Ok(Vec::new());
    };
    let mut merged = Vec::with_capacity(first.len());
    for (i, c) in first.iter().enumerate() {
        let mut worst: f64 = 0.0;
        let mut default_ms = vec![0.0; c.default_ms.len()];
        for (checks, weight) in at_points.iter().zip(weights) {
            let here = checks
                .get(i)
                .filter(|h| h.workload_key == c.workload_key && h.schedule == c.schedule);
            let Some(here) = here else {
                return Err(GraphError::Invalid(
                    "the in-network check checked other groups at another point".into(),
                ));
            };
            worst = worst
                .max(stable_cost(here.tuned_ms.clone()) / stable_cost(here.default_ms.clone()));
            for (d, x) in default_ms.iter_mut().zip(&here.default_ms) {
                *d += weight * x;
            }
        }
        merged.push(NetworkCheck {
            tuned_ms: default_ms.iter().map(|d| d * worst).collect(),
            default_ms,
            ..c.clone()
        });
    }
    Ok(merged)
}

/// The check, each build's inputs set by `inputs` before its warm-up run.
fn check_with_inputs(
    tuned: &mut [GraphModule],
    default: &mut GraphModule,
    bests: &[ApplyHistoryBest],
    target: &str,
    opts: &CheckOptions,
    inputs: &mut dyn FnMut(&mut GraphModule) -> Result<(), GraphError>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Vec<NetworkCheck>, GraphError> {
    let keys: Vec<String> = default
        .step_workload_keys()
        .into_iter()
        .map(str::to_string)
        .collect();
    if tuned.len() != bests.len() || tuned.iter().any(|t| t.step_workload_keys() != keys) {
        return Err(GraphError::Invalid(
            "the in-network check compares builds of one graph, but these run different \
             kernels"
                .into(),
        ));
    }
    let checked = checked_groups(&keys, bests, target);
    if checked.is_empty() {
        return Ok(Vec::new());
    }
    let mut builds: Vec<&mut GraphModule> =
        std::iter::once(default).chain(tuned.iter_mut()).collect();
    for b in builds.iter_mut() {
        inputs(b)?;
        b.run()?;
    }
    // timed after the warm-up runs, which may compile kernels or move weights
    let all_ms = time_once_ms(|| builds.iter_mut().try_for_each(|b| b.run()))?;
    let runs = runs_within(all_ms / builds.len() as f64, opts.round_ms, opts.runs);
    let rounds = opts.rounds.max(1);
    // per checked (group, build): its milliseconds per round; the default's per group
    let mut times = vec![Vec::with_capacity(rounds); checked.len()];
    let mut default_times = vec![Vec::with_capacity(rounds); checked.len()];
    rotate(
        rounds,
        builds.len(),
        |side| builds[side].profile(runs),
        |round, profiles| {
            let sum = |p: &[(String, f64)], key: &str| {
                p.iter()
                    .zip(&keys)
                    .filter(|(_, k)| *k == key)
                    .map(|((_, ms), _)| ms)
                    .sum::<f64>()
            };
            for (i, c) in checked.iter().enumerate() {
                times[i].push(sum(&profiles[c.build + 1], &c.key));
                default_times[i].push(sum(&profiles[0], &c.key));
            }
            progress(round + 1, rounds);
        },
    )?;
    let timestamp = crate::types::now();
    Ok(checked
        .into_iter()
        .zip(times.into_iter().zip(default_times))
        .map(|(c, (tuned_ms, default_ms))| NetworkCheck {
            v: RECORD_VERSION,
            check: NETWORK_CHECK.to_string(),
            workload_key: c.key,
            target: target.to_string(),
            task: c.record.task.clone(),
            schedule: c.record.schedule.clone(),
            tuned_ms,
            default_ms,
            timestamp,
        })
        .collect())
}

/// A (group, build) the check times: the build gives the group a tuned schedule that
/// no earlier build gave it.
struct Checked<'b> {
    key: String,
    build: usize,
    record: &'b Record,
}

/// The groups of `keys` (each once, in the order they first run) built with a tuned
/// schedule, and each distinct schedule the builds give them.
fn checked_groups<'b>(
    keys: &[String],
    bests: &'b [ApplyHistoryBest],
    target: &str,
) -> Vec<Checked<'b>> {
    let mut checked: Vec<Checked> = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for k in keys {
        if seen.contains(&k.as_str()) {
            continue;
        }
        seen.push(k);
        for (build, best) in bests.iter().enumerate() {
            let Some(r) = best.query(k, target) else {
                continue;
            };
            let tuned = !matches!(r.schedule, ScheduleDesc::Default);
            let new = checked
                .iter()
                .all(|c| c.key != *k || c.record.schedule != r.schedule);
            // a group its first build gives the default is not checked at all
            if build > 0 && !checked.iter().any(|c| c.key == *k) {
                break;
            }
            if tuned && new {
                checked.push(Checked {
                    key: k.clone(),
                    build,
                    record: r,
                });
            }
        }
    }
    checked
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(tuned: &[f64], default: &[f64]) -> NetworkCheck {
        NetworkCheck {
            v: RECORD_VERSION,
            check: NETWORK_CHECK.into(),
            workload_key: "k".into(),
            target: "cpu".into(),
            task: "t".into(),
            schedule: ScheduleDesc::Steps {
                steps: serde_json::json!([1]),
            },
            tuned_ms: tuned.to_vec(),
            default_ms: default.to_vec(),
            timestamp: 1,
        }
    }

    #[test]
    fn a_candidate_at_points_is_judged_by_its_worst_point() {
        // faster at the small point, slower at the large one: the default's times
        // weighted, the candidate's those times its worst ratio (1.25)
        let at_points = vec![
            vec![check(&[5.0, 5.0, 5.0], &[4.0, 4.0, 4.0])],
            vec![check(&[0.5, 0.5, 0.5], &[1.0, 1.0, 1.0])],
        ];
        let merged = judged_by_worst_point(&at_points, &[1.0, 2.0]).unwrap();
        assert_eq!(merged.len(), 1);
        assert_eq!(merged[0].default_ms, vec![6.0; 3]);
        assert_eq!(merged[0].tuned_ms, vec![7.5; 3]);
        let (choice, _) = network_choice(&[&merged[0]]);
        assert_eq!(choice, None, "the default stays");
        // faster everywhere: kept, at its worst ratio (0.75)
        let at_points = vec![
            vec![check(&[3.0; 3], &[4.0; 3])],
            vec![check(&[0.5; 3], &[1.0; 3])],
        ];
        let merged = judged_by_worst_point(&at_points, &[1.0, 2.0]).unwrap();
        assert_eq!(merged[0].tuned_ms, vec![4.5; 3]);
        assert!(network_choice(&[&merged[0]]).0.is_some());
        // other groups at another point: an error
        let mut other = check(&[1.0], &[1.0]);
        other.workload_key = "other".into();
        let e = judged_by_worst_point(&[vec![check(&[1.0], &[1.0])], vec![other]], &[1.0, 1.0]);
        assert!(e.is_err());
    }
}
