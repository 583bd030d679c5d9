//! The in-network check (`network_check`): each tuned group is timed inside whole runs
//! against its default schedule and its check goes to the log as a line of its own; a
//! check that found the default faster makes builds with the log use the default; the
//! records alone, a newer best, distilling and bad check lines behave as the module
//! says. No test asserts which side a real check finds faster (a loaded machine decides
//! timings): the verdicts are tested on checks of known times.

use tessera_backends::{CpuBackend, Target};
use tessera_graph::passes::constant_f32;
use tessera_graph::{
    build, build_on, BuildContext, Graph, GroupCompute, Layout, Op, ScheduleHook, TensorType,
};
use tessera_runtime::CpuDevice;
use tessera_search::network_check::{
    candidate_histories, check_candidates_in_network, check_in_network, network_choice,
    CheckOptions, NetworkCheck, CANDIDATES,
};
use tessera_search::record::{distill_file, load, ApplyHistoryBest, Record, RecordWriter};
use tessera_search::state::State;
use tessera_search::{MeasureErrorNo, MeasureResult, ScheduleDesc};
use tessera_te::ops::Conv2dAttrs;

/// NHWC `[1, 28, 28, 32]` through a 3×3 convolution 32 → 32 and a ReLU, computed
/// directly (no Winograd).
fn conv_net() -> Graph {
    let mut g = Graph::new("conv_net");
    let x = g.input("data", TensorType::f32(&[1, 28, 28, 32]));
    let w = constant_f32(&[3, 3, 32, 32], |k| (k % 13) as f32 / 13.0 - 0.5).unwrap();
    let w = g.constant("w", w);
    let op = Op::Conv2d {
        attrs: Conv2dAttrs::new((1, 1), (1, 1), (1, 1)),
        layout: Layout::Nhwc,
    };
    let y = g.op("conv", op, &[x, w]).unwrap();
    let y = g
        .op("relu", Op::Unary(tessera_graph::Unary::Relu), &[y])
        .unwrap();
    g.mark_output(y);
    tessera_graph::ConvPlan::for_cpu(g, 8, false)
        .unwrap()
        .rule_graph()
        .clone()
}

/// Builds each group with its best step history (what the sketch plugin's hook does).
struct StepsHook(ApplyHistoryBest);

impl ScheduleHook for StepsHook {
    fn schedule(
        &self,
        _: &Graph,
        gc: &GroupCompute,
        _: &BuildContext,
    ) -> Option<tessera_te::Schedule> {
        let dag = gc.dag().ok()?;
        let rec = self.0.query(&dag.workload_key(), "cpu")?;
        let ScheduleDesc::Steps { steps } = &rec.schedule else {
            return None;
        };
        Some(State::from_json(&dag, steps).ok()?.replay().ok()?.schedule)
    }
}

fn ok(cost: f64, timestamp: u64) -> MeasureResult {
    MeasureResult {
        costs: vec![cost],
        error_no: MeasureErrorNo::NoError,
        error_msg: None,
        all_cost: 0.5,
        timestamp,
        at_points: None,
    }
}

/// The empty step history: the naive program (serial, scalar), far slower than the
/// default schedule.
fn naive() -> ScheduleDesc {
    ScheduleDesc::Steps {
        steps: serde_json::json!([]),
    }
}

/// The real check, on a network whose history best for its conv is the naive program:
/// one check of that group, with a time per round on each side, written to the log as a
/// line of its own and read back equal. Which side it finds faster is the machine's
/// business (a loaded machine can decide it): what the log does with a check that says
/// the default is faster is
/// `a_check_that_finds_the_default_faster_overrules_the_tuned_record` below, on a
/// check of known times.
#[test]
fn the_in_network_check_times_each_tuned_group_and_goes_to_the_log() {
    let g = conv_net();
    let target = Target::cpu();
    let mut default = build(&g, &target).unwrap();
    let keys: Vec<String> = default
        .step_workload_keys()
        .into_iter()
        .map(str::to_string)
        .collect();
    let conv_key = keys[0].clone();
    // the naive program "measured" faster alone than the default
    let records = vec![
        Record::new(&conv_key, "cpu", "conv", ScheduleDesc::Default, ok(1e-3, 1)),
        Record::new(&conv_key, "cpu", "conv", naive(), ok(1e-6, 2)),
    ];
    let best = ApplyHistoryBest::new(&records);
    let hook = StepsHook(best.clone());
    let backend = CpuBackend::new(target.clone());
    let device = std::sync::Arc::new(CpuDevice::new());
    let mut tuned = build_on(&g, &backend, device, Some(&hook)).unwrap();

    let opts = CheckOptions {
        rounds: 3,
        runs: 3,
        ..CheckOptions::default()
    };
    let checks = check_in_network(&mut tuned, &mut default, &best, "cpu", &opts).unwrap();
    assert_eq!(
        checks.len(),
        1,
        "one group has a tuned schedule: {checks:?}"
    );
    let c = &checks[0];
    assert_eq!(c.workload_key, conv_key);
    assert_eq!((c.target.as_str(), c.check.as_str()), ("cpu", "network"));
    assert_eq!(c.schedule, naive());
    assert_eq!((c.tuned_ms.len(), c.default_ms.len()), (3, 3));
    assert!(
        c.tuned_ms
            .iter()
            .chain(&c.default_ms)
            .all(|&t| t.is_finite() && t > 0.0),
        "{c:?}"
    );

    // the log: the records, then the check, as a line of its own
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.jsonl");
    let mut w = RecordWriter::open(&path).unwrap();
    w.append_batch(&records).unwrap();
    w.append_checks(&checks).unwrap();
    drop(w);
    let log = load(&path).unwrap();
    assert!(log.skipped.is_empty(), "{:?}", log.skipped);
    assert_eq!((log.records.len(), log.checks.len()), (2, 1));
    assert_eq!(log.checks[0], checks[0]);
    // whatever it found, the check is of the history best and the log keeps it
    assert_eq!(
        ApplyHistoryBest::from_log(&log).overruled().len(),
        usize::from(network_choice(&[c]).0.is_none())
    );
}

/// A check whose times say the tuned kernel ran slower in the network than its default
/// schedule (the naive program against the default: three times as slow): the records
/// alone keep the tuned schedule, the records with the check build with the default,
/// and distilling keeps the best record, the default's and the check.
#[test]
fn a_check_that_finds_the_default_faster_overrules_the_tuned_record() {
    let conv_key = "conv-key";
    // the naive program "measured" faster alone than the default, which it is not
    let records = vec![
        Record::new(conv_key, "cpu", "conv", ScheduleDesc::Default, ok(1e-3, 1)),
        Record::new(conv_key, "cpu", "conv", naive(), ok(1e-6, 2)),
    ];
    let slower = check(conv_key, naive(), 3.0, 1.0, 10);
    assert_eq!(network_choice(&[&slower]).0, None);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.jsonl");
    let mut w = RecordWriter::open(&path).unwrap();
    w.append_batch(&records).unwrap();
    w.append_checks(std::slice::from_ref(&slower)).unwrap();
    drop(w);
    let log = load(&path).unwrap();
    assert!(log.skipped.is_empty(), "{:?}", log.skipped);
    assert_eq!((log.records.len(), log.checks.len()), (2, 1));
    assert_eq!(log.checks[0], slower);

    // the records alone keep the tuned schedule; with the check, the default
    let alone = ApplyHistoryBest::new(&log.records);
    assert_eq!(alone.query(conv_key, "cpu").unwrap().schedule, naive());
    let with = ApplyHistoryBest::from_log(&log);
    assert_eq!(
        with.query(conv_key, "cpu").unwrap().schedule,
        ScheduleDesc::Default
    );
    let overruled: Vec<&NetworkCheck> = with.overruled().iter().map(|o| &o.check).collect();
    assert_eq!(overruled, [&slower]);

    // distilled, the log keeps the best record, the default's and the check
    let out = dir.path().join("best.jsonl");
    distill_file(&path, &out).unwrap();
    let distilled = load(&out).unwrap();
    assert_eq!(
        (distilled.records.len(), distilled.checks.len()),
        (2, 1),
        "{distilled:?}"
    );
    assert_eq!(
        ApplyHistoryBest::from_log(&distilled)
            .query(conv_key, "cpu")
            .unwrap()
            .schedule,
        ScheduleDesc::Default
    );
}

fn check(key: &str, schedule: ScheduleDesc, tuned: f64, default: f64, at: u64) -> NetworkCheck {
    NetworkCheck {
        v: 1,
        check: "network".into(),
        workload_key: key.into(),
        target: "cpu".into(),
        task: "conv".into(),
        schedule,
        tuned_ms: vec![tuned, tuned, tuned],
        default_ms: vec![default, default, default],
        timestamp: at,
    }
}

fn steps(n: i64) -> ScheduleDesc {
    ScheduleDesc::Steps {
        steps: serde_json::json!([["X", n]]),
    }
}

fn log_of(records: Vec<Record>, checks: Vec<NetworkCheck>) -> tessera_search::record::LoadedLog {
    tessera_search::record::LoadedLog {
        lines: (1..=records.len()).collect(),
        records,
        checks,
        ..Default::default()
    }
}

#[test]
fn only_the_latest_check_of_the_best_schedule_overrules_it() {
    let base = vec![
        Record::new("k", "cpu", "conv", ScheduleDesc::Default, ok(2e-3, 1)),
        Record::new("k", "cpu", "conv", steps(1), ok(1e-3, 2)),
    ];
    let best_of = |log| {
        ApplyHistoryBest::from_log(&log)
            .query("k", "cpu")
            .unwrap()
            .schedule
            .clone()
    };
    // the check found the tuned schedule faster: kept
    let faster = check("k", steps(1), 1.0, 2.0, 10);
    assert_eq!(
        best_of(log_of(base.clone(), vec![faster.clone()])),
        steps(1)
    );
    // slower, then faster in a later check: the later one decides
    let slower = check("k", steps(1), 2.0, 1.0, 5);
    let log = log_of(base.clone(), vec![faster.clone(), slower.clone()]);
    assert_eq!(best_of(log), steps(1));
    let log = log_of(base.clone(), vec![slower.clone()]);
    assert_eq!(best_of(log), ScheduleDesc::Default);
    // a newer best, not yet checked: the check of the old one does not touch it
    let mut newer = base.clone();
    newer.push(Record::new("k", "cpu", "conv", steps(2), ok(0.5e-3, 3)));
    assert_eq!(best_of(log_of(newer, vec![slower.clone()])), steps(2));
    // no default record to build with instead: the best stays
    let no_default = vec![base[1].clone()];
    assert_eq!(best_of(log_of(no_default, vec![slower])), steps(1));
}

#[test]
fn bad_check_lines_are_skipped_with_a_reason_and_records_still_read() {
    let good = check("k", steps(1), 2.0, 1.0, 5).to_json_line().unwrap();
    let rec = Record::new("k", "cpu", "conv", ScheduleDesc::Default, ok(2e-3, 1))
        .to_json_line()
        .unwrap();
    let other_kind = good.replace("\"check\":\"network\"", "\"check\":\"alone\"");
    let uneven = good.replace("\"default_ms\":[1.0,1.0,1.0]", "\"default_ms\":[1.0]");
    let newer = good.replace("\"v\":1,", "\"v\":99,");
    assert_ne!(uneven, good);
    assert_ne!(newer, good);
    let text = [rec, good, other_kind, uneven, newer].join("\n") + "\n";
    let log = tessera_search::record::parse_log(text.as_bytes());
    assert_eq!((log.records.len(), log.checks.len()), (1, 1));
    let reasons: Vec<(usize, &str)> = log.skipped.iter().map(|(l, r)| (*l, r.as_str())).collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert_eq!(reasons[0].0, 3);
    assert!(
        reasons[0].1.contains("a check of kind \"alone\""),
        "{reasons:?}"
    );
    assert!(
        reasons[1].1.contains("3 tuned and 1 default"),
        "{reasons:?}"
    );
    assert!(reasons[2].1.contains("format version 99"), "{reasons:?}");
}

#[test]
fn builds_of_different_graphs_are_not_compared() {
    let target = Target::cpu();
    let mut a = build(&conv_net(), &target).unwrap();
    let mut g = Graph::new("relu");
    let x = g.input("x", TensorType::f32(&[4, 8]));
    let y = g
        .op("r", Op::Unary(tessera_graph::Unary::Relu), &[x])
        .unwrap();
    g.mark_output(y);
    let mut b = build(&g, &target).unwrap();
    let best = ApplyHistoryBest::new(&[]);
    let e = check_in_network(&mut a, &mut b, &best, "cpu", &CheckOptions::default()).unwrap_err();
    assert!(e.to_string().contains("different kernels"), "{e}");
}

/// A check run of three candidates: the network's fastest builds, whichever of them
/// (or the default) it is; an earlier run does not count, a run in which the history
/// best wins changes nothing, and distilling keeps what the choice needs.
#[test]
fn a_check_of_several_candidates_builds_the_fastest_in_the_network() {
    let records = vec![
        Record::new("k", "cpu", "conv", ScheduleDesc::Default, ok(3e-3, 1)),
        Record::new("k", "cpu", "conv", steps(1), ok(1e-3, 2)),
        Record::new("k", "cpu", "conv", steps(2), ok(1.5e-3, 3)),
        Record::new("k", "cpu", "conv", steps(3), ok(2e-3, 4)),
    ];
    // the candidates, fastest alone first; a fourth build repeats the slowest
    let bests = candidate_histories(&records, 4);
    let picked: Vec<ScheduleDesc> = bests
        .iter()
        .map(|b| b.query("k", "cpu").unwrap().schedule.clone())
        .collect();
    assert_eq!(picked, [steps(1), steps(2), steps(3), steps(3)]);
    let built = |checks: Vec<NetworkCheck>| {
        let h = ApplyHistoryBest::from_log(&log_of(records.clone(), checks));
        (
            h.query("k", "cpu").unwrap().schedule.clone(),
            h.overruled().to_vec(),
        )
    };
    // the second fastest alone is the fastest in the network
    let run = vec![
        check("k", steps(1), 3.0, 2.5, 10),
        check("k", steps(2), 1.0, 2.5, 10),
        check("k", steps(3), 2.0, 2.5, 10),
    ];
    let (schedule, overruled) = built(run.clone());
    assert_eq!(schedule, steps(2));
    assert_eq!(overruled.len(), 1);
    assert_eq!(overruled[0].check, run[0]);
    assert_eq!(overruled[0].instead_ms, 1.0);
    // an earlier run that found the default fastest does not count
    let mut with_old = run.clone();
    with_old.push(check("k", steps(1), 9.0, 0.5, 5));
    assert_eq!(built(with_old).0, steps(2));
    // a run where the best stays fastest changes nothing
    let kept = vec![
        check("k", steps(1), 1.0, 2.5, 10),
        check("k", steps(2), 1.5, 2.5, 10),
    ];
    assert_eq!(built(kept), (steps(1), Vec::new()));
    // every candidate slower than the default: the default
    let slow = vec![
        check("k", steps(1), 3.0, 0.5, 10),
        check("k", steps(2), 2.0, 0.5, 10),
    ];
    assert_eq!(built(slow).0, ScheduleDesc::Default);

    // distilled, the log keeps the best record, the chosen one's and the whole run
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.jsonl");
    let mut w = RecordWriter::open(&path).unwrap();
    w.append_batch(&records).unwrap();
    w.append_checks(&run).unwrap();
    drop(w);
    let out = dir.path().join("best.jsonl");
    distill_file(&path, &out).unwrap();
    let distilled = load(&out).unwrap();
    assert_eq!((distilled.records.len(), distilled.checks.len()), (2, 3));
    let h = ApplyHistoryBest::from_log(&distilled);
    assert_eq!(h.query("k", "cpu").unwrap().schedule, steps(2));
}

/// The real check over several candidate builds: one check per distinct tuned
/// schedule of the group, each with the default's times of the same rounds.
#[test]
fn the_real_check_times_every_candidate_build() {
    let target = Target::cpu();
    let g = conv_net();
    let mut default = build(&g, &target).unwrap();
    let conv_key = default.step_workload_keys()[0].to_string();
    let records = vec![
        Record::new(&conv_key, "cpu", "conv", ScheduleDesc::Default, ok(1e-3, 1)),
        Record::new(&conv_key, "cpu", "conv", naive(), ok(1e-6, 2)),
    ];
    let bests = candidate_histories(&records, CANDIDATES);
    assert_eq!(bests.len(), CANDIDATES);
    let backend = CpuBackend::new(target.clone());
    let mut tuned: Vec<_> = bests
        .iter()
        .map(|b| {
            let hook = StepsHook(b.clone());
            let device = std::sync::Arc::new(CpuDevice::new());
            build_on(&g, &backend, device, Some(&hook)).unwrap()
        })
        .collect();
    let opts = CheckOptions {
        rounds: 3,
        runs: 1,
        round_ms: 100.0,
    };
    let mut rounds_seen = 0;
    let checks = check_candidates_in_network(
        &mut tuned,
        &mut default,
        &bests,
        "cpu",
        &opts,
        &mut |done, total| {
            rounds_seen = done;
            assert_eq!(total, 3);
        },
    )
    .unwrap();
    assert_eq!(rounds_seen, 3);
    // one candidate only: every build repeats it, so it is checked once
    assert_eq!(checks.len(), 1, "{checks:?}");
    assert_eq!(checks[0].schedule, naive());
    assert_eq!(
        (checks[0].tuned_ms.len(), checks[0].default_ms.len()),
        (3, 3)
    );
}
