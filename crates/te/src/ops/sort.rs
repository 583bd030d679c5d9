//! The `k` largest or smallest elements along an axis, in order, and their positions
//! (ONNX's `TopK`, TVM's `topi.topk`), in ONNX's order (lower index first among equals),
//! two ways, whichever compares less:
//!
//! - **selection**, for a small `k` (up to [`SELECT_MAX_K`]) on a longer axis: `k` passes,
//!   each the extreme element after the previous pass's (value, position) in that order,
//!   then the least position holding it — `2·k·n` comparisons a row, so a sampler's
//!   top 50 of a 50,257-token vocabulary is 5 M comparisons, not 2.5 G;
//! - **rank**, otherwise: each element's rank along the axis (how many elements come
//!   before it), then the `j`-th output as the one element whose rank is `j` — `n²`
//!   comparisons a row, few stages, for a large `k` (a whole sort) on a short axis.
//!
//! A CPU network build runs TopK as a host step instead (the graph crate's `host_ops`, a
//! heap over the row); these forms are what other targets build, and the reference.

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

impl TopKOutput {
    /// The name of the stage that gives this output.
    fn stage_name(self) -> &'static str {
        match self {
            TopKOutput::Values => "T_topk_values",
            TopKOutput::Indices => "T_topk_indices",
        }
    }
}

/// The largest `k` that [`topk`] computes by selection (each pass two stages).
pub const SELECT_MAX_K: i64 = 64;

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
    if k <= SELECT_MAX_K && 2 * k < n {
        return topk_by_selection(x, ax, k, largest, which);
    }
    topk_by_rank(x, ax, k, largest, which)
}

/// The index `ix` with its position along axis `ax` replaced by `j`.
fn along(ix: &[Expr], ax: usize, j: Expr) -> Vec<Expr> {
    let mut idx = ix.to_vec();
    idx[ax] = j;
    idx
}

/// [`topk`] by rank: `n²` comparisons a row.
fn topk_by_rank(
    x: &Tensor,
    ax: usize,
    k: i64,
    largest: bool,
    which: TopKOutput,
) -> Result<Tensor, TeError> {
    let s = x.shape().to_vec();
    let n = s[ax];
    let i32c = |v: i64| Expr::int_of(DataType::int32(), v);
    let m = reduce_axis(n, "m");
    let rank = compute_tagged(&s, "T_topk_rank", TAG_COMM_REDUCE, &[], |ix| {
        let (mine, other) = (x.at(ix), x.at(&along(ix, ax, m.expr())));
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
    let dt = match which {
        TopKOutput::Values => x.dtype(),
        TopKOutput::Indices => DataType::int64(),
    };
    let name = which.stage_name();
    let picked = compute_tagged(&out, name, TAG_COMM_REDUCE, &[], |ix| {
        let src = along(ix, ax, i.expr());
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

/// [`topk`] by selection: pass `j` takes the extreme element among those after pass
/// `j - 1`'s (value, position) in ONNX's order — a smaller (larger) value, or an equal
/// one at a later position — and the least position holding it; `2·k·n` comparisons a
/// row, `2·k + 1` stages.
fn topk_by_selection(
    x: &Tensor,
    ax: usize,
    k: i64,
    largest: bool,
    which: TopKOutput,
) -> Result<Tensor, TeError> {
    let s = x.shape().to_vec();
    let n = s[ax];
    let mut row = s.clone();
    row[ax] = 1;
    let mut passes: Vec<(Tensor, Tensor)> = Vec::with_capacity(k as usize);
    for j in 0..k {
        let prev = passes.last().cloned();
        // whether the element at position `i` of row `ix` comes after the previous pick
        let after = |ix: &[Expr], i: &Expr| -> Option<Expr> {
            let (pv, pi) = prev.as_ref()?;
            let v = x.at(&along(ix, ax, i.clone()));
            let p = pv.at(ix);
            let beyond = if largest {
                v.clone().lt(p.clone())
            } else {
                v.clone().gt(p.clone())
            };
            let later = Expr::and(
                v.eq(p),
                Expr::cast(DataType::int64(), i.clone()).gt(pi.at(ix)),
            );
            Some(Expr::or(beyond, later))
        };
        let r = reduce_axis(n, "r");
        let value = compute_tagged(&row, &format!("T_topk_v{j}"), TAG_COMM_REDUCE, &[], |ix| {
            let v = x.at(&along(ix, ax, r.expr()));
            let rs = std::slice::from_ref(&r);
            let mut red = if largest {
                crate::tensor::max(v, rs)
            } else {
                crate::tensor::min(v, rs)
            };
            if x.dtype().is_float() {
                // from ∓∞, so that a row of -∞ (+∞) has its extreme in it
                let from = if largest {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                };
                red = red.with_init(Expr::float_of(x.dtype(), from));
            }
            match after(ix, &r.expr()) {
                Some(c) => red.with_condition(c),
                None => red,
            }
        })?;
        let q = reduce_axis(n, "q");
        let position = compute_tagged(&row, &format!("T_topk_i{j}"), TAG_COMM_REDUCE, &[], |ix| {
            let hit = x.at(&along(ix, ax, q.expr())).eq(value.at(ix));
            let cond = match after(ix, &q.expr()) {
                Some(c) => Expr::and(hit, c),
                None => hit,
            };
            crate::tensor::min(
                Expr::cast(DataType::int64(), q.expr()),
                std::slice::from_ref(&q),
            )
            .with_condition(cond)
        })?;
        passes.push((value, position));
    }
    let mut out = s.clone();
    out[ax] = k;
    let name = which.stage_name();
    compute_tagged(&out, name, "injective", &[], |ix| {
        let src = along(ix, ax, Expr::int(0));
        let pick = |(v, i): &(Tensor, Tensor)| match which {
            TopKOutput::Values => v.at(&src),
            TopKOutput::Indices => i.at(&src),
        };
        // the pass of this output position, the last one where no earlier one matches
        let mut e = pick(&passes[passes.len() - 1]);
        for (j, p) in passes.iter().enumerate().rev().skip(1) {
            let here = ix[ax].clone().eq(Expr::int_of(ix[ax].dtype(), j as i64));
            e = Expr::select(here, pick(p), e);
        }
        e
    })
}
