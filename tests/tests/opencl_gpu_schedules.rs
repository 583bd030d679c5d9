//! Random GPU schedules (the auto-scheduler's GPU sketches, randomly annotated: thread
//! binding, shared-memory cache reads with cooperative fetching, cross-thread
//! reduction, virtual threads, unrolling) of matmul, conv2d + bias + relu and softmax,
//! run on the OpenCL device, compute what the interpreter computes from the
//! unscheduled definition.
//!
//! Three targets: the generic `opencl` one (warp size 1, as TVM's), one with a warp of
//! 32 (an NVIDIA or AMD device behind OpenCL: the cross-thread reduction rule splits a
//! reduction over 32 threads, so the allreduce tree runs), and Mali's rules. Each
//! property draws a target, a sketch and an annotation seed; a sweep per workload also
//! checks that the schedules that ran used what they are meant to exercise.

use proptest::prelude::*;
use tessera_search::rng::Rng;
use tessera_search::state::State;
use tessera_sketch::annotate::{annotate, AnnotateParams, Factorizations};
use tessera_sketch::sketch::{generate_sketches, SketchTarget};
use tessera_te::ops::{bias_add, conv2d_nhwc, matmul, relu, softmax};
use tessera_te::{lower, placeholder, ComputeDag};
use tessera_tests::gpu::{check_against_interpreter, Gpu};

fn f32p(shape: &[i64], name: &str) -> tessera_te::Tensor {
    placeholder(shape, tessera_ir::DataType::float32(), name).unwrap()
}

fn targets() -> [(&'static str, SketchTarget); 3] {
    [
        ("opencl", SketchTarget::gpu(1, 1, 256, 16384, 1)),
        ("warp 32", SketchTarget::gpu(1, 32, 256, 16384, 1)),
        ("mali", SketchTarget::mali()),
    ]
}

fn matmul_dag() -> ComputeDag {
    let a = f32p(&[64, 32], "A");
    let b = f32p(&[32, 64], "B");
    ComputeDag::new(&[matmul(&a, &b).unwrap()]).unwrap()
}

fn conv_dag() -> ComputeDag {
    let data = f32p(&[1, 8, 8, 16], "data");
    let kernel = f32p(&[3, 3, 16, 32], "kernel");
    let bias = f32p(&[32], "bias");
    let conv = conv2d_nhwc(&data, &kernel, (1, 1), (1, 1), (1, 1)).unwrap();
    ComputeDag::new(&[relu(&bias_add(&conv, &bias, 3).unwrap()).unwrap()]).unwrap()
}

fn softmax_dag() -> ComputeDag {
    let x = f32p(&[4, 100], "x");
    ComputeDag::new(&[softmax(&x).unwrap()]).unwrap()
}

/// What the schedules that ran used.
#[derive(Debug, Default)]
struct Seen {
    ran: usize,
    threads: usize,
    shared: usize,
    allreduce: usize,
}

/// Annotates sketch `k mod n` of `dag` for `target` with `seed` and checks it on the
/// OpenCL device; adds what it used to `seen` (nothing when annotation refuses).
fn check(gpu: &Gpu, dag: &ComputeDag, target: &SketchTarget, k: usize, seed: u64, seen: &mut Seen) {
    let sketches = generate_sketches(dag, target).unwrap();
    let k = k % sketches.len();
    let mut memo = Factorizations::default();
    let Ok(s) = annotate(
        &sketches[k],
        &AnnotateParams::gpu(target),
        &mut Rng::new(seed),
        &mut memo,
    ) else {
        return;
    };
    let args = State::new(dag).args();
    let n_in = args.len() - dag.outputs.len();
    let reference = lower(
        &State::new(dag).replay().unwrap().schedule,
        &args,
        "reference",
    )
    .unwrap();
    let f = lower(
        &s.replay().unwrap().schedule,
        &args,
        &format!("s{k}_{seed}"),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    check_against_interpreter(gpu, &f, &reference, n_in, dir.path())
        .unwrap_or_else(|e| panic!("sketch {k} seed {seed}:\n{}\n{e}", s.print().unwrap()));
    let text = f.to_string();
    seen.ran += 1;
    seen.threads += usize::from(text.contains("bind(threadIdx"));
    seen.shared += usize::from(text.contains(", shared"));
    seen.allreduce += usize::from(text.contains("thread_allreduce"));
}

/// Every sketch of `dag` for every target, `n` seeds each.
fn sweep(test: &str, dag: &ComputeDag, n: u64) -> Option<[Seen; 3]> {
    let gpu = Gpu::opencl_or_skip(test)?;
    let mut out: [Seen; 3] = Default::default();
    for ((name, target), seen) in targets().iter().zip(out.iter_mut()) {
        let sketches = generate_sketches(dag, target).unwrap().len();
        for k in 0..sketches {
            for seed in 0..n {
                check(&gpu, dag, target, k, seed * 31 + k as u64, seen);
            }
        }
        eprintln!("{test}, {name}: {seen:?}");
    }
    Some(out)
}

#[test]
fn matmul_schedules_bind_threads_and_share_tiles() {
    let Some([generic, warp, mali]) = sweep("matmul", &matmul_dag(), 3) else {
        return;
    };
    assert!(generic.shared > 0 && generic.threads > 0, "{generic:?}");
    assert!(warp.ran > 0 && mali.ran > 0, "{warp:?} {mali:?}");
}

#[test]
fn conv2d_bias_relu_schedules_bind_threads_and_share_tiles() {
    let Some([generic, _, mali]) = sweep("conv2d", &conv_dag(), 2) else {
        return;
    };
    assert!(generic.shared > 0 && generic.threads > 0, "{generic:?}");
    assert!(mali.ran > 0, "{mali:?}");
}

#[test]
fn softmax_schedules_reduce_across_threads() {
    let Some([generic, warp, mali]) = sweep("softmax", &softmax_dag(), 2) else {
        return;
    };
    assert!(generic.ran > 0 && mali.ran > 0, "{generic:?} {mali:?}");
    // a warp of 32: the reduction's 32 threads combine through the shared tree
    assert!(warp.allreduce > 0 && warp.shared > 0, "{warp:?}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]

    #[test]
    fn random_gpu_schedules_compute_what_the_interpreter_does(
        workload in 0usize..3,
        target in 0usize..3,
        sketch in 0usize..64,
        seed in any::<u64>(),
    ) {
        let Some(gpu) = Gpu::opencl_or_skip("random GPU schedules") else {
            return Ok(());
        };
        let dag = [matmul_dag, conv_dag, softmax_dag][workload]();
        let (_, t) = &targets()[target];
        check(&gpu, &dag, t, sketch, seed, &mut Seen::default());
    }
}
