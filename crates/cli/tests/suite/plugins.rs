//! Plugins from the command line: a backend plugin dropped into a plugins directory
//! compiles and runs a kernel (`tessera op --target testdev`) with the core untouched;
//! broken files and a panicking plugin give one-line errors.

use crate::common::one_line_error;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tessera(args: &[&str], env: &[(&str, &Path)], extra: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tessera"));
    c.args(args)
        .env("TESSERA_MODEL_CACHE", crate::common::cache_dir())
        .env_remove("TESSERA_PLUGIN_PATH");
    for (k, v) in env {
        c.env(k, v);
    }
    for (k, v) in extra {
        c.env(k, v);
    }
    c.output().expect("runs tessera")
}

/// The test plugin's shared object, built with the workspace.
fn testdev_so() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_tessera"));
    let p = bin.parent().unwrap().join("libtessera_testdev_plugin.so");
    assert!(
        p.exists(),
        "{} is missing: run `cargo build --workspace` first (cargo test does not build cdylibs)",
        p.display()
    );
    p
}

#[test]
fn a_dropped_in_backend_plugin_compiles_and_runs_a_kernel() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(testdev_so(), dir.path().join("testdev.so")).unwrap();
    let env = [("TESSERA_PLUGIN_PATH", dir.path())];

    let list = tessera(&["plugins", "list"], &env, &[]);
    assert!(list.status.success());
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(
        text.contains("testdev")
            && text.contains("backends: testdev")
            && text.contains("testdev.so"),
        "{text}"
    );
    assert!(
        text.contains("sketch") && text.contains("built-in"),
        "{text}"
    );

    let out = tessera(
        &[
            "op",
            "matmul",
            "--shape",
            "24,16,8",
            "--target",
            "testdev",
            "--repeat",
            "2",
            "--min-repeat-ms",
            "1",
            "--json",
        ],
        &env,
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["correct"], true, "{v}");
    assert_eq!(v["target"], "testdev");
    assert_eq!(v["checked_against"], "interpreter");

    // Without the plugin the kind is unknown.
    let err = one_line_error(&tessera(
        &["op", "matmul", "--shape", "8,8,8", "--target", "testdev"],
        &[],
        &[],
    ));
    assert!(err.contains("unknown target kind `testdev`"), "{err}");
}

#[test]
fn a_panicking_plugin_is_an_error_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(testdev_so(), dir.path().join("testdev.so")).unwrap();
    let out = tessera(
        &["op", "relu", "--shape", "16", "--target", "testdev"],
        &[("TESSERA_PLUGIN_PATH", dir.path())],
        &[("TESSERA_TESTDEV_PANIC", "1")],
    );
    let err = one_line_error(&out);
    assert!(
        err.contains("plugin `testdev`")
            && err.contains("panicked in build: testdev was asked to panic"),
        "{err}"
    );
}

#[test]
fn plugins_check_explains_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.so");
    std::fs::copy(testdev_so(), &good).unwrap();
    let ok = tessera(&["plugins", "check", good.to_str().unwrap()], &[], &[]);
    assert!(ok.status.success());
    assert!(String::from_utf8_lossy(&ok.stdout).contains("ok: plugin `testdev`"));

    let bytes = std::fs::read(&good).unwrap();
    let truncated = dir.path().join("truncated.so");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let err = one_line_error(&tessera(
        &["plugins", "check", truncated.to_str().unwrap()],
        &[],
        &[],
    ));
    assert!(
        err.contains("truncated.so") && err.contains("truncated or corrupt"),
        "{err}"
    );

    let text = dir.path().join("notes.so");
    std::fs::write(&text, "hello").unwrap();
    let err = one_line_error(&tessera(
        &["plugins", "check", text.to_str().unwrap()],
        &[],
        &[],
    ));
    assert!(err.contains("not a shared library"), "{err}");

    let bad = PathBuf::from(env!("CARGO_BIN_EXE_tessera"))
        .parent()
        .unwrap()
        .join("libtessera_badschema_plugin.so");
    let err = one_line_error(&tessera(
        &["plugins", "check", bad.to_str().unwrap()],
        &[],
        &[],
    ));
    assert!(err.contains("schema version"), "{err}");

    // A refused file in a plugins directory does not stop the others from loading.
    std::fs::copy(&bad, dir.path().join("bad.so")).unwrap();
    let list = tessera(
        &["plugins", "list"],
        &[("TESSERA_PLUGIN_PATH", dir.path())],
        &[],
    );
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(
        text.contains("backends: testdev") && text.contains("refused:") && text.contains("bad.so"),
        "{text}"
    );
}
