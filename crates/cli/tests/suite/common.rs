//! What the CLI's integration tests share: running the binary, reading a success's
//! output, checking that a failure is one clear line, and the top-5 rows a network run
//! prints. Each test module takes what it needs (`use crate::common::…`).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// The `tessera` binary under test.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tessera"))
}

/// The `tessera` built without its strategies and plugins (by `tests/build.sh`).
pub fn dynamic_bin() -> PathBuf {
    let p = bin().parent().unwrap().join("dynamic").join("tessera");
    assert!(
        p.exists(),
        "{} is missing: run `bash tests/build.sh` first (it builds tessera without its \
         built-in strategies, and their .so files)",
        p.display()
    );
    p
}

/// The `tessera` built with `--no-default-features` (by `tests/build.sh`): no strategy,
/// no VTA, no GPU backend.
pub fn bare_bin() -> PathBuf {
    let p = bin().parent().unwrap().join("bare").join("tessera");
    assert!(
        p.exists(),
        "{} is missing: run `bash tests/build.sh` first (it builds tessera with \
         `--no-default-features`)",
        p.display()
    );
    p
}

/// `tessera ARGS`, with backtraces on so that a panic would show in a failure's text.
pub fn tessera(args: &[&str]) -> Output {
    command(args).output().expect("runs tessera")
}

/// The command `tessera ARGS`, to add environment or pipes to.
pub fn command(args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.args(args)
        .env("RUST_BACKTRACE", "1")
        .env("TESSERA_MODEL_CACHE", cache_dir());
    c
}

/// A model cache of its own for one run (under cargo's temporary folder), so that no
/// test's tune learns from another's log: tests that share a cache say so.
pub fn cache_dir() -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("model-cache")
        .join(format!("{}-{n}", std::process::id()))
}

/// Both streams of a run, for a failure message.
pub fn text(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The standard output of a run that must succeed.
pub fn ok(out: Output) -> String {
    assert!(out.status.success(), "tessera failed:\n{}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The error line of a run that must fail with exit code 1 and one line, `error: …`,
/// on standard error (never a Rust panic's `thread '…' panicked at`).
pub fn one_line_error(out: &Output) -> String {
    assert!(!out.status.success(), "expected a failure:\n{}", text(out));
    assert_eq!(out.status.code(), Some(1), "{}", text(out));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(err.lines().count(), 1, "one line expected:\n{err}");
    assert!(err.starts_with("error: "), "{err}");
    assert!(
        !err.contains("panicked at") && !err.contains("backtrace"),
        "{err}"
    );
    err
}

/// [`one_line_error`], which must name `needle`.
pub fn assert_one_line_error(out: &Output, needle: &str) {
    let err = one_line_error(out);
    assert!(err.contains(needle), "`{needle}` not in: {err}");
}

/// The top-5 rows of a network run (`#1  class  735 …`), as rank and class.
pub fn top5(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|l| l.trim_start().starts_with('#'))
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .collect()
}

/// The top-5 rows whole, probabilities too: for two runs of the same kernels.
pub fn top5_rows(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|l| l.trim_start().starts_with('#'))
        .map(str::to_string)
        .collect()
}
