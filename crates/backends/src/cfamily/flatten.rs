//! Flattening: a multi-dimensional access becomes one offset into the buffer's dense
//! row-major data (int32 where the buffer's elements fit, int64 beyond), and a vector
//! access its base offset and constant stride when it has them. Shared by every
//! C-family printer.

use tessera_ir::arith::simplify;
use tessera_ir::{Buffer, DataType, Expr, ExprNode};

/// Why an access has no flat offset.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FlattenError {
    #[error("buffer `{buffer}` has a shape that is not constant")]
    ShapeNotConstant { buffer: String },
    #[error("buffer `{buffer}` has {rank} dimensions, accessed with {indices} indices")]
    Rank {
        buffer: String,
        rank: usize,
        indices: usize,
    },
}

/// The flat row-major offset of a scalar access, simplified.
pub fn flat_expr(buffer: &Buffer, indices: &[Expr]) -> Result<Expr, FlattenError> {
    let shape = buffer
        .const_shape()
        .ok_or_else(|| FlattenError::ShapeNotConstant {
            buffer: buffer.name().to_string(),
        })?;
    if shape.len() != indices.len() {
        return Err(FlattenError::Rank {
            buffer: buffer.name().to_string(),
            rank: shape.len(),
            indices: indices.len(),
        });
    }
    // Offsets are computed in int64 where the buffer has more elements than int32
    // holds, in int32 otherwise; narrower (or unsigned) indices are widened first, so
    // that neither the products nor the sum wrap.
    let offset_t = offset_type(&shape);
    let mut flat: Option<Expr> = None;
    for (i, idx) in indices.iter().enumerate() {
        let stride: i64 = shape[i + 1..].iter().product();
        let t = if idx.dtype() == DataType::int64() {
            DataType::int64()
        } else {
            offset_t
        };
        let idx = if idx.dtype() != t {
            Expr::cast(t, idx.clone())
        } else {
            idx.clone()
        };
        let term = if stride == 1 { idx } else { &idx * stride };
        flat = Some(match flat {
            None => term,
            // Both operands in the wider type: never narrow the partial sum.
            Some(f) if f.dtype() == term.dtype() => f + term,
            Some(f) if f.dtype() == DataType::int64() => f + Expr::cast(DataType::int64(), term),
            Some(f) => Expr::cast(term.dtype(), f) + term,
        });
    }
    Ok(simplify(&flat.unwrap_or_else(|| Expr::int(0))))
}

/// The type of the flat offsets into a buffer of `shape`: int64 when it has more
/// elements than int32 holds.
pub fn offset_type(shape: &[i64]) -> DataType {
    let n = shape
        .iter()
        .try_fold(1i64, |acc, d| acc.checked_mul((*d).max(0)));
    if n.is_none_or(|n| n > i32::MAX as i64) {
        DataType::int64()
    } else {
        DataType::int32()
    }
}

/// For a vector access: `(base, stride)` of the flat offsets when every index is a
/// scalar, a broadcast or a ramp with a constant stride.
pub fn flat_ramp(buffer: &Buffer, indices: &[Expr]) -> Option<(Expr, i64)> {
    let shape = buffer.const_shape()?;
    let mut bases = Vec::new();
    let mut stride = 0i64;
    for (i, idx) in indices.iter().enumerate() {
        let s = match idx.node() {
            ExprNode::Ramp { base, stride, .. } => {
                bases.push(base.clone());
                simplify(stride).as_int()?
            }
            ExprNode::Broadcast { value, .. } => {
                bases.push(value.clone());
                0
            }
            _ if idx.dtype().is_scalar() => {
                bases.push(idx.clone());
                0
            }
            _ => return None,
        };
        let k = shape
            .get(i + 1..)?
            .iter()
            .try_fold(1i64, |acc, d| acc.checked_mul(*d))?;
        stride = stride.checked_add(s.checked_mul(k)?)?;
    }
    let base = flat_expr(buffer, &bases).ok()?;
    Some((base, stride))
}
