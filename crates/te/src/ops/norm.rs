//! Normalizations over windows and instances: local response normalization (ONNX's
//! `LRN`, TVM's `topi.nn.lrn`) and instance normalization (`InstanceNormalization`).

use super::attr_err;
use super::elemwise::{compute_ax, const_of, TAG_ELEMWISE};
use super::injective::pad;
use super::reduce::TAG_COMM_REDUCE;
use crate::error::TeError;
use crate::tensor::{compute_tagged, reduce_axis, sum, IterVar, Tensor};
use tessera_ir::Expr;

/// The shape of `x`, which `op` needs to be a float tensor `[N, C, …]` of rank 3 or more.
fn float_rank3(op: &str, x: &Tensor) -> Result<Vec<i64>, TeError> {
    let s = x.shape().to_vec();
    if s.len() < 3 || !x.dtype().is_float() {
        return Err(attr_err(
            op,
            "data",
            format!(
                "needs a float tensor of rank 3 or more, got {} {s:?}",
                x.dtype()
            ),
        ));
    }
    Ok(s)
}

/// The attributes of [`lrn`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LrnAttrs {
    /// The number of channels in the window (odd or even).
    pub size: i64,
    pub alpha: f64,
    pub beta: f64,
    pub bias: f64,
}

/// Local response normalization across the channels (axis 1) of a float tensor of rank
/// 3 or more: `x / (bias + alpha / size · Σ x²)^beta`, the sum over the channels
/// `c - ⌊(size-1)/2⌋ ..= c + ⌈(size-1)/2⌉` that exist. Stages: `T_lrn_pad` (the input
/// padded by zeros along the channels), `T_lrn_sqr_sum` (tag `comm_reduce`, reduce axis
/// `rxk`) and `T_lrn` (tag `elemwise`).
pub fn lrn(x: &Tensor, a: &LrnAttrs) -> Result<Tensor, TeError> {
    let op = "lrn";
    let s = float_rank3(op, x)?;
    if a.size < 1 {
        return Err(attr_err(op, "size", format!("{} must be positive", a.size)));
    }
    let lo = (a.size - 1) / 2;
    let mut before = vec![0; s.len()];
    let mut after = vec![0; s.len()];
    before[1] = lo;
    after[1] = a.size - 1 - lo;
    let padded = pad(x, &before, &after, "T_lrn_pad")?;
    let k = reduce_axis(a.size, "rxk");
    let sqr = compute_tagged(&s, "T_lrn_sqr_sum", TAG_COMM_REDUCE, &[], |ix| {
        let mut idx = ix.to_vec();
        idx[1] = &ix[1] + k.expr();
        let v = padded.at(&idx);
        sum(v.clone() * v, &[k.clone()])
    })?;
    let dt = x.dtype();
    compute_ax(&s, "T_lrn", TAG_ELEMWISE, |ix| {
        let scaled = const_of(dt, a.bias) + const_of(dt, a.alpha / a.size as f64) * sqr.at(ix);
        x.at(ix) / scaled.pow(const_of(dt, a.beta))
    })
}

/// Instance normalization of a float tensor `[N, C, …]` of rank 3 or more: each
/// `(n, c)` slice normalized by its own mean and (population) variance, then scaled by
/// `gamma[c]` and shifted by `beta[c]`. Stages `T_instance_norm_mean`,
/// `T_instance_norm_var` (tag `comm_reduce`), `T_instance_norm_scale` (the reciprocal
/// deviation times gamma, per `(n, c)`) and `T_instance_norm` (tag `elemwise`).
pub fn instance_norm(
    x: &Tensor,
    gamma: &Tensor,
    beta: &Tensor,
    epsilon: f64,
) -> Result<Tensor, TeError> {
    instance_norm_in(x, gamma, beta, epsilon, false)
}

/// [`instance_norm`] of `[N, C, …]` (`channels_last` false) or `[N, …, C]` (true: an
/// NHWC value normalized where it is, without transposing it to NCHW and back). The
/// statistics are `[N, C]` either way.
pub fn instance_norm_in(
    x: &Tensor,
    gamma: &Tensor,
    beta: &Tensor,
    epsilon: f64,
    channels_last: bool,
) -> Result<Tensor, TeError> {
    let op = "instance_norm";
    let s = float_rank3(op, x)?;
    let c_ax = if channels_last { s.len() - 1 } else { 1 };
    for (name, p) in [("scale", gamma), ("B", beta)] {
        if p.shape() != [s[c_ax]] || p.dtype() != x.dtype() {
            return Err(attr_err(
                op,
                name,
                format!(
                    "must be {} [{}], got {} {:?}",
                    x.dtype(),
                    s[c_ax],
                    p.dtype(),
                    p.shape()
                ),
            ));
        }
    }
    if !(epsilon.is_finite() && epsilon >= 0.0) {
        return Err(attr_err(
            op,
            "epsilon",
            format!("{epsilon} must be finite, not negative"),
        ));
    }
    let dt = x.dtype();
    // the spatial axes' positions
    let spatial_axes: Vec<usize> = (1..s.len()).filter(|&d| d != c_ax).collect();
    let count: i64 = spatial_axes.iter().map(|&d| s[d]).product();
    let spatial = || -> Vec<IterVar> {
        spatial_axes
            .iter()
            .map(|&d| reduce_axis(s[d], &format!("k{d}")))
            .collect()
    };
    // the element of `x` at statistics index `[n, c]` and spatial position `ks`
    let at = |nc: &[Expr], ks: &[IterVar]| -> Vec<Expr> {
        let mut idx = vec![nc[0].clone()];
        let mut k = ks.iter();
        for d in 1..s.len() {
            if d == c_ax {
                idx.push(nc[1].clone());
            } else if let Some(v) = k.next() {
                idx.push(v.expr());
            }
        }
        idx
    };
    let nc = [s[0], s[c_ax]];
    let ks = spatial();
    let mean = compute_tagged(&nc, "T_instance_norm_mean", TAG_COMM_REDUCE, &[], |ix| {
        sum(x.at(&at(ix, &ks)) / const_of(dt, count as f64), &ks)
    })?;
    let ks = spatial();
    let var = compute_tagged(&nc, "T_instance_norm_var", TAG_COMM_REDUCE, &[], |ix| {
        let d = x.at(&at(ix, &ks)) - mean.at(ix);
        sum(d.clone() * d / const_of(dt, count as f64), &ks)
    })?;
    // the reciprocal deviation times gamma once per (n, c), not a square root and a
    // division per element
    let scale = compute_ax(&nc, "T_instance_norm_scale", TAG_ELEMWISE, |ix| {
        let inv = Expr::math(
            tessera_ir::Intrinsic::Rsqrt,
            var.at(ix) + const_of(dt, epsilon),
        );
        inv * gamma.at(&ix[1..2])
    })?;
    compute_ax(&s, "T_instance_norm", TAG_ELEMWISE, |ix| {
        let nc = [ix[0].clone(), ix[c_ax].clone()];
        let c = std::slice::from_ref(&ix[c_ax]);
        (x.at(ix) - mean.at(&nc)) * scale.at(&nc) + beta.at(c)
    })
}
