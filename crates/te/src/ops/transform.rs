//! Data movement beyond [`super::injective`]: broadcasting to a shape (ONNX's `Expand`),
//! tiling, gathering along an axis by an index tensor (`Gather`, TVM's `take`), and
//! padding by reflection or by repeating the edge. All one stage, tag `injective`.

use super::attr_err;
use super::elemwise::{broadcast_shape, compute_ax, normalize_axis};
use crate::error::TeError;
use crate::tensor::Tensor;
use tessera_ir::{DataType, Expr};

const TAG_INJECTIVE: &str = "injective";

/// `x` broadcast to `shape` (NumPy rules; ONNX's `Expand` takes the broadcast of both,
/// so a 1 in `shape` keeps the input's dimension). Stage `T_broadcast_to`.
pub fn broadcast_to(x: &Tensor, shape: &[i64]) -> Result<Tensor, TeError> {
    let out = broadcast_shape("broadcast_to", x.shape(), shape)?;
    let s = x.shape().to_vec();
    compute_ax(&out, "T_broadcast_to", TAG_INJECTIVE, |ix| {
        x.at(&super::elemwise::broadcast_index(ix, &out, &s))
    })
}

/// `x` repeated `reps[d]` times along each dimension `d` (NumPy's `tile` with as many
/// repetitions as dimensions). Stage `T_tile`.
pub fn tile(x: &Tensor, reps: &[i64]) -> Result<Tensor, TeError> {
    let s = x.shape().to_vec();
    if reps.len() != s.len() {
        return Err(attr_err(
            "tile",
            "reps",
            format!("{} repetitions for {} dimensions", reps.len(), s.len()),
        ));
    }
    if reps.iter().any(|&r| r < 1) {
        return Err(attr_err(
            "tile",
            "reps",
            format!("{reps:?} must be positive"),
        ));
    }
    let out: Vec<i64> = s
        .iter()
        .zip(reps)
        .map(|(d, r)| d.checked_mul(*r))
        .collect::<Option<_>>()
        .ok_or_else(|| attr_err("tile", "reps", format!("{reps:?} of {s:?} overflows")))?;
    compute_ax(&out, "T_tile", TAG_INJECTIVE, |ix| {
        let idx: Vec<Expr> = ix
            .iter()
            .zip(&s)
            .zip(reps)
            .map(|((i, &d), &r)| {
                if r == 1 {
                    i.clone()
                } else {
                    Expr::floormod(i.clone(), Expr::int(d))
                }
            })
            .collect();
        x.at(&idx)
    })
}

/// The elements of `data` along `axis` at `indices` (an integer tensor; negative
/// indices count from the end, out-of-range ones are clamped, so no read leaves the
/// tensor): the result's shape is `data`'s with `axis` replaced by `indices`' shape
/// (ONNX's `Gather`, TVM's `take` with mode `clip`). Stage `T_take`.
pub fn take(data: &Tensor, indices: &Tensor, axis: i64) -> Result<Tensor, TeError> {
    let op = "take";
    if !indices.dtype().is_integer() {
        return Err(attr_err(
            op,
            "indices",
            format!("must be integers, got {}", indices.dtype()),
        ));
    }
    let ds = data.shape().to_vec();
    let ax = normalize_axis(op, "axis", axis, ds.len())?;
    let is = indices.shape().to_vec();
    let mut out = ds[..ax].to_vec();
    out.extend(&is);
    out.extend(&ds[ax + 1..]);
    let n = ds[ax];
    compute_ax(&out, "T_take", TAG_INJECTIVE, |ix| {
        let j = Expr::cast(DataType::int32(), indices.at(&ix[ax..ax + is.len()]));
        let j = Expr::select(j.lt(Expr::int(0)), j.clone() + Expr::int(n), j);
        let j = Expr::min(Expr::max(j, Expr::int(0)), Expr::int(n - 1));
        let mut idx = ix[..ax].to_vec();
        idx.push(j);
        idx.extend_from_slice(&ix[ax + is.len()..]);
        data.at(&idx)
    })
}

/// How [`pad_mode`] fills the border.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PadMode {
    /// The mirror image without the edge element (NumPy's `reflect`).
    Reflect,
    /// The edge element repeated.
    Edge,
}

/// Padding of `x` by `before` / `after` elements per dimension, by reflection or by the
/// edge (ONNX's `Pad` modes `reflect` and `edge`). A reflection needs each pad to be
/// smaller than its dimension. Stage `T_pad`.
pub fn pad_mode(
    x: &Tensor,
    before: &[i64],
    after: &[i64],
    mode: PadMode,
) -> Result<Tensor, TeError> {
    let op = "pad";
    let s = x.shape().to_vec();
    for (attr, w) in [("pad_before", before), ("pad_after", after)] {
        if w.len() != s.len() || w.iter().any(|&p| p < 0) {
            return Err(attr_err(
                op,
                attr,
                format!("{w:?} must be {} widths, none negative", s.len()),
            ));
        }
        if mode == PadMode::Reflect && w.iter().zip(&s).any(|(&p, &d)| p > 0 && p >= d) {
            return Err(attr_err(
                op,
                attr,
                format!("reflecting {w:?} needs each pad smaller than its dimension of {s:?}"),
            ));
        }
    }
    let out: Vec<i64> = (0..s.len())
        .map(|d| s[d].checked_add(before[d])?.checked_add(after[d]))
        .collect::<Option<_>>()
        .ok_or_else(|| attr_err(op, "pad_after", "the padded size overflows"))?;
    compute_ax(&out, "T_pad", TAG_INJECTIVE, |ix| {
        let idx: Vec<Expr> = (0..s.len())
            .map(|d| {
                if before[d] == 0 && after[d] == 0 {
                    return ix[d].clone();
                }
                let j = &ix[d] - before[d];
                let last = Expr::int(s[d] - 1);
                match mode {
                    PadMode::Edge => Expr::min(Expr::max(j, Expr::int(0)), last),
                    PadMode::Reflect => {
                        let a = Expr::max(j.clone(), Expr::int(0) - j);
                        let back = last.clone() - a;
                        last - Expr::max(back.clone(), Expr::int(0) - back)
                    }
                }
            })
            .collect();
        x.at(&idx)
    })
}
