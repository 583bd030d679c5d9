//! Helpers shared by the te integration tests: random inputs, running a lowered
//! function in the reference interpreter, and comparing a schedule with the
//! unscheduled program.
#![allow(dead_code)]

use tessera_ir::interp::{self, HostBuffer};
use tessera_ir::PrimFunc;
use tessera_te::{lower, Schedule, Tensor};

/// Deterministic pseudo-random values in [-1, 1) for a tensor.
pub fn random_buffer(t: &Tensor, seed: u64) -> HostBuffer {
    let n: i64 = t.shape().iter().product();
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let vals: Vec<f64> = (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 33) % 2000) as f64 / 1000.0 - 1.0
        })
        .collect();
    let shape: Vec<usize> = t.shape().iter().map(|d| *d as usize).collect();
    HostBuffer::from_f64(t.dtype(), &shape, &vals)
}

/// Runs `f` on `inputs` (random, seeded) and zero outputs; returns every buffer.
pub fn run(f: &PrimFunc, args: &[Tensor], n_inputs: usize, seed: u64) -> Vec<HostBuffer> {
    let mut bufs: Vec<HostBuffer> = args
        .iter()
        .enumerate()
        .map(|(i, t)| {
            if i < n_inputs {
                random_buffer(t, seed + i as u64)
            } else {
                let shape: Vec<usize> = t.shape().iter().map(|d| *d as usize).collect();
                HostBuffer::zeros(t.dtype(), &shape)
            }
        })
        .collect();
    interp::run(f, &mut bufs).unwrap_or_else(|e| panic!("interpreter failed: {e}\n{f}"));
    bufs
}

/// Asserts that `sch` lowered computes what the unscheduled program computes.
pub fn assert_same_as_unscheduled(
    sch: &Schedule,
    outputs: &[Tensor],
    args: &[Tensor],
    n_inputs: usize,
) {
    let reference = lower(&Schedule::create(outputs).unwrap(), args, "reference").unwrap();
    let scheduled =
        lower(sch, args, "scheduled").unwrap_or_else(|e| panic!("lowering failed: {e}"));
    let want = run(&reference, args, n_inputs, 7);
    let got = run(&scheduled, args, n_inputs, 7);
    for (w, g) in want[n_inputs..].iter().zip(&got[n_inputs..]) {
        for (k, (a, b)) in w.to_f64().iter().zip(g.to_f64()).enumerate() {
            assert!(
                (a - b).abs() <= 1e-4 * (1.0 + a.abs()),
                "element {k}: want {a}, got {b}\n{scheduled}"
            );
        }
    }
}

/// Deterministic pseudo-random values in [-1, 1) (for operator references).
pub fn rand_vals(n: usize, seed: u64) -> Vec<f64> {
    let mut x = seed
        .wrapping_mul(0x9E3779B97F4A7C15)
        .wrapping_add(0xD1B54A32D192ED03);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 11) % 20000) as f64 / 10000.0 - 1.0
        })
        .collect()
}

/// Runs the unscheduled program of `out` in the interpreter with the given input
/// values (one `Vec<f64>` per input tensor, row-major) and returns the output values.
pub fn interpret(out: &Tensor, inputs: &[(&Tensor, &[f64])]) -> Vec<f64> {
    let mut args: Vec<Tensor> = inputs.iter().map(|(t, _)| (*t).clone()).collect();
    args.push(out.clone());
    let f = lower(&Schedule::create(&[out.clone()]).unwrap(), &args, "op")
        .unwrap_or_else(|e| panic!("lowering {}: {e}", out.name()));
    let mut bufs: Vec<HostBuffer> = inputs
        .iter()
        .map(|(t, v)| {
            let shape: Vec<usize> = t.shape().iter().map(|d| *d as usize).collect();
            HostBuffer::from_f64(t.dtype(), &shape, v)
        })
        .collect();
    let shape: Vec<usize> = out.shape().iter().map(|d| *d as usize).collect();
    bufs.push(HostBuffer::zeros(out.dtype(), &shape));
    interp::run(&f, &mut bufs).unwrap_or_else(|e| panic!("interpreter on {}: {e}", out.name()));
    bufs.pop().unwrap().to_f64()
}

/// Asserts `got` ≈ `want` element by element (relative and absolute tolerance `tol`).
pub fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(
        got.len(),
        want.len(),
        "{what}: {} values, want {}",
        got.len(),
        want.len()
    );
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}

/// The CPU of the development VM: AVX2's 8 float32 lanes, 2 cores, vectorized.
pub const AVX2_TWO_CORES: tessera_te::schedules::CpuParams = tessera_te::schedules::CpuParams {
    vector_lanes: 8,
    num_cores: 2,
    vectorize: true,
    gpu_threads: 0,
};
