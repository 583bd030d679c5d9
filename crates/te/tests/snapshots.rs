//! Snapshots of compute DAG prints and of lowered IR; each lowered program is also
//! checked against the unscheduled program in the interpreter.

mod common;

use tessera_ir::DataType;
use tessera_te::{lower, ops, placeholder, testing, ComputeDag};

fn f32() -> DataType {
    DataType::float32()
}

#[test]
fn dag_matmul() {
    let a = placeholder(&[512, 512], f32(), "A").unwrap();
    let b = placeholder(&[512, 512], f32(), "B").unwrap();
    let c = ops::matmul(&a, &b).unwrap();
    let dag = ComputeDag::new(&[c]).unwrap();
    assert_eq!(dag.flop_count(), 2.0 * 512.0 * 512.0 * 512.0);
    insta::assert_snapshot!(dag.to_string());
}

#[test]
fn dag_conv2d_nhwc_padded() {
    let data = placeholder(&[1, 56, 56, 64], f32(), "placeholder").unwrap();
    let kernel = placeholder(&[3, 3, 64, 64], f32(), "placeholder").unwrap();
    let conv = ops::conv2d_nhwc(&data, &kernel, (1, 1), (1, 1), (1, 1)).unwrap();
    let dag = ComputeDag::new(&[conv]).unwrap();
    assert_eq!(
        dag.flop_count(),
        2.0 * 56.0 * 56.0 * 64.0 * 3.0 * 3.0 * 64.0
    );
    insta::assert_snapshot!(dag.to_string());
}

#[test]
fn dag_conv2d_nhwc_1x1_matches_tvm_example() {
    let data = placeholder(&[1, 56, 56, 64], f32(), "placeholder").unwrap();
    let kernel = placeholder(&[1, 1, 64, 64], f32(), "placeholder").unwrap();
    let conv = ops::conv2d_nhwc(&data, &kernel, (1, 1), (0, 0), (1, 1)).unwrap();
    let dag = ComputeDag::new(&[conv]).unwrap();
    let expected = "placeholder = PLACEHOLDER [1, 56, 56, 64]
pad_temp(i0, i1, i2, i3) = placeholder[i0, i1, i2, i3]
placeholder = PLACEHOLDER [1, 1, 64, 64]
conv2d_nhwc(nn, yy, xx, ff) += (pad_temp[nn, (yy + ry), (xx + rx), rc]*placeholder[ry, rx, rc, ff])
";
    assert_eq!(dag.to_string(), expected);
}

#[test]
fn dag_softmax() {
    let x = placeholder(&[1, 1000], f32(), "placeholder").unwrap();
    let y = ops::softmax(&x).unwrap();
    let dag = ComputeDag::new(&[y]).unwrap();
    insta::assert_snapshot!(dag.to_string());
}

#[test]
fn lower_matmul_tiled_vectorized_parallel() {
    let ex = testing::matmul_tiled().unwrap();
    let f = lower(&ex.schedule, &ex.args, "matmul").unwrap();
    insta::assert_snapshot!(f.to_string());
    common::assert_same_as_unscheduled(&ex.schedule, &ex.outputs, &ex.args, ex.n_inputs);
}

#[test]
fn lower_conv2d_cache_write_compute_at() {
    let ex = testing::conv2d_cache_write().unwrap();
    let f = lower(&ex.schedule, &ex.args, "conv2d").unwrap();
    insta::assert_snapshot!(f.to_string());
    common::assert_same_as_unscheduled(&ex.schedule, &ex.outputs, &ex.args, ex.n_inputs);
}

#[test]
fn lower_gpu_matmul_shared_memory() {
    let ex = testing::gpu_matmul_shared().unwrap();
    let f = lower(&ex.schedule, &ex.args, "matmul_gpu").unwrap();
    insta::assert_snapshot!(f.to_string());
    common::assert_same_as_unscheduled(&ex.schedule, &ex.outputs, &ex.args, ex.n_inputs);
}

/// The CPU's Winograd conv F(2×2, 3×3) with a bias and ReLU, by the default schedule: the
/// input transform per tile and channel vector (`data_pack_t` a local block), the
/// batched GEMM in register tiles, the inverse transform per 2×2 output tile through
/// the epilogue (`inverse_t` a local block); the transforms' rows unrolled (after
/// lowering: the printer shows the loops the code generator unrolls).
#[test]
fn lower_winograd_blocked_default_schedule() {
    use tessera_te::schedules::{default_schedule_inlined, CpuParams};
    let data = placeholder(&[1, 4, 4, 8], f32(), "data").unwrap();
    let kernel = placeholder(&[4, 4, 2, 8, 4], f32(), "kernel_pack").unwrap();
    let bias = placeholder(&[8], f32(), "bias").unwrap();
    let conv = ops::conv2d_winograd_nhwc_blocked(&data, &kernel, [1; 4], 2).unwrap();
    let biased = ops::bias_add(&conv, &bias, 3).unwrap();
    let out = ops::relu(&biased).unwrap();
    let p = CpuParams {
        vector_lanes: 8,
        num_cores: 2,
        vectorize: true,
        gpu_threads: 0,
    };
    let s = default_schedule_inlined(&[out.clone()], &[biased], p).unwrap();
    let args = vec![data, kernel, bias, out.clone()];
    let f = lower(&s, &args, "winograd").unwrap();
    insta::assert_snapshot!(f.to_string());
    common::assert_same_as_unscheduled(&s, &[out], &args, 3);
}
