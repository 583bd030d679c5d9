//! What makes the tuner pleasant to drive: progress lines when stderr is not a terminal
//! (a bar when it is), `--json` summaries on `tune`, `run` and `records` (stdout the
//! JSON alone), `records plot` drawing a log's tuning curve, and `-v` logs.

use crate::common::{ok, tessera, text};

fn json(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("not one JSON value ({e}): {stdout}"))
}

#[test]
fn tune_json_progress_plot_and_records_json() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("mm.jsonl");
    let log_s = log.to_str().unwrap();
    let out = tessera(&[
        "tune",
        "--op",
        "matmul",
        "--op-shape",
        "32,32,32",
        "--trials",
        "16",
        "--per-round",
        "8",
        "--log",
        log_s,
        "--json",
    ]);
    let stdout = ok(out.clone());
    let v = json(&stdout);
    assert_eq!(v["trials"], 16, "{v}");
    assert_eq!(v["tasks"][0]["task"], "matmul");
    assert!(v["tasks"][0]["best_ms"].as_f64().unwrap() > 0.0);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // the tables moved to stderr, with a progress line per round
    assert!(stderr.contains("|  ID  |"), "{stderr}");
    let progress: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("progress: "))
        .collect();
    assert_eq!(progress.len(), 2, "{stderr}");
    assert!(
        progress[1].starts_with("progress: 16/16 trials (100%)"),
        "{stderr}"
    );

    let show = json(&ok(tessera(&["records", "show", log_s, "--json"])));
    assert!(show.as_array().unwrap().len() >= 16, "{show}");
    assert_eq!(show[0]["line"], 1);
    let best = json(&ok(tessera(&["records", "best", log_s, "--json"])));
    assert_eq!(best.as_array().unwrap().len(), 1, "{best}");
    assert_eq!(best[0]["task"], "matmul");

    let svg = dir.path().join("mm.svg");
    let said = ok(tessera(&[
        "records",
        "plot",
        log_s,
        "--out",
        svg.to_str().unwrap(),
    ]));
    assert!(
        said.contains("1 of 1 tasks with a successful record"),
        "{said}"
    );
    let picture = std::fs::read_to_string(&svg).unwrap();
    assert!(
        picture.starts_with("<svg") && picture.contains("best time per task"),
        "{picture:.200}"
    );
    assert!(picture.contains("<polyline"), "no curve drawn");
}

#[test]
fn a_network_plot_has_its_estimated_latency_and_run_json() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("r18.jsonl");
    let net = ["--network", "resnet-18", "--image-size", "32"];
    let mut tune = vec![
        "tune",
        "--trials",
        "12",
        "--per-round",
        "4",
        "--log",
        log.to_str().unwrap(),
    ];
    tune.extend(net);
    // generous timeouts: the plot's estimate needs every task's baseline, and on a
    // machine loaded by the rest of the suite a kernel's compile can pass the default 15 s
    tune.extend([
        "--no-network-check",
        "--remeasure-top",
        "0",
        "--compare-rounds",
        "0",
        "--build-timeout",
        "120",
        "--run-timeout",
        "60",
    ]);
    let out = tessera(&tune);
    assert!(out.status.success(), "{}", text(&out));

    let svg = dir.path().join("r18.svg");
    let mut plot = vec![
        "records",
        "plot",
        log.to_str().unwrap(),
        "--out",
        svg.to_str().unwrap(),
    ];
    plot.extend(net);
    let said = ok(tessera(&plot));
    assert!(said.contains("estimated network latency"), "{said}");
    let picture = std::fs::read_to_string(&svg).unwrap();
    assert!(picture.contains("estimated network latency") && picture.contains("GFLOPS"));

    let mut run = vec!["-v", "run", "--json", "--benchmark", "--repeat", "2"];
    run.extend(net);
    let out = tessera(&run);
    let v = json(&ok(out.clone()));
    assert_eq!(v["top5"].as_array().unwrap().len(), 5, "{v}");
    assert!(v["benchmark"]["median_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(v["output"]["shape"], serde_json::json!([1, 1000]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("INFO") && stderr.contains("compiled the network's kernels"),
        "{stderr}"
    );
    assert!(
        !stderr.contains('\u{1b}'),
        "colour codes in a log that is not a terminal"
    );
}
