//! The ONNX importer on mutated bytes: valid models (a small CNN, several operator
//! families, shape arithmetic, initializers, old and new opsets) with bytes overwritten,
//! flipped, inserted or cut, and bytes at random. Whatever the bytes, the import returns
//! a graph or an error, and a graph that imports goes through the graph passes: never
//! a panic, never an abort (a huge allocation is an error too).

mod onnx_proto;
use onnx_proto::*;

use proptest::prelude::*;
use prost::Message;
use std::path::Path;
use tessera_graph::onnx::proto::{
    self, tensor_proto::DataType as T, AttributeProto, NodeProto, TensorProto,
};
use tessera_graph::onnx::{import, ImportOptions};
use tessera_graph::{passes, Layout};

/// A seed: `nodes` on the initializers `inits`, input `x` of shape `input`, output `y`.
fn seed(nodes: Vec<NodeProto>, inits: Vec<TensorProto>, input: &[i64], opset: i64) -> Vec<u8> {
    with_io(model(nodes, inits, opset), input, &[]).encode_to_vec()
}

/// A float32 tensor of small deterministic values.
fn floats(name: &str, dims: &[i64]) -> TensorProto {
    f32_tensor(name, dims, dims.len() as u32)
}

/// A named node (the output's name after the operator's).
fn op(op: &str, ins: &[&str], outs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    node(op, &format!("{op}_{}", outs[0]), ins, outs, attrs)
}

/// Valid models the mutations start from.
fn seeds() -> Vec<Vec<u8>> {
    vec![
        small_cnn().encode_to_vec(),
        // conv, batch norm, relu, pool, flatten by shape arithmetic, gemm
        seed(
            vec![
                op(
                    "Conv",
                    &["x", "w", "b"],
                    &["c"],
                    vec![ints_attr("pads", &[1, 1, 1, 1])],
                ),
                op(
                    "BatchNormalization",
                    &["c", "s", "b", "m", "v"],
                    &["n"],
                    vec![],
                ),
                op("Relu", &["n"], &["r"], vec![]),
                op(
                    "MaxPool",
                    &["r"],
                    &["p"],
                    vec![
                        ints_attr("kernel_shape", &[2, 2]),
                        ints_attr("strides", &[2, 2]),
                    ],
                ),
                op("Shape", &["p"], &["sh"], vec![]),
                op("Gather", &["sh", "zero"], &["n0"], vec![]),
                op("Unsqueeze", &["n0"], &["n1"], vec![ints_attr("axes", &[0])]),
                op("ConstantOfShape", &["one"], &["m1"], vec![]),
                op(
                    "Concat",
                    &["n1", "minus1"],
                    &["spec"],
                    vec![int_attr("axis", 0)],
                ),
                op("Reshape", &["p", "spec"], &["f"], vec![]),
                op(
                    "Gemm",
                    &["f", "fc", "fcb"],
                    &["y"],
                    vec![int_attr("transB", 1)],
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
                    ..i64_tensor("zero", &[0])
                },
                i64_tensor("one", &[1]),
                i64_tensor("minus1", &[-1]),
                floats("fc", &[5, 16]),
                floats("fcb", &[5]),
            ],
            &[1, 3, 4, 4],
            11,
        ),
        // reductions, split, slice, pad, resize, where
        seed(
            vec![
                op(
                    "ReduceMean",
                    &["x"],
                    &["rm"],
                    vec![ints_attr("axes", &[1]), int_attr("keepdims", 1)],
                ),
                op("Sub", &["x", "rm"], &["d"], vec![]),
                op("Split", &["d"], &["s0", "s1"], vec![int_attr("axis", 2)]),
                op("Slice", &["s0", "st", "en", "ax"], &["sl"], vec![]),
                op("Pad", &["sl", "pads"], &["pd"], vec![]),
                op("Resize", &["pd", "", "scales"], &["rs"], vec![]),
                op("Greater", &["rs", "rs"], &["g"], vec![]),
                op("Where", &["g", "rs", "rs"], &["y"], vec![]),
            ],
            vec![
                i64_tensor("st", &[0]),
                i64_tensor("en", &[1]),
                i64_tensor("ax", &[3]),
                i64_tensor("pads", &[0, 0, 1, 1, 0, 0, 1, 1]),
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
        seed(
            vec![
                op(
                    "ConvTranspose",
                    &["x", "wt"],
                    &["ct"],
                    vec![
                        ints_attr("strides", &[2, 2]),
                        ints_attr("pads", &[1, 1, 1, 1]),
                    ],
                ),
                op("LRN", &["ct"], &["l"], vec![int_attr("size", 3)]),
                op("InstanceNormalization", &["l", "s2", "b2"], &["in"], vec![]),
                op("Tile", &["in", "reps"], &["t"], vec![]),
                op(
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
                op("Gather", &["rp", "idx"], &["g"], vec![int_attr("axis", 1)]),
                op("Expand", &["g", "eshape"], &["y"], vec![]),
            ],
            vec![
                floats("wt", &[3, 2, 3, 3]),
                floats("s2", &[2]),
                floats("b2", &[2]),
                i64_tensor("reps", &[1, 1, 1, 2]),
                i64_tensor("rpads", &[0, 0, 1, 1, 0, 0, 1, 1]),
                i64_tensor("idx", &[1, 0]),
                i64_tensor("eshape", &[2, 1, 1, 1, 1]),
            ],
            &[1, 3, 4, 4],
            13,
        ),
        // an old opset: attributes where inputs came later
        seed(
            vec![
                op(
                    "Reshape",
                    &["x"],
                    &["r"],
                    vec![ints_attr("shape", &[1, -1])],
                ),
                op("Softmax", &["r"], &["y"], vec![]),
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

/// Imports `bytes` and, when a graph comes out, runs the graph passes on it: whatever
/// the result, returning is what counts.
fn no_panic(bytes: &[u8]) {
    if let Ok(mut g) = import(bytes, Path::new("."), &ImportOptions::default()) {
        let _ = passes::optimize(&mut g, Some(Layout::Nhwc));
    }
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
        seed in 0usize..5,
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
