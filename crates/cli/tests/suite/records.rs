//! `tessera records`: show, best and distill on a small log written with the library;
//! a torn last line is a warning, a missing file one error line.

use crate::common::{one_line_error, tessera};

use serde_json::json;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::Output;
use tessera_search::record::{load, Record, RecordWriter};
use tessera_search::{MeasureErrorNo, MeasureResult, ScheduleDesc, FAILED_COST};

const DENSE: &str = "[\"0123456789abcdef0123456789abcdef\", [1, 64], [64, 64], [1, 64]]";
const CONV: &str =
    "[\"fedcba9876543210fedcba9876543210\", [1, 56, 56, 64], [3, 3, 64, 64], [1, 1, 1, 64], [1, 56, 56, 64]]";
const SOFTMAX: &str = "[\"aaaabbbbccccddddaaaabbbbccccdddd\", [1, 1000], [1, 1000]]";

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

fn ok(ms: f64) -> MeasureResult {
    MeasureResult {
        costs: vec![ms * 1e-3],
        error_no: MeasureErrorNo::NoError,
        error_msg: None,
        all_cost: 0.3,
        timestamp: 1_700_000_000,
        at_points: None,
    }
}

fn failed(kind: MeasureErrorNo) -> MeasureResult {
    MeasureResult {
        costs: vec![FAILED_COST],
        error_no: kind,
        error_msg: Some("cc: error".into()),
        all_cost: 0.1,
        timestamp: 1_700_000_000,
        at_points: None,
    }
}

fn config(index: u64) -> ScheduleDesc {
    ScheduleDesc::Config {
        template: "dense_nopack".into(),
        index,
        entity: json!({"tile_x": [-1, 16]}),
    }
}

/// Eight records: dense (3 ok, 1 failed), conv (2 ok by steps, one on another target),
/// softmax (failed only).
fn records() -> Vec<Record> {
    let dense = |i, r| Record::new(DENSE, "cpu", "fused_dense_bias_add", config(i), r);
    let conv = |target: &str, n: usize, r| {
        Record::new(
            CONV,
            target,
            "fused_conv2d_bias_add_relu",
            ScheduleDesc::Steps {
                steps: json!(vec![json!(["SP", 3]); n]),
            },
            r,
        )
    };
    vec![
        dense(3, ok(0.5)),
        dense(9, ok(0.25)),
        conv("cpu", 4, ok(2.0)),
        dense(11, failed(MeasureErrorNo::CompileHost)),
        conv("cpu", 6, ok(1.5)),
        Record::new(
            SOFTMAX,
            "cpu",
            "fused_softmax",
            ScheduleDesc::Default,
            failed(MeasureErrorNo::RunTimeout),
        ),
        conv("cpu -num-cores=1", 2, ok(3.0)),
        dense(12, ok(0.75)),
    ]
}

fn write_log(path: &Path) {
    let recs = records();
    let mut w = RecordWriter::open(path).unwrap();
    w.append_batch(&recs[..3]).unwrap();
    w.append_batch(&recs[3..]).unwrap();
}

fn tear(path: &Path) {
    fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(b"{\"v\":1,\"workload_key\":\"[\\\"01234")
        .unwrap();
}

#[test]
fn show_lists_the_records_as_a_table() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("tune.json");
    write_log(&log);
    let log = log.to_str().unwrap();

    let out = tessera(&["records", "show", log]);
    let text = stdout(&out);
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 9, "{text}");
    for h in [
        "LINE",
        "WORKLOAD",
        "TASK",
        "TARGET",
        "SCHEDULE",
        "MEAN (ms)",
        "ERROR",
    ] {
        assert!(lines[0].contains(h), "{text}");
    }
    assert!(
        lines[1]
            .trim_start()
            .starts_with("1  01234567 1x64 64x64 1x64"),
        "{text}"
    );
    assert!(lines[1].contains("fused_dense_bias_add"), "{text}");
    assert!(lines[1].contains("config dense_nopack #3"), "{text}");
    assert!(
        lines[1].contains("0.5000") && lines[1].contains("NO_ERROR"),
        "{text}"
    );
    assert!(
        lines[3].contains("steps (4)") && lines[3].contains("2.0000"),
        "{text}"
    );
    assert!(
        lines[4].contains("COMPILE_HOST") && lines[4].contains(" - "),
        "{text}"
    );
    assert!(
        lines[6].contains("default") && lines[6].contains("RUN_TIMEOUT"),
        "{text}"
    );
    assert!(lines[7].contains("cpu -num-cores=1"), "{text}");
    // A long key is shortened.
    assert!(
        lines[3].contains("fedcba98 1x56x56x64 3x3x64x64 1x1x1x64… "),
        "{text}"
    );

    // One workload, by its hash prefix or whole key; a limit.
    let text = stdout(&tessera(&[
        "records",
        "show",
        log,
        "--workload",
        "01234567",
    ]));
    assert_eq!(text.lines().count(), 5, "{text}");
    assert!(
        text.lines()
            .skip(1)
            .all(|l| l.contains("fused_dense_bias_add")),
        "{text}"
    );
    let text = stdout(&tessera(&[
        "records",
        "show",
        log,
        "--workload",
        CONV,
        "--limit",
        "2",
    ]));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(lines[1].trim_start().starts_with("3 "), "{text}");
    assert!(lines[2].trim_start().starts_with("5 "), "{text}");
    assert_eq!(lines[3], "… 1 more (showing 2 of 3 records)");
    let text = stdout(&tessera(&["records", "show", log, "--workload", "nope"]));
    assert_eq!(
        text.trim(),
        "no records of workload `nope` (8 records in all)"
    );
}

#[test]
fn best_prints_one_line_per_workload_and_target() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("tune.json");
    write_log(&log);
    let log = log.to_str().unwrap();

    let text = stdout(&tessera(&["records", "best", log]));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert!(
        lines[0].starts_with("TASK") && lines[0].contains("BEST (ms)"),
        "{text}"
    );
    let dense = lines
        .iter()
        .find(|l| l.contains("fused_dense_bias_add"))
        .unwrap();
    assert!(
        dense.contains("0.2500") && dense.contains("#9") && dense.ends_with(DENSE),
        "{text}"
    );
    let convs: Vec<&&str> = lines
        .iter()
        .filter(|l| l.contains("fused_conv2d"))
        .collect();
    assert_eq!(convs.len(), 2, "{text}");
    assert!(
        convs
            .iter()
            .any(|l| l.contains("1.5000") && l.contains("steps (6)")),
        "{text}"
    );
    assert!(
        convs
            .iter()
            .any(|l| l.contains("3.0000") && l.contains("cpu -num-cores=1")),
        "{text}"
    );
    assert_eq!(
        lines[4],
        "no successful record: fused_softmax (aaaabbbb 1x1000 1x1000) on `cpu`"
    );

    let text = stdout(&tessera(&[
        "records",
        "best",
        log,
        "--target",
        "cpu -num-cores=1",
    ]));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[1].contains("3.0000"), "{text}");
}

#[test]
fn distill_keeps_the_best_records() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("tune.json");
    let output = dir.path().join("best/tune.best.json");
    write_log(&input);

    let out = tessera(&[
        "records",
        "distill",
        input.to_str().unwrap(),
        output.to_str().unwrap(),
    ]);
    let text = stdout(&out);
    assert_eq!(
        text,
        "kept 3 of 8 records (2 workloads)\ndropped 1 workload/target pair without a successful record\n"
    );
    let recs = records();
    let kept = load(&output).unwrap();
    assert_eq!(
        kept.records,
        vec![recs[1].clone(), recs[4].clone(), recs[6].clone()]
    );
}

#[test]
fn a_torn_last_line_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("tune.json");
    write_log(&log);
    tear(&log);
    let log = log.to_str().unwrap();

    for args in [
        vec!["records", "show", log],
        vec!["records", "best", log],
        vec!["records", "distill", log, log],
    ] {
        let out = tessera(&args);
        let text = stdout(&out);
        assert!(!text.is_empty());
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with(&format!("warning: {log}:9: skipped: torn last line")),
            "{args:?}: {err}"
        );
    }
    // The distilled log replaced it and is clean.
    let out = tessera(&["records", "show", log]);
    assert_eq!(stdout(&out).lines().count(), 4);
    assert!(stderr(&out).is_empty());
}

#[test]
fn garbage_lines_are_warnings_with_their_line_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("tune.json");
    let recs = records();
    let mut text = String::new();
    text.push_str(&recs[0].to_json_line().unwrap());
    text.push_str("\nnot json at all\n{\"v\": 7}\n");
    text.push_str(&recs[1].to_json_line().unwrap());
    text.push('\n');
    fs::write(&log, text).unwrap();
    let log = log.to_str().unwrap();
    let out = tessera(&["records", "show", log]);
    assert_eq!(stdout(&out).lines().count(), 3);
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].starts_with(&format!("warning: {log}:2: skipped: not JSON")),
        "{err}"
    );
    assert!(
        lines[1].starts_with(&format!(
            "warning: {log}:3: skipped: record format version 7"
        )),
        "{err}"
    );
}

#[test]
fn a_missing_file_is_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.json");
    let missing = missing.to_str().unwrap();
    for args in [
        vec!["records", "show", missing],
        vec!["records", "best", missing],
        vec!["records", "distill", missing, "/dev/null/x"],
    ] {
        let err = one_line_error(&tessera(&args));
        assert!(err.contains("missing.json"), "{err}");
        assert!(err.contains("No such file"), "{err}");
    }
}

#[test]
fn an_empty_log_has_no_records() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("empty.json");
    fs::write(&log, "").unwrap();
    let log = log.to_str().unwrap();
    assert_eq!(stdout(&tessera(&["records", "show", log])), "no records\n");
    assert_eq!(
        stdout(&tessera(&["records", "best", log])),
        "no successful records\n"
    );
}
