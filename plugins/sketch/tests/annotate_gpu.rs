//! GPU annotation: states drawn from the GPU sketches bind their loops to blocks, virtual
//! threads and threads within the hardware's limits (or are refused before they could
//! cost a measurement), and, run in the reference interpreter (thread loops run one
//! after another), compute what the unscheduled program computes.

mod common;
use common::*;

use tessera_search::rng::Rng;
use tessera_search::state::{AnnotationStep, IterAnnotation, State, Step};
use tessera_sketch::annotate::{annotate, check_gpu_limits, AnnotateParams, Factorizations};
use tessera_sketch::sketch::{generate_sketches, SketchTarget};
use tessera_te::ops::matmul;
use tessera_te::{lower, ComputeDag};

/// Draws `n` states per sketch; returns (valid, refused) and checks every valid one.
fn check(dag: &ComputeDag, target: &SketchTarget, n: u64) -> (usize, usize) {
    let sketches = generate_sketches(dag, target).unwrap();
    let p = AnnotateParams::gpu(target);
    let g = p.gpu.clone().unwrap();
    let mut memo = Factorizations::default();
    let args = State::new(dag).args();
    let n_in = args.len() - dag.outputs.len();
    let reference = lower(&State::new(dag).replay().unwrap().schedule, &args, "ref").unwrap();
    let want = run(&reference, &args, n_in);
    let (mut valid, mut refused) = (0, 0);
    for (k, sk) in sketches.iter().enumerate() {
        for seed in 0..n {
            let mut rng = Rng::new(seed * 17 + k as u64);
            let Ok(s) = annotate(sk, &p, &mut rng, &mut memo) else {
                refused += 1;
                continue;
            };
            valid += 1;
            assert!(s.is_complete());
            check_gpu_limits(&s, &g).unwrap();
            let bound = |t: &str| {
                s.steps()
                    .iter()
                    .any(|x| matches!(x, Step::Annotation(AnnotationStep { ann: IterAnnotation::Thread(a), .. }) if a.name() == t))
            };
            assert!(
                bound("threadIdx.x"),
                "sketch {k} seed {seed}:\n{}",
                s.print().unwrap()
            );
            assert_computes(&s, &args, n_in, &want, &format!("sketch {k} seed {seed}"));
        }
    }
    (valid, refused)
}

#[test]
fn gpu_matmul_states_bind_threads_and_compute_the_product() {
    let a = f32p(&[64, 32], "A");
    let b = f32p(&[32, 64], "B");
    let dag = ComputeDag::new(&[matmul(&a, &b).unwrap()]).unwrap();
    let (valid, _) = check(&dag, &SketchTarget::cuda(132), 12);
    assert!(valid > 0);
}

#[test]
fn gpu_conv2d_states_bind_threads_and_compute_the_convolution() {
    let dag = conv2d_bias_relu(8, 16, 32);
    let (valid, _) = check(&dag, &SketchTarget::cuda(132), 12);
    assert!(valid > 0);
}

#[test]
fn states_over_the_limits_are_refused() {
    // a block of 64 threads at most, 1 KiB of shared memory: most tilings of a 256² matmul
    // break one limit, and none that is returned does
    let a = f32p(&[256, 256], "A");
    let b = f32p(&[256, 256], "B");
    let dag = ComputeDag::new(&[matmul(&a, &b).unwrap()]).unwrap();
    let mut t = SketchTarget::cuda(132);
    t.max_threads_per_block = 64;
    t.max_shared_memory_per_block = 1024;
    let sk = generate_sketches(&dag, &t).unwrap();
    let p = AnnotateParams::gpu(&t);
    let mut memo = Factorizations::default();
    let (mut ok, mut refused) = (0, 0);
    for seed in 0..64 {
        match annotate(&sk[0], &p, &mut Rng::new(seed), &mut memo) {
            Ok(s) => {
                check_gpu_limits(&s, p.gpu.as_ref().unwrap()).unwrap();
                ok += 1;
            }
            Err(_) => refused += 1,
        }
    }
    assert!(refused > 0, "ok {ok}, refused {refused}");
}
