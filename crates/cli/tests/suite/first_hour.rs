//! A newcomer's first hour (issue 37): each rough edge a user met, as the behaviour
//! or message that replaced it. No test here asserts a measured time. The items:
//!
//! - (1) a target the host cannot execute is refused, naming the missing extensions;
//! - (2) long phases report progress; (3) a comparison inside its noise claims nothing;
//! - (4) one spelling and one default per flag;
//! - (5) logs that match nothing, mixed log kinds, files that are not logs;
//! - (6) ONNX inputs and outputs; (7) each error cause once;
//! - (8) Ctrl-C cleans up and says how to resume, a finished tune measures nothing again;
//! - (9) the OpenCL device (and, in `rpc.rs`, the RPC server) named at `-v`.

use crate::common::{assert_one_line_error, command, ok, one_line_error, tessera, text};
use std::path::Path;

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("not one JSON value ({e}): {stdout}"))
}

fn log_lines(log: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Item 1: An `-mcpu` whose extensions this CPU lacks: `op` and `tune` refuse it before any
/// kernel runs (it died of SIGILL, and `tune` recorded every candidate as fine).
#[test]
fn a_target_the_host_cannot_run_is_refused_naming_what_it_lacks() {
    let host = tessera_backends::host_cpu_features();
    // a CPU with the extensions this one lacks (none on a host that has them all)
    let Some((mcpu, lacking)) = [
        ("skylake-avx512", "avx512f"),
        ("sapphirerapids", "avx512fp16"),
    ]
    .into_iter()
    .find(|(_, f)| !host.contains(f)) else {
        eprintln!("this host has every tracked extension: nothing to refuse");
        return;
    };
    let target = format!("cpu -mcpu={mcpu}");
    let out = tessera(&["op", "matmul", "--shape", "16,16,16", "--target", &target]);
    let err = one_line_error(&out);
    assert!(
        err.contains(lacking) && err.contains("lacks") && err.contains("-mcpu=native"),
        "{err}"
    );
    assert_ne!(out.status.code(), Some(132), "died of SIGILL");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("mm.jsonl");
    let out = tessera(&[
        "tune",
        "--op",
        "matmul",
        "--op-shape",
        "16,16,16",
        "--target",
        &target,
        "--trials",
        "4",
        "--log",
        log.to_str().unwrap(),
    ]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(stderr_of(&out).contains(lacking), "{}", text(&out));
    assert!(!log.exists(), "nothing was measured");
    // the native CPU is fine, and so is a build for another CPU that runs nothing
    ok(tessera(&[
        "op",
        "matmul",
        "--shape",
        "16,16,16",
        "--target",
        "cpu -mcpu=native",
    ]));
    let emit = dir.path().join("emit");
    ok(tessera(&[
        "op",
        "matmul",
        "--shape",
        "16,16,16",
        "--target",
        &target,
        "--emit",
        emit.to_str().unwrap(),
    ]));
}

/// Items 2, 3 and 8: a network tune whose log holds no tuned schedule. Every phase reports
/// its progress, the closing comparison says there is nothing to compare (it printed
/// 17.69 against 9.43 ms for two identical builds), and running the finished tune again
/// measures nothing and appends nothing.
#[test]
fn a_tune_shows_its_phases_claims_no_noise_and_is_not_redone() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("r18.jsonl");
    let args = [
        "tune",
        "--network",
        "resnet-18",
        "--image-size",
        "32",
        "--trials",
        "0",
        "--no-check",
        "--log",
        log.to_str().unwrap(),
    ];
    let out = tessera(&args);
    let stdout = ok(out.clone());
    let stderr = stderr_of(&out);
    assert!(stderr.contains("preparing "), "{stderr}");
    let baselines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("baselines: "))
        .collect();
    let last = baselines.last().unwrap_or_else(|| panic!("{stderr}"));
    let tasks = log_lines(&log).len();
    assert!(
        last.starts_with(&format!("baselines: {tasks}/{tasks} in ")),
        "{tasks} baselines in the log: {stderr}"
    );
    assert!(
        stdout.contains("no group is built with a tuned schedule, nothing to check"),
        "{stdout}"
    );
    assert!(
        stdout.contains("the tuned build is the untuned one: nothing to compare"),
        "{stdout}"
    );
    assert!(!stdout.contains("untuned  "), "no timing table: {stdout}");

    // again: the baselines are in the log, so nothing is measured or appended
    let out = tessera(&args);
    let stderr = stderr_of(&out);
    ok(out);
    assert!(!stderr.contains("baselines: "), "{stderr}");
    assert_eq!(log_lines(&log).len(), tasks);
}

/// Item 8: A tune spent to its budget, run again: nothing is re-measured or appended (it
/// re-measured the best programs and appended their records every time).
#[test]
fn a_finished_operator_tune_run_again_measures_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("mm.jsonl");
    let args = [
        "tune",
        "--op",
        "matmul",
        "--op-shape",
        "16,16,16",
        "--trials",
        "8",
        "--per-round",
        "8",
        "--log",
        log.to_str().unwrap(),
    ];
    ok(tessera(&args));
    let lines = log_lines(&log).len();
    let again = ok(tessera(&args));
    assert!(
        again.contains("already holds 8 trials") && again.contains("nothing was measured"),
        "{again}"
    );
    assert_eq!(log_lines(&log).len(), lines, "nothing appended");
}

/// Item 4: `op` and `tune --op` take the same `--pad` (default 0, or `same`), `--stride`,
/// `--dilation` and so name the same workload; `--op-shape` is documented and its
/// errors name it; `rpc` takes `--rpc-tracker`/`--rpc-token` as every other command
/// (the old spellings warned about).
#[test]
fn op_and_tune_op_share_flags_and_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let shape = "1,8,8,4,8,3,3";
    let key_of_op = |extra: &[&str]| {
        let mut a = vec!["op", "conv2d", "--shape", shape, "--json", "--repeat", "1"];
        a.extend_from_slice(extra);
        json(&ok(tessera(&a)))["workload_key"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let key_of_tune = |extra: &[&str], name: &str| {
        let log = dir.path().join(name);
        let mut a = vec![
            "tune",
            "--op",
            "conv2d",
            "--op-shape",
            shape,
            "--trials",
            "2",
            "--per-round",
            "2",
            "--simulated-runner",
            "--no-network-check",
            "--log",
            log.to_str().unwrap(),
        ];
        a.extend_from_slice(extra);
        ok(tessera(&a));
        log_lines(&log)[0]["workload_key"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (op0, tune0) = (key_of_op(&[]), key_of_tune(&[], "a.jsonl"));
    assert_eq!(op0, tune0, "the same default padding");
    let same = ["--pad", "same", "--stride", "2"];
    assert_eq!(key_of_op(&same), key_of_tune(&same, "b.jsonl"));
    assert_ne!(key_of_op(&same), op0);
    // `op` takes --op-shape too
    let v = json(&ok(tessera(&[
        "op",
        "conv2d",
        "--op-shape",
        shape,
        "--json",
        "--repeat",
        "1",
    ])));
    assert_eq!(v["workload_key"].as_str().unwrap(), op0);
    // --op-shape has help, and a missing one is named as such
    let help = ok(tessera(&["tune", "--help"]));
    let line = help
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("--op-shape"))
        .nth(1)
        .unwrap_or("");
    assert!(line.contains("sizes"), "{help}");
    let log = dir.path().join("c.jsonl");
    let out = tessera(&["tune", "--op", "conv2d", "--log", log.to_str().unwrap()]);
    assert_one_line_error(&out, "--op-shape");
    let out = tessera(&["op", "conv2d", "--shape", shape, "--pad", "half"]);
    assert!(stderr_of(&out).contains("`half`"), "{}", text(&out));
    // rpc: the new spelling, and the old one accepted with a warning
    for (flags, warned) in [
        (["--rpc-tracker", "--rpc-token"], false),
        (["--tracker", "--token"], true),
    ] {
        let out = tessera(&[
            "rpc",
            "queue",
            flags[0],
            "127.0.0.1:1",
            flags[1],
            "t",
            "--timeout",
            "1",
        ]);
        let stderr = stderr_of(&out);
        assert!(stderr.contains("cannot reach the RPC tracker"), "{stderr}");
        assert_eq!(
            stderr.contains("is now spelled `--rpc-tracker`"),
            warned,
            "{stderr}"
        );
        assert_eq!(
            stderr.contains("is now spelled `--rpc-token`"),
            warned,
            "{stderr}"
        );
    }
}

/// Item 5: A log that matches nothing says why; a file that is not a log is an error; a log
/// for another target says so; `op --log` builds a log's best or says why not.
#[test]
fn logs_that_match_nothing_or_are_not_logs_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("mm.jsonl");
    ok(tessera(&[
        "tune",
        "--op",
        "matmul",
        "--op-shape",
        "16,16,16",
        "--trials",
        "4",
        "--per-round",
        "4",
        "--simulated-runner",
        "--log",
        log.to_str().unwrap(),
    ]));
    let net = ["--network", "resnet-18", "--image-size", "32"];
    let out = tessera(&[&["run"][..], &net[..], &["--log", log.to_str().unwrap()]].concat());
    let stderr = stderr_of(&out);
    ok(out);
    assert!(
        stderr.contains("nothing of") && stderr.contains("none of its 1 workloads"),
        "{stderr}"
    );
    assert!(
        stderr.contains("16x16"),
        "the log's shapes are shown: {stderr}"
    );
    // another target
    let other = dir.path().join("other.jsonl");
    let text_log = std::fs::read_to_string(&log).unwrap();
    std::fs::write(
        &other,
        text_log.replace("\"target\":\"cpu\"", "\"target\":\"opencl\""),
    )
    .unwrap();
    let out = tessera(&[&["run"][..], &net[..], &["--log", other.to_str().unwrap()]].concat());
    let stderr = stderr_of(&out);
    ok(out);
    assert!(stderr.contains("tuned for target `opencl`"), "{stderr}");
    // op --log: the log's best for its own workload, as `run --log` takes it (the
    // default schedule's record dropped, so that a step history is the best), a warning
    // for another
    let steps: String = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| !l.contains(r#""kind":"default""#))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&log, steps).unwrap();
    let v = json(&ok(tessera(&[
        "op",
        "matmul",
        "--shape",
        "16,16,16",
        "--log",
        log.to_str().unwrap(),
        "--json",
        "--repeat",
        "1",
    ])));
    assert!(
        v["schedule"]
            .as_str()
            .unwrap()
            .starts_with("history best of"),
        "{v}"
    );
    let out = tessera(&[
        "op",
        "matmul",
        "--shape",
        "8,16,16",
        "--log",
        log.to_str().unwrap(),
        "--repeat",
        "1",
    ]);
    let stderr = stderr_of(&out);
    assert!(ok(out).contains("default schedule"));
    assert!(stderr.contains("nothing of"), "{stderr}");
    // a binary file is not a log: one error, not a warning per line
    let binary = dir.path().join("bin.jsonl");
    let bytes: Vec<u8> = (0..4000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&binary, bytes).unwrap();
    let out = tessera(&[&["run"][..], &net[..], &["--log", binary.to_str().unwrap()]].concat());
    assert_one_line_error(&out, "not a record log");
}

/// Item 5: A log holding step histories and template configurations builds with the plan
/// that more of its tasks fit, and says so (template records appended to an
/// auto-scheduler log switched the whole build to templates, losing its Winograd).
#[test]
fn a_log_of_both_kinds_is_built_per_task_plan() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("both.jsonl");
    let net = ["--network", "resnet-18", "--image-size", "32"];
    let common = [
        "--simulated-runner",
        "--no-check",
        "--no-network-check",
        "--compare-rounds",
        "0",
        "--remeasure-top",
        "0",
        "--log",
        log.to_str().unwrap(),
    ];
    ok(tessera(
        &[
            &["tune"][..],
            &net[..],
            &["--trials", "8", "--per-round", "2"],
            &common[..],
        ]
        .concat(),
    ));
    ok(tessera(
        &[
            &["tune", "--templates", "--tuner", "random"][..],
            &net[..],
            &["--trials", "2", "--per-round", "2"],
            &common[..],
        ]
        .concat(),
    ));
    let out = tessera(&[&["run"][..], &net[..], &["--log", log.to_str().unwrap()]].concat());
    let stderr = stderr_of(&out);
    let stdout = ok(out);
    assert!(
        stderr.contains("step histories for") && stderr.contains("template configurations for"),
        "{stderr}"
    );
    assert!(stderr.contains("auto-scheduler's"), "{stderr}");
    assert!(stdout.contains("applied the history best"), "{stdout}");
}

/// Item 6: ONNX: a shape for an input the model lacks, symbolic dimensions, an input file
/// of the wrong shape (before anything is compiled), a model of two outputs (both
/// shown and saved, no top-5).
#[test]
fn onnx_inputs_are_checked_first_and_every_output_is_saved() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("two.onnx");
    let x = dir.path().join("x.npy");
    let script = format!(
        r#"
import onnx, numpy as np
from onnx import helper, TensorProto
x = helper.make_tensor_value_info('x', TensorProto.FLOAT, ['batch', 3, 4, 4])
y1 = helper.make_tensor_value_info('y1', TensorProto.FLOAT, None)
y2 = helper.make_tensor_value_info('y2', TensorProto.FLOAT, None)
g = helper.make_graph([helper.make_node('Relu', ['x'], ['y1']),
                       helper.make_node('Sigmoid', ['x'], ['y2'])], 'two', [x], [y1, y2])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)]), r'{}')
np.save(r'{}', np.linspace(-1, 1, 96, dtype=np.float32).reshape(2, 3, 4, 4))
"#,
        model.display(),
        x.display()
    );
    let made = std::process::Command::new("python3")
        .args(["-c", &script])
        .status();
    assert!(
        matches!(made, Ok(s) if s.success()),
        "python3 with onnx (tests/onnx/requirements.txt)"
    );
    let m = model.to_str().unwrap();
    let out = tessera(&["run", "--onnx", m, "--shape", "nope=1,3,4,4"]);
    let err = one_line_error(&out);
    assert!(
        err.contains("`nope`") && err.contains("`x` [batch, 3, 4, 4]"),
        "{err}"
    );
    // symbolic: named, with the flag that sets it
    let npz = dir.path().join("out.npz");
    let out = tessera(&["run", "--onnx", m, "--output", npz.to_str().unwrap()]);
    let stderr = stderr_of(&out);
    let stdout = ok(out);
    assert!(
        stderr.contains("symbolic dimension 0 (`batch`)") && stderr.contains("--shape x=1,3,4,4"),
        "{stderr}"
    );
    assert!(stdout.contains("output 0: [1, 3, 4, 4]") && stdout.contains("output 1: [1, 3, 4, 4]"));
    assert!(!stdout.contains("top-5"), "{stdout}");
    // the input file's shape fills the symbolic dimension
    let out = tessera(&[
        "run",
        "--onnx",
        m,
        "--input",
        &format!("x={}", x.display()),
        "--output",
        npz.to_str().unwrap(),
    ]);
    let stdout = ok(out);
    assert!(stdout.contains("output 1: [2, 3, 4, 4]"), "{stdout}");
    let check = std::process::Command::new("python3")
        .args([
            "-c",
            &format!(
                "import numpy as np; d = np.load(r'{}'); x = np.load(r'{}'); \
                 assert sorted(d.files) == ['output_0', 'output_1'], d.files; \
                 assert np.allclose(d['output_0'], np.maximum(x, 0)); \
                 assert np.allclose(d['output_1'], 1 / (1 + np.exp(-x)), atol=1e-6)",
                npz.display(),
                x.display()
            ),
        ])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    // a file of another shape than a static input: refused before compiling
    let out = tessera(&[
        "run",
        "--onnx",
        m,
        "--shape",
        "x=1,3,4,4",
        "--input",
        &format!("x={}", x.display()),
    ]);
    let err = one_line_error(&out);
    assert!(
        err.contains("[2, 3, 4, 4]") && err.contains("[1, 3, 4, 4]"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "nothing was built: {}", text(&out));
    // a .npy holds one output
    let out = tessera(&[
        "run",
        "--onnx",
        m,
        "--output",
        dir.path().join("o.npy").to_str().unwrap(),
    ]);
    assert!(stderr_of(&out).contains("give a .npz"), "{}", text(&out));
}

/// An ONNX input that decides what the build must know (here a reduction's axes) is
/// built for the value of its `--input` file, by `run` and by `compile`, whose module
/// refuses another value; without one, the refusal says how to give it.
#[test]
fn an_onnx_input_that_decides_axes_takes_its_input_file() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("reduce.onnx");
    let (x, axes) = (dir.path().join("x.npy"), dir.path().join("axes.npy"));
    let other = dir.path().join("axes0.npy");
    let script = format!(
        r#"
import onnx, numpy as np
from onnx import helper, TensorProto
x = helper.make_tensor_value_info('x', TensorProto.FLOAT, [2, 3])
a = helper.make_tensor_value_info('axes', TensorProto.INT64, [1])
y = helper.make_tensor_value_info('y', TensorProto.FLOAT, None)
g = helper.make_graph([helper.make_node('ReduceSum', ['x', 'axes'], ['y'], keepdims=0)],
                      'reduce', [x, a], [y])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 18)]), r'{}')
np.save(r'{}', np.arange(6, dtype=np.float32).reshape(2, 3))
np.save(r'{}', np.array([1], dtype=np.int64))
np.save(r'{}', np.array([0], dtype=np.int64))
"#,
        model.display(),
        x.display(),
        axes.display(),
        other.display()
    );
    let made = std::process::Command::new("python3")
        .args(["-c", &script])
        .status();
    assert!(
        matches!(made, Ok(s) if s.success()),
        "python3 with onnx (tests/onnx/requirements.txt)"
    );
    let m = model.to_str().unwrap();
    let err = one_line_error(&tessera(&["run", "--onnx", m]));
    assert!(err.contains("--input axes=FILE"), "{err}");
    let npz = dir.path().join("out.npz");
    let out = tessera(&[
        "run",
        "--onnx",
        m,
        "--input",
        &format!("x={}", x.display()),
        "--input",
        &format!("axes={}", axes.display()),
        "--output",
        npz.to_str().unwrap(),
    ]);
    let stdout = ok(out);
    assert!(stdout.contains("output 0: [2]"), "{stdout}");
    let check = std::process::Command::new("python3")
        .args([
            "-c",
            &format!(
                "import numpy as np; d = np.load(r'{}'); \
                 assert np.array_equal(d['output_0'], [3.0, 12.0]), d['output_0']",
                npz.display()
            ),
        ])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    // a module compiled for the value runs it and refuses another, naming the input
    let tsm = dir.path().join("reduce.tsm");
    let out = tessera(&[
        "compile",
        "--onnx",
        m,
        "--input",
        &format!("axes={}", axes.display()),
        "-o",
        tsm.to_str().unwrap(),
    ]);
    ok(out);
    let run_module = |axes_file: &std::path::Path| {
        tessera(&[
            "run",
            "--module",
            tsm.to_str().unwrap(),
            "--input",
            &format!("x={}", x.display()),
            "--input",
            &format!("axes={}", axes_file.display()),
        ])
    };
    assert!(ok(run_module(&axes)).contains("output 0: [2]"));
    // not given, the input gets the value the module was built for
    let out = tessera(&[
        "run",
        "--module",
        tsm.to_str().unwrap(),
        "--input",
        &format!("x={}", x.display()),
    ]);
    assert!(ok(out).contains("output 0: [2]"));
    let err = one_line_error(&run_module(&other));
    assert!(
        err.contains("`axes`") && err.contains("built for [1]"),
        "{err}"
    );
}

/// Item 7: Each error cause once; a file that is not a module says so without quoting it.
#[test]
fn errors_say_each_cause_once_and_quote_no_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.onnx");
    let out = tessera(&["run", "--onnx", missing.to_str().unwrap()]);
    let err = one_line_error(&out);
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    let model = dir.path().join("model.onnx");
    let mut bytes = vec![0x08, 0x07, 0x12, 0x07];
    bytes.extend(b"pytorch\x1a\x052.1.0:\xb8\x01\n\x00\x01\x02\xff\xfe");
    std::fs::write(&model, &bytes).unwrap();
    let out = tessera(&["run", "--module", model.to_str().unwrap()]);
    let err = one_line_error(&out);
    assert!(
        err.contains("not a tessera module") && err.contains("--onnx"),
        "{err}"
    );
    assert!(!err.contains("pytorch"), "{err}");
}

/// Item 8: Ctrl-C during a tune: the process's measurement folders are removed, it says
/// where the measurements are and the command that resumes, exits with 130, and the
/// log's lines are whole.
#[cfg(unix)]
#[test]
fn an_interrupted_tune_cleans_up_and_says_how_to_resume() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let log = dir.path().join("mm.jsonl");
    let child = command(&[
        "tune",
        "--op",
        "matmul",
        "--op-shape",
        "16,16,16",
        "--trials",
        "100000",
        "--per-round",
        "4",
        "--log",
        log.to_str().unwrap(),
    ])
    .env("TMPDIR", &tmp)
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    // interrupt once it has measured (no timing asserted: only a bound on the wait)
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while std::fs::read_to_string(&log)
        .map(|t| t.lines().count())
        .unwrap_or(0)
        < 5
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no records after 300 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let killed = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    assert!(
        stderr.contains("interrupted: every measurement so far is in")
            && stderr.contains("run the same command again to resume"),
        "{stderr}"
    );
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("tessera-"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let loaded = tessera_search::record::load(&log).unwrap();
    assert!(loaded.records.len() >= 5);
}

/// Item 9: OpenCL names the device it runs on at `-v` and refuses an unknown `-device`.
#[test]
fn opencl_names_its_device_and_refuses_an_unknown_one() {
    let out = tessera(&[
        "op",
        "matmul",
        "--shape",
        "8,8,8",
        "--target",
        "opencl -device=foo",
    ]);
    let err = one_line_error(&out);
    assert!(
        err.contains("unknown -device `foo`") && err.contains("mali"),
        "{err}"
    );
    let out = tessera(&[
        "-v", "op", "matmul", "--shape", "8,8,8", "--target", "opencl", "--repeat", "1",
    ]);
    if !out.status.success() && std::env::var_os("CI").is_none() {
        eprintln!("no OpenCL here: {}", text(&out));
        return;
    }
    let stderr = stderr_of(&out);
    ok(out);
    assert!(
        stderr.contains("opened the OpenCL device") && stderr.contains("platform="),
        "{stderr}"
    );
}
