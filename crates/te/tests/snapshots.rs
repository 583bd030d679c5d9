//! Snapshots of compute DAG prints and of lowered IR; each lowered program is also
//! checked against the unscheduled program in the interpreter.

mod common;

use tessera_ir::{DataType, StorageScope, ThreadAxis};
use tessera_te::{lower, ops, placeholder, ComputeDag, Schedule};

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
    let a = placeholder(&[64, 64], f32(), "A").unwrap();
    let b = placeholder(&[64, 64], f32(), "B").unwrap();
    let c = ops::matmul(&a, &b).unwrap();
    let mut s = Schedule::create(&[c.clone()]).unwrap();
    let ax = s.axis(&c).unwrap();
    let k = s.reduce_axis(&c).unwrap();
    let (io, jo, ii, ji) = s.tile(&c, &ax[0], &ax[1], 8, 8).unwrap();
    let (ko, ki) = s.split(&c, &k[0], 4).unwrap();
    s.reorder(
        &c,
        &[
            io.clone(),
            jo.clone(),
            ko.clone(),
            ii.clone(),
            ki.clone(),
            ji.clone(),
        ],
    )
    .unwrap();
    s.vectorize(&c, &ji).unwrap();
    s.unroll(&c, &ki).unwrap();
    s.parallel(&c, &io).unwrap();
    let args = [a, b, c.clone()];
    let f = lower(&s, &args, "matmul").unwrap();
    insta::assert_snapshot!(f.to_string());
    common::assert_same_as_unscheduled(&s, &[c], &args, 2);
}

#[test]
fn lower_conv2d_cache_write_compute_at() {
    let data = placeholder(&[1, 8, 8, 4], f32(), "data").unwrap();
    let kernel = placeholder(&[3, 3, 4, 8], f32(), "kernel").unwrap();
    let conv = ops::conv2d_nhwc(&data, &kernel, (1, 1), (1, 1), (1, 1)).unwrap();
    let dag = ComputeDag::new(&[conv.clone()]).unwrap();
    let pad = dag
        .ops
        .iter()
        .find(|t| t.name() == "pad_temp")
        .unwrap()
        .clone();
    let mut s = Schedule::create(&[conv.clone()]).unwrap();
    let local = s.cache_write(&conv, StorageScope::Local).unwrap();
    let ax = s.axis(&conv).unwrap();
    let (yo, xo, yi, xi) = s.tile(&conv, &ax[1], &ax[2], 4, 4).unwrap();
    let (fo, fi) = s.split(&conv, &ax[3], 4).unwrap();
    s.reorder(
        &conv,
        &[yo.clone(), xo.clone(), fo.clone(), yi, xi, fi.clone()],
    )
    .unwrap();
    s.vectorize(&conv, &fi).unwrap();
    s.parallel(&conv, &yo).unwrap();
    s.compute_at(&local, &conv, &fo).unwrap();
    let lax = s.axis(&local).unwrap();
    s.vectorize(&local, &lax[3]).unwrap();
    s.compute_inline(&pad).unwrap();
    let args = [data, kernel, conv.clone()];
    let f = lower(&s, &args, "conv2d").unwrap();
    insta::assert_snapshot!(f.to_string());
    common::assert_same_as_unscheduled(&s, &[conv], &args, 2);
}

#[test]
fn lower_gpu_matmul_shared_memory() {
    let a = placeholder(&[32, 32], f32(), "A").unwrap();
    let b = placeholder(&[32, 32], f32(), "B").unwrap();
    let c = ops::matmul(&a, &b).unwrap();
    let mut s = Schedule::create(&[c.clone()]).unwrap();
    let aa = s
        .cache_read(&a, StorageScope::Shared, &[c.clone()])
        .unwrap();
    let bb = s
        .cache_read(&b, StorageScope::Shared, &[c.clone()])
        .unwrap();
    let ax = s.axis(&c).unwrap();
    let k = s.reduce_axis(&c).unwrap();
    let (by, bx, ty, tx) = s.tile(&c, &ax[0], &ax[1], 8, 8).unwrap();
    let (ko, ki) = s.split(&c, &k[0], 8).unwrap();
    s.reorder(
        &c,
        &[
            by.clone(),
            bx.clone(),
            ty.clone(),
            tx.clone(),
            ko.clone(),
            ki,
        ],
    )
    .unwrap();
    s.bind(&c, &by, ThreadAxis::BlockIdxY).unwrap();
    s.bind(&c, &bx, ThreadAxis::BlockIdxX).unwrap();
    s.bind(&c, &ty, ThreadAxis::ThreadIdxY).unwrap();
    s.bind(&c, &tx, ThreadAxis::ThreadIdxX).unwrap();
    for cache in [&aa, &bb] {
        s.compute_at(cache, &c, &ko).unwrap();
        let cax = s.axis(cache).unwrap();
        let fused = s.fuse(cache, &cax[0], &cax[1]).unwrap();
        let (fo, fi) = s.split(cache, &fused, 8).unwrap();
        s.bind(cache, &fo, ThreadAxis::ThreadIdxY).unwrap();
        s.bind(cache, &fi, ThreadAxis::ThreadIdxX).unwrap();
    }
    let args = [a, b, c.clone()];
    let f = lower(&s, &args, "matmul_gpu").unwrap();
    insta::assert_snapshot!(f.to_string());
    common::assert_same_as_unscheduled(&s, &[c], &args, 2);
}
