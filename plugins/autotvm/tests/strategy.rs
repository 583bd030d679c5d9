//! Template tuning as a core search strategy: every tuner behind `TemplateStrategy`
//! proposes distinct configurations whose programs compute the operator, never proposes
//! one twice (measured, read back from a log, or skipped by a tuner that ignores
//! history), reproduces its proposals from a seed, refuses tasks and candidates it
//! cannot take with the right error, and runs a whole tuning session whose log reads
//! like `tessera tune --templates`'s.

use std::collections::HashSet;
use tessera_autotvm::strategy::{tuner_names, TemplateStrategy};
use tessera_autotvm::templates::{Matmul, TemplateTask};
use tessera_autotvm::xgb::XgbOptions;
use tessera_backends::{HardwareParams, Target};
use tessera_costmodel::RandomProgramModel;
use tessera_ir::interp::{self, HostBuffer};
use tessera_ir::PrimFunc;
use tessera_search::measure::{MeasureOptions, Measurer};
use tessera_search::policy::{
    Observation, PolicyError, PolicyOptions, SearchPolicy, SearchTask, StrategyFactory,
};
use tessera_search::scheduler::SchedulerOptions;
use tessera_search::session::{SessionOptions, SessionReport, TuningSession};
use tessera_search::tasks::operator_task;
use tessera_search::ScheduleDesc;
use tessera_te::catalog::{OpAttrs, OpSpec};
use tessera_te::schedules::CpuParams;

/// A machine with 8 float32 lanes (AVX2), whatever the host has.
fn hw8() -> HardwareParams {
    HardwareParams {
        vector_unit_bytes: 32,
        ..HardwareParams::detect_host()
    }
}

fn hw(lanes: usize) -> HardwareParams {
    HardwareParams {
        vector_unit_bytes: 4 * lanes,
        ..HardwareParams::detect_host()
    }
}

fn spec(name: &str, shape: &[i64]) -> OpSpec {
    OpSpec::new(name, shape, OpAttrs::default()).unwrap()
}

fn task_of(spec: &OpSpec) -> SearchTask {
    operator_task(spec, &Target::cpu(), &hw8()).unwrap().task
}

fn create(tuner: &str, task: &SearchTask, seed: u64) -> Box<dyn SearchPolicy> {
    let opts = PolicyOptions {
        seed,
        ..PolicyOptions::default()
    };
    TemplateStrategy::new(tuner)
        .unwrap()
        .create(task, &opts)
        .unwrap_or_else(|e| panic!("{tuner}: {e}"))
}

/// Runs `f` in the interpreter on fixed inputs (every parameter but the last) and
/// returns its output.
fn run(f: &PrimFunc) -> Vec<f64> {
    let n = f.params.len();
    let mut bufs: Vec<HostBuffer> = f
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let shape: Vec<usize> = p
                .const_shape()
                .unwrap()
                .iter()
                .map(|&d| d as usize)
                .collect();
            let len: usize = shape.iter().product();
            let vals: Vec<f64> = (0..len)
                .map(|k| match i + 1 < n {
                    true => ((k * 7 + i * 3) % 17) as f64 / 17.0 - 0.5,
                    false => 0.0,
                })
                .collect();
            HostBuffer::from_f64(p.dtype(), &shape, &vals)
        })
        .collect();
    interp::run(f, &mut bufs).unwrap_or_else(|e| panic!("interpreter: {e}\n{f}"));
    bufs[n - 1].to_f64()
}

fn close(want: &[f64], got: &[f64]) -> bool {
    want.len() == got.len()
        && want
            .iter()
            .zip(got)
            .all(|(a, b)| (a - b).abs() <= 1e-4 * (1.0 + a.abs()))
}

fn index_of(d: &ScheduleDesc) -> u64 {
    match d {
        ScheduleDesc::Config { index, .. } => *index,
        other => panic!("not a configuration: {other:?}"),
    }
}

/// A made-up cost of configuration `i` (seconds), some failures.
fn cost(i: u64) -> Option<f64> {
    (i % 7 != 3).then(|| 1e-3 * (1.0 + ((i * 2654435761) % 1000) as f64 / 100.0))
}

fn observe_all(p: &mut dyn SearchPolicy, descs: &[ScheduleDesc]) {
    let obs: Vec<Observation> = descs
        .iter()
        .map(|d| Observation {
            schedule: d.clone(),
            cost: cost(index_of(d)),
        })
        .collect();
    for v in p.observe(&obs) {
        v.unwrap();
    }
}

const TUNERS: &[&str] = &[
    "xgb",
    "xgb_knob",
    "xgb_rank_binary_curve",
    "ga",
    "random",
    "gridsearch",
];

#[test]
fn every_tuner_name_is_a_strategy() {
    let names = tuner_names();
    for n in [
        "xgb",
        "xgb_knob",
        "xgb_rank",
        "xgb_rank_binary_curve",
        "ga",
        "random",
    ] {
        assert!(names.iter().any(|m| m == n), "{n} missing from {names:?}");
    }
    for n in &names {
        let s = TemplateStrategy::new(n).unwrap();
        assert_eq!(s.name(), n);
        if n.starts_with("xgb") {
            assert!(XgbOptions::parse(n).is_some(), "{n}");
        }
    }
    let unique: HashSet<&String> = names.iter().collect();
    assert_eq!(unique.len(), names.len());
}

#[test]
fn proposals_are_distinct_configurations_that_compute_the_operator() {
    for s in [
        spec("matmul", &[8, 12, 16]),
        spec("conv2d", &[1, 6, 6, 4, 8, 3, 3]),
    ] {
        let task = task_of(&s);
        for &tuner in TUNERS {
            let mut p = create(tuner, &task, 1);
            let info = p.info();
            assert!(!info.uses_scorer);
            let want = run(&p.reference().unwrap());
            let props = p.propose(8, None).unwrap();
            assert_eq!(props.len(), 8, "{tuner} {}", s.name);
            let indices: HashSet<u64> = props.iter().map(|p| index_of(&p.schedule)).collect();
            assert_eq!(indices.len(), 8, "{tuner}: repeated configurations");
            let descs: Vec<ScheduleDesc> = props.iter().map(|p| p.schedule.clone()).collect();
            let lowered = p.lower(&descs);
            for (prop, again) in props.iter().zip(lowered) {
                let ScheduleDesc::Config { template, .. } = &prop.schedule else {
                    unreachable!()
                };
                assert_eq!(*template, info.record_name);
                assert!(info.workload_key.starts_with(&format!("{template}:")));
                let f = prop.program.as_ref().unwrap();
                let got = run(f);
                assert!(close(&want, &got), "{tuner} {:?}\n{f}", prop.schedule);
                assert_eq!(again.unwrap().to_string(), f.to_string());
            }
        }
    }
}

#[test]
fn a_configuration_is_never_proposed_twice_and_the_space_runs_out() {
    // 2×2×2 matmul: 36 configurations
    let task = task_of(&spec("matmul", &[2, 2, 2]));
    for &tuner in TUNERS {
        let mut p = create(tuner, &task, 3);
        let mut seen = HashSet::new();
        for round in 0.. {
            assert!(round < 20, "{tuner}: the space never ran out");
            let props = p.propose(8, None).unwrap();
            if props.is_empty() {
                break;
            }
            let descs: Vec<ScheduleDesc> = props.into_iter().map(|p| p.schedule).collect();
            for d in &descs {
                assert!(seen.insert(index_of(d)), "{tuner}: {d:?} again");
            }
            observe_all(p.as_mut(), &descs);
        }
        assert_eq!(seen.len(), 36, "{tuner}");
    }
}

#[test]
fn the_logs_configurations_are_history_and_never_proposed_again() {
    let task = task_of(&spec("matmul", &[2, 2, 2]));
    // what an earlier run measured: the first 20 configurations of the grid
    let first = create("gridsearch", &task, 0).propose(20, None).unwrap();
    let earlier: Vec<ScheduleDesc> = first.into_iter().map(|p| p.schedule).collect();
    for &tuner in TUNERS {
        let mut p = create(tuner, &task, 5);
        observe_all(p.as_mut(), &earlier);
        let mut fresh = HashSet::new();
        loop {
            let props = p.propose(8, None).unwrap();
            if props.is_empty() {
                break;
            }
            let descs: Vec<ScheduleDesc> = props.into_iter().map(|p| p.schedule).collect();
            for d in &descs {
                assert!(!earlier.contains(d), "{tuner}: proposed a logged {d:?}");
                assert!(fresh.insert(index_of(d)), "{tuner}: {d:?} again");
            }
            observe_all(p.as_mut(), &descs);
        }
        assert_eq!(fresh.len(), 16, "{tuner}");
    }
}

/// The indices `tuner` proposes over `rounds` rounds of 8, each round observed.
fn proposals(tuner: &str, task: &SearchTask, seed: u64, rounds: usize) -> Vec<u64> {
    let mut p = create(tuner, task, seed);
    let mut out = Vec::new();
    for _ in 0..rounds {
        let descs: Vec<ScheduleDesc> = p
            .propose(8, None)
            .unwrap()
            .into_iter()
            .map(|p| p.schedule)
            .collect();
        out.extend(descs.iter().map(index_of));
        observe_all(p.as_mut(), &descs);
    }
    out
}

#[test]
fn the_same_seed_gives_the_same_proposals() {
    let task = task_of(&spec("matmul", &[32, 32, 32]));
    for &tuner in ["xgb_knob", "ga", "random", "gridsearch"].iter() {
        let a = proposals(tuner, &task, 11, 3);
        assert_eq!(a, proposals(tuner, &task, 11, 3), "{tuner}");
        if tuner != "gridsearch" {
            assert_ne!(
                a,
                proposals(tuner, &task, 12, 3),
                "{tuner}: the seed is unused"
            );
        }
    }
}

fn create_err(tuner: &str, task: &SearchTask) -> PolicyError {
    match TemplateStrategy::new(tuner)
        .unwrap()
        .create(task, &PolicyOptions::default())
    {
        Ok(_) => panic!("{tuner} took task `{}`", task.name),
        Err(e) => e,
    }
}

#[test]
fn tasks_and_tuners_it_cannot_take_are_typed_errors() {
    match TemplateStrategy::new("annealing") {
        Err(PolicyError::UnknownStrategy { name, known }) => {
            assert_eq!(name, "annealing");
            for n in ["xgb", "xgb_rank_binary_curve", "ga", "random", "gridsearch"] {
                assert!(known.split(", ").any(|k| k == n), "{n} not in {known}");
            }
        }
        other => panic!("{other:?}"),
    }
    let mut no_op = task_of(&spec("matmul", &[8, 8, 8]));
    no_op.op = None;
    match create_err("random", &no_op) {
        PolicyError::Unsupported {
            strategy, reason, ..
        } => {
            assert_eq!(strategy, "random");
            assert!(reason.contains("catalog operator"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    for (name, shape) in [
        ("max_pool2d", &[1, 8, 8, 4, 3, 3][..]),
        ("conv2d_transpose", &[1, 8, 8, 4, 4, 3, 3]),
        ("softmax", &[4, 16]),
    ] {
        match create_err("xgb", &task_of(&spec(name, shape))) {
            PolicyError::Unsupported { reason, .. } => {
                assert!(reason.contains("no template fits"), "{name}: {reason}")
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[test]
fn candidates_of_another_kind_or_template_are_bad_candidates() {
    let task = task_of(&spec("matmul", &[8, 8, 8]));
    let mut p = create("random", &task, 0);
    let dense = task_of(&spec("dense", &[8, 8, 8]));
    let other = create("gridsearch", &dense, 0).propose(1, None).unwrap();
    let descs = [
        ScheduleDesc::Default,
        ScheduleDesc::Steps {
            steps: serde_json::json!([]),
        },
        other[0].schedule.clone(),
        ScheduleDesc::Config {
            template: "matmul.x86".into(),
            index: 0,
            entity: serde_json::json!("garbage"),
        },
    ];
    let obs: Vec<Observation> = descs
        .iter()
        .map(|d| Observation {
            schedule: d.clone(),
            cost: Some(1e-3),
        })
        .collect();
    for (d, v) in descs.iter().zip(p.observe(&obs)) {
        assert!(
            matches!(v, Err(PolicyError::BadCandidate(_))),
            "{d:?}: {v:?}"
        );
    }
    for (d, f) in descs.iter().zip(p.lower(&descs)) {
        assert!(matches!(f, Err(PolicyError::BadCandidate(_))), "{d:?}");
    }
}

/// Parameter shapes and types of a program, in order.
fn signature(f: &PrimFunc) -> Vec<(Vec<i64>, String)> {
    f.params
        .iter()
        .map(|b| (b.const_shape().unwrap(), b.dtype().to_string()))
        .collect()
}

#[test]
fn the_catalogs_default_program_takes_the_templates_parameters() {
    let specs = [
        spec("matmul", &[8, 12, 16]),
        spec("dense", &[3, 24, 40]),
        spec("batch_matmul", &[2, 5, 8, 16]),
        spec("conv2d", &[1, 9, 7, 6, 8, 3, 3]),
        spec("conv2d_nchw", &[2, 9, 11, 4, 6, 3, 3]),
        spec("conv2d_nchwc", &[1, 8, 9, 32, 48, 3, 3]),
        spec("depthwise_conv2d", &[1, 10, 9, 24, 3, 3]),
        OpSpec::new(
            "conv2d",
            &[1, 9, 9, 4, 8, 3, 5],
            OpAttrs {
                stride: 2,
                dilation: 2,
                ..OpAttrs::default()
            },
        )
        .unwrap(),
    ];
    for lanes in [4, 8, 16] {
        for s in &specs {
            let s = s.for_vector_lanes(lanes);
            let t = TemplateTask::from_op(&s, lanes).unwrap().unwrap();
            let p = CpuParams {
                vector_lanes: lanes,
                num_cores: 2,
                vectorize: true,
                gpu_threads: 0,
            };
            let default = s.default_func(p, "default").unwrap();
            let naive = t.naive("reference").unwrap();
            assert_eq!(
                signature(&default),
                signature(&naive),
                "{s:?} lanes {lanes}"
            );
            // and it is the same computation: the task's key is the template's
            let key = s.dag().unwrap().workload_key();
            assert_eq!(t.workload_key, format!("{}:{key}", t.template));
        }
    }
}

#[test]
fn conv2d_nchwc_without_blocks_is_refused_when_the_template_blocks_otherwise() {
    // the catalog blocks 32 channels by 16, the template for 8 lanes by 8: a task made
    // by hand from the spec as it is is refused ...
    let s = spec("conv2d_nchwc", &[1, 8, 8, 32, 32, 3, 3]);
    let mut raw = task_of(&s);
    raw.dag = s.dag().unwrap();
    raw.workload_key = raw.dag.workload_key();
    raw.op = Some(s.clone());
    match create_err("random", &raw) {
        PolicyError::Unsupported { reason, .. } => {
            assert!(reason.contains("for_vector_lanes"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    // ... while `operator_task` blocks it for the device's lanes, as the template does
    let fixed = s.for_vector_lanes(8);
    assert_eq!(fixed.attrs.block, Some((8, 8)));
    assert_eq!(task_of(&s).op, Some(fixed.clone()));
    let mut p = create("random", &task_of(&fixed), 0);
    let want = run(&p.reference().unwrap());
    for prop in p.propose(3, None).unwrap() {
        assert!(close(&want, &run(&prop.program.unwrap())));
    }
    // with 16 lanes both block by 16: no block needed
    let task16 = operator_task(&s, &Target::cpu(), &hw(16)).unwrap().task;
    TemplateStrategy::new("random")
        .unwrap()
        .create(&task16, &PolicyOptions::default())
        .unwrap();
}

struct Quiet;
impl SessionReport for Quiet {
    fn out(&mut self, _text: &str) {}
    fn warn(&mut self, text: &str) {
        panic!("warning: {text}");
    }
}

fn session_opts(trials: usize) -> SessionOptions {
    SessionOptions {
        scheduler: SchedulerOptions {
            per_round: 8,
            ..SchedulerOptions::default()
        },
        trials,
        warmup: 8,
        check: true,
        remeasure_top: 0,
        remeasure_runs: 0,
        on_prepare: None,
        memory: None,
    }
}

fn run_session(log: &std::path::Path, trials: usize) {
    let target = Target::cpu();
    let task = operator_task(&spec("matmul", &[32, 32, 32]), &target, &hw8()).unwrap();
    let measure = MeasureOptions {
        simulated: true,
        runner: Some(std::env::current_exe().unwrap()),
        ..MeasureOptions::default()
    };
    let backend = tessera_backends::CpuBackend::new(target);
    let measurer = Measurer::new(backend, measure).unwrap();
    let session = TuningSession::new(
        vec![task],
        &TemplateStrategy::new("random").unwrap(),
        &PolicyOptions {
            seed: 4,
            ..PolicyOptions::default()
        },
        measurer,
        log,
        Box::new(RandomProgramModel::new(0)),
        session_opts(trials),
    )
    .unwrap();
    let summary = session.run(&mut Quiet).unwrap();
    assert_eq!(summary.trials, trials);
}

#[test]
fn a_tuning_session_logs_the_baseline_and_the_templates_configurations() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("matmul.jsonl");
    run_session(&log, 16);
    let t = TemplateTask::of(
        Matmul {
            m: 32,
            n: 32,
            k: 32,
        },
        8,
    )
    .unwrap();
    let records = tessera_search::record::load(&log).unwrap().records;
    assert_eq!(records.len(), 17);
    assert!(matches!(records[0].schedule, ScheduleDesc::Default));
    let mut configs = HashSet::new();
    for r in &records {
        assert_eq!(r.workload_key, t.workload_key);
        assert_eq!(r.task, "matmul.x86");
        assert_eq!(r.target, Target::cpu().to_string());
        assert!(r.result.is_ok(), "{r:?}");
        if let ScheduleDesc::Config { template, .. } = &r.schedule {
            assert_eq!(template, "matmul.x86");
            configs.insert(index_of(&r.schedule));
        }
    }
    assert_eq!(configs.len(), 16);
    // resumed: the log's 16 count, 8 new configurations, no second baseline
    run_session(&log, 24);
    let records = tessera_search::record::load(&log).unwrap().records;
    assert_eq!(records.len(), 25);
    let defaults = records
        .iter()
        .filter(|r| matches!(r.schedule, ScheduleDesc::Default))
        .count();
    assert_eq!(defaults, 1);
    let all: HashSet<_> = records
        .iter()
        .filter(|r| !matches!(r.schedule, ScheduleDesc::Default))
        .map(|r| serde_json::to_string(&r.schedule).unwrap())
        .collect();
    assert_eq!(all.len(), 24, "a configuration was measured twice");
}

/// Collects a session's warnings.
#[derive(Default)]
struct Warnings(Vec<String>);
impl SessionReport for Warnings {
    fn out(&mut self, _text: &str) {}
    fn warn(&mut self, text: &str) {
        self.0.push(text.to_string());
    }
}

#[test]
fn a_task_the_strategy_cannot_tune_is_left_out_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let target = Target::cpu();
    let tasks = vec![
        operator_task(&spec("matmul", &[32, 32, 32]), &target, &hw8()).unwrap(),
        // no template fits a pooling
        operator_task(&spec("max_pool2d", &[1, 8, 8, 8, 3, 3]), &target, &hw8()).unwrap(),
    ];
    let measure = MeasureOptions {
        simulated: true,
        runner: Some(std::env::current_exe().unwrap()),
        ..MeasureOptions::default()
    };
    let measurer = Measurer::new(tessera_backends::CpuBackend::new(target), measure).unwrap();
    let new = |tasks| {
        TuningSession::new(
            tasks,
            &TemplateStrategy::new("random").unwrap(),
            &PolicyOptions::default(),
            measurer,
            dir.path().join("log.jsonl"),
            Box::new(RandomProgramModel::new(0)),
            session_opts(8),
        )
    };
    let session = new(tasks).unwrap();
    assert_eq!(session.tasks().len(), 1);
    let mut w = Warnings::default();
    let summary = session.run(&mut w).unwrap();
    assert_eq!(summary.best_costs.len(), 1);
    assert_eq!(w.0.len(), 1, "{:?}", w.0);
    assert!(
        w.0[0].contains("max_pool2d") && w.0[0].contains("keeps its default schedule"),
        "{:?}",
        w.0
    );
}
