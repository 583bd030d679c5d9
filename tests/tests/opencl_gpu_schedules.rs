//! Random GPU schedules (the auto-scheduler's GPU sketches, randomly annotated: thread
//! binding, shared-memory cache reads with cooperative fetching, cross-thread
//! reduction, virtual threads, unrolling) of matmul, conv2d + bias + relu and softmax,
//! run on the OpenCL device, compute what the interpreter computes from the
//! unscheduled definition.

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

/// Checks `n` annotated states of every sketch of `dag` for `target`; returns how many
/// ran.
fn check(test: &str, dag: &ComputeDag, target: &SketchTarget, n: u64) -> usize {
    let Some(gpu) = Gpu::opencl_or_skip(test) else {
        return 0;
    };
    let dir = tempfile::tempdir().unwrap();
    let sketches = generate_sketches(dag, target).unwrap();
    let p = AnnotateParams::gpu(target);
    let mut memo = Factorizations::default();
    let args = State::new(dag).args();
    let n_in = args.len() - dag.outputs.len();
    let reference = lower(
        &State::new(dag).replay().unwrap().schedule,
        &args,
        "reference",
    )
    .unwrap();
    let mut ran = 0;
    for (k, sk) in sketches.iter().enumerate() {
        for seed in 0..n {
            let mut rng = Rng::new(seed * 31 + k as u64);
            let s = match annotate(sk, &p, &mut rng, &mut memo) {
                Ok(s) => s,
                Err(e) => {
                    if std::env::var_os("SHOW_REFUSED").is_some() {
                        eprintln!("{test}: sketch {k} seed {seed} refused: {e}");
                    }
                    continue;
                }
            };
            let name = format!("s{k}_{seed}");
            let f = lower(&s.replay().unwrap().schedule, &args, &name).unwrap();
            check_against_interpreter(&gpu, &f, &reference, n_in, dir.path())
                .unwrap_or_else(|e| panic!("sketch {k} seed {seed}:\n{}\n{e}", s.print().unwrap()));
            ran += 1;
        }
    }
    ran
}

fn opencl_target() -> SketchTarget {
    SketchTarget::gpu(1, 1, 256, 16384, 1)
}

#[test]
fn gpu_matmul_schedules_compute_the_product_on_opencl() {
    let a = f32p(&[64, 32], "A");
    let b = f32p(&[32, 64], "B");
    let dag = ComputeDag::new(&[matmul(&a, &b).unwrap()]).unwrap();
    let ran = check("matmul", &dag, &opencl_target(), 8);
    let mali = check("matmul mali", &dag, &SketchTarget::mali(), 8);
    eprintln!("matmul: {ran} generic, {mali} Mali schedules ran");
    assert!(ran > 0 && mali > 0 || Gpu::opencl_or_skip("matmul").is_none());
}

#[test]
fn gpu_conv2d_bias_relu_schedules_compute_the_layer_on_opencl() {
    let data = f32p(&[1, 8, 8, 16], "data");
    let kernel = f32p(&[3, 3, 16, 32], "kernel");
    let bias = f32p(&[32], "bias");
    let conv = conv2d_nhwc(&data, &kernel, (1, 1), (1, 1), (1, 1)).unwrap();
    let out = relu(&bias_add(&conv, &bias, 3).unwrap()).unwrap();
    let dag = ComputeDag::new(&[out]).unwrap();
    let ran = check("conv2d", &dag, &opencl_target(), 4);
    let mali = check("conv2d mali", &dag, &SketchTarget::mali(), 4);
    eprintln!("conv2d + bias + relu: {ran} generic, {mali} Mali schedules ran");
    assert!(ran > 0 && mali > 0 || Gpu::opencl_or_skip("conv2d").is_none());
}

#[test]
fn gpu_softmax_schedules_compute_softmax_on_opencl() {
    let x = f32p(&[4, 100], "x");
    let dag = ComputeDag::new(&[softmax(&x).unwrap()]).unwrap();
    let ran = check("softmax", &dag, &opencl_target(), 3);
    let mali = check("softmax mali", &dag, &SketchTarget::mali(), 1);
    eprintln!("softmax: {ran} generic, {mali} Mali schedules ran");
    assert!(ran > 0 && mali > 0 || Gpu::opencl_or_skip("softmax").is_none());
}
