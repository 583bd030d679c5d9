//! The `tessera` command as a user runs it: small operators end to end, and bad input
//! giving a one-line error with a non-zero exit (no panic, no backtrace).

use crate::common::assert_one_line_error;

use std::process::{Command, Output};

fn tessera(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tessera"));
    c.args(args)
        .env("RUST_BACKTRACE", "1")
        .env("TESSERA_MODEL_CACHE", crate::common::cache_dir());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("runs tessera")
}

fn json_of(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

const FAST: &[&str] = &["--repeat", "2", "--min-repeat-ms", "1", "--json"];

#[test]
fn every_operator_builds_checks_and_times() {
    let cases: &[&[&str]] = &[
        &["op", "matmul", "--shape", "48,40,24"],
        &["op", "matmul", "--shape", "13,7,5", "--schedule", "naive"],
        &["op", "dense", "--shape", "8,32,48"],
        &["op", "conv2d", "--shape", "1,10,10,8,16,3,3", "--pad", "1"],
        &[
            "op",
            "conv2d",
            "--shape",
            "2,9,9,3,5,3,3",
            "--stride",
            "2",
            "--dilation",
            "2",
        ],
        &["op", "softmax", "--shape", "4,33"],
        &["op", "relu", "--shape", "3,5,16"],
    ];
    for case in cases {
        let mut args = case.to_vec();
        args.extend_from_slice(FAST);
        let v = json_of(&tessera(&args, &[]));
        assert_eq!(v["correct"], true, "{case:?}: {v}");
        assert_eq!(v["checked_against"], "interpreter", "{case:?}");
        assert!(
            v["median_ms"].as_f64().unwrap() > 0.0 && v["gflops"].as_f64().unwrap() > 0.0,
            "{v}"
        );
        assert_eq!(v["repeat"], 2);
    }
}

#[test]
fn show_prints_dag_ir_and_source() {
    let out = tessera(
        &[
            "op",
            "matmul",
            "--shape",
            "16,16,16",
            "--show",
            "dag,ir,source",
            "--repeat",
            "1",
            "--min-repeat-ms",
            "1",
        ],
        &[],
    );
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "C(i, j) += (A[i, k]*B[k, j])",
        "func matmul(",
        "int32_t tessera_matmul(void** args",
        "correct: yes (checked against the interpreter)",
        "mean (ms)",
    ] {
        assert!(text.contains(needle), "missing `{needle}` in:\n{text}");
    }
}

#[test]
fn naive_kernel_check_can_be_chosen() {
    let mut args = vec!["op", "matmul", "--shape", "32,32,32", "--check", "naive"];
    args.extend_from_slice(FAST);
    let v = json_of(&tessera(&args, &[]));
    assert_eq!(
        (v["correct"].clone(), v["checked_against"].clone()),
        (serde_json::json!(true), serde_json::json!("naive kernel"))
    );
}

#[test]
fn bad_input_is_one_line_and_a_non_zero_exit() {
    let bad_target = tessera(
        &["op", "matmul", "--shape", "8,8,8", "--target", "tpu"],
        &[],
    );
    assert_one_line_error(
        &bad_target,
        "unknown target kind `tpu` (known kinds: cpu, cuda, opencl, vta",
    );
    let bad_option = tessera(
        &[
            "op",
            "matmul",
            "--shape",
            "8,8,8",
            "--target",
            "cpu -arch=sm_90",
        ],
        &[],
    );
    assert_one_line_error(&bad_option, "unknown option `arch`");
    // the tessera built without its plugins (tests/build.sh) has no `vta` backend
    let no_plugin = std::process::Command::new(crate::common::dynamic_bin())
        .args(["op", "matmul", "--shape", "8,8,8", "--target", "vta"])
        .env_remove("TESSERA_PLUGIN_PATH")
        .output()
        .unwrap();
    assert_one_line_error(
        &no_plugin,
        "no backend plugin for target kind `vta` is loaded",
    );
    let wrong_count = tessera(&["op", "matmul", "--shape", "8,8"], &[]);
    assert_one_line_error(&wrong_count, "--shape M,N,K (3 numbers), got 2");
    let not_positive = tessera(&["op", "matmul", "--shape", "8,0,8"], &[]);
    assert_one_line_error(&not_positive, "every size must be positive");
    let too_big_kernel = tessera(&["op", "conv2d", "--shape", "1,4,4,3,8,7,7"], &[]);
    assert_one_line_error(&too_big_kernel, "larger than the padded input");
    let bad_show = tessera(&["op", "relu", "--shape", "4", "--show", "asm"], &[]);
    assert_one_line_error(&bad_show, "unknown item `asm`");
}

#[test]
fn a_broken_compiler_is_one_line_and_a_non_zero_exit() {
    let missing = tessera(
        &["op", "relu", "--shape", "8"],
        &[("CC", "/nonexistent/tessera-cc")],
    );
    assert_one_line_error(&missing, "no C compiler found");
    let failing = tessera(&["op", "relu", "--shape", "8"], &[("CC", "false")]);
    assert_one_line_error(&failing, "C compiler `false` failed");
}
