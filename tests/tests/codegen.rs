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

/// The default schedules' parameters for a 2-core AVX2 machine (8 float32 lanes).
fn avx2_two_cores() -> tessera_te::schedules::CpuParams {
    tessera_te::schedules::CpuParams {
        vector_lanes: 8,
        num_cores: 2,
        vectorize: true,
        gpu_threads: 0,
    }
}

#[test]
fn default_schedules_run_natively_for_every_family() {
    use tessera_ir::DataType;
    use tessera_te::ops::{self, Conv2dAttrs, Pool2dAttrs, PoolType};
    use tessera_te::placeholder;
    use tessera_te::schedules::default_schedule;
    let f = DataType::float32();
    let p = avx2_two_cores();
    let d = placeholder(&[1, 6, 8, 8], f, "data").unwrap();
    let cases: Vec<(Vec<tessera_te::Tensor>, tessera_te::Tensor)> = {
        let mut v = Vec::new();
        let (a, b) = (
            placeholder(&[2, 12, 16], f, "A").unwrap(),
            placeholder(&[2, 8, 16], f, "B").unwrap(),
        );
        v.push((
            vec![a.clone(), b.clone()],
            ops::batch_matmul(&a, &b).unwrap(),
        ));
        let (x, w) = (
            placeholder(&[5, 32], f, "x").unwrap(),
            placeholder(&[12, 32], f, "w").unwrap(),
        );
        v.push((
            vec![x.clone(), w.clone()],
            ops::dense(&x, &w, None).unwrap(),
        ));
        let kp = placeholder(&[4, 4, 16, 8], f, "kernel_pack").unwrap();
        v.push((
            vec![d.clone(), kp.clone()],
            ops::conv2d_winograd_nhwc(&d, &kp, [1; 4], 2).unwrap(),
        ));
        // the CPU's Winograd form, its chain scheduled from the output: F(2×2, 3×3) and
        // F(4×4, 3×3), the latter's tiles past the 6-row image's edge
        for (tile, alpha) in [(2, 4), (4, 6)] {
            let kb = placeholder(&[alpha, alpha, 2, 8, 8], f, "kernel_pack").unwrap();
            v.push((
                vec![d.clone(), kb.clone()],
                ops::conv2d_winograd_nhwc_blocked(&d, &kb, [1; 4], tile).unwrap(),
            ));
        }
        let kd = placeholder(&[3, 3, 8, 1], f, "kernel").unwrap();
        v.push((
            vec![d.clone(), kd.clone()],
            ops::depthwise_conv2d_nhwc(&d, &kd, &Conv2dAttrs::new((1, 1), (1, 1), (1, 1))).unwrap(),
        ));
        v.push((
            vec![d.clone()],
            ops::pool2d(
                &d,
                PoolType::Max,
                &Pool2dAttrs::new((3, 3), (2, 2), (1, 1)).with_layout("NHWC"),
            )
            .unwrap(),
        ));
        v.push((vec![d.clone()], ops::relu(&d).unwrap()));
        v
    };
    for (ins, out) in cases {
        let s = default_schedule(&[out.clone()], p).unwrap();
        let mut args = ins.clone();
        args.push(out.clone());
        let dir = tempfile::tempdir().unwrap();
        check_native_against_interpreter(&s, &[out.clone()], &args, ins.len(), dir.path())
            .unwrap_or_else(|e| panic!("{}: {e}", out.name()));
    }
}

#[test]
fn a_register_tiles_short_reduction_loop_stays_a_loop() {
    use tessera_ir::DataType;
    use tessera_te::ops::{self, Conv2dAttrs};
    use tessera_te::placeholder;
    use tessera_te::schedules::default_schedule;
    let f = DataType::float32();
    let p = avx2_two_cores();
    // ResNet's stem in small: 3 input channels, a 7 × 2-register accumulator tile
    let d = placeholder(&[1, 14, 14, 3], f, "data").unwrap();
    let k = placeholder(&[7, 7, 3, 16], f, "kernel").unwrap();
    let conv = ops::conv2d_nhwc_with(&d, &k, &Conv2dAttrs::new((1, 1), (3, 3), (1, 1))).unwrap();
    let s = default_schedule(&[conv.clone()], p).unwrap();
    let args = [d, k, conv.clone()];
    let dir = tempfile::tempdir().unwrap();
    check_native_against_interpreter(&s, &[conv], &args, 2, dir.path()).unwrap();
    let src = generate_c(&lower(&s, &args, "stem").unwrap(), 2).unwrap();
    let lines: Vec<&str> = src.lines().map(str::trim).collect();
    let rc = lines
        .iter()
        .position(|l| l.starts_with("for (int32_t rc = 0; rc < 3;"))
        .unwrap_or_else(|| panic!("no reduction loop over the channels:\n{src}"));
    // GCC would unroll the 3 iterations and spill the 14 accumulators
    assert_eq!(lines[rc - 1], "#pragma GCC unroll 1", "{src}");
    // a loop of no register tile keeps no such line (the padding's copy)
    assert_eq!(src.matches("#pragma GCC unroll 1").count(), 1, "{src}");
}
