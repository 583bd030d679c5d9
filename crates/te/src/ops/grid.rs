//! Sampling an image at coordinates read from a tensor (ONNX's `GridSample`, PyTorch's
//! `grid_sample`, TVM's `topi.image.grid_sample`): `x` is `[N, C, D_1, …, D_s]` (s = 2
//! or 3), `grid` is `[N, G_1, …, G_s, s]` with coordinates in [−1, 1] (the last axis
//! names the innermost spatial axis first: `(x, y)` for an image), and the output is
//! `[N, C, G_1, …, G_s]`. One stage `T_grid_sample`, tag `injective`: each element
//! denormalizes its coordinates, moves those past the border by the padding mode, and
//! blends its taps (1, 2 or 4 per axis) — the gathers' positions come from the data, so
//! each tap's index is clamped into the image and, with zero padding, masked.
//!
//! The arithmetic is ONNX's reference (itself PyTorch's `GridSampler.h`): nearest
//! rounds halves to even, bicubic uses Keys' kernel with a = −0.75, reflection
//! reflects about the border (`[−0.5, D − 0.5]`, or `[0, D − 1]` with `align_corners`).

use super::attr_err;
use super::elemwise::compute_ax;
use super::image::{fc as f, keys_weights};
use crate::error::TeError;
use crate::tensor::Tensor;
use tessera_ir::{DataType, Expr, Intrinsic};

/// How the taps blend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GridMode {
    Nearest,
    Linear,
    Cubic,
}

/// What a coordinate or tap past the image reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GridPadding {
    /// Zero.
    Zeros,
    /// The nearest edge.
    Border,
    /// The image reflected about its border.
    Reflection,
}

/// The attributes of [`grid_sample`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GridSampleAttrs {
    pub mode: GridMode,
    pub padding: GridPadding,
    /// −1 and 1 name the centres of the corner elements (else their outer edges).
    pub align_corners: bool,
}

/// One spatial axis of length `len`: its border and how its coordinates and taps map.
struct Axis {
    len: i64,
    attrs: GridSampleAttrs,
}

impl Axis {
    /// The border about which coordinates reflect.
    fn border(&self) -> (f64, f64) {
        if self.attrs.align_corners {
            (0.0, (self.len - 1) as f64)
        } else {
            (-0.5, self.len as f64 - 0.5)
        }
    }

    /// `v` reflected about `[lo, hi]` until inside (closed form of the reference's
    /// loop: the position in a period of twice the range, folded).
    fn reflect(&self, v: Expr) -> Expr {
        let (lo, hi) = self.border();
        let range = hi - lo;
        if range <= 0.0 {
            return f(lo);
        }
        let t = v - f(lo);
        let period = f(2.0 * range);
        let t = t.clone() - Expr::math(Intrinsic::Floor, t / period.clone()) * period.clone();
        f(lo) + Expr::select(t.clone().le(f(range)), t.clone(), period - t)
    }

    /// The input coordinate (float32) of normalized coordinate `n`, moved inside by the
    /// padding mode where it is past the border.
    fn coordinate(&self, n: Expr) -> Expr {
        let d = self.len as f64;
        let c = if self.attrs.align_corners {
            (n + f(1.0)) * f((d - 1.0) / 2.0)
        } else {
            ((n + f(1.0)) * f(d) - f(1.0)) * f(0.5)
        };
        let c = match self.attrs.mode {
            GridMode::Nearest => Expr::math(Intrinsic::RoundEven, c),
            _ => c,
        };
        match self.attrs.padding {
            GridPadding::Zeros => c,
            // bicubic clamps its taps, not the coordinate (PyTorch and onnxruntime; the
            // ONNX reference clamps both, and its cases do not tell them apart)
            GridPadding::Border if self.attrs.mode == GridMode::Cubic => c,
            GridPadding::Border => Expr::min(Expr::max(c, f(0.0)), f(d - 1.0)),
            GridPadding::Reflection => self.reflect(c),
        }
    }

    /// Where tap index `i` (int32) reads, and whether it reads the image at all.
    fn tap(&self, i: Expr) -> (Expr, Expr) {
        let last = Expr::int(self.len - 1);
        let clamped = |i: Expr| Expr::min(Expr::max(i, Expr::int(0)), last.clone());
        match self.attrs.padding {
            GridPadding::Zeros => {
                let inside = Expr::and(i.clone().ge(Expr::int(0)), i.clone().le(last.clone()));
                (clamped(i), inside)
            }
            GridPadding::Border => (clamped(i), Expr::bool(true)),
            GridPadding::Reflection => {
                let r = self.reflect(Expr::cast(DataType::float32(), i));
                (clamped(Expr::cast(DataType::int32(), r)), Expr::bool(true))
            }
        }
    }

    /// The taps of coordinate `c`: (index, weight) pairs.
    fn taps(&self, c: Expr) -> Vec<(Expr, Expr)> {
        let floor = Expr::math(Intrinsic::Floor, c.clone());
        let base = Expr::cast(DataType::int32(), floor.clone());
        let r = c - floor;
        let at = |k: i64| base.clone() + Expr::int(k);
        match self.attrs.mode {
            // the coordinate is already a whole number
            GridMode::Nearest => vec![(at(0), f(1.0))],
            GridMode::Linear => vec![(at(0), f(1.0) - r.clone()), (at(1), r)],
            GridMode::Cubic => (-1..=2).map(at).zip(keys_weights(r, -0.75)).collect(),
        }
    }
}

/// `x` sampled at `grid` (see the module's documentation). Stage `T_grid_sample`.
pub fn grid_sample(x: &Tensor, grid: &Tensor, a: &GridSampleAttrs) -> Result<Tensor, TeError> {
    let op = "grid_sample";
    let (xs, gs) = (x.shape().to_vec(), grid.shape().to_vec());
    let s = xs.len().saturating_sub(2);
    if !(2..=3).contains(&s)
        || gs.len() != s + 2
        || gs[0] != xs[0]
        || gs[s + 1] != s as i64
        || !x.dtype().is_float()
        || !grid.dtype().is_float()
    {
        return Err(attr_err(
            op,
            "grid",
            format!(
                "needs float x [N, C, 2 or 3 spatial axes] and grid [N, …, spatial rank], \
                 got {} {xs:?} and {} {gs:?}",
                x.dtype(),
                grid.dtype()
            ),
        ));
    }
    let axes: Vec<Axis> = xs[2..].iter().map(|&len| Axis { len, attrs: *a }).collect();
    let mut out = vec![xs[0], xs[1]];
    out.extend_from_slice(&gs[1..=s]);
    let dt = x.dtype();
    compute_ax(&out, "T_grid_sample", "injective", |ix| {
        // spatial axis i reads the grid's component s − 1 − i
        let taps: Vec<Vec<(Expr, Expr, Expr)>> = axes
            .iter()
            .enumerate()
            .map(|(i, axis)| {
                let mut g = vec![ix[0].clone()];
                g.extend_from_slice(&ix[2..]);
                g.push(Expr::int((s - 1 - i) as i64));
                let n = Expr::cast(DataType::float32(), grid.at(&g));
                axis.taps(axis.coordinate(n))
                    .into_iter()
                    .map(|(t, w)| {
                        let (at, inside) = axis.tap(t);
                        (at, w, inside)
                    })
                    .collect()
            })
            .collect();
        // every combination of one tap per axis
        let mut terms: Vec<(Vec<Expr>, Expr, Expr)> = vec![(Vec::new(), f(1.0), Expr::bool(true))];
        for axis_taps in &taps {
            terms = terms
                .iter()
                .flat_map(|(idx, w, inside)| {
                    axis_taps.iter().map(move |(t, tw, tin)| {
                        let mut idx = idx.clone();
                        idx.push(t.clone());
                        (
                            idx,
                            w.clone() * tw.clone(),
                            Expr::and(inside.clone(), tin.clone()),
                        )
                    })
                })
                .collect();
        }
        let zero = Expr::float_of(dt, 0.0);
        terms
            .into_iter()
            .map(|(idx, w, inside)| {
                let mut at = vec![ix[0].clone(), ix[1].clone()];
                at.extend(idx);
                let v = Expr::select(inside, x.at(&at), zero.clone());
                let w = if dt == DataType::float32() {
                    w
                } else {
                    Expr::cast(dt, w)
                };
                v * w
            })
            .reduce(|p, q| p + q)
            .unwrap_or(zero.clone())
    })
}
