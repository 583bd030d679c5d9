//! `tessera tasks` and `tessera run` as a user runs them: a zoo network and an ONNX
//! model end to end, and bad input giving one error line and a non-zero exit.

use crate::common::{assert_one_line_error, tessera};

use std::path::Path;
use std::process::{Command, Output};

fn stdout_of(out: &Output) -> String {
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn tasks_of_resnet18_nhwc() {
    let out = stdout_of(&tessera(&[
        "tasks",
        "--network",
        "resnet-18",
        "--layout",
        "NHWC",
        "--target",
        "cpu",
    ]));
    assert!(
        out.starts_with("========== Task 0  (workload key: [\""),
        "{out}"
    );
    // 29 tasks of the untuned build (the flatten after the pooling is a view, no task),
    // then the direct form of its 12 Winograd tasks, each labelled as an option of its
    // convolution
    assert_eq!(out.matches("========== Task ").count(), 41);
    assert!(out.contains("conv2d_nhwc(nn, yy, xx, ff) += "));
    assert_eq!(out.matches("  (one option of conv `").count(), 24, "{out}");
    assert!(
        out.contains("# fused_conv2d_bias_add_relu  weight: 2  FLOPs: 231612416  (one option of conv `stage1_unit1_conv1`)"),
        "{out}"
    );
    assert!(
        out.contains("41 tasks from 31 fused groups of network `resnet-18` for target `cpu`\n24 of them are options of 13 convolutions"),
        "{out}"
    );
    // without Winograd, no options
    let direct = stdout_of(&tessera(&[
        "tasks",
        "--network",
        "resnet-18",
        "--no-winograd",
        "--summary",
    ]));
    assert!(!direct.contains("option"), "{direct}");
    assert!(
        direct
            .trim_end()
            .ends_with("29 tasks from 31 fused groups of network `resnet-18` for target `cpu`"),
        "{direct}"
    );
    let summary = stdout_of(&tessera(&["tasks", "--network", "mobilenet", "--summary"]));
    assert!(summary.contains("fused_conv2d_bias_add_relu"), "{summary}");
    let t = stdout_of(&tessera(&[
        "tasks",
        "--network",
        "resnet-18",
        "--templates",
    ]));
    assert!(t.contains("# conv2d_nhwc.x86  weight: 4"), "{t}");
    assert!(t.contains("tile_co: Split(extent=64, parts=2)"), "{t}");
    assert!(
        t.trim_end()
            .ends_with("13 template tasks of network `resnet-18` for target `cpu`"),
        "{t}"
    );
    // squeezenet is defined in NCHW only: it is built so and converted to NHWC
    let sq = stdout_of(&tessera(&["tasks", "--network", "squeezenet_v1.1"]));
    assert!(sq.contains("conv2d_nhwc"), "{sq}");
    assert!(sq.contains("layout_transform"), "{sq}");
}

#[test]
fn run_resnet18_prints_top5_and_the_time_summary() {
    let out = stdout_of(&tessera(&[
        "run",
        "--network",
        "resnet-18",
        "--benchmark",
        "--repeat",
        "2",
    ]));
    assert!(out.contains("output 0: [1, 1000] float32"), "{out}");
    assert!(out.contains("top-5 classes (row 0):"), "{out}");
    assert_eq!(out.matches("probability 0.").count(), 5, "{out}");
    assert!(
        out.contains("mean (ms)  median (ms)  max (ms)  min (ms)  std (ms)"),
        "{out}"
    );
}

#[test]
fn run_an_onnx_model_with_an_input_file() {
    let dir = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/onnx/make_models.py");
    let status = Command::new("python3")
        .arg(&script)
        .arg(dir.path())
        .status();
    assert!(
        matches!(status, Ok(s) if s.success()),
        "{} needs Python with tests/onnx/requirements.txt",
        script.display()
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("manifest.json")).unwrap())
            .unwrap();
    let case = manifest
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "squeezenet1_1")
        .expect("squeezenet1_1 in the manifest");
    let p = |k: &str| dir.path().join(case[k].as_str().unwrap());
    let input = format!(
        "{}={}",
        case["input_name"].as_str().unwrap(),
        p("input").display()
    );
    let output = dir.path().join("out.npy");
    let out = stdout_of(&tessera(&[
        "run",
        "--onnx",
        p("model").to_str().unwrap(),
        "--input",
        &input,
        "--output",
        output.to_str().unwrap(),
        "--layout",
        "NCHW",
    ]));
    assert!(out.contains("top-5 classes"), "{out}");
    // the output file equals onnxruntime's within the tests' tolerance
    let check = Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import numpy as n; a=n.load('{}'); b=n.load('{}'); r=b.max()-b.min(); \
             assert a.shape==b.shape and abs(a-b).max() <= 1e-3*r, abs(a-b).max()",
            output.display(),
            p("expected").display()
        ))
        .status()
        .unwrap();
    assert!(check.success());
}

#[test]
fn bad_input_is_one_line_and_a_non_zero_exit() {
    assert_one_line_error(&tessera(&["run", "--network", "resnet-9"]), "resnet-18");
    assert_one_line_error(
        &tessera(&["tasks", "--network", "mobilenet", "--layout", "NCDHW"]),
        "unknown layout",
    );
    assert_one_line_error(
        &tessera(&["tasks", "--network", "mobilenet", "--batch", "0"]),
        "batch",
    );
    assert_one_line_error(
        &tessera(&["run", "--onnx", "/nonexistent/model.onnx"]),
        "/nonexistent/model.onnx",
    );
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.onnx");
    std::fs::write(&garbage, b"this is not a protobuf \xff\xff\xff\xff").unwrap();
    assert_one_line_error(
        &tessera(&["run", "--onnx", garbage.to_str().unwrap()]),
        "not a valid ONNX model",
    );
    assert_one_line_error(
        &tessera(&["run", "--network", "mobilenet", "--input", "nope=x.npy"]),
        "no such input",
    );
    assert_one_line_error(
        &tessera(&["run", "--network", "mobilenet", "--target", "gpu9"]),
        "gpu9",
    );
}

/// `tessera run --log`: a network built with the history best of a record log. One
/// conv2d NCHW task of SqueezeNet is tuned on its own (`tune --op`), its records applied
/// to the whole network: that group gets the tuned configuration, the other tasks keep
/// their default schedule with one warning each, and the output still equals
/// onnxruntime's.
#[test]
fn run_with_a_record_log_applies_the_tuned_configurations() {
    let dir = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/onnx/make_models.py");
    let status = Command::new("python3")
        .arg(&script)
        .arg(dir.path())
        .status();
    assert!(matches!(status, Ok(s) if s.success()));
    let log = dir.path().join("fire.jsonl");
    // fire2/fire3's expand 3x3: [1, 16, 55, 55] * [64, 16, 3, 3], stride 1, padding 1
    let tuned = tessera(&[
        "tune",
        "--templates",
        "--op",
        "conv2d_nchw",
        "--op-shape",
        "1,55,55,16,64,3,3",
        "--pad",
        "1",
        "--tuner",
        "random",
        "--trials",
        "4",
        "--min-repeat-ms",
        "1",
        "--remeasure-top",
        "0",
        "--log",
        log.to_str().unwrap(),
    ]);
    assert!(tuned.status.success(), "{}", stdout_of(&tuned));
    // keep the template configurations only, so that one of them is the history best
    let text = std::fs::read_to_string(&log).unwrap();
    let configs: String = text
        .lines()
        .filter(|l| !l.contains(r#""kind":"default""#))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(configs.lines().count(), 4);
    std::fs::write(&log, configs).unwrap();

    let model = dir.path().join("squeezenet1_1.onnx");
    let input = dir.path().join("squeezenet1_1.input.npy");
    let expected = dir.path().join("squeezenet1_1.expected.npy");
    let output = dir.path().join("out.npy");
    let out = tessera(&[
        "run",
        "--onnx",
        model.to_str().unwrap(),
        "--layout",
        "NCHW",
        "--input",
        &format!("input={}", input.display()),
        "--output",
        output.to_str().unwrap(),
        "--log",
        log.to_str().unwrap(),
    ]);
    let stdout = stdout_of(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("to 1 distinct fused groups"),
        "{stdout}\n{stderr}"
    );
    assert!(stderr.contains("warning"), "{stderr}");
    assert!(!stderr.contains("did not apply"), "{stderr}");
    let check = Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import numpy as n; a=n.load('{}'); b=n.load('{}'); r=b.max()-b.min(); \
             assert a.shape==b.shape and abs(a-b).max() <= 1e-3*r, abs(a-b).max()",
            output.display(),
            expected.display()
        ))
        .status()
        .unwrap();
    assert!(check.success());
    // a log that cannot be read is one line
    assert_one_line_error(
        &tessera(&[
            "run",
            "--network",
            "mobilenet",
            "--log",
            "/nonexistent/log.jsonl",
        ]),
        "record log",
    );
}

/// `tessera run --log L --profile`: each kernel's time inside the network beside its
/// time alone as the log measured it (the log's baselines and tuned records), and the
/// two sums, whose ratio says how far the tune's estimate is from a run.
#[test]
fn the_profile_puts_each_kernel_beside_its_time_alone() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("r18.jsonl");
    let net = ["--network", "resnet-18", "--image-size", "32"];
    let tuned = tessera(
        &[
            &["tune"][..],
            &net[..],
            &[
                "--trials",
                "8",
                "--per-round",
                "8",
                "--simulated-runner",
                "--no-network-check",
                "--log",
                log.to_str().unwrap(),
            ],
        ]
        .concat(),
    );
    assert!(tuned.status.success(), "{}", stdout_of(&tuned));
    let out = tessera(
        &[
            &["run"][..],
            &net[..],
            &[
                "--log",
                log.to_str().unwrap(),
                "--profile",
                "--repeat",
                "2",
                "--json",
            ],
        ]
        .concat(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("alone (ms)"), "{stderr}");
    assert!(
        stderr.contains("alone as the log measured them"),
        "{stderr}"
    );
    let summary: serde_json::Value = serde_json::from_str(stdout_of(&out).trim()).unwrap();
    let steps = summary["profile"].as_array().unwrap();
    assert_eq!(steps.len() as u64, summary["groups"].as_u64().unwrap());
    // every group's workload has a baseline in the log
    for s in steps {
        assert!(s["alone_ms"].as_f64().is_some_and(|a| a > 0.0), "{s}");
        assert!(s["ms"].as_f64().is_some_and(|t| t >= 0.0), "{s}");
    }
    // without a log, no alone column
    let out = tessera(&[&["run"][..], &net[..], &["--profile", "--repeat", "1"]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !stderr.contains("alone"),
        "{stderr}"
    );
}
