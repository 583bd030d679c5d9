//! int8 models as onnxruntime's quantization tools write them (tests/onnx/
//! make_quant_models.py, run here): a CNN by `quantize_static` in the QDQ format with
//! per-channel weights, and an MLP by `quantize_dynamic` (DynamicQuantizeLinear,
//! MatMulInteger), imported, built for the CPU and run against onnxruntime's outputs; the
//! QOperator format's contrib operators are refused by name.

mod common;

use std::path::{Path, PathBuf};
use tessera_backends::Target;
use tessera_graph::onnx::{load, ImportOptions};
use tessera_graph::{build, passes, Op};
use tessera_runtime::NDArray;

fn models() -> PathBuf {
    common::python_fixtures("make_quant_models.py", "onnx-quant-models")
}

fn run(dir: &Path, name: &str) -> Result<(NDArray, NDArray), String> {
    run_counting(dir, name).map(|(got, want, _)| (got, want))
}

/// [`run`], with the number of int8 products (`DenseU8I8`) in the optimized graph.
fn run_counting(dir: &Path, name: &str) -> Result<(NDArray, NDArray, usize), String> {
    run_counting_narrow(dir, name).map(|(got, want, n, _)| (got, want, n))
}

/// [`run_counting`], with how many of the int8 products are `narrow` (7-bit weights).
fn run_counting_narrow(dir: &Path, name: &str) -> Result<(NDArray, NDArray, usize, usize), String> {
    let mut g = load(
        &dir.join(name).join("model.onnx"),
        &ImportOptions::default(),
    )
    .map_err(|e| e.to_string())?;
    passes::optimize(&mut g, None).map_err(|e| e.to_string())?;
    let int8 = g
        .topo_order()
        .into_iter()
        .filter(|&n| matches!(g.node(n).op, Op::DenseU8I8 { .. }))
        .count();
    let narrow = g
        .topo_order()
        .into_iter()
        .filter(|&n| matches!(g.node(n).op, Op::DenseU8I8 { narrow: true }))
        .count();
    let mut m = build(&g, &Target::cpu()).map_err(|e| e.to_string())?;
    let x = NDArray::load_npy(dir.join(name).join("input_0.npy")).unwrap();
    m.set_input("x", &x).map_err(|e| e.to_string())?;
    m.run().map_err(|e| e.to_string())?;
    let want = NDArray::load_npy(dir.join(name).join("output_0.npy")).unwrap();
    Ok((
        m.get_output(0).map_err(|e| e.to_string())?,
        want,
        int8,
        narrow,
    ))
}

/// The output step of QDQ model `name` (the scale of the DequantizeLinear that makes it).
fn output_step(dir: &Path, name: &str) -> f64 {
    let text = std::fs::read_to_string(dir.join("quant_manifest.json")).unwrap();
    let manifest: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    manifest
        .iter()
        .find(|m| m["name"] == name)
        .and_then(|m| m["output_step"].as_f64())
        .expect("the output's scale")
}

/// QDQ matrix products (int8 or uint8 activations, per-channel int8 or asymmetric uint8
/// weights, 30 input features) run on the int8 kernel, and their outputs lie within a
/// step of onnxruntime's operator-by-operator results (its graph optimizations off): the
/// integer sums are exact, the float requantization may round a value to the
/// neighbouring step. (onnxruntime's own fused int8 × int8 kernels differ from those by
/// up to 4 steps in 23 of mlp_qdq_s8's 96 outputs on an AVX2 CPU without VNNI.)
#[test]
fn qdq_products_run_on_the_int8_kernel() {
    let dir = models();
    for name in ["mlp_qdq_s8", "mlp_qdq_u8"] {
        let (got, _, int8) = run_counting(&dir, name).unwrap();
        let want = NDArray::load_npy(dir.join(name).join("output_0_unfused.npy")).unwrap();
        assert_eq!(int8, 2, "{name}: both MatMuls on the int8 kernel");
        let step = output_step(&dir, name);
        got.allclose(&want, 0.0, 1.01 * step)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let off = got
            .to_f64_vec()
            .iter()
            .zip(want.to_f64_vec())
            .filter(|(g, w)| (*g - w).abs() > 1e-6)
            .count();
        assert!(
            off * 10 <= want.len(),
            "{name}: {off} of {} off by a step",
            want.len()
        );
    }
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

    // dynamic: integer products (on the int8 kernel), exact up to the float32 scales
    let (got, want, int8, narrow) = run_counting_narrow(&dir, "mlp_dynamic").unwrap();
    assert_eq!((int8, narrow), (2, 0));
    got.allclose(&want, 1e-5, 1e-5 * want.max_abs().max(1.0))
        .unwrap();
    // 7-bit weights take the form that CPUs without VNNI compute faster, as exactly
    let (got, want, int8, narrow) = run_counting_narrow(&dir, "mlp_dynamic_7bit").unwrap();
    assert_eq!((int8, narrow), (2, 2));
    got.allclose(&want, 1e-5, 1e-5 * want.max_abs().max(1.0))
        .unwrap();

    let e = run(&dir, "cnn_qoperator").unwrap_err();
    assert!(
        e.contains("QLinearConv") || e.contains("com.microsoft"),
        "{e}"
    );
}
