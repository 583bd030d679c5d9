//! Reductions over any set of axes, with or without the reduced dimensions kept: ONNX's
//! `ReduceSum`, `ReduceMean`, `ReduceMax`, `ReduceMin`, `ReduceProd`, `ReduceL1`,
//! `ReduceL2`, `ReduceSumSquare` and `ReduceLogSumExp` (TVM's `topi.sum`, `topi.max`, …
//! and the compositions Relay's frontend builds from them).
//!
//! The reducing stage is tagged `comm_reduce` with reduce axes `k<axis>`; the mean, the
//! L2 norm and log-sum-exp finish with an elementwise stage on its result.

use super::attr_err;
use super::elemwise::{compute_ax, const_of, normalize_axis, TAG_ELEMWISE};
use crate::error::TeError;
use crate::tensor::{compute_tagged, max, prod, reduce_axis, sum, IterVar, Reduce, Tensor};
use tessera_ir::{Expr, Intrinsic};

/// TVM's tag of reductions.
pub const TAG_COMM_REDUCE: &str = "comm_reduce";

/// What a reduction computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    /// `Σ |x|`.
    L1,
    /// `√(Σ x²)`.
    L2,
    /// `Σ x²`.
    SumSquare,
    /// `log Σ e^x`, computed as `m + log Σ e^(x - m)` with `m` the maximum.
    LogSumExp,
}

impl ReduceKind {
    /// The operator's name (`sum`, `mean`, …).
    pub fn name(self) -> &'static str {
        match self {
            ReduceKind::Sum => "sum",
            ReduceKind::Mean => "mean",
            ReduceKind::Max => "max",
            ReduceKind::Min => "min",
            ReduceKind::Prod => "prod",
            ReduceKind::L1 => "l1_norm",
            ReduceKind::L2 => "l2_norm",
            ReduceKind::SumSquare => "sum_square",
            ReduceKind::LogSumExp => "logsumexp",
        }
    }
}

/// The reduced axes of an `ndim`-D tensor, sorted: `axes` normalized (negative counts
/// from the end), every axis when `axes` is empty.
pub fn reduced_axes(op: &str, axes: &[i64], ndim: usize) -> Result<Vec<usize>, TeError> {
    let mut out: Vec<usize> = if axes.is_empty() {
        (0..ndim).collect()
    } else {
        axes.iter()
            .map(|&a| normalize_axis(op, "axes", a, ndim))
            .collect::<Result<_, _>>()?
    };
    out.sort_unstable();
    if out.windows(2).any(|w| w[0] == w[1]) {
        return Err(attr_err(
            op,
            "axes",
            format!("{axes:?} names an axis twice"),
        ));
    }
    Ok(out)
}

/// The shape of `shape` reduced over `axes` (sorted), the reduced dimensions kept as 1
/// with `keepdims`, dropped otherwise.
pub fn reduced_shape(shape: &[i64], axes: &[usize], keepdims: bool) -> Vec<i64> {
    (0..shape.len())
        .filter_map(|i| match (axes.contains(&i), keepdims) {
            (false, _) => Some(shape[i]),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect()
}

/// `kind` of `x` over `axes` (empty: all of them), keeping the reduced dimensions as 1
/// with `keepdims`. Integer tensors take the sum, max, min and product only.
pub fn reduce(
    x: &Tensor,
    kind: ReduceKind,
    axes: &[i64],
    keepdims: bool,
) -> Result<Tensor, TeError> {
    let op = kind.name();
    let s = x.shape().to_vec();
    let dt = x.dtype();
    let exact = matches!(
        kind,
        ReduceKind::Sum | ReduceKind::Max | ReduceKind::Min | ReduceKind::Prod
    );
    if !dt.is_float() && !exact {
        return Err(attr_err(
            op,
            "dtype",
            format!("needs a float tensor, got {dt}"),
        ));
    }
    let red = reduced_axes(op, axes, s.len())?;
    let out_shape = reduced_shape(&s, &red, keepdims);
    // the input index of an output index `ix` and the reduce variables `ks`
    let index = |ix: &[Expr], ks: &[IterVar]| -> Vec<Expr> {
        let mut o = 0;
        (0..s.len())
            .map(|i| match red.iter().position(|&a| a == i) {
                Some(r) => {
                    if keepdims {
                        o += 1;
                    }
                    ks[r].expr()
                }
                None => {
                    o += 1;
                    ix[o - 1].clone()
                }
            })
            .collect()
    };
    let axes_of = || -> Vec<IterVar> {
        red.iter()
            .map(|&a| reduce_axis(s[a], &format!("k{a}")))
            .collect()
    };
    let stage = |name: &str, f: &dyn Fn(Expr) -> Expr, combine: fn(Expr, &[IterVar]) -> Reduce| {
        let ks = axes_of();
        compute_tagged(&out_shape, name, TAG_COMM_REDUCE, &[], |ix| {
            combine(f(x.at(&index(ix, &ks))), &ks)
        })
    };
    let c = |v: f64| const_of(dt, v);
    let id = |v: Expr| v;
    let square = |v: Expr| v.clone() * v;
    let name = format!("T_{op}");
    match kind {
        ReduceKind::Sum => stage(&name, &id, sum),
        // from -∞ / +∞ rather than the combiners' finite identities (TVM's, which the
        // pooling and softmax DAGs keep): the maximum of a row of -∞ is -∞
        ReduceKind::Max if dt.is_float() => stage(&name, &id, |e, ks| {
            let init = Expr::float_of(e.dtype(), f64::NEG_INFINITY);
            max(e, ks).with_init(init)
        }),
        ReduceKind::Min if dt.is_float() => stage(&name, &id, |e, ks| {
            let init = Expr::float_of(e.dtype(), f64::INFINITY);
            crate::tensor::min(e, ks).with_init(init)
        }),
        ReduceKind::Max => stage(&name, &id, max),
        ReduceKind::Min => stage(&name, &id, crate::tensor::min),
        ReduceKind::Prod => stage(&name, &id, prod),
        ReduceKind::SumSquare => stage(&name, &square, sum),
        ReduceKind::L1 => stage(&name, &|v| Expr::math(Intrinsic::Fabs, v), sum),
        ReduceKind::Mean => {
            let count: i64 = red.iter().map(|&a| s[a]).product();
            let total = stage(&format!("{name}_sum"), &id, sum)?;
            compute_ax(&out_shape, &name, TAG_ELEMWISE, |ix| {
                total.at(ix) / c(count as f64)
            })
        }
        ReduceKind::L2 => {
            let total = stage(&format!("{name}_sum"), &square, sum)?;
            compute_ax(&out_shape, &name, TAG_ELEMWISE, |ix| total.at(ix).sqrt())
        }
        ReduceKind::LogSumExp => {
            let m = stage(&format!("{name}_max"), &id, max)?;
            let ks = axes_of();
            let total = compute_tagged(
                &out_shape,
                &format!("{name}_sum"),
                TAG_COMM_REDUCE,
                &[],
                |ix| sum((x.at(&index(ix, &ks)) - m.at(ix)).exp(), &ks),
            )?;
            compute_ax(&out_shape, &name, TAG_ELEMWISE, |ix| {
                total.at(ix).log() + m.at(ix)
            })
        }
    }
}
