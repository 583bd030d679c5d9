//! The CUDA backend through the `tessera` binary.
//!
//! - Without a GPU (CI): `tessera op … --target "cuda -arch=sm_XX" --emit DIR` builds
//!   through NVRTC; running says there is no CUDA device, in one line, without a panic;
//!   tuning stops before measuring anything, with the same reason.
//! - The plugin as a `.so` (built by `tests/build.sh` into `target/debug/dynamic/extra/`)
//!   found through `TESSERA_PLUGIN_PATH` by a `tessera` built without it writes the same
//!   modules, byte for byte, as the statically linked one.
//! - With a GPU: operators build, check against the interpreter and time; the seed flow
//!   (tune ResNet-18 briefly, then run it with the log) completes.
//!
//! NVRTC missing outside CI: the build tests skip with the reason printed.

use crate::common::{bin, dynamic_bin, ok, top5};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tessera_at(bin: &Path, args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut c = Command::new(bin);
    c.args(args)
        .env("RUST_BACKTRACE", "1")
        .env("TESSERA_MODEL_CACHE", crate::common::cache_dir())
        .env_remove("TESSERA_PLUGIN_PATH");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("runs tessera")
}

fn tessera(args: &[&str]) -> Output {
    tessera_at(&bin(), args, &[])
}

/// Whether NVRTC is there (a failed `--emit` that says it is missing); prints why not
/// and fails under CI.
fn nvrtc(test: &str, out: &Output) -> bool {
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.success() || !err.contains("NVRTC (libnvrtc.so.N) not found") {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "{test}: {err}");
    eprintln!("{test}: skipped: {err}");
    false
}

/// Whether a CUDA GPU is there; prints why not.
fn gpu(test: &str) -> bool {
    let out = tessera(&[
        "op", "relu", "--shape", "4", "--target", "cuda", "--check", "none",
    ]);
    if !out.status.success() {
        eprintln!(
            "{test}: skipped: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    out.status.success()
}

const OPS: &[(&str, &str)] = &[
    ("matmul", "128,128,128"),
    ("conv2d", "1,14,14,32,64,3,3"),
    ("depthwise_conv2d", "1,14,14,32,3,3"),
    ("softmax", "4,1000"),
    ("max_pool2d", "1,28,28,32,3,3"),
];

#[test]
fn operators_build_for_sm_80_and_sm_90_without_a_gpu() {
    for arch in ["sm_80", "sm_90"] {
        let target = format!("cuda -arch={arch}");
        for (op, shape) in OPS {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path().to_str().unwrap();
            let out = tessera(&[
                "op", op, "--shape", shape, "--pad", "1", "--target", &target, "--emit", d,
                "--json",
            ]);
            if !nvrtc(op, &out) {
                return;
            }
            let line = ok(out);
            let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
            let path = v["artifact"].as_str().unwrap();
            let module: serde_json::Value =
                serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
            assert_eq!(module["format"], "tessera-cuda/1");
            assert_eq!(module["arch"], arch);
            let ptx = module["ptx"].as_str().unwrap();
            assert!(
                ptx.contains(&format!(".target {arch}")),
                "{op} {arch}: {ptx:.300}"
            );
            assert!(ptx.contains(".visible .entry"), "{op} {arch}");
        }
    }
}

/// A detector's selections run as host steps on the GPU target too (its TopK of a
/// computed k included): its module compiles for CUDA without a GPU, every count a size.
#[test]
fn a_detector_module_compiles_for_cuda_without_a_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let module = dir.path().join("post.tsm");
    let model =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/onnx/exports/detector/post.onnx");
    let out = tessera(&[
        "compile",
        "--onnx",
        model.to_str().unwrap(),
        "--target",
        "cuda -arch=sm_90",
        "--out",
        module.to_str().unwrap(),
    ]);
    if !nvrtc("detector", &out) {
        return;
    }
    ok(out);
    let sizes = tessera_graph::CompiledNetwork::read(&module)
        .unwrap()
        .size_ranges()
        .to_vec();
    assert_eq!(sizes.len(), 3, "{sizes:?}");
    assert!(sizes.iter().all(|r| r.produced), "{sizes:?}");
}

#[test]
fn running_without_a_gpu_is_a_one_line_error() {
    if gpu("no gpu") {
        return; // this machine has one
    }
    let out = tessera(&["op", "matmul", "--shape", "16,16,16", "--target", "cuda"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no CUDA driver") || err.contains("no CUDA device"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn tuning_without_a_gpu_stops_at_once_with_the_reason() {
    if gpu("tune without gpu") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("t.json");
    let out = tessera(&[
        "tune",
        "--op",
        "matmul",
        "--op-shape",
        "64,64,64",
        "--target",
        "cuda -arch=sm_80",
        "--trials",
        "8",
        "--log",
        log.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("tuning measures on the device of `cuda -arch=sm_80`"),
        "{err}"
    );
    assert!(
        err.contains("no CUDA driver") || err.contains("no CUDA device"),
        "{err}"
    );
    assert!(!log.exists(), "nothing was measured, so nothing was logged");
}

#[test]
fn the_plugin_as_a_shared_object_builds_the_same_modules() {
    let extra = dynamic_bin().parent().unwrap().join("extra");
    assert!(extra.join("cuda.so").exists(), "run tests/build.sh first");
    let env = [("TESSERA_PLUGIN_PATH", extra.as_path())];
    let listed = ok(tessera_at(&dynamic_bin(), &["plugins", "list"], &env));
    let line = listed
        .lines()
        .find(|l| l.starts_with("cuda"))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(
        line.contains("cuda.so") && line.contains("backends: cuda"),
        "{listed}"
    );
    for (op, shape) in OPS {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let args = |d: &Path| -> Vec<String> {
            [
                "op",
                op,
                "--shape",
                shape,
                "--pad",
                "1",
                "--target",
                "cuda -arch=sm_80",
                "--json",
                "--emit",
            ]
            .iter()
            .map(|s| s.to_string())
            .chain([d.to_str().unwrap().to_string()])
            .collect()
        };
        let run = |bin: &Path, d: &Path, env: &[(&str, &Path)]| {
            let args = args(d);
            let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
            tessera_at(bin, &args, env)
        };
        let s = run(&bin(), a.path(), &[]);
        if !nvrtc(op, &s) {
            return;
        }
        let d = ok(run(&dynamic_bin(), b.path(), &env));
        let path = |line: &str| -> PathBuf {
            let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
            PathBuf::from(v["artifact"].as_str().unwrap())
        };
        let (sp, dp) = (path(&ok(s)), path(&d));
        assert_eq!(
            std::fs::read(&sp).unwrap(),
            std::fs::read(&dp).unwrap(),
            "{op}: {} and {} differ",
            sp.display(),
            dp.display()
        );
    }
}

#[test]
fn operators_check_and_time_on_the_gpu() {
    if !gpu("operators on the gpu") {
        return;
    }
    for (op, shape) in OPS {
        let out = ok(tessera(&[
            "op", op, "--shape", shape, "--pad", "1", "--target", "cuda", "--json",
        ]));
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(v["correct"], true, "{op}: {out}");
    }
    // timed with the L2 written over before each batch
    let (op, shape) = OPS[0];
    let out = ok(tessera(&[
        "op",
        op,
        "--shape",
        shape,
        "--pad",
        "1",
        "--target",
        "cuda",
        "--cache-flush",
        "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert!(v["median_ms"].as_f64().is_some_and(|t| t > 0.0), "{out}");
}

#[test]
fn the_seed_flow_tunes_and_runs_resnet18_on_the_gpu() {
    if !gpu("seed flow") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("r18_cuda.json");
    let log = log.to_str().unwrap();
    let tuned = ok(tessera(&[
        "tune",
        "--network",
        "resnet-18",
        "--layout",
        "NHWC",
        "--target",
        "cuda",
        "--trials",
        "64",
        "--log",
        log,
    ]));
    assert!(tuned.contains("Estimated total latency"), "{tuned}");
    let run = |target: &str| {
        ok(tessera(&[
            "run",
            "--network",
            "resnet-18",
            "--layout",
            "NHWC",
            "--target",
            target,
            "--log",
            log,
            "--benchmark",
        ]))
    };
    let (gpu, cpu) = (run("cuda"), run("cpu"));
    assert_eq!(top5(&gpu).len(), 5, "{gpu}");
    assert_eq!(top5(&gpu), top5(&cpu), "{gpu}\n{cpu}");
    // the run replayed its CUDA graph, and profiles on CUDA events beside the log
    assert!(
        gpu.contains("launches: one recorded launch sequence per run"),
        "{gpu}"
    );
    let profiled = ok(tessera(&[
        "run",
        "--network",
        "resnet-18",
        "--layout",
        "NHWC",
        "--target",
        "cuda",
        "--log",
        log,
        "--profile",
    ]));
    assert!(profiled.contains("alone (ms)"), "{profiled}");
}
