//! Every ONNX operator the importer supports beyond the torchvision set, one node per
//! model with several attribute combinations and opsets, the classic model-zoo
//! architectures (opset 9) in their node patterns and two transformers in PyTorch's
//! export patterns (opset 17), at small sizes: imported, built for
//! the CPU and run, against onnxruntime's outputs on the same inputs (or NumPy's, for
//! opsets onnxruntime no longer runs). The models come from
//! tests/onnx/make_op_models.py.
//!
//! Every case runs and the failures are listed together, so that one run shows all of
//! them.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use tessera_backends::Target;
use tessera_graph::onnx::{load, ImportOptions};
use tessera_graph::{build, passes, Layout};
use tessera_runtime::NDArray;

/// Runs the generator into the target folder and returns it.
fn fixtures() -> PathBuf {
    common::python_fixtures("make_op_models.py", "onnx-op-fixtures")
}

struct Case {
    name: String,
    group: String,
    model: PathBuf,
    inputs: Vec<(String, PathBuf)>,
    outputs: Vec<PathBuf>,
}

fn manifest(dir: &Path) -> Vec<Case> {
    let text = std::fs::read_to_string(dir.join("op_manifest.json")).expect("op_manifest.json");
    let v: serde_json::Value = serde_json::from_str(&text).expect("a valid manifest");
    let s =
        |m: &serde_json::Value, k: &str| m[k].as_str().unwrap_or_else(|| panic!("{k}")).to_string();
    v.as_array()
        .expect("a list")
        .iter()
        .map(|m| Case {
            name: s(m, "name"),
            group: s(m, "group"),
            model: dir.join(s(m, "model")),
            inputs: m["inputs"]
                .as_array()
                .expect("inputs")
                .iter()
                .map(|i| (s(i, "name"), dir.join(s(i, "file"))))
                .collect(),
            outputs: m["outputs"]
                .as_array()
                .expect("outputs")
                .iter()
                .map(|o| dir.join(o.as_str().expect("an output file")))
                .collect(),
        })
        .collect()
}

/// Imports, optimizes (for `layout`, if any), builds and runs `case`, and compares
/// every output; `Err` says what differs.
fn check(case: &Case, layout: Option<Layout>) -> Result<(), String> {
    let mut g = load(&case.model, &ImportOptions::default()).map_err(|e| format!("import: {e}"))?;
    passes::optimize(&mut g, layout).map_err(|e| format!("optimize: {e}"))?;
    let mut m = build(&g, &Target::cpu()).map_err(|e| format!("build: {e}"))?;
    for (name, file) in &case.inputs {
        let v = NDArray::load_npy(file).map_err(|e| format!("{}: {e}", file.display()))?;
        m.set_input(name, &v)
            .map_err(|e| format!("input {name}: {e}"))?;
    }
    m.run().map_err(|e| format!("run: {e}"))?;
    for (k, file) in case.outputs.iter().enumerate() {
        let got = m.get_output(k).map_err(|e| format!("output {k}: {e}"))?;
        let want = NDArray::load_npy(file).map_err(|e| format!("{}: {e}", file.display()))?;
        if got.shape() != want.shape() {
            return Err(format!(
                "output {k}: shape {:?}, expected {:?}",
                got.shape(),
                want.shape()
            ));
        }
        let (gv, wv) = (got.to_f64_vec(), want.to_f64_vec());
        let lo = wv.iter().cloned().fold(f64::INFINITY, f64::min);
        let hi = wv.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let range = if wv.is_empty() { 0.0 } else { hi - lo };
        // layers accumulate; single operators are held to a relative bound per element
        let tol = |w: f64| {
            if case.group == "arch" {
                1e-3 * range.max(1e-6)
            } else {
                1e-4 * (1.0 + w.abs())
            }
        };
        let bad = gv
            .iter()
            .zip(&wv)
            .enumerate()
            .find(|(_, (g, w))| !((*g - *w).abs() <= tol(**w) || (g.is_nan() && w.is_nan())));
        if let Some((i, (g, w))) = bad {
            let n = gv
                .iter()
                .zip(&wv)
                .filter(|(g, w)| (*g - *w).abs() > tol(**w))
                .count();
            return Err(format!(
                "output {k}: {n} of {} elements differ; first at {i}: {g} against {w}",
                gv.len()
            ));
        }
    }
    Ok(())
}

#[test]
fn operators_and_classic_architectures_match_onnxruntime() {
    let dir = fixtures();
    let cases = manifest(&dir);
    assert!(
        cases.len() >= 100,
        "the generator made only {} cases",
        cases.len()
    );
    for arch in [
        "alexnet",
        "zfnet512",
        "inception_v1",
        "inception_v2",
        "resnet50_caffe2",
        "shufflenet",
        "squeezenet1_0",
        "densenet121",
        "vgg19",
        "bert_encoder_layer",
        "vit_tiny",
    ] {
        assert!(cases.iter().any(|c| c.name == arch), "no case `{arch}`");
    }
    let failures = Mutex::new(Vec::new());
    let next = Mutex::new(0usize);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = {
                    let mut n = next.lock().unwrap();
                    *n += 1;
                    *n - 1
                };
                let Some(case) = cases.get(i) else { break };
                let layouts: &[Option<Layout>] = if case.group == "arch" {
                    &[None, Some(Layout::Nhwc)]
                } else {
                    &[None]
                };
                for &layout in layouts {
                    if let Err(e) = check(case, layout) {
                        let l = layout.map_or("NCHW".to_string(), |l| l.to_string());
                        failures
                            .lock()
                            .unwrap()
                            .push(format!("{} ({l}): {e}", case.name));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
