//! The ONNX importer: real models (generated with the onnx helper API in the node patterns
//! of torchvision exports, see tests/onnx/make_models.py) imported, compiled and run,
//! against onnxruntime's output on the same input; and malformed or unsupported models,
//! which must be errors, never panics.

mod common;

mod onnx_proto;
use onnx_proto::*;

use prost::Message;
use std::path::{Path, PathBuf};
use tessera_backends::Target;
use tessera_graph::onnx::proto::{self, tensor_proto::DataType as T, ModelProto, TensorProto};
use tessera_graph::onnx::{import, load, ImportOptions};
use tessera_graph::{build, passes, Layout};
use tessera_runtime::NDArray;

/// Runs the generator once per test process into the target folder and returns it.
fn fixtures() -> PathBuf {
    common::python_fixtures("make_models.py", "onnx-fixtures")
}

#[derive(Debug)]
struct Case {
    name: String,
    model: PathBuf,
    input_name: String,
    input: PathBuf,
    expected: PathBuf,
}

fn manifest(dir: &Path) -> Vec<Case> {
    let text = std::fs::read_to_string(dir.join("manifest.json")).expect("manifest.json");
    let v: serde_json::Value = serde_json::from_str(&text).expect("valid manifest");
    v.as_array()
        .expect("a list")
        .iter()
        .map(|m| {
            let s = |k: &str| {
                m[k].as_str()
                    .unwrap_or_else(|| panic!("manifest field {k}"))
                    .to_string()
            };
            Case {
                name: s("name"),
                model: dir.join(s("model")),
                input_name: s("input_name"),
                input: dir.join(s("input")),
                expected: dir.join(s("expected")),
            }
        })
        .collect()
}

/// Imports, optimizes for `layout`, builds and runs `case`; returns (max abs error,
/// output range of onnxruntime's result).
fn run_case(case: &Case, layout: Layout) -> (f64, f64) {
    let mut g = load(&case.model, &ImportOptions::default())
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    passes::optimize(&mut g, Some(layout)).unwrap_or_else(|e| panic!("{}: {e}", case.name));
    let mut m = build(&g, &Target::cpu()).unwrap_or_else(|e| panic!("{}: {e}", case.name));
    let input = NDArray::load_npy(&case.input).unwrap();
    m.set_input(&case.input_name, &input).unwrap();
    m.run().unwrap();
    let got = m.get_output(0).unwrap();
    let want = NDArray::load_npy(&case.expected).unwrap();
    assert_eq!(got.shape(), want.shape(), "{}", case.name);
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let err = g
        .iter()
        .zip(&w)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    let lo = w.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = w.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    (err, hi - lo)
}

#[test]
fn models_match_onnxruntime() {
    let dir = fixtures();
    let cases = manifest(&dir);
    let names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    for want in [
        "resnet18",
        "mobilenet_v2",
        "squeezenet1_1",
        "inception_block",
        "tiny_external",
    ] {
        assert!(names.contains(&want), "the generator made {names:?}");
    }
    for case in &cases {
        let layouts: &[Layout] = if case.name == "resnet18" || case.name == "inception_block" {
            &[Layout::Nhwc, Layout::Nchw]
        } else {
            &[Layout::Nhwc]
        };
        for &layout in layouts {
            let (err, range) = run_case(case, layout);
            eprintln!(
                "{} {layout}: max abs error {err:.3e}, output range {range:.3e}",
                case.name
            );
            assert!(
                range > 0.0,
                "{}: onnxruntime's output is constant",
                case.name
            );
            assert!(
                err <= 1e-3 * range,
                "{} ({layout}): max abs error {err:e} > 1e-3 × output range {range:e}",
                case.name
            );
        }
    }
}

// ----- errors: models built here with the prost types -----

fn import_err(m: &ModelProto) -> String {
    import(
        &m.encode_to_vec(),
        Path::new("."),
        &ImportOptions::default(),
    )
    .expect_err("must be an error")
    .to_string()
}

/// `m` imported and through `passes::optimize` (no layout change).
fn optimized(m: &ModelProto) -> tessera_graph::Graph {
    let mut g = import(
        &m.encode_to_vec(),
        Path::new("."),
        &ImportOptions::default(),
    )
    .unwrap();
    passes::optimize(&mut g, None).unwrap();
    g
}

fn run_model(m: &ModelProto, x: &NDArray) -> Vec<f64> {
    let g = import(
        &m.encode_to_vec(),
        Path::new("."),
        &ImportOptions::default(),
    )
    .unwrap();
    let mut exe = build(&g, &Target::cpu()).unwrap();
    exe.set_input("x", x).unwrap();
    exe.run().unwrap();
    exe.get_output(0).unwrap().to_f64_vec()
}

#[test]
fn a_small_model_imports_and_runs() {
    let m = model(vec![node("Relu", "r", &["x"], &["y"], vec![])], vec![], 13);
    let x = NDArray::from_slice_f32(&[1, 4], &[-1.0, 2.0, -3.0, 4.0]).unwrap();
    assert_eq!(run_model(&m, &x), vec![0.0, 2.0, 0.0, 4.0]);
}

/// Exports' shape arithmetic on constants: PyTorch's attention takes `shape[3:]` of a 3-D
/// shape (empty) into a Concat, and Swin builds its window mask with ScatterND on a
/// constant; both fold at import. A ScatterND on a computed tensor is a kernel.
#[test]
fn empty_slices_and_scatter_nd_on_constants_fold_at_import_and_run_elsewhere() {
    let x = NDArray::from_slice_f32(&[2, 4], &[1., 2., 3., 4., 5., 6., 7., 8.]).unwrap();
    // y = reshape(x, concat([8], shape(x)[2:]))
    let nodes = vec![
        node("Shape", "shape", &["x"], &["s"], vec![]),
        node("Slice", "tail", &["s", "two", "big"], &["t"], vec![]),
        node(
            "Concat",
            "cat",
            &["eight", "t"],
            &["spec"],
            vec![int_attr("axis", 0)],
        ),
        node("Reshape", "flat", &["x", "spec"], &["y"], vec![]),
    ];
    let inits = vec![
        i64_tensor("two", &[2]),
        i64_tensor("big", &[i64::MAX]),
        i64_tensor("eight", &[8]),
    ];
    let m = with_io(model(nodes, inits, 17), &[2, 4], &[8]);
    assert_eq!(run_model(&m, &x), x.to_f64_vec());

    // y = x + scatter_nd(ones [2, 4], [[1]], [[10, 20, 30, 40]]), then with reduction add
    for (reduction, second_row) in [
        ("none", [10., 20., 30., 40.]),
        ("add", [11., 21., 31., 41.]),
    ] {
        let mut idx = i64_tensor("idx", &[1]);
        idx.dims = vec![1, 1];
        let mut upd = f32_tensor("upd", &[1, 4], 0);
        upd.float_data = vec![10., 20., 30., 40.];
        let mut ones = f32_tensor("ones", &[2, 4], 0);
        ones.float_data = vec![1.; 8];
        let attr = proto::AttributeProto {
            name: Some("reduction".into()),
            s: Some(reduction.as_bytes().to_vec()),
            r#type: Some(proto::attribute_proto::AttributeType::String as i32),
            ..Default::default()
        };
        let nodes = vec![
            node(
                "ScatterND",
                "scatter",
                &["ones", "idx", "upd"],
                &["m"],
                vec![attr],
            ),
            node("Add", "add", &["x", "m"], &["y"], vec![]),
        ];
        let m = with_io(model(nodes, vec![ones, idx, upd], 18), &[2, 4], &[2, 4]);
        let want: Vec<f64> = (0..8)
            .map(|i| (i + 1) as f64 + if i >= 4 { second_row[i - 4] } else { 1. })
            .collect();
        assert_eq!(run_model(&m, &x), want, "{reduction}");
    }

    // on a computed tensor it is a kernel: the second row replaced
    let nodes = vec![node(
        "ScatterND",
        "scatter",
        &["x", "idx", "upd"],
        &["y"],
        vec![],
    )];
    let mut idx = i64_tensor("idx", &[1]);
    idx.dims = vec![1, 1];
    let upd = f32_tensor("upd", &[1, 4], 0);
    let want: Vec<f64> = (1..=4)
        .map(f64::from)
        .chain(upd.float_data.iter().map(|&v| f64::from(v)))
        .collect();
    let m = with_io(model(nodes, vec![idx, upd], 18), &[2, 4], &[2, 4]);
    assert_eq!(run_model(&m, &x), want);
}

#[test]
fn unsupported_operator_names_it_the_node_and_why() {
    let m = model(
        vec![node("RandomNormalLike", "noise_1", &["x"], &["y"], vec![])],
        vec![],
        13,
    );
    let e = import_err(&m);
    assert!(
        e.contains("unsupported operator `RandomNormalLike` (node `noise_1`): a random generator"),
        "{e}"
    );
    let m = model(
        vec![node("FancyNorm", "norm_1", &["x"], &["y"], vec![])],
        vec![],
        13,
    );
    let e = import_err(&m);
    assert!(
        e.contains(
            "unsupported operator `FancyNorm` (node `norm_1`): not an operator of the standard \
             ONNX domain"
        ),
        "{e}"
    );
}

/// The transformer operators' forms the importer does not take are errors naming the
/// node and what is wrong, never a panic.
#[test]
fn transformer_operator_forms_not_supported_say_why() {
    let equation = |eq: &str| proto::AttributeProto {
        name: Some("equation".into()),
        s: Some(eq.as_bytes().to_vec()),
        r#type: Some(proto::attribute_proto::AttributeType::String as i32),
        ..Default::default()
    };
    let one = |n: proto::NodeProto, inits: Vec<TensorProto>| {
        import_err(&with_io(model(vec![n], inits, 21), &[2, 4], &[2, 4]))
    };
    let cases = [
        (
            one(
                node("Einsum", "e", &["x"], &["y"], vec![equation("ii->i")]),
                vec![],
            ),
            "node `e`",
            "a letter repeated within one term",
        ),
        (
            one(
                node("Einsum", "e", &["x"], &["y"], vec![equation("...i->i")]),
                vec![],
            ),
            "node `e`",
            "ellipses are not supported",
        ),
        (
            one(
                node("Einsum", "e", &["x"], &["y"], vec![equation("abc->a")]),
                vec![],
            ),
            "node `e`",
            "operand 0 has rank 2, its term 3 letters",
        ),
        (
            one(
                node("Dropout", "d", &["x", "", "x"], &["y"], vec![]),
                vec![],
            ),
            "node `d`",
            "Dropout in training mode",
        ),
        (
            one(
                node(
                    "GroupNormalization",
                    "gn",
                    &["x", "s", "b"],
                    &["y"],
                    vec![int_attr("num_groups", 3)],
                ),
                vec![f32_tensor("s", &[4], 1), f32_tensor("b", &[4], 2)],
            ),
            "node `gn`",
            "num_groups 3 must be positive and divide the 4 channels",
        ),
    ];
    for (e, node, why) in cases {
        assert!(e.contains(node) && e.contains(why), "{e}");
    }
}

#[test]
fn malformed_files_are_errors() {
    let good = model(vec![node("Relu", "r", &["x"], &["y"], vec![])], vec![], 13).encode_to_vec();
    for cut in [1, good.len() / 2, good.len() - 1] {
        let r = import(&good[..cut], Path::new("."), &ImportOptions::default());
        assert!(r.is_err(), "a model cut at {cut} bytes imported");
    }
    let garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    assert!(import(&garbage, Path::new("."), &ImportOptions::default()).is_err());

    // an initializer whose data does not fit its shape
    let bad_init = TensorProto {
        name: Some("w".into()),
        dims: vec![4],
        data_type: Some(T::Float as i32),
        raw_data: Some(vec![0; 7]),
        ..Default::default()
    };
    let m = model(
        vec![node("Add", "a", &["x", "w"], &["y"], vec![])],
        vec![bad_init],
        13,
    );
    let e = import_err(&m);
    assert!(
        e.contains("tensor `w`: 7 bytes of data for 4 elements"),
        "{e}"
    );

    // external data that is missing, or points outside the model's folder
    for (loc, want) in [
        ("missing.bin", "missing.bin"),
        ("../escape.bin", "must stay inside"),
    ] {
        let ext = TensorProto {
            name: Some("w".into()),
            dims: vec![4],
            data_type: Some(T::Float as i32),
            data_location: Some(proto::tensor_proto::DataLocation::External as i32),
            external_data: vec![proto::StringStringEntryProto {
                key: Some("location".into()),
                value: Some(loc.into()),
            }],
            ..Default::default()
        };
        let m = model(
            vec![node("Add", "a", &["x", "w"], &["y"], vec![])],
            vec![ext],
            13,
        );
        let e = import_err(&m);
        assert!(e.contains(want), "{e}");
    }

    // a use before definition, an unknown opset, a shape error naming the node
    let m = model(
        vec![node("Relu", "r", &["nope"], &["y"], vec![])],
        vec![],
        13,
    );
    assert!(import_err(&m).contains("value `nope` is not defined"));
    let m = model(vec![node("Relu", "r", &["x"], &["y"], vec![])], vec![], 29);
    assert!(import_err(&m).contains("opset 29 is not supported (1 to 28 are)"));
    // an operator that did not exist yet at the model's opset
    let m = model(vec![node("Gelu", "g", &["x"], &["y"], vec![])], vec![], 19);
    assert!(
        import_err(&m).contains("`Gelu` is not defined at opset 19 (it was added in opset 20)"),
        "{}",
        import_err(&m)
    );
    let w = TensorProto {
        name: Some("w".into()),
        dims: vec![3],
        data_type: Some(T::Float as i32),
        float_data: vec![1.0, 2.0, 3.0],
        ..Default::default()
    };
    let m = model(
        vec![node("Add", "add_1", &["x", "w"], &["y"], vec![])],
        vec![w],
        13,
    );
    let e = import_err(&m);
    assert!(e.contains("node `add_1` (add)"), "{e}");
}

#[test]
fn the_mutation_test_model_imports_and_matches_the_reference() {
    let g = import(
        &small_cnn().encode_to_vec(),
        Path::new("."),
        &ImportOptions::default(),
    )
    .unwrap();
    let x = NDArray::random_uniform(tessera_ir::DataType::float32(), &[1, 3, 8, 8], 5, -1.0, 1.0)
        .unwrap();
    let want = tessera_graph::reference::interpret(&g, &[("x", &x)])
        .unwrap()
        .remove(0);
    let mut opt = g.clone();
    passes::optimize(&mut opt, Some(Layout::Nhwc)).unwrap();
    let mut m = build(&opt, &Target::cpu()).unwrap();
    m.set_input("x", &x).unwrap();
    m.run().unwrap();
    m.get_output(0)
        .unwrap()
        .allclose(&want, 1e-4, 1e-6)
        .unwrap();
}

/// `Pow` by a constant exponent of 2, 3, 4, ½, -½, -1 or -2 becomes products, a square
/// root and a reciprocal (no `power` left to call per lane, and a negative base cubed
/// stays a number); another exponent stays a power.
#[test]
fn pow_by_small_constant_exponents_becomes_products() {
    let x = NDArray::from_slice_f32(&[1, 4], &[-1.5, 2.0, 0.25, 3.0]).unwrap();
    for e in [2.0f32, 3.0, 4.0, 0.5, -0.5, -1.0, -2.0, 1.7] {
        let mut exp = f32_tensor("e", &[], 0);
        exp.float_data = vec![e];
        let m = with_io(
            model(
                vec![node("Pow", "p", &["x", "e"], &["y"], vec![])],
                vec![exp],
                15,
            ),
            &[1, 4],
            &[1, 4],
        );
        let g = import(
            &m.encode_to_vec(),
            Path::new("."),
            &ImportOptions::default(),
        )
        .unwrap();
        let powers = g.op_counts().get("power").copied().unwrap_or(0);
        assert_eq!(powers, usize::from(e == 1.7), "exponent {e}");
        let got = run_model(&m, &x);
        for (g, &v) in got.iter().zip(&[-1.5f64, 2.0, 0.25, 3.0]) {
            let want = v.powf(e as f64);
            assert!(
                (g - want).abs() <= 1e-5 * want.abs().max(1.0) || (g.is_nan() && want.is_nan()),
                "{v}^{e}: {g} against {want}"
            );
        }
    }
}

/// The window functions of a size known at import, periodic and symmetric, against
/// their definitions (Hann as sin², the others as cosine sums).
#[test]
fn window_functions_of_a_known_size_are_constants() {
    use std::f64::consts::PI;
    let x = NDArray::from_slice_f32(&[8], &[0.0; 8]).unwrap();
    for op in ["HannWindow", "HammingWindow", "BlackmanWindow"] {
        for periodic in [1, 0] {
            let mut size = i64_tensor("size", &[8]);
            size.dims = vec![];
            let nodes = vec![
                node(
                    op,
                    "w",
                    &["size"],
                    &["win"],
                    vec![int_attr("periodic", periodic)],
                ),
                node("Add", "add", &["x", "win"], &["y"], vec![]),
            ];
            let m = with_io(model(nodes, vec![size], 17), &[8], &[8]);
            let got = run_model(&m, &x);
            let d = if periodic == 1 { 8.0 } else { 7.0 };
            for (n, g) in got.iter().enumerate() {
                let t = n as f64 / d;
                let want = match op {
                    "HannWindow" => (PI * t).sin().powi(2),
                    "HammingWindow" => 0.54347826 - 0.45652174 * (2.0 * PI * t).cos(),
                    _ => 0.42 - 0.5 * (2.0 * PI * t).cos() + 0.08 * (4.0 * PI * t).cos(),
                };
                assert!(
                    (g - want).abs() < 1e-6,
                    "{op} periodic={periodic} [{n}]: {g} vs {want}"
                );
            }
        }
    }
}

/// A GRU's recurrent weights are held once per direction, whatever the sequence length
/// (a slice of them per time step once folded into a constant per step: a 64-step GRU
/// held its weights 64 times and read each copy from memory), with and without
/// `linear_before_reset`.
#[test]
fn gru_weights_do_not_grow_with_the_sequence() {
    let (i, h) = (4i64, 8i64);
    let params = |seq: i64, lbr: i64| {
        let nodes = vec![node(
            "GRU",
            "gru",
            &["x", "w", "r", "b"],
            &["", "y"],
            vec![
                int_attr("hidden_size", h),
                int_attr("linear_before_reset", lbr),
            ],
        )];
        let inits = vec![
            f32_tensor("w", &[1, 3 * h, i], 1),
            f32_tensor("r", &[1, 3 * h, h], 2),
            f32_tensor("b", &[1, 6 * h], 3),
        ];
        let m = with_io(model(nodes, inits, 14), &[seq, 1, i], &[1, 1, h]);
        let g = optimized(&m);
        let denses = g.op_counts().get("dense").copied().unwrap_or(0);
        (g.num_params(), denses)
    };
    for lbr in [0, 1] {
        let (short, short_denses) = params(3, lbr);
        let (long, long_denses) = params(12, lbr);
        assert_eq!(
            short, long,
            "linear_before_reset={lbr}: weights grow with the sequence"
        );
        assert!(
            long <= (3 * h * (i + h) + 6 * h) as usize * 2,
            "{long} parameters"
        );
        // one product for the input projection, then one (linear_before_reset) or two
        // per step
        let per_step = if lbr == 1 { 1 } else { 2 };
        assert_eq!(
            long_denses - short_denses,
            9 * per_step,
            "denses {long_denses}"
        );
    }
}

/// Two 1-D convs (ONNX `Conv` on `[N, C, W]`) with an instance norm, a per-channel
/// scale and a ReLU between (wav2vec2's feature extractor): the chain moves inside the
/// reshapes that drop and restore the unit axis and the norm runs on the NHWC value, so
/// the NHWC plan transforms the layout once on the way in and once on the way out, not
/// around every conv; the result is the plain build's.
#[test]
fn elementwise_and_instance_norm_between_1d_convs_stay_in_nhwc() {
    let (c, w) = (8i64, 20i64);
    let mut scale = f32_tensor("s", &[c, 1], 4);
    scale.float_data.iter_mut().for_each(|v| *v += 1.5);
    let nodes = vec![
        node(
            "Conv",
            "c1",
            &["x", "w1"],
            &["a0"],
            vec![ints_attr("kernel_shape", &[3])],
        ),
        // wav2vec2's group norm of one channel a group
        node(
            "InstanceNormalization",
            "n",
            &["a0", "gamma", "beta"],
            &["a"],
            vec![],
        ),
        node("Mul", "m", &["a", "s"], &["b"], vec![]),
        node("Relu", "r", &["b"], &["d"], vec![]),
        node(
            "Conv",
            "c2",
            &["d", "w2"],
            &["y"],
            vec![ints_attr("kernel_shape", &[3]), ints_attr("strides", &[2])],
        ),
    ];
    let inits = vec![
        f32_tensor("w1", &[c, 4, 3], 1),
        f32_tensor("gamma", &[c], 5),
        f32_tensor("beta", &[c], 6),
        scale,
        f32_tensor("w2", &[c, c, 3], 2),
    ];
    let m = with_io(model(nodes, inits, 13), &[1, 4, w], &[1, c, 8]);
    let g = import(
        &m.encode_to_vec(),
        Path::new("."),
        &ImportOptions::default(),
    )
    .unwrap();
    let x = NDArray::from_slice_f32(
        &[1, 4, w as usize],
        &(0..4 * w)
            .map(|i| ((i * 37) % 11) as f32 / 5.0 - 1.0)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let run = |layout: Option<Layout>| {
        let mut g = g.clone();
        passes::optimize(&mut g, layout).unwrap();
        let transforms = g.op_counts().get("layout_transform").copied().unwrap_or(0);
        let mut exe = build(&g, &Target::cpu()).unwrap();
        exe.set_input("x", &x).unwrap();
        exe.run().unwrap();
        (exe.get_output(0).unwrap().to_f64_vec(), transforms)
    };
    let (plain, _) = run(None);
    let (nhwc, transforms) = run(Some(Layout::Nhwc));
    assert_eq!(transforms, 2, "layout transforms in the NHWC plan");
    for (a, b) in plain.iter().zip(&nhwc) {
        assert!((a - b).abs() <= 1e-4 * a.abs().max(1.0), "{a} against {b}");
    }
    assert!(plain.iter().any(|v| *v != 0.0));
}

/// The same operator on the same constant, repeated (an unrolled recurrence slicing its
/// weights at every step), folds into one constant, not a copy per repetition. (The
/// weight is larger than what the importer evaluates itself, so the graph's constant
/// folding does it.)
#[test]
fn equal_folded_constants_are_one() {
    let nodes = vec![
        node("Slice", "s1", &["w", "st", "en"], &["w1"], vec![]),
        node("Slice", "s2", &["w", "st", "en"], &["w2"], vec![]),
        node("MatMul", "m1", &["x", "w1"], &["a"], vec![]),
        node("MatMul", "m2", &["a", "w2"], &["y"], vec![]),
    ];
    let inits = vec![
        f32_tensor("w", &[300, 256], 1),
        i64_tensor("st", &[0]),
        i64_tensor("en", &[256]),
    ];
    let m = with_io(model(nodes, inits, 13), &[1, 256], &[1, 256]);
    let g = optimized(&m);
    // one 256 × 256 slice, transposed once for the dense products
    assert_eq!(g.num_params(), 256 * 256, "{g}");
    let x = NDArray::from_slice_f32(&[1, 256], &[0.5; 256]).unwrap();
    let mut exe = build(&g, &Target::cpu()).unwrap();
    exe.set_input("x", &x).unwrap();
    exe.run().unwrap();
    assert!(exe
        .get_output(0)
        .unwrap()
        .to_f64_vec()
        .iter()
        .any(|v| *v != 0.0));
}

/// A reduction whose axes are a network input (as ONNX allows from opset 18) imports
/// when the caller gives the input's value: the module is built for it, keeps it
/// through its file, runs with it, and refuses another value naming what it decides.
#[test]
fn an_input_that_decides_axes_is_built_for_its_given_value() {
    let mut m = model(
        vec![node(
            "ReduceSum",
            "r",
            &["x", "axes"],
            &["y"],
            vec![int_attr("keepdims", 0)],
        )],
        vec![],
        18,
    );
    let g = m.graph.as_mut().unwrap();
    g.input = vec![value_info("x", &[2, 3]), value_info("axes", &[1])];
    g.input[1].r#type = Some(proto::TypeProto {
        value: Some(proto::type_proto::Value::TensorType(
            proto::type_proto::Tensor {
                elem_type: Some(T::Int64 as i32),
                shape: value_info("axes", &[1]).r#type.and_then(|t| match t.value {
                    Some(proto::type_proto::Value::TensorType(t)) => t.shape,
                    _ => None,
                }),
            },
        )),
        ..Default::default()
    });
    g.output = vec![value_info("y", &[2])];
    let bytes = m.encode_to_vec();
    // without the value, the refusal names the input and how to give it
    let e = import(&bytes, Path::new("."), &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`axes`") && e.contains("--input axes=FILE"),
        "{e}"
    );
    let axes = NDArray::from_slice::<i64>(&[1], &[1]).unwrap();
    let mut options = ImportOptions::default();
    options.input_values.insert("axes".into(), axes.clone());
    let g = import(&bytes, Path::new("."), &options).unwrap();
    assert_eq!(g.fixed_inputs().len(), 1);
    assert!(g.to_string().contains("fixed %axes = [1.0]"), "{g}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.tsm");
    let backend = tessera_backends::CpuBackend::new(Target::cpu());
    tessera_graph::compile(&g, &backend, None)
        .unwrap()
        .save(&file)
        .unwrap();
    let mut exe = tessera_graph::CompiledNetwork::read(&file)
        .unwrap()
        .load(std::sync::Arc::new(tessera_runtime::CpuDevice::new()))
        .unwrap();
    let x = NDArray::from_slice_f32(&[2, 3], &[1., 2., 3., 4., 5., 6.]).unwrap();
    exe.set_input("x", &x).unwrap();
    // an input not given is fed the value the module was built for
    assert_eq!(exe.default_input(1).unwrap().to_f64_vec(), vec![1.0]);
    exe.set_input("axes", &axes).unwrap();
    exe.run().unwrap();
    assert_eq!(exe.get_output(0).unwrap().to_f64_vec(), vec![6.0, 15.0]);
    let e = exe
        .set_input("axes", &NDArray::from_slice::<i64>(&[1], &[0]).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("[0]") && e.contains("built for [1]") && e.contains("the axes of `r`"),
        "{e}"
    );
}

/// Axes computed in the network from an input whose value is given (`axes − 1`) are
/// evaluated at import, and the input is fixed as when it is the axes itself.
#[test]
fn axes_computed_from_a_given_input_are_evaluated_at_import() {
    let mut m = model(
        vec![
            node("Sub", "minus", &["axes_plus_one", "one"], &["axes"], vec![]),
            node(
                "ReduceSum",
                "r",
                &["x", "axes"],
                &["y"],
                vec![int_attr("keepdims", 0)],
            ),
        ],
        vec![i64_tensor("one", &[1])],
        18,
    );
    let g = m.graph.as_mut().unwrap();
    let mut given = value_info("axes_plus_one", &[1]);
    if let Some(proto::type_proto::Value::TensorType(t)) =
        given.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = Some(T::Int64 as i32);
    }
    g.input = vec![value_info("x", &[2, 3]), given];
    g.output = vec![value_info("y", &[2])];
    let bytes = m.encode_to_vec();
    let e = import(&bytes, Path::new("."), &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("computed in the network"), "{e}");
    let mut options = ImportOptions::default();
    let two = NDArray::from_slice::<i64>(&[1], &[2]).unwrap();
    options
        .input_values
        .insert("axes_plus_one".into(), two.clone());
    let g = import(&bytes, Path::new("."), &options).unwrap();
    assert_eq!(g.fixed_inputs().len(), 1);
    let mut exe = build(&g, &Target::cpu()).unwrap();
    let x = NDArray::from_slice_f32(&[2, 3], &[1., 2., 3., 4., 5., 6.]).unwrap();
    exe.set_input("x", &x).unwrap();
    exe.set_input("axes_plus_one", &two).unwrap();
    exe.run().unwrap();
    assert_eq!(exe.get_output(0).unwrap().to_f64_vec(), vec![6.0, 15.0]);
    let one = NDArray::from_slice::<i64>(&[1], &[1]).unwrap();
    assert!(exe.set_input("axes_plus_one", &one).is_err());
}
