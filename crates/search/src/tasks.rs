//! The tuning tasks of a session: a network's (one per distinct fused group of every
//! option of its convolutions, weighted by how many groups compute it, or — for
//! template tuning — one per distinct anchor operator) or one operator's, each with
//! the target's hardware parameters and its default-schedule program, the baseline it
//! is measured against; and the network a log's measurements choose
//! ([`pick_algorithms`]).

use crate::measure::ProgramError;
use crate::policy::SearchTask;
use crate::record::ApplyHistoryBest;
use crate::session::TuningTask;
use std::collections::HashMap;
use tessera_backends::{HardwareParams, Target};
use tessera_graph::executor::BuildContext;
use tessera_graph::{
    default_programs, fuse, op_spec_of, ConvAlgorithm, ConvPlan, Graph, GraphError,
};
use tessera_te::catalog::{CatalogError, OpSpec};
use tessera_te::schedules::CpuParams;

/// The default schedules' parameters for `target` on `hw`.
fn cpu_params(target: &Target, hw: &HardwareParams) -> CpuParams {
    BuildContext {
        target: target.clone(),
        hardware: hw.clone(),
    }
    .cpu_params()
}

/// The tasks of every option of `plan` for `target` ([`ConvPlan::tasks`]): those of
/// the network an untuned build runs, then the other options' convolutions, labelled
/// so that the task scheduler counts the fastest option of each convolution only.
pub fn plan_tasks(
    plan: &ConvPlan,
    target: &Target,
    hw: &HardwareParams,
) -> Result<Vec<TuningTask>, GraphError> {
    let (tasks, weights) = plan.tasks(target)?;
    let mut defaults: Vec<Option<Result<tessera_ir::PrimFunc, GraphError>>> =
        (0..tasks.len()).map(|_| None).collect();
    for g in plan.option_graphs() {
        let found = default_programs(g, &tasks, cpu_params(target, hw))?;
        for (d, f) in defaults.iter_mut().zip(found) {
            if d.is_none() {
                *d = f;
            }
        }
    }
    Ok(tuning_tasks(tasks, weights, defaults, target, hw))
}

/// The algorithm of each of `plan`'s convolutions that `best` holds measurements of
/// every option of on `target` (its default schedule's or a tuned one's, whichever
/// is faster): the option whose task is fastest; the rule for the others. Returns the
/// network so built, and each choice's algorithm with whether it was measured.
pub fn pick_algorithms(
    plan: &ConvPlan,
    best: &ApplyHistoryBest,
    target: &str,
) -> Result<(Graph, Vec<(ConvAlgorithm, bool)>), GraphError> {
    let cost = |key: &str| best.query(key, target).map(|r| r.result.mean_cost());
    let picked: Vec<(ConvAlgorithm, bool)> = plan.choices().iter().map(|c| c.pick(cost)).collect();
    let graph = plan.graph(|c| c.pick(cost).0)?;
    Ok((graph, picked))
}

fn tuning_tasks(
    tasks: Vec<tessera_graph::Task>,
    weights: Vec<usize>,
    defaults: Vec<Option<Result<tessera_ir::PrimFunc, GraphError>>>,
    target: &Target,
    hw: &HardwareParams,
) -> Vec<TuningTask> {
    tasks
        .into_iter()
        .zip(weights)
        .zip(defaults)
        .map(|((t, weight), default)| TuningTask {
            sizes: None,
            task: SearchTask {
                name: t.name,
                dag: t.dag,
                workload_key: t.workload_key,
                target: target.to_string(),
                hardware: hw.clone(),
                op: None,
            },
            weight,
            default: default.map(|d| d.map_err(ProgramError::lowering)),
            choice: t.choice,
            space: None,
        })
        .collect()
}

/// The one task of a catalog operator, with the operator's default schedule as its
/// baseline (the spec as tuned on `hw`'s vectors: `OpSpec::for_vector_lanes`).
pub fn operator_task(
    spec: &OpSpec,
    target: &Target,
    hw: &HardwareParams,
) -> Result<TuningTask, CatalogError> {
    let spec = &spec.for_vector_lanes(hw.f32_lanes());
    let dag = spec.dag()?;
    let default = spec
        .default_func(cpu_params(target, hw), "default_schedule")
        .map_err(ProgramError::lowering);
    Ok(TuningTask {
        sizes: None,
        task: SearchTask {
            name: spec.name.clone(),
            workload_key: dag.workload_key(),
            dag,
            target: target.to_string(),
            hardware: hw.clone(),
            op: Some(spec.clone()),
        },
        weight: 1,
        default: Some(default),
        choice: None,
        space: None,
    })
}

/// The tasks of `graph` as catalog operators ([`op_spec_of`]: the conv2d, depthwise
/// conv2d, dense and matmul nodes of its fused groups that the catalog can express —
/// what schedule templates tune), one per distinct operator (by its DAG's workload key)
/// in order of first occurrence, weighted by how many groups compute it; each task's
/// baseline is the operator's default schedule, as in [`operator_task`]. Each task is
/// named after its operator and sizes (`conv2d 1,56,56,64,64,3,3`).
pub fn operator_tasks(
    graph: &Graph,
    target: &Target,
    hw: &HardwareParams,
) -> Result<Vec<TuningTask>, CatalogError> {
    let mut out: Vec<TuningTask> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for group in fuse(graph) {
        for spec in group.nodes.iter().filter_map(|&n| op_spec_of(graph, n)) {
            let key = spec.dag()?.workload_key();
            if let Some(&i) = index.get(&key) {
                out[i].weight += 1;
                continue;
            }
            let mut task = operator_task(&spec, target, hw)?;
            let sizes: Vec<String> = spec.shape.iter().map(i64::to_string).collect();
            task.task.name = format!("{} {}", spec.name, sizes.join(","));
            index.insert(key, out.len());
            out.push(task);
        }
    }
    Ok(out)
}
