//! The OpenCL backend through the `tessera` binary, on whatever OpenCL device the
//! machine has (PoCL, the CPU's, in CI): operators build, check against the
//! interpreter and time; ResNet-18 runs with the CPU's top-5; ONNX ResNet-18 and
//! MobileNet-V2 match onnxruntime; the Mali seed flow (tune, then run with the log)
//! completes; a device is chosen by platform and index and named. Without an OpenCL platform each test skips with the reason printed,
//! except under CI, where that fails (CI installs PoCL).

use crate::common::{ok, one_line_error, tessera, top5};

use std::path::Path;
use std::process::Command;

/// Whether an OpenCL device is there; prints why not (and fails under CI).
fn opencl(test: &str) -> bool {
    let out = tessera(&[
        "op", "relu", "--shape", "4", "--target", "opencl", "--check", "none",
    ]);
    if out.status.success() {
        return true;
    }
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        std::env::var_os("CI").is_none(),
        "{test}: no OpenCL device under CI: {err}"
    );
    eprintln!("{test}: skipped: {err}");
    false
}

#[test]
fn operators_build_check_and_time_on_opencl() {
    if !opencl("operators") {
        return;
    }
    let cases: &[(&str, &str, &[&str])] = &[
        ("matmul", "64,48,32", &[]),
        ("dense", "4,64,48", &[]),
        ("batch_matmul", "2,16,24,8", &[]),
        ("conv2d", "1,10,10,8,16,3,3", &["--pad", "1"]),
        (
            "depthwise_conv2d",
            "1,9,9,8,3,3",
            &["--pad", "1", "--stride", "2"],
        ),
        ("conv2d_winograd", "1,8,8,4,8,3,3", &["--pad", "1"]),
        ("softmax", "4,100", &[]),
        (
            "max_pool2d",
            "1,9,9,3,3,3",
            &["--stride", "2", "--pad", "1"],
        ),
        (
            "avg_pool2d",
            "2,8,8,3,2,2",
            &["--stride", "2", "--ceil-mode"],
        ),
        ("global_avg_pool2d", "1,7,7,8", &[]),
        ("layer_norm", "4,64", &[]),
    ];
    for (name, shape, extra) in cases {
        let mut args = vec![
            "op",
            name,
            "--shape",
            shape,
            "--target",
            "opencl",
            "--check",
            "interp",
            "--repeat",
            "1",
            "--min-repeat-ms",
            "1",
            "--json",
        ];
        args.extend_from_slice(extra);
        let v: serde_json::Value = serde_json::from_str(&ok(tessera(&args))).unwrap();
        assert_eq!(v["correct"], true, "{name}: {v}");
        assert_eq!(v["target"], "opencl", "{name}: {v}");
        assert!(v["median_ms"].as_f64().unwrap() > 0.0, "{name}: {v}");
    }
}

#[test]
fn resnet18_on_opencl_has_the_cpus_top5() {
    if !opencl("resnet-18") {
        return;
    }
    let net = [
        "--network",
        "resnet-18",
        "--layout",
        "NHWC",
        "--image-size",
        "32",
    ];
    let run = |target: &str| {
        let mut a = vec!["run"];
        a.extend_from_slice(&net);
        a.extend_from_slice(&["--target", target, "--repeat", "1"]);
        top5(&ok(tessera(&a)))
    };
    let cpu = run("cpu");
    assert_eq!(cpu.len(), 5);
    assert_eq!(run("opencl"), cpu);
}

#[test]
fn onnx_resnet18_and_mobilenet_v2_on_opencl_match_onnxruntime() {
    if !opencl("onnx") {
        return;
    }
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
    for name in ["resnet18", "mobilenet_v2"] {
        let case = manifest
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("{name} in the manifest"));
        let p = |k: &str| dir.path().join(case[k].as_str().unwrap());
        let input = format!(
            "{}={}",
            case["input_name"].as_str().unwrap(),
            p("input").display()
        );
        let output = dir.path().join(format!("{name}.npy"));
        ok(tessera(&[
            "run",
            "--onnx",
            p("model").to_str().unwrap(),
            "--input",
            &input,
            "--output",
            output.to_str().unwrap(),
            "--target",
            "opencl",
            "--repeat",
            "1",
        ]));
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
        assert!(check.success(), "{name}: differs from onnxruntime");
    }
}

#[test]
fn the_mali_seed_flow_tunes_then_runs_with_the_log() {
    if !opencl("mali seed flow") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("mali.json");
    let log = log.to_str().unwrap();
    let net = [
        "--network",
        "resnet-18",
        "--layout",
        "NHWC",
        "--image-size",
        "32",
    ];
    let mut tune = vec!["tune"];
    tune.extend_from_slice(&net);
    tune.extend_from_slice(&[
        "--target",
        "opencl -device=mali",
        "--trials",
        "8",
        "--per-round",
        "4",
        // the check times the tuned groups inside OpenCL runs; the closing comparison
        // would only time the same two builds again
        "--compare-rounds",
        "0",
        "--log",
        log,
    ]);
    let out = ok(tessera(&tune));
    assert!(
        out.contains("|  ID  | Latency (ms) | Speed (GFLOPS) | Trials |"),
        "{out}"
    );
    assert!(out.contains("Estimated total latency"), "{out}");
    // every line of the log names the Mali target; some candidate was measured
    let text = std::fs::read_to_string(log).unwrap();
    assert!(text
        .lines()
        .all(|l| l.contains("\"target\":\"opencl -device=mali\"")));
    assert!(
        text.contains("\"kind\":\"steps\""),
        "no tuned record:\n{text}"
    );
    let mut run = vec!["run"];
    run.extend_from_slice(&net);
    run.extend_from_slice(&[
        "--target",
        "opencl -device=mali",
        "--log",
        log,
        "--benchmark",
        "--repeat",
        "2",
    ]);
    let mali = ok(tessera(&run));
    assert!(mali.contains("Execution time summary"), "{mali}");
    assert!(mali.contains("applied the history best"), "{mali}");
    let mut cpu = vec!["run"];
    cpu.extend_from_slice(&net);
    cpu.extend_from_slice(&["--repeat", "1"]);
    let cpu = top5(&ok(tessera(&cpu)));
    assert_eq!(cpu.len(), 5);
    assert_eq!(top5(&mali), cpu);
}

/// `opencl -platform=NAME -device-index=N` chooses the device (PoCL here, by a part of
/// its platform's name or vendor); `op`, `run` and `tune` name the device they use; a
/// choice that names nothing is one line listing the platforms there are.
#[test]
fn the_device_is_chosen_by_platform_and_index_and_named() {
    if !opencl("device choice") {
        return;
    }
    let op = |target: &str| {
        tessera(&[
            "op", "relu", "--shape", "4", "--target", target, "--check", "none", "--json",
        ])
    };
    let out = ok(op("opencl -platform=portable -device-index=0"));
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let device = v["device"].as_str().unwrap();
    assert!(
        device.starts_with("opencl:") && device.contains("(Portable Computing Language)"),
        "{device}"
    );
    let e = one_line_error(&op("opencl -platform=NoSuchVendor"));
    assert!(
        e.contains("no OpenCL platform matches -platform=NoSuchVendor")
            && e.contains("Portable Computing Language"),
        "{e}"
    );
    let e = one_line_error(&op("opencl -device-index=99"));
    assert!(e.contains("-device-index=99 but there are"), "{e}");
    let e = one_line_error(&op("opencl -device-index=x"));
    assert!(e.contains("-device-index=x"), "{e}");
    let run = ok(tessera(&[
        "run",
        "--network",
        "resnet-18",
        "--image-size",
        "32",
        "--target",
        "opencl -platform=pocl",
    ]));
    assert!(run.contains("device: opencl:"), "{run}");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("relu.json");
    let tuned = ok(tessera(&[
        "tune",
        "--op",
        "matmul",
        "--op-shape",
        "16,16,16",
        "--target",
        "opencl -platform=pocl",
        "--trials",
        "2",
        "--per-round",
        "2",
        "--log",
        log.to_str().unwrap(),
    ]));
    assert!(tuned.contains("measuring on opencl:"), "{tuned}");
}
