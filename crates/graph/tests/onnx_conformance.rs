//! The ONNX package's own one-operator conformance cases (`onnx/backend/test/case/node`,
//! written out by tests/onnx/write_node_cases.py: a model, its inputs and its reference
//! outputs, for every operator at the opsets and attribute forms its authors chose),
//! imported, built for the CPU and run.
//!
//! Each case ends in one of: it passes; it gives a wrong answer (a wrong value, shape or
//! element type: the test fails on any); the importer refuses it (the reason is
//! counted); or the build or the run fails after import (counted, and listed). The test
//! asserts that no case is wrong, that nothing panics, and that at least [`FLOOR`]
//! pass, and it prints the tally by reason, so that one run shows where the importer
//! stands: `cargo test -p tessera-graph --test onnx_conformance -- --nocapture`.
//!
//! Set `TESSERA_CONFORMANCE_FILTER=substring` to run only the matching cases, and
//! `TESSERA_CONFORMANCE_REPORT=file.json` to write every case's outcome.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use tessera_backends::{CpuBackend, Target};
use tessera_graph::dynamic::{compile_dynamic, counted_builds, selection_ranges};
use tessera_graph::onnx::{import, load_tensor, ImportOptions};
use tessera_graph::{build, passes, Graph};
use tessera_runtime::NDArray;

/// The fewest cases that must pass (raise it as operators are added; never lower it).
const FLOOR: usize = 1447;

/// Cases whose reference output differs from onnxruntime's, where Tessera computes what
/// onnxruntime does (the models users bring are checked against onnxruntime), with why.
/// Each must give the reference's "wrong" answer: one that passes is taken off the list.
const FOLLOWS_ONNXRUNTIME: &[(&str, &str)] = &[
    (
        "test_resize_downsample_scales_linear_align_corners",
        ALIGN_CORNERS_WITH_SCALES,
    ),
    (
        "test_resize_downsample_scales_cubic_align_corners",
        ALIGN_CORNERS_WITH_SCALES,
    ),
];

const ALIGN_CORNERS_WITH_SCALES: &str =
    "align_corners with scales: the reference divides by the unrounded resized length less \
     one (2.4 − 1 for 4 × 0.6), onnxruntime and PyTorch by the output's (2 − 1); \
     onnx/onnx#2462 keeps the reference's as intended";

/// The node cases of the installed onnx package, written out by
/// tests/onnx/write_node_cases.py (the wheel ships them as code) into the target folder.
fn node_cases() -> PathBuf {
    common::python_fixtures("write_node_cases.py", "onnx-node-cases")
}

/// How one case ended.
#[derive(Debug)]
enum Outcome {
    Pass,
    Wrong(String),
    Refused(String),
    Failed(String),
}

/// The inputs (`input_k.pb`) and expected outputs (`output_k.pb`) of a test data set.
fn data_set(dir: &Path, prefix: &str) -> Result<Vec<NDArray>, String> {
    let mut out = Vec::new();
    for k in 0.. {
        let p = dir.join(format!("{prefix}_{k}.pb"));
        if !p.exists() {
            break;
        }
        out.push(load_tensor(&p).map_err(|e| format!("{prefix} {k}: {e}"))?);
    }
    Ok(out)
}

/// The names of the model's real inputs (not initializers), in order, read from the
/// graph after import.
fn run_case(dir: &Path) -> Outcome {
    let data = dir.join("test_data_set_0");
    let inputs = match data_set(&data, "input") {
        Ok(v) => v,
        Err(e) => return Outcome::Refused(format!("reading the inputs: {e}")),
    };
    let expected = match data_set(&data, "output") {
        Ok(v) => v,
        Err(e) => return Outcome::Refused(format!("reading the outputs: {e}")),
    };
    let bytes = match std::fs::read(dir.join("model.onnx")) {
        Ok(b) => b,
        Err(e) => return Outcome::Failed(format!("model.onnx: {e}")),
    };
    // the graph inputs' names, to give each the shape of its value
    let first = match import_names(&bytes) {
        Ok(n) => n,
        Err(e) => return Outcome::Refused(e),
    };
    let mut options = ImportOptions::default();
    for (name, v) in first.iter().zip(&inputs) {
        options
            .value_shapes
            .insert(name.clone(), v.shape().iter().map(|&d| d as i64).collect());
        // as `tessera run --input` does: an input that decides an axis, a size or a bound
        // is built for its value (the module refuses another)
        options.input_values.insert(name.clone(), v.clone());
    }
    let imported = |options: &ImportOptions| -> Result<Graph, Outcome> {
        let mut g = import(&bytes, dir, options).map_err(|e| Outcome::Refused(e.to_string()))?;
        passes::optimize(&mut g, None).map_err(|e| Outcome::Failed(format!("optimize: {e}")))?;
        Ok(g)
    };
    let g = match imported(&options) {
        Ok(g) => g,
        Err(o) => return o,
    };
    let counted = selection_ranges(&g);
    let built = match counted.is_empty() {
        true => build(&g, &Target::cpu()),
        false => counted_build(g, &options, &imported),
    };
    let mut m = match built {
        Ok(m) => m,
        Err(e) => return Outcome::Failed(format!("build: {e}")),
    };
    for (name, v) in first.iter().zip(&inputs) {
        if let Err(e) = m.set_input(name, v) {
            return Outcome::Failed(format!("input `{name}`: {e}"));
        }
    }
    if let Err(e) = m.run() {
        return Outcome::Failed(format!("run: {e}"));
    }
    for (k, want) in expected.iter().enumerate() {
        let got = match m.get_output(k) {
            Ok(v) => v,
            Err(e) => return Outcome::Failed(format!("output {k}: {e}")),
        };
        if let Err(e) = compare(&got, want) {
            return Outcome::Wrong(format!("output {k}: {e}"));
        }
    }
    Outcome::Pass
}

/// A network with selections ([`tessera_graph::selection`]), `largest` built at their
/// bounds: built again at counts below them and compiled for every count, as the
/// driver does ([`counted_builds`]).
fn counted_build(
    largest: Graph,
    options: &ImportOptions,
    imported: &dyn Fn(&ImportOptions) -> Result<Graph, Outcome>,
) -> Result<tessera_graph::GraphModule, tessera_graph::GraphError> {
    let (builds, ranges) = counted_builds(largest, |counts| {
        let mut o = options.clone();
        o.counts = counts.clone();
        imported(&o).map_err(|_| {
            tessera_graph::GraphError::Invalid(format!("the build at counts {counts:?} failed"))
        })
    })?;
    let net = compile_dynamic(&builds, &ranges, &CpuBackend::new(Target::cpu()))?;
    net.load(std::sync::Arc::new(tessera_runtime::CpuDevice::new()))
}

/// The non-initializer graph inputs of a serialized model, in order.
fn import_names(bytes: &[u8]) -> Result<Vec<String>, String> {
    tessera_graph::onnx::graph_inputs(bytes).map_err(|e| e.to_string())
}

/// ONNX's backend-test rule: `rtol` 1e-3, `atol` 1e-7, NaN equal to NaN, and the same
/// shape and element type; float16 results within 4e-3 (a few of its units in the last
/// place, 4.9e-4 to 9.8e-4 of the value: the reference rounds its float32 intermediates
/// at other points than a float16 kernel does).
fn compare(got: &NDArray, want: &NDArray) -> Result<(), String> {
    let rtol = if want.dtype() == tessera_ir::DataType::float(16) {
        4e-3
    } else {
        1e-3
    };
    if got.dtype() != want.dtype() {
        return Err(format!(
            "element type {}, expected {}",
            got.dtype(),
            want.dtype()
        ));
    }
    if got.shape() != want.shape() {
        return Err(format!(
            "shape {:?}, expected {:?}",
            got.shape(),
            want.shape()
        ));
    }
    let (gv, wv) = (got.to_f64_vec(), want.to_f64_vec());
    let close = |g: f64, w: f64| {
        g == w || (g.is_nan() && w.is_nan()) || (g - w).abs() <= 1e-7 + rtol * w.abs()
    };
    let bad: Vec<usize> = (0..gv.len()).filter(|&i| !close(gv[i], wv[i])).collect();
    match bad.first() {
        None => Ok(()),
        Some(&i) => Err(format!(
            "{} of {} elements differ; first at {i}: {} against {}",
            bad.len(),
            gv.len(),
            gv[i],
            wv[i]
        )),
    }
}

/// A refusal's reason without the node's name, so that refusals of one kind count
/// together.
fn reason(msg: &str) -> String {
    if let Some(i) = msg.find("unsupported operator `") {
        let rest = &msg[i..];
        let op_end = rest[22..]
            .find('`')
            .map(|j| 22 + j + 1)
            .unwrap_or(rest.len());
        return rest[..op_end].to_string();
    }
    let cut: String = msg
        .split(['(', ':'])
        .find(|s| !s.trim().starts_with("node"))
        .unwrap_or(msg)
        .trim()
        .chars()
        .filter(|c| !c.is_ascii_digit())
        .take(90)
        .collect();
    cut
}

#[test]
fn onnx_node_conformance_cases() {
    let root = node_cases();
    let filter = std::env::var("TESSERA_CONFORMANCE_FILTER").ok();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("model.onnx").exists())
        .filter(|p| {
            filter
                .as_deref()
                .is_none_or(|f| p.file_name().unwrap().to_string_lossy().contains(f))
        })
        .collect();
    dirs.sort();
    assert!(
        filter.is_some() || dirs.len() > 1000,
        "only {} node cases in {}",
        dirs.len(),
        root.display()
    );
    // two workers: the builds run the C compiler, and CI has two cores
    let next = Mutex::new(0usize);
    let results: Mutex<Vec<(String, Outcome)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = {
                    let mut n = next.lock().unwrap();
                    *n += 1;
                    *n - 1
                };
                let Some(dir) = dirs.get(i) else { break };
                let name = dir.file_name().unwrap().to_string_lossy().to_string();
                let outcome = std::panic::catch_unwind(|| run_case(dir)).unwrap_or_else(|p| {
                    let msg = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    Outcome::Wrong(format!("panicked: {msg}"))
                });
                results.lock().unwrap().push((name, outcome));
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by(|a, b| a.0.cmp(&b.0));
    let mut pass = 0;
    let mut wrong = Vec::new();
    let mut failed = Vec::new();
    let mut refused: BTreeMap<String, usize> = BTreeMap::new();
    let mut deviations = Vec::new();
    for (name, o) in &results {
        let follows = FOLLOWS_ONNXRUNTIME.iter().find(|(case, _)| case == name);
        match (o, follows) {
            (Outcome::Wrong(e), Some((_, why))) => deviations.push(format!("{name}: {e} ({why})")),
            (_, Some(_)) => wrong.push(format!(
                "{name}: listed in FOLLOWS_ONNXRUNTIME but ended {o:?}: take it off the list"
            )),
            (Outcome::Pass, None) => pass += 1,
            (Outcome::Wrong(e), None) => wrong.push(format!("{name}: {e}")),
            (Outcome::Failed(e), None) => failed.push(format!("{name}: {e}")),
            (Outcome::Refused(e), None) => *refused.entry(reason(e)).or_default() += 1,
        }
    }
    if let Ok(path) = std::env::var("TESSERA_CONFORMANCE_REPORT") {
        let rows: Vec<serde_json::Value> = results
            .iter()
            .map(|(name, o)| {
                let (status, msg) = match o {
                    Outcome::Pass => ("pass", String::new()),
                    Outcome::Wrong(e) => ("wrong", e.clone()),
                    Outcome::Failed(e) => ("failed", e.clone()),
                    Outcome::Refused(e) => ("refused", e.clone()),
                };
                serde_json::json!({"case": name, "status": status, "message": msg})
            })
            .collect();
        std::fs::write(&path, serde_json::to_string_pretty(&rows).unwrap()).unwrap();
    }
    let mut by_count: Vec<(&String, &usize)> = refused.iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    println!(
        "ONNX node conformance: {pass} pass, {} wrong, {} as onnxruntime computes it (not \
         the reference), {} fail after import, {} refused, of {}",
        wrong.len(),
        deviations.len(),
        failed.len(),
        refused.values().sum::<usize>(),
        results.len()
    );
    for (why, n) in by_count {
        println!("  refused {n:4}  {why}");
    }
    for f in &failed {
        println!("  failed: {f}");
    }
    for d in &deviations {
        println!("  as onnxruntime: {d}");
    }
    assert!(wrong.is_empty(), "wrong answers:\n{}", wrong.join("\n"));
    if filter.is_none() {
        assert!(
            pass >= FLOOR,
            "only {pass} conformance cases pass, fewer than the {FLOOR} that did"
        );
    }
}

/// The generated operator-version table is the installed onnx package's (regenerate with
/// `python3 tests/onnx/gen_schema_table.py` after upgrading onnx).
#[test]
fn schema_table_matches_onnx() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/onnx/gen_schema_table.py");
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(&python)
        .arg(&script)
        .arg("-")
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/onnx/schema_table.rs");
    assert!(
        std::fs::read(&table).unwrap() == out.stdout,
        "{} is not the installed onnx package's: regenerate it",
        table.display()
    );
}
