//! What the CPU backend's kernel tests share: a kernel built for an instruction set
//! (its source checked for the helpers it must call, its object disassembled), and run
//! on buffers of bytes.

#![allow(dead_code)]

use std::ffi::c_void;
use tessera_backends::{Backend, CpuBackend, Target};

/// A kernel built into a temporary directory.
pub struct Built {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    entry: String,
    mcpu: String,
    /// The C source the backend generated.
    pub source: String,
    /// The kernel's library, open until the process ends: a kernel with parallel loops
    /// leaves OpenMP's threads behind, which closing the library (and the OpenMP
    /// runtime it loaded) would pull the code from under.
    lib: std::mem::ManuallyDrop<libloading::Library>,
}

/// `func` built for `-march=mcpu`; its source must call each of `helpers`.
pub fn build(func: &tessera_ir::PrimFunc, mcpu: &str, helpers: &[&str]) -> Built {
    let dir = tempfile::tempdir().unwrap();
    let target: Target = format!("cpu -mcpu={mcpu}").parse().unwrap();
    let art = CpuBackend::new(target)
        .build(func, dir.path())
        .unwrap_or_else(|e| panic!("-march={mcpu}: {e}"));
    let source = std::fs::read_to_string(&art.source_path).unwrap();
    for helper in helpers {
        assert!(source.contains(helper), "-march={mcpu}, {helper}: {source}");
    }
    // SAFETY: a kernel library the backend just built; loading runs no code of ours.
    let lib = unsafe { libloading::Library::new(&art.path) }.unwrap();
    Built {
        _dir: dir,
        path: art.path,
        entry: art.entry,
        mcpu: mcpu.to_string(),
        source,
        lib: std::mem::ManuallyDrop::new(lib),
    }
}

impl Built {
    /// The object's disassembly (empty where objdump is missing).
    pub fn disassembly(&self) -> String {
        std::process::Command::new("objdump")
            .arg("-d")
            .arg(&self.path)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    /// Runs the kernel on `args`, each a buffer's bytes (of the size its function
    /// declares), which it may write; its status must be 0.
    pub fn run(&self, args: &mut [Vec<u8>]) {
        let mut ptrs: Vec<*mut c_void> = args.iter_mut().map(|a| a.as_mut_ptr().cast()).collect();
        // SAFETY: built from a function whose entry takes these buffers, each of the size
        // the caller allocated as the function declares, and returns a status.
        let status = unsafe {
            let f: libloading::Symbol<unsafe extern "C" fn(*mut *mut c_void, i32) -> i32> =
                self.lib.get(self.entry.as_bytes()).unwrap();
            f(ptrs.as_mut_ptr(), ptrs.len() as i32)
        };
        assert_eq!(status, 0, "-march={}", self.mcpu);
    }
}

/// The bytes of `values` (native order).
pub fn bytes_of<T: Copy, const N: usize>(values: &[T], to: fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| to(v)).collect()
}

/// `bytes` read as `N`-byte values (native order).
pub fn values_of<T, const N: usize>(bytes: &[u8], from: fn([u8; N]) -> T) -> Vec<T> {
    bytes
        .chunks_exact(N)
        .map(|c| from(c.try_into().unwrap()))
        .collect()
}

/// `func` (one float input, one float output) built for `-march=mcpu` — its source must
/// call each of `helpers` — and run on `input`.
pub fn build_run_f32(
    func: &tessera_ir::PrimFunc,
    mcpu: &str,
    input: &[f32],
    n_out: usize,
    helpers: &[&str],
) -> Vec<f32> {
    let mut args = vec![bytes_of(input, f32::to_ne_bytes), vec![0u8; 4 * n_out]];
    build(func, mcpu, helpers).run(&mut args);
    values_of(&args[1], f32::from_ne_bytes)
}
