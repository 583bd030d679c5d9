//! The loader refuses what is not a good plugin, with the file and the reason, and
//! loads the rest (the fixtures are built by the workspace: tests/plugins/*).

use std::path::{Path, PathBuf};
use tessera_plugin::{discover, load_file, PluginError};

/// `target/<profile>/` of this build.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

fn fixture(name: &str) -> PathBuf {
    let p = target_dir().join(format!("lib{name}.so"));
    assert!(
        p.exists(),
        "{} is missing: run `cargo build --workspace` first (cargo test does not build cdylibs)",
        p.display()
    );
    p
}

fn copy_to(dir: &Path, src: &Path, name: &str) -> PathBuf {
    let dst = dir.join(name);
    std::fs::copy(src, &dst).unwrap();
    dst
}

#[test]
fn good_plugin_loads_and_reports_what_it_provides() {
    let dir = tempfile::tempdir().unwrap();
    let p = copy_to(dir.path(), &fixture("tessera_testdev_plugin"), "testdev.so");
    let plug = load_file(&p).unwrap();
    assert_eq!(plug.name, "testdev");
    assert_eq!(plug.backends, vec!["testdev".to_string()]);
}

#[test]
fn refusals_name_the_file_and_the_reason_and_the_rest_still_load() {
    let dir = tempfile::tempdir().unwrap();
    copy_to(dir.path(), &fixture("tessera_testdev_plugin"), "a_good.so");
    copy_to(
        dir.path(),
        &fixture("tessera_badschema_plugin"),
        "b_badschema.so",
    );
    let good = std::fs::read(fixture("tessera_testdev_plugin")).unwrap();
    std::fs::write(dir.path().join("c_truncated.so"), &good[..good.len() / 3]).unwrap();
    std::fs::write(dir.path().join("d_text.so"), b"this is not a library\n").unwrap();
    // A plain shared library that is no plugin.
    let src = dir.path().join("plain.c");
    std::fs::write(&src, "int answer(void) { return 42; }\n").unwrap();
    let st = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(dir.path().join("e_plain.so"))
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());

    let reg = discover(&[], &[dir.path().to_path_buf()]);
    assert_eq!(reg.plugins.len(), 1, "{:?}", reg.refused);
    assert_eq!(reg.plugins[0].name, "testdev");
    assert_eq!(reg.refused.len(), 4, "{:?}", reg.refused);
    let msgs: Vec<String> = reg.refused.iter().map(|e| e.to_string()).collect();
    // An old plugin (schema 1001, the root module of plugins before devices behind
    // handles, whose layout differs) is refused by name, version and both schema
    // versions, not as an opaque layout mismatch.
    assert!(
        matches!(&reg.refused[0], PluginError::SchemaMismatch { found: 1001, expected, .. }
            if *expected == tessera_plugin::PLUGIN_SCHEMA_VERSION),
        "{}",
        msgs[0]
    );
    let expected = format!(
        "plugin `badschema` 0.0.1 was built for schema version 1001, this tessera expects {}",
        tessera_plugin::PLUGIN_SCHEMA_VERSION
    );
    assert!(
        msgs[0].contains("b_badschema.so") && msgs[0].contains(&expected),
        "{}",
        msgs[0]
    );
    assert!(
        matches!(&reg.refused[1], PluginError::Corrupt { .. }),
        "{}",
        msgs[1]
    );
    assert!(msgs[1].contains("c_truncated.so"), "{}", msgs[1]);
    assert!(
        matches!(&reg.refused[2], PluginError::NotSharedLibrary { .. }),
        "{}",
        msgs[2]
    );
    assert!(
        matches!(&reg.refused[3], PluginError::NotAPlugin { .. }),
        "{}",
        msgs[3]
    );
    assert!(
        msgs[3].contains("e_plain.so") && msgs[3].contains("not a Tessera plugin"),
        "{}",
        msgs[3]
    );
}

#[test]
fn a_search_strategy_measures_through_the_callback_across_the_boundary() {
    let dir = tempfile::tempdir().unwrap();
    let p = copy_to(dir.path(), &fixture("tessera_testdev_plugin"), "testdev.so");
    let plug = load_file(&p).unwrap();
    assert_eq!(plug.strategies, vec!["first-fit".to_string()]);
    let mut seen = Vec::new();
    let mut measure = |c: &str| -> Result<String, String> {
        seen.push(c.to_string());
        Ok(if c == "[3]" {
            "ok".into()
        } else {
            "slow".into()
        })
    };
    assert_eq!(
        plug.search("first-fit", "{}", 10, &mut measure).unwrap(),
        "3"
    );
    assert_eq!(seen, ["[0]", "[1]", "[2]", "[3]"]);
    // The budget bounds the trials; the callback's errors come back as errors.
    let mut always_slow = |_: &str| -> Result<String, String> { Ok("slow".into()) };
    assert_eq!(
        plug.search("first-fit", "{}", 2, &mut always_slow).unwrap(),
        "none"
    );
    let mut failing = |_: &str| -> Result<String, String> { Err("device lost".into()) };
    let e = plug
        .search("first-fit", "{}", 2, &mut failing)
        .unwrap_err()
        .to_string();
    assert!(e.contains("testdev") && e.contains("device lost"), "{e}");
    assert!(plug.search("annealing", "{}", 2, &mut always_slow).is_err());
}
