//! What the CPU backend's kernel tests share: a kernel of one float input and one float
//! output built for an instruction set and run.

use std::ffi::c_void;
use tessera_backends::{Backend, CpuBackend, Target};

/// `func` (one float input, one float output) built for `-march=mcpu` — its source must
/// call each of `helpers` — and run on `input`.
pub fn build_run_f32(
    func: &tessera_ir::PrimFunc,
    mcpu: &str,
    input: &[f32],
    n_out: usize,
    helpers: &[&str],
) -> Vec<f32> {
    let dir = tempfile::tempdir().unwrap();
    let target: Target = format!("cpu -mcpu={mcpu}").parse().unwrap();
    let art = CpuBackend::new(target).build(func, dir.path()).unwrap();
    let source = std::fs::read_to_string(&art.source_path).unwrap();
    for helper in helpers {
        assert!(source.contains(helper), "{helper}: {source}");
    }
    let mut input = input.to_vec();
    let mut out = vec![0f32; n_out];
    let mut args: [*mut c_void; 2] = [input.as_mut_ptr().cast(), out.as_mut_ptr().cast()];
    // SAFETY: built from `func`, whose entry takes a float input and a float output of
    // these sizes.
    let status = unsafe {
        let lib = libloading::Library::new(&art.path).unwrap();
        let f: libloading::Symbol<unsafe extern "C" fn(*mut *mut c_void, i32) -> i32> =
            lib.get(art.entry.as_bytes()).unwrap();
        f(args.as_mut_ptr(), 2)
    };
    assert_eq!(status, 0);
    out
}
