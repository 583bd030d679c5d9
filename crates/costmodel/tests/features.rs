//! The itervar, curve and knob features of lowered programs.

use tessera_costmodel::features::{curve_feature_len, ITERVAR_FEATURE_LEN};
use tessera_costmodel::{
    curve_features, itervar_feature_names, itervar_features, knob_features, MAX_LOOPS,
};
use tessera_ir::{DataType, PrimFunc};
use tessera_te::schedules::{default_schedule, CpuParams};
use tessera_te::{lower, ops, placeholder, Schedule, Tensor};

const P: CpuParams = CpuParams {
    vector_lanes: 16,
    num_cores: 2,
    vectorize: true,
    gpu_threads: 0,
};

fn matmul(n: i64) -> (Vec<Tensor>, Tensor) {
    let a = placeholder(&[n, n], DataType::float32(), "A").unwrap();
    let b = placeholder(&[n, n], DataType::float32(), "B").unwrap();
    let c = ops::matmul(&a, &b).unwrap();
    (vec![a, b, c.clone()], c)
}

fn naive(n: i64) -> PrimFunc {
    let (args, c) = matmul(n);
    lower(&Schedule::create(&[c]).unwrap(), &args, "matmul").unwrap()
}

fn scheduled(n: i64) -> PrimFunc {
    let (args, c) = matmul(n);
    lower(&default_schedule(&[c], P).unwrap(), &args, "matmul").unwrap()
}

/// The feature called `name`.
fn get(func: &PrimFunc, name: &str) -> f32 {
    let names = itervar_feature_names(func);
    let i = names
        .iter()
        .position(|n| n == name)
        .unwrap_or_else(|| panic!("no feature {name} in {names:#?}"));
    itervar_features(func)[i]
}

fn slog(x: f64) -> f32 {
    (x + 1.0).log2() as f32
}

#[test]
fn same_length_and_different_values_for_two_schedules() {
    let (a, b) = (naive(64), scheduled(64));
    let (fa, fb) = (itervar_features(&a), itervar_features(&b));
    assert_eq!(fa.len(), ITERVAR_FEATURE_LEN);
    assert_eq!(fb.len(), ITERVAR_FEATURE_LEN);
    assert_ne!(fa, fb);
    assert_eq!(itervar_feature_names(&a).len(), ITERVAR_FEATURE_LEN);
    assert_eq!(itervar_feature_names(&b).len(), ITERVAR_FEATURE_LEN);
    assert!(fa.iter().chain(&fb).all(|v| v.is_finite()));

    let (ca, cb) = (curve_features(&a, 20), curve_features(&b, 20));
    assert_eq!(ca.len(), curve_feature_len(20));
    assert_eq!(cb.len(), curve_feature_len(20));
    assert_ne!(ca, cb);
    assert!(ca.iter().chain(&cb).all(|v| v.is_finite()));
    assert_eq!(curve_features(&a, 7).len(), curve_feature_len(7));

    // Deterministic: the same program gives the same vectors.
    assert_eq!(itervar_features(&scheduled(64)), fb);
    assert_eq!(curve_features(&scheduled(64), 20), cb);
}

#[test]
fn naive_matmul_touch_pattern() {
    let f = naive(64);
    // Three loops i, j, k in the last three slots, the others empty.
    assert_eq!(get(&f, "nest.loops"), 3.0);
    assert_eq!(get(&f, "nest.buffers"), 3.0);
    assert_eq!(get(&f, "nest.iterations"), slog(64.0 * 64.0 * 64.0));
    for a in [
        "nest.parallel",
        "nest.vectorize",
        "nest.unroll",
        "nest.threads",
    ] {
        assert_eq!(get(&f, a), 0.0, "{a}");
    }
    let names = itervar_feature_names(&f);
    let values = itervar_features(&f);
    for slot in 0..MAX_LOOPS - 3 {
        let prefix = format!("L{slot}[-].");
        for (n, v) in names.iter().zip(&values) {
            if n.starts_with(&prefix) {
                assert_eq!(*v, 0.0, "{n}");
            }
        }
    }
    for (slot, var, depth) in [(7, "i", 1.0), (8, "j", 2.0), (9, "k", 3.0)] {
        let l = format!("L{slot}[{var}]");
        assert_eq!(get(&f, &format!("{l}.length")), slog(64.0));
        assert_eq!(get(&f, &format!("{l}.depth")), depth);
        assert_eq!(get(&f, &format!("{l}.ann.serial")), 1.0);
        assert_eq!(get(&f, &format!("{l}.ann.vectorize")), 0.0);
    }
    // The float add and multiply of the accumulation sit directly in `k`.
    assert_eq!(get(&f, "L9[k].add"), slog(1.0));
    assert_eq!(get(&f, "L9[k].mul"), slog(1.0));
    assert_eq!(get(&f, "L8[j].add"), 0.0);
    // Strides in elements of the row-major buffers.
    assert_eq!(get(&f, "L9[k].B1[A].stride"), slog(1.0));
    assert_eq!(get(&f, "L7[i].B1[A].stride"), slog(64.0));
    assert_eq!(get(&f, "L8[j].B1[A].stride"), 0.0);
    assert_eq!(get(&f, "L8[j].B2[B].stride"), slog(1.0));
    assert_eq!(get(&f, "L9[k].B2[B].stride"), slog(64.0));
    assert_eq!(get(&f, "L9[k].B0[C].stride"), 0.0);
    // Count and reuse: inside `i`, A moves along i and k and is reused along j.
    assert_eq!(get(&f, "L7[i].B1[A].count"), slog(64.0 * 64.0));
    assert_eq!(get(&f, "L7[i].B1[A].reuse"), slog(64.0));
    // Inside `k`, C is one element reused 64 times.
    assert_eq!(get(&f, "L9[k].B0[C].count"), slog(1.0));
    assert_eq!(get(&f, "L9[k].B0[C].reuse"), slog(64.0));
    // Two buffer slots stay empty.
    assert_eq!(get(&f, "L9[k].B3[-].count"), 0.0);
}

#[test]
fn default_schedule_annotations_show_up() {
    let f = scheduled(64);
    // i.outer (parallel) / j.outer / k / i.c (unrolled) / j.c.outer (unrolled) /
    // j.c.inner (vectorized): the accumulation into the local tile.
    assert_eq!(get(&f, "nest.loops"), 6.0);
    assert_eq!(get(&f, "nest.parallel"), slog(8.0));
    assert_eq!(get(&f, "nest.vectorize"), slog(16.0));
    assert_eq!(get(&f, "nest.unroll"), slog(16.0));
    assert_eq!(get(&f, "nest.threads"), 0.0);
    assert_eq!(get(&f, "L4[i.outer].ann.parallel"), 1.0);
    assert_eq!(get(&f, "L4[i.outer].ann.serial"), 0.0);
    assert_eq!(get(&f, "L6[k].ann.serial"), 1.0);
    assert_eq!(get(&f, "L7[i.c].ann.unroll"), 1.0);
    assert_eq!(get(&f, "L8[j.c.outer].ann.unroll"), 1.0);
    assert_eq!(get(&f, "L9[j.c.inner].ann.vectorize"), 1.0);
    assert_eq!(get(&f, "L9[j.c.inner].length"), slog(16.0));
    // B moves by one element along the vector lanes, by 16 along the register vectors
    // and by a row along k; the local accumulator tile does not move along k.
    assert_eq!(get(&f, "L9[j.c.inner].B2[B].stride"), slog(1.0));
    assert_eq!(get(&f, "L8[j.c.outer].B2[B].stride"), slog(16.0));
    assert_eq!(get(&f, "L6[k].B2[B].stride"), slog(64.0));
    assert_eq!(get(&f, "L6[k].B0[C.local].stride"), 0.0);
    assert_eq!(get(&f, "L6[k].B0[C.local].reuse"), slog(64.0));
    assert_eq!(get(&f, "L6[k].B0[C.local].count"), slog(8.0 * 32.0));

    // The naive nest has none of these annotations.
    let n = naive(64);
    assert_eq!(get(&n, "L9[k].ann.vectorize"), 0.0);
    assert_eq!(get(&n, "L7[i].ann.parallel"), 0.0);
}

#[test]
fn deep_nests_keep_the_innermost_loops() {
    // A conv2d with the default schedule has more loops than slots: the innermost ones
    // stay, the outermost drop out of the slots but still count in the summary.
    let data = placeholder(&[1, 14, 14, 16], DataType::float32(), "data").unwrap();
    let kernel = placeholder(&[3, 3, 16, 32], DataType::float32(), "kernel").unwrap();
    let conv = ops::conv2d_nhwc(&data, &kernel, (1, 1), (1, 1), (1, 1)).unwrap();
    let sch = default_schedule(&[conv.clone()], P).unwrap();
    let f = lower(&sch, &[data, kernel, conv], "conv").unwrap();
    let v = itervar_features(&f);
    assert_eq!(v.len(), ITERVAR_FEATURE_LEN);
    assert!(v.iter().all(|x| x.is_finite()));
    let names = itervar_feature_names(&f);
    let loops = get(&f, "nest.loops") as usize;
    assert!(loops >= 3, "{f}");
    // The last slot is the innermost loop at depth `loops`.
    let depth = names
        .iter()
        .position(|n| n.starts_with("L9[") && n.ends_with(".depth"))
        .unwrap();
    assert_eq!(v[depth], loops as f32);
    assert_eq!(curve_features(&f, 20).len(), curve_feature_len(20));
}

#[test]
fn programs_without_loops_give_zeros() {
    let a = placeholder(&[1], DataType::float32(), "a").unwrap();
    let b = tessera_te::compute(&[1], "b", &["i"], |ix| {
        a.at(ix) * tessera_ir::Expr::float(2.0)
    })
    .unwrap();
    let f = lower(&Schedule::create(&[b.clone()]).unwrap(), &[a, b], "scalar").unwrap();
    let v = itervar_features(&f);
    assert_eq!(v.len(), ITERVAR_FEATURE_LEN);
    assert_eq!(curve_features(&f, 20).len(), curve_feature_len(20));
}

#[test]
fn knob_features_are_the_values() {
    assert_eq!(knob_features(&[4, 16, -1, 0]), vec![4.0, 16.0, -1.0, 0.0]);
    assert!(knob_features(&[]).is_empty());
}

/// The itervar features of the default 64×64×64 matmul schedule, one `name = value` per
/// line, so a change of layout or of a definition shows in review.
#[test]
fn itervar_snapshot_default_matmul() {
    let f = scheduled(64);
    let text: String = itervar_feature_names(&f)
        .iter()
        .zip(itervar_features(&f))
        .map(|(n, v)| format!("{n} = {v:.4}\n"))
        .collect();
    insta::assert_snapshot!(text);
}
