//! The ONNX frontend: a `ModelProto` (decoded by prost from the bindings generated from
//! `onnx.proto`) becomes a [`Graph`].
//!
//! Supported: the operators of torchvision's ResNet / MobileNet / SqueezeNet /
//! Inception exports and the model-zoo ResNet v2 (see [`SUPPORTED_OPS`]), opsets 7 to
//! 21 (tested: 11 to 18), initializers with raw or typed data, external data files, and
//! the shape arithmetic of exported graphs (`Shape`, `Gather`, `Unsqueeze`, `Concat`,
//! `Cast`, `Slice`… on values known at import time), which is folded while importing. An
//! unsupported operator is an error naming it and its node; a malformed file is an
//! error, never a panic.

#[rustfmt::skip]
#[allow(clippy::all, missing_docs, rustdoc::all)]
pub mod proto;

use crate::error::GraphError;
use crate::ir::{Binary, Graph, Layout, Op, TensorType, Unary};
use crate::reference::permute;
use petgraph::stable_graph::NodeIndex;
use prost::Message;
use proto::tensor_proto::DataType as OnnxType;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tessera_ir::DataType;
use tessera_runtime::NDArray;
use tessera_te::ops::{Conv2dAttrs, Pool2dAttrs, PoolType};

/// The operator types the importer knows.
pub const SUPPORTED_OPS: &[&str] = &[
    "Add",
    "AveragePool",
    "BatchNormalization",
    "Cast",
    "Clip",
    "Concat",
    "Constant",
    "Conv",
    "Div",
    "Dropout",
    "Erf",
    "Exp",
    "Flatten",
    "Gather",
    "Gemm",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "Identity",
    "MatMul",
    "Max",
    "MaxPool",
    "Min",
    "Mul",
    "Pad",
    "ReduceMean",
    "Relu",
    "Reshape",
    "Shape",
    "Sigmoid",
    "Slice",
    "Softmax",
    "Sqrt",
    "Squeeze",
    "Sub",
    "Tanh",
    "Transpose",
    "Unsqueeze",
];

fn err(msg: impl Into<String>) -> GraphError {
    GraphError::Onnx(msg.into())
}

/// How to import.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Shapes for inputs whose shape is symbolic (or to override it); symbolic dimensions
    /// without an entry here become 1.
    pub input_shapes: HashMap<String, Vec<i64>>,
}

/// Reads and imports an ONNX file (external data is looked up next to it).
pub fn load(path: &Path, options: &ImportOptions) -> Result<Graph, GraphError> {
    let bytes = std::fs::read(path).map_err(|source| GraphError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    import(&bytes, &dir, options)
}

/// Imports a serialized `ModelProto`; `base_dir` is where external data files are.
pub fn import(bytes: &[u8], base_dir: &Path, options: &ImportOptions) -> Result<Graph, GraphError> {
    let model = proto::ModelProto::decode(bytes)
        .map_err(|e| err(format!("not a valid ONNX model: {e}")))?;
    let opset = model
        .opset_import
        .iter()
        .find(|o| matches!(o.domain(), "" | "ai.onnx"))
        .map(|o| o.version())
        .ok_or_else(|| err("the model imports no version of the default operator set"))?;
    if !(7..=21).contains(&opset) {
        return Err(err(format!(
            "opset {opset} is not supported (7 to 21 are; 11 to 18 are tested)"
        )));
    }
    let graph = model
        .graph
        .as_ref()
        .ok_or_else(|| err("the model has no graph"))?;
    let mut imp = Importer {
        g: Graph::new(if graph.name().is_empty() {
            "onnx"
        } else {
            graph.name()
        }),
        values: HashMap::new(),
        opset,
        base_dir: base_dir.to_path_buf(),
    };
    for t in &graph.initializer {
        let v = imp.tensor(t)?;
        let c = imp.g.constant(t.name(), v);
        imp.values.insert(t.name().to_string(), c);
    }
    for vi in &graph.input {
        if imp.values.contains_key(vi.name()) {
            continue; // an initializer listed as an input (older exporters)
        }
        let ty = input_type(vi, options)?;
        let n = imp.g.input(vi.name(), ty);
        imp.values.insert(vi.name().to_string(), n);
    }
    for (i, node) in graph.node.iter().enumerate() {
        let label = if node.name().is_empty() {
            format!("#{i} ({})", node.op_type())
        } else {
            node.name().to_string()
        };
        imp.node(node, &label)?;
    }
    let mut outs = Vec::new();
    for o in &graph.output {
        let n = imp.value(o.name(), "the graph outputs")?;
        outs.push(n);
    }
    if outs.is_empty() {
        return Err(err("the graph has no outputs"));
    }
    imp.g.set_outputs(outs);
    imp.g.validate()?;
    crate::passes::dead_code_elimination(&mut imp.g);
    Ok(imp.g)
}

fn input_type(
    vi: &proto::ValueInfoProto,
    options: &ImportOptions,
) -> Result<TensorType, GraphError> {
    let name = vi.name();
    let Some(proto::type_proto::Value::TensorType(t)) =
        vi.r#type.as_ref().and_then(|t| t.value.as_ref())
    else {
        return Err(err(format!("input `{name}` is not a tensor")));
    };
    let dtype = dtype_of(t.elem_type()).ok_or_else(|| {
        err(format!(
            "input `{name}` has an unsupported element type {}",
            t.elem_type()
        ))
    })?;
    if let Some(s) = options.input_shapes.get(name) {
        return Ok(TensorType::new(s, dtype));
    }
    let dims = t.shape.as_ref().map(|s| s.dim.as_slice()).unwrap_or(&[]);
    let shape: Vec<i64> = dims
        .iter()
        .map(|d| match &d.value {
            Some(proto::tensor_shape_proto::dimension::Value::DimValue(v)) if *v > 0 => *v,
            _ => 1,
        })
        .collect();
    Ok(TensorType::new(&shape, dtype))
}

fn dtype_of(t: i32) -> Option<DataType> {
    Some(match OnnxType::try_from(t).ok()? {
        OnnxType::Float => DataType::float32(),
        OnnxType::Double => DataType::float64(),
        OnnxType::Int64 => DataType::int64(),
        OnnxType::Int32 => DataType::int32(),
        OnnxType::Int8 => DataType::int(8),
        OnnxType::Uint8 => DataType::uint(8),
        OnnxType::Bool => DataType::bool(),
        _ => return None,
    })
}

struct Importer {
    g: Graph,
    values: HashMap<String, NodeIndex>,
    opset: i64,
    base_dir: PathBuf,
}

/// The attributes of one node, by name.
struct Attrs<'a> {
    map: HashMap<&'a str, &'a proto::AttributeProto>,
    label: &'a str,
    op: &'a str,
}

impl<'a> Attrs<'a> {
    fn int(&self, name: &str, default: i64) -> i64 {
        self.map.get(name).and_then(|a| a.i).unwrap_or(default)
    }
    fn float(&self, name: &str, default: f32) -> f32 {
        self.map.get(name).and_then(|a| a.f).unwrap_or(default)
    }
    fn ints(&self, name: &str) -> Option<Vec<i64>> {
        self.map.get(name).map(|a| a.ints.clone())
    }
    fn string(&self, name: &str) -> Option<String> {
        self.map
            .get(name)
            .and_then(|a| a.s.as_ref())
            .map(|s| String::from_utf8_lossy(s).into_owned())
    }
    fn bad(&self, what: impl std::fmt::Display) -> GraphError {
        err(format!("node `{}` ({}): {what}", self.label, self.op))
    }
}

impl Importer {
    fn value(&self, name: &str, user: &str) -> Result<NodeIndex, GraphError> {
        self.values.get(name).copied().ok_or_else(|| {
            err(format!(
                "{user}: value `{name}` is not defined before its use"
            ))
        })
    }

    /// Decodes a tensor (raw, typed or external data).
    fn tensor(&self, t: &proto::TensorProto) -> Result<NDArray, GraphError> {
        let name = t.name();
        let dtype = dtype_of(t.data_type()).ok_or_else(|| {
            err(format!(
                "tensor `{name}`: unsupported data type {}",
                t.data_type()
            ))
        })?;
        if t.dims.iter().any(|&d| d < 0) {
            return Err(err(format!(
                "tensor `{name}`: negative dimension in {:?}",
                t.dims
            )));
        }
        let shape: Vec<usize> = t.dims.iter().map(|&d| d as usize).collect();
        let numel = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        let numel = numel.ok_or_else(|| err(format!("tensor `{name}`: too large")))?;
        let size = if dtype.is_bool() { 1 } else { dtype.bytes() };
        let external = t.data_location() == proto::tensor_proto::DataLocation::External;
        let raw: Option<Vec<u8>> = if external {
            Some(self.external(t)?)
        } else {
            t.raw_data.clone()
        };
        // The data must fit the shape before anything is allocated for it: a malformed
        // shape must not become a huge allocation.
        if let Some(raw) = raw {
            if Some(raw.len()) != numel.checked_mul(size) {
                return Err(err(format!(
                    "tensor `{name}`: {} bytes of data for {numel} elements of {dtype}",
                    raw.len()
                )));
            }
            let mut out = NDArray::zeros(dtype, &shape)?;
            out.as_bytes_mut().copy_from_slice(&raw);
            return Ok(out);
        }
        let typed_len = match dtype {
            d if d == DataType::float32() => t.float_data.len(),
            d if d == DataType::float64() => t.double_data.len(),
            d if d == DataType::int64() => t.int64_data.len(),
            _ => t.int32_data.len(),
        };
        if typed_len != numel {
            return Err(err(format!(
                "tensor `{name}`: {typed_len} values for shape {:?}",
                t.dims
            )));
        }
        let mut out = NDArray::zeros(dtype, &shape)?;
        let bytes = out.as_bytes_mut();
        match dtype {
            d if d == DataType::float32() => {
                for (i, v) in t.float_data.iter().enumerate() {
                    bytes[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
                }
            }
            d if d == DataType::float64() => {
                for (i, v) in t.double_data.iter().enumerate() {
                    bytes[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
                }
            }
            d if d == DataType::int64() => {
                for (i, v) in t.int64_data.iter().enumerate() {
                    bytes[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
                }
            }
            _ => {
                for (i, &v) in t.int32_data.iter().enumerate() {
                    let le = v.to_le_bytes();
                    bytes[i * size..(i + 1) * size].copy_from_slice(&le[..size]);
                }
            }
        }
        Ok(out)
    }

    /// Reads the external data of a tensor: `location` relative to the model's folder,
    /// optional `offset` and `length`.
    fn external(&self, t: &proto::TensorProto) -> Result<Vec<u8>, GraphError> {
        let name = t.name();
        let get = |k: &str| {
            t.external_data
                .iter()
                .find(|e| e.key() == k)
                .map(|e| e.value().to_string())
        };
        let location = get("location")
            .ok_or_else(|| err(format!("tensor `{name}`: external data without a location")))?;
        let rel = Path::new(&location);
        if rel.is_absolute()
            || rel
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(err(format!(
                "tensor `{name}`: external data location `{location}` must stay inside the model's folder"
            )));
        }
        let path = self.base_dir.join(rel);
        let data = std::fs::read(&path).map_err(|source| GraphError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let parse = |k: &str| -> Result<Option<usize>, GraphError> {
            get(k)
                .map(|v| {
                    v.parse::<usize>()
                        .map_err(|_| err(format!("tensor `{name}`: bad external data {k} `{v}`")))
                })
                .transpose()
        };
        let offset = parse("offset")?.unwrap_or(0);
        let length = parse("length")?.unwrap_or(data.len().saturating_sub(offset));
        let end = offset.checked_add(length).filter(|&e| e <= data.len()).ok_or_else(|| {
            err(format!(
                "tensor `{name}`: external data [{offset}, +{length}) is beyond the end of {} ({} bytes)",
                path.display(),
                data.len()
            ))
        })?;
        Ok(data[offset..end].to_vec())
    }

    fn ty(&self, n: NodeIndex) -> &TensorType {
        &self.g.node(n).ty
    }

    /// The constant value of `n` as integers (for shape arithmetic).
    fn ints_of(&self, n: NodeIndex) -> Option<Vec<i64>> {
        let v = self.g.constant_value(n)?;
        Some(v.to_f64_vec().into_iter().map(|x| x as i64).collect())
    }

    fn int_const(
        &mut self,
        name: &str,
        shape: &[usize],
        v: &[i64],
    ) -> Result<NodeIndex, GraphError> {
        Ok(self.g.constant(name, NDArray::from_slice::<i64>(shape, v)?))
    }

    fn op(&mut self, name: &str, op: Op, ins: &[NodeIndex]) -> Result<NodeIndex, GraphError> {
        self.g.op(name, op, ins)
    }

    fn node(&mut self, node: &proto::NodeProto, label: &str) -> Result<(), GraphError> {
        let op_type = node.op_type();
        if !matches!(node.domain(), "" | "ai.onnx") {
            return Err(err(format!(
                "node `{label}`: operator `{}::{op_type}` of a custom domain is not supported",
                node.domain()
            )));
        }
        let a = Attrs {
            map: node.attribute.iter().map(|a| (a.name(), a)).collect(),
            label,
            op: op_type,
        };
        // Inputs; an empty name is an omitted optional input.
        let mut ins: Vec<Option<NodeIndex>> = Vec::with_capacity(node.input.len());
        for i in &node.input {
            ins.push(if i.is_empty() {
                None
            } else {
                Some(self.value(i, &format!("node `{label}`"))?)
            });
        }
        let input = |k: usize| -> Result<NodeIndex, GraphError> {
            ins.get(k)
                .copied()
                .flatten()
                .ok_or_else(|| a.bad(format!("input {k} is missing")))
        };
        let out_name = node.output.first().cloned().unwrap_or_default();
        let name = if node.name().is_empty() {
            out_name.clone()
        } else {
            node.name().to_string()
        };
        let elementwise = |u| Op::Unary(u);
        let result: NodeIndex = match op_type {
            "Identity" | "Dropout" => {
                if node.output.len() > 1 && !node.output[1].is_empty() && op_type == "Dropout" {
                    // The mask output: all true at inference.
                    let ty = self.ty(input(0)?).clone();
                    let shape: Vec<usize> = ty.shape.iter().map(|&d| d as usize).collect();
                    let mut mask = NDArray::zeros(DataType::bool(), &shape)?;
                    mask.as_bytes_mut().fill(1);
                    let m = self.g.constant(&node.output[1], mask);
                    self.values.insert(node.output[1].clone(), m);
                }
                input(0)?
            }
            "Constant" => {
                let v = if let Some(t) = a.map.get("value").and_then(|x| x.t.as_ref()) {
                    self.tensor(t)?
                } else if let Some(f) = a.map.get("value_float").and_then(|x| x.f) {
                    NDArray::from_slice_f32(&[], &[f])?
                } else if let Some(x) = a.map.get("value_floats") {
                    NDArray::from_slice_f32(&[x.floats.len()], &x.floats)?
                } else if let Some(i) = a.map.get("value_int").and_then(|x| x.i) {
                    NDArray::from_slice::<i64>(&[], &[i])?
                } else if let Some(x) = a.map.get("value_ints") {
                    NDArray::from_slice::<i64>(&[x.ints.len()], &x.ints)?
                } else {
                    return Err(a.bad("no supported value attribute"));
                };
                self.g.constant(&out_name, v)
            }
            "Conv" => self.conv(
                &a,
                &name,
                input(0)?,
                input(1)?,
                ins.get(2).copied().flatten(),
            )?,
            "Gemm" => self.gemm(
                &a,
                &name,
                input(0)?,
                input(1)?,
                ins.get(2).copied().flatten(),
            )?,
            "MatMul" => self.matmul(&name, input(0)?, input(1)?)?,
            "BatchNormalization" => {
                if a.int("training_mode", 0) != 0 {
                    return Err(a.bad("training mode is not supported (inference only)"));
                }
                let eps = a.float("epsilon", 1e-5) as f64;
                let x = input(0)?;
                let ps = [input(1)?, input(2)?, input(3)?, input(4)?];
                self.op(
                    &name,
                    Op::BatchNorm {
                        epsilon: eps,
                        axis: 1,
                    },
                    &[x, ps[0], ps[1], ps[2], ps[3]],
                )?
            }
            "Relu" => self.op(&name, elementwise(Unary::Relu), &[input(0)?])?,
            "Sigmoid" => self.op(&name, elementwise(Unary::Sigmoid), &[input(0)?])?,
            "Tanh" => self.op(&name, elementwise(Unary::Tanh), &[input(0)?])?,
            "Exp" => self.op(&name, elementwise(Unary::Exp), &[input(0)?])?,
            "Sqrt" => self.op(&name, elementwise(Unary::Sqrt), &[input(0)?])?,
            "Erf" => self.op(&name, elementwise(Unary::Erf), &[input(0)?])?,
            "Clip" => {
                let (mut lo, mut hi) = (f32::MIN as f64, f32::MAX as f64);
                if self.opset < 11 {
                    lo = a.float("min", f32::MIN) as f64;
                    hi = a.float("max", f32::MAX) as f64;
                } else {
                    for (k, slot) in [(1usize, &mut lo), (2, &mut hi)] {
                        if let Some(n) = ins.get(k).copied().flatten() {
                            let v = self
                                .g
                                .constant_value(n)
                                .ok_or_else(|| a.bad(format!("input {k} must be a constant")))?;
                            *slot = *v
                                .to_f64_vec()
                                .first()
                                .ok_or_else(|| a.bad(format!("input {k} is empty")))?;
                        }
                    }
                }
                self.op(&name, Op::Clip { min: lo, max: hi }, &[input(0)?])?
            }
            "Add" | "Sub" | "Mul" | "Div" => {
                let b = match op_type {
                    "Add" => Binary::Add,
                    "Sub" => Binary::Sub,
                    "Mul" => Binary::Mul,
                    _ => Binary::Div,
                };
                let (x, y) = (input(0)?, input(1)?);
                match (self.ints_of_int(x), self.ints_of_int(y)) {
                    (Some(p), Some(q)) => self.static_binary(&out_name, b, x, &p, y, &q)?,
                    _ => self.op(&name, Op::Binary(b), &[x, y])?,
                }
            }
            "Max" | "Min" => {
                let b = if op_type == "Max" {
                    Binary::Max
                } else {
                    Binary::Min
                };
                let mut acc = input(0)?;
                for k in 1..ins.len() {
                    acc = self.op(&format!("{name}_{k}"), Op::Binary(b), &[acc, input(k)?])?;
                }
                acc
            }
            "MaxPool" | "AveragePool" => self.pool(&a, &name, input(0)?, op_type == "MaxPool")?,
            "GlobalAveragePool" | "GlobalMaxPool" => {
                let x = input(0)?;
                if self.ty(x).shape.len() != 4 {
                    return Err(a.bad(format!(
                        "only 2-D (4-D tensor) pooling is supported, got {}",
                        self.ty(x)
                    )));
                }
                let kind = if op_type == "GlobalMaxPool" {
                    PoolType::Max
                } else {
                    PoolType::Avg
                };
                self.op(
                    &name,
                    Op::GlobalPool2d {
                        kind,
                        layout: Layout::Nchw,
                    },
                    &[x],
                )?
            }
            "ReduceMean" => {
                let x = input(0)?;
                let axes = if self.opset >= 18 {
                    ins.get(1).copied().flatten().and_then(|n| self.ints_of(n))
                } else {
                    a.ints("axes")
                };
                let rank = self.ty(x).shape.len() as i64;
                let axes: Option<Vec<i64>> = axes.map(|v| {
                    v.iter()
                        .map(|&d| if d < 0 { d + rank } else { d })
                        .collect()
                });
                if rank != 4 || axes.as_deref() != Some(&[2, 3]) {
                    return Err(a.bad(
                        "only the mean over the spatial axes [2, 3] of a 4-D tensor is supported",
                    ));
                }
                let gp = self.op(
                    &name,
                    Op::GlobalPool2d {
                        kind: PoolType::Avg,
                        layout: Layout::Nchw,
                    },
                    &[x],
                )?;
                if a.int("keepdims", 1) == 0 {
                    let s = self.ty(x).shape[..2].to_vec();
                    self.op(&format!("{name}_squeeze"), Op::Reshape { shape: s }, &[gp])?
                } else {
                    gp
                }
            }
            "Softmax" => {
                let x = input(0)?;
                let rank = self.ty(x).shape.len() as i64;
                let default_axis = if self.opset >= 13 { -1 } else { 1 };
                let mut axis = a.int("axis", default_axis);
                if axis < 0 {
                    axis += rank;
                }
                if !(0..rank).contains(&axis) {
                    return Err(a.bad(format!(
                        "axis {} is out of range for rank {rank}",
                        a.int("axis", default_axis)
                    )));
                }
                if self.opset >= 13 || axis == rank - 1 {
                    self.op(&name, Op::Softmax { axis }, &[x])?
                } else {
                    // Before opset 13: softmax of the input flattened to 2-D at `axis`.
                    let s = self.ty(x).shape.clone();
                    let (outer, inner) = (
                        s[..axis as usize].iter().product::<i64>(),
                        s[axis as usize..].iter().product::<i64>(),
                    );
                    let r = self.op(
                        &format!("{name}_2d"),
                        Op::Reshape {
                            shape: vec![outer, inner],
                        },
                        &[x],
                    )?;
                    let sm = self.op(&name, Op::Softmax { axis: 1 }, &[r])?;
                    self.op(&format!("{name}_nd"), Op::Reshape { shape: s }, &[sm])?
                }
            }
            "Concat" => {
                let axis = a.int("axis", 0);
                let xs: Vec<NodeIndex> = (0..ins.len()).map(&input).collect::<Result<_, _>>()?;
                let statics: Option<Vec<Vec<i64>>> =
                    xs.iter().map(|&x| self.ints_of_int(x)).collect();
                match statics {
                    Some(vs) if xs.iter().all(|&x| self.ty(x).shape.len() == 1) => {
                        let all: Vec<i64> = vs.concat();
                        self.int_const(&out_name, &[all.len()], &all)?
                    }
                    _ => self.op(&name, Op::Concat { axis }, &xs)?,
                }
            }
            "Flatten" => {
                let x = input(0)?;
                let s = self.ty(x).shape.clone();
                let mut axis = a.int("axis", 1);
                if axis < 0 {
                    axis += s.len() as i64;
                }
                if axis == 1 && s.len() >= 2 {
                    self.op(&name, Op::Flatten, &[x])?
                } else {
                    let k = axis.clamp(0, s.len() as i64) as usize;
                    let shape = vec![s[..k].iter().product(), s[k..].iter().product()];
                    self.op(&name, Op::Reshape { shape }, &[x])?
                }
            }
            "Reshape" => {
                let x = input(0)?;
                let spec = self
                    .ints_of(input(1)?)
                    .ok_or_else(|| a.bad("the shape must be known at import time"))?;
                let shape = resolve_reshape(&self.ty(x).shape, &spec, a.int("allowzero", 0) != 0)
                    .map_err(|m| a.bad(m))?;
                self.reshape(&name, x, shape)?
            }
            "Squeeze" | "Unsqueeze" => {
                let x = input(0)?;
                let axes = if self.opset >= 13 {
                    ins.get(1)
                        .copied()
                        .flatten()
                        .map(|n| {
                            self.ints_of(n)
                                .ok_or_else(|| a.bad("axes must be a constant"))
                        })
                        .transpose()?
                } else {
                    a.ints("axes")
                };
                let s = self.ty(x).shape.clone();
                let shape = if op_type == "Squeeze" {
                    let rank = s.len() as i64;
                    let axes: Vec<i64> =
                        axes.unwrap_or_else(|| (0..rank).filter(|&i| s[i as usize] == 1).collect());
                    let axes: Vec<i64> = axes
                        .iter()
                        .map(|&d| if d < 0 { d + rank } else { d })
                        .collect();
                    s.iter()
                        .enumerate()
                        .filter(|(i, _)| !axes.contains(&(*i as i64)))
                        .map(|(_, &d)| d)
                        .collect()
                } else {
                    let axes = axes.ok_or_else(|| a.bad("axes are required"))?;
                    let rank = (s.len() + axes.len()) as i64;
                    let mut axes: Vec<i64> = axes
                        .iter()
                        .map(|&d| if d < 0 { d + rank } else { d })
                        .collect();
                    axes.sort();
                    let mut out = s.clone();
                    for &ax in &axes {
                        if ax < 0 || ax as usize > out.len() {
                            return Err(a.bad(format!("axis {ax} is out of range")));
                        }
                        out.insert(ax as usize, 1);
                    }
                    out
                };
                self.reshape(&name, x, shape)?
            }
            "Transpose" => {
                let x = input(0)?;
                let rank = self.ty(x).shape.len() as i64;
                let axes = a.ints("perm").unwrap_or_else(|| (0..rank).rev().collect());
                if let Some(c) = self.g.constant_value(x).cloned() {
                    let p: Vec<usize> = axes.iter().map(|&d| d as usize).collect();
                    if p.iter().any(|&d| d >= c.ndim()) || p.len() != c.ndim() {
                        return Err(a.bad(format!("perm {axes:?} does not fit rank {}", c.ndim())));
                    }
                    let v = permute(&c, &p)?;
                    self.g.constant(&out_name, v)
                } else {
                    self.op(&name, Op::Transpose { axes }, &[x])?
                }
            }
            "Pad" => {
                let x = input(0)?;
                let rank = self.ty(x).shape.len();
                let mode = a.string("mode").unwrap_or_else(|| "constant".into());
                if mode != "constant" {
                    return Err(a.bad(format!(
                        "pad mode `{mode}` is not supported (only constant)"
                    )));
                }
                let (pads, value) = if self.opset < 11 {
                    (
                        a.ints("pads").ok_or_else(|| a.bad("pads are required"))?,
                        a.float("value", 0.0) as f64,
                    )
                } else {
                    let pads = self
                        .ints_of(input(1)?)
                        .ok_or_else(|| a.bad("pads must be a constant"))?;
                    let value = match ins.get(2).copied().flatten() {
                        Some(n) => self
                            .g
                            .constant_value(n)
                            .ok_or_else(|| a.bad("the pad value must be a constant"))?
                            .to_f64_vec()
                            .first()
                            .copied()
                            .unwrap_or(0.0),
                        None => 0.0,
                    };
                    (pads, value)
                };
                let axes: Vec<usize> = match ins.get(3).copied().flatten() {
                    Some(n) => self
                        .ints_of(n)
                        .ok_or_else(|| a.bad("axes must be a constant"))?
                        .iter()
                        .map(|&d| (if d < 0 { d + rank as i64 } else { d }) as usize)
                        .collect(),
                    None => (0..rank).collect(),
                };
                if pads.len() != 2 * axes.len() || axes.iter().any(|&d| d >= rank) {
                    return Err(a.bad(format!(
                        "{} pads for {} axes of a rank-{rank} tensor",
                        pads.len(),
                        axes.len()
                    )));
                }
                let (mut before, mut after) = (vec![0; rank], vec![0; rank]);
                for (k, &ax) in axes.iter().enumerate() {
                    before[ax] = pads[k];
                    after[ax] = pads[k + axes.len()];
                }
                if before.iter().chain(&after).any(|&p| p < 0) {
                    return Err(a.bad("negative pads (cropping) are not supported"));
                }
                self.op(
                    &name,
                    Op::Pad {
                        before,
                        after,
                        value,
                    },
                    &[x],
                )?
            }
            "Shape" => {
                let x = input(0)?;
                let s = self.ty(x).shape.clone();
                let r = s.len() as i64;
                let norm = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
                let start = norm(a.int("start", 0));
                let end = norm(a.int("end", r));
                let v: Vec<i64> = s[start..end.max(start)].to_vec();
                self.int_const(&out_name, &[v.len()], &v)?
            }
            "Gather" => {
                let (x, idx) = (input(0)?, input(1)?);
                let (Some(data), Some(index)) = (self.ints_of_int(x), self.ints_of(idx)) else {
                    return Err(a.bad("only Gather on values known at import time (shape arithmetic) is supported"));
                };
                let xs = self.ty(x).shape.clone();
                if xs.len() != 1 || a.int("axis", 0) != 0 {
                    return Err(a.bad("only Gather from a 1-D constant is supported"));
                }
                let n = data.len() as i64;
                let mut out = Vec::with_capacity(index.len());
                for &i in &index {
                    let j = if i < 0 { i + n } else { i };
                    out.push(
                        *data
                            .get(j as usize)
                            .filter(|_| j >= 0)
                            .ok_or_else(|| a.bad(format!("index {i} is out of range")))?,
                    );
                }
                let shape: Vec<usize> = self.ty(idx).shape.iter().map(|&d| d as usize).collect();
                self.int_const(&out_name, &shape, &out)?
            }
            "Slice" => {
                let x = input(0)?;
                let Some(data) = self.ints_of_int(x).filter(|_| self.ty(x).shape.len() == 1) else {
                    return Err(a.bad("only Slice of a 1-D value known at import time (shape arithmetic) is supported"));
                };
                let (starts, ends) = if self.opset >= 10 {
                    (self.ints_of(input(1)?), self.ints_of(input(2)?))
                } else {
                    (a.ints("starts"), a.ints("ends"))
                };
                let (Some(starts), Some(ends)) = (starts, ends) else {
                    return Err(a.bad("starts and ends must be constants"));
                };
                let step = if self.opset >= 10 {
                    ins.get(4)
                        .copied()
                        .flatten()
                        .and_then(|n| self.ints_of(n))
                        .and_then(|v| v.first().copied())
                        .unwrap_or(1)
                } else {
                    1
                };
                if step != 1 || starts.len() != 1 || ends.len() != 1 {
                    return Err(a.bad("only a single-axis, unit-step slice is supported"));
                }
                let n = data.len() as i64;
                let norm = |v: i64| (if v < 0 { v + n } else { v }).clamp(0, n) as usize;
                let (s, e) = (norm(starts[0]), norm(ends[0]));
                let v: Vec<i64> = data[s..e.max(s)].to_vec();
                self.int_const(&out_name, &[v.len()], &v)?
            }
            "Cast" => {
                let x = input(0)?;
                let to = dtype_of(a.int("to", 1) as i32)
                    .ok_or_else(|| a.bad("unsupported target type"))?;
                if let Some(c) = self.g.constant_value(x).cloned() {
                    let v = c.to_f64_vec();
                    let shape = c.shape().to_vec();
                    let arr = NDArray::from_f64(to, &shape, &v)?;
                    self.g.constant(&out_name, arr)
                } else if to == self.ty(x).dtype {
                    x
                } else {
                    return Err(a.bad(format!(
                        "casting a computed value from {} to {to} is not supported",
                        self.ty(x).dtype
                    )));
                }
            }
            other => {
                return Err(err(format!(
                    "unsupported operator `{other}` (node `{label}`); supported: {}",
                    SUPPORTED_OPS.join(", ")
                )))
            }
        };
        if out_name.is_empty() {
            return Err(a.bad("the node has no output"));
        }
        self.values.insert(out_name, result);
        Ok(())
    }

    /// The integer constant value of `n`, if it is an integer constant.
    fn ints_of_int(&self, n: NodeIndex) -> Option<Vec<i64>> {
        let v = self.g.constant_value(n)?;
        if v.dtype().is_integer() {
            self.ints_of(n)
        } else {
            None
        }
    }

    fn static_binary(
        &mut self,
        name: &str,
        b: Binary,
        x: NodeIndex,
        p: &[i64],
        y: NodeIndex,
        q: &[i64],
    ) -> Result<NodeIndex, GraphError> {
        let (sx, sy) = (self.ty(x).shape.clone(), self.ty(y).shape.clone());
        let (shape, n) = if p.len() >= q.len() {
            (sx, p.len())
        } else {
            (sy, q.len())
        };
        if !(p.len() == q.len() || p.len() == 1 || q.len() == 1) {
            return Err(err(format!(
                "`{name}`: cannot broadcast {} and {} values",
                p.len(),
                q.len()
            )));
        }
        let at = |v: &[i64], i: usize| if v.len() == 1 { v[0] } else { v[i] };
        let out: Vec<i64> = (0..n)
            .map(|i| {
                let (u, w) = (at(p, i), at(q, i));
                match b {
                    Binary::Add => u.wrapping_add(w),
                    Binary::Sub => u.wrapping_sub(w),
                    Binary::Mul => u.wrapping_mul(w),
                    Binary::Div => u.checked_div(w).unwrap_or(0),
                    Binary::Max => u.max(w),
                    Binary::Min => u.min(w),
                }
            })
            .collect();
        let shape: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
        self.int_const(name, &shape, &out)
    }

    fn reshape(
        &mut self,
        name: &str,
        x: NodeIndex,
        shape: Vec<i64>,
    ) -> Result<NodeIndex, GraphError> {
        if let Some(c) = self.g.constant_value(x).cloned() {
            let s: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
            let v = crate::reference::reshape(&c, &s)?;
            return Ok(self.g.constant(name, v));
        }
        if self.ty(x).shape == shape {
            return Ok(x);
        }
        self.op(name, Op::Reshape { shape }, &[x])
    }

    fn conv(
        &mut self,
        a: &Attrs,
        name: &str,
        x: NodeIndex,
        w: NodeIndex,
        b: Option<NodeIndex>,
    ) -> Result<NodeIndex, GraphError> {
        let (xs, ws) = (self.ty(x).shape.clone(), self.ty(w).shape.clone());
        if xs.len() != 4 || ws.len() != 4 {
            return Err(a.bad(format!(
                "only 2-D convolutions are supported (data {}, weight {})",
                self.ty(x),
                self.ty(w)
            )));
        }
        let strides = a.ints("strides").unwrap_or_else(|| vec![1, 1]);
        let dil = a.ints("dilations").unwrap_or_else(|| vec![1, 1]);
        let kernel = a.ints("kernel_shape").unwrap_or_else(|| ws[2..].to_vec());
        let pads = self.pads(a, &xs[2..], &kernel, &strides, &dil)?;
        if strides.len() != 2 || dil.len() != 2 {
            return Err(a.bad("strides and dilations need two values"));
        }
        let attrs = Conv2dAttrs::new((strides[0], strides[1]), (0, 0), (dil[0], dil[1]))
            .with_padding(pads[0], pads[1], pads[2], pads[3])
            .with_groups(a.int("group", 1));
        let c = self.op(
            name,
            Op::Conv2d {
                attrs,
                layout: Layout::Nchw,
            },
            &[x, w],
        )?;
        match b {
            Some(b) => self.op(&format!("{name}_bias"), Op::BiasAdd { axis: 1 }, &[c, b]),
            None => Ok(c),
        }
    }

    /// `[top, left, bottom, right]` from `pads` / `auto_pad`.
    fn pads(
        &self,
        a: &Attrs,
        spatial: &[i64],
        kernel: &[i64],
        strides: &[i64],
        dil: &[i64],
    ) -> Result<[i64; 4], GraphError> {
        if kernel.len() != 2 || strides.len() != 2 || dil.len() != 2 {
            return Err(a.bad("kernel_shape, strides and dilations need two values"));
        }
        let auto = a.string("auto_pad").unwrap_or_else(|| "NOTSET".into());
        Ok(match auto.as_str() {
            "NOTSET" => {
                let p = a.ints("pads").unwrap_or_else(|| vec![0; 4]);
                if p.len() != 4 {
                    return Err(a.bad(format!("pads {p:?} need four values")));
                }
                [p[0], p[1], p[2], p[3]]
            }
            "VALID" => [0; 4],
            "SAME_UPPER" | "SAME_LOWER" => {
                let mut r = [0; 4];
                for d in 0..2 {
                    let out = (spatial[d] + strides[d] - 1) / strides[d];
                    let total =
                        ((out - 1) * strides[d] + (kernel[d] - 1) * dil[d] + 1 - spatial[d]).max(0);
                    let (lo, hi) = if auto == "SAME_UPPER" {
                        (total / 2, total - total / 2)
                    } else {
                        (total - total / 2, total / 2)
                    };
                    r[d] = lo;
                    r[d + 2] = hi;
                }
                r
            }
            other => return Err(a.bad(format!("auto_pad `{other}` is not supported"))),
        })
    }

    fn pool(
        &mut self,
        a: &Attrs,
        name: &str,
        x: NodeIndex,
        max: bool,
    ) -> Result<NodeIndex, GraphError> {
        let xs = self.ty(x).shape.clone();
        if xs.len() != 4 {
            return Err(a.bad(format!(
                "only 2-D (4-D tensor) pooling is supported, got {}",
                self.ty(x)
            )));
        }
        let kernel = a
            .ints("kernel_shape")
            .ok_or_else(|| a.bad("kernel_shape is required"))?;
        let strides = a.ints("strides").unwrap_or_else(|| vec![1, 1]);
        let dil = a.ints("dilations").unwrap_or_else(|| vec![1, 1]);
        let pads = self.pads(a, &xs[2..], &kernel, &strides, &dil)?;
        let mut attrs = Pool2dAttrs::new((kernel[0], kernel[1]), (strides[0], strides[1]), (0, 0))
            .with_padding(pads[0], pads[1], pads[2], pads[3])
            .with_dilation((dil[0], dil[1]));
        attrs.ceil_mode = a.int("ceil_mode", 0) != 0;
        attrs.count_include_pad = a.int("count_include_pad", 0) != 0;
        let kind = if max { PoolType::Max } else { PoolType::Avg };
        self.op(name, Op::Pool2d { kind, attrs }, &[x])
    }

    /// `Gemm`: `alpha · A' · B' + beta · C` as dense (+ bias).
    fn gemm(
        &mut self,
        a: &Attrs,
        name: &str,
        x: NodeIndex,
        w: NodeIndex,
        c: Option<NodeIndex>,
    ) -> Result<NodeIndex, GraphError> {
        let (alpha, beta) = (a.float("alpha", 1.0), a.float("beta", 1.0));
        let mut x = x;
        if a.int("transA", 0) != 0 {
            x = self.op(
                &format!("{name}_a_t"),
                Op::Transpose { axes: vec![1, 0] },
                &[x],
            )?;
        }
        // dense wants the weight as [N, K]: B when transB, else Bᵀ.
        let w = if a.int("transB", 0) != 0 {
            w
        } else if let Some(v) = self.g.constant_value(w).cloned() {
            if v.ndim() != 2 {
                return Err(a.bad(format!("B must be 2-D, got {}", self.ty(w))));
            }
            let t = permute(&v, &[1, 0])?;
            self.g.constant(&format!("{name}_weight_t"), t)
        } else {
            self.op(
                &format!("{name}_b_t"),
                Op::Transpose { axes: vec![1, 0] },
                &[w],
            )?
        };
        let mut y = self.op(name, Op::Dense, &[x, w])?;
        if alpha != 1.0 {
            let s = self.g.constant(
                &format!("{name}_alpha"),
                NDArray::from_slice_f32(&[], &[alpha])?,
            );
            y = self.op(&format!("{name}_scaled"), Op::Binary(Binary::Mul), &[y, s])?;
        }
        if let Some(c) = c {
            let n = self.ty(y).shape[1];
            let mut c = c;
            if beta != 1.0 {
                let s = self.g.constant(
                    &format!("{name}_beta"),
                    NDArray::from_slice_f32(&[], &[beta])?,
                );
                c = self.op(
                    &format!("{name}_c_scaled"),
                    Op::Binary(Binary::Mul),
                    &[c, s],
                )?;
            }
            let cs = self.ty(c).shape.clone();
            y = if cs == [n] {
                self.op(&format!("{name}_bias"), Op::BiasAdd { axis: 1 }, &[y, c])?
            } else if cs == [1, n] && self.g.constant_value(c).is_some() {
                let c1 = self.reshape(&format!("{name}_bias_1d"), c, vec![n])?;
                self.op(&format!("{name}_bias"), Op::BiasAdd { axis: 1 }, &[y, c1])?
            } else {
                self.op(&format!("{name}_bias"), Op::Binary(Binary::Add), &[y, c])?
            };
        }
        Ok(y)
    }

    /// `MatMul`: dense when B is a 2-D constant (A flattened to 2-D around it), else a
    /// (batched) matrix product.
    fn matmul(&mut self, name: &str, x: NodeIndex, w: NodeIndex) -> Result<NodeIndex, GraphError> {
        let (xs, ws) = (self.ty(x).shape.clone(), self.ty(w).shape.clone());
        if let (Some(v), 2) = (self.g.constant_value(w).cloned(), ws.len()) {
            if xs.len() >= 2 {
                let t = permute(&v, &[1, 0])?;
                let wt = self.g.constant(&format!("{name}_weight_t"), t);
                let k = xs[xs.len() - 1];
                let rows: i64 = xs[..xs.len() - 1].iter().product();
                let x2 = self.reshape(&format!("{name}_2d"), x, vec![rows, k])?;
                let y = self.op(name, Op::Dense, &[x2, wt])?;
                let mut out = xs.clone();
                *out.last_mut().expect("rank >= 2") = ws[1];
                return self.reshape(&format!("{name}_nd"), y, out);
            }
        }
        self.op(name, Op::MatMul, &[x, w])
    }
}

/// The output shape of an ONNX Reshape of `input` to `spec` (`0` copies the input's
/// dimension unless `allowzero`, one `-1` is inferred).
pub fn resolve_reshape(input: &[i64], spec: &[i64], allowzero: bool) -> Result<Vec<i64>, String> {
    let total: i64 = input.iter().product();
    let mut out: Vec<i64> = Vec::with_capacity(spec.len());
    let mut infer = None;
    for (i, &d) in spec.iter().enumerate() {
        match d {
            0 if !allowzero => out.push(*input.get(i).ok_or_else(|| {
                format!("shape {spec:?}: 0 at {i} has no input dimension to copy")
            })?),
            -1 => {
                if infer.replace(i).is_some() {
                    return Err(format!("shape {spec:?} has more than one -1"));
                }
                out.push(1);
            }
            d if d < 0 => return Err(format!("shape {spec:?} has a negative dimension")),
            d => out.push(d),
        }
    }
    let known: i64 = out.iter().product();
    if let Some(i) = infer {
        if known == 0 || total % known != 0 {
            return Err(format!("cannot reshape {input:?} to {spec:?}"));
        }
        out[i] = total / known;
    } else if known != total {
        return Err(format!(
            "cannot reshape {input:?} ({total} elements) to {spec:?}"
        ));
    }
    Ok(out)
}
