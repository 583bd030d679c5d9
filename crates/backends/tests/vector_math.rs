//! The vector math of the CPU's C against libm's double-precision functions, for the
//! generic and the AVX2 instruction sets and the host, on vectors of 4 and 8 lanes, and
//! 16 where the host has AVX-512 (the clamps and selects are one instruction each on
//! the latter two sets, masks on the first; `exp`'s `2^n` is `vscalefps` under AVX-512):
//! - `erf` (a rational minimax form on `x` clamped to ±4): absolute error under 4e-7
//!   over the line, relative error under 4e-7 where |x| is small but not tiny (the GELU
//!   of every transformer's MLP reads it there), exact signed zeros, ±1 at the
//!   infinities, NaN kept;
//! - `exp`: relative error under 3e-7 where the result is normal, ∞ above
//!   ln(FLT_MAX), 0 at −∞, NaN kept;
//! - `sigmoid` and `tanh`: absolute error under 3e-7 and 5e-7, their limits at ±∞, NaN
//!   kept, `tanh(±0) = ±0`.

mod common;

use common::build_run_f32;
use tessera_backends::host_cpu_features;
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

/// `f` of `v` built vectorized, 4 lanes (`roundps`/`blendvps` with SSE4.1, masks
/// without) and 8 (AVX's forms), for each instruction set the host can run: each
/// build's name and outputs.
fn run_everywhere(
    f: fn(&tessera_te::Tensor) -> Result<tessera_te::Tensor, tessera_te::TeError>,
    helper: &str,
    v: &[f32],
) -> Vec<(String, Vec<f32>)> {
    let features = host_cpu_features();
    let avx2 = features.contains(&"avx2");
    // 16 lanes where the host runs AVX-512 (its `vscalefps` and roundscale forms under
    // `native`, the portable forms under the others)
    let widths: &[i64] = if features.contains(&"avx512f") {
        &[4, 8, 16]
    } else {
        &[4, 8]
    };
    let mut runs = Vec::new();
    for &lanes in widths {
        let x = placeholder(&[v.len() as i64], DataType::float32(), "x").unwrap();
        let y = f(&x).unwrap();
        let p = CpuParams {
            vector_lanes: lanes,
            num_cores: 1,
            vectorize: true,
            gpu_threads: 0,
        };
        let func = lower(&default_schedule(&[y.clone()], p).unwrap(), &[x, y], "f").unwrap();
        for mcpu in ["x86-64", "x86-64-v3", "native"] {
            if mcpu == "x86-64-v3" && !avx2 {
                continue;
            }
            let out = build_run_f32(&func, mcpu, v, v.len(), &[helper]);
            runs.push((format!("{mcpu}, {lanes} lanes"), out));
        }
    }
    runs
}

#[test]
fn the_vector_erf_is_within_4e_7_of_libm() {
    let v = values();
    for (mcpu, out) in run_everywhere(ops::erf, "tsr_verf_", &v) {
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

#[test]
fn the_vector_exp_is_within_3e_7_of_libm() {
    let mut v: Vec<f32> = (-1_040_000..=890_000)
        .step_by(7)
        .map(|i| i as f32 * 1e-4)
        .collect();
    v.extend([
        0.0, -0.0, 88.72, 88.73, 100.0, -87.0, -103.9, -104.5, -200.0,
    ]);
    v.extend([f32::INFINITY, f32::NEG_INFINITY, f32::NAN]);
    // halves of ln 2 multiples: where `n = rint(x·log₂e)` meets a tie
    v.extend((-20..20).map(|k| (k as f32 + 0.5) * std::f32::consts::LN_2));
    while !v.len().is_multiple_of(16) {
        v.push(1.0);
    }
    for (mcpu, out) in run_everywhere(ops::exp, "tsr_vexp_", &v) {
        for (&a, &b) in v.iter().zip(&out) {
            let at = format!("-march={mcpu}: exp({a:e}) = {b:e}");
            if a.is_nan() {
                assert!(b.is_nan(), "{at}, want NaN");
                continue;
            }
            let want = libm::exp(a as f64);
            if want > f32::MAX as f64 {
                assert_eq!(b, f32::INFINITY, "{at}");
            } else if want >= f32::MIN_POSITIVE as f64 {
                let err = (b as f64 - want).abs() / want;
                assert!(err < 3e-7, "{at}, want {want:e} (relative error {err:e})");
            } else {
                assert!(
                    (0.0..=2.0 * f32::MIN_POSITIVE).contains(&b),
                    "{at}, want {want:e}"
                );
            }
        }
    }
}

#[test]
fn the_vector_sigmoid_and_tanh_keep_their_limits() {
    let mut v: Vec<f32> = (-300_000..=300_000)
        .step_by(3)
        .map(|i| i as f32 * 1e-4)
        .collect();
    v.extend([
        0.0,
        -0.0,
        1e30,
        -1e30,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ]);
    while !v.len().is_multiple_of(16) {
        v.push(1.0);
    }
    type Reference = fn(f64) -> f64;
    let sigmoid: Reference = |x| 1.0 / (1.0 + (-x).exp());
    let tanh: Reference = libm::tanh;
    let cases: [(_, &str, Reference, f64); 2] = [
        (ops::sigmoid as fn(&_) -> _, "tsr_vsigmoid_", sigmoid, 3e-7),
        (ops::tanh, "tsr_vtanh_", tanh, 5e-7),
    ];
    for (f, helper, reference, tolerance) in cases {
        for (mcpu, out) in run_everywhere(f, helper, &v) {
            for (&a, &b) in v.iter().zip(&out) {
                let at = format!("-march={mcpu}: {helper}({a:e}) = {b:e}");
                if a.is_nan() {
                    assert!(b.is_nan(), "{at}, want NaN");
                    continue;
                }
                let want = reference(a as f64);
                let err = (b as f64 - want).abs();
                assert!(err < tolerance, "{at}, want {want:e} (error {err:e})");
                if a == 0.0 && helper == "tsr_vtanh_" {
                    assert_eq!(b.to_bits(), a.to_bits(), "{at}: the sign of zero");
                }
            }
        }
    }
}

/// A clip to constant bounds (ReLU6's, a quantizing epilogue's [0, 255]) is `vmaxps`
/// then `vminps` where the target has them (`tsr_vmax_`, `tsr_vmin_`), and still the
/// IR's rule: a NaN operand loses (`max(min(NaN, 6), 0)` is 6), `-0` clips to `+0`,
/// the infinities to the bounds — bit for bit what the portable compare-and-blend gives.
#[test]
fn a_clip_to_constant_bounds_keeps_the_nan_rule() {
    let v = values();
    let clip = |x: &tessera_te::Tensor| ops::clip(x, 0.0, 6.0);
    for (mcpu, out) in run_everywhere(clip, "tsr_vmax_", &v) {
        for (&a, &b) in v.iter().zip(&out) {
            let want = if a.is_nan() { 6.0 } else { a.clamp(0.0, 6.0) };
            let want = if want == 0.0 { 0.0 } else { want };
            assert_eq!(
                b.to_bits(),
                want.to_bits(),
                "-march={mcpu}: clip({a:e}) = {b:e}"
            );
        }
    }
}
