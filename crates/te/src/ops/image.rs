//! Resizing the last two axes of an image tensor (ONNX's `Resize` and `Upsample`, TVM's
//! `topi.image.resize2d`): nearest and linear interpolation with ONNX's coordinate
//! transformations and nearest rounding modes, and bicubic (Keys' kernel). One stage `T_resize`, tag `injective`, reading
//! per-axis tables of input indices and weights (`T_resize_y0`, …, see [`Taps`]).

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
    /// As half-pixel, shifted so that the resized image stays centred where the output
    /// length was rounded down: `c · (1 − out / (in · scale)) + (x + 0.5) / scale − 0.5`
    /// with `c = in / 2` (ONNX's `half_pixel_symmetric`, opset 19).
    HalfPixelSymmetric,
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
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ResizeMethod {
    Nearest(NearestMode),
    /// Bilinear, the coordinates clamped to the input.
    Linear,
    /// Bicubic over four taps per axis at `floor(c) − 1 … floor(c) + 2`, Keys' kernel
    /// with coefficient `a` (ONNX's `cubic_coeff_a`, −0.75 by default; −0.5 is
    /// TensorFlow's); a tap past the edge reads the edge, or with `exclude_outside`
    /// weighs nothing and the others are renormalized.
    Cubic {
        a: f64,
        exclude_outside: bool,
    },
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
    let ih = s[n - 2];
    let taps = Taps::new(a, (ih, s[n - 1]), x.dtype())?;
    let one = Expr::float_of(x.dtype(), 1.0);
    // `src` at the leading indices of `ix`, row `y`, column `x_`
    let at = |src: &Tensor, ix: &[Expr], y: Expr, x_: Expr| {
        let mut idx = ix[..n - 2].to_vec();
        idx.push(y);
        idx.push(x_);
        src.at(&idx)
    };
    // linear along x of row `y` of `x` at output column `xi`
    let lerp_x = |tx: &LinearTaps, ix: &[Expr], y: Expr, xi: &Expr| {
        let (x0, x1, wx) = tx.at(xi);
        at(x, ix, y.clone(), x0) * (one.clone() - wx.clone()) + at(x, ix, y, x1) * wx
    };
    match &taps {
        Taps::Nearest { y: ty, x: tx } => compute_ax(&out, "T_resize", "injective", |ix| {
            let (y, xi) = (&ix[n - 2], &ix[n - 1]);
            at(
                x,
                ix,
                ty.at(std::slice::from_ref(y)),
                tx.at(std::slice::from_ref(xi)),
            )
        }),
        // upsampling rows: each input row interpolated along x once (`T_resize_h`, the
        // input's rows at the output's width: the gathers), then each output row is two
        // of those rows blended (contiguous loads); the same sums in the same order as
        // the direct form below, which does the gathers four times per output element
        // (DeepLab-v3's 14×14 → 224×224: 16 times as many). Not from one row (a
        // broadcast: the pass would be one more loop for nothing).
        Taps::Linear { y: ty, x: tx } if oh > ih && ih > 1 => {
            let mut hshape = s.clone();
            hshape[n - 1] = ow;
            let h = compute_ax(&hshape, "T_resize_h", "injective", |ix| {
                lerp_x(tx, ix, ix[n - 2].clone(), &ix[n - 1])
            })?;
            compute_ax(&out, "T_resize", "injective", |ix| {
                let (y0, y1, wy) = ty.at(&ix[n - 2]);
                let xi = ix[n - 1].clone();
                at(&h, ix, y0, xi.clone()) * (one.clone() - wy.clone()) + at(&h, ix, y1, xi) * wy
            })
        }
        Taps::Linear { y: ty, x: tx } => compute_ax(&out, "T_resize", "injective", |ix| {
            let (y0, y1, wy) = ty.at(&ix[n - 2]);
            let top = lerp_x(tx, ix, y0, &ix[n - 1]);
            let bottom = lerp_x(tx, ix, y1, &ix[n - 1]);
            top * (one.clone() - wy.clone()) + bottom * wy
        }),
        // sixteen taps: each of four rows blended along x, then the rows along y
        Taps::Cubic { y: ty, x: tx } => compute_ax(&out, "T_resize", "injective", |ix| {
            let row = |yk: Expr| {
                (0..4)
                    .map(|j| {
                        let (xj, wj) = tx.at(j, &ix[n - 1]);
                        at(x, ix, yk.clone(), xj) * wj
                    })
                    .reduce(|p, q| p + q)
                    .unwrap_or_else(|| one.clone())
            };
            (0..4)
                .map(|k| {
                    let (yk, wk) = ty.at(k, &ix[n - 2]);
                    row(yk) * wk
                })
                .reduce(|p, q| p + q)
                .unwrap_or_else(|| one.clone())
        }),
    }
}

/// Where each output index of one axis reads, computed once per axis as small stages
/// (`T_resize_y…`, `T_resize_x…`, of the output's length) instead of per output
/// element: the coordinate arithmetic (a division, clamps, a floor that vectorized code
/// runs lane by lane) then costs a table load, and the image stage is loads and FMAs
/// (DeepLab-v3's 14×14 → 224×224 bilinear upsampling of 21 channels: 1.9 ms of 10.9).
enum Taps {
    /// The input index (int32) of each output index, per axis.
    Nearest {
        y: Tensor,
        x: Tensor,
    },
    Linear {
        y: LinearTaps,
        x: LinearTaps,
    },
    Cubic {
        y: CubicTaps,
        x: CubicTaps,
    },
}

/// One axis's bicubic taps: four input indices (int32) and their weights (the input's
/// type), per output index.
struct CubicTaps {
    idx: Vec<Tensor>,
    w: Vec<Tensor>,
}

impl CubicTaps {
    /// Tap `k`'s index and weight at output index `i`.
    fn at(&self, k: usize, i: &Expr) -> (Expr, Expr) {
        let i = std::slice::from_ref(i);
        (self.idx[k].at(i), self.w[k].at(i))
    }
}

/// One axis's bilinear taps: the two input indices (int32) and the weight of the second
/// (the input's type), per output index.
struct LinearTaps {
    lo: Tensor,
    hi: Tensor,
    w: Tensor,
}

impl LinearTaps {
    /// The first index, the second and the second's weight at output index `i`.
    fn at(&self, i: &Expr) -> (Expr, Expr, Expr) {
        let i = std::slice::from_ref(i);
        (self.lo.at(i), self.hi.at(i), self.w.at(i))
    }
}

/// One axis of a resize: its name (`y`, `x`), input and output lengths and scale.
struct Axis<'a> {
    name: &'a str,
    len_in: i64,
    len_out: i64,
    scale: f64,
}

impl Taps {
    /// The tables of both axes of `a`'s resize of an input of `(height, width)`.
    fn new(a: &ResizeAttrs, (ih, iw): (i64, i64), dt: DataType) -> Result<Taps, TeError> {
        let y = Axis {
            name: "y",
            len_in: ih,
            len_out: a.size.0,
            scale: a.scale.0,
        };
        let x = Axis {
            name: "x",
            len_in: iw,
            len_out: a.size.1,
            scale: a.scale.1,
        };
        Ok(match a.method {
            ResizeMethod::Nearest(mode) => Taps::Nearest {
                y: y.nearest(a.coord, mode)?,
                x: x.nearest(a.coord, mode)?,
            },
            ResizeMethod::Linear => Taps::Linear {
                y: y.linear(a.coord, dt)?,
                x: x.linear(a.coord, dt)?,
            },
            ResizeMethod::Cubic {
                a: coeff,
                exclude_outside,
            } => Taps::Cubic {
                y: y.cubic(a.coord, coeff, exclude_outside, dt)?,
                x: x.cubic(a.coord, coeff, exclude_outside, dt)?,
            },
        })
    }
}

/// A float32 constant (the coordinates' and weights' type).
pub(super) fn fc(v: f64) -> Expr {
    Expr::float_of(DataType::float32(), v)
}

/// Keys' cubic convolution weights (coefficient `a`) of the four taps at
/// `floor(c) − 1 … floor(c) + 2` around a coordinate `c` whose fraction is `r`: ONNX's
/// `cubic_coeffs`, shared by Resize's and GridSample's bicubic modes.
pub(super) fn keys_weights(r: Expr, a: f64) -> [Expr; 4] {
    // the kernel at distance d ≤ 1 and 1 < d ≤ 2
    let near = |d: Expr| ((fc(a + 2.0) * d.clone() - fc(a + 3.0)) * d.clone() * d) + fc(1.0);
    let far =
        |d: Expr| ((fc(a) * d.clone() - fc(5.0 * a)) * d.clone() + fc(8.0 * a)) * d - fc(4.0 * a);
    [
        far(r.clone() + fc(1.0)),
        near(r.clone()),
        near(fc(1.0) - r.clone()),
        far(fc(2.0) - r),
    ]
}

impl Axis<'_> {
    /// The input coordinate (float32) of output index `i`.
    fn coord(&self, mode: CoordMode, i: &Expr) -> Expr {
        let xf = Expr::cast(DataType::float32(), i.clone());
        let (len_in, len_out, scale) = (self.len_in, self.len_out, self.scale);
        match mode {
            CoordMode::HalfPixel => (xf + fc(0.5)) / fc(scale) - fc(0.5),
            CoordMode::PytorchHalfPixel if len_out > 1 => (xf + fc(0.5)) / fc(scale) - fc(0.5),
            CoordMode::PytorchHalfPixel => fc(0.0),
            CoordMode::AlignCorners if len_out > 1 => {
                xf * fc((len_in - 1) as f64 / (len_out - 1) as f64)
            }
            CoordMode::AlignCorners => fc(0.0),
            CoordMode::Asymmetric => xf / fc(scale),
            CoordMode::HalfPixelSymmetric => {
                let adjustment = len_out as f64 / (len_in as f64 * scale);
                let offset = len_in as f64 / 2.0 * (1.0 - adjustment);
                fc(offset) + (xf + fc(0.5)) / fc(scale) - fc(0.5)
            }
        }
    }

    /// A table `T_resize_<axis><suffix>` of the output's length.
    fn table(&self, suffix: &str, f: impl FnOnce(&Expr) -> Expr) -> Result<Tensor, TeError> {
        let name = format!("T_resize_{}{suffix}", self.name);
        compute_ax(&[self.len_out], &name, "injective", |ix| f(&ix[0]))
    }

    fn nearest(&self, coord: CoordMode, mode: NearestMode) -> Result<Tensor, TeError> {
        self.table("", |i| {
            let c = self.coord(coord, i);
            let fl = Expr::math(Intrinsic::Floor, c.clone());
            let ce = Expr::math(Intrinsic::Ceil, c.clone());
            let frac = c - fl.clone();
            let rounded = match mode {
                NearestMode::Floor => fl,
                NearestMode::Ceil => ce,
                NearestMode::RoundPreferFloor => Expr::select(frac.le(fc(0.5)), fl, ce),
                NearestMode::RoundPreferCeil => Expr::select(frac.lt(fc(0.5)), fl, ce),
            };
            let idx = Expr::cast(DataType::int32(), rounded);
            Expr::min(Expr::max(idx, Expr::int(0)), Expr::int(self.len_in - 1))
        })
    }

    fn linear(&self, coord: CoordMode, dt: DataType) -> Result<LinearTaps, TeError> {
        // the coordinate clamped to the input
        let clamped = |i: &Expr| {
            let c = Expr::max(self.coord(coord, i), fc(0.0));
            Expr::min(c, fc((self.len_in - 1) as f64))
        };
        let lo = self.table("0", |i| {
            Expr::cast(DataType::int32(), Expr::math(Intrinsic::Floor, clamped(i)))
        })?;
        let hi = self.table("1", |i| {
            let next = lo.at(std::slice::from_ref(i)) + Expr::int(1);
            Expr::min(next, Expr::int(self.len_in - 1))
        })?;
        let w = self.table("w", |i| {
            let w = clamped(i) - Expr::math(Intrinsic::Floor, clamped(i));
            if dt == DataType::float32() {
                w
            } else {
                Expr::cast(dt, w)
            }
        })?;
        Ok(LinearTaps { lo, hi, w })
    }

    /// The bicubic taps: the coordinate is not clamped (a tap past the edge reads the
    /// edge, or weighs nothing with `exclude_outside`).
    fn cubic(
        &self,
        coord: CoordMode,
        a: f64,
        exclude_outside: bool,
        dt: DataType,
    ) -> Result<CubicTaps, TeError> {
        let last = self.len_in - 1;
        // the first tap's unclamped index, and the fraction past the second
        let first = |i: &Expr| {
            let fl = Expr::math(Intrinsic::Floor, self.coord(coord, i));
            Expr::cast(DataType::int32(), fl) - Expr::int(1)
        };
        let ratio = |i: &Expr| {
            let c = self.coord(coord, i);
            c.clone() - Expr::math(Intrinsic::Floor, c)
        };
        let raw = |k: usize, i: &Expr| {
            let c = keys_weights(ratio(i), a)[k].clone();
            if exclude_outside {
                let at = first(i) + Expr::int(k as i64);
                let inside = Expr::and(at.clone().ge(Expr::int(0)), at.le(Expr::int(last)));
                Expr::select(inside, c, fc(0.0))
            } else {
                c
            }
        };
        let mut idx = Vec::new();
        let mut w = Vec::new();
        for k in 0..4 {
            idx.push(self.table(&format!("{k}"), |i| {
                let at = first(i) + Expr::int(k as i64);
                Expr::min(Expr::max(at, Expr::int(0)), Expr::int(last))
            })?);
            w.push(self.table(&format!("w{k}"), |i| {
                let v = if exclude_outside {
                    let total = (0..4)
                        .map(|j| raw(j, i))
                        .reduce(|x, y| x + y)
                        .unwrap_or_else(|| fc(1.0));
                    raw(k, i) / total
                } else {
                    raw(k, i)
                };
                if dt == DataType::float32() {
                    v
                } else {
                    Expr::cast(dt, v)
                }
            })?);
        }
        Ok(CubicTaps { idx, w })
    }
}
