//! Compiled networks and deployable module files.
//!
//! [`compile`] does all of a build that needs the compiler: it fuses the network, lowers
//! each distinct group once (with a hook's schedule or the default one), compiles the
//! kernels in parallel and plans memory. The result, a [`CompiledNetwork`], holds the
//! kernels' files, the plan (storages, the constants to upload, each step's kernel and
//! arguments, the inputs and outputs) and the target; [`CompiledNetwork::load`] puts it
//! on a device as a [`GraphModule`]. `build_on` is the two in a row.
//!
//! [`CompiledNetwork::save`] writes it as one file — TVM's `export_library` — and
//! [`CompiledNetwork::read`] reads it back, so that a network runs in another process
//! (or on another machine of the same kind) without the compiler. The file is a tar
//! archive, readable with `tar tf`:
//!
//! ```text
//! module.json          the header: format and version, target, the host's CPU
//!                      features for a `-march=native` build, kernels, plan
//! kernels/<i>/<file>   each kernel's loadable file (a shared object on the CPU) and
//!                      its generated source
//! weights/<i>.bin      each constant's bytes (row-major, little-endian)
//! ```
//!
//! A module of a format version this build does not read (a newer one), or built for CPU
//! features this host lacks, is refused with a message saying so; a damaged file is an
//! error naming what is wrong.

use crate::error::GraphError;
use crate::executor::{
    compile_all, load_kernel, lower_distinct, plan_storage, BuildContext, GraphModule, LaunchMode,
    Lowered, Step, Work,
};
use crate::fixed_inputs::FixedInput;
use crate::fuse::{fuse, group_compute};
use crate::host_ops::HostStep;
use crate::index_bounds::IndexBound;
use crate::ir::{Graph, TensorType};
use crate::{BuildSummary, ScheduleHook};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tessera_backends::{Artifact, Backend, Target, TargetKind};
use tessera_ir::DataType;
use tessera_runtime::{Device, DeviceArray, NDArray};

/// The version of the module file format this build writes. It reads every version from
/// 1: version 2 added host steps ([`crate::host_ops`]), which a reader of version 1
/// would not know; version 3 a size known only at run time ([`crate::dynamic`]), which
/// a reader of version 2 would run at the largest size whatever its inputs; version 4
/// several sizes, and dimensions that are sums of them (a cache and the new tokens);
/// version 5 sizes a selection counts ([`crate::selection`]), capped dimensions and host
/// steps that follow the sizes, which a reader of version 4 would run at the bound.
pub const MODULE_FORMAT_VERSION: u32 = 5;

/// The `format` field of a module's header.
const FORMAT: &str = "tessera-module";

/// A compiled kernel: its artifact (files in the network's folder) and workload key.
#[derive(Clone, Debug)]
struct CompiledKernel {
    artifact: Artifact,
    workload_key: String,
}

/// A network compiled for a target, not yet on a device.
pub struct CompiledNetwork {
    name: String,
    target: Target,
    /// The host CPU features the kernels may use (a CPU build without `-mcpu`).
    cpu_features: Vec<String>,
    dir: tempfile::TempDir,
    kernels: Vec<CompiledKernel>,
    storages: Vec<usize>,
    constants: Vec<(usize, Arc<NDArray>)>,
    steps: Vec<(String, Work, Vec<usize>)>,
    inputs: Vec<(String, TensorType, usize)>,
    outputs: Vec<(TensorType, usize)>,
    /// The inputs a gather reads as indices, checked before each run.
    index_bounds: Vec<IndexBound>,
    /// The inputs the network was built for one value of, checked before each run.
    fixed_inputs: Vec<FixedInput>,
    /// The size known only at run time, where there is one ([`crate::dynamic`]).
    pub(crate) dynamic: Option<crate::dynamic::DynamicIo>,
    planned_bytes: usize,
    unplanned_bytes: usize,
}

impl std::fmt::Debug for CompiledNetwork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledNetwork")
            .field("name", &self.name)
            .field("target", &self.target.to_string())
            .field("kernels", &self.kernels.len())
            .field("steps", &self.steps.len())
            .finish()
    }
}

fn temp_dir(prefix: &str) -> Result<tempfile::TempDir, GraphError> {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|source| GraphError::Io {
            path: std::env::temp_dir().display().to_string(),
            source,
        })
}

/// The most elements a value may have: kernels index with 32-bit integers.
pub const MAX_ELEMENTS: i64 = i32::MAX as i64;

/// Every value of `graph` fits 32-bit indices (else the C compiler would be handed loops
/// it refuses, or kernels that overflow).
fn check_index_range(graph: &Graph) -> Result<(), GraphError> {
    for n in graph.topo_order() {
        let node = graph.node(n);
        let numel = node
            .ty
            .shape
            .iter()
            .try_fold(1i64, |a, &d| a.checked_mul(d))
            .filter(|&v| v <= MAX_ELEMENTS);
        if numel.is_none() {
            return Err(GraphError::Invalid(format!(
                "`{}` ({}) is too large: kernels index with 32 bits, at most {MAX_ELEMENTS} \
                 elements a value",
                node.name, node.ty
            )));
        }
    }
    Ok(())
}

/// Compiles `graph` with `backend`, asking `hook` (if any) for each distinct group's
/// schedule first.
pub fn compile(
    graph: &Graph,
    backend: &dyn Backend,
    hook: Option<&dyn ScheduleHook>,
) -> Result<CompiledNetwork, GraphError> {
    graph.validate()?;
    check_index_range(graph)?;
    let ctx = BuildContext::of(backend);
    let groups = fuse(graph);
    let lowered = lower_distinct(graph, &groups, &ctx, hook, &|_, g| group_compute(graph, g))?;
    assemble(graph, &groups, &lowered, backend)
}

/// The lowered groups of `graph` compiled by `backend` into a network: its kernels
/// built, its storages planned.
pub(crate) fn assemble(
    graph: &Graph,
    groups: &[crate::fuse::Group],
    lowered: &Lowered,
    backend: &dyn Backend,
) -> Result<CompiledNetwork, GraphError> {
    let dir = temp_dir("tessera-graph-")?;
    let started = std::time::Instant::now();
    let artifacts = compile_all(backend, &lowered.funcs, dir.path())?;
    tracing::info!(
        network = %graph.name,
        groups = groups.len(),
        kernels = artifacts.len(),
        seconds = started.elapsed().as_secs_f64(),
        "compiled the network's kernels"
    );
    let kernels = artifacts
        .into_iter()
        .zip(&lowered.keys)
        .map(|(artifact, key)| CompiledKernel {
            artifact,
            workload_key: key.clone(),
        })
        .collect();
    let plan = plan_storage(graph, groups, lowered);
    let target = backend.target().clone();
    let native = target.kind == TargetKind::CPU && target.option("mcpu").is_none();
    let cpu_features = if native {
        tessera_backends::host_cpu_features()
            .into_iter()
            .map(String::from)
            .collect()
    } else {
        Vec::new()
    };
    Ok(CompiledNetwork {
        name: graph.name.clone(),
        target,
        cpu_features,
        dir,
        kernels,
        storages: plan.sizes.sizes.clone(),
        planned_bytes: plan.sizes.reused_bytes(),
        unplanned_bytes: plan.sizes.requested_reusable,
        constants: plan.constants,
        steps: plan.steps,
        inputs: plan.inputs,
        outputs: plan.outputs,
        index_bounds: crate::index_bounds::index_bounds(graph),
        fixed_inputs: graph.fixed_inputs().to_vec(),
        dynamic: None,
    })
}

impl CompiledNetwork {
    /// Removes input `name` from the inputs a caller sets (the runtime size's, which the
    /// module sets itself): its storage.
    pub(crate) fn take_input(&mut self, name: &str) -> Option<usize> {
        let k = self.inputs.iter().position(|(n, _, _)| n == name)?;
        Some(self.inputs.remove(k).2)
    }

    /// The ranges of the sizes the module runs, one per symbolic size; empty where it
    /// runs one shape ([`crate::dynamic`]).
    pub fn size_ranges(&self) -> &[crate::dynamic::SizeRange] {
        self.dynamic.as_ref().map_or(&[], |d| &d.ranges)
    }

    /// The network's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The target it was compiled for.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// What the build produced.
    pub fn summary(&self) -> BuildSummary {
        BuildSummary {
            groups: self.steps.len(),
            kernels: self.kernels.len(),
            planned_bytes: self.planned_bytes,
            unplanned_bytes: self.unplanned_bytes,
            weight_bytes: self.constants.iter().map(|(_, v)| v.nbytes()).sum(),
        }
    }

    /// The CPU features the kernels may use that this host lacks (none for a build
    /// with an explicit `-mcpu` or for another kind of target).
    pub fn missing_cpu_features(&self) -> Vec<String> {
        let host = tessera_backends::host_cpu_features();
        self.cpu_features
            .iter()
            .filter(|f| !host.contains(&f.as_str()))
            .cloned()
            .collect()
    }

    /// Loads the kernels on `device` (of the target's kind), allocates the storages and
    /// uploads the constants.
    pub fn load(self, device: Arc<dyn Device>) -> Result<GraphModule, GraphError> {
        let missing = self.missing_cpu_features();
        if !missing.is_empty() {
            return Err(GraphError::Invalid(format!(
                "`{}` was compiled for CPU features this machine lacks: {}",
                self.name,
                missing.join(", ")
            )));
        }
        let kernels = self
            .kernels
            .iter()
            .map(|k| load_kernel(&device, &k.artifact, &k.workload_key))
            .collect::<Result<Vec<_>, _>>()?;
        let mut storages = Vec::with_capacity(self.storages.len());
        for &bytes in &self.storages {
            storages.push(DeviceArray::empty(&device, DataType::uint(8), &[bytes])?);
        }
        // The weights go to the device once, here.
        let mut weight_bytes = 0;
        for (s, v) in &self.constants {
            device.copy_from_host(storages[*s].buffer(), 0, v.as_bytes())?;
            weight_bytes += v.nbytes();
        }
        let steps = self
            .steps
            .into_iter()
            .map(|(name, work, args)| Step {
                name,
                work,
                buffers: args.iter().map(|&s| storages[s].buffer()).collect(),
            })
            .collect();
        let mut module = GraphModule {
            _dir: self.dir,
            device,
            target: self.target,
            kernels,
            steps,
            storages,
            inputs: self.inputs,
            outputs: self.outputs,
            index_bounds: self.index_bounds,
            fixed_inputs: self.fixed_inputs,
            dynamic: self.dynamic.map(crate::dynamic::RunSize::new),
            planned_bytes: self.planned_bytes,
            unplanned_bytes: self.unplanned_bytes,
            weight_bytes,
            sequence: None,
            launch_mode: LaunchMode::StepByStep {
                why: "not recorded yet".into(),
            },
        };
        module.record_sequence();
        Ok(module)
    }

    /// Writes the module file (to a temporary name beside `path`, then renamed, so that
    /// an interrupted write never leaves a partial module under `path`).
    pub fn save(&self, path: &Path) -> Result<(), GraphError> {
        let io = |source| GraphError::Io {
            path: path.display().to_string(),
            source,
        };
        let mut header = Header {
            format: FORMAT.into(),
            version: MODULE_FORMAT_VERSION,
            tessera: env!("CARGO_PKG_VERSION").into(),
            name: self.name.clone(),
            target: self.target.to_string(),
            cpu_features: self.cpu_features.clone(),
            kernels: Vec::new(),
            storages: self.storages.clone(),
            constants: Vec::new(),
            steps: self
                .steps
                .iter()
                .map(|(name, work, args)| {
                    let (kernel, host) = match work {
                        Work::Kernel(k) => (Some(*k), None),
                        Work::Host(h) => (None, Some(h.clone())),
                    };
                    StepEntry {
                        name: name.clone(),
                        kernel,
                        host,
                        args: args.clone(),
                    }
                })
                .collect(),
            inputs: self
                .inputs
                .iter()
                .map(|(n, t, s)| ValueEntry::of(Some(n), t, *s))
                .collect(),
            outputs: self
                .outputs
                .iter()
                .map(|(t, s)| ValueEntry::of(None, t, *s))
                .collect(),
            index_bounds: self.index_bounds.clone(),
            fixed_inputs: self.fixed_inputs.clone(),
            dynamic: self.dynamic.clone(),
            planned_bytes: self.planned_bytes,
            unplanned_bytes: self.unplanned_bytes,
        };
        let tmp = path.with_extension("partial");
        let file = std::fs::File::create(&tmp).map_err(io)?;
        let mut tar = tar::Builder::new(std::io::BufWriter::new(file));
        for (i, k) in self.kernels.iter().enumerate() {
            let mut artifact = k.artifact.clone();
            // a backend that keeps no source leaves its path empty in the module
            if !artifact.source_path.is_file() {
                artifact.source_path = PathBuf::new();
            }
            for p in [&mut artifact.path, &mut artifact.source_path] {
                if p.as_os_str().is_empty() {
                    continue;
                }
                let file_name = p.file_name().map(PathBuf::from).unwrap_or_default();
                let entry = Path::new("kernels").join(i.to_string()).join(file_name);
                tar.append_path_with_name(&*p, &entry).map_err(io)?;
                *p = entry;
            }
            header.kernels.push(KernelEntry {
                artifact,
                workload_key: k.workload_key.clone(),
            });
        }
        for (i, (storage, v)) in self.constants.iter().enumerate() {
            let file = format!("weights/{i}.bin");
            append_bytes(&mut tar, &file, v.as_bytes()).map_err(io)?;
            header.constants.push(ConstEntry {
                storage: *storage,
                dtype: v.dtype().to_string(),
                shape: v.shape().to_vec(),
                file,
            });
        }
        let json = serde_json::to_vec_pretty(&header)
            .map_err(|e| GraphError::Invalid(format!("writing the module header: {e}")))?;
        append_bytes(&mut tar, "module.json", &json).map_err(io)?;
        let out = tar.into_inner().map_err(io)?;
        out.into_inner()
            .map_err(|e| io(e.into_error()))?
            .sync_all()
            .map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// Reads a module file written by [`save`](Self::save).
    pub fn read(path: &Path) -> Result<CompiledNetwork, GraphError> {
        let bad = |reason: String| GraphError::Module {
            path: path.display().to_string(),
            reason,
        };
        let file = std::fs::File::open(path).map_err(|source| GraphError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let mut reader = std::io::BufReader::new(file);
        // A tar archive has `ustar` at byte 257 of its first header. Anything else is
        // refused here, before the tar reader quotes its bytes as entry names.
        let head = {
            use std::io::BufRead;
            reader.fill_buf().map_err(|source| GraphError::Io {
                path: path.display().to_string(),
                source,
            })?
        };
        if head.get(257..262) != Some(b"ustar".as_slice()) {
            let onnx = path
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("onnx"));
            let hint = if onnx {
                "; an ONNX model runs with `--onnx FILE`"
            } else {
                ""
            };
            return Err(bad(format!(
                "not a tessera module (a tar archive written by `tessera compile`){hint}"
            )));
        }
        let mut entries: HashMap<String, Vec<u8>> = HashMap::new();
        let mut archive = tar::Archive::new(reader);
        let not_tar = |e: std::io::Error| bad(format!("not a tessera module (a tar archive): {e}"));
        for entry in archive.entries().map_err(not_tar)? {
            let mut entry = entry.map_err(not_tar)?;
            let name = entry.path().map_err(not_tar)?.display().to_string();
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes).map_err(not_tar)?;
            entries.insert(name, bytes);
        }
        let header = entries
            .get("module.json")
            .ok_or_else(|| bad("not a tessera module: it has no module.json".into()))?;
        let header: Header = serde_json::from_slice(header)
            .map_err(|e| bad(format!("module.json is not a module header: {e}")))?;
        if header.format != FORMAT {
            return Err(bad(format!(
                "its format is `{}`, not `{FORMAT}`",
                header.format
            )));
        }
        if !(1..=MODULE_FORMAT_VERSION).contains(&header.version) {
            return Err(bad(format!(
                "module format version {} (written by tessera {}); this tessera reads versions \
                 1 to {MODULE_FORMAT_VERSION}: compile the network again",
                header.version, header.tessera
            )));
        }
        header
            .into_network(&entries)
            .map_err(|e| bad(e.to_string()))
    }
}

fn append_bytes<W: std::io::Write>(
    tar: &mut tar::Builder<W>,
    name: &str,
    bytes: &[u8],
) -> std::io::Result<()> {
    let mut h = tar::Header::new_gnu();
    h.set_size(bytes.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    tar.append_data(&mut h, name, bytes)
}

/// Why a module header and its archive do not make a network ([`CompiledNetwork::read`]
/// makes it the reason of a [`GraphError::Module`]).
#[derive(Debug, thiserror::Error)]
enum HeaderError {
    #[error("target `{target}`: {source}")]
    Target {
        target: String,
        #[source]
        source: tessera_backends::TargetError,
    },
    /// The folder the kernel files are written to.
    #[error("{0}")]
    Folder(#[source] GraphError),
    #[error("the archive has no `{}`", .0.display())]
    MissingEntry(PathBuf),
    #[error("kernel {0} has no file")]
    KernelWithoutFile(usize),
    #[error("a kernel file without a name")]
    KernelFileWithoutName,
    #[error("{}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("unknown data type `{0}`")]
    UnknownDtype(String),
    #[error("a value of {ty} does not fit its storage {storage}")]
    ValueTooLarge { ty: TensorType, storage: usize },
    #[error("{file}: unknown data type `{dtype}`")]
    ConstantDtype { file: String, dtype: String },
    #[error("{file}: {source}")]
    ConstantArray {
        file: String,
        #[source]
        source: tessera_runtime::RuntimeError,
    },
    #[error("{file}: {len} bytes for {dtype} {shape:?} in storage {storage}")]
    ConstantSize {
        file: String,
        len: usize,
        dtype: DataType,
        shape: Vec<usize>,
        storage: usize,
    },
    #[error("step `{0}` names a kernel or storage it lacks")]
    StepIndex(String),
    #[error("step `{0}` must name a kernel or a host step, and not both")]
    StepWork(String),
    #[error("step `{step}` passes {given} arguments to a kernel of {params}")]
    StepArity {
        step: String,
        given: usize,
        params: usize,
    },
    #[error("an input without a name")]
    UnnamedInput,
    #[error("the runtime size {0}")]
    Dynamic(String),
}

/// Whether a module's runtime size names what the module has: its storage (four bytes),
/// inputs, outputs and their dimensions, a range of sizes the values fit.
fn check_dynamic(
    d: &crate::dynamic::DynamicIo,
    storages: &[usize],
    inputs: &[(String, TensorType, usize)],
    outputs: &[(TensorType, usize)],
) -> Result<(), String> {
    if storages
        .get(d.sizes_storage)
        .is_none_or(|&b| b < 4 * d.ranges.len())
    {
        return Err(format!("storage {} does not hold it", d.sizes_storage));
    }
    if let Some(r) = d.ranges.iter().find(|r| r.min < 0 || r.min > r.max) {
        return Err(format!("range {r} is empty"));
    }
    let maxes: Vec<i64> = d.ranges.iter().map(|r| r.max).collect();
    let fits = |ty: &TensorType, dims: &[crate::dynamic::SizeDim]| {
        dims.iter().all(|f| {
            !f.sizes.is_empty()
                && f.sizes.iter().all(|&k| k < maxes.len())
                && ty.shape.get(f.dim) == Some(&f.at(&maxes))
        })
    };
    for (name, dims) in &d.inputs {
        match inputs.iter().find(|(n, _, _)| n == name) {
            Some((_, ty, _)) if !dims.is_empty() && fits(ty, dims) => {}
            _ => {
                return Err(format!(
                    "names input `{name}`'s dimensions {dims:?}, which it lacks"
                ))
            }
        }
    }
    if d.outputs.len() != outputs.len()
        || d.outputs
            .iter()
            .zip(outputs)
            .any(|(k, (ty, _))| !fits(ty, k))
    {
        return Err("names output dimensions the outputs lack".into());
    }
    Ok(())
}

/// Whether the host steps' sizes are the module's: a selection counts a size of its own
/// (each counted size one selection's), and values that follow sizes name dimensions
/// they have at the largest sizes.
fn check_host_sizes(
    d: Option<&crate::dynamic::DynamicIo>,
    steps: &[(String, Work, Vec<usize>)],
) -> Result<(), String> {
    let ranges = d.map_or(&[][..], |d| &d.ranges[..]);
    let maxes: Vec<i64> = ranges.iter().map(|r| r.max).collect();
    let mut counted = vec![0; ranges.len()];
    for (name, work, _) in steps {
        let Work::Host(h) = work else { continue };
        if let crate::host_ops::HostOp::Select { size, .. } = &h.op {
            match size {
                Some(k) if ranges.get(*k).is_some_and(|r| r.produced) => counted[*k] += 1,
                _ => return Err(format!("of step `{name}`'s count is none the module has")),
            }
        }
        if let Some(k) = h.count {
            match ranges.get(k) {
                Some(r) if r.produced => counted[k] += 1,
                _ => return Err(format!("of step `{name}`'s k is none the module has")),
            }
        }
        if h.dims.is_empty() {
            continue;
        }
        let types: Vec<&TensorType> = h.inputs.iter().chain(&h.outputs).collect();
        let fits = h.dims.len() == types.len()
            && h.dims.iter().zip(&types).all(|(dims, ty)| {
                dims.iter().all(|f| {
                    !f.sizes.is_empty()
                        && f.sizes.iter().all(|&k| k < maxes.len())
                        && ty.shape.get(f.dim) == Some(&f.at(&maxes))
                })
            });
        if !fits {
            return Err(format!("of step `{name}` names dimensions its values lack"));
        }
    }
    match ranges
        .iter()
        .zip(&counted)
        .find(|(r, &c)| r.produced && c != 1)
    {
        Some((r, c)) => Err(format!("{r} is counted by {c} steps, not one")),
        None => Ok(()),
    }
}

/// `module.json`.
#[derive(Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
    /// The tessera version that wrote it.
    tessera: String,
    name: String,
    target: String,
    cpu_features: Vec<String>,
    kernels: Vec<KernelEntry>,
    /// Each storage's size in bytes.
    storages: Vec<usize>,
    constants: Vec<ConstEntry>,
    steps: Vec<StepEntry>,
    inputs: Vec<ValueEntry>,
    outputs: Vec<ValueEntry>,
    /// The inputs a gather reads as indices (absent from files of older builds).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    index_bounds: Vec<IndexBound>,
    /// The inputs built for one value (absent from files of older builds).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    fixed_inputs: Vec<FixedInput>,
    /// The size known only at run time (version 3 on; absent where there is none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dynamic: Option<crate::dynamic::DynamicIo>,
    planned_bytes: usize,
    unplanned_bytes: usize,
}

#[derive(Serialize, Deserialize)]
struct KernelEntry {
    /// Its paths are entries of the archive.
    artifact: Artifact,
    workload_key: String,
}

#[derive(Serialize, Deserialize)]
struct ConstEntry {
    storage: usize,
    dtype: String,
    shape: Vec<usize>,
    file: String,
}

/// A step: a kernel's index, or a host step (version 2 on).
#[derive(Serialize, Deserialize)]
struct StepEntry {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kernel: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    host: Option<HostStep>,
    args: Vec<usize>,
}

#[derive(Serialize, Deserialize)]
struct ValueEntry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    dtype: String,
    shape: Vec<i64>,
    storage: usize,
}

impl ValueEntry {
    fn of(name: Option<&String>, t: &TensorType, storage: usize) -> ValueEntry {
        ValueEntry {
            name: name.cloned(),
            dtype: t.dtype.to_string(),
            shape: t.shape.clone(),
            storage,
        }
    }

    fn ty(&self, storages: &[usize]) -> Result<TensorType, HeaderError> {
        let dtype: DataType = self
            .dtype
            .parse()
            .map_err(|_| HeaderError::UnknownDtype(self.dtype.clone()))?;
        let t = TensorType::new(&self.shape, dtype);
        let bytes = self.shape.iter().try_fold(dtype.bytes() as i64, |a, &d| {
            a.checked_mul(d).filter(|_| d >= 0)
        });
        match (bytes, storages.get(self.storage)) {
            (Some(b), Some(&size)) if b as usize <= size => Ok(t),
            _ => Err(HeaderError::ValueTooLarge {
                ty: t,
                storage: self.storage,
            }),
        }
    }
}

impl Header {
    /// The network the header and the archive's `entries` describe, every index and size
    /// checked.
    fn into_network(
        self,
        entries: &HashMap<String, Vec<u8>>,
    ) -> Result<CompiledNetwork, HeaderError> {
        let target: Target = self.target.parse().map_err(|source| HeaderError::Target {
            target: self.target.clone(),
            source,
        })?;
        let dir = temp_dir("tessera-module-").map_err(HeaderError::Folder)?;
        let entry = |name: &Path| {
            entries
                .get(&name.display().to_string())
                .ok_or_else(|| HeaderError::MissingEntry(name.to_path_buf()))
        };
        let mut kernels = Vec::with_capacity(self.kernels.len());
        for (i, k) in self.kernels.into_iter().enumerate() {
            let mut artifact = k.artifact;
            if artifact.path.as_os_str().is_empty() {
                return Err(HeaderError::KernelWithoutFile(i));
            }
            for p in [&mut artifact.path, &mut artifact.source_path] {
                if p.as_os_str().is_empty() {
                    continue;
                }
                let bytes = entry(p)?;
                let file = p.file_name().ok_or(HeaderError::KernelFileWithoutName)?;
                let out = dir.path().join(format!("{i}_{}", file.to_string_lossy()));
                if let Err(source) = std::fs::write(&out, bytes) {
                    return Err(HeaderError::Write { path: out, source });
                }
                *p = out;
            }
            kernels.push(CompiledKernel {
                artifact,
                workload_key: k.workload_key,
            });
        }
        let storages = self.storages;
        let mut constants = Vec::with_capacity(self.constants.len());
        for c in self.constants {
            let dtype: DataType = c.dtype.parse().map_err(|_| HeaderError::ConstantDtype {
                file: c.file.clone(),
                dtype: c.dtype.clone(),
            })?;
            let mut v =
                NDArray::zeros(dtype, &c.shape).map_err(|source| HeaderError::ConstantArray {
                    file: c.file.clone(),
                    source,
                })?;
            let bytes = entry(Path::new(&c.file))?;
            if bytes.len() != v.nbytes() || storages.get(c.storage).is_none_or(|&s| s < v.nbytes())
            {
                return Err(HeaderError::ConstantSize {
                    len: bytes.len(),
                    file: c.file,
                    dtype,
                    shape: c.shape,
                    storage: c.storage,
                });
            }
            v.as_bytes_mut().copy_from_slice(bytes);
            constants.push((c.storage, Arc::new(v)));
        }
        let mut steps = Vec::with_capacity(self.steps.len());
        for s in self.steps {
            if s.args.iter().any(|&a| a >= storages.len()) {
                return Err(HeaderError::StepIndex(s.name));
            }
            let (params, work) = match (s.kernel, s.host) {
                (Some(k), None) => match kernels.get(k) {
                    Some(kernel) => (kernel.artifact.params.len(), Work::Kernel(k)),
                    None => return Err(HeaderError::StepIndex(s.name)),
                },
                (None, Some(h)) => {
                    let types = h.inputs.iter().chain(&h.outputs);
                    for (ty, &storage) in types.zip(&s.args) {
                        if ty.nbytes() > storages[storage] {
                            return Err(HeaderError::ValueTooLarge {
                                ty: ty.clone(),
                                storage,
                            });
                        }
                    }
                    (h.inputs.len() + h.outputs.len(), Work::Host(h))
                }
                _ => return Err(HeaderError::StepWork(s.name)),
            };
            if s.args.len() != params {
                return Err(HeaderError::StepArity {
                    given: s.args.len(),
                    params,
                    step: s.name,
                });
            }
            steps.push((s.name, work, s.args));
        }
        let mut inputs = Vec::new();
        for v in &self.inputs {
            let name = v.name.clone().ok_or(HeaderError::UnnamedInput)?;
            inputs.push((name, v.ty(&storages)?, v.storage));
        }
        let mut outputs = Vec::new();
        for v in &self.outputs {
            outputs.push((v.ty(&storages)?, v.storage));
        }
        if let Some(d) = &self.dynamic {
            check_dynamic(d, &storages, &inputs, &outputs).map_err(HeaderError::Dynamic)?;
        }
        check_host_sizes(self.dynamic.as_ref(), &steps).map_err(HeaderError::Dynamic)?;
        Ok(CompiledNetwork {
            name: self.name,
            target,
            cpu_features: self.cpu_features,
            dir,
            kernels,
            storages,
            constants,
            steps,
            inputs,
            outputs,
            index_bounds: self.index_bounds,
            fixed_inputs: self.fixed_inputs,
            dynamic: self.dynamic,
            planned_bytes: self.planned_bytes,
            unplanned_bytes: self.unplanned_bytes,
        })
    }
}
