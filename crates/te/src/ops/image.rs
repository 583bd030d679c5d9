//! Resizing the last two axes of an image tensor (ONNX's `Resize` and `Upsample`, TVM's
//! `topi.image.resize2d`): nearest and linear interpolation with ONNX's coordinate
//! transformations and nearest rounding modes. One stage `T_resize`, tag `injective`.

use super::attr_err;
use super::elemwise::compute_ax;
use crate::error::TeError;
use crate::tensor::Tensor;
use tessera_ir::{DataType, Expr, Intrinsic};

/// How an output coordinate maps to an input one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CoordMode {
    /// `(x + 0.5) / scale - 0.5`.
    HalfPixel,
    /// As half-pixel, but 0 where the output has one element.
    PytorchHalfPixel,
    /// `x · (in - 1) / (out - 1)`.
    AlignCorners,
    /// `x / scale`.
    Asymmetric,
}

/// How the nearest mode rounds an input coordinate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NearestMode {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
}

/// The interpolation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResizeMethod {
    Nearest(NearestMode),
    /// Bilinear, the coordinates clamped to the input.
    Linear,
}

/// The attributes of [`resize2d`]: the output size of the last two axes, the scales
/// (output over input, as given or implied by the sizes) and the modes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ResizeAttrs {
    pub size: (i64, i64),
    pub scale: (f64, f64),
    pub coord: CoordMode,
    pub method: ResizeMethod,
}

/// `x` (float, rank 2 or more) resized along its last two axes.
pub fn resize2d(x: &Tensor, a: &ResizeAttrs) -> Result<Tensor, TeError> {
    let op = "resize2d";
    let s = x.shape().to_vec();
    let n = s.len();
    if n < 2 || !x.dtype().is_float() {
        return Err(attr_err(
            op,
            "data",
            format!(
                "needs a float tensor of rank 2 or more, got {} {s:?}",
                x.dtype()
            ),
        ));
    }
    let (oh, ow) = a.size;
    if oh < 1 || ow < 1 || !(a.scale.0 > 0.0 && a.scale.1 > 0.0) {
        return Err(attr_err(
            op,
            "size",
            format!("output {oh}×{ow} at scales {:?} must be positive", a.scale),
        ));
    }
    let mut out = s.clone();
    out[n - 2] = oh;
    out[n - 1] = ow;
    let f32t = DataType::float32();
    let fc = |v: f64| Expr::float_of(f32t, v);
    // the input coordinate (float32) of output index `i` along an axis
    let coord = |i: &Expr, len_in: i64, len_out: i64, scale: f64| -> Expr {
        let xf = Expr::cast(f32t, i.clone());
        match a.coord {
            CoordMode::HalfPixel => (xf + fc(0.5)) / fc(scale) - fc(0.5),
            CoordMode::PytorchHalfPixel if len_out > 1 => (xf + fc(0.5)) / fc(scale) - fc(0.5),
            CoordMode::PytorchHalfPixel => fc(0.0),
            CoordMode::AlignCorners if len_out > 1 => {
                xf * fc((len_in - 1) as f64 / (len_out - 1) as f64)
            }
            CoordMode::AlignCorners => fc(0.0),
            CoordMode::Asymmetric => xf / fc(scale),
        }
    };
    let clamp_i = |e: Expr, len: i64| Expr::min(Expr::max(e, Expr::int(0)), Expr::int(len - 1));
    let to_i = |e: Expr| Expr::cast(DataType::int32(), e);
    let (ih, iw) = (s[n - 2], s[n - 1]);
    let (sh, sw) = a.scale;
    compute_ax(&out, "T_resize", "injective", |ix| {
        let lead = &ix[..n - 2];
        let cy = coord(&ix[n - 2], ih, oh, sh);
        let cx = coord(&ix[n - 1], iw, ow, sw);
        let load = |y: Expr, x_: Expr| {
            let mut idx = lead.to_vec();
            idx.push(y);
            idx.push(x_);
            x.at(&idx)
        };
        match a.method {
            ResizeMethod::Nearest(mode) => {
                let round = |c: Expr| -> Expr {
                    let fl = Expr::math(Intrinsic::Floor, c.clone());
                    let ce = Expr::math(Intrinsic::Ceil, c.clone());
                    let frac = c - fl.clone();
                    match mode {
                        NearestMode::Floor => fl,
                        NearestMode::Ceil => ce,
                        NearestMode::RoundPreferFloor => Expr::select(frac.le(fc(0.5)), fl, ce),
                        NearestMode::RoundPreferCeil => Expr::select(frac.lt(fc(0.5)), fl, ce),
                    }
                };
                load(clamp_i(to_i(round(cy)), ih), clamp_i(to_i(round(cx)), iw))
            }
            ResizeMethod::Linear => {
                let clampf =
                    |c: Expr, len: i64| Expr::min(Expr::max(c, fc(0.0)), fc((len - 1) as f64));
                let (cy, cx) = (clampf(cy, ih), clampf(cx, iw));
                let (fy, fx) = (
                    Expr::math(Intrinsic::Floor, cy.clone()),
                    Expr::math(Intrinsic::Floor, cx.clone()),
                );
                let (wy, wx) = (cy - fy.clone(), cx - fx.clone());
                let (y0, x0) = (to_i(fy), to_i(fx));
                let y1 = Expr::min(y0.clone() + Expr::int(1), Expr::int(ih - 1));
                let x1 = Expr::min(x0.clone() + Expr::int(1), Expr::int(iw - 1));
                let dt = x.dtype();
                let cast = |e: Expr| if dt == f32t { e } else { Expr::cast(dt, e) };
                let (wy, wx) = (cast(wy), cast(wx));
                let one = Expr::float_of(dt, 1.0);
                let top = load(y0.clone(), x0.clone()) * (one.clone() - wx.clone())
                    + load(y0, x1.clone()) * wx.clone();
                let bottom = load(y1.clone(), x0) * (one.clone() - wx.clone()) + load(y1, x1) * wx;
                top * (one - wy.clone()) + bottom * wy
            }
        }
    })
}
