//! VTA through the binary: the template tasks of ResNet-18 for `vta` are its packed
//! convolutions with TVM's configuration spaces (the tutorial's ten for its network,
//! `resnet18_v1`); a short template tune on the simulator writes configurations that
//! `tessera run --log` applies, and the network then computes exactly the bits of its
//! untuned build (TVM's fallback configuration on VTA), with the time summed from VTA's
//! cycle model; the plugin as a `.so` gives the same. That the VTA path computes the
//! quantized CPU path's bits is `tests/tests/vta_network_agrees.rs`.

use crate::common::{ok, tessera, top5_rows};

#[test]
fn the_template_tasks_of_resnet18_are_its_packed_convolutions() {
    let out = ok(tessera(&[
        "tasks",
        "--network",
        "resnet-18",
        "--target",
        "vta",
        "--templates",
    ]));
    let tasks: Vec<&str> = out.lines().filter(|l| l.starts_with("# ")).collect();
    assert_eq!(tasks.len(), 11, "{out}");
    assert!(
        tasks.iter().all(|t| t.starts_with("# conv2d_packed.vta")),
        "{out}"
    );
    let spaces: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("ConfigSpace"))
        .map(|l| l.split_whitespace().nth(1).unwrap_or(""))
        .collect();
    // TVM's sizes for the tutorial's ten (and 2304 for the 1×1 64→64 projection of this
    // zoo's ResNet v2)
    assert_eq!(
        spaces,
        [
            "(len=2304,",
            "(len=2304,",
            "(len=1728,",
            "(len=1728,",
            "(len=2304,",
            "(len=1280,",
            "(len=1280,",
            "(len=1600,",
            "(len=480,",
            "(len=480,",
            "(len=576,"
        ],
        "{out}"
    );
    // the tutorial's network: its ten tasks, TVM's ten space sizes
    let out = ok(tessera(&[
        "tasks",
        "--network",
        "resnet18_v1",
        "--target",
        "vta",
        "--templates",
    ]));
    let mut spaces: Vec<u64> = out
        .lines()
        .filter_map(|l| l.strip_prefix("ConfigSpace (len="))
        .filter_map(|l| l.split(',').next()?.parse().ok())
        .collect();
    spaces.sort_unstable();
    assert_eq!(
        spaces,
        [480, 480, 576, 1280, 1280, 1600, 1728, 1728, 2304, 2304],
        "{out}"
    );
}

#[test]
fn a_tuned_network_runs_on_vta_with_the_board_cpus_bits() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("vta.jsonl");
    let log = log.to_str().unwrap();
    let net = [
        "--network",
        "resnet-18",
        "--target",
        "vta",
        "--image-size",
        "64",
    ];
    let tuned = ok(tessera(
        &[
            &["tune", "--templates"][..],
            &net[..],
            &[
                "--tuner",
                "random",
                "--trials",
                "66",
                "--per-round",
                "2",
                "--remeasure-top",
                "0",
                "--log",
                log,
            ],
        ]
        .concat(),
    ));
    assert!(tuned.contains("Estimated total latency"), "{tuned}");
    // each task's baseline is VTA's fallback configuration (what an untuned build runs
    // on VTA), and tuning beat it on every task: no row of the last table is starred
    let tables: Vec<&str> = tuned.split("|  ID  |").collect();
    let last = tables
        .last()
        .unwrap()
        .split("Estimated total")
        .next()
        .unwrap();
    let rows: Vec<&str> = last.lines().filter(|l| l.starts_with("|  ")).collect();
    assert_eq!(rows.len(), 11, "{last}");
    assert!(rows.iter().all(|r| !r.contains('*')), "{last}");
    let records: Vec<serde_json::Value> = std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let configs = records
        .iter()
        .filter(|r| r["schedule"]["kind"] == "config")
        .count();
    assert!(configs >= 66, "{configs} configurations logged");
    // a configuration whose tiles overflow a buffer is that candidate's error
    assert!(
        records.iter().all(|r| r["result"]["error_no"] == 0
            || r["result"]["error_msg"]
                .as_str()
                .unwrap_or("")
                .contains("configuration tile_b")),
        "{records:?}"
    );
    // without a log the packed convolutions run on VTA with TVM's fallback
    // configuration, one warning per task
    let out = tessera(&[&["run"][..], &net[..], &["--benchmark", "--repeat", "1"]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(stderr.contains("VTA's fallback configuration"), "{stderr}");
    let untuned = ok(out);
    assert!(gemm_counter(&untuned) > 0, "{untuned}");
    let run = ok(tessera(
        &[
            &["run"][..],
            &net[..],
            &["--log", log, "--benchmark", "--repeat", "2"],
        ]
        .concat(),
    ));
    let applied: usize = run
        .lines()
        .find_map(|l| l.strip_prefix("applied the history best of "))
        .and_then(|l| l.split(" to ").nth(1))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(applied >= 8, "{run}");
    assert!(run.contains("VTA's cycle model"), "{run}");
    assert!(run.contains("Execution time summary"), "{run}");
    // the simulator's counters of one inference: the same work, tiled otherwise
    assert!(
        run.contains("Execution statistics (one inference)"),
        "{run}"
    );
    assert_eq!(
        gemm_counter(&run),
        gemm_counter(&untuned),
        "{run}\n{untuned}"
    );
    assert_eq!(top5_rows(&run).len(), 5, "{run}");
    assert_eq!(top5_rows(&run), top5_rows(&untuned), "{run}\n{untuned}");
}

#[test]
fn the_plugin_as_a_shared_object_runs_the_packed_operator() {
    let extra = crate::common::bin()
        .parent()
        .unwrap()
        .join("dynamic")
        .join("extra");
    let out = std::process::Command::new(crate::common::dynamic_bin())
        .args([
            "op",
            "conv2d_packed",
            "--shape",
            "1,8,8,16,32,3,3",
            "--target",
            "vta",
            "--json",
        ])
        .env("TESSERA_PLUGIN_PATH", &extra)
        .output()
        .unwrap();
    let text = ok(out);
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(v["correct"], true, "{text}");
    // the simulator's counters cross the plugin boundary
    let out = std::process::Command::new(crate::common::dynamic_bin())
        .args([
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
        ])
        .env("TESSERA_PLUGIN_PATH", &extra)
        .output()
        .unwrap();
    let run = ok(out);
    assert!(gemm_counter(&run) > 0, "{run}");
}

/// The `gemm_counter` line of `run --benchmark`'s execution statistics (0 without).
fn gemm_counter(text: &str) -> u64 {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("gemm_counter"))
        .and_then(|l| l.trim_start_matches([' ', ':']).parse().ok())
        .unwrap_or(0)
}

/// `-config=FILE` reads a `vta_config.json`; one the plugin cannot take is one line.
#[test]
fn a_vta_config_file_is_read_and_a_bad_one_refused() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("vta_config.json");
    std::fs::write(
        &good,
        r#"{"TARGET": "sim", "HW_VER": "0.0.2", "LOG_INP_WIDTH": 3, "LOG_WGT_WIDTH": 3,
            "LOG_ACC_WIDTH": 5, "LOG_BATCH": 0, "LOG_BLOCK": 4, "LOG_UOP_BUFF_SIZE": 15,
            "LOG_INP_BUFF_SIZE": 15, "LOG_WGT_BUFF_SIZE": 18, "LOG_ACC_BUFF_SIZE": 17}"#,
    )
    .unwrap();
    let target = format!("vta -config={}", good.display());
    let op = [
        "op",
        "conv2d_packed",
        "--shape",
        "1,8,8,16,16,3,3",
        "--json",
    ];
    let out = ok(tessera(&[&op[..], &["--target", &target]].concat()));
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["correct"], true, "{out}");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"LOG_INP_WIDTH": 4}"#).unwrap();
    let target = format!("vta -config={}", bad.display());
    crate::common::assert_one_line_error(
        &tessera(&[&op[..], &["--target", &target]].concat()),
        "VTA configuration",
    );
}
