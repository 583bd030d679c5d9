//! Normalizations: softmax, log_softmax, layer norm.
//!
//! softmax and log_softmax are written as TVM's Python TOPI writes them (stages
//! `T_softmax_maxelem`, `T_softmax_exp`, `T_softmax_expsum`, `T_softmax_norm`; axes
//! `i0, i1, …`; reduce axis `k`; tags `softmax_output` / `log_softmax_output`). Layer
//! norm follows TVM's C++ `topi::layer_norm` (output `T_layer_norm`, tag `injective`,
//! reduce axes `k<axis>`), with the mean and the variance as two reduction stages of
//! their own instead of TVM's single tuple reduction of `Σx` and `Σx²`.

use super::attr_err;
use crate::error::TeError;
use crate::tensor::{compute_tagged, max, reduce_axis, sum, Tensor};
use tessera_ir::Expr;

fn shape_err(op: &str, shape: &[i64], reason: String) -> TeError {
    TeError::BadShape {
        op: op.to_string(),
        shape: shape.to_vec(),
        reason,
    }
}

fn require_float(op: &str, x: &Tensor) -> Result<(), TeError> {
    if !x.dtype().is_float() {
        return Err(attr_err(
            op,
            "dtype",
            format!("needs a float tensor, `{}` is {}", x.name(), x.dtype()),
        ));
    }
    Ok(())
}

/// `axis` (negative counts from the end) as an index into `ndim` dimensions.
fn real_axis(op: &str, axis: i64, ndim: usize) -> Result<usize, TeError> {
    let n = ndim as i64;
    if axis < -n || axis >= n {
        return Err(attr_err(
            op,
            "axis",
            format!("{axis} is out of range for a {ndim}-dimensional tensor"),
        ));
    }
    Ok(if axis < 0 { axis + n } else { axis } as usize)
}

/// `ix` with `k` inserted at position `axis`.
fn insert_reduce_index(ix: &[Expr], axis: usize, k: Expr) -> Vec<Expr> {
    let mut v = ix[..axis].to_vec();
    v.push(k);
    v.extend_from_slice(&ix[axis..]);
    v
}

/// `ix` without position `axis`.
fn non_reduce_indices(ix: &[Expr], axis: usize) -> Vec<Expr> {
    ix.iter()
        .enumerate()
        .filter(|(i, _)| *i != axis)
        .map(|(_, e)| e.clone())
        .collect()
}

/// Checks a softmax-like operator's input and returns the reduced axis and the shape
/// without it.
fn softmax_prep(op: &str, x: &Tensor, axis: i64) -> Result<(usize, Vec<i64>), TeError> {
    if x.ndim() == 0 {
        return Err(shape_err(
            op,
            x.shape(),
            "needs at least one dimension".into(),
        ));
    }
    let ax = real_axis(op, axis, x.ndim())?;
    require_float(op, x)?;
    let reduced: Vec<i64> = x
        .shape()
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != ax)
        .map(|(_, d)| *d)
        .collect();
    Ok((ax, reduced))
}

/// Softmax over the last axis of a 2-D tensor, in TVM's four stages.
pub fn softmax(x: &Tensor) -> Result<Tensor, TeError> {
    let s = x.shape();
    if s.len() != 2 {
        return Err(shape_err(
            "softmax",
            s,
            "softmax expects a 2-D tensor".into(),
        ));
    }
    softmax_axis(x, 1)
}

/// Softmax of an N-D float tensor over `axis` (negative counts from the end), as TVM's
/// `topi.nn.softmax`: `T_softmax_maxelem` (max over `k`), `T_softmax_exp`,
/// `T_softmax_expsum` (sum over `k`) and `T_softmax_norm`, tag `softmax_output`.
pub fn softmax_axis(x: &Tensor, axis: i64) -> Result<Tensor, TeError> {
    let (ax, reduced) = softmax_prep("softmax", x, axis)?;
    let s = x.shape();
    let tag = "softmax_output";
    let k1 = reduce_axis(s[ax], "k");
    let maxelem = compute_tagged(&reduced, "T_softmax_maxelem", tag, &[], |ix| {
        max(x.at(&insert_reduce_index(ix, ax, k1.expr())), &[k1.clone()])
    })?;
    let exp = compute_tagged(s, "T_softmax_exp", tag, &[], |ix| {
        (x.at(ix) - maxelem.at(&non_reduce_indices(ix, ax))).exp()
    })?;
    let k2 = reduce_axis(s[ax], "k");
    let expsum = compute_tagged(&reduced, "T_softmax_expsum", tag, &[], |ix| {
        sum(
            exp.at(&insert_reduce_index(ix, ax, k2.expr())),
            &[k2.clone()],
        )
    })?;
    compute_tagged(s, "T_softmax_norm", tag, &[], |ix| {
        exp.at(ix) / expsum.at(&non_reduce_indices(ix, ax))
    })
}

/// Log-softmax of an N-D float tensor over `axis` (negative counts from the end), as
/// TVM's `topi.nn.log_softmax`: `T_softmax_maxelem` (max over `k`), `compute` (the sum
/// of `exp(x - max)` over `k`) and the output `compute = x - max - log(sum)`, tag
/// `log_softmax_output`.
pub fn log_softmax(x: &Tensor, axis: i64) -> Result<Tensor, TeError> {
    let (ax, reduced) = softmax_prep("log_softmax", x, axis)?;
    let s = x.shape();
    let tag = "log_softmax_output";
    let k1 = reduce_axis(s[ax], "k");
    let maxelem = compute_tagged(&reduced, "T_softmax_maxelem", tag, &[], |ix| {
        max(x.at(&insert_reduce_index(ix, ax, k1.expr())), &[k1.clone()])
    })?;
    let k2 = reduce_axis(s[ax], "k");
    let expsum = compute_tagged(&reduced, "compute", tag, &[], |ix| {
        sum(
            (x.at(&insert_reduce_index(ix, ax, k2.expr())) - maxelem.at(ix)).exp(),
            &[k2.clone()],
        )
    })?;
    compute_tagged(s, "compute", tag, &[], |ix| {
        let nr = non_reduce_indices(ix, ax);
        x.at(ix) - maxelem.at(&nr) - expsum.at(&nr).log()
    })
}

/// Layer normalization of a float tensor over `axis` (negative counts from the end;
/// empty: the last axis): `(x - mean) / sqrt(var + epsilon) * gamma + beta`, the mean
/// and the (population) variance taken over the axes. `gamma` (and `beta`, when given)
/// have the shape of those axes.
///
/// Stages: `T_layer_norm_mean` and `T_layer_norm_var` (tag `comm_reduce`, axes
/// `ax0, …` over the remaining dimensions — `[1]` when every axis is reduced — reduce
/// axes `k<axis>`), then `T_layer_norm` (tag `injective`) =
/// `(x - mean)*rsqrt(var + epsilon)*gamma + beta`.
pub fn layer_norm(
    x: &Tensor,
    gamma: &Tensor,
    beta: Option<&Tensor>,
    axis: &[i64],
    epsilon: f64,
) -> Result<Tensor, TeError> {
    let op = "layer_norm";
    let s = x.shape().to_vec();
    let n = s.len();
    if n == 0 {
        return Err(shape_err(op, &s, "cannot normalize a 0-D tensor".into()));
    }
    require_float(op, x)?;
    let mut axes: Vec<usize> = if axis.is_empty() {
        vec![n - 1]
    } else {
        axis.iter()
            .map(|a| real_axis(op, *a, n))
            .collect::<Result<_, _>>()?
    };
    axes.sort_unstable();
    if axes.windows(2).any(|w| w[0] == w[1]) {
        return Err(attr_err(
            op,
            "axis",
            format!("{axis:?} names an axis twice"),
        ));
    }
    if !(epsilon.is_finite() && epsilon >= 0.0) {
        return Err(attr_err(
            op,
            "epsilon",
            format!("{epsilon} must be finite and not negative"),
        ));
    }
    let norm_shape: Vec<i64> = axes.iter().map(|a| s[*a]).collect();
    for (attr, t) in [("gamma", Some(gamma)), ("beta", beta)] {
        let Some(t) = t else { continue };
        if t.shape() != norm_shape.as_slice() {
            return Err(shape_err(
                op,
                t.shape(),
                format!(
                    "{attr} {:?} must have the shape {norm_shape:?} of the normalized axes \
                     {axes:?} of {s:?}",
                    t.shape()
                ),
            ));
        }
        if t.dtype() != x.dtype() {
            return Err(attr_err(
                op,
                "dtype",
                format!("{attr} is {} but the data is {}", t.dtype(), x.dtype()),
            ));
        }
    }
    let dt = x.dtype();
    let count = norm_shape
        .iter()
        .try_fold(1i64, |acc, d| acc.checked_mul(*d))
        .ok_or_else(|| shape_err(op, &s, "the normalized element count overflows".into()))?;
    let count = Expr::float_of(dt, count as f64);
    let is_red = |i: usize| axes.contains(&i);
    let all_reduced = axes.len() == n;
    let mut target: Vec<i64> = (0..n).filter(|i| !is_red(*i)).map(|i| s[i]).collect();
    if target.is_empty() {
        target.push(1);
    }
    let ax_names: Vec<String> = (0..target.len()).map(|i| format!("ax{i}")).collect();
    let ax_refs: Vec<&str> = ax_names.iter().map(String::as_str).collect();
    let out_names: Vec<String> = (0..n).map(|i| format!("ax{i}")).collect();
    let out_refs: Vec<&str> = out_names.iter().map(String::as_str).collect();
    // The index of `x` for the reduced-stage indices `ix` and the reduce axes `ks`.
    let eval_range = |ix: &[Expr], ks: &[Expr]| -> Vec<Expr> {
        let (mut a, mut r) = (0, 0);
        (0..n)
            .map(|i| {
                if is_red(i) {
                    r += 1;
                    ks[r - 1].clone()
                } else {
                    a += 1;
                    ix[a - 1].clone()
                }
            })
            .collect()
    };
    // The index of a reduced stage for the output indices `ix`.
    let reduced_index = |ix: &[Expr]| -> Vec<Expr> {
        if all_reduced {
            vec![Expr::int(0)]
        } else {
            (0..n)
                .filter(|i| !is_red(*i))
                .map(|i| ix[i].clone())
                .collect()
        }
    };
    let make_axes = || -> Vec<_> {
        axes.iter()
            .map(|a| reduce_axis(s[*a], &format!("k{a}")))
            .collect()
    };
    let k1 = make_axes();
    let mean = compute_tagged(
        &target,
        "T_layer_norm_mean",
        "comm_reduce",
        &ax_refs,
        |ix| {
            let ks: Vec<Expr> = k1.iter().map(|k| k.expr()).collect();
            sum(x.at(&eval_range(ix, &ks)) / count.clone(), &k1)
        },
    )?;
    let k2 = make_axes();
    let var = compute_tagged(&target, "T_layer_norm_var", "comm_reduce", &ax_refs, |ix| {
        let ks: Vec<Expr> = k2.iter().map(|k| k.expr()).collect();
        let d = x.at(&eval_range(ix, &ks)) - mean.at(ix);
        sum(d.clone() * d / count.clone(), &k2)
    })?;
    compute_tagged(&s, "T_layer_norm", "injective", &out_refs, |ix| {
        let ri = reduced_index(ix);
        let gi: Vec<Expr> = axes.iter().map(|a| ix[*a].clone()).collect();
        let inv = Expr::math(
            tessera_ir::Intrinsic::Rsqrt,
            var.at(&ri) + Expr::float_of(dt, epsilon),
        );
        let y = (x.at(ix) - mean.at(&ri)) * inv * gamma.at(&gi);
        match beta {
            Some(b) => y + b.at(&gi),
            None => y,
        }
    })
}
