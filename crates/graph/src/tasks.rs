//! Task extraction: the compute DAG of every fused group, deduplicated by workload key,
//! each with its weight (how many groups of the network compute it).

use crate::error::GraphError;
use crate::fuse::{fuse, group_compute, group_name};
use crate::ir::Graph;
use std::collections::HashMap;
use tessera_backends::Target;
use tessera_te::ComputeDag;

/// One tuning task: a fused subgraph's compute DAG for a target.
#[derive(Clone, Debug)]
pub struct Task {
    /// The fused function's name (`fused_conv2d_add_relu`) of its first occurrence.
    pub name: String,
    pub workload_key: String,
    pub dag: ComputeDag,
    pub target: Target,
    /// Set on a task that is one option of a convolution with several
    /// ([`crate::conv_plan::ConvPlan::tasks`]): the tasks with the same label compute
    /// the same groups in different ways, and a build runs the fastest of them.
    pub choice: Option<String>,
}

impl Task {
    pub fn flop_count(&self) -> f64 {
        self.dag.flop_count()
    }
}

/// The fused groups of `graph` that run a kernel on `target`: all but views
/// ([`crate::fuse::Group::view_of`]) and host steps ([`crate::host_ops`]).
pub fn kernel_groups(graph: &Graph, target: &Target) -> Vec<crate::fuse::Group> {
    fuse(graph)
        .into_iter()
        .filter(|g| {
            g.view_of(graph).is_none() && crate::host_ops::HostOp::of(graph, g, target).is_none()
        })
        .collect()
}

/// Extracts the tasks of `graph` for `target`: one per distinct fused group, in order of
/// first occurrence, with the number of groups that compute it (estimated network latency
/// = Σ latency[t] · weight[t]). The weights sum to the number of fused groups that run a
/// kernel (views, [`crate::fuse::Group::view_of`], and host steps,
/// [`crate::host_ops`], run none).
pub fn extract_tasks(
    graph: &Graph,
    target: &Target,
) -> Result<(Vec<Task>, Vec<usize>), GraphError> {
    graph.validate()?;
    let mut tasks: Vec<Task> = Vec::new();
    let mut weights: Vec<usize> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for group in kernel_groups(graph, target) {
        let dag = group_compute(graph, &group)?.dag()?;
        let key = dag.workload_key();
        match index.get(&key) {
            Some(&i) => weights[i] += 1,
            None => {
                index.insert(key.clone(), tasks.len());
                tasks.push(Task {
                    name: group_name(graph, &group),
                    workload_key: key,
                    dag,
                    target: target.clone(),
                    choice: None,
                });
                weights.push(1);
            }
        }
    }
    Ok((tasks, weights))
}

/// The task list as `tessera tasks` prints it: for each task a
/// `========== Task i  (workload key: …) ==========` header, its name, weight and FLOPs,
/// then its compute DAG.
pub fn print_tasks(tasks: &[Task], weights: &[usize]) -> String {
    let mut s = String::new();
    for (i, (t, w)) in tasks.iter().zip(weights).enumerate() {
        s.push_str(&format!(
            "========== Task {i}  (workload key: {}) ==========\n",
            t.workload_key
        ));
        s.push_str(&format!(
            "# {}  weight: {w}  FLOPs: {:.0}{}\n",
            t.name,
            t.flop_count(),
            t.choice
                .as_ref()
                .map(|c| format!("  (one option of {c})"))
                .unwrap_or_default()
        ));
        s.push_str(&t.dag.to_string());
        if !s.ends_with('\n') {
            s.push('\n');
        }
        s.push('\n');
    }
    s
}

/// Each task's default-schedule program (what an untuned build runs for it), lowered
/// from its first fused group with its parameters in the order of the task's DAG (as
/// its candidates take them); `None` for a task no group of `graph` computes.
pub fn default_programs(
    graph: &Graph,
    tasks: &[Task],
    p: tessera_te::schedules::CpuParams,
) -> Result<Vec<Option<Result<tessera_ir::PrimFunc, GraphError>>>, GraphError> {
    let mut out: Vec<Option<Result<tessera_ir::PrimFunc, GraphError>>> =
        (0..tasks.len()).map(|_| None).collect();
    for group in fuse(graph) {
        if group.view_of(graph).is_some() {
            continue;
        }
        let gc = group_compute(graph, &group)?;
        let key = gc.dag()?.workload_key();
        if let Some(i) = tasks
            .iter()
            .enumerate()
            .position(|(i, t)| t.workload_key == key && out[i].is_none())
        {
            out[i] = Some(crate::executor::lower_group_for_task(
                &gc,
                "default_schedule",
                p,
            ));
        }
    }
    Ok(out)
}

/// A task of a network compiled for ranges of sizes ([`range_tasks`]).
pub struct RangeTask {
    pub task: Task,
    /// How many of the network's groups compute it.
    pub weight: usize,
    /// Its default schedule's program (what an untuned range module runs), its
    /// parameters in its DAG's order.
    pub default: Result<tessera_ir::PrimFunc, GraphError>,
    /// Which of its DAG's inputs holds the sizes, where its loops run to them; `None`:
    /// a group that reads no size, whose workload is a fixed build's.
    pub sizes_param: Option<usize>,
}

/// The tasks of `net` for `target` (issue 61): one per distinct kernel group (views and
/// host steps run none), by workload key in order of first occurrence. A group whose
/// loops run to the sizes is its own workload: its DAG reads the sizes' vector (the
/// bounds of its axes name it), so its records are never a fixed build's; a group with
/// a one-token body is tuned for its general one.
pub fn range_tasks(
    net: &crate::dynamic::RangeNetwork,
    target: &Target,
    p: tessera_te::schedules::CpuParams,
) -> Result<Vec<RangeTask>, GraphError> {
    let mut out: Vec<RangeTask> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (g, gc) in net.groups.iter().zip(&net.computes) {
        if g.view_of(&net.graph).is_some()
            || crate::host_ops::HostOp::of(&net.graph, g, target).is_some()
        {
            continue;
        }
        let dag = gc.dag()?;
        let key = dag.workload_key();
        if let Some(&i) = index.get(&key) {
            out[i].weight += 1;
            continue;
        }
        index.insert(key.clone(), out.len());
        let sizes_param = dag.inputs().iter().position(|t| t == &net.extents);
        out.push(RangeTask {
            default: crate::executor::lower_group_for_task(gc, "default_schedule", p),
            task: Task {
                name: group_name(&net.graph, g),
                workload_key: key,
                dag,
                target: target.clone(),
                choice: None,
            },
            weight: 1,
            sizes_param,
        });
    }
    Ok(out)
}
