//! `tessera tune --templates` on one small operator: progress lines, the record log
//! (every measurement plus the default schedule's), and its errors.

use crate::common::tessera;

use std::process::Output;

/// Random configurations of a 64³ matmul up to `trials` in the log, appended to it,
/// `per_round` at a time, timed with `timing`.
fn tune_matmul_with(
    log: &std::path::Path,
    trials: &str,
    per_round: &str,
    timing: &[&str],
) -> Output {
    let mut args = vec![
        "tune",
        "--templates",
        "--op",
        "matmul",
        "--op-shape",
        "64,64,64",
        "--tuner",
        "random",
        "--trials",
        trials,
        "--per-round",
        per_round,
        "--remeasure-top",
        "0",
        "--log",
        log.to_str().unwrap(),
    ];
    args.extend_from_slice(timing);
    tessera(&args)
}

/// Random configurations of a 64³ matmul up to `trials` in the log, appended to it.
fn tune_matmul_to(log: &std::path::Path, trials: &str) -> Output {
    tune_matmul_with(log, trials, "4", &["--min-repeat-ms", "1"])
}

/// Eight random configurations of a 64³ matmul in the log.
fn tune_matmul(log: &std::path::Path) -> Output {
    tune_matmul_to(log, "8")
}

#[test]
fn tuning_one_operator_writes_every_measurement_to_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("logs/mm.jsonl");
    let out = tune_matmul(&log);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // the task scheduler's table, as for the auto-scheduler
    assert!(stdout.contains("Estimated total latency: "), "{stdout}");
    assert!(stdout.contains("after 8 trials"), "{stdout}");
    let text = std::fs::read_to_string(&log).unwrap();
    // eight candidates and the default schedule, each one line
    assert_eq!(text.lines().count(), 9, "{text}");
    assert!(text.contains(r#""kind":"default""#), "{text}");
    assert_eq!(
        text.matches(r#""template":"matmul.x86""#).count(),
        8,
        "{text}"
    );
    // the records tools read it
    let best = tessera(&["records", "best", log.to_str().unwrap()]);
    assert!(
        best.status.success(),
        "{}",
        String::from_utf8_lossy(&best.stderr)
    );

    // Run again on the same log to 16 trials: the tuner starts from the earlier
    // measurements and proposes none of them again.
    let again = tune_matmul_to(&log, "16");
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(again.status.success(), "{stdout}");
    assert!(
        stdout.contains("8 earlier measurements of these tasks"),
        "{stdout}"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    // the baseline is measured once per log
    assert_eq!(text.lines().count(), 17, "{text}");
    let mut indices: Vec<u64> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["schedule"]["index"].as_u64())
        .collect();
    assert_eq!(indices.len(), 16);
    indices.sort();
    indices.dedup();
    assert_eq!(indices.len(), 16, "a configuration was measured twice");
}

#[test]
fn cold_measurements_keep_one_cost_per_flushed_repeat() {
    // TVM's `enable_cpu_cache_flush`: three repeats of one run, each after a flush. The
    // slow cutoff is off: a random configuration over three times slower than the best
    // so far would otherwise keep its first repeat alone (it did, intermittently).
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("mm.jsonl");
    let timing = [
        "--cache-flush",
        "--repeat",
        "3",
        "--number",
        "1",
        "--min-repeat-ms",
        "0",
        "--slow-cutoff",
        "0",
    ];
    let out = tune_matmul_with(&log, "3", "3", &timing);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let costs: Vec<usize> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| v["result"]["costs"].as_array().map_or(0, Vec::len))
        .collect();
    assert_eq!(costs, [3, 3, 3, 3], "{text}");
}

#[test]
fn tune_errors_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("x.jsonl");
    let log = log.to_str().unwrap();
    for (args, needle) in [
        (
            // without --templates: the auto-scheduler takes any catalog operator
            vec![
                "tune",
                "--op",
                "maxpool",
                "--op-shape",
                "1,8,8,4,3,3",
                "--log",
                log,
            ],
            "unknown operator `maxpool` (known: matmul, dense,",
        ),
        (
            vec![
                "tune",
                "--templates",
                "--op",
                "matmul",
                "--op-shape",
                "8,8,8",
                "--tuner",
                "bogus",
                "--log",
                log,
            ],
            "no search strategy `bogus` is loaded (strategies loaded: sketch, xgb,",
        ),
        (
            vec![
                "tune",
                "--templates",
                "--op",
                "matmul",
                "--op-shape",
                "8,8",
                "--log",
                log,
            ],
            "M,N,K",
        ),
        (vec!["tune", "--templates", "--log", log], "--network"),
    ] {
        let out = tessera(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    assert!(
        !dir.path().join("x.jsonl").exists(),
        "a refused run wrote a log"
    );
}

/// A log damaged by hand or by a crash (garbage lines in the middle, a record of a
/// newer version, a torn last line) does not stop tuning: the bad lines are reported and
/// skipped, the good earlier records feed the tuner, new records are appended on lines of
/// their own, and every byte already in the log stays where it was.
#[test]
fn tuning_goes_on_over_a_log_with_garbage_and_a_torn_last_line() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("mm.jsonl");
    assert!(tune_matmul(&log).status.success());
    let good = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = good.lines().collect();
    assert_eq!(lines.len(), 9);
    // Garbage after the fourth line, a future version, and half a record at the end.
    let future = lines[5].replacen(r#""v":1"#, r#""v":99"#, 1);
    assert_ne!(future, lines[5], "the records carry their version");
    let mut damaged = String::new();
    for (i, l) in lines.iter().enumerate() {
        damaged.push_str(l);
        damaged.push('\n');
        if i == 3 {
            damaged.push_str("this is not json\n{\"v\":1}\n\u{0}\u{1}binary\n");
        }
    }
    damaged.push_str(&future);
    damaged.push('\n');
    damaged.push_str(&lines[2][..lines[2].len() / 2]);
    std::fs::write(&log, &damaged).unwrap();

    let out = tune_matmul_to(&log, "16");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // the damaged lines are named (line numbers of the damaged file)
    for n in [5, 6, 7, 13, 14] {
        assert!(
            stderr.contains(&format!("mm.jsonl:{n}: skipped")),
            "line {n}: {stderr}"
        );
    }
    assert!(stderr.contains("newer than this build reads"), "{stderr}");
    // the eight good candidate records were used (the default's record is the
    // baseline, measured once per log)
    assert!(
        stdout.contains("8 earlier measurements of these tasks"),
        "{stdout}"
    );
    let after = std::fs::read_to_string(&log).unwrap();
    assert!(
        after.starts_with(&damaged),
        "bytes already in the log were changed"
    );
    let appended = &after[damaged.len()..];
    assert!(appended.starts_with('\n'), "the torn line is closed first");
    let new: Vec<serde_json::Value> = appended
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).expect("each appended line is a whole record"))
        .collect();
    assert_eq!(new.len(), 8, "{appended}");
    // the records tool reads all 17 good records and reports the 5 bad lines
    let show = tessera(&["records", "show", log.to_str().unwrap()]);
    let show_out = String::from_utf8_lossy(&show.stdout);
    let show_err = String::from_utf8_lossy(&show.stderr);
    assert!(show.status.success(), "{show_err}");
    assert_eq!(show_err.matches("warning").count(), 5, "{show_err}");
    let rows = show_out.lines().filter(|l| l.contains("  cpu  ")).count();
    assert_eq!(rows, 17, "{show_out}");
}

#[test]
fn the_sequential_mode_tunes_task_by_task_with_autotvms_line() {
    // TVM's AutoTVM flow: every template task of the network in order, to --trials
    // each, one `[Task i/n]  Current/Best: … | Progress: (k/m) | t s` line per round,
    // ` Done.` when the task has had its trials
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("seq.json");
    let out = tessera(&[
        "tune",
        "--templates",
        "--network",
        "resnet-18",
        "--image-size",
        "32",
        "--task-scheduler",
        "sequential",
        "--trials",
        "4",
        "--per-round",
        "2",
        "--simulated-runner",
        "--remeasure-top",
        "0",
        "--no-network-check",
        "--compare-rounds",
        "0",
        "--log",
        log.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("[Task")).collect();
    let n: usize = lines[0]
        .split(['/', ']'])
        .nth(1)
        .and_then(|s| s.trim().parse().ok())
        .expect("[Task  i/ n]");
    assert!(n > 1, "{stdout}");
    assert_eq!(lines.len(), 2 * n, "{stdout}");
    for (k, pair) in lines.chunks(2).enumerate() {
        let head = format!("[Task {:>2}/{n:>2}]  Current/Best: ", k + 1);
        assert!(
            pair[0].starts_with(&head) && pair[1].starts_with(&head),
            "{pair:?}"
        );
        assert!(
            pair[0].contains(" GFLOPS | Progress: (2/4) | "),
            "{}",
            pair[0]
        );
        assert!(pair[1].contains("| Progress: (4/4) | ") && pair[1].ends_with(" s Done."));
    }
    assert!(
        stdout.contains(&format!("after {} trials", 4 * n)),
        "{stdout}"
    );
}
