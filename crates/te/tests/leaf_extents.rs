//! Bound inference as `leaf_extents` reports it: a split whose factor exceeds the
//! region it covers runs the region (as TVM tightens it), unless a thread is bound below
//! it; lowering then needs no guard for it.

use tessera_ir::{DataType, StorageScope, ThreadAxis};
use tessera_te::lower::leaf_extents;
use tessera_te::{lower, ops, placeholder, Schedule, Tensor};

fn matmul() -> Vec<Tensor> {
    let f32 = DataType::float32();
    let a = placeholder(&[64, 32], f32, "A").unwrap();
    let b = placeholder(&[32, 64], f32, "B").unwrap();
    let c = ops::matmul(&a, &b).unwrap();
    vec![a, b, c]
}

#[test]
fn a_factor_larger_than_the_region_is_tightened_to_it() {
    let args = matmul();
    let c = &args[2];
    let mut s = Schedule::create(std::slice::from_ref(c)).unwrap();
    let cc = s.cache_write(c, StorageScope::Local).unwrap();
    let ax = s.axis(c).unwrap();
    // C's rows in tiles of 4; the cache, computed per tile, splits its rows by 8
    let (io, _ii) = s.split(c, &ax[0], 4).unwrap();
    s.compute_at(&cc, c, &io).unwrap();
    let cax = s.axis(&cc).unwrap();
    let (_o, _i) = s.split(&cc, &cax[0], 8).unwrap();
    let ext = leaf_extents(&s, &args).unwrap();
    let ci = s.stage_index(&cc).unwrap();
    // the cache's loops: rows outer, rows inner, columns, k
    assert_eq!(ext[ci], vec![1, 4, 64, 32]);
    let text = lower(&s, &args, "f").unwrap().to_string();
    assert!(!text.contains("if "), "no guard needed:\n{text}");
}

#[test]
fn a_split_with_a_thread_below_keeps_its_factor() {
    let args = matmul();
    let c = &args[2];
    let mut s = Schedule::create(std::slice::from_ref(c)).unwrap();
    let ax = s.axis(c).unwrap();
    let (o, i) = s.split(c, &ax[0], 128).unwrap();
    s.bind(c, &o, ThreadAxis::BlockIdxX).unwrap();
    s.bind(c, &i, ThreadAxis::ThreadIdxX).unwrap();
    let ext = leaf_extents(&s, &args).unwrap();
    let ci = s.stage_index(c).unwrap();
    assert_eq!(ext[ci], vec![1, 128, 64, 32]);
    // and without the binding it is tightened
    let mut s = Schedule::create(std::slice::from_ref(c)).unwrap();
    let ax = s.axis(c).unwrap();
    s.split(c, &ax[0], 128).unwrap();
    let ext = leaf_extents(&s, &args).unwrap();
    assert_eq!(ext[s.stage_index(c).unwrap()], vec![1, 64, 64, 32]);
}
