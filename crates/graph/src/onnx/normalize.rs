//! Normalizations and norms that ONNX defines as functions of other operators, imported
//! as those operators (reductions and elementwise arithmetic, which fusion joins again):
//! `RMSNormalization` (opset 23), `LpNormalization`, `MeanVarianceNormalization` and
//! `GlobalLpPool`.

use super::attrs::NodeCtx;
use super::shape::norm_axis;
use super::{Importer, Outputs};
use crate::error::GraphError;
use crate::ir::{Binary, Op, Unary};
use petgraph::stable_graph::NodeIndex;
use tessera_te::ops::{BinaryFn, MathFn, ReduceKind};

/// `kind` of `x` over `axes`, the reduced axes kept.
fn reduce_kept(
    imp: &mut Importer,
    name: &str,
    kind: ReduceKind,
    x: NodeIndex,
    axes: Vec<i64>,
) -> Result<NodeIndex, GraphError> {
    let op = Op::Reduce {
        kind,
        axes,
        keepdims: true,
    };
    imp.op(name, op, &[x])
}

/// `RMSNormalization`: `x / √(mean(x²) + ε) · scale`, the mean over the axes from
/// `axis` on.
pub(super) fn rms_norm(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let rank = imp.rank(x);
    let axis = norm_axis(c, c.int("axis", -1), rank)?;
    let axes: Vec<i64> = (axis as i64..rank as i64).collect();
    let dt = imp.ty(x).dtype;
    let sq = imp.binary(&c.sub("square"), Binary::Mul, x, x)?;
    let ms = reduce_kept(imp, &c.sub("mean_square"), ReduceKind::Mean, sq, axes)?;
    let eps = imp.scalar(&c.sub("epsilon"), dt, c.float("epsilon", 1e-5) as f64)?;
    let ms = imp.binary(&c.sub("add_epsilon"), Binary::Add, ms, eps)?;
    let rms = imp.op(&c.sub("rms"), Op::Unary(Unary::Sqrt), &[ms])?;
    let inv = imp.op(&c.sub("inverse_rms"), Op::Math(MathFn::Reciprocal), &[rms])?;
    let normed = imp.binary(&c.sub("normalized"), Binary::Mul, x, inv)?;
    let scale = c.input(1)?;
    Ok(vec![imp.binary(&c.name, Binary::Mul, normed, scale)?])
}

/// `LpNormalization`: `x` over its L1 or L2 norm along `axis`.
pub(super) fn lp_normalization(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let axis = norm_axis(c, c.int("axis", -1), imp.rank(x))? as i64;
    let kind = match c.int("p", 2) {
        1 => ReduceKind::L1,
        2 => ReduceKind::L2,
        p => return Err(c.bad(format!("p = {p} is not defined (1 or 2 are)"))),
    };
    let norm = reduce_kept(imp, &c.sub("norm"), kind, x, vec![axis])?;
    // a zero vector stays zero (its norm taken as 1), as onnxruntime computes it
    let dt = imp.ty(x).dtype;
    let zero = imp.scalar(&c.sub("zero"), dt, 0.0)?;
    let one = imp.scalar(&c.sub("one"), dt, 1.0)?;
    let is_zero = imp.op(
        &c.sub("is_zero"),
        Op::BinaryFn(BinaryFn::Equal),
        &[norm, zero],
    )?;
    let safe = imp.op(&c.sub("safe_norm"), Op::Where, &[is_zero, one, norm])?;
    Ok(vec![imp.binary(&c.name, Binary::Div, x, safe)?])
}

/// `MeanVarianceNormalization`: `(x - E[x]) / (√(E[x²] - E[x]²) + 1e-9)` over `axes`
/// (default N, H, W), as ONNX's function body computes it.
pub(super) fn mean_variance(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let axes = c.ints("axes").unwrap_or_else(|| vec![0, 2, 3]);
    let dt = imp.ty(x).dtype;
    let mean = reduce_kept(imp, &c.sub("mean"), ReduceKind::Mean, x, axes.clone())?;
    let mean_sq = imp.binary(&c.sub("mean_squared"), Binary::Mul, mean, mean)?;
    let sq = imp.binary(&c.sub("square"), Binary::Mul, x, x)?;
    let sq_mean = reduce_kept(imp, &c.sub("square_mean"), ReduceKind::Mean, sq, axes)?;
    let var = imp.binary(&c.sub("variance"), Binary::Sub, sq_mean, mean_sq)?;
    let std = imp.op(&c.sub("std"), Op::Unary(Unary::Sqrt), &[var])?;
    let eps = imp.scalar(&c.sub("epsilon"), dt, 1e-9)?;
    let std = imp.binary(&c.sub("std_epsilon"), Binary::Add, std, eps)?;
    let centred = imp.binary(&c.sub("centred"), Binary::Sub, x, mean)?;
    Ok(vec![imp.binary(&c.name, Binary::Div, centred, std)?])
}

/// `GlobalLpPool`: `(Σ |x|^p)^(1/p)` over the spatial axes, kept as 1.
pub(super) fn global_lp_pool(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let rank = imp.rank(x) as i64;
    if rank < 3 {
        return Err(c.bad(format!("needs [N, C, spatial...], got rank {rank}")));
    }
    let axes: Vec<i64> = (2..rank).collect();
    let p = if imp.opset < 2 {
        c.float("p", 2.0) as f64
    } else {
        c.int("p", 2) as f64
    };
    if p == 1.0 {
        return Ok(vec![reduce_kept(imp, &c.name, ReduceKind::L1, x, axes)?]);
    }
    if p == 2.0 {
        return Ok(vec![reduce_kept(imp, &c.name, ReduceKind::L2, x, axes)?]);
    }
    let dt = imp.ty(x).dtype;
    let abs = imp.op(&c.sub("abs"), Op::Math(MathFn::Abs), &[x])?;
    let pe = imp.scalar(&c.sub("p"), dt, p)?;
    let powed = imp.op(&c.sub("pow"), Op::BinaryFn(BinaryFn::Power), &[abs, pe])?;
    let total = reduce_kept(imp, &c.sub("sum"), ReduceKind::Sum, powed, axes)?;
    let inv = imp.scalar(&c.sub("inverse_p"), dt, 1.0 / p)?;
    Ok(vec![imp.op(
        &c.name,
        Op::BinaryFn(BinaryFn::Power),
        &[total, inv],
    )?])
}
