//! Network build and the graph executor.
//!
//! [`build`] fuses the network, compiles every distinct fused group once (with its
//! default schedule, the groups compiled in parallel), and plans memory: each
//! intermediate value gets a storage that is reused once all its consumers have run
//! (best fit by size, TVM's graph-plan-memory idea). [`GraphModule`] is the executor:
//! `set_input`, `run`, `get_output`, and timing of whole runs.

use crate::error::GraphError;
use crate::fuse::{fuse, group_compute, group_name, GroupCompute};
use crate::ir::{Graph, TensorType};
use petgraph::stable_graph::NodeIndex;
use std::collections::HashMap;
use std::sync::Arc;
use tessera_backends::{Backend, CpuBackend, Target, TargetKind};
use tessera_ir::{DataType, PrimFunc};
use tessera_runtime::{Module, NDArray, TimeEvaluator, TimeResult};
use tessera_te::schedules::{default_schedule_inlined, CpuParams};
use tessera_te::{lower, Schedule};

/// One kernel call of a run.
#[derive(Clone, Debug)]
struct Step {
    /// The fused group's name.
    name: String,
    kernel: usize,
    /// Storage ids of the arguments (inputs, then the output).
    args: Vec<usize>,
}

/// A compiled network, ready to run.
pub struct GraphModule {
    // Kept so the shared objects stay on disk as long as the modules are used.
    _dir: tempfile::TempDir,
    kernels: Vec<Arc<Module>>,
    steps: Vec<Step>,
    storages: Vec<NDArray>,
    inputs: Vec<(String, TensorType, usize)>,
    outputs: Vec<(TensorType, usize)>,
    /// Bytes of intermediate values with and without storage reuse.
    planned_bytes: usize,
    unplanned_bytes: usize,
}

impl std::fmt::Debug for GraphModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphModule")
            .field("kernels", &self.kernels.len())
            .field("steps", &self.steps.len())
            .field("storages", &self.storages.len())
            .finish()
    }
}

/// What a build produced, for reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildSummary {
    /// Fused groups (kernel calls per run).
    pub groups: usize,
    /// Distinct kernels compiled.
    pub kernels: usize,
    /// Bytes of intermediate values with storage reuse, and without.
    pub planned_bytes: usize,
    pub unplanned_bytes: usize,
}

/// The CPU parameters of the default schedules for a backend.
pub fn cpu_params(backend: &dyn Backend) -> CpuParams {
    let hw = backend.hardware_params();
    CpuParams {
        vector_lanes: (hw.vector_unit_bytes / 4).max(1) as i64,
        num_cores: hw.num_cores.max(1),
        vectorize: true,
    }
}

/// Chooses schedules other than the default ones: how tuned records are applied when a
/// network is built. Returning `None` keeps the group's default schedule.
pub trait ScheduleHook: Sync {
    fn schedule(&self, graph: &Graph, group: &GroupCompute, p: CpuParams) -> Option<Schedule>;
}

/// Lowers a fused group with its default schedule.
pub fn lower_group(gc: &GroupCompute, name: &str, p: CpuParams) -> Result<PrimFunc, GraphError> {
    let s = default_schedule_inlined(&[gc.output.clone()], &gc.inlinable, p).map_err(|source| {
        GraphError::Schedule {
            group: name.to_string(),
            source: Box::new(source),
        }
    })?;
    lower_scheduled(gc, name, &s)
}

/// Lowers a fused group with the schedule `s`.
pub fn lower_scheduled(
    gc: &GroupCompute,
    name: &str,
    s: &Schedule,
) -> Result<PrimFunc, GraphError> {
    lower(s, &gc.args(), name).map_err(|source| GraphError::Lower {
        group: name.to_string(),
        source: Box::new(source),
    })
}

/// Compiles `graph` for `target` (the CPU) with default schedules.
pub fn build(graph: &Graph, target: &Target) -> Result<GraphModule, GraphError> {
    build_with(graph, target, None)
}

/// Compiles `graph` for `target`, asking `hook` (if any) for each distinct group's
/// schedule first (e.g. the tuned history best), the default schedule otherwise.
pub fn build_with(
    graph: &Graph,
    target: &Target,
    hook: Option<&dyn ScheduleHook>,
) -> Result<GraphModule, GraphError> {
    graph.validate()?;
    if target.kind != TargetKind::Cpu {
        return Err(GraphError::Invalid(format!(
            "network build supports the cpu target for now, not `{target}`"
        )));
    }
    let backend = CpuBackend::new(target.clone());
    let p = cpu_params(&backend);
    let groups = fuse(graph);

    // Lower each distinct group once.
    let mut funcs: Vec<(String, PrimFunc)> = Vec::new();
    let mut kernel_of_key: HashMap<String, usize> = HashMap::new();
    let mut group_kernels = Vec::with_capacity(groups.len());
    let mut computes = Vec::with_capacity(groups.len());
    for g in &groups {
        let gc = group_compute(graph, g)?;
        let key = gc.dag()?.workload_key();
        let k = match kernel_of_key.get(&key) {
            Some(&k) => k,
            None => {
                let name = format!("{}_{}", group_name(graph, g), funcs.len());
                let func = match hook.and_then(|h| h.schedule(graph, &gc, p)) {
                    Some(s) => lower_scheduled(&gc, &name, &s)?,
                    None => lower_group(&gc, &name, p)?,
                };
                kernel_of_key.insert(key, funcs.len());
                funcs.push((name, func));
                funcs.len() - 1
            }
        };
        group_kernels.push(k);
        computes.push(gc);
    }

    // Compile them in parallel.
    let dir = tempfile::Builder::new()
        .prefix("tessera-graph-")
        .tempdir()
        .map_err(|source| GraphError::Io {
            path: std::env::temp_dir().display().to_string(),
            source,
        })?;
    let kernels = compile_all(&backend, &funcs, dir.path())?;

    // Plan storage and steps.
    let mut plan = Planner::default();
    let mut storage_of: HashMap<NodeIndex, usize> = HashMap::new();
    let mut inputs = Vec::new();
    for &i in graph.inputs() {
        let node = graph.node(i);
        let s = plan.fresh(node.ty.nbytes());
        storage_of.insert(i, s);
        inputs.push((node.name.clone(), node.ty.clone(), s));
    }
    let mut constants: Vec<(usize, Arc<NDArray>)> = Vec::new();
    let mut constant_storage = |n: NodeIndex, plan: &mut Planner| -> usize {
        let v = graph.constant_value(n).expect("a constant").clone();
        let s = plan.fresh(v.nbytes());
        constants.push((s, v));
        s
    };
    // How many kernel reads of each value are still to come.
    let mut pending: HashMap<NodeIndex, usize> = HashMap::new();
    for gc in &computes {
        for &a in &gc.params {
            *pending.entry(a).or_insert(0) += 1;
        }
    }
    let is_output = |n: NodeIndex| graph.outputs().contains(&n);
    let mut steps = Vec::with_capacity(groups.len());
    for ((g, gc), &k) in groups.iter().zip(&computes).zip(&group_kernels) {
        let mut args = Vec::with_capacity(gc.params.len() + 1);
        for &a in &gc.params {
            let s = match storage_of.get(&a) {
                Some(&s) => s,
                None => {
                    let s = constant_storage(a, &mut plan);
                    storage_of.insert(a, s);
                    s
                }
            };
            args.push(s);
        }
        let out = g.output();
        let out_ty = &graph.node(out).ty;
        let s = if is_output(out) {
            plan.fresh(out_ty.nbytes())
        } else {
            plan.reuse(out_ty.nbytes())
        };
        storage_of.insert(out, s);
        args.push(s);
        // Values whose last reader has now run give their storage back.
        for &a in &gc.params {
            let left = pending.get_mut(&a).expect("counted above");
            *left -= 1;
            let intermediate = graph.node(a).op.pattern().is_some() && !is_output(a);
            if *left == 0 && intermediate {
                plan.release(storage_of[&a]);
            }
        }
        steps.push(Step {
            name: group_name(graph, g),
            kernel: k,
            args,
        });
    }
    let mut outputs = Vec::new();
    for &o in graph.outputs() {
        let s = match storage_of.get(&o) {
            Some(&s) => s,
            None => constant_storage(o, &mut plan),
        };
        outputs.push((graph.node(o).ty.clone(), s));
    }
    let mut storages = Vec::with_capacity(plan.sizes.len());
    for &bytes in &plan.sizes {
        storages.push(NDArray::zeros(DataType::uint(8), &[bytes])?);
    }
    for (s, v) in constants {
        storages[s].as_bytes_mut()[..v.nbytes()].copy_from_slice(v.as_bytes());
    }
    Ok(GraphModule {
        _dir: dir,
        kernels,
        steps,
        storages,
        inputs,
        outputs,
        planned_bytes: plan.reused_bytes(),
        unplanned_bytes: plan.requested_reusable,
    })
}

/// Compiles the functions on up to `available_parallelism` threads, in order.
fn compile_all(
    backend: &CpuBackend,
    funcs: &[(String, PrimFunc)],
    dir: &std::path::Path,
) -> Result<Vec<Arc<Module>>, GraphError> {
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(funcs.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<Option<Result<Arc<Module>, GraphError>>> =
        (0..funcs.len()).map(|_| None).collect();
    let slots = std::sync::Mutex::new(&mut results);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some((name, func)) = funcs.get(i) else {
                    break;
                };
                let r = backend
                    .build(func, dir)
                    .map_err(|source| GraphError::Backend {
                        group: name.clone(),
                        source: Box::new(source),
                    })
                    .and_then(|a| Ok(Arc::new(Module::load(&a)?)));
                slots.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
            });
        }
    });
    results
        .into_iter()
        .map(|r| r.expect("every function was compiled"))
        .collect()
}

/// Storage allocation: fresh storages for values that live through the run, and
/// best-fit reuse of released storages for intermediates.
#[derive(Default)]
struct Planner {
    sizes: Vec<usize>,
    free: Vec<usize>,
    reusable: std::collections::BTreeSet<usize>,
    requested_reusable: usize,
}

impl Planner {
    fn fresh(&mut self, bytes: usize) -> usize {
        self.sizes.push(bytes);
        self.sizes.len() - 1
    }
    /// A released storage of at least `bytes` (the smallest), else the largest released
    /// one grown to `bytes`, else a new one.
    fn reuse(&mut self, bytes: usize) -> usize {
        self.requested_reusable += bytes;
        let fit = self
            .free
            .iter()
            .enumerate()
            .filter(|(_, &s)| self.sizes[s] >= bytes)
            .min_by_key(|(_, &s)| self.sizes[s])
            .map(|(i, _)| i)
            .or_else(|| {
                self.free
                    .iter()
                    .enumerate()
                    .max_by_key(|(_, &s)| self.sizes[s])
                    .map(|(i, _)| i)
            });
        let s = match fit {
            Some(i) => self.free.swap_remove(i),
            None => self.fresh(bytes),
        };
        self.sizes[s] = self.sizes[s].max(bytes);
        self.reusable.insert(s);
        s
    }
    fn release(&mut self, s: usize) {
        if self.reusable.contains(&s) && !self.free.contains(&s) {
            self.free.push(s);
        }
    }
    fn reused_bytes(&self) -> usize {
        self.reusable.iter().map(|&s| self.sizes[s]).sum()
    }
}

impl GraphModule {
    /// The network's inputs: name and type.
    pub fn inputs(&self) -> impl Iterator<Item = (&str, &TensorType)> {
        self.inputs.iter().map(|(n, t, _)| (n.as_str(), t))
    }
    /// The types of the outputs.
    pub fn output_types(&self) -> impl Iterator<Item = &TensorType> {
        self.outputs.iter().map(|(t, _)| t)
    }

    /// Copies `value` into the input `name` (its dtype and shape must match).
    pub fn set_input(&mut self, name: &str, value: &NDArray) -> Result<(), GraphError> {
        let Some((_, ty, s)) = self.inputs.iter().find(|(n, _, _)| n == name) else {
            let names: Vec<&str> = self.inputs.iter().map(|(n, _, _)| n.as_str()).collect();
            return Err(GraphError::Input {
                name: name.to_string(),
                reason: format!(
                    "the network has no such input (its inputs: {})",
                    names.join(", ")
                ),
            });
        };
        let shape: Vec<i64> = value.shape().iter().map(|&d| d as i64).collect();
        if value.dtype() != ty.dtype || shape != ty.shape {
            return Err(GraphError::Input {
                name: name.to_string(),
                reason: format!(
                    "expected {ty}, got {}",
                    TensorType::new(&shape, value.dtype())
                ),
            });
        }
        self.storages[*s].as_bytes_mut()[..value.nbytes()].copy_from_slice(value.as_bytes());
        Ok(())
    }

    /// Runs every kernel once, in order.
    pub fn run(&mut self) -> Result<(), GraphError> {
        let mut ptrs = Vec::new();
        for i in 0..self.steps.len() {
            self.call_step(i, &mut ptrs)?;
        }
        Ok(())
    }

    /// Calls step `i`'s kernel on its storages (`ptrs` is scratch space, reused across
    /// calls so that a run allocates nothing).
    fn call_step(
        &mut self,
        i: usize,
        ptrs: &mut Vec<*mut std::ffi::c_void>,
    ) -> Result<(), GraphError> {
        let step = &self.steps[i];
        ptrs.clear();
        for &s in &step.args {
            ptrs.push(self.storages[s].as_mut_ptr());
        }
        // SAFETY: the build checked every group's parameter types against the values
        // planned for them; each storage is at least as large as any value given to it,
        // 64-byte aligned, and a step's output storage is never one of its inputs' (it is
        // taken before they are released). Inputs may share a storage only when the same
        // value is read twice, which the kernel only reads.
        unsafe { self.kernels[step.kernel].call_raw(ptrs) }?;
        Ok(())
    }

    /// A copy of output `index`.
    pub fn get_output(&self, index: usize) -> Result<NDArray, GraphError> {
        let (ty, s) = self.outputs.get(index).ok_or_else(|| {
            GraphError::Invalid(format!(
                "output {index} does not exist (the network has {})",
                self.outputs.len()
            ))
        })?;
        let shape: Vec<usize> = ty.shape.iter().map(|&d| d as usize).collect();
        let mut out = NDArray::zeros(ty.dtype, &shape)?;
        let n = out.nbytes();
        out.as_bytes_mut()
            .copy_from_slice(&self.storages[*s].as_bytes()[..n]);
        Ok(out)
    }

    /// Times whole runs with `evaluator`.
    pub fn benchmark(&mut self, evaluator: &TimeEvaluator) -> Result<TimeResult, GraphError> {
        evaluator.evaluate(|| self.run())
    }

    /// Times each step (kernel call) inside whole runs, `repeat` runs, and returns (group
    /// name, mean ms) in execution order: each kernel as it runs in the network, with the
    /// caches its predecessors left (what a run costs, unlike timing a kernel alone).
    pub fn profile(&mut self, repeat: usize) -> Result<Vec<(String, f64)>, GraphError> {
        let mut total = vec![0.0f64; self.steps.len()];
        let mut ptrs = Vec::new();
        for _ in 0..repeat.max(1) {
            for (i, t) in total.iter_mut().enumerate() {
                let start = std::time::Instant::now();
                self.call_step(i, &mut ptrs)?;
                *t += start.elapsed().as_secs_f64() * 1e3;
            }
        }
        let n = repeat.max(1) as f64;
        Ok(self
            .steps
            .iter()
            .zip(total)
            .map(|(s, t)| (s.name.clone(), t / n))
            .collect())
    }

    pub fn summary(&self) -> BuildSummary {
        BuildSummary {
            groups: self.steps.len(),
            kernels: self.kernels.len(),
            planned_bytes: self.planned_bytes,
            unplanned_bytes: self.unplanned_bytes,
        }
    }
}
