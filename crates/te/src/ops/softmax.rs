//! Normalizations: softmax, log_softmax, layer norm.

use crate::error::TeError;
use crate::tensor::{compute, max, reduce_axis, sum, Tensor};

fn shape_err(op: &str, shape: &[i64], reason: String) -> TeError {
    TeError::BadShape {
        op: op.to_string(),
        shape: shape.to_vec(),
        reason,
    }
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
