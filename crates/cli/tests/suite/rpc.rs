//! `tessera rpc tracker` and `tessera rpc queue` through the binary: the tracker prints
//! where it listens, servers registered with it show in the queue with TVM's `key total
//! free pending` table, and a wrong token, a dead tracker and a missing token are one
//! clear error line each.

use crate::common::{assert_one_line_error as one_line_error, ok, top5};

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;
use tessera_rpc::TrackerClient;

const TOKEN: &str = "t0ken";

/// A tracker process, killed when dropped.
struct Tracker {
    child: Child,
    addr: String,
}

impl Drop for Tracker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `tessera rpc ARGS` and reads the address from its first line, which starts
/// with `prefix`.
fn start(args: &[&str], prefix: &str) -> Tracker {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .env_remove("TESSERA_RPC_TOKEN")
        .stdout(Stdio::piped())
        .spawn()
        .expect("starts tessera rpc");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("`{prefix}` expected, got: {line}"))
        .to_string();
    Tracker { child, addr }
}

fn start_tracker() -> Tracker {
    start(
        &["rpc", "tracker", "--port", "0", "--token", TOKEN],
        "RPC tracker listening on ",
    )
}

fn start_server(tracker: &str, key: &str) -> Tracker {
    start_server_of(tracker, key, "cpu")
}

fn start_server_of(tracker: &str, key: &str, target: &str) -> Tracker {
    let args = [
        "rpc",
        "server",
        "--rpc-tracker",
        tracker,
        "--key",
        key,
        "--target",
        target,
    ];
    start(
        &[&args[..], &["--rpc-token", TOKEN]].concat(),
        &format!("RPC server of key `{key}` listening on "),
    )
}

/// `tessera ARGS` with the token in the environment.
fn tessera(args: &[&str]) -> Output {
    crate::common::command(args)
        .env("TESSERA_RPC_TOKEN", TOKEN)
        .output()
        .unwrap()
}

fn tune(tracker: &str, key: &str, log: &std::path::Path) -> Output {
    tune_cmd(tracker, key, log, "16").output().unwrap()
}

fn tune_cmd(tracker: &str, key: &str, log: &std::path::Path, trials: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tessera"));
    c.env("TESSERA_MODEL_CACHE", crate::common::cache_dir());
    c.args([
        "tune",
        "--op",
        "matmul",
        "--op-shape",
        "32,32,32",
        "--trials",
        trials,
    ])
    .args([
        "--per-round",
        "8",
        "--min-repeat-ms",
        "1",
        "--remeasure-top",
        "0",
        // timeouts are not what these tests are about, and the machine is shared
        "--build-timeout",
        "120",
        "--run-timeout",
        "120",
    ])
    .args(["--rpc-tracker", tracker, "--rpc-key", key])
    .arg("--log")
    .arg(log)
    .env("TESSERA_RPC_TOKEN", TOKEN);
    c
}

fn queue(addr: &str, token: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tessera"));
    c.args(["rpc", "queue", "--rpc-tracker", addr, "--timeout", "2"])
        .env_remove("TESSERA_RPC_TOKEN");
    if let Some(t) = token {
        c.env("TESSERA_RPC_TOKEN", t);
    }
    c.output().unwrap()
}

/// The `key total free pending` rows of `tessera rpc queue` for `keys`, words joined by
/// one space, with the whole output (for failure messages).
fn queue_rows(addr: &str, keys: &[&str]) -> (Vec<String>, String) {
    let text = String::from_utf8_lossy(&queue(addr, Some(TOKEN)).stdout).into_owned();
    (table_rows(&text, keys), text)
}

/// The rows of `text` that start with one of `keys`, words joined by one space.
fn table_rows(text: &str, keys: &[&str]) -> Vec<String> {
    text.lines()
        .filter(|l| keys.iter().any(|k| l.starts_with(&format!("{k} "))))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// Waits until the log has `n` records.
fn wait_for_records(log: &std::path::Path, n: usize) {
    let t0 = std::time::Instant::now();
    while std::fs::read_to_string(log).map_or(0, |s| s.lines().count()) < n {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "no measurement logged"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every record of the log; a line that does not parse is a torn log.
fn records(log: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("a torn line ({e}): {l}")))
        .collect()
}

#[test]
fn the_queue_shows_the_registered_servers_per_key() {
    let t = start_tracker();
    let mut c = TrackerClient::connect(&t.addr, TOKEN, Duration::from_secs(5)).unwrap();
    c.put("mali", "127.0.0.1:9091", "a", true).unwrap();
    c.put("mali", "127.0.0.1:9092", "b", true).unwrap();
    c.put("cpu", "127.0.0.1:9093", "c", true).unwrap();
    let held = c.request("mali", 0, Duration::from_secs(5)).unwrap();
    let out = queue(&t.addr, Some(TOKEN));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(&format!("Tracker address {}", t.addr)),
        "{text}"
    );
    for s in [
        "127.0.0.1:9091\tserver:mali",
        "127.0.0.1:9093\tserver:cpu",
        "(busy)",
    ] {
        assert!(text.contains(s), "{s} not in:\n{text}");
    }
    let rows = table_rows(&text, &["mali", "cpu"]);
    assert_eq!(rows, vec!["cpu 1 1 0", "mali 2 1 0"], "{text}");
    c.release(&held).unwrap();
}

#[test]
fn a_wrong_token_a_dead_tracker_and_no_token_are_one_line_each() {
    let t = start_tracker();
    one_line_error(&queue(&t.addr, Some("nope")), "refused the token");
    one_line_error(&queue(&t.addr, None), "no RPC token");
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap().to_string();
    drop(dead);
    one_line_error(
        &queue(&dead_addr, Some(TOKEN)),
        &format!("cannot reach the RPC tracker at {dead_addr}"),
    );
}

#[test]
fn tuning_measures_on_the_servers_of_the_key() {
    let t = start_tracker();
    let _a = start_server(&t.addr, "cpu");
    let _b = start_server(&t.addr, "cpu");
    let (rows, text) = queue_rows(&t.addr, &["cpu"]);
    assert_eq!(rows, ["cpu 2 2 0"], "{text}");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("mm.jsonl");
    let out = tune(&t.addr, "cpu", &log);
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let records = records(&log);
    assert!(records.len() >= 16, "{} records", records.len());
    let ok = records
        .iter()
        .filter(|r| r["result"]["error_no"] == 0)
        .count();
    assert!(ok >= 16, "{ok} of {} measured without error", records.len());
    // a key nobody serves is refused before anything is measured
    let none = tune(&t.addr, "vta", &dir.path().join("none.jsonl"));
    one_line_error(&none, "has no server of key `vta`");
}

#[test]
fn a_server_killed_mid_run_leaves_the_run_to_the_other_and_the_log_intact() {
    let t = start_tracker();
    let mut a = start_server(&t.addr, "cpu");
    let _b = start_server(&t.addr, "cpu");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("mm.jsonl");
    let run = tune_cmd(&t.addr, "cpu", &log, "64")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // kill -9 one server once measurements are under way
    wait_for_records(&log, 8);
    let killed_at = std::fs::read_to_string(&log).map_or(0, |s| s.lines().count());
    a.child.kill().unwrap();
    let out = run.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let records = records(&log);
    assert!(records.len() >= 64, "{} records", records.len());
    let failed: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| r["result"]["error_no"] != 0)
        .collect();
    // a job lost with the server is retried on the other: at most a few fail, each with
    // the server named
    eprintln!(
        "{} records after the kill at record {killed_at}, {} failed",
        records.len(),
        failed.len()
    );
    assert!(failed.len() <= 4, "{failed:?}");
    for f in failed {
        let msg = f["result"]["error_msg"].as_str().unwrap_or("");
        assert!(msg.contains("RPC server at"), "{msg}");
    }
}

#[test]
fn servers_register_again_with_a_restarted_tracker() {
    let mut t = start_tracker();
    let _s = start_server(&t.addr, "cpu");
    let port = t.addr.rsplit(':').next().unwrap().to_string();
    t.child.kill().unwrap();
    t.child.wait().unwrap();
    let t2 = start(
        &["rpc", "tracker", "--port", &port, "--token", TOKEN],
        "RPC tracker listening on ",
    );
    let t0 = std::time::Instant::now();
    loop {
        let text = String::from_utf8_lossy(&queue(&t2.addr, Some(TOKEN)).stdout).into_owned();
        if text.lines().any(|l| l.starts_with("cpu ")) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the server never came back:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn run_and_op_run_remotely_with_the_local_results() {
    let t = start_tracker();
    let _s = start_server(&t.addr, "cpu");
    let rpc = ["--rpc-tracker", t.addr.as_str(), "--rpc-key", "cpu"];
    let net = [
        "run",
        "--network",
        "resnet-18",
        "--image-size",
        "32",
        "--repeat",
        "2",
    ];
    let local = ok(tessera(&net));
    let remote = ok(tessera(&[&net[..], &rpc[..], &["--benchmark"]].concat()));
    assert_eq!(top5(&remote).len(), 5, "{remote}");
    assert_eq!(top5(&remote), top5(&local), "{remote}");
    assert!(remote.contains("Execution time summary"), "{remote}");
    let out = tessera(
        &[
            &[
                "-v",
                "op",
                "conv2d",
                "--shape",
                "1,8,8,4,8,3,3",
                "--pad",
                "1",
                "--json",
            ][..],
            &rpc[..],
        ]
        .concat(),
    );
    // at -v, the server that ran it is named
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        stderr.contains("the tracker lent a server") && stderr.contains("key=\"cpu\""),
        "{stderr}"
    );
    let op = ok(out);
    let v: serde_json::Value = serde_json::from_str(op.trim()).unwrap();
    assert_eq!(v["correct"], true, "{op}");
    // the session ended and the server is free again
    let (rows, text) = queue_rows(&t.addr, &["cpu"]);
    assert_eq!(rows, ["cpu 1 1 0"], "{text}");
}

/// The seed flow of TVM's Mali tutorial on loopback, at its full size: two servers of key
/// `mali` serving the OpenCL device (PoCL in CI) and one of key `cpu`; ResNet-18 (224×224)
/// is tuned for 64 trials measured on the `mali` servers, then runs remotely with the
/// history best and the CPU's top-5. Skips without OpenCL outside CI.
#[test]
fn the_mali_flow_tunes_and_runs_on_the_servers_of_its_key() {
    let probe = tessera(&[
        "op", "relu", "--shape", "4", "--target", "opencl", "--check", "none",
    ]);
    if !probe.status.success() {
        let err = String::from_utf8_lossy(&probe.stderr);
        assert!(
            std::env::var_os("CI").is_none(),
            "no OpenCL under CI: {err}"
        );
        eprintln!("mali flow: skipped: {err}");
        return;
    }
    let t = start_tracker();
    let mali = "opencl -device=mali";
    let _m1 = start_server_of(&t.addr, "mali", mali);
    let _m2 = start_server_of(&t.addr, "mali", mali);
    let _c = start_server(&t.addr, "cpu");
    let (rows, text) = queue_rows(&t.addr, &["mali", "cpu"]);
    assert_eq!(rows, ["cpu 1 1 0", "mali 2 2 0"], "{text}");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("mali.json");
    let log = log.to_str().unwrap();
    let rpc = ["--rpc-tracker", t.addr.as_str(), "--rpc-key", "mali"];
    let net = ["--network", "resnet-18", "--target", mali];
    let tuned = ok(tessera(
        &[
            &["tune"][..],
            &net[..],
            &rpc[..],
            // each round of the closing comparison would run the network twice on
            // PoCL, about 2 s a run: `run` below is the comparison that matters here
            &["--trials", "64", "--log", log, "--compare-rounds", "0"],
            // one timed run per measurement (PoCL's kernels run for tens of ms)
            &["--number", "1", "--min-repeat-ms", "1"],
        ]
        .concat(),
    ));
    assert!(tuned.contains("Estimated total latency"), "{tuned}");
    assert!(
        tuned.contains("no comparison of the untuned and tuned builds (--compare-rounds 0)"),
        "{tuned}"
    );
    let measured = records(std::path::Path::new(log))
        .iter()
        .filter(|r| r["result"]["error_no"] == 0)
        .count();
    assert!(measured >= 64, "{measured} measured without error");
    let remote = ok(tessera(
        &[
            &["run"][..],
            &net[..],
            &rpc[..],
            &["--log", log, "--benchmark", "--repeat", "3"],
        ]
        .concat(),
    ));
    assert!(remote.contains("applied the history best"), "{remote}");
    assert!(remote.contains("Execution time summary"), "{remote}");
    let cpu = ok(tessera(&["run", "--network", "resnet-18", "--repeat", "1"]));
    assert_eq!(top5(&remote).len(), 5, "{remote}");
    assert_eq!(top5(&remote), top5(&cpu), "{remote}");
}

/// `tune --templates` measures through the same remote measurer: every trial of a random
/// tuner over the `dense` template is measured on the server of the key, and a key that
/// nobody serves stops it before anything is measured.
#[test]
fn template_tuning_measures_on_the_servers_of_the_key() {
    let t = start_tracker();
    let _s = start_server(&t.addr, "cpu");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("dense.jsonl");
    let tune = |key: &str, log: &std::path::Path| {
        tessera(&[
            "tune",
            "--templates",
            "--op",
            "dense",
            "--op-shape",
            "16,64,64",
            "--tuner",
            "random",
            "--trials",
            "8",
            "--remeasure-top",
            "0",
            // on 2 cores shared with the other tests' servers (the Mali flow's PoCL
            // threads among them) a compile can pass the default 15 s and a run the
            // default 10 s, which is not what this test is about (timeouts: the fault
            // tests of crates/cli/tests/device.rs and opencl_faults.rs)
            "--build-timeout",
            "120",
            "--run-timeout",
            "120",
            "--rpc-tracker",
            &t.addr,
            "--rpc-key",
            key,
            "--log",
            log.to_str().unwrap(),
        ])
    };
    ok(tune("cpu", &log));
    let records = records(&log);
    // the 8 trials and the default schedule's measurement
    let trials: Vec<_> = records
        .iter()
        .filter(|r| r["schedule"]["kind"] != "default")
        .collect();
    assert_eq!(trials.len(), 8, "{records:?}");
    assert!(
        trials.iter().all(|r| r["result"]["error_no"] == 0),
        "{trials:?}"
    );
    one_line_error(
        &tune("nobody", &dir.path().join("none.jsonl")),
        "has no server of key `nobody`",
    );
}

#[test]
fn a_server_on_every_address_says_where_clients_reach_it() {
    let t = start_tracker();
    let args = [
        "rpc",
        "server",
        "--rpc-tracker",
        t.addr.as_str(),
        "--key",
        "cpu",
        "--host",
        "0.0.0.0",
    ];
    one_line_error(&tessera(&args), "give --custom-addr");
    let _s = start(
        &[
            &args[..],
            &["--custom-addr", "127.0.0.1", "--rpc-token", TOKEN],
        ]
        .concat(),
        "RPC server of key `cpu` listening on 0.0.0.0:",
    );
    let text = String::from_utf8_lossy(&queue(&t.addr, Some(TOKEN)).stdout).into_owned();
    assert!(
        text.lines()
            .any(|l| l.starts_with("127.0.0.1:") && l.ends_with("server:cpu")),
        "{text}"
    );
}

#[test]
fn a_tracker_restarted_mid_run_lets_the_run_go_on() {
    let mut t = start_tracker();
    let _s = start_server(&t.addr, "cpu");
    let port = t.addr.rsplit(':').next().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("mm.jsonl");
    let run = tune_cmd(&t.addr, "cpu", &log, "48")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_records(&log, 8);
    t.child.kill().unwrap();
    t.child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let _t2 = start(
        &["rpc", "tracker", "--port", &port, "--token", TOKEN],
        "RPC tracker listening on ",
    );
    let out = run.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let records = records(&log);
    let failed = records
        .iter()
        .filter(|r| r["result"]["error_no"] != 0)
        .count();
    eprintln!("{} records, {failed} failed", records.len());
    assert!(records.len() >= 48, "{} records", records.len());
    assert!(failed <= 1, "{failed} candidates failed across the restart");
}

/// VTA behind the tracker: a server of key `vta` serves the simulator; template tuning
/// of the packed conv2d measures on it (VTA's cycle model, configurations that overflow
/// a buffer as their candidates' errors) and the tuned operator runs remotely.
#[test]
fn vta_tunes_and_runs_through_the_tracker() {
    let t = start_tracker();
    let _s = start_server_of(&t.addr, "vta", "vta");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("vta.jsonl");
    let rpc = ["--rpc-tracker", t.addr.as_str(), "--rpc-key", "vta"];
    let op = [
        "--templates",
        "--op",
        "conv2d_packed",
        "--op-shape",
        "1,8,8,32,32,3,3",
        "--pad",
        "same",
        "--target",
        "vta",
    ];
    ok(tessera(
        &[
            &["tune"][..],
            &op[..],
            &rpc[..],
            &[
                "--tuner",
                "gridsearch",
                "--trials",
                "12",
                "--remeasure-top",
                "0",
                "--log",
                log.to_str().unwrap(),
            ],
        ]
        .concat(),
    ));
    let records = records(&log);
    let configs: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| r["schedule"]["kind"] == "config")
        .collect();
    assert_eq!(configs.len(), 12, "{records:?}");
    let measured = configs
        .iter()
        .filter(|r| r["result"]["error_no"] == 0)
        .count();
    assert!(measured > 0, "{configs:?}");
    for r in configs.iter().filter(|r| r["result"]["error_no"] != 0) {
        let msg = r["result"]["error_msg"].as_str().unwrap_or("");
        assert!(msg.contains("configuration tile_b"), "{msg}");
    }
    let remote = ok(tessera(
        &[
            &[
                "op",
                "conv2d_packed",
                "--shape",
                "1,8,8,32,32,3,3",
                "--target",
                "vta",
                "--json",
            ][..],
            &rpc[..],
        ]
        .concat(),
    ));
    let v: serde_json::Value = serde_json::from_str(remote.trim()).unwrap();
    assert_eq!(v["correct"], true, "{remote}");
    // the network on the remote simulator: its counters come back through the session
    let net = [
        "run",
        "--network",
        "resnet-18",
        "--image-size",
        "64",
        "--target",
        "vta",
        "--benchmark",
        "--repeat",
        "1",
    ];
    let run = ok(tessera(&[&net[..], &rpc[..]].concat()));
    assert!(
        run.contains("Execution statistics (one inference)"),
        "{run}"
    );
    let gemms: u64 = run
        .lines()
        .find_map(|l| l.trim().strip_prefix("gemm_counter"))
        .and_then(|l| l.trim_start_matches([' ', ':']).parse().ok())
        .unwrap_or(0);
    assert!(gemms > 0, "{run}");
}
