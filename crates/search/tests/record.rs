//! The record log: round trips, torn and garbage lines, version skew, pick-best,
//! distill and apply-history-best.

use proptest::prelude::*;
use serde_json::json;
use std::fs;
use std::io::Write;
use std::path::Path;
use tessera_search::record::{
    best_by_workload, distill, distill_file, load, parse_log, pick_best, stable_cost,
    ApplyHistoryBest, Record, RecordError, RecordWriter, RECORD_VERSION,
};
use tessera_search::{MeasureErrorNo, MeasureResult, ScheduleDesc, FAILED_COST};

const WK_A: &str = "[\"0123456789abcdef0123456789abcdef\", [1, 64], [64, 64], [1, 64]]";
const WK_B: &str =
    "[\"fedcba9876543210fedcba9876543210\", [1, 56, 56, 64], [3, 3, 64, 64], [1, 56, 56, 64]]";

fn ok(costs: &[f64]) -> MeasureResult {
    MeasureResult {
        costs: costs.to_vec(),
        error_no: MeasureErrorNo::NoError,
        error_msg: None,
        all_cost: 0.5,
        timestamp: 1_700_000_000,
        at_points: None,
    }
}

fn failed(kind: MeasureErrorNo) -> MeasureResult {
    MeasureResult {
        costs: vec![FAILED_COST],
        error_no: kind,
        error_msg: Some("boom\nsecond line".into()),
        all_cost: 1.0,
        timestamp: 1_700_000_001,
        at_points: None,
    }
}

fn config(index: u64) -> ScheduleDesc {
    ScheduleDesc::Config {
        template: "dense_nopack".into(),
        index,
        entity: json!({"tile_y": [-1, 8], "tile_x": [-1, 16], "unroll": 1}),
    }
}

fn rec(wk: &str, target: &str, index: u64, result: MeasureResult) -> Record {
    Record::new(wk, target, "fused_dense_bias_add", config(index), result)
}

/// A few records of every schedule kind and result kind.
fn sample() -> Vec<Record> {
    vec![
        rec(WK_A, "cpu", 0, ok(&[1e-3, 1.2e-3, 0.9e-3])),
        Record::new(
            WK_B,
            "cpu -num-cores=2",
            "fused_conv2d_bias_add_relu",
            ScheduleDesc::Steps {
                steps: json!([["SP", 3, 0, 56, [1, 8], 1], ["AN", 3, 0, 3]]),
            },
            ok(&[2.5e-4]),
        ),
        rec(WK_A, "cpu", 7, failed(MeasureErrorNo::CompileHost)),
        Record::new(
            WK_B,
            "cpu",
            "fused_conv2d_bias_add_relu",
            ScheduleDesc::Default,
            ok(&[0.1, 0.2]),
        ),
    ]
}

fn write_all(path: &Path, batches: &[&[Record]]) {
    let mut w = RecordWriter::open(path).unwrap();
    for b in batches {
        w.append_batch(b).unwrap();
    }
}

fn line_of(r: &Record) -> String {
    r.to_json_line().unwrap()
}

#[test]
fn records_round_trip_through_the_writer_and_load() {
    let dir = tempfile::tempdir().unwrap();
    // The writer creates the parent folder.
    let path = dir.path().join("logs/nested/tune.json");
    let recs = sample();
    write_all(&path, &[&recs[..2], &[], &recs[2..]]);
    let text = fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 4);
    assert!(text.ends_with('\n'));
    let log = load(&path).unwrap();
    assert_eq!(log.records, recs);
    assert_eq!(log.lines, vec![1, 2, 3, 4]);
    assert!(log.skipped.is_empty());

    // Reopening appends after what is there.
    write_all(&path, &[&recs[..1]]);
    let log = load(&path).unwrap();
    assert_eq!(log.records.len(), 5);
    assert_eq!(log.records[4], recs[0]);
}

#[test]
fn a_record_is_one_json_line() {
    let r = Record::new(
        WK_A,
        "cpu -num-cores=2",
        "fused_dense_bias_add",
        config(17),
        MeasureResult {
            costs: vec![0.000123, 0.000125],
            error_no: MeasureErrorNo::NoError,
            error_msg: None,
            all_cost: 0.41,
            timestamp: 1_700_000_000,
            at_points: None,
        },
    );
    let line = line_of(&r);
    assert!(!line.contains('\n'));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&line).unwrap()["v"],
        1
    );
    insta::assert_snapshot!(line);

    // An error message with newlines stays on one line.
    let f = rec(WK_A, "cpu", 1, failed(MeasureErrorNo::RuntimeDevice));
    let line = line_of(&f);
    assert!(!line.contains('\n'));
    assert!(line.contains("\"error_no\":4"), "{line}");
    assert!(line.contains("boom\\nsecond line"), "{line}");
}

#[test]
fn a_non_finite_cost_fails_the_batch_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.json");
    let mut bad = rec(WK_A, "cpu", 1, ok(&[1.0]));
    bad.result.costs = vec![f64::NAN];
    let mut w = RecordWriter::open(&path).unwrap();
    let err = w.append_batch(&[sample()[0].clone(), bad]).unwrap_err();
    assert!(
        matches!(err, RecordError::Unwritable { index: 1, .. }),
        "{err}"
    );
    assert_eq!(fs::read(&path).unwrap(), b"");
}

#[test]
fn a_torn_last_line_is_skipped_and_the_writer_continues_on_a_new_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.json");
    let recs = sample();
    write_all(&path, &[&recs[..3]]);
    // A killed run: half of the next line.
    let half = line_of(&recs[3]);
    let half = &half[..half.len() / 2];
    fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(half.as_bytes())
        .unwrap();

    let log = load(&path).unwrap();
    assert_eq!(log.records, recs[..3]);
    assert_eq!(log.skipped.len(), 1);
    assert_eq!(log.skipped[0].0, 4);
    assert!(
        log.skipped[0].1.contains("torn last line"),
        "{:?}",
        log.skipped
    );

    // Appending afterwards: the torn line is terminated, the new records are whole.
    write_all(&path, &[&recs[3..], &recs[..1]]);
    let text = fs::read_to_string(&path).unwrap();
    assert!(text.contains(&format!("{half}\n{}\n", line_of(&recs[3]))));
    let log = load(&path).unwrap();
    let mut expected = recs[..3].to_vec();
    expected.push(recs[3].clone());
    expected.push(recs[0].clone());
    assert_eq!(log.records, expected);
    assert_eq!(log.lines, vec![1, 2, 3, 5, 6]);
    // The torn line is now an ordinary bad line in the middle.
    assert_eq!(log.skipped.len(), 1);
    assert_eq!(log.skipped[0].0, 4);
    assert!(
        log.skipped[0].1.starts_with("not JSON"),
        "{:?}",
        log.skipped
    );
}

#[test]
fn a_complete_last_line_without_a_newline_is_a_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.json");
    let recs = sample();
    fs::write(
        &path,
        format!("{}\n{}", line_of(&recs[0]), line_of(&recs[1])),
    )
    .unwrap();
    let log = load(&path).unwrap();
    assert_eq!(log.records, recs[..2]);
    assert!(log.skipped.is_empty());
    write_all(&path, &[&recs[2..3]]);
    assert_eq!(load(&path).unwrap().records, recs[..3]);
}

#[test]
fn garbage_lines_in_the_middle_are_skipped_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.json");
    let recs = sample();

    let mut bad_errno: serde_json::Value = serde_json::from_str(&line_of(&recs[0])).unwrap();
    bad_errno["result"]["error_no"] = json!(42);
    let mut future: serde_json::Value = serde_json::from_str(&line_of(&recs[1])).unwrap();
    future["v"] = json!(RECORD_VERSION + 1);
    future["new_field"] = json!({"whatever": true});
    let mut no_target: serde_json::Value = serde_json::from_str(&line_of(&recs[1])).unwrap();
    no_target.as_object_mut().unwrap().remove("target");

    let mut bytes = Vec::new();
    let mut line = |b: &[u8]| {
        bytes.extend_from_slice(b);
        bytes.push(b'\n');
    };
    line(line_of(&recs[0]).as_bytes()); // 1
    line(&[0xff, 0xfe, 0x00, 0x01, 0x9c, 0x80, b'{', 0xc3]); // 2: binary junk
    line(b"{}"); // 3
    line(b"[1, 2, 3]"); // 4
    line(bad_errno.to_string().as_bytes()); // 5
    line(future.to_string().as_bytes()); // 6
    line(b""); // 7: blank, ignored
    line(b"   \t"); // 8: blank, ignored
    line(line_of(&recs[1]).as_bytes()); // 9
    line(b"{\"v\": 1, \"workload_key\": "); // 10: a torn line, but not the last
    line(no_target.to_string().as_bytes()); // 11
    line(b"{\"v\": \"one\"}"); // 12
    line(line_of(&recs[2]).as_bytes()); // 13
    fs::write(&path, &bytes).unwrap();

    let log = load(&path).unwrap();
    assert_eq!(log.records, recs[..3]);
    assert_eq!(log.lines, vec![1, 9, 13]);
    let lines: Vec<usize> = log.skipped.iter().map(|s| s.0).collect();
    assert_eq!(lines, vec![2, 3, 4, 5, 6, 10, 11, 12], "{:#?}", log.skipped);
    let reason = |n: usize| log.skipped.iter().find(|s| s.0 == n).unwrap().1.clone();
    assert!(reason(2).contains("not UTF-8"), "{}", reason(2));
    assert!(reason(3).contains("no format version"), "{}", reason(3));
    assert!(reason(4).contains("array"), "{}", reason(4));
    assert!(reason(5).contains("42"), "{}", reason(5));
    assert!(
        reason(6).contains("version 2") && reason(6).contains("newer"),
        "{}",
        reason(6)
    );
    assert!(reason(10).starts_with("not JSON"), "{}", reason(10));
    assert!(reason(11).contains("target"), "{}", reason(11));
    assert!(reason(12).contains("version"), "{}", reason(12));
    for (_, r) in &log.skipped {
        assert!(!r.contains("torn"), "only the last line can be torn: {r}");
    }
}

#[test]
fn line_errors_name_the_line() {
    let e = Record::from_json_line(7, "{\"v\": 3}").unwrap_err();
    assert!(matches!(
        e,
        RecordError::NewerVersion {
            line: 7,
            version: 3
        }
    ));
    assert!(
        e.to_string()
            .starts_with("line 7: record format version 3 is newer"),
        "{e}"
    );
    let e = Record::from_json_line(2, "nope").unwrap_err();
    assert!(matches!(e, RecordError::BadLine { line: 2, .. }));
}

#[test]
fn a_missing_file_is_an_io_error_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.json");
    let err = load(&path).unwrap_err();
    assert!(
        matches!(&err, RecordError::Io { path: p, .. } if *p == path),
        "{err}"
    );
    assert!(err.to_string().contains("nope.json"), "{err}");
    let source = std::error::Error::source(&err).unwrap().to_string();
    assert!(source.contains("No such file"), "{source}");
}

#[test]
fn an_empty_file_has_no_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.json");
    fs::write(&path, "").unwrap();
    let log = load(&path).unwrap();
    assert!(log.records.is_empty() && log.skipped.is_empty());
    // A writer on an empty file adds no leading newline.
    write_all(&path, &[&sample()[..1]]);
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        format!("{}\n", line_of(&sample()[0]))
    );
}

#[test]
fn pick_best_takes_the_fastest_success_of_the_workload_and_target() {
    // A failure whose costs would look fast if they were read.
    let fast_failure = MeasureResult {
        costs: vec![1e-9],
        ..failed(MeasureErrorNo::RunTimeout)
    };
    let recs = vec![
        rec(WK_A, "cpu", 0, ok(&[3e-3])),
        rec(WK_A, "cpu", 1, failed(MeasureErrorNo::WrongAnswer)),
        // Fastest of all, but on another target.
        rec(WK_A, "cpu -num-cores=1", 2, ok(&[1e-4])),
        rec(WK_A, "cpu", 3, fast_failure),
        rec(WK_A, "cpu", 4, ok(&[1e-3, 3e-3])), // mean 2e-3
        rec(WK_A, "cpu", 5, ok(&[2e-3])),       // a tie with 4: the earlier wins
        rec(WK_B, "cpu", 6, ok(&[1e-5])),
        rec(WK_B, "cpu", 7, ok(&[])), // no costs: not usable
    ];
    let index = |r: Option<&Record>| match r.map(|r| &r.schedule) {
        Some(ScheduleDesc::Config { index, .. }) => Some(*index),
        _ => None,
    };
    assert_eq!(index(pick_best(&recs, WK_A, "cpu")), Some(4));
    assert_eq!(index(pick_best(&recs, WK_A, "cpu -num-cores=1")), Some(2));
    assert_eq!(index(pick_best(&recs, WK_B, "cpu")), Some(6));
    assert_eq!(index(pick_best(&recs, WK_B, "cpu -num-cores=1")), None);
    assert_eq!(index(pick_best(&recs, "other", "cpu")), None);

    // Only failures: nothing.
    let fails = vec![
        rec(WK_A, "cpu", 0, failed(MeasureErrorNo::CompileHost)),
        rec(WK_A, "cpu", 1, failed(MeasureErrorNo::Instantiation)),
    ];
    assert!(pick_best(&fails, WK_A, "cpu").is_none());
    assert!(best_by_workload(&fails, None).is_empty());

    let all = best_by_workload(&recs, None);
    let got: Vec<(&str, &str, Option<u64>)> = all
        .iter()
        .map(|((w, t), r)| (w.as_str(), t.as_str(), index(Some(r))))
        .collect();
    let mut expected = vec![
        (WK_A, "cpu", Some(4)),
        (WK_A, "cpu -num-cores=1", Some(2)),
        (WK_B, "cpu", Some(6)),
    ];
    expected.sort();
    assert_eq!(got, expected);
    let cpu = best_by_workload(&recs, Some("cpu"));
    assert_eq!(cpu.len(), 2);
    assert!(cpu.keys().all(|(_, t)| t == "cpu"));
}

#[test]
fn a_re_measured_schedule_is_judged_by_the_median_of_its_measurements() {
    assert_eq!(stable_cost(vec![]), f64::INFINITY);
    assert_eq!(stable_cost(vec![3.0]), 3.0);
    assert_eq!(stable_cost(vec![2.0, 1.0]), 2.0);
    assert_eq!(stable_cost(vec![3.0, 1.0, 2.0]), 2.0);
    assert_eq!(stable_cost(vec![1.0, f64::INFINITY]), f64::INFINITY);

    let recs = vec![
        // fast once, slow in the three fresh processes after: median 1.6 ms
        rec(WK_A, "cpu", 0, ok(&[1.0e-3])),
        // steady: median 1.25 ms
        rec(WK_A, "cpu", 1, ok(&[1.2e-3])),
        // fast, then failed twice: its median is a failure
        rec(WK_A, "cpu", 2, ok(&[1.1e-3])),
        // never re-measured: its one measurement
        rec(WK_A, "cpu", 3, ok(&[1.3e-3])),
        rec(WK_A, "cpu", 0, ok(&[1.6e-3])),
        rec(WK_A, "cpu", 1, ok(&[1.25e-3])),
        rec(WK_A, "cpu", 2, failed(MeasureErrorNo::RunTimeout)),
        rec(WK_A, "cpu", 0, ok(&[1.5e-3])),
        rec(WK_A, "cpu", 1, ok(&[1.2e-3])),
        rec(WK_A, "cpu", 2, failed(MeasureErrorNo::RunTimeout)),
        rec(WK_A, "cpu", 0, ok(&[1.7e-3])),
        rec(WK_A, "cpu", 1, ok(&[1.3e-3])),
        rec(WK_A, "cpu", 2, ok(&[1.1e-3])),
    ];
    // the record of schedule 1 whose cost is its median
    let best = pick_best(&recs, WK_A, "cpu").unwrap();
    assert_eq!(best, &recs[5]);
    assert_eq!(distill(&recs), vec![recs[5].clone()]);
    let h = ApplyHistoryBest::new(&recs);
    assert_eq!(h.query(WK_A, "cpu"), Some(&recs[5]));

    // without the re-measurements, the fastest single measurement wins
    assert_eq!(pick_best(&recs[..4], WK_A, "cpu"), Some(&recs[0]));
}

#[test]
fn distill_keeps_the_best_success_per_workload_and_target_in_first_appearance_order() {
    let recs = vec![
        rec(WK_B, "cpu", 0, failed(MeasureErrorNo::CompileHost)),
        rec(WK_A, "cpu", 1, ok(&[3e-3])),
        rec(WK_A, "cpu -num-cores=1", 2, ok(&[4e-3])),
        rec(WK_A, "cpu", 3, ok(&[1e-3])),
        rec(WK_B, "cpu", 4, ok(&[5e-3])),
        rec(WK_A, "cpu", 5, ok(&[1e-3])), // tie: 3 stays
        rec(
            "only-failures",
            "cpu",
            6,
            failed(MeasureErrorNo::RunTimeout),
        ),
    ];
    let d = distill(&recs);
    assert_eq!(d, vec![recs[4].clone(), recs[3].clone(), recs[2].clone()]);
    // Idempotent.
    assert_eq!(distill(&d), d);

    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.json");
    let output = dir.path().join("out/best.json");
    write_all(&input, &[&recs]);
    fs::OpenOptions::new()
        .append(true)
        .open(&input)
        .unwrap()
        .write_all(b"{\"v\":1,\"work")
        .unwrap();
    let s = distill_file(&input, &output).unwrap();
    assert_eq!((s.total, s.kept, s.workloads), (7, 3, 2));
    assert_eq!(
        s.without_success,
        vec![("only-failures".to_string(), "cpu".to_string())]
    );
    assert_eq!(s.skipped.len(), 1);
    let log = load(&output).unwrap();
    assert_eq!(log.records, d);
    assert!(log.skipped.is_empty());
    assert!(!dir.path().join("out/best.json.tmp").exists());

    // In place.
    let s = distill_file(&input, &input).unwrap();
    assert_eq!(s.kept, 3);
    assert_eq!(load(&input).unwrap().records, d);
}

#[test]
fn apply_history_best_queries_and_warns_once_per_missed_task() {
    let recs = vec![
        rec(WK_A, "cpu", 0, ok(&[3e-3])),
        rec(WK_A, "cpu", 1, ok(&[1e-3])),
        rec(WK_A, "cpu", 2, failed(MeasureErrorNo::WrongAnswer)),
        rec(WK_B, "cpu -num-cores=1", 3, ok(&[1e-3])),
        rec(WK_B, "cpu", 4, failed(MeasureErrorNo::CompileHost)),
    ];
    let mut ahb = ApplyHistoryBest::new(&recs);
    assert_eq!(ahb.len(), 2);
    assert_eq!(ahb.query(WK_A, "cpu"), Some(&recs[1]));
    assert_eq!(ahb.query(WK_B, "cpu -num-cores=1"), Some(&recs[3]));
    // Failures are no records; without a record on the exact target, the fastest on a
    // target of the same kind applies (TVM matches by target keys); other kinds are
    // kept apart.
    assert_eq!(ahb.query(WK_B, "cpu"), Some(&recs[3]));
    assert_eq!(ahb.query(WK_A, "cpu -num-cores=1"), Some(&recs[1]));
    assert_eq!(ahb.query(WK_A, "cuda"), None);

    assert_eq!(ahb.warn_missing(WK_A, "cpu", "fused_dense_bias_add"), None);
    let w = ahb
        .warn_missing(WK_B, "cuda", "fused_conv2d_bias_add_relu")
        .unwrap();
    assert_eq!(
        w,
        format!(
            "no tuning record for task `fused_conv2d_bias_add_relu` (workload {WK_B}) on \
             target `cuda`: using its default schedule"
        )
    );
    assert_eq!(
        ahb.warn_missing(WK_B, "cuda", "fused_conv2d_bias_add_relu"),
        None
    );
    assert!(ahb
        .warn_missing("[\"x\"]", "cpu", "fused_softmax")
        .is_some());
    let misses: Vec<&str> = ahb.misses().iter().map(|m| m.task.as_str()).collect();
    assert_eq!(misses, vec!["fused_conv2d_bias_add_relu", "fused_softmax"]);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.json");
    write_all(&path, &[&recs]);
    let (from_file, skipped) = ApplyHistoryBest::from_file(&path).unwrap();
    assert!(skipped.is_empty());
    assert_eq!(from_file.query(WK_A, "cpu"), Some(&recs[1]));
    assert!(ApplyHistoryBest::from_file(dir.path().join("missing")).is_err());
}

// ---------------------------------------------------------------------------------------
// Property: a log cut at any byte loads as exactly its complete lines.
// ---------------------------------------------------------------------------------------

fn arb_result() -> impl Strategy<Value = MeasureResult> {
    let success = (
        prop::collection::vec(1e-9f64..10.0, 1..4),
        0.0f64..100.0,
        any::<u64>(),
    )
        .prop_map(|(costs, all_cost, timestamp)| MeasureResult {
            costs,
            error_no: MeasureErrorNo::NoError,
            error_msg: None,
            all_cost,
            timestamp,
            at_points: None,
        });
    let failure = (1u8..=8, ".{0,40}", 0.0f64..100.0, any::<u64>()).prop_map(
        |(code, msg, all_cost, timestamp)| MeasureResult {
            costs: vec![FAILED_COST],
            error_no: MeasureErrorNo::try_from(code).unwrap(),
            error_msg: Some(msg),
            all_cost,
            timestamp,
            at_points: None,
        },
    );
    prop_oneof![success, failure]
}

fn arb_schedule() -> impl Strategy<Value = ScheduleDesc> {
    prop_oneof![
        Just(ScheduleDesc::Default),
        (
            "[a-z_]{1,12}",
            any::<u64>(),
            prop::collection::vec(-64i64..64, 0..5)
        )
            .prop_map(|(template, index, knobs)| ScheduleDesc::Config {
                template,
                index,
                entity: json!({ "tile": knobs, "unroll": index % 2 == 0 }),
            }),
        prop::collection::vec(("[A-Z]{2}", 0u32..10), 0..4).prop_map(|steps| {
            ScheduleDesc::Steps {
                steps: json!(steps),
            }
        }),
    ]
}

fn arb_record() -> impl Strategy<Value = Record> {
    (
        prop::sample::select(vec![WK_A, WK_B, "[\"ünïcode\", [1]]"]),
        prop::sample::select(vec!["cpu", "cpu -num-cores=2"]),
        "[a-z_]{1,20}",
        arb_schedule(),
        arb_result(),
    )
        .prop_map(|(wk, target, task, schedule, result)| {
            Record::new(wk, target, task, schedule, result)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_log_cut_at_any_byte_loads_its_complete_lines(
        batches in prop::collection::vec(prop::collection::vec(arb_record(), 0..4), 1..5),
        cut_frac in 0.0f64..=1.0,
        more in prop::collection::vec(arb_record(), 1..3),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.json");
        {
            let mut w = RecordWriter::open(&path).unwrap();
            for b in &batches {
                w.append_batch(b).unwrap();
            }
        }
        let all: Vec<Record> = batches.concat();
        let bytes = fs::read(&path).unwrap();
        // Where each record's line starts and where its text ends (its newline).
        let mut spans = Vec::new();
        let mut start = 0;
        for (i, b) in bytes.iter().enumerate() {
            if *b == b'\n' {
                spans.push((start, i));
                start = i + 1;
            }
        }
        prop_assert_eq!(spans.len(), all.len());
        prop_assert_eq!(start, bytes.len());

        let cut = ((bytes.len() as f64) * cut_frac).floor() as usize;
        fs::write(&path, &bytes[..cut]).unwrap();
        let log = load(&path).unwrap();

        let complete = spans.iter().filter(|(_, end)| *end <= cut).count();
        prop_assert_eq!(&log.records[..], &all[..complete]);
        let torn = spans.iter().position(|&(s, e)| s < cut && cut < e);
        match torn {
            Some(i) => {
                prop_assert_eq!(log.skipped.len(), 1);
                prop_assert_eq!(log.skipped[0].0, i + 1);
                prop_assert!(log.skipped[0].1.contains("torn last line"), "{:?}", log.skipped);
            }
            None => prop_assert!(log.skipped.is_empty(), "{:?}", log.skipped),
        }

        // A writer appending afterwards leaves a loadable log with the new records.
        {
            let mut w = RecordWriter::open(&path).unwrap();
            w.append_batch(&more).unwrap();
        }
        let log = load(&path).unwrap();
        let mut expected = all[..complete].to_vec();
        expected.extend(more.iter().cloned());
        prop_assert_eq!(log.records, expected);
        prop_assert!(log.skipped.len() <= 1);
        prop_assert_eq!(log.skipped.len(), usize::from(torn.is_some()));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A valid log with bytes replaced, flipped, inserted or cut: loading it, picking
    /// the history best and distilling never panic, and every line that loads is one
    /// the parser accepts again on its own.
    #[test]
    fn a_mutated_log_loads_what_it_can_and_never_panics(
        records in prop::collection::vec(arb_record(), 1..6),
        edits in prop::collection::vec((0.0f64..1.0, any::<u8>(), 0u8..4), 1..10),
    ) {
        let mut bytes = Vec::new();
        for r in &records {
            bytes.extend(r.to_json_line().unwrap().bytes());
            bytes.push(b'\n');
        }
        for (at, byte, kind) in edits {
            let i = ((bytes.len() as f64) * at) as usize % bytes.len().max(1);
            match kind {
                0 if !bytes.is_empty() => bytes[i] = byte,
                1 if !bytes.is_empty() => bytes[i] ^= 1 << (byte % 8),
                2 => bytes.insert(i.min(bytes.len()), byte),
                _ => bytes.truncate(i),
            }
        }
        let log = parse_log(&bytes);
        for (r, &line) in log.records.iter().zip(&log.lines) {
            let text = r.to_json_line().unwrap();
            prop_assert!(Record::from_json_line(line, &text).is_ok());
        }
        let best = ApplyHistoryBest::from_log(&log);
        prop_assert!(best.len() <= log.records.len());
        let _ = distill(&log.records);
    }
}
