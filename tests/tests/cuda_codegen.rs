//! The CUDA dialect of the shared printer on the same GPU states as the OpenCL
//! snapshots (matmul with shared tiles, conv2d + bias + relu, softmax's allreduce tree,
//! Winograd): insta snapshots of the CUDA C, each compiled to PTX for `compute_80` by
//! NVRTC where `libnvrtc.so.12` is found (`TESSERA_NVRTC`, or the
//! `nvidia-cuda-nvrtc-cu12` wheel of `python3`; `.ci/run` installs it). Without it the
//! compile check is skipped with the reason printed, except under CI, where it fails.

use std::ffi::{c_char, c_int, c_void, CString};
use std::process::Command;
use tessera_backends::cfamily::{device_source, CudaDialect};
use tessera_sketch::sketch::SketchTarget;
use tessera_te::catalog::{OpAttrs, OpSpec};
use tessera_te::ops::{bias_add, conv2d_nhwc, relu};
use tessera_te::{placeholder, ComputeDag};
use tessera_tests::first_gpu_state;

fn nvrtc_path() -> Option<String> {
    if let Ok(p) = std::env::var("TESSERA_NVRTC") {
        return Some(p);
    }
    let out = Command::new("python3")
        .args([
            "-c",
            "import os, nvidia.cuda_nvrtc as m; \
             print(os.path.join(list(m.__path__)[0], 'lib', 'libnvrtc.so.12'))",
        ])
        .output()
        .ok()?;
    let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && std::path::Path::new(&p).exists()).then_some(p)
}

type Create = unsafe extern "C" fn(
    *mut *mut c_void,
    *const c_char,
    *const c_char,
    c_int,
    *const *const c_char,
    *const *const c_char,
) -> c_int;
type Compile = unsafe extern "C" fn(*mut c_void, c_int, *const *const c_char) -> c_int;
type LogSize = unsafe extern "C" fn(*mut c_void, *mut usize) -> c_int;
type GetLog = unsafe extern "C" fn(*mut c_void, *mut c_char) -> c_int;
type Destroy = unsafe extern "C" fn(*mut *mut c_void) -> c_int;

/// Compiles `src` with NVRTC for `compute_80`: `Err(log)` when it does not compile.
fn nvrtc_compile(lib: &libloading::Library, src: &str) -> Result<(), String> {
    let src = CString::new(src).unwrap();
    let name = CString::new("kernel.cu").unwrap();
    let opt = CString::new("--gpu-architecture=compute_80").unwrap();
    // SAFETY: NVRTC's C API as documented: a program is created, compiled, its log
    // read into a buffer of the size NVRTC reports, then destroyed.
    unsafe {
        let create: libloading::Symbol<Create> = lib.get(b"nvrtcCreateProgram").unwrap();
        let compile: libloading::Symbol<Compile> = lib.get(b"nvrtcCompileProgram").unwrap();
        let log_size: libloading::Symbol<LogSize> = lib.get(b"nvrtcGetProgramLogSize").unwrap();
        let get_log: libloading::Symbol<GetLog> = lib.get(b"nvrtcGetProgramLog").unwrap();
        let destroy: libloading::Symbol<Destroy> = lib.get(b"nvrtcDestroyProgram").unwrap();
        let mut prog: *mut c_void = std::ptr::null_mut();
        let r = create(
            &mut prog,
            src.as_ptr(),
            name.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        );
        assert_eq!(r, 0, "nvrtcCreateProgram");
        let opts = [opt.as_ptr()];
        let r = compile(prog, 1, opts.as_ptr());
        let mut n = 0usize;
        log_size(prog, &mut n);
        let mut log = vec![0u8; n.max(1)];
        get_log(prog, log.as_mut_ptr() as *mut c_char);
        destroy(&mut prog);
        if r == 0 {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&log).into_owned())
        }
    }
}

fn snapshot_and_compile(test: &str, dag: &ComputeDag, target: &SketchTarget) {
    let (f, _, _) = first_gpu_state(dag, target, 0, test);
    let src = device_source(&CudaDialect, &f).unwrap().source;
    insta::assert_snapshot!(test, src);
    match nvrtc_path() {
        Some(p) => {
            // SAFETY: loading NVRTC, a plain C library.
            let lib = unsafe { libloading::Library::new(&p) }.expect("libnvrtc loads");
            nvrtc_compile(&lib, &src).unwrap_or_else(|log| panic!("{test}: NVRTC:\n{log}\n{src}"));
        }
        None if std::env::var_os("CI").is_some() => {
            panic!("{test}: libnvrtc.so.12 not found under CI (.ci/run installs the wheel)")
        }
        None => eprintln!("{test}: NVRTC check skipped: libnvrtc.so.12 not found"),
    }
}

fn catalog(name: &str, shape: &[i64]) -> ComputeDag {
    OpSpec::new(name, shape, OpAttrs::default())
        .unwrap()
        .dag()
        .unwrap()
}

fn cuda() -> SketchTarget {
    SketchTarget::cuda(132)
}

#[test]
fn cuda_matmul_shared_memory() {
    snapshot_and_compile("cuda_matmul", &catalog("matmul", &[64, 64, 64]), &cuda());
}

#[test]
fn cuda_conv2d_bias_relu() {
    let f = |s: &[i64], n: &str| placeholder(s, tessera_ir::DataType::float32(), n).unwrap();
    let conv = conv2d_nhwc(
        &f(&[1, 8, 8, 16], "data"),
        &f(&[3, 3, 16, 32], "kernel"),
        (1, 1),
        (1, 1),
        (1, 1),
    )
    .unwrap();
    let out = relu(&bias_add(&conv, &f(&[32], "bias"), 3).unwrap()).unwrap();
    snapshot_and_compile(
        "cuda_conv2d_bias_relu",
        &ComputeDag::new(&[out]).unwrap(),
        &cuda(),
    );
}

#[test]
fn cuda_softmax_allreduce() {
    snapshot_and_compile("cuda_softmax", &catalog("softmax", &[4, 100]), &cuda());
}

#[test]
fn cuda_winograd() {
    let dag = catalog("conv2d_winograd", &[1, 8, 8, 16, 16, 3, 3]);
    snapshot_and_compile("cuda_winograd", &dag, &cuda());
}
