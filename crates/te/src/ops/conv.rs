//! Convolutions.

use super::{attr_err, injective::pad};
use crate::error::TeError;
use crate::tensor::{compute_tagged, reduce_axis, sum, Tensor};
use tessera_ir::Expr;

fn shape_err(op: &str, shape: &[i64], reason: String) -> TeError {
    TeError::BadShape {
        op: op.to_string(),
        shape: shape.to_vec(),
        reason,
    }
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
