//! Helpers shared by the sketch plugin's tests: placeholders and running a lowered
//! function in the reference interpreter on fixed inputs.

#![allow(dead_code)]

use tessera_ir::interp::{self, HostBuffer};
use tessera_ir::{DataType, PrimFunc};
use tessera_search::state::State;
use tessera_te::ops::{bias_add, conv2d_nhwc, relu};
use tessera_te::{lower, placeholder, ComputeDag, Tensor};

pub fn f32p(shape: &[i64], name: &str) -> Tensor {
    placeholder(shape, DataType::float32(), name).unwrap()
}

/// conv2d NHWC (1×`hw`×`hw`×`ci` ⊛ 3×3×`ci`×`co`, stride 1, pad 1) + bias + relu.
pub fn conv2d_bias_relu(hw: i64, ci: i64, co: i64) -> ComputeDag {
    let data = f32p(&[1, hw, hw, ci], "data");
    let kernel = f32p(&[3, 3, ci, co], "kernel");
    let bias = f32p(&[co], "bias");
    let conv = conv2d_nhwc(&data, &kernel, (1, 1), (1, 1), (1, 1)).unwrap();
    let out = relu(&bias_add(&conv, &bias, 3).unwrap()).unwrap();
    ComputeDag::new(&[out]).unwrap()
}

/// Runs `f` in the interpreter on fixed inputs (the first `n_inputs` arguments) and
/// returns every output.
pub fn run(f: &PrimFunc, args: &[Tensor], n_inputs: usize) -> Vec<Vec<f64>> {
    let mut bufs: Vec<HostBuffer> = args
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let shape: Vec<usize> = t.shape().iter().map(|d| *d as usize).collect();
            let n: usize = shape.iter().product();
            let vals: Vec<f64> = (0..n)
                .map(|k| {
                    if i < n_inputs {
                        ((k * 7 + i * 3) % 17) as f64 / 17.0 - 0.5
                    } else {
                        0.0
                    }
                })
                .collect();
            HostBuffer::from_f64(t.dtype(), &shape, &vals)
        })
        .collect();
    interp::run(f, &mut bufs).unwrap_or_else(|e| panic!("interpreter: {e}\n{f}"));
    bufs[n_inputs..].iter().map(|b| b.to_f64()).collect()
}

/// Whether two runs' outputs agree within 1e-4 (relative to 1 + |value|).
pub fn close(want: &[Vec<f64>], got: &[Vec<f64>]) -> bool {
    want.iter()
        .flatten()
        .zip(got.iter().flatten())
        .all(|(a, b)| (a - b).abs() <= 1e-4 * (1.0 + a.abs()))
}

/// Lowers `s`, runs it in the interpreter and asserts it computes `want`; returns the
/// lowered function. `what` names the state in a failure.
pub fn assert_computes(
    s: &State,
    args: &[Tensor],
    n_inputs: usize,
    want: &[Vec<f64>],
    what: &str,
) -> PrimFunc {
    let f = lower(&s.replay().unwrap().schedule, args, "f")
        .unwrap_or_else(|e| panic!("{what}: {e}\n{}", s.print().unwrap()));
    let got = run(&f, args, n_inputs);
    assert!(close(want, &got), "{what}:\n{}", s.print().unwrap());
    f
}
