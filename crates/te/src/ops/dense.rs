//! Matrix products: matmul, dense, batch_matmul.

use crate::error::TeError;
use crate::tensor::{compute_tagged, reduce_axis, sum, Tensor};

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
