//! Injective operators: pad, reshape, transpose, concatenate, flatten, strided slice,
//! layout transforms.

use crate::error::TeError;
use crate::tensor::{compute_tagged, Tensor};
use tessera_ir::Expr;

fn shape_err(op: &str, shape: &[i64], reason: String) -> TeError {
    TeError::BadShape {
        op: op.to_string(),
        shape: shape.to_vec(),
        reason,
    }
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
