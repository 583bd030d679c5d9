//! CUDA C to PTX with NVRTC, which needs no GPU and no driver.
//!
//! cudarc opens `libnvrtc` by name on the first call and panics when it is missing, so
//! [`ensure_loaded`] runs first: when the loader does not find the library by name it is
//! loaded from where a toolkit or NVIDIA's PyPI wheel put it (see [`crate::locate`]) and
//! kept loaded; the dynamic loader then answers cudarc's `libnvrtc.so.12` with the
//! library already in the process (it matches loaded libraries by their soname). Not
//! found anywhere is [`CudaError::NvrtcMissing`], naming what to install.

use crate::error::CudaError;
use crate::locate;
use crate::target::Arch;
use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions};
use std::sync::OnceLock;

/// Makes NVRTC loadable by cudarc, once per process.
pub fn ensure_loaded() -> Result<(), CudaError> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(load)
        .clone()
        .map_err(|searched| CudaError::NvrtcMissing { searched })
}

fn present() -> bool {
    // SAFETY: only tries to open the library under its usual names.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

fn load() -> Result<(), String> {
    if present() {
        return Ok(());
    }
    let candidates = locate::candidates(
        "TESSERA_NVRTC",
        Vec::new(),
        "lib64/libnvrtc.so.12",
        "cuda_nvrtc",
        "lib/libnvrtc.so.12",
    );
    for path in &candidates {
        if !path.is_file() {
            continue;
        }
        // SAFETY: NVRTC is a plain C library without initializers that need care.
        if let Ok(lib) = unsafe { libloading::Library::new(path) } {
            // Kept for the life of the process: cudarc's handle is to this library.
            std::mem::forget(lib);
            if present() {
                return Ok(());
            }
        }
    }
    let mut searched: Vec<String> = vec!["the loader's path".into()];
    searched.extend(candidates.iter().map(|p| p.display().to_string()));
    Err(searched.join(", "))
}

/// Compiles the CUDA C `source` (of function `entry`, for the messages) to PTX for
/// `arch`'s virtual architecture.
pub fn compile(source: &str, entry: &str, arch: &Arch) -> Result<String, CudaError> {
    ensure_loaded()?;
    if source.contains('\0') || entry.contains('\0') {
        return Err(CudaError::Compile {
            entry: entry.to_string(),
            arch: arch.compute(),
            log: "the source holds a NUL character".into(),
        });
    }
    let opts = CompileOptions {
        options: vec![format!("--gpu-architecture={}", arch.compute())],
        name: Some(format!("{entry}.cu")),
        ..Default::default()
    };
    match compile_ptx_with_opts(source, opts) {
        Ok(ptx) => Ok(ptx.to_src()),
        Err(CompileError::CompileError { log, .. }) => Err(CudaError::Compile {
            entry: entry.to_string(),
            arch: arch.compute(),
            log: log.to_string_lossy().into_owned(),
        }),
        Err(e) => Err(CudaError::driver(format!("NVRTC on `{entry}`"), e)),
    }
}

/// NVRTC's version, `(major, minor)`.
pub fn version() -> Result<(i32, i32), CudaError> {
    ensure_loaded()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two valid out-pointers.
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| CudaError::driver("nvrtcVersion", e))?;
    Ok((major, minor))
}
