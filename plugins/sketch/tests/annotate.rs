//! Random annotation: every state drawn from every CPU sketch of matmul, conv2d NHWC +
//! bias + relu and softmax is complete, lowers, and computes what the unscheduled
//! program computes (in the reference interpreter, before and after the unroll and
//! vectorize passes the CPU code generator runs).

mod common;
use common::*;

use tessera_ir::transform::{auto_unroll, unroll_loops, vectorize_loops};
use tessera_ir::PrimFunc;
use tessera_search::rng::Rng;
use tessera_search::state::{AnnotationStep, ComputeAtStep, FuseStep, SplitStep, State, Step};
use tessera_sketch::annotate::{annotate, AnnotateParams, Factorizations};
use tessera_sketch::sketch::{generate_sketches, SketchTarget};
use tessera_te::ops::{conv2d_winograd_nhwc, conv2d_winograd_nhwc_blocked, matmul, softmax};
use tessera_te::{lower, ComputeDag};

fn passes(f: &PrimFunc) -> PrimFunc {
    let (body, _) = vectorize_loops(&unroll_loops(&auto_unroll(&f.body)));
    PrimFunc::new(&f.name, f.params.clone(), body)
}

/// Draws `per_sketch` states from each sketch and checks each; returns how many states
/// put a stage at a consumer's loop, fused loops, parallelized, vectorized.
fn check(dag: &ComputeDag, per_sketch: u64) -> [usize; 4] {
    let sketches = generate_sketches(dag, &SketchTarget::cpu(2)).unwrap();
    let p = AnnotateParams::cpu(2);
    let mut memo = Factorizations::default();
    let args = State::new(dag).args();
    let n_in = args.len() - dag.outputs.len();
    let reference = lower(&State::new(dag).replay().unwrap().schedule, &args, "ref").unwrap();
    let want = run(&reference, &args, n_in);
    let mut seen = [0; 4];
    for (k, sk) in sketches.iter().enumerate() {
        for seed in 0..per_sketch {
            let mut rng = Rng::new(seed * 31 + k as u64);
            let s = annotate(sk, &p, &mut rng, &mut memo).unwrap();
            assert!(s.is_complete());
            let steps = s.steps();
            let added = &steps[sk.steps().len()..];
            seen[0] += added
                .iter()
                .any(|x| matches!(x, Step::ComputeAt(ComputeAtStep { .. })))
                as usize;
            seen[1] += added
                .iter()
                .any(|x| matches!(x, Step::Fuse(FuseStep { .. }))) as usize;
            let ann = |a: &str| {
                added
                    .iter()
                    .any(|x| matches!(x, Step::Annotation(AnnotationStep { ann, .. }) if ann.keyword() == a))
            };
            seen[2] += ann("parallel") as usize;
            seen[3] += ann("vectorize") as usize;
            let f = assert_computes(&s, &args, n_in, &want, &format!("sketch {k} seed {seed}"));
            let got = run(&passes(&f), &args, n_in);
            assert!(
                close(&want, &got),
                "after the passes, sketch {k} seed {seed}"
            );
        }
    }
    seen
}

#[test]
fn matmul_states_compute_the_product() {
    let a = f32p(&[32, 16], "A");
    let b = f32p(&[16, 24], "B");
    let dag = ComputeDag::new(&[matmul(&a, &b).unwrap()]).unwrap();
    let seen = check(&dag, 12);
    assert!(seen[1] > 0 && seen[2] > 0 && seen[3] > 0, "{seen:?}");
}

#[test]
fn conv2d_bias_relu_states_compute_the_convolution() {
    let seen = check(&conv2d_bias_relu(6, 8, 8), 8);
    // the padding goes inside the convolution's loops now and then
    assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
}

#[test]
fn softmax_states_compute_the_softmax() {
    let x = f32p(&[4, 64], "x");
    let dag = ComputeDag::new(&[softmax(&x).unwrap()]).unwrap();
    let seen = check(&dag, 4);
    assert!(seen[2] > 0 && seen[3] > 0, "{seen:?}");
}

#[test]
fn factorizations_respect_the_innermost_limit() {
    let mut m = Factorizations::default();
    let s = m.schemes(12, 2, 4).to_vec();
    assert!(s.iter().all(|v| 12 % (v[0] * v[1]) == 0 && v[1] <= 4));
    // 12 has 6 divisors: pairs (a, b) with a·b | 12 and b ≤ 4
    assert!(s.contains(&vec![3, 4]) && s.contains(&vec![12, 1]) && !s.contains(&vec![1, 6]));
    assert_eq!(m.schemes(1, 3, 64), &[vec![1, 1, 1]]);
}

#[test]
fn winograd_states_compute_the_convolution() {
    // the transforms' constant-matrix loops unrolled, the matrices inlined as selects
    let data = f32p(&[1, 6, 6, 4], "data");
    let kernel_pack = f32p(&[4, 4, 4, 4], "kernel_pack");
    let out = conv2d_winograd_nhwc(&data, &kernel_pack, [1, 1, 1, 1], 2).unwrap();
    let dag = ComputeDag::new(&[out]).unwrap();
    check(&dag, 4);
}

#[test]
fn blocked_winograd_states_compute_the_convolution() {
    // the CPU's form: every transform row-indexed, no constant matrices to inline
    let data = f32p(&[1, 6, 6, 4], "data");
    let kernel_pack = f32p(&[4, 4, 2, 4, 4], "kernel_pack");
    let out = conv2d_winograd_nhwc_blocked(&data, &kernel_pack, [1, 1, 1, 1], 2).unwrap();
    let dag = ComputeDag::new(&[out]).unwrap();
    let seen = check(&dag, 4);
    assert!(seen[2] > 0 && seen[3] > 0, "{seen:?}");
}

/// The innermost lengths of the splits of extent `extent` in states drawn from every CPU
/// sketch of a 16×8 · 8×32 matmul with `p`.
fn innermost_lengths(p: &AnnotateParams, extent: i64) -> Vec<i64> {
    let a = f32p(&[16, 8], "A");
    let b = f32p(&[8, 32], "B");
    let dag = ComputeDag::new(&[matmul(&a, &b).unwrap()]).unwrap();
    let sketches = generate_sketches(&dag, &SketchTarget::cpu(2)).unwrap();
    let mut memo = Factorizations::default();
    let mut out = Vec::new();
    for (k, sk) in sketches.iter().enumerate() {
        for seed in 0..60 {
            let mut rng = Rng::new(seed * 17 + k as u64);
            let s = annotate(sk, p, &mut rng, &mut memo).unwrap();
            for step in s.steps() {
                if let Step::Split(SplitStep {
                    extent: Some(e),
                    lengths,
                    ..
                }) = step
                {
                    if *e == extent && lengths.len() > 1 {
                        out.push(lengths.last().unwrap().unwrap());
                    }
                }
            }
        }
    }
    out
}

#[test]
fn the_vectorized_axis_draws_whole_registers_innermost() {
    // j (32, the last spatial axis) is the one vectorized; i (16) is not
    let whole =
        |v: &[i64]| v.iter().filter(|l| matches!(l, 8 | 16)).count() as f64 / v.len() as f64;
    let biased = innermost_lengths(&AnnotateParams::cpu_with_lanes(2, 8), 32);
    let plain = innermost_lengths(&AnnotateParams::cpu(2), 32);
    assert!(biased.len() > 50 && plain.len() > 50);
    assert!(whole(&biased) > 0.8, "{biased:?}");
    assert!(whole(&plain) < 0.6, "{plain:?}");
    // every length stays a valid factor: the bias never leaves the space
    assert!(biased.iter().all(|l| 32 % l == 0));
    // the rows are drawn as before
    let rows = |p: &AnnotateParams| {
        let v = innermost_lengths(p, 16);
        v.iter().filter(|l| **l == 8 || **l == 16).count() as f64 / v.len() as f64
    };
    let (b, u) = (
        rows(&AnnotateParams::cpu_with_lanes(2, 8)),
        rows(&AnnotateParams::cpu(2)),
    );
    assert!((b - u).abs() < 0.25, "rows: {b} biased against {u}");
}
