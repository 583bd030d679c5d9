//! `tessera tune` without `--templates` (the auto-scheduler) on a small matmul: the
//! task's DAG and TVM's table are printed, every measurement is logged, and a run killed
//! mid-way resumes from its log and ends with exactly the asked-for trials, then the
//! fastest programs are measured again.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn args(log: &std::path::Path, trials: &str) -> Vec<String> {
    [
        "tune",
        "--op",
        "matmul",
        "--op-shape",
        "64,64,64",
        "--trials",
        trials,
        "--per-round",
        "8",
        "--population",
        "16",
        "--min-repeat-ms",
        "1",
        "--log",
        log.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn tessera(args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .env("TESSERA_MODEL_CACHE", crate::common::cache_dir())
        .output()
        .expect("runs tessera")
}

fn step_records(text: &str) -> usize {
    text.matches(r#""kind":"steps""#).count()
}

#[test]
fn a_killed_auto_scheduler_run_resumes_from_its_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("mm.jsonl");
    // a run asked for 64 trials, killed once two rounds are in the log; its temporary
    // folders, which a SIGKILL leaves behind, go to the test's folder
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args(&log, "64"))
        .env("TESSERA_MODEL_CACHE", crate::common::cache_dir())
        .env("TMPDIR", dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if step_records(&text) >= 16 || start.elapsed() > Duration::from_secs(300) {
            break;
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = std::fs::read_to_string(&log).unwrap();
    let done = step_records(&killed);
    assert!((16..64).contains(&done), "{done} step records when killed");
    assert_eq!(done % 8, 0, "whole batches only");
    // every line is a whole record
    for line in killed.lines() {
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }

    let out = tessera(&args(&log, "64"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("========== Task 0  (workload key:"),
        "{stdout}"
    );
    assert!(stdout.contains("C(i, j) += (A[i, k]*B[k, j])"), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "resumed from {}: {done} earlier measurements",
            log.display()
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("|  ID  | Latency (ms) | Speed (GFLOPS) | Trials |"),
        "{stdout}"
    );
    assert!(stdout.contains("Estimated total latency: "), "{stdout}");
    assert!(stdout.contains("Trials: 64\t"), "{stdout}");
    assert!(
        stdout.contains("cost model `xgb-pack-sum` trained on"),
        "{stdout}"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.starts_with(&killed),
        "nothing already recorded is rewritten"
    );
    // the 64 trials, then the 3 fastest programs measured 3 more times each
    assert_eq!(step_records(&text), 64 + 9);
    assert!(
        stdout.contains("re-measured the fastest programs of each task, 3 more runs each"),
        "{stdout}"
    );
    assert!(
        stdout.contains("| ID | Rank | First (ms) | Again (ms) | Median (ms) |"),
        "{stdout}"
    );
    // the default schedule was measured by the first run only
    assert_eq!(text.matches(r#""kind":"default""#).count(), 1);

    // run again: the budget is spent, so nothing is searched or re-measured (the run
    // that spent it re-measured its fastest programs already)
    let out = tessera(&args(&log, "64"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "resumed from {}: 64 earlier measurements",
            log.display()
        )),
        "{stdout}"
    );
    assert!(stdout.contains("nothing was measured"), "{stdout}");
    let again = std::fs::read_to_string(&log).unwrap();
    assert_eq!(step_records(&again), 64 + 9);

    // the records tools read it, and the best is a step history or the default
    let best = tessera(&[
        "records".into(),
        "best".into(),
        log.to_str().unwrap().into(),
    ]);
    assert!(
        best.status.success(),
        "{}",
        String::from_utf8_lossy(&best.stderr)
    );
}

#[test]
fn bad_auto_scheduler_options_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("x.jsonl");
    for (extra, want) in [
        (
            vec!["--model", "svm"],
            "unknown cost model `svm` (xgb or random)",
        ),
        (
            vec!["--task-scheduler", "fastest"],
            "unknown --task-scheduler `fastest`",
        ),
        (
            vec!["--strategy", "annealing"],
            "no search strategy `annealing` is loaded (strategies loaded: sketch, xgb,",
        ),
        (vec!["--resume"], "does not exist"),
        (vec!["--tuner", "ga"], "--templates"),
        (
            vec!["--sketch-share", "1.5"],
            "--sketch-share must be between 0 and 1",
        ),
        (
            vec!["--compare-rounds", "2"],
            "2 rounds cannot tell a speed-up from noise: give 0 (no comparison) or at least 3",
        ),
    ] {
        let mut a = args(&log, "8");
        a.extend(extra.iter().map(|s| s.to_string()));
        let out = tessera(&a);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(stderr.contains(want), "{extra:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
}

#[test]
fn the_same_seed_with_a_deterministic_runner_gives_the_same_log() {
    // two rounds, the second guided by the model trained on the first: every decision
    // (sampling, evolution, the model, the scheduler) must repeat for the logs to match
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, seed: &str| {
        let log = dir.path().join(name);
        let mut a = args(&log, "24");
        a.extend(["--simulated-runner", "--tuner-seed", seed].map(String::from));
        let out = tessera(&a);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::read_to_string(&log).unwrap()
    };
    let first = run("a.jsonl", "7");
    // 24 trials and 3 more runs of the 3 fastest programs
    assert_eq!(step_records(&first), 24 + 9, "{first}");
    assert!(first.contains(r#""timestamp":0"#));
    assert_eq!(first, run("b.jsonl", "7"));
    assert_ne!(
        first,
        run("c.jsonl", "8"),
        "another seed searches elsewhere"
    );
}

#[test]
fn the_model_starts_from_the_earlier_logs_of_its_target() {
    // one model cache shared by these runs (each other test has its own)
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let run = |name: &str, extra: &[&str]| {
        let log = dir.path().join(name);
        let mut a = args(&log, "24");
        a.extend(["--simulated-runner", "--tuner-seed", "7"].map(String::from));
        a.extend(extra.iter().map(|s| s.to_string()));
        let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(&a)
            .env("TESSERA_MODEL_CACHE", &cache)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (
            out.status.code(),
            stdout,
            stderr,
            std::fs::read_to_string(&log).ok(),
        )
    };
    // the first run starts cold and leaves its programs in the cache
    let (code, cold_out, _, cold) = run("a.jsonl", &[]);
    assert_eq!(code, Some(0), "{cold_out}");
    assert!(!cold_out.contains("cost model: starts from"), "{cold_out}");
    assert!(
        cold_out.contains("the cost model's memory: 24 programs of"),
        "{cold_out}"
    );
    // the next one, on another log, starts from it: its first round is ranked
    let (code, out, _, carried) = run("b.jsonl", &[]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("cost model: starts from 24 programs of 1 earlier log(s)"),
        "{out}"
    );
    assert!(out.contains("a.jsonl (24)"), "{out}");
    assert_ne!(cold, carried, "the carried model proposes other programs");
    // a cold start is still the cold run, whatever the cache holds
    let (_, _, _, fresh) = run("c.jsonl", &["--fresh-model"]);
    assert_eq!(fresh, cold);
    // the same logs to learn from and the same seed: the same search
    let a = dir.path().join("a.jsonl");
    let (_, out, _, from_a) = run("d.jsonl", &["--model-from", a.to_str().unwrap()]);
    assert!(
        out.contains("starts from 24 programs of 1 earlier log(s)"),
        "{out}"
    );
    assert_eq!(from_a, carried);
    // a log never indexed is one clear error
    let (code, _, err, _) = run("e.jsonl", &["--model-from", "/nowhere/x.jsonl"]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(
        err.trim(),
        "error: --model-from /nowhere/x.jsonl: no such record log"
    );
    let never = dir.path().join("never.jsonl");
    std::fs::write(&never, "").unwrap();
    let (code, _, err, _) = run("e.jsonl", &["--model-from", never.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{err}");
    let last = err.trim().lines().last().unwrap();
    assert!(
        last.starts_with("error: ") && last.contains("no dataset of"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    // a damaged dataset is a warning, and the others are still read
    let damaged = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let first = std::fs::read_dir(&damaged)
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    std::fs::write(&first, b"TSRMEM01\x05\x00").unwrap();
    let (code, out, err, _) = run("f.jsonl", &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("not a dataset of this build"), "{err}");
    assert!(out.contains("cost model: starts from"), "{out}");
}
