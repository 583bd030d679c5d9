//! The tuning curve of a record log: for each task, its best cost after each trial; for
//! the network, the estimated latency (`Σ weight · best`, the fastest option of a
//! convolution with several) once every task has a cost — what `tessera records plot`
//! draws, as TVM's tutorials plot a tuning run.
//!
//! Trials are counted in log order, failures included, so the curve shows what a budget
//! of N trials bought.

use crate::record::LoadedLog;
use std::collections::{BTreeMap, HashMap};

/// What the curve knows of a task from the network (none without a network).
#[derive(Clone, Debug, PartialEq)]
pub struct TaskInfo {
    /// How many times the network computes it.
    pub weight: f64,
    /// Its floating-point operations (for GFLOPS).
    pub flops: f64,
    /// The label it shares with the other options of a convolution.
    pub choice: Option<String>,
}

/// One task's curve.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskCurve {
    pub task: String,
    pub workload_key: String,
    /// The network's knowledge of it, when given.
    pub info: Option<TaskInfo>,
    /// `(trial, best cost in seconds)` at each trial that improved it.
    pub points: Vec<(usize, f64)>,
}

impl TaskCurve {
    /// The best cost at the end.
    pub fn best(&self) -> Option<f64> {
        self.points.last().map(|p| p.1)
    }
}

/// The curves of a log.
#[derive(Clone, Debug, PartialEq)]
pub struct TuningCurve {
    /// The log's records (trials) in all.
    pub trials: usize,
    /// Per task (and target), in order of first appearance.
    pub tasks: Vec<TaskCurve>,
    /// `(trial, estimated latency in seconds)` from the trial where every task of the
    /// network has a cost on; empty without `infos`.
    pub network: Vec<(usize, f64)>,
}

/// The curve of `log`; `infos` (by workload key) are the network's tasks, whose weights
/// make its estimated latency. Records of other workloads are left out when `infos` is
/// given; with an empty `infos` every task is drawn and there is no network curve.
pub fn tuning_curve(log: &LoadedLog, infos: &HashMap<String, TaskInfo>) -> TuningCurve {
    let mut index: HashMap<(String, String), usize> = HashMap::new();
    let mut tasks: Vec<TaskCurve> = Vec::new();
    let mut network = Vec::new();
    for (t, r) in log.records.iter().enumerate() {
        let trial = t + 1;
        if !infos.is_empty() && !infos.contains_key(&r.workload_key) {
            continue;
        }
        let key = (r.workload_key.clone(), r.target.clone());
        let i = *index.entry(key).or_insert_with(|| {
            tasks.push(TaskCurve {
                task: r.task.clone(),
                workload_key: r.workload_key.clone(),
                info: infos.get(&r.workload_key).cloned(),
                points: Vec::new(),
            });
            tasks.len() - 1
        });
        let Some(cost) = Some(r.result.mean_cost()).filter(|_| r.is_usable()) else {
            continue;
        };
        let c = &mut tasks[i];
        if c.best().is_none_or(|b| cost < b) {
            c.points.push((trial, cost));
            if let Some(l) = estimated_latency(&tasks, infos) {
                network.push((trial, l));
            }
        }
    }
    TuningCurve {
        trials: log.records.len(),
        tasks,
        network,
    }
}

/// `Σ weight · best` over the network's tasks (the fastest option per convolution),
/// once every one has a cost.
fn estimated_latency(tasks: &[TaskCurve], infos: &HashMap<String, TaskInfo>) -> Option<f64> {
    if infos.is_empty() {
        return None;
    }
    let best: HashMap<&str, f64> = tasks
        .iter()
        .filter_map(|t| Some((t.workload_key.as_str(), t.best()?)))
        .collect();
    // per choice label (or per task without one): the fastest weighted cost
    let mut groups: BTreeMap<String, Option<f64>> = BTreeMap::new();
    for (key, info) in infos {
        let label = info.choice.clone().unwrap_or_else(|| key.clone());
        let cost = best.get(key.as_str()).map(|b| b * info.weight);
        let slot = groups.entry(label).or_insert(None);
        *slot = match (*slot, cost) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    groups.values().try_fold(0.0, |acc, c| c.map(|c| acc + c))
}
