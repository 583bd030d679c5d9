//! int8 models as onnxruntime's quantization tools write them (tests/onnx/
//! make_quant_models.py, run here): a CNN by `quantize_static` in the QDQ format with
//! per-channel weights, and an MLP by `quantize_dynamic` (DynamicQuantizeLinear,
//! MatMulInteger), imported, built for the CPU and run against onnxruntime's outputs; the
//! QOperator format's contrib operators are refused by name.

mod common;

use std::path::{Path, PathBuf};
use tessera_backends::Target;
use tessera_graph::onnx::{load, ImportOptions};
use tessera_graph::{build, passes};
use tessera_runtime::NDArray;

fn models() -> PathBuf {
    common::python_fixtures("make_quant_models.py", "onnx-quant-models")
}

fn run(dir: &Path, name: &str) -> Result<(NDArray, NDArray), String> {
    let mut g = load(
        &dir.join(name).join("model.onnx"),
        &ImportOptions::default(),
    )
    .map_err(|e| e.to_string())?;
    passes::optimize(&mut g, None).map_err(|e| e.to_string())?;
    let mut m = build(&g, &Target::cpu()).map_err(|e| e.to_string())?;
    let x = NDArray::load_npy(dir.join(name).join("input_0.npy")).unwrap();
    m.set_input("x", &x).map_err(|e| e.to_string())?;
    m.run().map_err(|e| e.to_string())?;
    let want = NDArray::load_npy(dir.join(name).join("output_0.npy")).unwrap();
    Ok((m.get_output(0).map_err(|e| e.to_string())?, want))
}

#[test]
fn onnxruntime_quantized_models_match_and_qoperator_contrib_ops_are_refused() {
    let dir = models();
    // QDQ: the output is dequantized from uint8, so it lies on a grid of the output's
    // scale; float32 arithmetic between the Q/DQ pairs may round a
    // value to the neighbouring step where onnxruntime's integer kernels do not
    let text = std::fs::read_to_string(dir.join("quant_manifest.json")).unwrap();
    let manifest: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    let step = manifest
        .iter()
        .find(|m| m["name"] == "cnn_qdq_per_channel")
        .and_then(|m| m["output_step"].as_f64())
        .expect("the output's scale");
    let (got, want) = run(&dir, "cnn_qdq_per_channel").unwrap();
    let v = want.to_f64_vec();
    got.allclose(&want, 0.0, 1.01 * step).unwrap();
    let off_grid = got
        .to_f64_vec()
        .iter()
        .zip(&v)
        .filter(|(g, w)| (*g - *w).abs() > 1e-6)
        .count();
    assert!(
        off_grid * 4 <= v.len(),
        "{off_grid} of {} differ by a step",
        v.len()
    );

    // dynamic: integer products, exact up to the float32 scales
    let (got, want) = run(&dir, "mlp_dynamic").unwrap();
    got.allclose(&want, 1e-5, 1e-5 * want.max_abs().max(1.0))
        .unwrap();

    let e = run(&dir, "cnn_qoperator").unwrap_err();
    assert!(
        e.contains("QLinearConv") || e.contains("com.microsoft"),
        "{e}"
    );
}
