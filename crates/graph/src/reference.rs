//! The reference evaluation of a network, node by node, in the IR interpreter on each
//! operator's unscheduled tensor expression: the oracle of the executor's tests (it
//! shares the operator definitions but none of fusion, scheduling, code generation or
//! memory planning), and the engine of constant folding.
//!
//! Pure data movement and float32 elementwise arithmetic on constants, the bulk of
//! constant folding (weight layout changes, folded batch-norm scales), run natively.

use crate::error::GraphError;
use crate::ir::{Binary, Graph, Op, Unary};
use petgraph::stable_graph::NodeIndex;
use std::collections::HashMap;
use tessera_ir::{interp, DataType};
use tessera_runtime::NDArray;
use tessera_te::{lower, placeholder, Schedule};

fn usize_shape(shape: &[i64]) -> Vec<usize> {
    shape.iter().map(|&d| d as usize).collect()
}

/// Row-major strides of `shape`.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// `x` with its axes permuted (`out.shape[i] = x.shape[axes[i]]`), any dtype.
pub fn permute(x: &NDArray, axes: &[usize]) -> Result<NDArray, GraphError> {
    let shape = x.shape();
    let out_shape: Vec<usize> = axes.iter().map(|&a| shape[a]).collect();
    let mut out = NDArray::zeros(x.dtype(), &out_shape)?;
    let es = x.dtype().bytes();
    let in_strides = strides(shape);
    let src = x.as_bytes();
    let dst = out.as_bytes_mut();
    let mut idx = vec![0usize; out_shape.len()];
    for o in 0..x.len() {
        let i: usize = idx.iter().zip(axes).map(|(&v, &a)| v * in_strides[a]).sum();
        dst[o * es..(o + 1) * es].copy_from_slice(&src[i * es..(i + 1) * es]);
        for d in (0..idx.len()).rev() {
            idx[d] += 1;
            if idx[d] < out_shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    Ok(out)
}

/// `x`'s data under another shape of the same size.
pub fn reshape(x: &NDArray, shape: &[usize]) -> Result<NDArray, GraphError> {
    let mut out = NDArray::zeros(x.dtype(), shape)?;
    if out.len() != x.len() {
        return Err(GraphError::Invalid(format!(
            "cannot reshape {:?} to {shape:?}",
            x.shape()
        )));
    }
    out.as_bytes_mut().copy_from_slice(x.as_bytes());
    Ok(out)
}

/// Numpy-broadcast float32 binary arithmetic.
fn binary_f32(
    op: Binary,
    a: &NDArray,
    b: &NDArray,
    out_shape: &[usize],
) -> Result<NDArray, GraphError> {
    let (av, bv) = (a.as_slice::<f32>()?, b.as_slice::<f32>()?);
    let mut out = NDArray::zeros(DataType::float32(), out_shape)?;
    let rank = out_shape.len();
    let pad = |s: &[usize]| -> Vec<usize> {
        let mut p = vec![1; rank - s.len()];
        p.extend_from_slice(s);
        p
    };
    let (sa, sb) = (pad(a.shape()), pad(b.shape()));
    let (ta, tb) = (strides(&sa), strides(&sb));
    let o = out.as_mut_slice::<f32>()?;
    let mut idx = vec![0usize; rank];
    for v in o.iter_mut() {
        let (mut ia, mut ib) = (0, 0);
        for d in 0..rank {
            if sa[d] != 1 {
                ia += idx[d] * ta[d];
            }
            if sb[d] != 1 {
                ib += idx[d] * tb[d];
            }
        }
        let (x, y) = (av[ia], bv[ib]);
        *v = match op {
            Binary::Add => x + y,
            Binary::Sub => x - y,
            Binary::Mul => x * y,
            Binary::Div => x / y,
            Binary::Max => x.max(y),
            Binary::Min => x.min(y),
        };
        for d in (0..rank).rev() {
            idx[d] += 1;
            if idx[d] < out_shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    Ok(out)
}

/// `x` (float32) broadcast to `shape`, NumPy's rules.
pub(crate) fn broadcast_f32(x: &NDArray, shape: &[usize]) -> Result<NDArray, GraphError> {
    let zero = NDArray::from_slice_f32(&[1], &[0.0])?;
    binary_f32(Binary::Add, x, &zero, shape)
}

/// Evaluates one operator of `graph` on concrete input values.
pub fn eval_op(graph: &Graph, n: NodeIndex, inputs: &[&NDArray]) -> Result<NDArray, GraphError> {
    let node = graph.node(n);
    let out_shape = usize_shape(&node.ty.shape);
    let f32_all = inputs.iter().all(|x| x.dtype() == DataType::float32());
    match &node.op {
        Op::Reshape { .. } | Op::Flatten => return reshape(inputs[0], &out_shape),
        Op::Transpose { axes } => {
            let r = inputs[0].ndim() as i64;
            let axes: Vec<usize> = axes
                .iter()
                .map(|&a| (if a < 0 { a + r } else { a }) as usize)
                .collect();
            return permute(inputs[0], &axes);
        }
        Op::LayoutTransform { src, dst } if src == "NCHW" && dst == "NHWC" => {
            return permute(inputs[0], &[0, 2, 3, 1]);
        }
        Op::LayoutTransform { src, dst } if src == "NHWC" && dst == "NCHW" => {
            return permute(inputs[0], &[0, 3, 1, 2]);
        }
        Op::Binary(b) if f32_all => return binary_f32(*b, inputs[0], inputs[1], &out_shape),
        Op::Unary(Unary::Sqrt) if f32_all => {
            let mut out = inputs[0].clone();
            for v in out.as_mut_slice::<f32>()? {
                *v = v.sqrt();
            }
            return Ok(out);
        }
        Op::Input => {
            return Err(GraphError::Invalid(format!(
                "input `{}` has no value",
                node.name
            )))
        }
        Op::Constant(v) => return Ok((**v).clone()),
        // its rows past the count are zeros: the count itself is a runtime size's
        Op::Select { how, .. } => {
            let (v, _) = how
                .run(inputs)
                .map_err(|why| crate::selection::failed(how, why))?;
            return crate::selection::placed(&v, &out_shape);
        }
        _ => {}
    }
    interpret_op(graph, n, inputs)
}

/// Evaluates one operator in the interpreter (its unscheduled tensor expression).
fn interpret_op(graph: &Graph, n: NodeIndex, inputs: &[&NDArray]) -> Result<NDArray, GraphError> {
    let node = graph.node(n);
    let err = |source| GraphError::Infer {
        node: node.name.clone(),
        op: node.op.name().into(),
        source: Box::new(source),
    };
    let arg_shapes: Vec<Vec<i64>> = graph
        .args(n)
        .iter()
        .map(|&a| graph.node(a).ty.shape.clone())
        .collect();
    let arg_refs: Vec<&[i64]> = arg_shapes.iter().map(|s| &s[..]).collect();
    let mut ph = Vec::new();
    for (slot, x) in inputs.iter().enumerate() {
        let shape = node
            .op
            .input_view(slot, &arg_refs)
            .unwrap_or_else(|| x.shape().iter().map(|&d| d as i64).collect());
        ph.push(placeholder(&shape, x.dtype(), &format!("p{slot}")).map_err(err)?);
    }
    let out = node.op.compute(&ph).map_err(err)?;
    let mut args = ph.clone();
    args.push(out.clone());
    let sch = Schedule::create(&[out.clone()])
        .map_err(|e| GraphError::Invalid(format!("node `{}`: {e}", node.name)))?;
    let func = lower(&sch, &args, "reference")
        .map_err(|e| GraphError::Invalid(format!("node `{}`: {e}", node.name)))?;
    let mut bufs: Vec<interp::HostBuffer> = Vec::with_capacity(args.len());
    for (x, p) in inputs.iter().zip(&ph) {
        let mut b = x.to_host_buffer();
        b.shape = usize_shape(p.shape());
        bufs.push(b);
    }
    bufs.push(interp::HostBuffer::zeros(
        out.dtype(),
        &usize_shape(out.shape()),
    ));
    interp::run(&func, &mut bufs)
        .map_err(|e| GraphError::Invalid(format!("interpreting node `{}`: {e}", node.name)))?;
    Ok(NDArray::from_host_buffer(&bufs.pop().expect("the output"))?)
}

/// Runs the whole network in the reference evaluator on the named inputs and returns
/// its outputs.
pub fn interpret(graph: &Graph, inputs: &[(&str, &NDArray)]) -> Result<Vec<NDArray>, GraphError> {
    graph.validate()?;
    let mut values: HashMap<NodeIndex, NDArray> = HashMap::new();
    for &i in graph.inputs() {
        let name = &graph.node(i).name;
        let v = inputs
            .iter()
            .find(|(n, _)| n == name)
            .ok_or_else(|| GraphError::Input {
                name: name.clone(),
                reason: "no value given".into(),
            })?;
        values.insert(i, v.1.clone());
    }
    for n in graph.topo_order() {
        if values.contains_key(&n) {
            continue;
        }
        let args = graph.args(n);
        let ins: Vec<&NDArray> = args.iter().map(|a| &values[a]).collect();
        let v = eval_op(graph, n, &ins)?;
        values.insert(n, v);
    }
    Ok(graph.outputs().iter().map(|o| values[o].clone()).collect())
}
