//! A few operators written the way TVM's TOPI writes them (same stage and axis names, so
//! their compute DAGs print as TVM prints them). The full operator library builds on
//! these.

use crate::error::TeError;
use crate::tensor::{compute, compute_tagged, max, reduce_axis, sum, Tensor};
use tessera_ir::Expr;

fn shape_err(op: &str, shape: &[i64], reason: String) -> TeError {
    TeError::BadShape {
        op: op.to_string(),
        shape: shape.to_vec(),
        reason,
    }
}

/// `C[i, j] = Σ_k A[i, k] * B[k, j]`.
pub fn matmul(a: &Tensor, b: &Tensor) -> Result<Tensor, TeError> {
    let (sa, sb) = (a.shape(), b.shape());
    if sa.len() != 2 || sb.len() != 2 || sa[1] != sb[0] {
        return Err(shape_err(
            "matmul",
            sa,
            format!("cannot multiply {sa:?} by {sb:?}"),
        ));
    }
    let k = reduce_axis(sa[1], "k");
    compute_tagged(&[sa[0], sb[1]], "C", "matmul", &["i", "j"], |ix| {
        sum(
            a.at(&[ix[0].clone(), k.expr()]) * b.at(&[k.expr(), ix[1].clone()]),
            &[k.clone()],
        )
    })
}

/// Zero padding of the dimensions of `x` by `before` / `after` elements (TVM's `pad`).
pub fn pad(x: &Tensor, before: &[i64], after: &[i64], name: &str) -> Result<Tensor, TeError> {
    let s = x.shape();
    if before.len() != s.len() || after.len() != s.len() {
        return Err(shape_err(
            "pad",
            s,
            format!(
                "{} / {} pad widths for {} dimensions",
                before.len(),
                after.len(),
                s.len()
            ),
        ));
    }
    if before.iter().chain(after).any(|p| *p < 0) {
        return Err(shape_err(
            "pad",
            s,
            format!("negative padding {before:?} {after:?}"),
        ));
    }
    let out: Vec<i64> = (0..s.len()).map(|d| s[d] + before[d] + after[d]).collect();
    let zero = Expr::constant(x.dtype(), 0.0);
    compute_tagged(&out, name, "injective,pad", &[], |ix| {
        let mut conds = Vec::new();
        let mut idx = Vec::new();
        for d in 0..s.len() {
            if before[d] > 0 || after[d] > 0 {
                conds.push(ix[d].ge(before[d]));
                conds.push(ix[d].lt(before[d] + s[d]));
            }
            idx.push(if before[d] > 0 {
                &ix[d] - before[d]
            } else {
                ix[d].clone()
            });
        }
        if conds.is_empty() {
            x.at(&idx)
        } else {
            Expr::if_then_else(Expr::all(conds), x.at(&idx), zero.clone())
        }
    })
}

/// 2-D convolution, data NHWC, kernel HWIO (TVM's `conv2d_nhwc`).
pub fn conv2d_nhwc(
    data: &Tensor,
    kernel: &Tensor,
    stride: (i64, i64),
    padding: (i64, i64),
    dilation: (i64, i64),
) -> Result<Tensor, TeError> {
    let (d, k) = (data.shape(), kernel.shape());
    if d.len() != 4 || k.len() != 4 {
        return Err(shape_err(
            "conv2d_nhwc",
            d,
            format!("data {d:?} and kernel {k:?} must both be 4-D"),
        ));
    }
    if k[2] != d[3] {
        return Err(shape_err(
            "conv2d_nhwc",
            d,
            format!(
                "kernel input channels {} differ from data channels {}",
                k[2], d[3]
            ),
        ));
    }
    if stride.0 <= 0
        || stride.1 <= 0
        || dilation.0 <= 0
        || dilation.1 <= 0
        || padding.0 < 0
        || padding.1 < 0
    {
        return Err(shape_err("conv2d_nhwc", d, format!("stride {stride:?}, dilation {dilation:?} must be positive and padding {padding:?} non-negative")));
    }
    let (kh, kw) = ((k[0] - 1) * dilation.0 + 1, (k[1] - 1) * dilation.1 + 1);
    let (ph, pw) = (d[1] + 2 * padding.0, d[2] + 2 * padding.1);
    if kh > ph || kw > pw {
        return Err(shape_err(
            "conv2d_nhwc",
            d,
            format!("the dilated kernel {kh}x{kw} is larger than the padded input {ph}x{pw}"),
        ));
    }
    let (oh, ow) = ((ph - kh) / stride.0 + 1, (pw - kw) / stride.1 + 1);
    let padded = pad(
        data,
        &[0, padding.0, padding.1, 0],
        &[0, padding.0, padding.1, 0],
        "pad_temp",
    )?;
    let (ry, rx, rc) = (
        reduce_axis(k[0], "ry"),
        reduce_axis(k[1], "rx"),
        reduce_axis(k[2], "rc"),
    );
    let scaled = |e: &Expr, s: i64| if s == 1 { e.clone() } else { e * s };
    compute_tagged(
        &[d[0], oh, ow, k[3]],
        "conv2d_nhwc",
        "conv2d_nhwc",
        &["nn", "yy", "xx", "ff"],
        |ix| {
            let y = scaled(&ix[1], stride.0) + scaled(&ry.expr(), dilation.0);
            let x = scaled(&ix[2], stride.1) + scaled(&rx.expr(), dilation.1);
            let src = padded.at(&[ix[0].clone(), y, x, rc.expr()])
                * kernel.at(&[ry.expr(), rx.expr(), rc.expr(), ix[3].clone()]);
            sum(src, &[ry.clone(), rx.clone(), rc.clone()])
        },
    )
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
    let k = reduce_axis(s[1], "k");
    let maxelem = compute(&[s[0]], "T_softmax_maxelem", &[], |ix| {
        max(x.at(&[ix[0].clone(), k.expr()]), &[k.clone()])
    })?;
    let exp = compute(s, "T_softmax_exp", &[], |ix| {
        (x.at(ix) - maxelem.at(&ix[..1])).exp()
    })?;
    let k2 = reduce_axis(s[1], "k");
    let expsum = compute(&[s[0]], "T_softmax_expsum", &[], |ix| {
        sum(exp.at(&[ix[0].clone(), k2.expr()]), &[k2.clone()])
    })?;
    compute(s, "T_softmax_norm", &[], |ix| {
        exp.at(ix) / expsum.at(&ix[..1])
    })
}
