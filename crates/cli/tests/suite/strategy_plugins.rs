//! Search strategies as plugins, end to end:
//! - the default `tessera` (sketch and autotvm linked in, reached through the registry)
//!   and a `tessera` built without them, given the two `.so` files, write byte-identical
//!   logs for the same command, seed and simulated runner (`tests/build.sh` builds the
//!   second one into `target/debug/dynamic/`);
//! - `tilewalk`, a third-party strategy fixture loaded from a `.so`, tunes a matmul and
//!   a small network through the plugin interface, on the real runner.

use crate::common::{bin, dynamic_bin, ok};

use std::path::Path;
use std::process::{Command, Output};

fn run(bin: &Path, args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut c = Command::new(bin);
    c.args(args)
        .env("TESSERA_MODEL_CACHE", crate::common::cache_dir())
        .env_remove("TESSERA_PLUGIN_PATH");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

#[test]
fn built_in_and_shared_object_strategies_write_the_same_log() {
    let dir = tempfile::tempdir().unwrap();
    let listed = ok(run(&dynamic_bin(), &["plugins", "list"], &[]));
    assert!(
        listed.contains("plugins/sketch.so") && listed.contains("plugins/autotvm.so"),
        "{listed}"
    );
    let cases: [&[&str]; 2] = [
        &[
            "--op",
            "matmul",
            "--op-shape",
            "64,64,64",
            "--population",
            "16",
        ],
        &[
            "--op",
            "conv2d",
            "--op-shape",
            "1,8,8,8,16,3,3",
            "--population",
            "16",
        ],
    ];
    for (k, case) in cases.iter().enumerate() {
        let log_of = |b: &Path, name: &str| {
            let log = dir.path().join(format!("{name}{k}.jsonl"));
            let mut a = vec!["tune", "--trials", "24", "--per-round", "8"];
            a.extend_from_slice(case);
            a.extend(["--simulated-runner", "--tuner-seed", "5"]);
            a.extend(["--log", log.to_str().unwrap()]);
            ok(run(b, &a, &[]));
            std::fs::read_to_string(&log).unwrap()
        };
        let built_in = log_of(&bin(), "static");
        let loaded = log_of(&dynamic_bin(), "dynamic");
        assert_eq!(built_in.lines().count(), 1 + 24 + 9, "{built_in}");
        assert_eq!(built_in, loaded, "case {case:?}");
    }
}

fn tilewalk_dir() -> tempfile::TempDir {
    let so = bin()
        .parent()
        .unwrap()
        .join("libtessera_tilewalk_plugin.so");
    assert!(
        so.exists(),
        "{} is missing: run `bash tests/build.sh` first",
        so.display()
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(&so, dir.path().join("tilewalk.so")).unwrap();
    dir
}

#[test]
fn a_third_party_strategy_tunes_a_matmul_and_a_network_through_the_plugin_interface() {
    let plugins = tilewalk_dir();
    let env = [("TESSERA_PLUGIN_PATH", plugins.path())];
    let common = [
        "--strategy",
        "tilewalk",
        "--min-repeat-ms",
        "1",
        "--remeasure-top",
        "1",
        "--remeasure-runs",
        "1",
    ];
    // a matmul: 12 points (6 divisors of 12, with and without a parallel loop)
    let log = plugins.path().join("mm.jsonl");
    let mut a = vec!["tune", "--op", "matmul", "--op-shape", "16,12,8"];
    a.extend(["--trials", "40", "--per-round", "5", "--log"]);
    a.push(log.to_str().unwrap());
    a.extend(common);
    let out = ok(run(&bin(), &a, &env));
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches(r#""kind":"default""#).count(), 1, "{text}");
    // every point once, then the walk has nothing left: 12 trials, 1 re-measurement
    assert_eq!(text.matches(r#""kind":"steps""#).count(), 12 + 1, "{out}");
    assert!(text.matches(r#""error_no":0"#).count() >= 12, "{text}");
    assert!(out.contains("nothing new to propose"), "{out}");
    assert!(out.contains("Estimated total latency: "), "{out}");

    // a small network: every task gets rounds, the network is built with the log
    let log = plugins.path().join("net.jsonl");
    let mut a = vec!["tune", "--network", "resnet-18", "--image-size", "32"];
    a.extend([
        "--trials",
        "24",
        "--per-round",
        "2",
        "--compare-rounds",
        "0",
        "--log",
    ]);
    a.push(log.to_str().unwrap());
    a.extend(common);
    let out = ok(run(&bin(), &a, &env));
    let tasks = out.matches("========== Task ").count();
    assert!(tasks > 5, "{out}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches(r#""kind":"default""#).count(), tasks, "{text}");
    assert!(text.matches(r#""kind":"steps""#).count() >= 24, "{text}");
    assert!(out.contains("tuned"), "{out}");
    // then the in-network check: one line in the log per tuned group and candidate
    // schedule it timed
    let number_after = |marker: &str| -> usize {
        out.split(marker)
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no in-network check line: {out}"))
    };
    // (none when every default schedule measured faster than the walk's programs)
    let checked = if out.contains("in-network check: no group is built with a tuned schedule") {
        0
    } else {
        let groups = number_after("in-network check: ");
        let checked = number_after(" tuned groups timed inside whole runs (");
        assert!(checked >= groups, "{out}");
        checked
    };
    assert_eq!(
        text.matches(r#""check":"network""#).count(),
        checked,
        "{text}"
    );
}

/// `tessera` built with `--no-default-features` links no strategy: it runs a network
/// with the default schedules (the same top-5 as the default binary) and refuses to
/// tune in one line that says where a strategy plugin goes; given the sketch plugin as a
/// `.so`, it tunes, and builds with the step histories it wrote (their applier is the
/// core's).
#[test]
fn a_build_without_strategies_runs_networks_and_says_why_it_cannot_tune() {
    let bare = crate::common::bare_bin();
    let listed = ok(run(&bare, &["plugins", "list"], &[]));
    assert_eq!(listed.lines().count(), 1, "only the header: {listed}");
    let net = ["run", "--network", "resnet-18", "--image-size", "32"];
    let untuned = ok(run(&bare, &net, &[]));
    let default = ok(run(&bin(), &net, &[]));
    let rows = crate::common::top5_rows(&untuned);
    assert_eq!(rows.len(), 5, "{untuned}");
    assert_eq!(rows, crate::common::top5_rows(&default));

    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("t.jsonl");
    let mut a = vec!["tune", "--network", "resnet-18", "--image-size", "32"];
    a.extend(["--trials", "4", "--log", log.to_str().unwrap()]);
    let out = run(&bare, &a, &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let last = err.lines().last().unwrap_or("");
    assert!(
        last.starts_with("error: no search strategy `sketch` is loaded")
            && last.contains("TESSERA_PLUGIN_PATH"),
        "{err}"
    );

    let sketch = dynamic_bin().parent().unwrap().join("plugins");
    let env = [("TESSERA_PLUGIN_PATH", sketch.as_path())];
    let log = dir.path().join("mm.jsonl");
    let mut a = vec!["tune", "--op", "matmul", "--op-shape", "32,32,32"];
    a.extend(["--trials", "8", "--per-round", "8", "--simulated-runner"]);
    a.extend(["--tuner-seed", "5", "--log", log.to_str().unwrap()]);
    ok(run(&bare, &a, &env));
    let mut a = vec!["op", "matmul", "--shape", "32,32,32", "--log"];
    a.push(log.to_str().unwrap());
    let out = ok(run(&bare, &a, &[]));
    assert!(out.contains("history best of"), "{out}");
}
