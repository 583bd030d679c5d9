//! Generated C for the foundation's example schedules (snapshots, read and accepted),
//! each also compiled, run and checked against the interpreter; and the CPU backend's
//! refusals.

use tessera_backends::cpu::generate_c;
use tessera_backends::{Backend, BackendError, CpuBackend, Target};
use tessera_te::{lower, testing};
use tessera_tests::check_native_against_interpreter;

fn c_source_and_check(ex: testing::Example, name: &str) -> String {
    let f = lower(&ex.schedule, &ex.args, name).unwrap();
    let dir = tempfile::tempdir().unwrap();
    check_native_against_interpreter(&ex.schedule, &ex.outputs, &ex.args, ex.n_inputs, dir.path())
        .unwrap();
    // A fixed thread count keeps the snapshot independent of the machine.
    generate_c(&f, 2).unwrap()
}

#[test]
fn c_matmul_tiled_vectorized_parallel() {
    let src = c_source_and_check(testing::matmul_tiled().unwrap(), "matmul");
    assert!(src.contains("#pragma omp parallel for num_threads(2)"));
    assert!(
        src.contains("v_float32x8_u"),
        "the vectorized loop is SIMD code"
    );
    insta::assert_snapshot!(src);
}

#[test]
fn c_conv2d_cache_write_compute_at() {
    let src = c_source_and_check(testing::conv2d_cache_write().unwrap(), "conv2d");
    assert!(
        src.contains("conv2d_nhwc_local[64] __attribute__((aligned(64)))"),
        "{src}"
    );
    insta::assert_snapshot!(src);
}

#[test]
fn gpu_schedules_are_refused_by_the_cpu_backend() {
    let ex = testing::gpu_matmul_shared().unwrap();
    let f = lower(&ex.schedule, &ex.args, "matmul_gpu").unwrap();
    let e = CpuBackend::new(Target::cpu()).codegen(&f).unwrap_err();
    assert!(
        matches!(&e, BackendError::Unsupported { reason, .. } if reason.contains("blockIdx.y")),
        "{e}"
    );
}

#[test]
fn compiler_errors_are_typed() {
    let ex = testing::matmul_tiled().unwrap();
    let f = lower(&ex.schedule, &ex.args, "matmul").unwrap();
    let dir = tempfile::tempdir().unwrap();
    // A flag the compiler rejects stands for a compile error: the message and the source
    // path come back.
    let e = CpuBackend::new(Target::cpu())
        .with_extra_cflags(&["-fno-such-flag-for-tessera"])
        .build(&f, dir.path())
        .unwrap_err();
    match &e {
        BackendError::CompileFailed {
            source_path,
            message,
            ..
        } => {
            assert!(source_path.exists(), "the source is kept for inspection");
            assert!(message.contains("no-such-flag"), "{message}");
        }
        other => panic!("expected CompileFailed, got {other}"),
    }
}
