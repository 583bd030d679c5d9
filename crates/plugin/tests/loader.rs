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
fn a_third_party_strategy_is_driven_round_by_round_across_the_boundary() {
    use tessera_policy::{Observation, PolicyError, PolicyOptions, StrategyFactory};
    let dir = tempfile::tempdir().unwrap();
    let p = copy_to(
        dir.path(),
        &fixture("tessera_tilewalk_plugin"),
        "tilewalk.so",
    );
    let reg = tessera_plugin::discover(&[], &[dir.path().to_path_buf()]);
    assert_eq!(reg.strategy_names(), vec!["tilewalk".to_string()], "{p:?}");
    let strategy = reg.strategy("tilewalk").unwrap();
    let dag = {
        use tessera_te::{ops, placeholder};
        let f32 = tessera_ir::DataType::float32();
        let a = placeholder(&[16, 8], f32, "A").unwrap();
        let b = placeholder(&[8, 12], f32, "B").unwrap();
        tessera_te::ComputeDag::new(&[ops::matmul(&a, &b).unwrap()]).unwrap()
    };
    let task = tessera_policy::SearchTask {
        name: "matmul".into(),
        workload_key: dag.workload_key(),
        dag,
        target: "cpu".into(),
        hardware: tessera_target::HardwareParams::detect_host(),
        op: None,
    };
    let opts = PolicyOptions {
        seed: 3,
        ..PolicyOptions::default()
    };
    let mut policy = strategy.create(&task, &opts).unwrap();
    assert_eq!(policy.info().workload_key, task.workload_key);
    assert!(!policy.info().uses_scorer);
    // 12 has 6 divisors, each with and without a parallel outer loop: 12 points
    let first = policy.propose(5, None).unwrap();
    assert_eq!(first.len(), 5);
    let obs: Vec<Observation> = first
        .iter()
        .map(|p| Observation {
            schedule: p.schedule.clone(),
            cost: Some(1e-3),
        })
        .collect();
    assert!(policy.observe(&obs).iter().all(Result::is_ok));
    let rest = policy.propose(100, None).unwrap();
    assert_eq!(rest.len(), 7, "every point once");
    assert!(policy.propose(4, None).unwrap().is_empty(), "exhausted");
    for p in first.iter().chain(&rest) {
        let program = p.program.as_ref().unwrap();
        assert_eq!(program.params.len(), 3);
        assert!(
            first
                .iter()
                .chain(&rest)
                .filter(|q| q.schedule == p.schedule)
                .count()
                == 1
        );
    }
    // the same program again from the candidate, and the reference
    let again = policy.lower(&[first[0].schedule.clone()]);
    assert_eq!(
        again[0].as_ref().unwrap().body.to_string(),
        first[0].program.as_ref().unwrap().body.to_string()
    );
    assert_eq!(policy.reference().unwrap().params.len(), 3);
    // a candidate it does not understand, and a strategy the plugin does not have
    let bad = policy.observe(&[Observation {
        schedule: tessera_policy::ScheduleDesc::Default,
        cost: None,
    }]);
    assert!(
        matches!(&bad[0], Err(PolicyError::BadCandidate(_))),
        "{bad:?}"
    );
    let e = reg.strategy("annealing").unwrap_err().to_string();
    assert!(
        e.contains("no search strategy `annealing`") && e.contains("tilewalk"),
        "{e}"
    );
    // the same seed walks the same way through the boundary
    let mut twin = strategy.create(&task, &opts).unwrap();
    let twin_first = twin.propose(5, None).unwrap();
    assert_eq!(
        twin_first.iter().map(|p| &p.schedule).collect::<Vec<_>>(),
        first.iter().map(|p| &p.schedule).collect::<Vec<_>>()
    );
}

/// The example device answers as every device does (the runtime's device base): an
/// artifact of another kind is refused by name, an unknown handle is an unknown handle;
/// and a target the plugin cannot parse is its typed `CallError`.
#[test]
fn the_example_device_refuses_like_every_device() {
    use tessera_plugin::{CallError, PluginChannel};
    use tessera_runtime::{Device, FunctionId, ModuleId};
    use tessera_target::{Artifact, Target, TargetKind};
    let dir = tempfile::tempdir().unwrap();
    let p = copy_to(dir.path(), &fixture("tessera_testdev_plugin"), "testdev.so");
    let plug = load_file(&p).unwrap();
    let target = Target {
        kind: TargetKind::new("testdev"),
        options: Default::default(),
    };
    let dev = PluginChannel::open(&plug, &target).unwrap();
    let cpu_artifact = Artifact {
        device: TargetKind::CPU,
        path: dir.path().join("k.so"),
        source_path: dir.path().join("k.c"),
        entry: "k".into(),
        params: Vec::new(),
        launch: None,
    };
    let e = dev.load_module(&cpu_artifact).unwrap_err().to_string();
    assert!(
        e.contains("cannot load `k`, which was built for `cpu`"),
        "{e}"
    );
    let e = dev
        .get_function(ModuleId(987_654), "k")
        .unwrap_err()
        .to_string();
    assert!(e.contains("no module with handle 987654"), "{e}");
    let e = dev
        .launch(FunctionId(987_655), &[], None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no function with handle 987655"), "{e}");
    // the codegen entry with a target string the core never sends: a typed refusal
    let bad = Target {
        kind: TargetKind::new("testdev"),
        options: [("x y".to_string(), "1".to_string())].into_iter().collect(),
    };
    match plug.hardware_params(&bad) {
        Err(PluginError::Entry {
            source: CallError::BadTarget { .. },
            ..
        }) => {}
        other => panic!("expected a BadTarget entry error, got {other:?}"),
    }
}
