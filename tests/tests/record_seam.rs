//! One seam from a record to a schedule: a record tuned for one operator (`tessera tune
//! --op`) gives the same program to `tessera op --log` (`Toolchain::operator_program`)
//! and to a network that computes that operator (`tessera run --log`: the build's
//! record appliers), for both kinds of record — step histories (the auto-scheduler's)
//! and template configurations (AutoTVM's) — and the network built with it computes
//! the right answer.

use tessera_backends::Target;
use tessera_driver::tune::{TuneEvents, TuneRequest, TuneSubject};
use tessera_driver::{OperatorSchedule, Toolchain};
use tessera_graph::{fuse, group_compute, op_spec_of, BuildContext, Graph, Op, TensorType};
use tessera_ir::{DataType, PrimFunc};
use tessera_runtime::NDArray;
use tessera_search::apply::Subject;
use tessera_search::record::ApplyHistoryBest;

/// Events dropped: the test reads the log.
struct Quiet;
impl TuneEvents for Quiet {
    fn out(&mut self, _: &str) {}
    fn warn(&mut self, _: &str) {}
}

fn toolchain() -> Toolchain {
    let registry = tessera_plugin::discover(
        &[
            tessera_sketch::tessera_plugin_root(),
            tessera_autotvm::tessera_plugin_root(),
        ],
        &[],
    );
    Toolchain::new(
        registry,
        vec![Box::new(tessera_autotvm::network::TemplatesExtension)],
    )
}

/// A network of one matmul of its two inputs (its output).
fn network() -> Graph {
    let mut g = Graph::default();
    let f32 = DataType::float32();
    let a = g.input("a", TensorType::new(&[16, 24], f32));
    let b = g.input("b", TensorType::new(&[24, 32], f32));
    let mm = g.op("mm", Op::MatMul, &[a, b]).unwrap();
    g.mark_output(mm);
    g
}

/// `f` printed with its parameters renamed `p0`, `p1`, … in calling order, so that the
/// same loop nest over differently named tensors prints the same.
fn canonical(f: &PrimFunc) -> String {
    let names: Vec<String> = f.params.iter().map(|p| p.name().to_string()).collect();
    let text = f.to_string();
    let mut out = String::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        match names.iter().position(|n| n == word) {
            Some(i) => out.push_str(&format!("p{i}")),
            None => out.push_str(word),
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// Tunes the network's matmul as one operator (simulated measurements, so that the
/// records are the same on every machine), then builds it both ways.
fn one_record_two_routes(templates: bool) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("mm.jsonl");
    let toolchain = toolchain();
    let target = Target::cpu();
    let g = network();
    let spec =
        op_spec_of(&g, g.outputs()[0]).expect("a matmul of two inputs is a catalog operator");
    let subject = TuneSubject::Operator {
        op: spec.clone(),
        target: target.clone(),
    };
    let mut req = TuneRequest::new(subject, &log);
    req.templates = templates;
    req.strategy = if templates { "random" } else { "sketch" }.into();
    req.session.trials = 12;
    req.session.scheduler.per_round = 6;
    req.session.remeasure_top = 0;
    req.measure.simulated = true;
    req.policy.seed = 3;
    toolchain.tune(&req, &mut Quiet).expect("the session runs");
    // the default schedule's records dropped, so that a tuned record is the best
    let tuned: String = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| !l.contains(r#""kind":"default""#))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&log, tuned).unwrap();
    let loaded = toolchain.read_log(&log).unwrap();

    // `tessera op --log`
    let op = toolchain
        .operator_program(&spec, &target, OperatorSchedule::HistoryBest(&loaded, &log))
        .unwrap();
    assert!(
        op.fallback.is_none() && op.schedule.starts_with("history best"),
        "{} {:?}",
        op.schedule,
        op.fallback
    );

    // `tessera run --log`: the group that computes the matmul, through the appliers a
    // network build takes
    let best = ApplyHistoryBest::from_log(&loaded);
    let appliers = toolchain.appliers(&best, &target, templates).unwrap();
    let groups = fuse(&g);
    assert_eq!(groups.len(), 1);
    let gc = group_compute(&g, &groups[0]).unwrap();
    assert_eq!(
        gc.dag().unwrap().workload_key(),
        spec.dag().unwrap().workload_key()
    );
    let ctx = BuildContext {
        target: target.clone(),
        hardware: tessera_backends::HardwareParams::detect_host(),
    };
    let group = Subject::Group {
        graph: &g,
        group: &gc,
        ctx: &ctx,
    };
    let scheduled = appliers
        .schedule(&group)
        .expect("the record applies to the group");
    assert!(scheduled.record.is_some());
    let func = tessera_te::lower(&scheduled.schedule, &scheduled.args, &spec.name).unwrap();
    assert_eq!(canonical(&func), canonical(&op.func));
    assert!(appliers.warnings().is_empty(), "{:?}", appliers.warnings());

    // and the whole build: one group from the record, the right answer
    let (compiled, applied, warnings) = toolchain
        .compile_with_best(&g, &target, &best, templates)
        .unwrap();
    assert_eq!(applied, 1, "{warnings:?}");
    let mut m = toolchain.load(compiled).unwrap();
    let x = NDArray::random_uniform(DataType::float32(), &[16, 24], 1, -1.0, 1.0).unwrap();
    let w = NDArray::random_uniform(DataType::float32(), &[24, 32], 2, -1.0, 1.0).unwrap();
    m.set_input("a", &x).unwrap();
    m.set_input("b", &w).unwrap();
    m.run().unwrap();
    let (xs, ws) = (x.as_slice::<f32>().unwrap(), w.as_slice::<f32>().unwrap());
    let want: Vec<f32> = (0..16 * 32)
        .map(|ij| {
            (0..24)
                .map(|k| xs[ij / 32 * 24 + k] * ws[k * 32 + ij % 32])
                .sum()
        })
        .collect();
    let want = NDArray::from_slice_f32(&[16, 32], &want).unwrap();
    m.get_output(0)
        .unwrap()
        .allclose(&want, 1e-4, 1e-4)
        .unwrap();
}

#[test]
fn a_step_history_gives_the_operator_and_the_network_the_same_program() {
    one_record_two_routes(false);
}

#[test]
fn a_template_configuration_gives_the_operator_and_the_network_the_same_program() {
    one_record_two_routes(true);
}
