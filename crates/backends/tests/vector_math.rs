//! The vector `erf` of the CPU's C (`tsr_verf`, a rational minimax form on `x` clamped
//! to ±4) against libm's double-precision `erf`, for the generic and the AVX2
//! instruction sets and the host: absolute error under 4e-7 over the line, relative
//! error under 4e-7 where |x| is small but not tiny (the GELU of every transformer's MLP reads it
//! there), exact signed zeros, ±1 at the infinities, NaN kept.

use std::ffi::c_void;
use tessera_backends::{host_cpu_features, Backend, CpuBackend, Target};
use tessera_ir::DataType;
use tessera_te::ops;
use tessera_te::schedules::{default_schedule, CpuParams};
use tessera_te::{lower, placeholder};

/// A grid over [−6, 6], values near 0 down to the subnormals, and the edges.
fn values() -> Vec<f32> {
    let mut v: Vec<f32> = (-60_000..=60_000).map(|i| i as f32 * 1e-4).collect();
    for e in -40..0 {
        let x = 10f32.powi(e);
        v.extend([x, -x, 3.7 * x, -3.7 * x]);
    }
    v.extend([
        0.0,
        -0.0,
        3.999_999_8,
        4.0,
        4.000_000_5,
        -4.0,
        9.0,
        -9.0,
        1e30,
        -1e30,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
    ]);
    while !v.len().is_multiple_of(16) {
        v.push(0.5);
    }
    v
}

fn build_run(func: &tessera_ir::PrimFunc, mcpu: &str, input: &[f32]) -> Vec<f32> {
    let dir = tempfile::tempdir().unwrap();
    let target: Target = format!("cpu -mcpu={mcpu}").parse().unwrap();
    let art = CpuBackend::new(target).build(func, dir.path()).unwrap();
    let source = std::fs::read_to_string(&art.source_path).unwrap();
    assert!(source.contains("tsr_verf_"), "no vector erf: {source}");
    let mut input = input.to_vec();
    let mut out = vec![0f32; input.len()];
    let mut args: [*mut c_void; 2] = [input.as_mut_ptr().cast(), out.as_mut_ptr().cast()];
    // SAFETY: built from `func`, whose entry takes a float input and a float output of
    // the input's length.
    let status = unsafe {
        let lib = libloading::Library::new(&art.path).unwrap();
        let f: libloading::Symbol<unsafe extern "C" fn(*mut *mut c_void, i32) -> i32> =
            lib.get(art.entry.as_bytes()).unwrap();
        f(args.as_mut_ptr(), 2)
    };
    assert_eq!(status, 0);
    out
}

#[test]
fn the_vector_erf_is_within_4e_7_of_libm() {
    let v = values();
    let x = placeholder(&[v.len() as i64], DataType::float32(), "x").unwrap();
    let y = ops::erf(&x).unwrap();
    let p = CpuParams {
        vector_lanes: 8,
        num_cores: 1,
        vectorize: true,
        gpu_threads: 0,
    };
    let func = lower(&default_schedule(&[y.clone()], p).unwrap(), &[x, y], "erf").unwrap();
    let avx2 = host_cpu_features().contains(&"avx2");
    for mcpu in ["x86-64", "x86-64-v3", "native"] {
        if mcpu == "x86-64-v3" && !avx2 {
            continue;
        }
        let out = build_run(&func, mcpu, &v);
        for (&a, &b) in v.iter().zip(&out) {
            let at = format!("-march={mcpu}: erf({a:e}) = {b:e}");
            if a.is_nan() {
                assert!(b.is_nan(), "{at}, want NaN");
                continue;
            }
            let want = libm::erf(a as f64);
            let err = (b as f64 - want).abs();
            assert!(err < 4e-7, "{at}, want {want:e} (error {err:e})");
            if (1e-30..0.5).contains(&a.abs()) {
                assert!(err <= 4e-7 * want.abs(), "{at}, want {want:e} (relative)");
            }
            assert!(b.abs() <= 1.0, "{at}: beyond ±1");
            assert_eq!(b.is_sign_negative(), a.is_sign_negative(), "{at}: sign");
        }
    }
}
