//! The tuning tasks of a session: a network's (one per distinct fused group, weighted
//! by how many groups compute it) or one operator's, each with the target's hardware
//! parameters and its default-schedule program, the baseline it is measured against.

use crate::policy::SearchTask;
use crate::session::TuningTask;
use tessera_backends::{HardwareParams, Target};
use tessera_graph::executor::BuildContext;
use tessera_graph::{default_programs, extract_tasks, Graph, GraphError};
use tessera_te::schedules::{default_schedule, CpuParams};
use tessera_te::ComputeDag;

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
            },
            weight,
            default: default.map(|d| d.map_err(|e| e.to_string())),
        })
        .collect())
}

/// The one task of an operator's compute DAG (`name` names it in messages and records).
pub fn operator_task(
    dag: ComputeDag,
    name: &str,
    target: &Target,
    hw: &HardwareParams,
) -> TuningTask {
    let default = default_schedule(&dag.outputs, cpu_params(target, hw))
        .map_err(|e| e.to_string())
        .and_then(|s| {
            let mut args = dag.inputs();
            args.extend(dag.outputs.iter().cloned());
            tessera_te::lower(&s, &args, "default_schedule").map_err(|e| e.to_string())
        });
    TuningTask {
        task: SearchTask {
            name: name.to_string(),
            workload_key: dag.workload_key(),
            dag,
            target: target.to_string(),
            hardware: hw.clone(),
        },
        weight: 1,
        default: Some(default),
    }
}
