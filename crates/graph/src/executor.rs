//! Network build and the graph executor, on any device.
//!
//! [`build_on`] fuses the network, compiles every distinct fused group once with the
//! given backend (its default schedule, or a hook's; the groups compiled in parallel),
//! loads the kernels on the given device, and plans memory: each intermediate value
//! gets a storage that is reused once all its consumers have run (best fit by size,
//! TVM's graph-plan-memory idea). Every storage is a buffer of the device: the weights
//! are uploaded once, at build; intermediates never leave the device. [`GraphModule`]
//! is the executor: `set_input` (one copy in), `run` (launches only), `get_output` (one
//! copy out), and timing of whole runs. [`build`] and [`build_with`] do the same for the
//! host CPU.
//!
//! At load, a run's launches are recorded once as a launch sequence
//! ([`Device::record_sequence`]): on a GPU a CUDA graph, replayed per run as one
//! submission on the device's own stream; where the device keeps no sequences, or
//! recording fails, each step is launched on its own and [`LaunchMode`] says why.
//! [`GraphModule::profile`] times each step inside one run on the device's clock
//! ([`Device::time_steps`]).

use crate::error::GraphError;
use crate::fuse::{group_name, GroupCompute};
use crate::host_ops::{HostOp, HostStep};
use crate::ir::{Graph, TensorType};
use petgraph::stable_graph::NodeIndex;
use std::collections::HashMap;
use std::sync::Arc;
use tessera_backends::{Artifact, Backend, CpuBackend, HardwareParams, LaunchDims, Target};
use tessera_ir::PrimFunc;
use tessera_runtime::{
    BufferId, CpuDevice, Device, DeviceArray, FunctionId, LaunchStep, NDArray, SequenceId,
    TimeEvaluator, TimeResult,
};
use tessera_te::schedules::{default_schedule_inlined, CpuParams};
use tessera_te::{lower, Schedule};

/// One kernel call of a run.
#[derive(Clone, Debug)]
pub(crate) struct Step {
    /// The fused group's name.
    pub(crate) name: String,
    pub(crate) work: Work,
    /// The device buffers of the arguments (inputs, then the output).
    pub(crate) buffers: Vec<BufferId>,
}

/// What a step runs.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Work {
    /// A kernel: an index into the network's kernels.
    Kernel(usize),
    /// An operator computed on the host ([`crate::host_ops`]).
    Host(HostStep),
}

/// A loaded kernel: its function on the device and how it is launched.
pub(crate) struct Kernel {
    pub(crate) function: FunctionId,
    pub(crate) launch: Option<LaunchDims>,
    /// The workload key of the groups it computes (the key tuning records are under).
    pub(crate) workload_key: String,
}

/// A compiled network, ready to run.
pub struct GraphModule {
    // Kept so the artifacts stay on disk as long as the modules are used.
    pub(crate) _dir: tempfile::TempDir,
    pub(crate) device: Arc<dyn Device>,
    pub(crate) target: Target,
    pub(crate) kernels: Vec<Kernel>,
    pub(crate) steps: Vec<Step>,
    pub(crate) storages: Vec<DeviceArray>,
    pub(crate) inputs: Vec<(String, TensorType, usize)>,
    pub(crate) outputs: Vec<(TensorType, usize)>,
    /// The inputs a gather reads as indices, checked by [`GraphModule::set_input`].
    pub(crate) index_bounds: Vec<crate::index_bounds::IndexBound>,
    /// The inputs the network was built for one value of ([`crate::fixed_inputs`]).
    pub(crate) fixed_inputs: Vec<crate::fixed_inputs::FixedInput>,
    /// The size known only at run time, where there is one ([`crate::dynamic`]).
    pub(crate) dynamic: Option<crate::dynamic::RunSize>,
    /// Bytes of intermediate values with and without storage reuse.
    pub(crate) planned_bytes: usize,
    pub(crate) unplanned_bytes: usize,
    pub(crate) weight_bytes: usize,
    /// The recorded launch sequence a run replays, when there is one.
    pub(crate) sequence: Option<SequenceId>,
    pub(crate) launch_mode: LaunchMode,
}

/// How a run's kernels reach the device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LaunchMode {
    /// One recorded launch sequence per run (on a GPU, a CUDA graph).
    Sequence,
    /// Each step launched on its own, and why.
    StepByStep { why: String },
}

impl std::fmt::Display for LaunchMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LaunchMode::Sequence => f.write_str("one recorded launch sequence per run"),
            LaunchMode::StepByStep { why } => write!(f, "kernel by kernel ({why})"),
        }
    }
}

impl Drop for GraphModule {
    fn drop(&mut self) {
        // Before the storages it names are freed; a failure leaks the sequence only.
        if let Some(s) = self.sequence.take() {
            let _ = self.device.free_sequence(s);
        }
    }
}

impl std::fmt::Debug for GraphModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphModule")
            .field("device", &self.device.kind())
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
    /// Bytes of the constants (weights) uploaded to the device at build.
    pub weight_bytes: usize,
}

/// The CPU parameters of the default schedules for a backend.
pub fn cpu_params(backend: &dyn Backend) -> CpuParams {
    BuildContext::of(backend).cpu_params()
}

/// What a schedule is chosen for: the target and its hardware parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct BuildContext {
    pub target: Target,
    pub hardware: HardwareParams,
}

impl BuildContext {
    /// The context of `backend`'s target.
    pub fn of(backend: &dyn Backend) -> BuildContext {
        BuildContext {
            target: backend.target().clone(),
            hardware: backend.hardware_params().clone(),
        }
    }

    /// The parameters of the default schedules on this target (GPU ones where the
    /// target has threads per block).
    pub fn cpu_params(&self) -> CpuParams {
        CpuParams {
            vector_lanes: self.hardware.f32_lanes(),
            num_cores: self.hardware.num_cores.max(1),
            vectorize: true,
            gpu_threads: self.hardware.max_threads_per_block as i64,
        }
    }
}

/// Chooses schedules other than the default ones: how tuned records are applied when a
/// network is built. Returning `None` keeps the group's default schedule.
pub trait ScheduleHook: Sync {
    fn schedule(&self, graph: &Graph, group: &GroupCompute, ctx: &BuildContext)
        -> Option<Schedule>;
}

/// A fused group's default schedule (its inlinable stages inlined).
fn default_group_schedule(
    gc: &GroupCompute,
    name: &str,
    p: CpuParams,
) -> Result<Schedule, GraphError> {
    default_schedule_inlined(&[gc.output.clone()], &gc.inlinable, p).map_err(|source| {
        GraphError::Schedule {
            group: name.to_string(),
            source: Box::new(source),
        }
    })
}

/// Lowers a fused group with its default schedule.
pub fn lower_group(gc: &GroupCompute, name: &str, p: CpuParams) -> Result<PrimFunc, GraphError> {
    lower_scheduled(gc, name, &default_group_schedule(gc, name, p)?)
}

/// One kernel of a group's function `general` and its function at fixed values of some
/// runtime sizes, `special` (the same parameters or fewer: the sizes it fixed may be
/// read no more), which runs where `sp`'s condition holds ([`crate::dynamic`]).
fn with_specialized(
    general: PrimFunc,
    special: PrimFunc,
    sp: &crate::fuse::Specialized,
) -> Result<PrimFunc, GraphError> {
    if special.params.iter().any(|b| !general.params.contains(b)) {
        return Err(GraphError::Invalid(format!(
            "`{}`: its specialized function takes other parameters",
            general.name
        )));
    }
    let body = tessera_ir::Stmt::if_then_else(sp.condition.clone(), special.body, general.body);
    Ok(PrimFunc::new(general.name, general.params, body))
}

/// Lowers a fused group with its default schedule, its parameters in the order of its
/// compute DAG's arguments (the DAG's inputs, then the output) — the order its tuning
/// task's candidates and reference take, which can differ from the group's own
/// ([`GroupCompute::args`]): a residual add's second operand, for one, comes first.
pub fn lower_group_for_task(
    gc: &GroupCompute,
    name: &str,
    p: CpuParams,
) -> Result<PrimFunc, GraphError> {
    let mut args = gc.dag()?.inputs();
    args.push(gc.output.clone());
    lower_with_args(&default_group_schedule(gc, name, p)?, &args, name)
}

/// Lowers a fused group with the schedule `s`.
pub fn lower_scheduled(
    gc: &GroupCompute,
    name: &str,
    s: &Schedule,
) -> Result<PrimFunc, GraphError> {
    lower_with_args(s, &gc.args(), name)
}

/// Lowers `s` into function `name` taking `args`.
fn lower_with_args(
    s: &Schedule,
    args: &[tessera_te::Tensor],
    name: &str,
) -> Result<PrimFunc, GraphError> {
    lower(s, args, name).map_err(|source| GraphError::Lower {
        group: name.to_string(),
        source: Box::new(source),
    })
}

/// The value a network input gets when none is given: uniform in [-1, 1], seeded by
/// the input's position (42, 43, …), so that every run, tool and check feeds the same.
pub fn random_input(ty: &TensorType, position: usize) -> Result<NDArray, GraphError> {
    let shape: Vec<usize> = ty.shape.iter().map(|&d| d as usize).collect();
    Ok(NDArray::random_uniform(
        ty.dtype,
        &shape,
        42 + position as u64,
        -1.0,
        1.0,
    )?)
}

/// Compiles `graph` for `target` (the host CPU) with default schedules.
pub fn build(graph: &Graph, target: &Target) -> Result<GraphModule, GraphError> {
    build_with(graph, target, None)
}

/// Compiles `graph` for `target` (the host CPU), asking `hook` (if any) for each
/// distinct group's schedule first (e.g. the tuned history best), the default schedule
/// otherwise. Other targets are built with [`build_on`] and their plugin's backend and
/// device.
pub fn build_with(
    graph: &Graph,
    target: &Target,
    hook: Option<&dyn ScheduleHook>,
) -> Result<GraphModule, GraphError> {
    if !target.kind.is_cpu() {
        return Err(GraphError::Invalid(format!(
            "`{target}` is not the host CPU: build it with `build_on` and its plugin's backend and device"
        )));
    }
    let backend = CpuBackend::new(target.clone());
    build_on(graph, &backend, Arc::new(CpuDevice::new()), hook)
}

/// Compiles `graph` with `backend` and loads it on `device` (a device of the backend's
/// target kind), asking `hook` (if any) for each distinct group's schedule first.
pub fn build_on(
    graph: &Graph,
    backend: &dyn Backend,
    device: Arc<dyn Device>,
    hook: Option<&dyn ScheduleHook>,
) -> Result<GraphModule, GraphError> {
    crate::deploy::compile(graph, backend, hook)?.load(device)
}

/// The fused groups lowered, each distinct workload once.
pub(crate) struct Lowered {
    /// The distinct kernels: name and function.
    pub(crate) funcs: Vec<(String, PrimFunc)>,
    /// Each distinct kernel's workload key.
    pub(crate) keys: Vec<String>,
    /// What each group runs, and its compute.
    group_work: Vec<GroupWork>,
    computes: Vec<GroupCompute>,
}

/// What a fused group becomes in a run.
enum GroupWork {
    /// A kernel: an index into the distinct functions.
    Kernel(usize),
    /// Nothing: its value is its source's storage ([`crate::fuse::Group::view_of`]).
    View(NodeIndex),
    /// A host step, and the value of a later group it writes as well (the other
    /// output of a TopK).
    Host(HostStep, Option<NodeIndex>),
    /// Nothing: an earlier host step writes its value.
    Written,
}

/// The tensor expression of group `i` of a network's groups.
pub(crate) type ComputeOf<'a> =
    dyn Fn(usize, &crate::fuse::Group) -> Result<GroupCompute, GraphError> + 'a;

/// Lowers each distinct group (by workload key) once: with `hook`'s schedule when it
/// has one, else the default schedule; each group's tensor expression from
/// `compute_of` ([`group_compute`] of `graph`'s, or the runtime-extent one of
/// [`crate::dynamic`]).
pub(crate) fn lower_distinct(
    graph: &Graph,
    groups: &[crate::fuse::Group],
    ctx: &BuildContext,
    hook: Option<&dyn ScheduleHook>,
    compute_of: &ComputeOf,
) -> Result<Lowered, GraphError> {
    let p = ctx.cpu_params();
    let mut funcs: Vec<(String, PrimFunc)> = Vec::new();
    let mut kernel_of_key: HashMap<String, usize> = HashMap::new();
    let mut keys = Vec::new();
    let mut group_work = Vec::with_capacity(groups.len());
    let mut computes = Vec::with_capacity(groups.len());
    // host steps that could write one more output, by their input
    let mut open_hosts: HashMap<Vec<NodeIndex>, usize> = HashMap::new();
    for (i, g) in groups.iter().enumerate() {
        let gc = compute_of(i, g)?;
        if let Some(source) = g.view_of(graph) {
            group_work.push(GroupWork::View(source));
            computes.push(gc);
            continue;
        }
        if let Some(op) = HostOp::of(graph, g, &ctx.target) {
            if let HostOp::Select { how, size: None } = &op {
                return Err(GraphError::Invalid(format!(
                    "`{}` ({}) selects a number of values only the run tells: the network \
                     is compiled for that size (tessera_graph::dynamic::compile_dynamic)",
                    graph.node(g.output()).name,
                    how.name()
                )));
            }
            let ty = |n: NodeIndex| graph.node(n).ty.clone();
            let earlier = open_hosts.get(&gc.params).copied();
            let merged = earlier.and_then(|i| match &mut group_work[i] {
                GroupWork::Host(step, also @ None) => {
                    let both = step.op.merged(&op)?;
                    step.op = both;
                    if !gc.host_dims.is_empty() || !step.dims.is_empty() {
                        step.dims
                            .resize(step.inputs.len() + step.outputs.len(), Vec::new());
                        step.dims
                            .push(gc.host_dims.last().cloned().unwrap_or_default());
                    }
                    step.outputs.push(ty(g.output()));
                    *also = Some(g.output());
                    Some(i)
                }
                _ => None,
            });
            if let Some(i) = merged {
                open_hosts.retain(|_, &mut j| j != i);
                group_work.push(GroupWork::Written);
            } else {
                open_hosts.insert(gc.params.clone(), group_work.len());
                group_work.push(GroupWork::Host(
                    HostStep {
                        op,
                        inputs: gc.params.iter().map(|&a| ty(a)).collect(),
                        outputs: vec![ty(g.output())],
                        dims: gc.host_dims.clone(),
                        count: gc.host_count,
                    },
                    None,
                ));
            }
            computes.push(gc);
            continue;
        }
        let key = gc.dag()?.workload_key();
        let k = match kernel_of_key.get(&key) {
            Some(&k) => k,
            None => {
                let name = format!("{}_{}", group_name(graph, g), funcs.len());
                let mut func = match hook.and_then(|h| h.schedule(graph, &gc, ctx)) {
                    Some(s) => lower_scheduled(&gc, &name, &s)?,
                    None => lower_group(&gc, &name, p)?,
                };
                if let Some(sp) = &gc.specialized {
                    func = with_specialized(func, lower_group(&sp.compute, &name, p)?, sp)?;
                }
                kernel_of_key.insert(key.clone(), funcs.len());
                keys.push(key);
                funcs.push((name, func));
                funcs.len() - 1
            }
        };
        group_work.push(GroupWork::Kernel(k));
        computes.push(gc);
    }
    Ok(Lowered {
        funcs,
        keys,
        group_work,
        computes,
    })
}

/// Where every value of a run lives: storage sizes, the network's inputs and outputs,
/// the constants to upload, and each step's (name, kernel, argument storages).
pub(crate) struct StoragePlan {
    pub(crate) sizes: Planner,
    pub(crate) inputs: Vec<(String, TensorType, usize)>,
    pub(crate) outputs: Vec<(TensorType, usize)>,
    pub(crate) constants: Vec<(usize, Arc<NDArray>)>,
    pub(crate) steps: Vec<(String, Work, Vec<usize>)>,
}

/// Plans the storages: fresh ones for inputs, outputs and constants, reused ones for
/// intermediates (a group's output storage is taken before its inputs' are released, so
/// no kernel's output aliases its inputs). A view ([`crate::fuse::Group::view_of`]) runs
/// no step: its value is its source's storage, released once neither has a reader left.
/// A host step's storages are planned as a kernel's, with one more output where it
/// writes a later group's value too.
pub(crate) fn plan_storage(
    graph: &Graph,
    groups: &[crate::fuse::Group],
    lowered: &Lowered,
) -> StoragePlan {
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
    // How many reads of each value are still to come (a view's counts as one).
    let mut pending: HashMap<NodeIndex, usize> = HashMap::new();
    for gc in &lowered.computes {
        for &a in &gc.params {
            *pending.entry(a).or_insert(0) += 1;
        }
    }
    // How many values with reads to come live in each reusable storage.
    let mut holders: HashMap<usize, usize> = HashMap::new();
    let is_output = |n: NodeIndex| graph.outputs().contains(&n);
    let mut steps = Vec::with_capacity(groups.len());
    for ((g, gc), work) in groups
        .iter()
        .zip(&lowered.computes)
        .zip(&lowered.group_work)
    {
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
        let mut outs = vec![out];
        if let GroupWork::Host(_, Some(also)) = work {
            outs.push(*also);
        }
        let mut out_storages = Vec::with_capacity(outs.len());
        for &o in &outs {
            let s = match work {
                GroupWork::View(source) => storage_of[source],
                GroupWork::Written => storage_of[&o],
                _ if is_output(o) => plan.fresh(graph.node(o).ty.nbytes()),
                _ => plan.reuse(graph.node(o).ty.nbytes()),
            };
            let written = matches!(work, GroupWork::Written);
            storage_of.insert(o, s);
            if !is_output(o) && !written {
                *holders.entry(s).or_insert(0) += 1;
            }
            out_storages.push(s);
        }
        // Values whose last reader has now run give their storage back.
        for &a in &gc.params {
            let left = pending.get_mut(&a).expect("counted above");
            *left -= 1;
            let intermediate = graph.node(a).op.pattern().is_some() && !is_output(a);
            if *left == 0 && intermediate {
                let s = storage_of[&a];
                let held = holders
                    .get_mut(&s)
                    .expect("an intermediate's storage is held");
                *held -= 1;
                if *held == 0 {
                    plan.release(s);
                }
            }
        }
        let work = match work {
            GroupWork::View(_) | GroupWork::Written => continue,
            GroupWork::Kernel(k) => Work::Kernel(*k),
            GroupWork::Host(h, _) => Work::Host(h.clone()),
        };
        args.extend(out_storages);
        steps.push((group_name(graph, g), work, args));
    }
    let mut outputs = Vec::new();
    for &o in graph.outputs() {
        let s = match storage_of.get(&o) {
            Some(&s) => s,
            None => constant_storage(o, &mut plan),
        };
        outputs.push((graph.node(o).ty.clone(), s));
    }
    StoragePlan {
        sizes: plan,
        inputs,
        outputs,
        constants,
        steps,
    }
}

/// Loads a built kernel on the device.
pub(crate) fn load_kernel(
    device: &Arc<dyn Device>,
    artifact: &Artifact,
    workload_key: &str,
) -> Result<Kernel, GraphError> {
    let module = device.load_module(artifact)?;
    Ok(Kernel {
        function: device.get_function(module, &artifact.entry)?,
        launch: artifact.launch,
        workload_key: workload_key.to_string(),
    })
}

/// Compiles the functions on up to `available_parallelism` threads, in order.
pub(crate) fn compile_all(
    backend: &dyn Backend,
    funcs: &[(String, PrimFunc)],
    dir: &std::path::Path,
) -> Result<Vec<Artifact>, GraphError> {
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(funcs.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<Option<Result<Artifact, GraphError>>> =
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
                    });
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
pub(crate) struct Planner {
    pub(crate) sizes: Vec<usize>,
    free: Vec<usize>,
    reusable: std::collections::BTreeSet<usize>,
    pub(crate) requested_reusable: usize,
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
    pub(crate) fn reused_bytes(&self) -> usize {
        self.reusable.iter().map(|&s| self.sizes[s]).sum()
    }
}

impl GraphModule {
    /// The target the network was compiled for.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The network's inputs: name and type.
    pub fn inputs(&self) -> impl Iterator<Item = (&str, &TensorType)> {
        self.inputs.iter().map(|(n, t, _)| (n.as_str(), t))
    }
    /// The types of the outputs.
    pub fn output_types(&self) -> impl Iterator<Item = &TensorType> {
        self.outputs.iter().map(|(t, _)| t)
    }

    /// The value input `k` gets when none is given: the value the module was built for
    /// where it was built for one ([`crate::fixed_inputs`]), else its [`random_input`].
    pub fn default_input(&self, k: usize) -> Result<NDArray, GraphError> {
        let (name, ty, _) = self.inputs.get(k).ok_or_else(|| {
            GraphError::Invalid(format!(
                "the network has {} inputs, not {}",
                self.inputs.len(),
                k + 1
            ))
        })?;
        match self.fixed_inputs.iter().find(|f| &f.input == name) {
            Some(f) => Ok(NDArray::from_f64(ty.dtype, &f.shape, &f.values)?),
            None => random_input(ty, k),
        }
    }

    /// Sets every input to its [`GraphModule::default_input`].
    pub fn set_random_inputs(&mut self) -> Result<(), GraphError> {
        let values = (0..self.inputs.len())
            .map(|k| Ok((self.inputs[k].0.clone(), self.default_input(k)?)))
            .collect::<Result<Vec<_>, GraphError>>()?;
        for (name, v) in values {
            self.set_input(&name, &v)?;
        }
        Ok(())
    }

    /// Copies `value` into the input `name` (its dtype and shape must match, and an input
    /// a gather reads as indices must hold indices in range: [`crate::index_bounds`]; an
    /// input the network was built for one value of must hold it: [`crate::fixed_inputs`]).
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
        let (ty, s) = (ty.clone(), *s);
        if self.dynamic.as_ref().is_some_and(|d| d.has_input(name)) {
            return self.set_sized_input(name, value, &ty, s);
        }
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
        crate::index_bounds::check(&self.index_bounds, name, value)?;
        crate::fixed_inputs::check(&self.fixed_inputs, name, value)?;
        self.device
            .copy_from_host(self.storages[s].buffer(), 0, value.as_bytes())?;
        Ok(())
    }

    /// Runs every kernel once, in order (the recorded sequence, when there is one), and
    /// waits for the device.
    pub fn run(&mut self) -> Result<(), GraphError> {
        if let Some(d) = self.dynamic.as_mut() {
            let sizes = d.start_run()?;
            self.write_sizes(&sizes)?;
        }
        match self.sequence {
            Some(s) => self.device.run_sequence(s)?,
            None => {
                for i in 0..self.steps.len() {
                    self.launch_step(i)?;
                }
            }
        }
        self.device.synchronize()?;
        self.read_produced_sizes()
    }

    /// Each step as the device launches it, or why not: a run with a host step is no
    /// launch sequence of the device's.
    pub(crate) fn launch_steps(&self) -> Result<Vec<LaunchStep>, String> {
        self.steps
            .iter()
            .map(|step| match &step.work {
                Work::Kernel(k) => {
                    let k = &self.kernels[*k];
                    Ok(LaunchStep {
                        function: k.function,
                        args: step.buffers.clone(),
                        dims: k.launch,
                    })
                }
                Work::Host(h) => Err(format!(
                    "step `{}` ({}) runs on the host",
                    step.name,
                    h.op.name()
                )),
            })
            .collect()
    }

    /// Records the run's launches as a sequence on the device (see the module's
    /// header); at load.
    pub(crate) fn record_sequence(&mut self) {
        let steps = match self.launch_steps() {
            Ok(steps) => steps,
            Err(why) => {
                self.launch_mode = LaunchMode::StepByStep { why };
                return;
            }
        };
        self.launch_mode = match self.device.record_sequence(&steps) {
            Ok(Some(s)) => {
                self.sequence = Some(s);
                LaunchMode::Sequence
            }
            Ok(None) => LaunchMode::StepByStep {
                why: "the device keeps no launch sequences".into(),
            },
            Err(e) => LaunchMode::StepByStep {
                why: format!("recording the launch sequence failed: {e}"),
            },
        };
    }

    /// How runs launch their kernels.
    pub fn launch_mode(&self) -> &LaunchMode {
        &self.launch_mode
    }

    /// Launches each step on its own from now on (the recorded sequence is freed): to
    /// compare the two, or to rule the sequence out.
    pub fn launch_step_by_step(&mut self) -> Result<(), GraphError> {
        self.launch_mode = LaunchMode::StepByStep {
            why: "asked for".into(),
        };
        if let Some(s) = self.sequence.take() {
            self.device.free_sequence(s)?;
        }
        Ok(())
    }

    /// Launches step `i`'s kernel on its buffers. The build checked every group's
    /// parameter types against the values planned for them; each storage is at least
    /// as large as any value given to it, and a step's output storage is never one of
    /// its inputs' (it is taken before they are released). A host step waits for the
    /// device, reads its inputs, computes and writes its outputs back.
    fn launch_step(&self, i: usize) -> Result<(), GraphError> {
        let step = &self.steps[i];
        match &step.work {
            Work::Kernel(k) => {
                let k = &self.kernels[*k];
                self.device
                    .launch(k.function, &step.buffers, k.launch.as_ref())?;
            }
            Work::Host(h) => self.run_host_step(&step.name, h, &step.buffers)?,
        }
        Ok(())
    }

    /// Runs step `i` alone and waits for it: its seconds on the host's clock.
    fn time_step_on_host(&self, i: usize) -> Result<f64, GraphError> {
        let start = std::time::Instant::now();
        self.launch_step(i)?;
        self.device.synchronize()?;
        Ok(start.elapsed().as_secs_f64())
    }

    /// The device the network runs on.
    pub fn device(&self) -> &Arc<dyn Device> {
        &self.device
    }

    /// A copy of output `index`.
    pub fn get_output(&self, index: usize) -> Result<NDArray, GraphError> {
        let (ty, s) = self.outputs.get(index).ok_or_else(|| {
            GraphError::Invalid(format!(
                "output {index} does not exist (the network has {})",
                self.outputs.len()
            ))
        })?;
        let max: Vec<usize> = ty.shape.iter().map(|&d| d as usize).collect();
        let shape = match &self.dynamic {
            Some(d) => d.output_shape(index, ty)?,
            None => max.clone(),
        };
        let mut out = NDArray::zeros(ty.dtype, &shape)?;
        let (dst, at) = (out.as_bytes_mut(), self.storages[*s].buffer());
        // in the sizes' layout, a contiguous run at a time (one where nothing varies)
        for (to, from, len) in crate::dynamic::leading_runs(&shape, &max, ty.dtype.bytes()) {
            self.device.copy_to_host(at, from, &mut dst[to..to + len])?;
        }
        Ok(out)
    }

    /// The counters the module's device keeps ([`Device::counters`]); read before and
    /// after a run, their difference is that run's.
    pub fn device_counters(&self) -> Result<tessera_runtime::DeviceCounters, GraphError> {
        Ok(self.device.counters()?)
    }

    /// Times whole runs with `evaluator`.
    pub fn benchmark(&mut self, evaluator: &TimeEvaluator) -> Result<TimeResult, GraphError> {
        evaluator.evaluate(|| self.run())
    }

    /// The network's time as the sum of its kernels' times on the device's own timer
    /// (`Device::time`, one call each after the device's warm-up): for a device whose
    /// clock is not the host's — a simulator's cycle model — where timing whole runs
    /// with the host's clock would measure the simulation. Each of `evaluator.repeat`
    /// results is one such sum (in seconds).
    pub fn benchmark_kernels(
        &mut self,
        evaluator: &TimeEvaluator,
    ) -> Result<TimeResult, GraphError> {
        let once = TimeEvaluator::new(1, 1, 0.0);
        let mut results = Vec::with_capacity(evaluator.repeat.max(1));
        for _ in 0..evaluator.repeat.max(1) {
            let mut total = 0.0;
            for (i, step) in self.steps.iter().enumerate() {
                let Work::Kernel(k) = step.work else {
                    total += self.time_step_on_host(i)?;
                    continue;
                };
                let k = &self.kernels[k];
                let r = self
                    .device
                    .time(k.function, &step.buffers, k.launch.as_ref(), &once)?;
                total += r.results.iter().sum::<f64>() / r.results.len().max(1) as f64;
            }
            results.push(total);
        }
        Ok(TimeResult { results, number: 1 })
    }

    /// Times each step (kernel call) inside whole runs, `repeat` runs after one untimed
    /// run, and returns (group name, mean ms) in execution order: each kernel as it runs
    /// in the network, with the caches its predecessors left (what a run costs, unlike
    /// timing a kernel alone), on the device's clock where it has one
    /// ([`Device::time_steps`]).
    pub fn profile(&mut self, repeat: usize) -> Result<Vec<(String, f64)>, GraphError> {
        self.run()?;
        let steps = self.launch_steps().ok();
        let mut total = vec![0.0f64; self.steps.len()];
        for _ in 0..repeat.max(1) {
            // with a host step, every step on the host's clock
            let times = match &steps {
                Some(steps) => self.device.time_steps(steps)?,
                None => (0..self.steps.len())
                    .map(|i| self.time_step_on_host(i))
                    .collect::<Result<Vec<_>, _>>()?,
            };
            if times.len() != total.len() {
                return Err(GraphError::Invalid(format!(
                    "the device timed {} steps of {}",
                    times.len(),
                    total.len()
                )));
            }
            for (t, s) in total.iter_mut().zip(times) {
                *t += s * 1e3;
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

    /// The workload key of each step's kernel, in execution order (the order of
    /// [`GraphModule::profile`]'s entries): what ties a step to its tuning records (a
    /// host step's is empty: it has none).
    pub fn step_workload_keys(&self) -> Vec<&str> {
        self.steps
            .iter()
            .map(|s| match s.work {
                Work::Kernel(k) => self.kernels[k].workload_key.as_str(),
                Work::Host(_) => "",
            })
            .collect()
    }

    pub fn summary(&self) -> BuildSummary {
        BuildSummary {
            groups: self.steps.len(),
            kernels: self.kernels.len(),
            planned_bytes: self.planned_bytes,
            unplanned_bytes: self.unplanned_bytes,
            weight_bytes: self.weight_bytes,
        }
    }
}
