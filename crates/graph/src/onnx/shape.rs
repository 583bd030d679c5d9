//! Shape arithmetic and data movement: constants (`Constant`, `ConstantOfShape`,
//! `Range`, `Shape`, `Size`), reshaping (`Reshape`, `Flatten`, `Squeeze`, `Unsqueeze`),
//! `Transpose`, `Concat`, `Split`, `Slice`, `Gather`, `Expand`, `Tile`, `Pad`, and the
//! identities (`Identity`, `Dropout` at inference).
//!
//! Values known at import time stay constants ([`Importer::op`] folds them), so that
//! the shape computations of exported graphs vanish.

use super::attrs::NodeCtx;
use super::{Importer, Outputs};
use crate::error::GraphError;
use crate::ir::Op;
use crate::reference::permute;
use petgraph::stable_graph::NodeIndex;
use tessera_ir::DataType;
use tessera_runtime::NDArray;
use tessera_te::ops::{slice_dim, PadMode};

/// `axis` (negative counts from the end) in `0..rank`.
pub(super) fn norm_axis(c: &NodeCtx, axis: i64, rank: usize) -> Result<usize, GraphError> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if !(0..r).contains(&a) {
        return Err(c.bad(format!("axis {axis} is out of range for rank {rank}")));
    }
    Ok(a as usize)
}

/// `Identity`, and `Dropout` at inference (its mask output all true); a `Dropout` whose
/// `training_mode` (input 2, from opset 12) is true or computed is random, and refused.
pub(super) fn identity(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    if c.op == "Dropout" {
        if let Some(t) = c.opt(2) {
            match imp.ints_of(t).as_deref() {
                Some([0]) => {}
                _ => {
                    return Err(c.bad(
                        "Dropout in training mode (a true or computed training_mode) is \
                         random: inference models only",
                    ))
                }
            }
        }
    }
    let mut outs = vec![x];
    if c.op == "Dropout" && !c.out_name(1).is_empty() {
        let shape: Vec<usize> = imp.shape(x).iter().map(|&d| d as usize).collect();
        let mut mask = NDArray::zeros(DataType::bool(), &shape)?;
        mask.as_bytes_mut().fill(1);
        outs.push(imp.g.constant(c.out_name(1), mask));
    }
    Ok(outs)
}

/// `Constant`.
pub(super) fn constant(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let v = if let Some(t) = c.tensor("value") {
        imp.tensor(t)?
    } else if c.has("value_float") {
        NDArray::from_slice_f32(&[], &[c.float("value_float", 0.0)])?
    } else if let Some(v) = c.floats("value_floats") {
        NDArray::from_slice_f32(&[v.len()], &v)?
    } else if c.has("value_int") {
        NDArray::from_slice::<i64>(&[], &[c.int("value_int", 0)])?
    } else if let Some(v) = c.ints("value_ints") {
        NDArray::from_slice::<i64>(&[v.len()], &v)?
    } else {
        return Err(c.bad("no supported value attribute"));
    };
    Ok(vec![imp.g.constant(c.out_name(0), v)])
}

/// `ConstantOfShape`: a constant of the (known) shape, filled with `value` (float 0 by
/// default).
pub(super) fn constant_of_shape(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let shape = imp
        .const_ints(c, 0, "the shape")?
        .ok_or_else(|| c.bad("input 0 is missing"))?;
    if shape.iter().any(|&d| d < 0) {
        return Err(c.bad(format!("negative dimension in {shape:?}")));
    }
    let (dtype, value) = match c.tensor("value") {
        Some(t) => {
            let v = imp.tensor(t)?;
            let first = *v
                .to_f64_vec()
                .first()
                .ok_or_else(|| c.bad("the value tensor is empty"))?;
            (v.dtype(), first)
        }
        None => (DataType::float32(), 0.0),
    };
    let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
    let one = NDArray::from_f64(dtype, &[1], &[value])?;
    let mut v = NDArray::zeros(dtype, &dims)?;
    let fill = one.as_bytes();
    if fill.iter().any(|&b| b != 0) {
        for chunk in v.as_bytes_mut().chunks_exact_mut(fill.len()) {
            chunk.copy_from_slice(fill);
        }
    }
    Ok(vec![imp.g.constant(c.out_name(0), v)])
}

/// `Range` of constant `start`, `limit`, `delta`.
pub(super) fn range(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let mut get = |k: usize| -> Result<f64, GraphError> {
        imp.const_floats(c, k, "range bounds")?
            .and_then(|v| v.first().copied())
            .ok_or_else(|| c.bad(format!("input {k} is missing or empty")))
    };
    let (start, limit, delta) = (get(0)?, get(1)?, get(2)?);
    if delta == 0.0 || !(start.is_finite() && limit.is_finite() && delta.is_finite()) {
        return Err(c.bad(format!("range({start}, {limit}, {delta}) is not defined")));
    }
    let n = ((limit - start) / delta).ceil().max(0.0) as usize;
    if n > 1 << 28 {
        return Err(c.bad(format!("range of {n} elements is too large")));
    }
    let dtype = imp.ty(c.input(0)?).dtype;
    let values: Vec<f64> = (0..n).map(|i| start + i as f64 * delta).collect();
    let v = NDArray::from_f64(dtype, &[n], &values)?;
    Ok(vec![imp.g.constant(c.out_name(0), v)])
}

/// `ScatterND` on constants (folded at import): `data` with the slices `indices` names
/// replaced by (or, from opset 16, combined with) `updates`. Exporters write it where a
/// model builds a mask from its static shape (Swin's shifted-window attention mask);
/// on a computed tensor it is refused.
pub(super) fn scatter_nd(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let (data, indices, updates) = (c.input(0)?, c.input(1)?, c.input(2)?);
    let (Some(d), Some(idx), Some(u)) = (
        imp.constant(data).cloned(),
        imp.ints_of(indices),
        imp.constant(updates).map(NDArray::to_f64_vec),
    ) else {
        return scatter_nd_op(imp, c, data, indices, updates);
    };
    let shape: Vec<usize> = d.shape().to_vec();
    let ishape = imp.shape(indices);
    let k = *ishape.last().unwrap_or(&0) as usize;
    if ishape.is_empty() || k == 0 || k > shape.len() {
        return Err(c.bad(format!(
            "indices of shape {ishape:?} do not index data of rank {}",
            shape.len()
        )));
    }
    let slice: usize = shape[k..].iter().product();
    let count = idx.len() / k;
    if u.len() != count * slice {
        return Err(c.bad(format!(
            "{} updates for {count} slices of {slice} elements",
            u.len()
        )));
    }
    let reduction = c.string("reduction").unwrap_or_else(|| "none".to_string());
    let combine: fn(f64, f64) -> f64 = match reduction.as_str() {
        "none" => |_, u| u,
        "add" => |a, u| a + u,
        "mul" => |a, u| a * u,
        "max" => f64::max,
        "min" => f64::min,
        other => return Err(c.bad(format!("unknown reduction `{other}`"))),
    };
    let mut out = d.to_f64_vec();
    for (j, at) in idx.chunks(k).enumerate() {
        let mut offset = 0usize;
        for (axis, &i) in at.iter().enumerate() {
            let n = shape[axis] as i64;
            if i < -n || i >= n {
                return Err(c.bad(format!("index {i} is out of range for dimension {n}")));
            }
            offset = offset * shape[axis] + i.rem_euclid(n) as usize;
        }
        let base = offset * slice;
        for e in 0..slice {
            out[base + e] = combine(out[base + e], u[j * slice + e]);
        }
    }
    let v = NDArray::from_f64(d.dtype(), &shape, &out)?;
    Ok(vec![imp.g.constant(c.out_name(0), v)])
}

/// [`scatter_nd`] on computed tensors: the indices reshaped to `[n, k]` and the updates
/// to `[n, data[k..]]`, then te's `scatter_nd`.
fn scatter_nd_op(
    imp: &mut Importer,
    c: &NodeCtx,
    data: NodeIndex,
    indices: NodeIndex,
    updates: NodeIndex,
) -> Outputs {
    let (ds, is) = (imp.shape(data), imp.shape(indices));
    let k = *is.last().unwrap_or(&0);
    if is.is_empty() || k < 1 || k as usize > ds.len() {
        return Err(c.bad(format!(
            "indices of shape {is:?} do not index data of rank {}",
            ds.len()
        )));
    }
    let n: i64 = is[..is.len() - 1].iter().product();
    let rows = imp.op(
        &c.sub("indices"),
        Op::Reshape { shape: vec![n, k] },
        &[indices],
    )?;
    let mut us = vec![n];
    us.extend_from_slice(&ds[k as usize..]);
    let want_updates: Vec<i64> = is[..is.len() - 1]
        .iter()
        .chain(&ds[k as usize..])
        .copied()
        .collect();
    if imp.shape(updates) != want_updates {
        return Err(c.bad(format!(
            "updates {:?} must be {want_updates:?} for data {ds:?} and indices {is:?}",
            imp.shape(updates)
        )));
    }
    let slices = imp.op(&c.sub("updates"), Op::Reshape { shape: us }, &[updates])?;
    let reduction = super::index::scatter_reduction(c)?;
    Ok(vec![imp.op(
        &c.name,
        Op::ScatterNd { reduction },
        &[data, rows, slices],
    )?])
}

/// `Shape` (with `start` / `end` from opset 15).
pub(super) fn shape(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let s = imp.shape(c.input(0)?);
    let r = s.len() as i64;
    let norm = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    let start = norm(c.int("start", 0));
    let end = norm(c.int("end", r));
    let v: Vec<i64> = s[start..end.max(start)].to_vec();
    Ok(vec![imp.int_const(c.out_name(0), &[v.len()], &v)?])
}

/// `Size`: the element count, a 0-D int64.
pub(super) fn size(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let n = imp.ty(c.input(0)?).numel();
    Ok(vec![imp.int_const(c.out_name(0), &[], &[n])?])
}

/// Why a Reshape's shape does not apply to its input.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReshapeError {
    #[error("shape {spec:?}: 0 at {at} has no input dimension to copy")]
    NothingToCopy { spec: Vec<i64>, at: usize },
    #[error("shape {spec:?} has more than one -1")]
    TwoInferred { spec: Vec<i64> },
    #[error("shape {spec:?} has a negative dimension")]
    Negative { spec: Vec<i64> },
    #[error("cannot reshape {input:?} ({total} elements) to {spec:?}")]
    Count {
        input: Vec<i64>,
        total: i64,
        spec: Vec<i64>,
    },
}

/// The output shape of an ONNX Reshape of `input` to `spec` (`0` copies the input's
/// dimension unless `allowzero`, one `-1` is inferred).
pub fn resolve_reshape(
    input: &[i64],
    spec: &[i64],
    allowzero: bool,
) -> Result<Vec<i64>, ReshapeError> {
    let total: i64 = input.iter().product();
    let mut out: Vec<i64> = Vec::with_capacity(spec.len());
    let mut infer = None;
    let spec_v = || spec.to_vec();
    for (i, &d) in spec.iter().enumerate() {
        match d {
            0 if !allowzero => {
                out.push(*input.get(i).ok_or_else(|| ReshapeError::NothingToCopy {
                    spec: spec_v(),
                    at: i,
                })?)
            }
            -1 => {
                if infer.replace(i).is_some() {
                    return Err(ReshapeError::TwoInferred { spec: spec_v() });
                }
                out.push(1);
            }
            d if d < 0 => return Err(ReshapeError::Negative { spec: spec_v() }),
            d => out.push(d),
        }
    }
    let known: i64 = out.iter().product();
    let count = || ReshapeError::Count {
        input: input.to_vec(),
        total,
        spec: spec_v(),
    };
    if let Some(i) = infer {
        if known == 0 || total % known != 0 {
            return Err(count());
        }
        out[i] = total / known;
    } else if known != total {
        return Err(count());
    }
    Ok(out)
}

/// `Reshape`: the shape as an attribute before opset 5, a constant input from it.
pub(super) fn reshape(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let spec = if imp.opset < 5 {
        c.ints("shape")
            .ok_or_else(|| c.bad("the shape attribute is required"))?
    } else {
        imp.const_ints(c, 1, "the shape")?
            .ok_or_else(|| c.bad("input 1 is missing"))?
    };
    let shape = resolve_reshape(&imp.shape(x), &spec, c.int("allowzero", 0) != 0)
        .map_err(|m| c.bad(m.to_string()))?;
    Ok(vec![imp.reshape(&c.name, x, shape)?])
}

/// `Flatten` to 2-D at `axis`.
pub(super) fn flatten(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let s = imp.shape(x);
    let mut axis = c.int("axis", 1);
    if axis < 0 {
        axis += s.len() as i64;
    }
    if !(0..=s.len() as i64).contains(&axis) {
        return Err(c.bad(format!("axis {} is out of range", c.int("axis", 1))));
    }
    if axis == 1 && s.len() >= 2 {
        return Ok(vec![imp.op(&c.name, Op::Flatten, &[x])?]);
    }
    let k = axis as usize;
    let shape = vec![s[..k].iter().product(), s[k..].iter().product()];
    Ok(vec![imp.reshape(&c.name, x, shape)?])
}

/// The axes of `Squeeze` / `Unsqueeze`: an attribute before opset 13, an input from it.
fn squeeze_axes(imp: &mut Importer, c: &NodeCtx) -> Result<Option<Vec<i64>>, GraphError> {
    if imp.opset >= 13 {
        imp.const_ints(c, 1, "the axes")
    } else {
        Ok(c.ints("axes"))
    }
}

/// `Squeeze`: the given axes of size 1, or all of them.
pub(super) fn squeeze(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let s = imp.shape(x);
    let axes = match squeeze_axes(imp, c)? {
        Some(axes) => axes
            .iter()
            .map(|&a| norm_axis(c, a, s.len()))
            .collect::<Result<Vec<_>, _>>()?,
        None => (0..s.len()).filter(|&i| s[i] == 1).collect(),
    };
    if let Some(&a) = axes.iter().find(|&&a| s[a] != 1) {
        return Err(c.bad(format!("cannot squeeze axis {a} of size {}", s[a])));
    }
    let shape: Vec<i64> = (0..s.len())
        .filter(|i| !axes.contains(i))
        .map(|i| s[i])
        .collect();
    Ok(vec![imp.reshape(&c.name, x, shape)?])
}

/// `Unsqueeze`: dimensions of size 1 inserted at the axes (of the result).
pub(super) fn unsqueeze(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let s = imp.shape(x);
    let axes = squeeze_axes(imp, c)?.ok_or_else(|| c.bad("axes are required"))?;
    let rank = s.len() + axes.len();
    let mut axes = axes
        .iter()
        .map(|&a| norm_axis(c, a, rank))
        .collect::<Result<Vec<_>, _>>()?;
    axes.sort_unstable();
    let mut out = s;
    for &ax in &axes {
        out.insert(ax, 1);
    }
    Ok(vec![imp.reshape(&c.name, x, out)?])
}

/// `Transpose` (reversed axes by default); constants are permuted at import.
pub(super) fn transpose(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let rank = imp.rank(x);
    let axes = c
        .ints("perm")
        .unwrap_or_else(|| (0..rank as i64).rev().collect());
    let mut seen = vec![false; rank];
    for &a in &axes {
        match seen.get_mut(a as usize).filter(|_| a >= 0) {
            Some(s) if !*s => *s = true,
            _ => return Err(c.bad(format!("perm {axes:?} does not fit rank {rank}"))),
        }
    }
    if axes.len() != rank {
        return Err(c.bad(format!("perm {axes:?} does not fit rank {rank}")));
    }
    if let Some(v) = imp.constant(x).cloned() {
        let p: Vec<usize> = axes.iter().map(|&d| d as usize).collect();
        return Ok(vec![imp.g.constant(c.out_name(0), permute(&v, &p)?)]);
    }
    Ok(vec![imp.op(&c.name, Op::Transpose { axes }, &[x])?])
}

/// `Concat` (axis 1 by default before opset 4).
pub(super) fn concat(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let default = if imp.opset < 4 { 1 } else { 0 };
    let xs = c.all_inputs();
    if xs.is_empty() {
        return Err(c.bad("needs at least one input"));
    }
    // empty inputs (an empty slice of a shape) add nothing; all empty, the first is it
    let nonempty: Vec<NodeIndex> = xs
        .iter()
        .copied()
        .filter(|&x| imp.ty(x).numel() > 0)
        .collect();
    if nonempty.is_empty() {
        return Ok(vec![xs[0]]);
    }
    let xs = nonempty;
    Ok(vec![imp.op(
        &c.name,
        Op::Concat {
            axis: c.int("axis", default),
        },
        &xs,
    )?])
}

/// `x[begin:end]` along `axis` (a unit-step slice of one axis).
pub(super) fn slice_axis(
    imp: &mut Importer,
    name: &str,
    x: NodeIndex,
    axis: usize,
    begin: i64,
    end: i64,
) -> Result<NodeIndex, GraphError> {
    let s = imp.shape(x);
    let (mut b, mut e) = (vec![0; s.len()], s.clone());
    b[axis] = begin;
    e[axis] = end;
    let strides = vec![1; s.len()];
    imp.op(
        name,
        Op::StridedSlice {
            begin: b,
            end: e,
            strides,
        },
        &[x],
    )
}

/// `Split` into the sizes given (an attribute before opset 13, an input from it), into
/// `num_outputs` chunks (opset 18), or into equal parts, one per output.
pub(super) fn split(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let s = imp.shape(x);
    let axis = norm_axis(c, c.int("axis", 0), s.len())?;
    let dim = s[axis];
    let n = c.outputs.len() as i64;
    let sizes = if imp.opset >= 13 {
        imp.const_ints(c, 1, "the split sizes")?
    } else {
        c.ints("split")
    };
    let sizes = match sizes {
        Some(v) if !v.is_empty() => v,
        _ if c.has("num_outputs") => {
            let k = c.int("num_outputs", n).max(1);
            let chunk = (dim + k - 1) / k;
            (0..k).map(|i| chunk.min(dim - i * chunk).max(0)).collect()
        }
        _ => {
            if n == 0 || dim % n != 0 {
                return Err(c.bad(format!("cannot split {dim} into {n} equal parts")));
            }
            vec![dim / n; n as usize]
        }
    };
    if sizes.iter().sum::<i64>() != dim || sizes.iter().any(|&v| v <= 0) {
        return Err(c.bad(format!(
            "split sizes {sizes:?} do not make up dimension {dim}"
        )));
    }
    let mut outs = Vec::with_capacity(sizes.len());
    let mut start = 0;
    for (k, &len) in sizes.iter().enumerate() {
        let name = match c.out_name(k) {
            "" => c.sub(&k.to_string()),
            o => o.to_string(),
        };
        outs.push(slice_axis(imp, &name, x, axis, start, start + len)?);
        start += len;
    }
    Ok(outs)
}

/// `Slice`: starts, ends, axes as attributes before opset 10, inputs (with steps) from
/// it; NumPy's semantics per axis.
pub(super) fn slice(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let s = imp.shape(x);
    let (starts, ends, axes, steps) = if imp.opset < 10 {
        (c.ints("starts"), c.ints("ends"), c.ints("axes"), None)
    } else {
        (
            imp.const_ints(c, 1, "starts")?,
            imp.const_ints(c, 2, "ends")?,
            imp.const_ints(c, 3, "axes")?,
            imp.const_ints(c, 4, "steps")?,
        )
    };
    let (Some(starts), Some(ends)) = (starts, ends) else {
        return Err(c.bad("starts and ends are required"));
    };
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(c.bad("starts, ends, axes and steps differ in length"));
    }
    let mut begin = vec![0; s.len()];
    let mut end = s.clone();
    let mut strides = vec![1; s.len()];
    for k in 0..starts.len() {
        let a = norm_axis(c, axes[k], s.len())?;
        if steps[k] == 0 {
            return Err(c.bad("a step of 0"));
        }
        begin[a] = starts[k];
        end[a] = ends[k];
        strides[a] = steps[k];
    }
    // An empty slice of a constant (a shape's tail past its end, as PyTorch's attention
    // export takes `shape[3:]` of a 3-D shape) is an empty constant, which a Concat
    // drops; of a computed tensor it is an error, as zero-size tensors are not computed.
    let selected: Vec<usize> = (0..s.len())
        .map(|d| {
            slice_dim(s[d], Some(begin[d]), Some(end[d]), strides[d])
                .1
                .max(0) as usize
        })
        .collect();
    if selected.contains(&0) {
        if let Some(v) = imp.constant(x) {
            return Ok(vec![imp
                .g
                .constant(&c.name, NDArray::zeros(v.dtype(), &selected)?)]);
        }
    }
    let op = Op::StridedSlice {
        begin,
        end,
        strides,
    };
    Ok(vec![imp.op(&c.name, op, &[x])?])
}

/// `Gather` along `axis`.
pub(super) fn gather(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let (x, idx) = (c.input(0)?, c.input(1)?);
    let axis = norm_axis(c, c.int("axis", 0), imp.rank(x))? as i64;
    if let Some(v) = imp.ints_of(idx) {
        let n = imp.shape(x)[axis as usize];
        if let Some(i) = v.iter().find(|&&i| i < -n || i >= n) {
            return Err(c.bad(format!("index {i} is out of range for dimension {n}")));
        }
    }
    Ok(vec![imp.op(&c.name, Op::Take { axis }, &[x, idx])?])
}

/// `Expand` to a known shape.
pub(super) fn expand(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let shape = imp
        .const_ints(c, 1, "the shape")?
        .ok_or_else(|| c.bad("input 1 is missing"))?;
    Ok(vec![imp.op(&c.name, Op::BroadcastTo { shape }, &[x])?])
}

/// `Tile` with known repetitions.
pub(super) fn tile(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let reps = imp
        .const_ints(c, 1, "the repeats")?
        .ok_or_else(|| c.bad("input 1 is missing"))?;
    Ok(vec![imp.op(&c.name, Op::Tile { reps }, &[x])?])
}

/// `Pad`: constant, reflect or edge; the pads (and value) as attributes before opset 11
/// (`paddings` in opset 1), as inputs from it (with `axes` from opset 18).
pub(super) fn pad(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let rank = imp.rank(x);
    let mode = c.string("mode").unwrap_or_else(|| "constant".into());
    let (pads, value) = if imp.opset < 11 {
        let pads = c.ints("pads").or_else(|| c.ints("paddings"));
        (
            pads.ok_or_else(|| c.bad("pads are required"))?,
            c.float("value", 0.0) as f64,
        )
    } else {
        let pads = imp
            .const_ints(c, 1, "the pads")?
            .ok_or_else(|| c.bad("input 1 is missing"))?;
        let value = imp
            .const_floats(c, 2, "the pad value")?
            .and_then(|v| v.first().copied())
            .unwrap_or(0.0);
        (pads, value)
    };
    let axes: Vec<usize> = match imp.const_ints(c, 3, "the axes")? {
        Some(v) => v
            .iter()
            .map(|&a| norm_axis(c, a, rank))
            .collect::<Result<_, _>>()?,
        None => (0..rank).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(c.bad(format!(
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
    // negative pads crop: a slice first, then the padding that is left
    let mut x = x;
    if before.iter().chain(&after).any(|&p| p < 0) {
        let s = imp.shape(x);
        let begin: Vec<i64> = before.iter().map(|&p| p.saturating_neg().max(0)).collect();
        let end: Vec<i64> = (0..rank)
            .map(|d| s[d].saturating_add(after[d].min(0)))
            .collect();
        if (0..rank).any(|d| end[d] <= begin[d]) {
            return Err(c.bad(format!("pads {pads:?} crop all of {s:?}")));
        }
        let strides = vec![1; rank];
        let crop = Op::StridedSlice {
            begin,
            end,
            strides,
        };
        x = imp.op(&c.sub("crop"), crop, &[x])?;
        before
            .iter_mut()
            .chain(after.iter_mut())
            .for_each(|p| *p = (*p).max(0));
        if before.iter().chain(&after).all(|&p| p == 0) {
            return Ok(vec![x]);
        }
    }
    let op = match mode.as_str() {
        "constant" => Op::Pad {
            before,
            after,
            value,
        },
        "reflect" => Op::PadBorder {
            before,
            after,
            mode: PadMode::Reflect,
        },
        "edge" => Op::PadBorder {
            before,
            after,
            mode: PadMode::Edge,
        },
        other => return Err(c.bad(format!("pad mode `{other}` is not supported"))),
    };
    Ok(vec![imp.op(&c.name, op, &[x])?])
}

/// `CenterCropPad`: each of `axes` (all by default) cropped or zero-padded about its
/// centre to the constant `shape` (the odd element cropped from, or padded at, the end).
pub(super) fn center_crop_pad(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let xs = imp.shape(x);
    let rank = xs.len();
    let target = imp
        .const_ints(c, 1, "the shape")?
        .ok_or_else(|| c.bad("the shape (input 1) is missing"))?;
    let axes: Vec<usize> = match c.ints("axes") {
        Some(a) => a
            .iter()
            .map(|&a| norm_axis(c, a, rank))
            .collect::<Result<_, _>>()?,
        None => (0..rank).collect(),
    };
    if axes.len() != target.len() || target.iter().any(|&t| t < 0) {
        return Err(c.bad(format!("shape {target:?} does not fit axes {axes:?}")));
    }
    let (mut begin, mut end) = (vec![0; rank], xs.clone());
    let (mut before, mut after) = (vec![0; rank], vec![0; rank]);
    for (&a, &t) in axes.iter().zip(&target) {
        let d = xs[a];
        if t < d {
            begin[a] = (d - t) / 2;
            end[a] = begin[a] + t;
        } else {
            before[a] = (t - d) / 2;
            after[a] = t - d - before[a];
        }
    }
    let mut y = x;
    if begin.iter().any(|&b| b != 0) || end != xs {
        let op = Op::StridedSlice {
            begin,
            end,
            strides: vec![1; rank],
        };
        y = imp.op(&c.sub("crop"), op, &[y])?;
    }
    if before.iter().chain(&after).any(|&p| p != 0) {
        let op = Op::Pad {
            before,
            after,
            value: 0.0,
        };
        y = imp.op(&c.sub("pad"), op, &[y])?;
    }
    Ok(vec![y])
}
