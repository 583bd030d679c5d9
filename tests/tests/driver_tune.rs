//! Tessera as a library: a small network (the committed GRU export) tuned, compiled with
//! its log and run through the driver's API alone — `Toolchain::tune` with a typed
//! request, its events received by a subscriber, then `compile_network`, `load` and the
//! given inputs — and its output checked against the reference PyTorch wrote.

use std::path::PathBuf;
use tessera_backends::Target;
use tessera_driver::tune::{
    CheckStep, CompareStep, Progress, TuneEvents, TuneRequest, TuneSubject, NO_COST,
};
use tessera_driver::{GivenInputs, NetworkSource, NetworkSpec, Toolchain};
use tessera_runtime::NDArray;

/// Every event a session sends, kept.
#[derive(Default)]
struct Recorder {
    out: Vec<String>,
    warnings: Vec<String>,
    progress: Vec<Progress>,
    phases: Vec<(String, usize, usize)>,
}

impl TuneEvents for Recorder {
    fn out(&mut self, text: &str) {
        self.out.push(text.to_string());
    }
    fn warn(&mut self, text: &str) {
        self.warnings.push(text.to_string());
    }
    fn progress(&mut self, p: &Progress) {
        self.progress.push(p.clone());
    }
    fn phase(&mut self, name: &str, done: usize, total: usize, _elapsed: f64) {
        self.phases.push((name.to_string(), done, total));
    }
}

fn export(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("onnx/exports/gru")
        .join(file)
}

fn toolchain() -> Toolchain {
    let registry = tessera_plugin::discover(&[tessera_sketch::tessera_plugin_root()], &[]);
    // step histories need no extension: the core applies them
    Toolchain::new(registry, Vec::new())
}

#[test]
fn a_network_tuned_compiled_and_run_through_the_driver_alone() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("gru.json");
    let toolchain = toolchain();
    let spec = NetworkSpec::new(NetworkSource::onnx(export("model.onnx")), Target::cpu());
    let mut req = TuneRequest::new(TuneSubject::Network(spec.clone()), &log);
    req.session.trials = 8;
    req.session.scheduler.per_round = 4;
    req.session.remeasure_top = 1;
    req.session.remeasure_runs = 1;
    req.compare_rounds = 3;
    let mut events = Recorder::default();
    let report = toolchain.tune(&req, &mut events).expect("the session runs");

    // the session's own report: every task listed, some measured, the budget spent
    assert!(!report.tasks.is_empty());
    assert_eq!(report.summary.trials, 8, "{:?}", events.progress);
    assert!(report.tasks.iter().any(|t| t.best < NO_COST));
    assert_eq!(report.network.as_deref(), Some("main_graph"));
    // the events: the device said, TVM's tables, the progress after each round ending
    // done, the baselines phase, and the closing phases
    assert!(events.out.iter().any(|t| t.starts_with("measuring on cpu")));
    assert!(events
        .out
        .iter()
        .any(|t| t.contains("Estimated total latency")));
    let last = events.progress.last().expect("progress events");
    assert!(last.done && last.trials == 8 && last.budget == 8);
    assert!(events.phases.iter().any(|(n, _, _)| n == "baselines"));
    match &report.check {
        CheckStep::Ran(_) => assert!(events
            .phases
            .iter()
            .any(|(n, _, _)| n.starts_with("in-network check"))),
        CheckStep::NotRun | CheckStep::Stands => panic!("a local network is checked"),
    }
    match &report.comparison {
        CompareStep::Compared(c) => {
            assert_eq!(c.per_round.a.len(), 3);
            assert!(events
                .phases
                .iter()
                .any(|(n, _, _)| n.contains("comparing")));
        }
        CompareStep::NothingApplied => {}
        CompareStep::Skipped | CompareStep::Ranges(_) | CompareStep::ComparedAtPoints(_) => {
            panic!("3 rounds of a network of one shape were asked for")
        }
    }
    assert!(std::fs::metadata(&log).unwrap().len() > 0);

    // the same request again: the budget is spent and nothing new is measured; where
    // the first check wrote lines (some group was built tuned: timing decides) that
    // check stands, else the check runs again and again finds nothing to time
    let wrote_checks = matches!(&report.check, CheckStep::Ran(o) if !o.checks.is_empty());
    let mut again = req.clone();
    again.compare_rounds = 0;
    let second = toolchain.tune(&again, &mut Recorder::default()).unwrap();
    assert_eq!(second.summary.new_trials, 0);
    assert_eq!(second.summary.log_checked, wrote_checks);
    match &second.check {
        CheckStep::Stands => assert!(wrote_checks),
        CheckStep::Ran(o) => assert!(!wrote_checks && o.checks.is_empty()),
        CheckStep::NotRun => panic!("a local network is checked"),
    }
    assert!(matches!(second.comparison, CompareStep::Skipped));

    // the log read back, the network compiled with it and run on the reference input
    let loaded = toolchain.read_log(&log).unwrap();
    let given = GivenInputs::read(&[format!("x={}", export("input_0.npy").display())]).unwrap();
    let build = toolchain
        .compile_network(&spec, Some(&loaded), &given)
        .unwrap();
    assert!(build.report.with_log);
    let mut m = toolchain.load(build.network).unwrap();
    given.set_on(&mut m).unwrap();
    m.run().unwrap();
    let want = NDArray::load_npy(export("output_0.npy")).unwrap();
    m.get_output(0)
        .unwrap()
        .allclose(&want, 1e-4, 1e-4)
        .unwrap();
}

#[test]
fn a_request_the_driver_refuses_says_why() {
    let toolchain = toolchain();
    let spec = NetworkSpec::new(NetworkSource::onnx(export("model.onnx")), Target::cpu());
    let dir = tempfile::tempdir().unwrap();
    let mut req = TuneRequest::new(
        TuneSubject::Network(spec.clone()),
        dir.path().join("x.json"),
    );
    req.compare_rounds = 2;
    let e = toolchain
        .tune(&req, &mut Recorder::default())
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("cannot tell a speed-up from noise"),
        "{e}"
    );
    req.compare_rounds = 0;
    req.resume = true;
    let e = toolchain
        .tune(&req, &mut Recorder::default())
        .err()
        .unwrap();
    assert!(e.to_string().contains("does not exist"), "{e}");
    // an input file naming no input of the network costs no compile
    let given = GivenInputs::read(&[format!("nope={}", export("input_0.npy").display())]).unwrap();
    let e = toolchain
        .compile_network(&spec, None, &given)
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("the network has no such input"),
        "{e}"
    );
    assert!(GivenInputs::read(&["no-equals-sign".to_string()]).is_err());
}

/// A toolchain on a tracker's servers is a new value: the one it was made from keeps
/// this machine's devices (a library call with `rpc` does not turn the caller's
/// toolchain remote for the rest of the process).
#[test]
fn a_remote_toolchain_leaves_the_local_one_local() {
    let local = toolchain();
    let remote = tessera_search::measure::RemoteOptions {
        tracker: "127.0.0.1:1".into(),
        key: "nowhere".into(),
        token: "t".into(),
        wait: std::time::Duration::from_millis(100),
    };
    let far = local.with_remote(Some(remote.clone()));
    assert_eq!(far.remote(), Some(&remote));
    assert!(local.remote().is_none());
    assert!(local.device_for(&Target::cpu()).is_ok());
    let err = far
        .device_for(&Target::cpu())
        .err()
        .expect("no tracker there");
    assert!(err.to_string().contains("127.0.0.1:1"), "{err}");
    // and a tune with `rpc` leaves it so too (it fails: no tracker answers)
    let dir = tempfile::tempdir().unwrap();
    let spec = NetworkSpec::new(NetworkSource::onnx(export("model.onnx")), Target::cpu());
    let mut req = TuneRequest::new(TuneSubject::Network(spec), dir.path().join("r.json"));
    req.measure.rpc = Some(remote);
    assert!(local.tune(&req, &mut Recorder::default()).is_err());
    assert!(local.remote().is_none());
}

/// `tessera compile` and `tessera run` as library calls: the GRU export compiled into a
/// module file, then run from it (inputs given, a profile and a time summary asked
/// for) and from the network compiled in the call; both give PyTorch's output, and
/// what happened arrived as events.
#[test]
fn a_module_compiled_and_run_through_the_driver() {
    use tessera_driver::run::{RunRequest, RunSource};
    let dir = tempfile::tempdir().unwrap();
    let toolchain = toolchain();
    let spec = NetworkSpec::new(NetworkSource::onnx(export("model.onnx")), Target::cpu());
    let given = || GivenInputs::read(&[format!("x={}", export("input_0.npy").display())]);
    let module = dir.path().join("gru.tsm");
    let mut events = Recorder::default();
    let bytes = toolchain
        .compile_module(&spec, None, &given().unwrap(), &module, &mut events)
        .unwrap();
    assert!(bytes > 0 && module.exists());
    assert!(
        events.out.iter().any(|l| l.starts_with("built `")),
        "{:?}",
        events.out
    );
    assert!(events.out.iter().any(|l| l.starts_with("wrote ")));

    let want = NDArray::load_npy(export("output_0.npy")).unwrap();
    let from_module = RunSource::Module {
        path: module.clone(),
        target: Some(Target::cpu()),
        log: None,
    };
    let from_network = RunSource::Network {
        spec: Box::new(spec.clone()),
        log: None,
    };
    for source in [from_module, from_network] {
        let module_run = matches!(source, RunSource::Module { .. });
        let req = RunRequest {
            inputs: given().unwrap(),
            profile: Some(2),
            benchmark: Some(tessera_runtime::TimeEvaluator::new(1, 2, 0.0)),
            ..RunRequest::new(source)
        };
        let mut events = Recorder::default();
        let outcome = toolchain.run(&req, &mut events).unwrap();
        outcome.outputs[0].allclose(&want, 1e-4, 1e-4).unwrap();
        assert_eq!(outcome.module.is_some(), module_run);
        assert!(outcome
            .profile
            .as_ref()
            .is_some_and(|p| !p.steps.is_empty()));
        assert_eq!(
            outcome.benchmark.as_ref().map(|b| b.result.results.len()),
            Some(2)
        );
        let said = events.out.join("\n");
        assert!(said.contains("loaded onto the device of `cpu"), "{said}");
        assert_eq!(
            said.contains("loaded `main_graph` for `cpu` from "),
            module_run,
            "{said}"
        );
        let json = outcome.to_json();
        assert_eq!(
            json["outputs"].as_array().map(Vec::len),
            Some(outcome.outputs.len())
        );
    }
    // a module is refused for another target, before anything runs
    let req = RunRequest::new(RunSource::Module {
        path: module,
        target: Some(Target::parse_any("vta").unwrap()),
        log: None,
    });
    let err = toolchain.run(&req, &mut Recorder::default()).err().unwrap();
    assert!(
        err.to_string().contains("compile it again for `vta`"),
        "{err}"
    );
}
