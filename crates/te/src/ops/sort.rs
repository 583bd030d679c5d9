//! The `k` largest or smallest elements along an axis, in order, and their positions
//! (ONNX's `TopK`, TVM's `topi.topk`), as two reductions: each element's rank along the
//! axis (how many elements come before it: larger ones, or equal ones at lower
//! positions — ONNX's order, lower index first among equals), then the `j`-th output as
//! the one element whose rank is `j`. Quadratic in the axis's length (`n²` comparisons a
//! row): the detectors' and samplers' axes of hundreds to thousands sort in well under a
//! millisecond a row; a vocabulary-sized axis would want a sort kernel instead.

use super::attr_err;
use super::elemwise::{const_of, normalize_axis};
use super::reduce::TAG_COMM_REDUCE;
use crate::error::TeError;
use crate::tensor::{compute_tagged, reduce_axis, Tensor};
use tessera_ir::{DataType, Expr};

/// Which output of [`topk`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TopKOutput {
    /// The elements (the input's type).
    Values,
    /// Their positions along the axis (int64).
    Indices,
}

/// The `k` largest (`largest`) or smallest elements of `x` along `axis`, sorted, or
/// their positions (`which`).
pub fn topk(
    x: &Tensor,
    axis: i64,
    k: i64,
    largest: bool,
    which: TopKOutput,
) -> Result<Tensor, TeError> {
    let op = "topk";
    let s = x.shape().to_vec();
    let ax = normalize_axis(op, "axis", axis, s.len())?;
    let n = s[ax];
    if !(0 < k && k <= n) {
        return Err(attr_err(
            op,
            "k",
            format!("{k} is not in [1, {n}] (the axis's length)"),
        ));
    }
    if x.dtype().is_bool() {
        return Err(attr_err(op, "dtype", "bool tensors have no order"));
    }
    // `x` at `ix` with position `j` along the axis
    let at = |ix: &[Expr], j: Expr| -> Expr {
        let mut idx = ix.to_vec();
        idx[ax] = j;
        x.at(&idx)
    };
    let i32c = |v: i64| Expr::int_of(DataType::int32(), v);
    let m = reduce_axis(n, "m");
    let rank = compute_tagged(&s, "T_topk_rank", TAG_COMM_REDUCE, &[], |ix| {
        let (mine, other) = (x.at(ix), at(ix, m.expr()));
        let ahead = if largest {
            other.clone().gt(mine.clone())
        } else {
            other.clone().lt(mine.clone())
        };
        let tie_before = Expr::and(other.eq(mine), m.expr().lt(ix[ax].clone()));
        let before = Expr::or(ahead, tie_before);
        crate::tensor::sum(
            Expr::select(before, i32c(1), i32c(0)),
            std::slice::from_ref(&m),
        )
    })?;
    let mut out = s.clone();
    out[ax] = k;
    let i = reduce_axis(n, "i");
    let (name, dt) = match which {
        TopKOutput::Values => ("T_topk_values", x.dtype()),
        TopKOutput::Indices => ("T_topk_indices", DataType::int64()),
    };
    let picked = compute_tagged(&out, name, TAG_COMM_REDUCE, &[], |ix| {
        let mut src = ix.to_vec();
        src[ax] = i.expr();
        let hit = rank
            .at(&src)
            .eq(Expr::cast(DataType::int32(), ix[ax].clone()));
        let v = match which {
            TopKOutput::Values => x.at(&src),
            TopKOutput::Indices => Expr::cast(DataType::int64(), i.expr()),
        };
        // one element has each rank: the sum is that element
        crate::tensor::sum(
            Expr::select(hit, v, const_of(dt, 0.0)),
            std::slice::from_ref(&i),
        )
    })?;
    Ok(picked)
}
