//! `tessera tune` of a network with runtime sizes (issue 61): its tasks are the kernels
//! of the module compiled for the ranges ([`tessera_graph::tasks::range_tasks`]).
//!
//! - A kernel whose loops run to the sizes is its own workload (its DAG reads the
//!   sizes' vector). Each candidate is built once and timed at a sample of points of
//!   the ranges, as DietCode tunes for a distribution of shapes: the runner writes each
//!   point where the kernel reads the sizes ([`SizePoints`]) and checks the candidate
//!   at the largest, where every element is valid.
//! - Its cost is the points' times weighted: a point's weight is the largest point's
//!   total size over its own, over the number of points. The cost is then the mean of
//!   the points' times per unit of size, scaled to the largest point (what the largest
//!   point would take were every point as fast per unit as it is): a schedule fast at
//!   384 tokens and slow at 8 does not win by the 384 alone, and the cost reads as a
//!   time at the largest point. Records keep the points, weights and each point's time.
//! - After the search, the in-network check builds the module with each candidate and
//!   times the groups inside whole runs at every point, judging a candidate by its
//!   worst point (`check_candidates_at_points`): a kernel slower in the network at any
//!   point keeps its default. The untuned and tuned modules are then compared at each
//!   point, and the estimate per point is the sum over the tasks of what a build with
//!   the log applies.
//! - A kernel that reads no size (a detector's backbone) is a fixed workload, tuned as
//!   a fixed build's, and its records serve both. A detector without a `--shape` range
//!   is tuned this way too, its counts at their bounds.

use crate::runtime_size::RuntimeSize;
use crate::tuning::{BuildComparison, NetworkCheckOutcome, PhaseProgress, BUILDING};
use crate::{DriverError, NetworkSpec, Toolchain};
use std::path::Path;
use tessera_backends::Target;
use tessera_graph::dynamic::{compile_prepared, RangeNetwork, SizeRange};
use tessera_graph::executor::BuildContext;
use tessera_runtime::runner::SizePoints;
use tessera_search::measure::ProgramError;
use tessera_search::network_check::{
    candidate_histories, check_candidates_at_points, CheckOptions, CANDIDATES,
};
use tessera_search::policy::SearchTask;
use tessera_search::record::{ApplyHistoryBest, LoadedLog, Record};
use tessera_search::session::TuningTask;
use tessera_search::ScheduleDesc;

/// The most points a default sample has.
const DEFAULT_POINTS: usize = 4;

/// The estimated network latency at each point of a tune's sample.
#[derive(Clone, Debug, PartialEq)]
pub struct PointEstimates {
    /// The sizes the points give values of (the ranges the spec names).
    pub sizes: Vec<String>,
    pub points: Vec<Vec<i64>>,
    /// Seconds: every task's default schedule (`None` where one was never measured).
    pub untuned: Vec<Option<f64>>,
    /// Seconds: every task's best record (its default where it has no tuned one).
    pub tuned: Vec<Option<f64>>,
}

/// The points a tune for `ranges` times its kernels at: `given` (each one value per
/// range the spec names, in its order), or by default the largest values and each
/// quarter of them (at least the least of each range), up to four. Sizes counted at run
/// time (a selection's) are at their largest in every point.
pub fn sample_points(
    ranges: &[SizeRange],
    given: &[Vec<i64>],
) -> Result<Vec<Vec<i64>>, DriverError> {
    let told: Vec<&SizeRange> = ranges.iter().filter(|r| !r.produced).collect();
    let mut points: Vec<Vec<i64>> = Vec::new();
    if given.is_empty() {
        for j in 0..DEFAULT_POINTS as u32 {
            let p: Vec<i64> = told
                .iter()
                .map(|r| (r.max / 4i64.pow(j)).max(r.min))
                .collect();
            if !points.contains(&p) {
                points.push(p);
            }
        }
    } else {
        for p in given {
            if p.len() != told.len() {
                return Err(DriverError::Request(format!(
                    "--sample {}: one value per runtime size ({}) is needed",
                    join(p),
                    told.iter()
                        .map(|r| r.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            if let Some((r, v)) = told.iter().zip(p).find(|(r, v)| **v < r.min || **v > r.max) {
                return Err(DriverError::Request(format!(
                    "--sample {}: {} = {v} is outside {r}",
                    join(p),
                    r.name
                )));
            }
            if !points.contains(p) {
                points.push(p.clone());
            }
        }
        // the largest first: the point the candidates are checked at
        points.sort_by_key(|p| std::cmp::Reverse(p.iter().sum::<i64>()));
    }
    Ok(points)
}

/// One `--sample` point: sizes (integers ≥ 0) separated by `:`, in the order the
/// `--shape` arguments name the sizes.
pub fn parse_sample(s: &str) -> Result<Vec<i64>, DriverError> {
    s.split(':')
        .map(|v| {
            v.trim()
                .parse::<i64>()
                .ok()
                .filter(|&v| v >= 0)
                .ok_or_else(|| {
                    DriverError::Request(format!("`{v}` is not a size (an integer ≥ 0)"))
                })
        })
        .collect()
}

fn join(p: &[i64]) -> String {
    p.iter().map(i64::to_string).collect::<Vec<_>>().join(":")
}

/// The kernels' points: `points` (of the told sizes) with every counted size at its
/// largest, the largest point first; each weighted by the first's total size over its
/// own (plus one each: a cache's length may be 0) over the number of points.
fn size_points(ranges: &[SizeRange], points: &[Vec<i64>], param: usize) -> SizePoints {
    let full = |p: &[i64]| -> Vec<i32> {
        let mut told = p.iter();
        ranges
            .iter()
            .map(|r| match r.produced {
                true => r.max as i32,
                false => told.next().copied().unwrap_or(r.max) as i32,
            })
            .collect()
    };
    let total = |p: &[i64]| (p.iter().sum::<i64>() + 1) as f64;
    let largest = points.first().map_or(1.0, |p| total(p));
    let n = points.len().max(1) as f64;
    SizePoints {
        param,
        points: points.iter().map(|p| full(p)).collect(),
        weights: points.iter().map(|p| largest / total(p) / n).collect(),
        ranges: ranges.iter().map(SizeRange::to_string).collect(),
    }
}

/// A network tuned for ranges of sizes: its name, the ranges its spec names, the
/// sample's points, and the network prepared for the ranges with the points as its
/// kernels read them.
pub(crate) struct RangeTune {
    pub(crate) name: String,
    pub(crate) ranges: Vec<SizeRange>,
    pub(crate) points: Vec<Vec<i64>>,
    net: RangeNetwork,
    /// Every size's value at each point (counted ones at their largest), and its weight.
    at: Vec<(Vec<i64>, f64)>,
}

impl Toolchain {
    /// The tuning tasks of `spec` compiled for `rs`, its kernels that read the sizes
    /// timed at `points` ([`sample_points`]); with the network prepared for them.
    pub(crate) fn range_tuning_tasks(
        &self,
        spec: &NetworkSpec,
        rs: &RuntimeSize,
        points: &[Vec<i64>],
    ) -> Result<(RangeTune, Vec<TuningTask>), DriverError> {
        let net = self.prepare_range(spec, rs, None)?;
        let hardware = self.hardware(&spec.target)?;
        let params = BuildContext {
            target: spec.target.clone(),
            hardware: hardware.clone(),
        }
        .cpu_params();
        let tasks = tessera_graph::tasks::range_tasks(&net, &spec.target, params)?;
        let tasks = tasks
            .into_iter()
            .map(|t| TuningTask {
                sizes: t
                    .sizes_param
                    .map(|param| size_points(&net.ranges, points, param)),
                task: SearchTask {
                    name: t.task.name,
                    dag: t.task.dag,
                    workload_key: t.task.workload_key,
                    target: spec.target.to_string(),
                    hardware: hardware.clone(),
                    op: None,
                },
                weight: t.weight,
                default: Some(t.default.map_err(ProgramError::lowering)),
                choice: None,
                space: None,
            })
            .collect();
        let range = RangeTune {
            name: net.graph.name.clone(),
            ranges: rs.ranges.clone(),
            points: points.to_vec(),
            at: {
                let s = size_points(&net.ranges, points, 0);
                let full = s
                    .points
                    .iter()
                    .map(|p| p.iter().map(|&v| i64::from(v)).collect());
                full.zip(s.weights).collect()
            },
            net,
        };
        Ok((range, tasks))
    }

    /// The in-network check of a tune for ranges: the module for the ranges built with
    /// default schedules and with each of the log's [`CANDIDATES`] fastest schedules of
    /// every tuned group, profiled in rotating rounds at each point of the sample, each
    /// candidate judged by its worst point; the checks go to the log, and builds with
    /// it then use each group's fastest schedule inside the network.
    pub(crate) fn check_range_in_network(
        &self,
        range: &RangeTune,
        target: &Target,
        log: &Path,
        progress: PhaseProgress<'_>,
    ) -> Result<NetworkCheckOutcome, DriverError> {
        let loaded = self.read_log(log)?;
        let bests = candidate_histories(&loaded.records, CANDIDATES);
        let configurations = crate::history::holds_configurations(&loaded.records);
        let backend = self.registry().backend_for(target)?;
        let options = CheckOptions::default();
        let graph_error = |e| DriverError::Graph(Box::new(e));
        let built = self.candidate_builds(&bests, progress, &mut |best| {
            let appliers = self.appliers(best, target, configurations)?;
            let built = compile_prepared(&range.net, backend.as_ref(), Some(&appliers))
                .map_err(graph_error)?;
            Ok((built, appliers.applied()))
        })?;
        let Some(mut tuned) = built else {
            return Ok(NetworkCheckOutcome::nothing(options));
        };
        let untuned = compile_prepared(&range.net, backend.as_ref(), None).map_err(graph_error)?;
        let mut default = self.load(untuned)?;
        progress(BUILDING, bests.len() + 1, bests.len() + 1);
        let checks = check_candidates_at_points(
            &mut tuned,
            &mut default,
            &bests,
            &target.to_string(),
            &options,
            &range.at,
            &mut |done, all| progress("in-network check: timing", done, all),
        )?;
        Self::keep_checks(log, loaded, checks, options)
    }
}

impl Toolchain {
    /// The module for the ranges built untuned and with the history best of `log`, and
    /// both timed at each point of the sample in `rounds` alternating rounds (each
    /// point's name and comparison); `None` where no group got a tuned schedule.
    pub(crate) fn compare_range_untuned_and_tuned(
        &self,
        range: &RangeTune,
        target: &Target,
        log: &Path,
        rounds: usize,
        progress: PhaseProgress<'_>,
    ) -> Result<Option<Vec<(String, BuildComparison)>>, DriverError> {
        let loaded = self.read_log(log)?;
        let best = ApplyHistoryBest::from_log(&loaded);
        let configurations = crate::history::holds_configurations(&loaded.records);
        let appliers = self.appliers(&best, target, configurations)?;
        let backend = self.registry().backend_for(target)?;
        let graph_error = |e| DriverError::Graph(Box::new(e));
        let tuned =
            compile_prepared(&range.net, backend.as_ref(), Some(&appliers)).map_err(graph_error)?;
        let applied = appliers.applied();
        if applied == 0 {
            return Ok(None);
        }
        let mut tuned = self.load(tuned)?;
        let untuned = compile_prepared(&range.net, backend.as_ref(), None).map_err(graph_error)?;
        let mut untuned = self.load(untuned)?;
        let mut out = Vec::with_capacity(range.points.len());
        for (k, (values, _)) in range.at.iter().enumerate() {
            untuned.set_random_inputs_at(values)?;
            tuned.set_random_inputs_at(values)?;
            let name = point_name(&range.ranges, &range.points[k]);
            let phase = format!("comparing untuned and tuned at {name}");
            let mut said = |_: &str, done: usize, all: usize| progress(&phase, done, all);
            let c = self.compare_loaded(&mut untuned, &mut tuned, rounds, &mut said)?;
            out.push((name, BuildComparison { applied, ..c }));
        }
        Ok(Some(out))
    }
}

/// `size=value, …` of a point of the told sizes `ranges`.
pub fn point_name(ranges: &[SizeRange], point: &[i64]) -> String {
    let names: Vec<String> = told_names(ranges);
    named(&names, point)
}

/// The names of the sizes the spec names (not counted at run time).
fn told_names(ranges: &[SizeRange]) -> Vec<String> {
    (ranges.iter().filter(|r| !r.produced))
        .map(|r| r.name.clone())
        .collect()
}

/// `name=value, …` (a network whose only sizes are counted: "the counts' bounds").
fn named(names: &[String], point: &[i64]) -> String {
    let parts: Vec<String> = (names.iter().zip(point))
        .map(|(n, v)| format!("{n}={v}"))
        .collect();
    match parts.is_empty() {
        true => "the counts' bounds".into(),
        false => parts.join(", "),
    }
}

impl PointEstimates {
    /// Point `k`'s name, `size=value, …`.
    pub fn name(&self, k: usize) -> String {
        named(&self.sizes, &self.points[k])
    }
}

/// The estimate per point of `tasks` (workload keys and weights) from `log`: per task,
/// the default schedule's time at each point and that of the record a build with the
/// log applies (a task that reads no size: its mean at every point), summed with the
/// tasks' weights.
pub fn point_estimates(
    ranges: &[SizeRange],
    points: &[Vec<i64>],
    tasks: &[(String, usize)],
    target: &str,
    log: &LoadedLog,
) -> PointEstimates {
    let records = &log.records;
    // what a build with the log applies: the in-network check's choices included
    let best = ApplyHistoryBest::from_log(log);
    let n = points.len();
    let at_points = |r: &Record| -> Option<Vec<f64>> {
        if !r.is_usable() {
            return None;
        }
        match &r.result.at_points {
            Some(a) if a.means.len() == n => Some(a.means.clone()),
            Some(_) => None,
            None => Some(vec![r.result.mean_cost(); n]),
        }
    };
    let mut untuned: Vec<Option<f64>> = vec![Some(0.0); n];
    let mut tuned: Vec<Option<f64>> = vec![Some(0.0); n];
    for (key, weight) in tasks {
        let mine = || {
            records
                .iter()
                .filter(|r| &r.workload_key == key && r.target == target)
        };
        let default = mine()
            .filter(|r| matches!(r.schedule, ScheduleDesc::Default))
            .find_map(at_points);
        let best = best.query(key, target).and_then(at_points);
        let w = *weight as f64;
        for k in 0..n {
            untuned[k] = untuned[k].zip(default.as_ref()).map(|(s, d)| s + w * d[k]);
            tuned[k] = tuned[k]
                .zip(best.as_ref().or(default.as_ref()))
                .map(|(s, b)| s + w * b[k]);
        }
    }
    PointEstimates {
        sizes: told_names(ranges),
        points: points.to_vec(),
        untuned,
        tuned,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_sample_is_the_largest_and_its_quarters() {
        let r = [SizeRange::new("seq", 2, 384)];
        assert_eq!(
            sample_points(&r, &[]).unwrap(),
            vec![vec![384], vec![96], vec![24], vec![6]]
        );
        let r = [SizeRange::new("seq", 1, 32), SizeRange::new("past", 0, 96)];
        assert_eq!(
            sample_points(&r, &[]).unwrap(),
            vec![vec![32, 96], vec![8, 24], vec![2, 6], vec![1, 1]]
        );
        // a short range: fewer points, never below its least
        let r = [SizeRange::new("n", 3, 8)];
        assert_eq!(sample_points(&r, &[]).unwrap(), vec![vec![8], vec![3]]);
    }

    #[test]
    fn a_sample_point_is_sizes_separated_by_colons() {
        assert_eq!(parse_sample("8").unwrap(), vec![8]);
        assert_eq!(parse_sample("1:64").unwrap(), vec![1, 64]);
        let e = parse_sample("1:-2").unwrap_err().to_string();
        assert!(e.contains("`-2` is not a size"), "{e}");
        assert!(parse_sample("x").is_err());
    }

    #[test]
    fn a_given_sample_is_checked_and_put_largest_first() {
        let r = [SizeRange::new("seq", 2, 384)];
        let given = vec![vec![8], vec![384], vec![32], vec![128]];
        assert_eq!(
            sample_points(&r, &given).unwrap(),
            vec![vec![384], vec![128], vec![32], vec![8]]
        );
        let e = sample_points(&r, &[vec![500]]).unwrap_err().to_string();
        assert!(e.contains("outside seq in 2..384"), "{e}");
        let e = sample_points(&r, &[vec![8, 8]]).unwrap_err().to_string();
        assert!(e.contains("one value per runtime size (seq)"), "{e}");
    }

    fn record(key: &str, schedule: ScheduleDesc, costs: f64, means: Option<[f64; 2]>) -> Record {
        let at_points = means.map(|m| {
            Box::new(tessera_runtime::runner::PointCosts {
                ranges: Vec::new(),
                points: vec![vec![8], vec![2]],
                weights: vec![0.5, 2.0],
                means: m.to_vec(),
            })
        });
        let result = tessera_search::MeasureResult {
            costs: vec![costs],
            error_no: tessera_search::MeasureErrorNo::NoError,
            error_msg: None,
            all_cost: 1.0,
            timestamp: 1,
            at_points,
        };
        Record::new(key, "cpu", "t", schedule, result)
    }

    #[test]
    fn the_estimate_per_point_sums_each_tasks_time_there() {
        let steps = |k: u64| ScheduleDesc::Steps {
            steps: serde_json::json!([k]),
        };
        let log = LoadedLog {
            records: vec![
                // a task that reads the sizes: its default, a faster and a slower program
                record("range", ScheduleDesc::Default, 3.0, Some([4.0, 1.0])),
                record("range", steps(1), 2.0, Some([3.0, 0.5])),
                record("range", steps(2), 5.0, Some([1.0, 2.0])),
                // one that reads none: the same time at every point
                record("fixed", ScheduleDesc::Default, 0.25, None),
            ],
            ..LoadedLog::default()
        };
        let r = [SizeRange::new("seq", 2, 8)];
        let tasks = [("range".to_string(), 2), ("fixed".to_string(), 4)];
        let e = point_estimates(&r, &[vec![8], vec![2]], &tasks, "cpu", &log);
        assert_eq!(e.sizes, vec!["seq".to_string()]);
        assert_eq!(
            e.untuned,
            vec![Some(2.0 * 4.0 + 1.0), Some(2.0 * 1.0 + 1.0)]
        );
        // the fastest by the tune's cost, not at each point
        assert_eq!(e.tuned, vec![Some(2.0 * 3.0 + 1.0), Some(2.0 * 0.5 + 1.0)]);
    }

    #[test]
    fn each_point_is_weighted_by_its_time_per_unit_of_size() {
        let mut counted = SizeRange::new("nms", 0, 300);
        counted.produced = true;
        let r = [SizeRange::new("seq", 1, 31), counted];
        let s = size_points(&r, &[vec![31], vec![7]], 1);
        assert_eq!(s.points, vec![vec![31, 300], vec![7, 300]]);
        assert_eq!(s.ranges, ["seq in 1..31", "nms counted 0..300"]);
        assert_eq!(s.weights, vec![0.5, 2.0]);
        assert_eq!(s.param, 1);
    }
}
