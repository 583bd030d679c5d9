//! The ONNX importer on mutated bytes: valid models (several operator families, shape
//! arithmetic, initializers, old and new opsets) with bytes flipped, inserted or cut,
//! and bytes at random. Whatever the bytes, the import returns a graph or an error:
//! never a panic, never an abort (a huge allocation is an error too).

use proptest::prelude::*;
use prost::Message;
use std::path::Path;
use tessera_graph::onnx::proto::{
    self, tensor_proto::DataType as T, type_proto, AttributeProto, GraphProto, ModelProto,
    NodeProto, OperatorSetIdProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use tessera_graph::onnx::{import, ImportOptions};

fn value_info(name: &str, shape: &[i64]) -> ValueInfoProto {
    let dim = shape
        .iter()
        .map(|&d| proto::tensor_shape_proto::Dimension {
            value: Some(proto::tensor_shape_proto::dimension::Value::DimValue(d)),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(T::Float as i32),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn attr_ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        ints: v.to_vec(),
        r#type: Some(proto::attribute_proto::AttributeType::Ints as i32),
        ..Default::default()
    }
}

fn attr_int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        i: Some(v),
        r#type: Some(proto::attribute_proto::AttributeType::Int as i32),
        ..Default::default()
    }
}

fn node(op: &str, ins: &[&str], outs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(format!("{op}_{}", outs[0])),
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: outs.iter().map(|s| s.to_string()).collect(),
        attribute: attrs,
        ..Default::default()
    }
}

fn floats(name: &str, dims: &[i64]) -> TensorProto {
    let n: i64 = dims.iter().product();
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(T::Float as i32),
        float_data: (0..n).map(|i| (i % 7) as f32 * 0.1 - 0.3).collect(),
        ..Default::default()
    }
}

fn ints(name: &str, v: &[i64]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: vec![v.len() as i64],
        data_type: Some(T::Int64 as i32),
        raw_data: Some(v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        ..Default::default()
    }
}

fn model(nodes: Vec<NodeProto>, inits: Vec<TensorProto>, input: &[i64], opset: i64) -> Vec<u8> {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(opset),
        }],
        graph: Some(GraphProto {
            name: Some("g".into()),
            node: nodes,
            initializer: inits,
            input: vec![value_info("x", input)],
            output: vec![value_info("y", &[])],
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec()
}

/// Valid models the mutations start from.
fn seeds() -> Vec<Vec<u8>> {
    vec![
        // conv, batch norm, relu, pool, flatten by shape arithmetic, gemm
        model(
            vec![
                node(
                    "Conv",
                    &["x", "w", "b"],
                    &["c"],
                    vec![attr_ints("pads", &[1, 1, 1, 1])],
                ),
                node(
                    "BatchNormalization",
                    &["c", "s", "b", "m", "v"],
                    &["n"],
                    vec![],
                ),
                node("Relu", &["n"], &["r"], vec![]),
                node(
                    "MaxPool",
                    &["r"],
                    &["p"],
                    vec![
                        attr_ints("kernel_shape", &[2, 2]),
                        attr_ints("strides", &[2, 2]),
                    ],
                ),
                node("Shape", &["p"], &["sh"], vec![]),
                node("Gather", &["sh", "zero"], &["n0"], vec![]),
                node("Unsqueeze", &["n0"], &["n1"], vec![attr_ints("axes", &[0])]),
                node("ConstantOfShape", &["one"], &["m1"], vec![]),
                node(
                    "Concat",
                    &["n1", "minus1"],
                    &["spec"],
                    vec![attr_int("axis", 0)],
                ),
                node("Reshape", &["p", "spec"], &["f"], vec![]),
                node(
                    "Gemm",
                    &["f", "fc", "fcb"],
                    &["y"],
                    vec![attr_int("transB", 1)],
                ),
            ],
            vec![
                floats("w", &[4, 3, 3, 3]),
                floats("b", &[4]),
                floats("s", &[4]),
                floats("m", &[4]),
                floats("v", &[4]),
                TensorProto {
                    dims: vec![],
                    ..ints("zero", &[0])
                },
                ints("one", &[1]),
                ints("minus1", &[-1]),
                floats("fc", &[5, 16]),
                floats("fcb", &[5]),
            ],
            &[1, 3, 4, 4],
            11,
        ),
        // reductions, split, slice, pad, resize, where
        model(
            vec![
                node(
                    "ReduceMean",
                    &["x"],
                    &["rm"],
                    vec![attr_ints("axes", &[1]), attr_int("keepdims", 1)],
                ),
                node("Sub", &["x", "rm"], &["d"], vec![]),
                node("Split", &["d"], &["s0", "s1"], vec![attr_int("axis", 2)]),
                node("Slice", &["s0", "st", "en", "ax"], &["sl"], vec![]),
                node("Pad", &["sl", "pads"], &["pd"], vec![]),
                node("Resize", &["pd", "", "scales"], &["rs"], vec![]),
                node("Greater", &["rs", "rs"], &["g"], vec![]),
                node("Where", &["g", "rs", "rs"], &["y"], vec![]),
            ],
            vec![
                ints("st", &[0]),
                ints("en", &[1]),
                ints("ax", &[3]),
                ints("pads", &[0, 0, 1, 1, 0, 0, 1, 1]),
                TensorProto {
                    name: Some("scales".into()),
                    dims: vec![4],
                    data_type: Some(T::Float as i32),
                    float_data: vec![1.0, 1.0, 2.0, 2.0],
                    ..Default::default()
                },
            ],
            &[1, 2, 4, 4],
            13,
        ),
        // transposed convolution, tile, reflect pad, expand, gather, LRN, instance norm
        model(
            vec![
                node(
                    "ConvTranspose",
                    &["x", "wt"],
                    &["ct"],
                    vec![
                        attr_ints("strides", &[2, 2]),
                        attr_ints("pads", &[1, 1, 1, 1]),
                    ],
                ),
                node("LRN", &["ct"], &["l"], vec![attr_int("size", 3)]),
                node("InstanceNormalization", &["l", "s2", "b2"], &["in"], vec![]),
                node("Tile", &["in", "reps"], &["t"], vec![]),
                node(
                    "Pad",
                    &["t", "rpads"],
                    &["rp"],
                    vec![AttributeProto {
                        name: Some("mode".into()),
                        s: Some(b"reflect".to_vec()),
                        r#type: Some(proto::attribute_proto::AttributeType::String as i32),
                        ..Default::default()
                    }],
                ),
                node("Gather", &["rp", "idx"], &["g"], vec![attr_int("axis", 1)]),
                node("Expand", &["g", "eshape"], &["y"], vec![]),
            ],
            vec![
                floats("wt", &[3, 2, 3, 3]),
                floats("s2", &[2]),
                floats("b2", &[2]),
                ints("reps", &[1, 1, 1, 2]),
                ints("rpads", &[0, 0, 1, 1, 0, 0, 1, 1]),
                ints("idx", &[1, 0]),
                ints("eshape", &[2, 1, 1, 1, 1]),
            ],
            &[1, 3, 4, 4],
            13,
        ),
        // an old opset: attributes where inputs came later
        model(
            vec![
                node(
                    "Reshape",
                    &["x"],
                    &["r"],
                    vec![attr_ints("shape", &[1, -1])],
                ),
                node("Softmax", &["r"], &["y"], vec![]),
            ],
            vec![],
            &[1, 2, 3],
            1,
        ),
    ]
}

/// Applies `edits` (position fraction, byte, kind) to `bytes`.
fn mutate(bytes: &[u8], edits: &[(f64, u8, u8)]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for &(at, byte, kind) in edits {
        if out.is_empty() {
            out.push(byte);
            continue;
        }
        let i = ((out.len() as f64) * at) as usize % out.len();
        match kind % 4 {
            0 => out[i] = byte,
            1 => out[i] ^= 1 << (byte % 8),
            2 => out.insert(i, byte),
            _ => out.truncate(i.max(1)),
        }
    }
    out
}

fn no_panic(bytes: &[u8]) {
    // the result does not matter; returning does
    let _ = import(bytes, Path::new("."), &ImportOptions::default());
}

#[test]
fn the_seeds_are_valid_models() {
    for (i, s) in seeds().iter().enumerate() {
        if let Err(e) = import(s, Path::new("."), &ImportOptions::default()) {
            panic!("seed {i}: {e}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn mutated_models_import_or_fail_cleanly(
        seed in 0usize..4,
        edits in prop::collection::vec((0.0f64..1.0, any::<u8>(), any::<u8>()), 1..8),
    ) {
        let bytes = mutate(&seeds()[seed], &edits);
        no_panic(&bytes);
    }

    #[test]
    fn random_bytes_import_or_fail_cleanly(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        no_panic(&bytes);
    }
}

/// Every single-bit flip of every seed: most break the encoding, but many reach the
/// converters with a changed attribute, dimension or name, and some still import.
#[test]
fn every_single_bit_flip_imports_or_fails_cleanly() {
    let (mut ok, mut total) = (0, 0);
    for seed in seeds() {
        for i in 0..seed.len() {
            for bit in 0..8 {
                let mut b = seed.clone();
                b[i] ^= 1 << bit;
                total += 1;
                if import(&b, Path::new("."), &ImportOptions::default()).is_ok() {
                    ok += 1;
                }
            }
        }
    }
    eprintln!("{ok} of {total} single-bit flips still import");
    assert!(
        ok > total / 20,
        "only {ok} of {total} flips import: the fuzz stays shallow"
    );
}
