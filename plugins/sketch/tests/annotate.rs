//! Random annotation: every state drawn from every CPU sketch of matmul, conv2d NHWC +
//! bias + relu and softmax is complete, lowers, and computes what the unscheduled
//! program computes (in the reference interpreter, before and after the unroll and
//! vectorize passes the CPU code generator runs).

use tessera_ir::interp::{self, HostBuffer};
use tessera_ir::transform::{auto_unroll, unroll_loops, vectorize_loops};
use tessera_ir::{DataType, PrimFunc};
use tessera_search::rng::Rng;
use tessera_search::state::{State, Step};
use tessera_sketch::annotate::{annotate, AnnotateParams, Factorizations};
use tessera_sketch::sketch::{generate_sketches, SketchTarget};
use tessera_te::ops::{bias_add, conv2d_nhwc, matmul, relu, softmax};
use tessera_te::{lower, placeholder, ComputeDag, Tensor};

fn f32p(shape: &[i64], name: &str) -> Tensor {
    placeholder(shape, DataType::float32(), name).unwrap()
}

fn run(f: &PrimFunc, args: &[Tensor], n_inputs: usize) -> Vec<Vec<f64>> {
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

fn passes(f: &PrimFunc) -> PrimFunc {
    let (body, _) = vectorize_loops(&unroll_loops(&auto_unroll(&f.body)));
    PrimFunc::new(&f.name, f.params.clone(), body)
}

fn close(want: &[Vec<f64>], got: &[Vec<f64>]) -> bool {
    want.iter()
        .flatten()
        .zip(got.iter().flatten())
        .all(|(a, b)| (a - b).abs() <= 1e-4 * (1.0 + a.abs()))
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
            seen[0] += added.iter().any(|x| matches!(x, Step::ComputeAt { .. })) as usize;
            seen[1] += added.iter().any(|x| matches!(x, Step::Fuse { .. })) as usize;
            let ann = |a: &str| {
                added
                    .iter()
                    .any(|x| matches!(x, Step::Annotation { ann, .. } if ann.keyword() == a))
            };
            seen[2] += ann("parallel") as usize;
            seen[3] += ann("vectorize") as usize;
            let f = lower(&s.replay().unwrap().schedule, &args, "f")
                .unwrap_or_else(|e| panic!("sketch {k} seed {seed}: {e}\n{}", s.print().unwrap()));
            let got = run(&f, &args, n_in);
            assert!(
                close(&want, &got),
                "sketch {k} seed {seed}:\n{}",
                s.print().unwrap()
            );
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
    let data = f32p(&[1, 6, 6, 8], "data");
    let kernel = f32p(&[3, 3, 8, 8], "kernel");
    let bias = f32p(&[8], "bias");
    let conv = conv2d_nhwc(&data, &kernel, (1, 1), (1, 1), (1, 1)).unwrap();
    let out = relu(&bias_add(&conv, &bias, 3).unwrap()).unwrap();
    let dag = ComputeDag::new(&[out]).unwrap();
    let seen = check(&dag, 8);
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
