//! Every program the CUDA search could propose compiles: the GPU sketches of matmul,
//! conv2d + bias + relu, softmax, depthwise conv2d and Winograd, randomly annotated
//! (thread binding, shared-memory cache reads with cooperative fetching, cross-thread
//! reduction, virtual threads, unrolling), are printed by the CUDA backend, compiled by
//! NVRTC for `sm_80` and `sm_90` and assembled by ptxas for each. A program the annotation accepts but the backend or NVRTC
//! refuses would be measured as a compile error the search could have known about:
//! none may exist.
//!
//! Without NVRTC (or ptxas) the test skips (or does not assemble) with the reason
//! printed, except under CI.

use tessera_cuda::target::Arch;
use tessera_cuda::{nvrtc, ptxas, CudaError, CudaPlugin};
use tessera_search::rng::Rng;
use tessera_search::state::State;
use tessera_sketch::annotate::{annotate, AnnotateParams, Factorizations};
use tessera_sketch::sketch::{generate_sketches, SketchTarget};
use tessera_te::catalog::{OpAttrs, OpSpec};
use tessera_te::ops::{bias_add, conv2d_nhwc, relu};
use tessera_te::{lower, placeholder, ComputeDag};

/// Annotated states compiled per sketch, out of at most `SEEDS` tries (the annotation
/// rejects most random draws, as in the search: too few threads, too much shared
/// memory).
const PER_SKETCH: usize = 12;
const SEEDS: u64 = 400;

/// Compiles `PER_SKETCH` annotated states of every sketch; returns how many compiled.
fn compile_all(test: &str, dag: &ComputeDag) -> usize {
    if let Err(e) = nvrtc::ensure_loaded() {
        if std::env::var_os("CI").is_some() {
            panic!("{test}: {e}");
        }
        eprintln!("{test}: skipped: {e}");
        return 0;
    }
    let archs = [Arch::parse("sm_80").unwrap(), Arch::parse("sm_90").unwrap()];
    let assemble = match ptxas::find() {
        Ok(_) => true,
        Err(e) if std::env::var_os("CI").is_some() => panic!("{test}: {e}"),
        Err(e) => {
            eprintln!("{test}: not assembled: {e}");
            false
        }
    };
    let target = SketchTarget::cuda(108);
    let sketches = generate_sketches(dag, &target).unwrap();
    let p = AnnotateParams::gpu(&target);
    let mut memo = Factorizations::default();
    let args = State::new(dag).args();
    let mut compiled = 0;
    for (k, sk) in sketches.iter().enumerate() {
        let mut valid = 0;
        for seed in 0..SEEDS {
            if valid == PER_SKETCH {
                break;
            }
            let mut rng = Rng::new(seed * 131 + k as u64);
            let s = match annotate(sk, &p, &mut rng, &mut memo) {
                Ok(s) => s,
                Err(_) => continue,
            };
            valid += 1;
            let name = format!("{test}_s{k}_{seed}");
            let f = lower(&s.replay().unwrap().schedule, &args, &name).unwrap();
            // What the search would build: neither the backend nor NVRTC may refuse it.
            let src = CudaPlugin::source(&f).unwrap_or_else(|e| {
                panic!(
                    "{name}: the backend refused a program the search could propose: {e}\n{}",
                    s.print().unwrap()
                )
            });
            for arch in &archs {
                let ptx = match nvrtc::compile(&src.source, &name, arch) {
                    Ok(ptx) => ptx,
                    Err(CudaError::Compile { log, .. }) => panic!(
                        "{name}: NVRTC refused a program the search could propose ({arch}):\n{log}\n{}\n{}",
                        s.print().unwrap(),
                        src.source
                    ),
                    Err(e) => panic!("{name}: {e}"),
                };
                if assemble {
                    let report = ptxas::assemble(&ptx, arch)
                        .unwrap_or_else(|e| panic!("{name}: {e}\n{}", src.source));
                    assert_eq!(report.len(), src.kernels.len(), "{name} {arch}: {report:?}");
                }
            }
            compiled += 1;
        }
    }
    eprintln!("{test}: {compiled} programs compiled");
    compiled
}

fn catalog(name: &str, shape: &[i64]) -> ComputeDag {
    OpSpec::new(name, shape, OpAttrs::default())
        .unwrap()
        .dag()
        .unwrap()
}

fn compiled_some(test: &str, dag: &ComputeDag) {
    let n = compile_all(test, dag);
    assert!(
        n > 0 || nvrtc::ensure_loaded().is_err(),
        "{test}: nothing compiled"
    );
}

#[test]
fn matmul_programs_compile() {
    compiled_some("matmul", &catalog("matmul", &[128, 128, 128]));
}

#[test]
fn conv2d_bias_relu_programs_compile() {
    let f = |s: &[i64], n: &str| placeholder(s, tessera_ir::DataType::float32(), n).unwrap();
    let conv = conv2d_nhwc(
        &f(&[1, 14, 14, 32], "data"),
        &f(&[3, 3, 32, 64], "kernel"),
        (1, 1),
        (1, 1),
        (1, 1),
    )
    .unwrap();
    let out = relu(&bias_add(&conv, &f(&[64], "bias"), 3).unwrap()).unwrap();
    compiled_some("conv2d_bias_relu", &ComputeDag::new(&[out]).unwrap());
}

#[test]
fn softmax_programs_compile() {
    compiled_some("softmax", &catalog("softmax", &[8, 1000]));
}

#[test]
fn depthwise_conv2d_programs_compile() {
    compiled_some(
        "depthwise_conv2d",
        &catalog("depthwise_conv2d", &[1, 28, 28, 64, 3, 3]),
    );
}

#[test]
fn winograd_programs_compile() {
    compiled_some(
        "winograd",
        &catalog("conv2d_winograd", &[1, 14, 14, 32, 32, 3, 3]),
    );
}
