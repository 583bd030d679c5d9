//! Operators that compute with positions: `GatherElements`, `GatherND`,
//! `ScatterElements`, `ReverseSequence`, `TensorScatter` (a KV-cache write), `Trilu`, `CumSum`,
//! `CumProd`, `OneHot`, `ArgMax`, `ArgMin`, `Hardmax` (the one-hot of the arg-max),
//! `EyeLike` (a constant), and `DepthToSpace` / `SpaceToDepth` (reshapes around a
//! transpose).

use super::attrs::NodeCtx;
use super::shape::norm_axis;
use super::{tensor, Importer, Outputs};
use crate::ir::Op;
use tessera_runtime::NDArray;
use tessera_te::ops::{BinaryFn, Cumulative, ScatterReduction, TopKOutput};

/// `GatherElements`: constant indices are checked here, others when the network runs.
pub(super) fn gather_elements(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let (x, idx) = (c.input(0)?, c.input(1)?);
    let axis = norm_axis(c, c.int("axis", 0), imp.rank(x))?;
    if let Some(v) = imp.ints_of(idx) {
        let n = imp.shape(x)[axis];
        if let Some(i) = v.iter().find(|&&i| i < -n || i >= n) {
            return Err(c.bad(format!("index {i} is out of range for dimension {n}")));
        }
    }
    let op = Op::GatherElements { axis: axis as i64 };
    Ok(vec![imp.op(&c.name, op, &[x, idx])?])
}

/// `GatherND`: constant indices are checked here.
pub(super) fn gather_nd(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let (x, idx) = (c.input(0)?, c.input(1)?);
    let b = c.int("batch_dims", 0);
    let batch_dims = usize::try_from(b).map_err(|_| c.bad(format!("batch_dims {b} < 0")))?;
    let (xs, is) = (imp.shape(x), imp.shape(idx));
    if let (Some(v), Some(&m)) = (imp.ints_of(idx), is.last()) {
        for (j, &i) in v.iter().enumerate() {
            let n = xs
                .get(batch_dims + j % m.max(1) as usize)
                .copied()
                .unwrap_or(0);
            if i < -n || i >= n {
                return Err(c.bad(format!("index {i} is out of range for dimension {n}")));
            }
        }
    }
    let op = Op::GatherNd { batch_dims };
    Ok(vec![imp.op(&c.name, op, &[x, idx])?])
}

/// A scatter's `reduction` attribute (`none` by default).
pub(super) fn scatter_reduction(c: &NodeCtx) -> Result<ScatterReduction, crate::error::GraphError> {
    Ok(match c.string("reduction").as_deref().unwrap_or("none") {
        "none" => ScatterReduction::Replace,
        "add" => ScatterReduction::Add,
        "mul" => ScatterReduction::Mul,
        "max" => ScatterReduction::Max,
        "min" => ScatterReduction::Min,
        other => return Err(c.bad(format!("reduction `{other}` is not defined"))),
    })
}

/// `ScatterElements` (and the `Scatter` of opsets 9–10 it replaced).
pub(super) fn scatter_elements(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let (x, idx, upd) = (c.input(0)?, c.input(1)?, c.input(2)?);
    let axis = norm_axis(c, c.int("axis", 0), imp.rank(x))? as i64;
    let reduction = scatter_reduction(c)?;
    let op = Op::ScatterElements { axis, reduction };
    Ok(vec![imp.op(&c.name, op, &[x, idx, upd])?])
}

/// `Trilu`: the diagonal `k` a constant input (0 when absent).
pub(super) fn trilu(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let k = match imp.const_ints(c, 1, "the diagonal")? {
        Some(v) => *v.first().ok_or_else(|| c.bad("input 1 is empty"))?,
        None => 0,
    };
    let upper = c.int("upper", 1) != 0;
    Ok(vec![imp.op(&c.name, Op::Trilu { k, upper }, &[x])?])
}

/// `CumSum` and `CumProd`: the axis a constant input.
pub(super) fn cumulative(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let axis = imp
        .const_ints(c, 1, "the axis")?
        .and_then(|v| v.first().copied())
        .ok_or_else(|| c.bad("the axis (input 1) is missing"))?;
    let axis = norm_axis(c, axis, imp.rank(x))? as i64;
    let how = Cumulative {
        product: c.op == "CumProd",
        exclusive: c.int("exclusive", 0) != 0,
        reverse: c.int("reverse", 0) != 0,
    };
    Ok(vec![imp.op(&c.name, Op::Cumulative { axis, how }, &[x])?])
}

/// `OneHot`: `depth` and the `[off, on]` values constant inputs.
pub(super) fn one_hot(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let idx = c.input(0)?;
    let depth = imp
        .const_floats(c, 1, "the depth")?
        .and_then(|v| v.first().copied())
        .ok_or_else(|| c.bad("the depth (input 1) is missing"))?;
    let v = imp
        .known_value(c, 2, "the values")?
        .map(|v| v.to_f64_vec())
        .ok_or_else(|| c.bad("the values (input 2) are missing"))?;
    let [off, on] = v[..] else {
        return Err(c.bad(format!(
            "the values must be [off, on], got {} of them",
            v.len()
        )));
    };
    let op = Op::OneHot {
        depth: depth as i64,
        axis: c.int("axis", -1),
        on,
        off,
        dtype: imp.ty(c.input(2)?).dtype,
    };
    Ok(vec![imp.op(&c.name, op, &[idx])?])
}

/// `ArgMax` and `ArgMin`.
pub(super) fn arg_extreme(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let axis = norm_axis(c, c.int("axis", 0), imp.rank(x))? as i64;
    let op = Op::ArgExtreme {
        axis,
        keepdims: c.int("keepdims", 1) != 0,
        largest: c.op == "ArgMax",
        last: c.int("select_last_index", 0) != 0,
    };
    Ok(vec![imp.op(&c.name, op, &[x])?])
}

/// `Hardmax`: 1 at the first largest element along `axis` (from opset 13; before, of
/// the input flattened to 2-D at `axis`), 0 elsewhere.
pub(super) fn hardmax(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let shape = imp.shape(x);
    let rank = shape.len();
    let legacy = imp.opset < 13;
    let axis = norm_axis(c, c.int("axis", if legacy { 1 } else { -1 }), rank.max(1))?;
    // before opset 13 the axes from `axis` on are one
    let (x2, axis2) = if legacy {
        let rows: i64 = shape[..axis].iter().product();
        let cols: i64 = shape[axis..].iter().product();
        (imp.reshape(&c.sub("flat"), x, vec![rows, cols])?, 1usize)
    } else {
        (x, axis)
    };
    let s2 = imp.shape(x2);
    let arg = Op::ArgExtreme {
        axis: axis2 as i64,
        keepdims: true,
        largest: true,
        last: false,
    };
    let arg = imp.op(&c.sub("argmax"), arg, &[x2])?;
    let n = s2[axis2];
    let mut pos_shape = vec![1usize; s2.len()];
    pos_shape[axis2] = n as usize;
    let positions: Vec<i64> = (0..n).collect();
    let pos = imp.g.constant(
        &c.sub("positions"),
        NDArray::from_slice::<i64>(&pos_shape, &positions)?,
    );
    let hit = imp.op(&c.sub("hit"), Op::BinaryFn(BinaryFn::Equal), &[arg, pos])?;
    let dt = imp.ty(x).dtype;
    let out = imp.op(&c.sub("cast"), Op::Cast { dtype: dt }, &[hit])?;
    Ok(vec![imp.reshape(&c.name, out, shape)?])
}

/// `EyeLike`: ones on diagonal `k` of a matrix of the input's shape (a constant).
pub(super) fn eye_like(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let shape = imp.shape(x);
    let [rows, cols] = shape[..] else {
        return Err(c.bad(format!("needs a matrix, got shape {shape:?}")));
    };
    let dtype = match c.has("dtype") {
        true => {
            let code = c.int("dtype", 1) as i32;
            tensor::dtype_of(code).ok_or_else(|| c.bad(format!("unsupported dtype {code}")))?
        }
        false => imp.ty(x).dtype,
    };
    let k = c.int("k", 0);
    let values: Vec<f64> = (0..rows)
        .flat_map(|i| (0..cols).map(move |j| if j - i == k { 1.0 } else { 0.0 }))
        .collect();
    let v = NDArray::from_f64(dtype, &[rows as usize, cols as usize], &values)?;
    Ok(vec![imp.g.constant(&c.name, v)])
}

/// `DepthToSpace` and `SpaceToDepth` (modes DCR and CRD; `SpaceToDepth` has a mode
/// from opset 28) of NCHW data: a reshape to
/// 6-D, a transpose and a reshape back.
pub(super) fn depth_space(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let shape = imp.shape(x);
    let [n, ch, h, w] = shape[..] else {
        return Err(c.bad(format!("needs NCHW data, got shape {shape:?}")));
    };
    let b = c.int("blocksize", 0);
    if b < 1 {
        return Err(c.bad(format!("blocksize {b} must be positive")));
    }
    // CRD: channel-major blocks (c·b² + i·b + j); DCR (the default): block-major
    let crd = c.string("mode").as_deref() == Some("CRD");
    let (six, axes, out) = if c.op == "SpaceToDepth" {
        if h % b != 0 || w % b != 0 {
            return Err(c.bad(format!("{h}×{w} is not a multiple of blocksize {b}")));
        }
        let axes = if crd {
            vec![0, 1, 3, 5, 2, 4]
        } else {
            vec![0, 3, 5, 1, 2, 4]
        };
        (
            vec![n, ch, h / b, b, w / b, b],
            axes,
            vec![n, ch * b * b, h / b, w / b],
        )
    } else {
        if ch % (b * b) != 0 {
            return Err(c.bad(format!("{ch} channels are not a multiple of {b}²")));
        }
        let c2 = ch / (b * b);
        if crd {
            (
                vec![n, c2, b, b, h, w],
                vec![0, 1, 4, 2, 5, 3],
                vec![n, c2, h * b, w * b],
            )
        } else {
            (
                vec![n, b, b, c2, h, w],
                vec![0, 3, 4, 1, 5, 2],
                vec![n, c2, h * b, w * b],
            )
        }
    };
    let r = imp.reshape(&c.sub("split"), x, six)?;
    let t = imp.op(&c.sub("transpose"), Op::Transpose { axes }, &[r])?;
    Ok(vec![imp.op(&c.name, Op::Reshape { shape: out }, &[t])?])
}

/// `ReverseSequence`: along `time_axis`, each slice of `batch_axis` reversed over its
/// first `sequence_lens` elements, the rest kept (a gather by computed positions).
pub(super) fn reverse_sequence(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let (x, lens) = (c.input(0)?, c.input(1)?);
    let xs = imp.shape(x);
    let rank = xs.len();
    let t = norm_axis(c, c.int("time_axis", 0), rank)?;
    let b = norm_axis(c, c.int("batch_axis", 1), rank)?;
    if t == b || imp.shape(lens) != [xs[b]] {
        return Err(c.bad(format!(
            "time axis {t}, batch axis {b} and sequence_lens {:?} do not fit {xs:?}",
            imp.shape(lens)
        )));
    }
    let i64t = tessera_ir::DataType::int64();
    let mut one = vec![1i64; rank];
    one[b] = xs[b];
    let lens = imp.op(&c.sub("lens_i64"), Op::Cast { dtype: i64t }, &[lens])?;
    let lens = imp.reshape(&c.sub("lens"), lens, one)?;
    let mut pos_shape = vec![1usize; rank];
    pos_shape[t] = xs[t] as usize;
    let positions: Vec<i64> = (0..xs[t]).collect();
    let pos = imp.int_const(&c.sub("positions"), &pos_shape, &positions)?;
    let one_ = imp.scalar(&c.sub("one"), i64t, 1.0)?;
    let last = imp.op(
        &c.sub("last"),
        Op::Binary(crate::ir::Binary::Sub),
        &[lens, one_],
    )?;
    let back = imp.op(
        &c.sub("back"),
        Op::Binary(crate::ir::Binary::Sub),
        &[last, pos],
    )?;
    let inside = imp.op(&c.sub("inside"), Op::BinaryFn(BinaryFn::Less), &[pos, lens])?;
    let idx = imp.op(&c.sub("pick"), Op::Where, &[inside, back, pos])?;
    let idx = imp.op(&c.sub("index"), Op::BroadcastTo { shape: xs }, &[idx])?;
    let op = Op::GatherElements { axis: t as i64 };
    Ok(vec![imp.op(&c.name, op, &[x, idx])?])
}

/// `TensorScatter` (opset 24): a key/value cache with `update` written along `axis`
/// from each batch element's `write_indices` (0 without them), wrapping around in
/// `circular` mode; a scatter by computed positions.
pub(super) fn tensor_scatter(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let (cache, update) = (c.input(0)?, c.input(1)?);
    let (cs, us) = (imp.shape(cache), imp.shape(update));
    let rank = cs.len();
    let axis = norm_axis(c, c.int("axis", -2), rank)?;
    if rank < 2 || axis == 0 || us.len() != rank || (0..rank).any(|d| d != axis && us[d] != cs[d]) {
        return Err(c.bad(format!(
            "update {us:?} does not fit cache {cs:?} along axis {axis}"
        )));
    }
    let circular = match c.string("mode").as_deref().unwrap_or("linear") {
        "linear" => false,
        "circular" => true,
        other => return Err(c.bad(format!("mode `{other}` is not defined"))),
    };
    let i64t = tessera_ir::DataType::int64();
    let mut pos_shape = vec![1usize; rank];
    pos_shape[axis] = us[axis] as usize;
    let steps: Vec<i64> = (0..us[axis]).collect();
    let mut idx = imp.int_const(&c.sub("steps"), &pos_shape, &steps)?;
    if let Some(w) = c.opt(2) {
        let mut bshape = vec![1i64; rank];
        bshape[0] = cs[0];
        let w = imp.op(&c.sub("write_i64"), Op::Cast { dtype: i64t }, &[w])?;
        let w = imp.reshape(&c.sub("write"), w, bshape)?;
        idx = imp.op(
            &c.sub("positions"),
            Op::Binary(crate::ir::Binary::Add),
            &[w, idx],
        )?;
    }
    if circular {
        let n = imp.scalar(&c.sub("length"), i64t, cs[axis] as f64)?;
        idx = imp.op(
            &c.sub("wrapped"),
            Op::BinaryFn(BinaryFn::FloorMod),
            &[idx, n],
        )?;
    }
    let idx = imp.op(&c.sub("index"), Op::BroadcastTo { shape: us }, &[idx])?;
    let op = Op::ScatterElements {
        axis: axis as i64,
        reduction: ScatterReduction::Replace,
    };
    Ok(vec![imp.op(&c.name, op, &[cache, idx, update])?])
}

/// `TopK`: `k` an attribute (opset 1) or an input known at import (10 on); `largest`
/// and `sorted` from opset 11 (the result is always sorted, which `sorted=0` allows).
pub(super) fn top_k(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let k = if imp.opset < 10 {
        c.int("k", 0)
    } else {
        imp.const_ints(c, 1, "k")?
            .and_then(|v| v.first().copied())
            .ok_or_else(|| c.bad("k (input 1) is missing"))?
    };
    let axis = c.int("axis", -1);
    let largest = c.int("largest", 1) != 0;
    let mut outs = Vec::new();
    for (slot, output) in [TopKOutput::Values, TopKOutput::Indices]
        .into_iter()
        .enumerate()
    {
        let op = Op::TopK {
            axis,
            k,
            largest,
            output,
            on_host: false,
        };
        let name = if slot == 0 {
            c.name.clone()
        } else {
            c.sub("indices")
        };
        outs.push(imp.op(&name, op, &[x])?);
    }
    Ok(outs)
}

/// `MaxUnpool` (opsets 9 to 22): `X`'s values written at the flat positions `I` (a
/// MaxPool's `Indices`: over the whole output, batch and channels included) of a zero
/// tensor whose spatial axes are `(in − 1)·stride + kernel − pads` — a scatter into
/// the flattened output. An `output_shape` input larger than that pads the result at
/// the end of each axis, as ONNX's reference does (the indices keep their meaning).
pub(super) fn max_unpool(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let (x, idx) = (c.input(0)?, c.input(1)?);
    let xs = imp.shape(x);
    if xs.len() < 3 || imp.shape(idx) != xs {
        return Err(c.bad(format!(
            "X {xs:?} and I {:?} must be one shape of rank 3 or more",
            imp.shape(idx)
        )));
    }
    let n = xs.len() - 2;
    let kernel = c
        .ints("kernel_shape")
        .ok_or_else(|| c.bad("the kernel_shape attribute is required"))?;
    let strides = c.ints("strides").unwrap_or_else(|| vec![1; n]);
    let pads = c.ints("pads").unwrap_or_else(|| vec![0; 2 * n]);
    if kernel.len() != n || strides.len() != n || pads.len() != 2 * n {
        return Err(c.bad(format!(
            "kernel_shape and strides need {n} values, pads {}",
            2 * n
        )));
    }
    let mut inferred = xs[..2].to_vec();
    inferred
        .extend((0..n).map(|d| (xs[2 + d] - 1) * strides[d] + kernel[d] - pads[d] - pads[n + d]));
    if inferred.iter().any(|&d| d < 1) {
        return Err(c.bad(format!("the output shape {inferred:?} is empty")));
    }
    let out = match imp.const_ints(c, 2, "the output shape")? {
        Some(o) if o.len() == xs.len() && o.iter().zip(&inferred).all(|(a, b)| a >= b) => o,
        Some(o) => {
            return Err(c.bad(format!(
                "output_shape {o:?} is not at least the unpooled shape {inferred:?}"
            )))
        }
        None => inferred.clone(),
    };
    let (total, count) = (inferred.iter().product::<i64>(), xs.iter().product::<i64>());
    let dt = imp.ty(x).dtype;
    let zeros = imp.filled(&c.sub("zeros"), dt, &[total], 0.0)?;
    let at = imp.reshape(&c.sub("flat_indices"), idx, vec![count])?;
    let values = imp.reshape(&c.sub("flat_values"), x, vec![count])?;
    let op = Op::ScatterElements {
        axis: 0,
        reduction: ScatterReduction::Replace,
    };
    let flat = imp.op(&c.sub("scatter"), op, &[zeros, at, values])?;
    if out == inferred {
        return Ok(vec![imp.reshape(&c.name, flat, out)?]);
    }
    let y = imp.reshape(&c.sub("unpooled"), flat, inferred.clone())?;
    let pad = Op::Pad {
        before: vec![0; out.len()],
        after: out.iter().zip(&inferred).map(|(o, i)| o - i).collect(),
        value: 0.0,
    };
    Ok(vec![imp.op(&c.name, pad, &[y])?])
}
