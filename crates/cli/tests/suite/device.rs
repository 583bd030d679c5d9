//! Every flow on a plugin's device, through the `testdev` fixture (a device that owns
//! its memory and counts its copies and launches): a network runs with the CPU's
//! results and copies only its input in and its output out (the weights once per
//! build); tuning measures on the device and survives kernels that hang, crash or
//! compute wrong; a tuned log is applied; and one `tessera` binary alone is a complete
//! tuner (it runs its own measurement jobs).

use crate::common::{bin, ok, top5_rows as top5};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A plugins directory holding the test device.
fn plugin_dir() -> tempfile::TempDir {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_tessera"));
    let so = bin.parent().unwrap().join("libtessera_testdev_plugin.so");
    assert!(
        so.exists(),
        "{} is missing: run `cargo build --workspace` first (cargo test does not build cdylibs)",
        so.display()
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(&so, dir.path().join("testdev.so")).unwrap();
    dir
}

fn tessera(bin: &Path, args: &[&str], env: &[(&str, &Path)], extra: &[(&str, &str)]) -> Output {
    let mut c = Command::new(bin);
    c.args(args)
        .env("TESSERA_MODEL_CACHE", crate::common::cache_dir())
        .env_remove("TESSERA_PLUGIN_PATH")
        .env_remove("TESSERA_RUNNER")
        .env_remove("TESSERA_TESTDEV_FAULTS")
        .env_remove("TESSERA_TESTDEV_COUNTERS");
    for (k, v) in env {
        c.env(k, v);
    }
    for (k, v) in extra {
        c.env(k, v);
    }
    // A binary this test process just copied can be "busy" for a moment: a child that
    // another test thread forked meanwhile holds the copy's write descriptor until it
    // execs (ETXTBSY). Wait for that to pass.
    for _ in 0..100 {
        match c.output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            r => return r.expect("runs tessera"),
        }
    }
    panic!("{} stayed busy (ETXTBSY) for 2 s", bin.display())
}

/// The device's counters after a run.
fn counters(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn resnet18_on_the_test_device_matches_the_cpu_and_copies_only_input_and_output() {
    let plugins = plugin_dir();
    let net = ["run", "--network", "resnet-18"];
    // (the CPU build's Winograd convolutions round differently from the test device's
    // direct ones: the top-5 probabilities are compared to six digits)
    let cpu = ok(tessera(
        &bin(),
        &[&net[..], &["--target", "cpu", "--no-winograd"]].concat(),
        &[],
        &[],
    ));

    let counts = plugins.path().join("counters.json");
    let env = [
        ("TESSERA_PLUGIN_PATH", plugins.path()),
        ("TESSERA_TESTDEV_COUNTERS", counts.as_path()),
    ];
    let dev = ok(tessera(
        &bin(),
        &[&net[..], &["--target", "testdev"]].concat(),
        &env,
        &[],
    ));
    assert_eq!(top5(&dev).len(), 5, "{dev}");
    assert_eq!(top5(&dev), top5(&cpu), "testdev:\n{dev}\ncpu:\n{cpu}");
    // (the flatten after the pooling is a view of its input: no step)
    assert!(dev.contains("31 fused groups"), "{dev}");
    // a plugin device without launch sequences of its own runs kernel by kernel
    assert!(
        dev.contains("launches: kernel by kernel (the device keeps no launch sequences)"),
        "{dev}"
    );
    let once = counters(&counts);

    // The same network run 1 + 3 more times (the time evaluator's warm-up and three
    // repeats): more launches, not one more copy.
    let args = [
        &net[..],
        &["--target", "testdev", "--benchmark", "--repeat", "3"],
    ]
    .concat();
    ok(tessera(&bin(), &args, &env, &[]));
    let many = counters(&counts);

    // The weights, uploaded once at build, plus one 1x3x224x224 float32 input; one
    // 1000-class output copied out.
    let input_bytes = 3 * 224 * 224 * 4;
    let weight_bytes: u64 = dev
        .split("weights: ")
        .nth(1)
        .and_then(|s| s.split(" MiB (").nth(1))
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no weight size in:\n{dev}"));
    assert!(weight_bytes > 40 << 20, "{weight_bytes}");
    for c in [&once, &many] {
        assert_eq!(c["bytes_in"], weight_bytes + input_bytes, "{c}");
        assert_eq!(c["copies_out"], 1, "{c}");
        assert_eq!(c["bytes_out"], 1000 * 4, "{c}");
        assert_eq!(c["copies_on_device"], 0, "{c}");
        assert_eq!(c["modules"], 29, "{c}");
        // everything the network allocated on the device was freed when it was dropped
        assert_eq!(c["frees"], c["allocs"], "{c}");
    }
    assert_eq!(many["copies_in"], once["copies_in"], "{many} vs {once}");
    assert_eq!(once["launches"], 31, "{once}");
    assert_eq!(many["launches"], 31 * 5, "{many}");
}

/// The error code of every record of `log` (its in-network check lines aside).
fn error_codes(log: &Path) -> Vec<i64> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter(|l| !l.contains(r#""check":"network""#))
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["result"]["error_no"].as_i64().unwrap()
        })
        .collect()
}

#[test]
fn tuning_on_the_test_device_survives_hanging_crashing_and_wrong_kernels() {
    let plugins = plugin_dir();
    let log = plugins.path().join("mm.jsonl");
    let args = [
        "tune",
        "--op",
        "matmul",
        "--op-shape",
        "64,64,64",
        "--target",
        "testdev",
        "--trials",
        "16",
        "--per-round",
        "8",
        "--population",
        "16",
        "--min-repeat-ms",
        "1",
        // long enough that no good kernel's runner (a process start, a build's load and
        // a few launches) reaches it on a fully loaded machine; the hanging kernel
        // sleeps forever, so it still does
        "--run-timeout",
        "10",
        "--remeasure-top",
        "0",
        "--log",
        log.to_str().unwrap(),
    ];
    let env = [("TESSERA_PLUGIN_PATH", plugins.path())];
    // The 2nd, 3rd and 4th kernels built hang, abort the process and compute wrong.
    let out = ok(tessera(
        &bin(),
        &args,
        &env,
        &[("TESSERA_TESTDEV_FAULTS", "1")],
    ));
    assert!(
        out.contains("tuning ended (Budget) after 16 trials"),
        "{out}"
    );
    let codes = error_codes(&log);
    // the default schedule's baseline, then the 16 trials
    assert_eq!(codes.len(), 17, "{codes:?}");
    // RUN_TIMEOUT, RUNTIME_DEVICE, WRONG_ANSWER: each exactly once
    for code in [7, 4, 5] {
        assert_eq!(
            codes.iter().filter(|&&c| c == code).count(),
            1,
            "{code}: {codes:?}"
        );
    }
    assert_eq!(codes.iter().filter(|&&c| c == 0).count(), 14, "{codes:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("the kernel did not finish within 10 s"),
        "{text}"
    );
    assert!(text.contains("SIGABRT"), "{text}");
    assert!(text.contains(r#""target":"testdev""#), "{text}");
}

#[test]
fn template_tuning_measures_on_the_test_device() {
    let plugins = plugin_dir();
    let log = plugins.path().join("tpl.jsonl");
    let args = [
        "tune",
        "--templates",
        "--op",
        "matmul",
        "--op-shape",
        "64,64,64",
        "--target",
        "testdev",
        "--tuner",
        "random",
        "--trials",
        "8",
        "--remeasure-top",
        "0",
        "--log",
        log.to_str().unwrap(),
    ];
    let counts = plugins.path().join("counters.json");
    let env = [
        ("TESSERA_PLUGIN_PATH", plugins.path()),
        ("TESSERA_TESTDEV_COUNTERS", counts.as_path()),
    ];
    let out = ok(tessera(&bin(), &args, &env, &[]));
    assert!(out.contains("after 8 trials"), "{out}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches(r#""target":"testdev""#).count(), 9, "{text}");
    assert!(error_codes(&log).iter().all(|&c| c == 0), "{text}");
    // the kernels ran on the device (in the runner processes, which share the file)
    assert!(counters(&counts)["launches"].as_u64().unwrap() > 0);
}

#[test]
fn a_network_tuned_on_the_test_device_is_built_with_its_log() {
    let plugins = plugin_dir();
    let log = plugins.path().join("net.jsonl");
    let net = [
        "--network",
        "resnet-18",
        "--image-size",
        "32",
        "--target",
        "testdev",
    ];
    let tune = [
        &["tune"][..],
        &net,
        &[
            "--trials",
            "30",
            "--per-round",
            "1",
            "--population",
            "8",
            "--min-repeat-ms",
            "1",
            "--remeasure-top",
            "0",
            // the check times kernels in whole runs: what it decides is the machine's
            "--no-network-check",
            "--compare-rounds",
            "0",
            "--log",
            log.to_str().unwrap(),
        ],
    ]
    .concat();
    let env = [("TESSERA_PLUGIN_PATH", plugins.path())];
    let out = ok(tessera(&bin(), &tune, &env, &[]));
    assert!(out.contains("30 trials"), "{out}");
    // one baseline per task (its default schedule) and the 30 trials, all measured on
    // the device
    let text = std::fs::read_to_string(&log).unwrap();
    let tasks = out.matches("========== Task ").count();
    assert_eq!(text.matches(r#""kind":"default""#).count(), tasks, "{out}");
    // records only: no in-network check ran
    assert!(!text.contains(r#""check":"network""#), "{text}");
    assert_eq!(text.matches(r#""kind":"steps""#).count(), 30, "{text}");
    let codes = error_codes(&log);
    assert!(codes.iter().all(|&c| c == 0), "{codes:?}");

    // Keep the step histories only, so that each task tuned has one as its history
    // best: whether a tuned program measured faster than its default schedule (the
    // baseline records) is a matter of timings, which a loaded machine decides.
    let steps: String = text
        .lines()
        .filter(|l| !l.contains(r#""kind":"default""#))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(steps.lines().count(), 30, "{steps}");
    std::fs::write(&log, steps).unwrap();

    let run = [&["run"][..], &net, &["--log", log.to_str().unwrap()]].concat();
    let out = ok(tessera(&bin(), &run, &env, &[]));
    let applied: usize = out
        .split("applied the history best of ")
        .nth(1)
        .and_then(|s| s.split(" to ").nth(1))
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(applied > 0, "{out}");
    assert_eq!(top5(&out).len(), 5, "{out}");
}

#[test]
fn one_tessera_binary_alone_is_a_complete_tuner() {
    // The binary copied into an empty folder: no runner binary beside it, no plugins.
    let dir = tempfile::tempdir().unwrap();
    let lone = dir.path().join("tessera");
    std::fs::copy(bin(), &lone).unwrap();
    let log = dir.path().join("mm.jsonl");
    let args = [
        "tune",
        "--op",
        "matmul",
        "--op-shape",
        "64,64,64",
        "--trials",
        "8",
        "--per-round",
        "8",
        "--min-repeat-ms",
        "1",
        "--remeasure-top",
        "0",
        "--log",
        log.to_str().unwrap(),
    ];
    let out = ok(tessera(&lone, &args, &[], &[]));
    assert!(out.contains("after 8 trials"), "{out}");
    let codes = error_codes(&log);
    assert_eq!(codes.len(), 9, "{codes:?}");
    assert!(codes.iter().all(|&c| c == 0), "{codes:?}");
}
