//! The C-family code generator every backend composes: C for the CPU, OpenCL C, and
//! (a plugin's) CUDA C are one printer with [`Dialect`]s.
//!
//! The pipeline, as one list (Halide's `Lower.cpp` style):
//!
//! - every function: [`host_passes`] — the verifier on what lowering gave, then
//!   `auto_unroll` (the auto-scheduler's pragma),
//!   `split_wide_vectors` (when the backend gives its register width:
//!   [`host_passes_for`]), `unroll_loops`, `unswitch_guards` (a loop copied without
//!   the guards it does not change, taken when they all hold), `vectorize_loops`,
//!   `lower_floor_div`
//!   (floor division of non-negative integers as C's `/` and `%`), `hoist_size_arith`
//!   (index arithmetic over a range kernel's runtime sizes bound once per iteration of
//!   the loop it depends on, not recomputed in the loops inside);
//! - a GPU function first: [`device_passes`] — `split_host_device` (kernels, their
//!   launch extents, workspaces), then per kernel `storage_sync` (barriers for shared
//!   memory, refused inside a condition) and the host passes, vectorizing what the
//!   dialect prints (everything, or only [`copies`]' aligned copies);
//! - in debug builds (every test) `tessera_ir::verify` after each pass, a refusal
//!   naming the pass ([`BackendError::Verify`]);
//! - then [`print_function`] per function or kernel, and the backend assembles the
//!   source: [`crate::cpu::generate_c`] (a C function and its exported entry) or
//!   [`device_source`] (kernels one after another, each after a `// Function: <name>`
//!   line, with the launch list a device needs).
//!
//! Everything here is public so that a backend plugin prints its language by writing a
//! `Dialect` rather than a printer.

pub mod copies;
pub mod cuda;
pub mod dialect;
pub mod flatten;
pub mod names;
pub mod opencl;
mod printer;
mod vdot;
mod vector;
mod vmath;
mod words;

pub use cuda::CudaDialect;
pub use dialect::{AllocDecl, CDialect, Dialect, Refusal, VectorCode};
pub use opencl::OpenClDialect;
pub use printer::{print_function, vector_typedefs, PrintedFunction, VectorTypes};

use crate::backend::BackendError;
use serde::{Deserialize, Serialize};
use tessera_ir::transform::{
    auto_unroll, hoist_size_arith, lower_floor_div, split_host_device, split_wide_vectors,
    storage_sync, unroll_loops, unswitch_guards, vectorize_loops, DeviceKernel, NotVectorized,
    TransformError,
};
use tessera_ir::verify::verify_body;
use tessera_ir::{Buffer, PrimFunc, Stmt};

/// Allocations up to this many bytes live on the stack (the C dialect).
pub const STACK_LIMIT: usize = 32 * 1024;

/// The size from which a CPU kernel's heap allocation is kept between its calls (the
/// largest glibc serves from its heap: larger ones are mapped and unmapped each call).
pub const KEPT_ALLOCATION: usize = 32 * 1024 * 1024;

/// The passes every body takes before it is printed; returns the loops left scalar.
/// `func` names the function (or kernel) in errors, `params` are its parameters (and a
/// kernel's workspaces): the buffers the verifier accepts as given.
pub fn host_passes(
    func: &str,
    params: &[Buffer],
    body: &Stmt,
) -> Result<(Stmt, Vec<NotVectorized>), BackendError> {
    host_passes_for(func, params, body, None)
}

/// The same passes for a machine whose vector registers hold `vector_bytes` bytes:
/// vector loops wider than a register are first split into register-wide ones.
pub fn host_passes_for(
    func: &str,
    params: &[Buffer],
    body: &Stmt,
    vector_bytes: Option<usize>,
) -> Result<(Stmt, Vec<NotVectorized>), BackendError> {
    passes(
        Checked { func, params },
        "lowering",
        body,
        VectorCode::Full,
        vector_bytes,
    )
}

/// What the verifier needs to check a body between passes: its function's name (for
/// the error) and parameters.
#[derive(Clone, Copy)]
struct Checked<'a> {
    func: &'a str,
    params: &'a [Buffer],
}

impl Checked<'_> {
    /// `body` as `pass` left it, verified in debug builds.
    fn after(self, pass: &'static str, body: Stmt) -> Result<Stmt, BackendError> {
        if cfg!(debug_assertions) {
            verify_body(self.params, &body).map_err(|problem| BackendError::Verify {
                func: self.func.to_string(),
                pass,
                problem,
            })?;
        }
        Ok(body)
    }
}

/// The same passes, vectorizing what the dialect's `vector` code can print (the other
/// vectorized loops are printed as loops); `body` is what the pass `from` gave.
fn passes(
    check: Checked<'_>,
    from: &'static str,
    body: &Stmt,
    vector: VectorCode,
    vector_bytes: Option<usize>,
) -> Result<(Stmt, Vec<NotVectorized>), BackendError> {
    let body = check.after(from, body.clone())?;
    let mut body = check.after("auto_unroll", auto_unroll(&body))?;
    if let Some(bytes) = vector_bytes {
        body = check.after("split_wide_vectors", split_wide_vectors(&body, bytes))?;
    }
    let body = check.after("unroll_loops", unroll_loops(&body))?;
    let body = check.after("unswitch_guards", unswitch_guards(&body))?;
    let (body, skipped) = match vector {
        VectorCode::Full => vectorize_loops(&body),
        VectorCode::AlignedCopies => vectorize_loops(&copies::keep_aligned_copies(&body)),
        VectorCode::None => (body, Vec::new()),
    };
    let body = check.after("vectorize_loops", body)?;
    let body = check.after("lower_floor_div", lower_floor_div(&body))?;
    Ok((
        check.after("hoist_size_arith", hoist_size_arith(&body))?,
        skipped,
    ))
}

/// A GPU function after the device passes: its kernels, in launch order, and the global
/// intermediates the launcher allocates.
#[derive(Clone, Debug)]
pub struct DeviceFunc {
    pub workspaces: Vec<Buffer>,
    pub kernels: Vec<DeviceKernel>,
    /// Loops left scalar, per kernel.
    pub skipped: Vec<Vec<NotVectorized>>,
}

fn transform_err(backend: &str, e: TransformError) -> BackendError {
    let TransformError::Unsupported { pass, func, reason } = e;
    BackendError::Unsupported {
        backend: backend.to_string(),
        func,
        reason: format!("{pass}: {reason}"),
    }
}

/// Splits `func` into kernels and runs the per-kernel passes (see the module list);
/// `vector`: the vector code the dialect prints.
pub fn device_passes(
    backend: &str,
    func: &PrimFunc,
    vector: VectorCode,
) -> Result<DeviceFunc, BackendError> {
    let whole = Checked {
        func: &func.name,
        params: &func.params,
    };
    whole.after("lowering", func.body.clone())?;
    let split = split_host_device(func).map_err(|e| transform_err(backend, e))?;
    let mut kernels = Vec::new();
    let mut skipped = Vec::new();
    for k in split.kernels {
        let check = Checked {
            func: &k.name,
            params: &k.params,
        };
        let split_body = check.after("split_host_device", k.body.clone())?;
        let synced =
            storage_sync(&k.name, &split_body, &k.launch).map_err(|e| transform_err(backend, e))?;
        let (body, sk) = passes(check, "storage_sync", &synced, vector, None)?;
        skipped.push(sk);
        kernels.push(DeviceKernel { body, ..k });
    }
    Ok(DeviceFunc {
        workspaces: split.workspaces,
        kernels,
        skipped,
    })
}

/// How a device runs one kernel of a function: its name in the source, its arguments
/// (indices into the function's parameters followed by its workspaces) and its launch
/// extents.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelLaunch {
    pub name: String,
    pub args: Vec<usize>,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u64,
}

impl KernelLaunch {
    /// The launch dimensions of the core's `Artifact` (no dynamic shared memory).
    pub fn dims(&self) -> tessera_target::LaunchDims {
        tessera_target::LaunchDims {
            grid: self.grid,
            block: self.block,
            dynamic_shared_bytes: 0,
        }
    }
}

/// A global intermediate the launcher allocates: its name and size.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workspace {
    pub name: String,
    pub bytes: u64,
}

/// A GPU function's source and what a device needs to run it: the kernels, launched in
/// order, and the workspaces.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSource {
    pub source: String,
    pub kernels: Vec<KernelLaunch>,
    pub workspaces: Vec<Workspace>,
}

/// What a device dialect adds around the printed kernels.
pub trait KernelLanguage: Dialect {
    /// The text before the kernels (type definitions, helpers, extensions).
    fn preamble(&self) -> String;
    /// A kernel's signature line, ending in `{`.
    fn kernel_signature(&self, kernel: &DeviceKernel, params: &[String]) -> String;
}

/// The source of `func` for a GPU in `lang`: the device passes, each kernel printed, and
/// the launch list.
pub fn device_source(
    lang: &dyn KernelLanguage,
    func: &PrimFunc,
) -> Result<DeviceSource, BackendError> {
    let dev = device_passes(lang.backend(), func, lang.vector_code())?;
    let all: Vec<&Buffer> = func.params.iter().chain(&dev.workspaces).collect();
    let mut types = VectorTypes::new();
    let mut bodies = String::new();
    let mut kernels = Vec::new();
    for (k, skipped) in dev.kernels.iter().zip(&dev.skipped) {
        let printed = print_function(lang, &k.name, &k.params, &k.body, Some(&k.launch), 1)?;
        types.extend(printed.vector_types.iter().cloned());
        bodies.push_str(&format!("// Function: {}\n", k.name));
        for s in skipped {
            bodies.push_str(&format!(
                "// loop `{}` stays scalar: {}\n",
                names::comment(&s.var),
                names::comment(&s.reason)
            ));
        }
        bodies.push_str(&lang.kernel_signature(k, &printed.params));
        bodies.push('\n');
        for h in &printed.hoisted {
            bodies.push_str(&format!("  {h}\n"));
        }
        bodies.push_str(&printed.body);
        bodies.push_str("}\n\n");
        let dim = |v: [i64; 3]| v.map(|x| x.clamp(1, u32::MAX as i64) as u32);
        kernels.push(KernelLaunch {
            name: k.name.clone(),
            args: k
                .params
                .iter()
                .map(|p| all.iter().position(|b| *b == p).unwrap_or(usize::MAX))
                .collect(),
            grid: dim(k.launch.grid),
            block: dim(k.launch.block),
            shared_bytes: k.launch.shared_bytes.max(0) as u64,
        });
    }
    let mut source = lang.preamble();
    source.push_str(&vector_typedefs(lang, &types));
    source.push_str(&bodies);
    let workspaces = dev
        .workspaces
        .iter()
        .map(|b| Workspace {
            name: b.name().to_string(),
            bytes: b
                .const_shape()
                .unwrap_or_default()
                .iter()
                .product::<i64>()
                .max(1) as u64
                * b.dtype().bytes() as u64,
        })
        .collect();
    Ok(DeviceSource {
        source,
        kernels,
        workspaces,
    })
}
