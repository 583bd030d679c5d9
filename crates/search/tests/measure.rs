//! Measurement faults: each bad candidate becomes its own typed error and the batch goes
//! on — a kernel that segfaults, one that hangs, one that computes a wrong answer, one
//! the C compiler rejects, one that could not be instantiated — next to good ones that
//! are timed and checked.

use std::sync::{Arc, Mutex};
use std::time::Duration;
use tessera_backends::{CpuBackend, Target};
use tessera_ir::{DataType, Expr, PrimFunc};
use tessera_runtime::runner::TimerConfig;
use tessera_search::measure::{Candidate, MeasureOptions, Measurer, Reference};
use tessera_search::policy::PolicyError;
use tessera_search::MeasureErrorNo;
use tessera_te::schedules::{default_schedule, CpuParams};
use tessera_te::{compute, lower, ops, placeholder, reduce_axis, sum, Schedule, Tensor};

const N: i64 = 64;

fn matmul() -> (Tensor, Tensor, Tensor) {
    let a = placeholder(&[N, N], DataType::float32(), "A").unwrap();
    let b = placeholder(&[N, N], DataType::float32(), "B").unwrap();
    let c = ops::matmul(&a, &b).unwrap();
    (a, b, c)
}

fn naive(name: &str) -> PrimFunc {
    let (a, b, c) = matmul();
    lower(&Schedule::create(&[c.clone()]).unwrap(), &[a, b, c], name).unwrap()
}

fn tuned(name: &str) -> PrimFunc {
    let (a, b, c) = matmul();
    let p = CpuParams {
        vector_lanes: 16,
        num_cores: 2,
        vectorize: true,
        gpu_threads: 0,
    };
    lower(
        &default_schedule(&[c.clone()], p).unwrap(),
        &[a, b, c],
        name,
    )
    .unwrap()
}

/// Same signature, C + 1: a wrong answer.
fn wrong(name: &str) -> PrimFunc {
    let (a, b, c) = matmul();
    let d = compute(&[N, N], "D", &["i", "j"], |ix| {
        c.at(ix) + Expr::float_of(DataType::float32(), 1.0)
    })
    .unwrap();
    lower(&Schedule::create(&[d.clone()]).unwrap(), &[a, b, d], name).unwrap()
}

/// Same signature, reads gigabytes past A: a segmentation fault.
fn segfault(name: &str) -> PrimFunc {
    let (a, b, _) = matmul();
    let d = compute(&[N, N], "D", &["i", "j"], |ix| {
        a.at(&[
            ix[0].clone() * Expr::int(1 << 24) + Expr::int(1 << 28),
            ix[1].clone(),
        ]) + b.at(ix)
    })
    .unwrap();
    lower(&Schedule::create(&[d.clone()]).unwrap(), &[a, b, d], name).unwrap()
}

/// Same signature, 2^36 dependent additions: it never finishes in time.
fn hang(name: &str) -> PrimFunc {
    let (a, b, _) = matmul();
    let k = reduce_axis(1 << 30, "k");
    let d = compute(&[N, N], "D", &["i", "j"], |ix| {
        sum(
            a.at(ix) * b.at(ix) + Expr::cast(DataType::float32(), k.expr()),
            &[k.clone()],
        )
    })
    .unwrap();
    lower(&Schedule::create(&[d.clone()]).unwrap(), &[a, b, d], name).unwrap()
}

fn fast_opts() -> MeasureOptions {
    MeasureOptions {
        // A good kernel's run (a runner process started, the kernel loaded, run five
        // times and checked) takes milliseconds, and must not reach the timeout on a
        // fully loaded machine either; the hanging kernel (2^36 dependent additions
        // per element) still does.
        run_timeout: Duration::from_secs(10),
        timer: TimerConfig {
            number: 2,
            repeat: 2,
            min_repeat_ms: 0.0,
            cache_flush: false,
        },
        ..MeasureOptions::default()
    }
}

/// One candidate of each fault between two good ones.
fn faulty_batch() -> Vec<Candidate> {
    vec![
        Candidate {
            func: Ok(tuned("good_tuned")),
        },
        Candidate {
            func: Ok(segfault("bad_segv")),
        },
        Candidate {
            func: Ok(wrong("bad_wrong")),
        },
        Candidate {
            func: Ok(hang("bad_hang")),
        },
        Candidate {
            func: Err(PolicyError::Failed("split factor 3 does not divide 64".into()).into()),
        },
        Candidate {
            func: Ok(naive("good_naive")),
        },
    ]
}

/// Each result of [`faulty_batch`] is its candidate's own: the good ones timed with
/// `repeats` costs, each fault its typed error.
fn assert_each_fault_is_its_own(rs: &[tessera_search::MeasureResult], repeats: usize) {
    let kinds: Vec<MeasureErrorNo> = rs.iter().map(|r| r.error_no).collect();
    assert_eq!(
        kinds,
        vec![
            MeasureErrorNo::NoError,
            MeasureErrorNo::RuntimeDevice,
            MeasureErrorNo::WrongAnswer,
            MeasureErrorNo::RunTimeout,
            MeasureErrorNo::Instantiation,
            MeasureErrorNo::NoError,
        ],
        "{rs:#?}"
    );
    assert!(
        rs[1].error_msg.as_deref().unwrap().contains("SIGSEGV"),
        "{:?}",
        rs[1]
    );
    assert!(
        rs[2].error_msg.as_deref().unwrap().contains("output 0"),
        "{:?}",
        rs[2]
    );
    assert!(rs[4]
        .error_msg
        .as_deref()
        .unwrap()
        .contains("split factor 3"));
    for good in [&rs[0], &rs[5]] {
        assert_eq!(good.costs.len(), repeats, "{good:?}");
        assert!(
            good.costs.iter().all(|&c| c.is_finite() && c > 0.0),
            "{good:?}"
        );
    }
    // (which of the two good kernels is faster is not asserted: on a 64×64 matmul timed
    // for a few microseconds, a loaded machine decides it, and it once did)
}

#[test]
fn each_fault_is_its_candidates_error_and_the_batch_goes_on() {
    let backend = CpuBackend::new(Target::cpu());
    let reference = Reference::compute(&backend, &naive("reference"), 1, 7).unwrap();
    let mut m = Measurer::new(backend, fast_opts()).unwrap();
    let rs = m.measure(&faulty_batch(), 1, Some(&reference));
    assert_each_fault_is_its_own(&rs, 2);
    // the CPU computes on the host's cores: the builds did not overlap the runs, and
    // the two good jobs said where their time went
    let p = m.profile();
    assert_eq!((p.batches, p.overlapped_batches), (1, 0));
    assert_eq!((p.candidates, p.timed.jobs, p.prepared.jobs), (6, 2, 0));
    assert!(
        p.timed.timing > 0.0 && p.run >= p.timed.timing && p.build_work > 0.0,
        "{p:?}"
    );
}

/// A batch loaded and checked in parallel runners first (as on PoCL, whose compilers
/// run when a kernel loads and first launches) gives each fault its own typed error
/// there, and times only the good candidates, unchecked the second time.
#[test]
fn a_batch_prepared_in_parallel_runners_keeps_each_fault_its_own() {
    let backend = CpuBackend::new(Target::cpu());
    let reference = Reference::compute(&backend, &naive("reference"), 1, 7).unwrap();
    let opts = MeasureOptions {
        prepare_ahead: Some(true),
        n_parallel: 2,
        ..fast_opts()
    };
    let mut m = Measurer::new(backend, opts).unwrap();
    let rs = m.measure(&faulty_batch(), 1, Some(&reference));
    assert_each_fault_is_its_own(&rs, 2);
    let p = m.profile();
    // the two good candidates were prepared (checked) and then timed without a check
    assert_eq!((p.prepared.jobs, p.timed.jobs), (2, 2), "{p:?}");
    assert!(p.prepared.check > 0.0 && p.timed.check == 0.0, "{p:?}");
}

/// Builds that go on while the built candidates run (as on a GPU), and a slow cutoff
/// that every candidate passes, change nothing of which candidate fails how.
#[test]
fn overlapped_builds_and_the_slow_cutoff_keep_each_fault_its_own() {
    let backend = CpuBackend::new(Target::cpu());
    let reference = Reference::compute(&backend, &naive("reference"), 1, 7).unwrap();
    let opts = MeasureOptions {
        overlap_builds: Some(true),
        ..fast_opts()
    };
    let mut m = Measurer::new(backend, opts).unwrap();
    // a best time of a picosecond: every candidate is over three times slower, so each
    // good one is timed by its first calls, one result
    let inputs = tessera_search::measure::TaskInputs {
        reference: Some(&reference),
        sizes: None,
    };
    let rs = m.measure_task(&faulty_batch(), 1, inputs, Some(1e-12));
    assert_each_fault_is_its_own(&rs, 1);
    let p = m.profile();
    assert_eq!((p.batches, p.overlapped_batches), (1, 1));
    // without a best time, the next batch is timed fully
    let rs = m.measure(&faulty_batch()[..1], 1, Some(&reference));
    assert_eq!(rs[0].costs.len(), 2, "{rs:?}");
}

#[test]
fn compile_errors_are_compile_host_and_consecutive_errors_turn_verbose() {
    let backend = CpuBackend::new(Target::cpu()).with_extra_cflags(&["-fno-such-flag-at-all"]);
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    let opts = MeasureOptions {
        verbose_after: 2,
        ..fast_opts()
    };
    let mut m = Measurer::new(backend, opts)
        .unwrap()
        .with_report(move |l| sink.lock().unwrap().push(l.to_string()));
    let cands: Vec<Candidate> = (0..3)
        .map(|i| Candidate {
            func: Ok(naive(&format!("k{i}"))),
        })
        .collect();
    let rs = m.measure(&cands, 1, None);
    assert!(
        rs.iter().all(|r| r.error_no == MeasureErrorNo::CompileHost),
        "{rs:#?}"
    );
    assert!(
        rs[0].error_msg.as_deref().unwrap().contains("no-such-flag"),
        "{:?}",
        rs[0]
    );
    let lines = lines.lock().unwrap();
    assert!(
        lines[0].contains("2 measurements in a row failed"),
        "{lines:?}"
    );
    // the second and third errors are shown with their message
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains("COMPILE_HOST: "))
            .count(),
        2,
        "{lines:?}"
    );
    assert!(lines[1].contains("no-such-flag"), "{lines:?}");
}

/// `sqrt(x + eps) · y` with `x` drawn from [-1, 1), as an RMS norm's epilogue is measured
/// alone: about half of the reference's outputs are NaN. A correct schedule gives NaN in
/// the same places and is timed (the check's NaN matches NaN); one that differs where
/// the reference is a number is still a wrong answer.
#[test]
fn a_task_whose_seeded_inputs_leave_sqrts_domain_is_measured_not_judged_wrong() {
    let f32t = DataType::float32();
    let rms = |name: &str, wrong: bool| {
        let x = placeholder(&[N, N], f32t, "x").unwrap();
        let y = placeholder(&[N, N], f32t, "y").unwrap();
        let eps = Expr::float_of(f32t, 1e-6);
        let off = Expr::float_of(f32t, if wrong { 1e-2 } else { 0.0 });
        let out = compute(&[N, N], "T_rms", &["i", "j"], |ix| {
            (x.at(ix) + eps.clone()).sqrt() * y.at(ix) + off.clone()
        })
        .unwrap();
        let s = if wrong {
            Schedule::create(&[out.clone()]).unwrap()
        } else {
            let p = CpuParams {
                vector_lanes: 16,
                num_cores: 2,
                vectorize: true,
                gpu_threads: 0,
            };
            default_schedule(&[out.clone()], p).unwrap()
        };
        lower(&s, &[x, y, out], name).unwrap()
    };
    let backend = CpuBackend::new(Target::cpu());
    let reference = Reference::compute(&backend, &rms("reference", false), 1, 7).unwrap();
    let mut m = Measurer::new(backend, fast_opts()).unwrap();
    let batch = vec![
        Candidate {
            func: Ok(rms("good", false)),
        },
        Candidate {
            func: Ok(rms("off_by_a_hundredth", true)),
        },
    ];
    let rs = m.measure(&batch, 1, Some(&reference));
    assert_eq!(rs[0].error_no, MeasureErrorNo::NoError, "{:?}", rs[0]);
    assert!(rs[0].costs.iter().all(|&c| c.is_finite() && c > 0.0));
    assert_eq!(rs[1].error_no, MeasureErrorNo::WrongAnswer, "{:?}", rs[1]);
}
