//! int8 models as onnxruntime's quantization tools write them (tests/onnx/
//! make_quant_models.py, run here): a CNN by `quantize_static` in the QDQ format with
//! per-channel weights, and an MLP by `quantize_dynamic` (DynamicQuantizeLinear,
//! MatMulInteger), imported, built for the CPU and run against onnxruntime's outputs; the
//! QOperator format's contrib operators are refused by name.

mod common;

use std::path::{Path, PathBuf};
use tessera_backends::Target;
use tessera_graph::conv_plan::ConvPlan;
use tessera_graph::onnx::{load, ImportOptions, Int8Products};
use tessera_graph::{build, passes, Int8Sums, Layout, Op};
use tessera_runtime::NDArray;

fn models() -> PathBuf {
    common::python_fixtures("make_quant_models.py", "onnx-quant-models")
}

fn run(dir: &Path, name: &str) -> Result<(NDArray, NDArray), String> {
    run_built(dir, name, false).map(|r| (r.got, r.want))
}

/// What one build of a model gave.
struct Run {
    got: NDArray,
    want: NDArray,
    /// int8 products (`DenseU8I8`), and how many of them sum on the short form (their
    /// weights' byte pairs fit int16, as 7-bit weights' do).
    int8: usize,
    narrow: usize,
    /// int8 convolutions (`Conv2dU8I8`).
    convs: usize,
    /// Those whose weight words are packed by blocks of output channels (rank 5).
    packed_convs: usize,
    /// int8 products and convolutions that sum with saturation.
    saturating: usize,
    /// Poolings computed on integers (a QDQ MaxPool on its bytes).
    integer_pools: usize,
    /// int8 depthwise convolutions (`DepthwiseU8I8`).
    depthwise: usize,
    /// Layout transforms left in the graph built.
    transforms: usize,
}

/// Imports, optimizes, builds and runs model `name` — as it is, or (`cpu_plan`) in NHWC
/// through the CPU plan `tessera run` builds with.
fn run_built(dir: &Path, name: &str, cpu_plan: bool) -> Result<Run, String> {
    run_built_with(dir, name, cpu_plan, Int8Products::Exact)
}

/// [`run_built`] with the int8 products' arithmetic `products`.
fn run_built_with(
    dir: &Path,
    name: &str,
    cpu_plan: bool,
    products: Int8Products,
) -> Result<Run, String> {
    let options = ImportOptions {
        int8_products: products,
        ..Default::default()
    };
    let mut g = load(&dir.join(name).join("model.onnx"), &options).map_err(|e| e.to_string())?;
    passes::optimize(&mut g, cpu_plan.then_some(Layout::Nhwc)).map_err(|e| e.to_string())?;
    if cpu_plan {
        let plan = ConvPlan::for_cpu(g, 16, true).map_err(|e| format!("plan: {e}"))?;
        g = plan.rule_graph().clone();
    }
    let ops: Vec<Op> = g
        .topo_order()
        .into_iter()
        .map(|n| g.node(n).op.clone())
        .collect();
    let count = |f: &dyn Fn(&Op) -> bool| ops.iter().filter(|o| f(o)).count();
    let int8 = count(&|o| matches!(o, Op::DenseU8I8 { .. }));
    let narrow = count(&|o| {
        matches!(
            o,
            Op::DenseU8I8 {
                sums: Int8Sums::PairsFit
            }
        )
    });
    let transforms = count(&|o| matches!(o, Op::LayoutTransform { .. }));
    let convs = count(&|o| matches!(o, Op::Conv2dU8I8 { .. }));
    let packed_convs = g
        .topo_order()
        .into_iter()
        .filter(|&n| {
            matches!(g.node(n).op, Op::Conv2dU8I8 { .. })
                && g.node(g.args(n)[1]).ty.shape.len() == 5
        })
        .count();
    let saturating = count(&|o| {
        matches!(
            o,
            Op::DenseU8I8 {
                sums: Int8Sums::Saturating
            } | Op::Conv2dU8I8 {
                sums: Int8Sums::Saturating,
                ..
            }
        )
    });
    let depthwise = count(&|o| matches!(o, Op::DepthwiseU8I8 { .. }));
    let integer_pools = g
        .topo_order()
        .into_iter()
        .filter(|&n| matches!(g.node(n).op, Op::Pool2d { .. }) && g.node(n).ty.dtype.is_integer())
        .count();
    let mut m = build(&g, &Target::cpu()).map_err(|e| e.to_string())?;
    let x = NDArray::load_npy(dir.join(name).join("input_0.npy")).unwrap();
    m.set_input("x", &x).map_err(|e| e.to_string())?;
    m.run().map_err(|e| e.to_string())?;
    let want = NDArray::load_npy(dir.join(name).join("output_0.npy")).unwrap();
    Ok(Run {
        got: m.get_output(0).map_err(|e| e.to_string())?,
        want,
        int8,
        narrow,
        convs,
        packed_convs,
        saturating,
        integer_pools,
        depthwise,
        transforms,
    })
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
        let Run { got, int8, .. } = run_built(&dir, name, false).unwrap();
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

/// Asked for the saturating arithmetic, the products whose weights' byte pairs could
/// overflow int16 sum with saturation, and the built network computes exactly that
/// definition: its output equals the reference interpreter's on the same graph (where
/// random uint8 data and 8-bit weights saturate, so that it differs from the exact
/// build's). Products of 7-bit weights stay on the exact short form, unchanged.
#[test]
fn saturating_int8_products_are_taken_where_asked_and_compute_their_definition() {
    // the CLI's --int8-products names
    assert_eq!(
        "saturating".parse::<Int8Products>().unwrap(),
        Int8Products::Saturating
    );
    assert_eq!(
        "exact".parse::<Int8Products>().unwrap(),
        Int8Products::Exact
    );
    let e = "fast".parse::<Int8Products>().unwrap_err().to_string();
    assert!(e.contains("`exact` or `saturating`"), "{e}");
    let dir = models();
    for (name, saturating) in [("mlp_qdq_u8", 2), ("mlp_dynamic_7bit", 0)] {
        let exact = run_built(&dir, name, false).unwrap();
        assert_eq!(exact.saturating, 0, "{name}");
        let run = run_built_with(&dir, name, false, Int8Products::Saturating).unwrap();
        assert_eq!((run.saturating, run.int8), (saturating, 2), "{name}");
        let options = ImportOptions {
            int8_products: Int8Products::Saturating,
            ..Default::default()
        };
        let mut g = load(&dir.join(name).join("model.onnx"), &options).unwrap();
        passes::optimize(&mut g, None).unwrap();
        let x = NDArray::load_npy(dir.join(name).join("input_0.npy")).unwrap();
        let reference = tessera_graph::reference::interpret(&g, &[("x", &x)]).unwrap();
        run.got
            .allclose(&reference[0], 1e-5, 1e-5 * reference[0].max_abs().max(1.0))
            .unwrap_or_else(|e| panic!("{name}: against the reference: {e}"));
        let same = run.got.to_f64_vec() == exact.got.to_f64_vec();
        assert_eq!(
            same,
            saturating == 0,
            "{name}: saturation changes the output"
        );
    }
    let cnn = run_built_with(&dir, "cnn_qdq_per_channel", true, Int8Products::Saturating);
    let cnn = cnn.unwrap();
    assert_eq!((cnn.convs, cnn.int8), (2, 1));
    assert!(cnn.saturating >= 1, "{}", cnn.saturating);
}

/// A QDQ depthwise convolution (MobileNet's) runs on the bytes with int32 products, not
/// in float32 between its Q/DQ pairs, and the block's output lies within a step of
/// onnxruntime's operator-by-operator results, as built and through the CPU plan. The
/// plan (16 lanes, AVX-512's) packs the weights of both other convolutions, whose 8 and
/// 12 output channels 16 does not divide, by the widest vector that does.
#[test]
fn qdq_depthwise_convolutions_run_on_the_bytes() {
    let dir = models();
    let name = "cnn_qdq_depthwise";
    let step = output_step(&dir, name);
    let want = NDArray::load_npy(dir.join(name).join("output_0_unfused.npy")).unwrap();
    for cpu_plan in [false, true] {
        let run = run_built(&dir, name, cpu_plan).unwrap();
        assert_eq!((run.convs, run.depthwise), (2, 1), "plan {cpu_plan}");
        assert_eq!(run.packed_convs, if cpu_plan { 2 } else { 0 });
        run.got
            .allclose(&want, 0.0, 1.01 * step)
            .unwrap_or_else(|e| panic!("plan {cpu_plan}: {e}"));
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
    // its two convolutions and its Gemm run on int8 kernels; in NHWC no layout transform
    // is left between the convolutions (one makes the input NHWC, one the pooled
    // features NCHW for the flatten)
    let plain = run_built(&dir, "cnn_qdq_per_channel", false).unwrap();
    assert_eq!((plain.convs, plain.int8), (2, 1));
    // its MaxPool between a DequantizeLinear and a QuantizeLinear pools the bytes
    assert_eq!(plain.integer_pools, 1);
    let nhwc = run_built(&dir, "cnn_qdq_per_channel", true).unwrap();
    assert_eq!((nhwc.convs, nhwc.int8), (2, 1));
    assert!(
        nhwc.transforms <= 2,
        "{} layout transforms",
        nhwc.transforms
    );
    nhwc.got.allclose(&plain.got, 0.0, 1.01 * step).unwrap();
    let (got, want) = (plain.got, plain.want);
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
    let Run {
        got,
        want,
        int8,
        narrow,
        ..
    } = run_built(&dir, "mlp_dynamic", false).unwrap();
    assert_eq!((int8, narrow), (2, 0));
    got.allclose(&want, 1e-5, 1e-5 * want.max_abs().max(1.0))
        .unwrap();
    // 7-bit weights take the form that CPUs without VNNI compute faster, as exactly
    let Run {
        got,
        want,
        int8,
        narrow,
        ..
    } = run_built(&dir, "mlp_dynamic_7bit", false).unwrap();
    assert_eq!((int8, narrow), (2, 2));
    got.allclose(&want, 1e-5, 1e-5 * want.max_abs().max(1.0))
        .unwrap();

    let e = run(&dir, "cnn_qoperator").unwrap_err();
    assert!(
        e.contains("QLinearConv") || e.contains("com.microsoft"),
        "{e}"
    );
}
