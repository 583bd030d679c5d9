//! Operators that compute with positions: gathering elements or slices by an index
//! tensor (ONNX's `GatherElements`, `GatherND`), scattering them (`ScatterElements`,
//! `ScatterND`), the triangles of matrices (`Trilu`), running sums and products
//! (`CumSum`, `CumProd`), one-hot encodings (`OneHot`) and the position of the
//! largest or smallest element (`ArgMax`, `ArgMin`).
//!
//! Indices read from a tensor are clamped into range, so that no read leaves its
//! tensor whatever the data; the executor refuses an out-of-range index that comes from
//! a network input before running (crate `graph`), as onnxruntime does.

use super::attr_err;
use super::elemwise::{compute_ax, const_of, normalize_axis, TAG_ELEMWISE};
use super::reduce::TAG_COMM_REDUCE;
use crate::error::TeError;
use crate::tensor::{compute_tagged, reduce_axis, IterVar, Reduce, Tensor};
use tessera_ir::{DataType, Expr};

const TAG_INJECTIVE: &str = "injective";

/// `j` (an index into a dimension of `n`) counted from the end when negative and
/// clamped into `[0, n)`, as an `int64`.
fn wrap_clamp(j: Expr, n: i64) -> Expr {
    let j = Expr::cast(DataType::int64(), j);
    let j = Expr::select(
        j.lt(Expr::int_of(DataType::int64(), 0)),
        j.clone() + Expr::int_of(DataType::int64(), n),
        j,
    );
    Expr::min(
        Expr::max(j, Expr::int_of(DataType::int64(), 0)),
        Expr::int_of(DataType::int64(), n - 1),
    )
}

fn check_indices(op: &str, indices: &Tensor) -> Result<(), TeError> {
    if indices.dtype().is_integer() {
        Ok(())
    } else {
        Err(attr_err(
            op,
            "indices",
            format!("must be integers, got {}", indices.dtype()),
        ))
    }
}

/// `out[i…] = data[i… with axis replaced by indices[i…]]`: the result has `indices`'
/// shape, which must match `data`'s but along `axis` (ONNX's `GatherElements`, NumPy's
/// `take_along_axis`). Stage `T_gather_elements`.
pub fn gather_elements(data: &Tensor, indices: &Tensor, axis: i64) -> Result<Tensor, TeError> {
    let op = "gather_elements";
    check_indices(op, indices)?;
    let ds = data.shape().to_vec();
    let is = indices.shape().to_vec();
    if ds.len() != is.len() {
        return Err(attr_err(
            op,
            "indices",
            format!("rank {} differs from the data's {}", is.len(), ds.len()),
        ));
    }
    let ax = normalize_axis(op, "axis", axis, ds.len())?;
    if let Some(d) = (0..ds.len()).find(|&d| d != ax && is[d] > ds[d]) {
        return Err(attr_err(
            op,
            "indices",
            format!("shape {is:?} exceeds the data's {ds:?} along axis {d}"),
        ));
    }
    let n = ds[ax];
    compute_ax(&is, "T_gather_elements", TAG_INJECTIVE, |ix| {
        let mut idx = ix.to_vec();
        idx[ax] = wrap_clamp(indices.at(ix), n);
        data.at(&idx)
    })
}

/// `data` at the index tuples in the last axis of `indices` (ONNX's `GatherND`): the
/// first `batch_dims` axes of both are batch axes, and each tuple of `m` indices picks a
/// slice of `data`'s axes from `batch_dims + m` on. The result's shape is `indices`'
/// without its last axis, then that slice's. Stage `T_gather_nd`.
pub fn gather_nd(data: &Tensor, indices: &Tensor, batch_dims: usize) -> Result<Tensor, TeError> {
    let op = "gather_nd";
    check_indices(op, indices)?;
    let (ds, is) = (data.shape().to_vec(), indices.shape().to_vec());
    let q = is.len();
    let m = *is.last().ok_or_else(|| attr_err(op, "indices", "is 0-D"))? as usize;
    if batch_dims >= q || batch_dims + m > ds.len() || ds[..batch_dims] != is[..batch_dims] {
        return Err(attr_err(
            op,
            "indices",
            format!("shape {is:?} does not index data {ds:?} with {batch_dims} batch dimension(s)"),
        ));
    }
    let mut out = is[..q - 1].to_vec();
    out.extend(&ds[batch_dims + m..]);
    compute_ax(&out, "T_gather_nd", TAG_INJECTIVE, |ix| {
        let mut idx = ix[..batch_dims].to_vec();
        for k in 0..m {
            let mut at = ix[..q - 1].to_vec();
            at.push(Expr::int(k as i64));
            idx.push(wrap_clamp(indices.at(&at), ds[batch_dims + k]));
        }
        idx.extend_from_slice(&ix[q - 1..]);
        data.at(&idx)
    })
}

/// How [`scatter_elements`] combines an update with what is there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScatterReduction {
    /// The update replaces the element (the last of several to the same place).
    Replace,
    Add,
    Mul,
    Max,
    Min,
}

impl ScatterReduction {
    /// The updates that reach one element (`hit`) reduced over `axes`, from the
    /// reduction's identity (not for `Replace`, which takes the last update).
    fn gather(self, hit: Expr, update: Expr, dt: DataType, axes: &[IterVar]) -> Reduce {
        let big = |v: f64| const_of(dt, v);
        match self {
            ScatterReduction::Add => crate::tensor::sum(Expr::select(hit, update, big(0.0)), axes),
            ScatterReduction::Mul => crate::tensor::prod(Expr::select(hit, update, big(1.0)), axes),
            ScatterReduction::Max => {
                crate::tensor::max(Expr::select(hit, update, big(f64::NEG_INFINITY)), axes)
                    .with_init(big(f64::NEG_INFINITY))
            }
            _ => crate::tensor::min(Expr::select(hit, update, big(f64::INFINITY)), axes)
                .with_init(big(f64::INFINITY)),
        }
    }

    /// The element `d` combined with the reduction `u` of the updates reaching it.
    fn merge(self, d: Expr, u: Expr) -> Expr {
        match self {
            ScatterReduction::Add => d + u,
            ScatterReduction::Mul => d * u,
            ScatterReduction::Max => Expr::max(d, u),
            _ => Expr::min(d, u),
        }
    }
}

/// `data` with `updates` written at `indices` along `axis` (ONNX's `ScatterElements`):
/// `indices` and `updates` have one shape, within `data`'s; an element of `data` takes
/// the updates whose index along `axis` is its own position, combined by `reduction`.
/// One reduction per element over the indices' `axis` (the position of the last match
/// for `Replace`). Stage `T_scatter_elements`.
pub fn scatter_elements(
    data: &Tensor,
    indices: &Tensor,
    updates: &Tensor,
    axis: i64,
    reduction: ScatterReduction,
) -> Result<Tensor, TeError> {
    let op = "scatter_elements";
    check_indices(op, indices)?;
    let (ds, is) = (data.shape().to_vec(), indices.shape().to_vec());
    if updates.shape() != is.as_slice()
        || is.len() != ds.len()
        || is.iter().zip(&ds).any(|(i, d)| i > d)
        || updates.dtype() != data.dtype()
    {
        return Err(attr_err(
            op,
            "updates",
            format!(
                "indices {is:?} and updates {:?} must share a shape within data {ds:?}, \
                 and updates data's type",
                updates.shape()
            ),
        ));
    }
    let ax = normalize_axis(op, "axis", axis, ds.len())?;
    let n = ds[ax];
    let dt = data.dtype();
    let i64t = DataType::int64();
    // whether the indices reach output position `ix` from their position `k` along axis
    let reach = |ix: &[Expr], k: Expr| -> (Expr, Vec<Expr>) {
        let mut at: Vec<Expr> = ix
            .iter()
            .zip(&is)
            .map(|(i, &e)| Expr::min(i.clone(), Expr::int(e - 1)))
            .collect();
        at[ax] = k;
        let mut inside = Expr::bool(true);
        for (d, (i, &e)) in ix.iter().zip(&is).enumerate() {
            if d != ax && e < ds[d] {
                inside = Expr::and(inside, i.clone().lt(Expr::int(e)));
            }
        }
        let target = wrap_clamp(indices.at(&at), n);
        let hit = Expr::and(inside, target.eq(Expr::cast(i64t, ix[ax].clone())));
        (hit, at)
    };
    let k = reduce_axis(is[ax], "k");
    let ks = std::slice::from_ref(&k);
    if reduction == ScatterReduction::Replace {
        let last = compute_tagged(&ds, "T_scatter_elements_last", TAG_COMM_REDUCE, &[], |ix| {
            let (hit, _) = reach(ix, k.expr());
            let j = Expr::cast(i64t, k.expr());
            crate::tensor::max(Expr::select(hit, j, Expr::int_of(i64t, -1)), ks)
        })?;
        return compute_ax(&ds, "T_scatter_elements", TAG_INJECTIVE, |ix| {
            let j = last.at(ix);
            let mut at: Vec<Expr> = ix
                .iter()
                .zip(&is)
                .map(|(i, &e)| Expr::min(i.clone(), Expr::int(e - 1)))
                .collect();
            at[ax] = Expr::cast(
                DataType::int32(),
                Expr::max(j.clone(), Expr::int_of(i64t, 0)),
            );
            Expr::select(j.ge(Expr::int_of(i64t, 0)), updates.at(&at), data.at(ix))
        });
    }
    let combined = compute_tagged(&ds, "T_scatter_elements_sum", TAG_COMM_REDUCE, &[], |ix| {
        let (hit, at) = reach(ix, k.expr());
        reduction.gather(hit, updates.at(&at), dt, ks)
    })?;
    compute_ax(&ds, "T_scatter_elements", TAG_INJECTIVE, |ix| {
        reduction.merge(data.at(ix), combined.at(ix))
    })
}

/// `data` with slices of `updates` written at `indices` (ONNX's `ScatterND`), here with
/// the indices flattened to `[n, k]` and the updates to `[n, data[k..]]` (the importer
/// reshapes them): row `u` of the indices names a slice `data[i_0, …, i_{k−1}, ..]`
/// (negative positions counted from the end), which takes `updates[u]`, combined by
/// `reduction` (the last row naming it for `Replace`). One reduction per element over the
/// `n` rows. Stage `T_scatter_nd`.
pub fn scatter_nd(
    data: &Tensor,
    indices: &Tensor,
    updates: &Tensor,
    reduction: ScatterReduction,
) -> Result<Tensor, TeError> {
    let op = "scatter_nd";
    check_indices(op, indices)?;
    let (ds, is, us) = (data.shape().to_vec(), indices.shape(), updates.shape());
    let (n, k) = match is {
        [n, k] if (*k as usize) <= ds.len() => (*n, *k as usize),
        _ => {
            return Err(attr_err(
                op,
                "indices",
                format!(
                    "must be [n, k] with k ≤ {} (data {ds:?}), got {is:?}",
                    ds.len()
                ),
            ))
        }
    };
    let want: Vec<i64> = std::iter::once(n).chain(ds[k..].iter().copied()).collect();
    if us != want.as_slice() || updates.dtype() != data.dtype() {
        return Err(attr_err(
            op,
            "updates",
            format!(
                "must be {} {want:?} for data {ds:?} and indices {is:?}, got {} {us:?}",
                data.dtype(),
                updates.dtype()
            ),
        ));
    }
    let (dt, i64t) = (data.dtype(), DataType::int64());
    let u = reduce_axis(n, "u");
    let us_ = std::slice::from_ref(&u);
    // whether row `r` of the indices names the slice holding position `ix`, and where in
    // the updates that position is
    let reach = |ix: &[Expr], r: Expr| -> (Expr, Vec<Expr>) {
        let mut hit = Expr::bool(true);
        for (d, &len) in ds.iter().enumerate().take(k) {
            let at = wrap_clamp(indices.at(&[r.clone(), Expr::int(d as i64)]), len);
            hit = Expr::and(hit, at.eq(Expr::cast(i64t, ix[d].clone())));
        }
        let at = std::iter::once(r).chain(ix[k..].iter().cloned()).collect();
        (hit, at)
    };
    if reduction == ScatterReduction::Replace {
        let last = compute_tagged(&ds, "T_scatter_nd_last", TAG_COMM_REDUCE, &[], |ix| {
            let (hit, _) = reach(ix, u.expr());
            let j = Expr::cast(i64t, u.expr());
            crate::tensor::max(Expr::select(hit, j, Expr::int_of(i64t, -1)), us_)
        })?;
        return compute_ax(&ds, "T_scatter_nd", TAG_INJECTIVE, |ix| {
            let j = last.at(ix);
            let row = Expr::cast(
                DataType::int32(),
                Expr::max(j.clone(), Expr::int_of(i64t, 0)),
            );
            let (_, at) = reach(ix, row);
            Expr::select(j.ge(Expr::int_of(i64t, 0)), updates.at(&at), data.at(ix))
        });
    }
    let combined = compute_tagged(&ds, "T_scatter_nd_sum", TAG_COMM_REDUCE, &[], |ix| {
        let (hit, at) = reach(ix, u.expr());
        reduction.gather(hit, updates.at(&at), dt, us_)
    })?;
    compute_ax(&ds, "T_scatter_nd", TAG_INJECTIVE, |ix| {
        reduction.merge(data.at(ix), combined.at(ix))
    })
}

/// The upper (`upper`: elements with `col - row ≥ k`) or lower (`col - row ≤ k`)
/// triangle of each matrix of the last two axes, zeros elsewhere (ONNX's `Trilu`).
/// Stage `T_trilu`.
pub fn trilu(x: &Tensor, k: i64, upper: bool) -> Result<Tensor, TeError> {
    let s = x.shape().to_vec();
    if s.len() < 2 {
        return Err(attr_err(
            "trilu",
            "input",
            format!("needs a matrix, got shape {s:?}"),
        ));
    }
    let dt = x.dtype();
    let r = s.len();
    compute_ax(&s, "T_trilu", TAG_ELEMWISE, |ix| {
        let d = Expr::cast(DataType::int64(), ix[r - 1].clone())
            - Expr::cast(DataType::int64(), ix[r - 2].clone());
        let k = Expr::int_of(DataType::int64(), k);
        let keep = if upper { d.ge(k) } else { d.le(k) };
        Expr::select(keep, x.at(ix), const_of(dt, 0.0))
    })
}

/// A running sum or product along an axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cumulative {
    /// A product (`CumProd`) instead of a sum (`CumSum`).
    pub product: bool,
    /// Each element leaves itself out (the first is the identity).
    pub exclusive: bool,
    /// From the end of the axis to its start.
    pub reverse: bool,
}

/// The running sum or product of `x` along `axis` (ONNX's `CumSum` and `CumProd`), one
/// reduction per element over the elements before it. Stage `T_cumsum` / `T_cumprod`.
pub fn cumulative(x: &Tensor, axis: i64, how: Cumulative) -> Result<Tensor, TeError> {
    let name = if how.product { "cumprod" } else { "cumsum" };
    let s = x.shape().to_vec();
    let ax = normalize_axis(name, "axis", axis, s.len())?;
    let k = reduce_axis(s[ax], "k");
    compute_tagged(&s, &format!("T_{name}"), TAG_COMM_REDUCE, &[], |ix| {
        let (i, j) = (ix[ax].clone(), k.expr());
        let take = match (how.reverse, how.exclusive) {
            (false, false) => j.clone().le(i),
            (false, true) => j.clone().lt(i),
            (true, false) => j.clone().ge(i),
            (true, true) => j.clone().gt(i),
        };
        let mut idx = ix.to_vec();
        idx[ax] = j;
        let v = x.at(&idx);
        let r = if how.product {
            crate::tensor::prod(v, std::slice::from_ref(&k))
        } else {
            crate::tensor::sum(v, std::slice::from_ref(&k))
        };
        r.with_condition(take)
    })
}

/// The one-hot encoding of `indices` (negative ones counted from the end of `depth`):
/// a new axis of `depth` at `axis` of the result, `on` where the position equals the
/// index and `off` elsewhere, in `dtype` (ONNX's `OneHot`). Stage `T_one_hot`.
pub fn one_hot(
    indices: &Tensor,
    depth: i64,
    axis: i64,
    on: f64,
    off: f64,
    dtype: DataType,
) -> Result<Tensor, TeError> {
    let op = "one_hot";
    if depth < 1 {
        return Err(attr_err(op, "depth", format!("{depth} must be positive")));
    }
    let is = indices.shape().to_vec();
    let ax = normalize_axis(op, "axis", axis, is.len() + 1)?;
    let mut out = is[..ax].to_vec();
    out.push(depth);
    out.extend(&is[ax..]);
    compute_ax(&out, "T_one_hot", TAG_INJECTIVE, |ix| {
        let mut idx = ix[..ax].to_vec();
        idx.extend_from_slice(&ix[ax + 1..]);
        let v = Expr::cast(DataType::float64(), indices.at(&idx));
        let v = Expr::select(
            v.lt(Expr::float_of(DataType::float64(), 0.0)),
            v.clone() + Expr::float_of(DataType::float64(), depth as f64),
            v,
        );
        let pos = Expr::cast(DataType::float64(), ix[ax].clone());
        Expr::select(v.eq(pos), const_of(dtype, on), const_of(dtype, off))
    })
}

/// The position (`int64`) of the largest (`largest`) or smallest element along `axis`,
/// the first of equal ones or, with `last`, the last (ONNX's `ArgMax` and `ArgMin`):
/// the extreme value, then the least (greatest) position holding it. Stages
/// `T_arg<max|min>_value` and `T_arg<max|min>`.
pub fn arg_extreme(
    x: &Tensor,
    axis: i64,
    keepdims: bool,
    largest: bool,
    last: bool,
) -> Result<Tensor, TeError> {
    let name = if largest { "argmax" } else { "argmin" };
    let s = x.shape().to_vec();
    let ax = normalize_axis(name, "axis", axis, s.len())?;
    let mut out = s.clone();
    if keepdims {
        out[ax] = 1;
    } else {
        out.remove(ax);
    }
    // the input index of output index `ix` at position `j` of the axis
    let at = |ix: &[Expr], j: Expr| -> Vec<Expr> {
        let mut idx = ix.to_vec();
        if keepdims {
            idx[ax] = j;
        } else {
            idx.insert(ax, j);
        }
        idx
    };
    let k = reduce_axis(s[ax], "k");
    let extreme = compute_tagged(
        &out,
        &format!("T_{name}_value"),
        TAG_COMM_REDUCE,
        &[],
        |ix| {
            let v = x.at(&at(ix, k.expr()));
            let ks = std::slice::from_ref(&k);
            let r = if largest {
                crate::tensor::max(v, ks)
            } else {
                crate::tensor::min(v, ks)
            };
            // from ∓∞ for floats, so that a row of -∞ (+∞) has its extreme in it
            match x.dtype().is_float() {
                true => r.with_init(Expr::float_of(
                    x.dtype(),
                    if largest {
                        f64::NEG_INFINITY
                    } else {
                        f64::INFINITY
                    },
                )),
                false => r,
            }
        },
    )?;
    let k2 = reduce_axis(s[ax], "k");
    let i64c = |v: i64| Expr::int_of(DataType::int64(), v);
    compute_tagged(&out, &format!("T_{name}"), TAG_COMM_REDUCE, &[], |ix| {
        let j = Expr::cast(DataType::int64(), k2.expr());
        let hit = x.at(&at(ix, k2.expr())).eq(extreme.at(ix));
        let ks = std::slice::from_ref(&k2);
        if last {
            crate::tensor::max(Expr::select(hit, j, i64c(-1)), ks)
        } else {
            crate::tensor::min(Expr::select(hit, j, i64c(s[ax])), ks)
        }
    })
}
