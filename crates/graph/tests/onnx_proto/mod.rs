//! Builders of ONNX protobufs for the importer's tests (`onnx.rs`, `onnx_fuzz.rs`):
//! value infos, nodes, attributes, tensors, a model around them, and the small CNN both
//! corrupt and check.
#![allow(dead_code)]

use tessera_graph::onnx::proto::{
    self, tensor_proto::DataType as T, type_proto, AttributeProto, GraphProto, ModelProto,
    NodeProto, OperatorSetIdProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};

pub fn value_info(name: &str, shape: &[i64]) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(T::Float as i32),
                shape: Some(TensorShapeProto {
                    dim: shape
                        .iter()
                        .map(|&d| proto::tensor_shape_proto::Dimension {
                            value: Some(proto::tensor_shape_proto::dimension::Value::DimValue(d)),
                            ..Default::default()
                        })
                        .collect(),
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn node(
    op: &str,
    name: &str,
    inputs: &[&str],
    outputs: &[&str],
    attrs: Vec<AttributeProto>,
) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(name.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        attribute: attrs,
        ..Default::default()
    }
}

pub fn model(nodes: Vec<NodeProto>, inits: Vec<TensorProto>, opset: i64) -> ModelProto {
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
            input: vec![value_info("x", &[1, 4])],
            output: vec![value_info("y", &[1, 4])],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `m` with one float32 input `x` of shape `input` and one output `y` of shape `output`.
pub fn with_io(mut m: ModelProto, input: &[i64], output: &[i64]) -> ModelProto {
    let g = m.graph.as_mut().expect("a graph");
    g.input = vec![value_info("x", input)];
    g.output = vec![value_info("y", output)];
    m
}

pub fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        i: Some(v),
        r#type: Some(proto::attribute_proto::AttributeType::Int as i32),
        ..Default::default()
    }
}

pub fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        ints: v.to_vec(),
        r#type: Some(proto::attribute_proto::AttributeType::Ints as i32),
        ..Default::default()
    }
}

pub fn f32_tensor(name: &str, dims: &[i64], seed: u32) -> TensorProto {
    let n: i64 = dims.iter().product();
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(T::Float as i32),
        float_data: (0..n as u32)
            .map(|i| {
                ((i.wrapping_mul(2654435761).wrapping_add(seed) >> 16) % 200) as f32 / 100.0 - 1.0
            })
            .collect(),
        ..Default::default()
    }
}

/// Conv + Relu + MaxPool + Flatten + Gemm + Softmax with initializers: one of the models
/// the fuzz corrupts.
pub fn small_cnn() -> ModelProto {
    let nodes = vec![
        node(
            "Conv",
            "conv",
            &["x", "w", "b"],
            &["c"],
            vec![
                ints_attr("pads", &[1, 1, 1, 1]),
                ints_attr("kernel_shape", &[3, 3]),
            ],
        ),
        node("Relu", "relu", &["c"], &["r"], vec![]),
        node(
            "MaxPool",
            "pool",
            &["r"],
            &["p"],
            vec![
                ints_attr("kernel_shape", &[2, 2]),
                ints_attr("strides", &[2, 2]),
            ],
        ),
        node("Flatten", "flat", &["p"], &["f"], vec![int_attr("axis", 1)]),
        node(
            "Gemm",
            "fc",
            &["f", "w2", "b2"],
            &["g"],
            vec![int_attr("transB", 1)],
        ),
        node("Softmax", "sm", &["g"], &["y"], vec![int_attr("axis", 1)]),
    ];
    let inits = vec![
        f32_tensor("w", &[4, 3, 3, 3], 1),
        f32_tensor("b", &[4], 2),
        f32_tensor("w2", &[10, 64], 3),
        f32_tensor("b2", &[10], 4),
    ];
    with_io(model(nodes, inits, 13), &[1, 3, 8, 8], &[1, 10])
}

/// A 1-D int64 tensor (raw data).
pub fn i64_tensor(name: &str, v: &[i64]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: vec![v.len() as i64],
        data_type: Some(T::Int64 as i32),
        raw_data: Some(v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        ..Default::default()
    }
}
