//! The tuning tasks of a session: a network's (one per distinct fused group, weighted
//! by how many groups compute it) or one operator's, each with the target's hardware
//! parameters and its default-schedule program, the baseline it is measured against.

use crate::policy::SearchTask;
use crate::session::TuningTask;
use tessera_backends::{HardwareParams, Target};
use tessera_graph::executor::BuildContext;
use tessera_graph::{default_programs, extract_tasks, Graph, GraphError};
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

/// The tasks of `graph` for `target`.
pub fn network_tasks(
    graph: &Graph,
    target: &Target,
    hw: &HardwareParams,
) -> Result<Vec<TuningTask>, GraphError> {
    let (tasks, weights) = extract_tasks(graph, target)?;
    let defaults = default_programs(graph, &tasks, cpu_params(target, hw))?;
    Ok(tasks
        .into_iter()
        .zip(weights)
        .zip(defaults)
        .map(|((t, weight), default)| TuningTask {
            task: SearchTask {
                name: t.name,
                dag: t.dag,
                workload_key: t.workload_key,
                target: target.to_string(),
                hardware: hw.clone(),
                op: None,
            },
            weight,
            default: default.map(|d| d.map_err(|e| e.to_string())),
        })
        .collect())
}

/// The one task of a catalog operator, with the operator's default schedule as its
/// baseline.
pub fn operator_task(
    spec: &OpSpec,
    target: &Target,
    hw: &HardwareParams,
) -> Result<TuningTask, CatalogError> {
    let dag = spec.dag()?;
    let default = spec
        .default_func(cpu_params(target, hw), "default_schedule")
        .map_err(|e| with_causes(&e));
    Ok(TuningTask {
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
    })
}

/// An error with its causes on one line (`a: b: c`).
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
