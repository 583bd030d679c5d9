//! Scaled dot-product attention as one operator: `softmax(q · kt · scale + bias) · v`.
//!
//! A transformer's attention is four network operators (the scores' product, the mask
//! added, the softmax, the product with the values), and four kernels when each is
//! its own fused group: the `[.., M, N]` scores go to memory and are read back three
//! times (ViT-B/16: 1.9 MB per layer, 12 layers). Declared as one operator, its
//! stages can be computed per block of query rows, the scores of a block never leaving
//! the cache ([`crate::schedules::schedule_attention`]): the FlashAttention idea in the
//! form of TVM's stages, every stage a plain compute the search and the interpreter
//! already know.
//!
//! Stages (tag [`TAG_ATTENTION`]): `T_attn_score` (the product, reduce axis `k`),
//! `T_attn_max` (the row maximum of the scaled, biased scores), `T_attn_exp`,
//! `T_attn_sum` (the row sums), `T_attn_pv` (the unnormalized exponentials times `v`,
//! reduce axis `j`) and the output `T_attention` (`pv / sum`: one division per output
//! element instead of one per score).

use super::attr_err;
use super::elemwise::{broadcast_index, broadcast_shape};
use crate::error::TeError;
use crate::tensor::{compute_tagged, max, reduce_axis, sum, Tensor};
use tessera_ir::Expr;

/// The tag of every stage of [`attention`].
pub const TAG_ATTENTION: &str = "attention";

fn shape_err(shape: &[i64], reason: String) -> TeError {
    TeError::BadShape {
        op: "attention".to_string(),
        shape: shape.to_vec(),
        reason,
    }
}

/// The shapes of an attention's inputs checked: `q [.., M, K]`, `kt [.., K, N]`, `v
/// [.., N, D]` of one rank (at least 2) and the same leading axes, all float of one
/// dtype, `bias` broadcasting to `[.., M, N]`. Returns `(M, K, N, D)`.
fn check(
    q: &Tensor,
    kt: &Tensor,
    v: &Tensor,
    bias: Option<&Tensor>,
) -> Result<(i64, i64, i64, i64), TeError> {
    let (sq, sk, sv) = (q.shape(), kt.shape(), v.shape());
    let r = sq.len();
    if r < 2 || sk.len() != r || sv.len() != r {
        return Err(shape_err(
            sq,
            format!("q {sq:?}, kt {sk:?} and v {sv:?} must have one rank, at least 2"),
        ));
    }
    if sq[..r - 2] != sk[..r - 2] || sq[..r - 2] != sv[..r - 2] {
        return Err(shape_err(
            sq,
            format!("q {sq:?}, kt {sk:?} and v {sv:?} must have the same leading axes"),
        ));
    }
    let (m, k, n, d) = (sq[r - 2], sq[r - 1], sk[r - 1], sv[r - 1]);
    if sk[r - 2] != k || sv[r - 2] != n {
        return Err(shape_err(
            sq,
            format!("q {sq:?} · kt {sk:?} · v {sv:?}: kt must be [.., {k}, N] and v [.., N, D]"),
        ));
    }
    let dtype = q.dtype();
    let tensors = [Some(q), Some(kt), Some(v), bias];
    if !dtype.is_float() || tensors.iter().flatten().any(|t| t.dtype() != dtype) {
        return Err(attr_err(
            "attention",
            "dtype",
            "needs float inputs of one dtype".to_string(),
        ));
    }
    if let Some(b) = bias {
        let mut scores = sq[..r - 2].to_vec();
        scores.extend([m, n]);
        let out = broadcast_shape("attention", &scores, b.shape())?;
        if out != scores {
            return Err(shape_err(
                b.shape(),
                format!(
                    "the bias {:?} must broadcast to the scores {scores:?}",
                    b.shape()
                ),
            ));
        }
    }
    Ok((m, k, n, d))
}

/// `softmax(q · kt · scale + bias) · v` over the last axis of the scores: `q [.., M,
/// K]`, `kt [.., K, N]` (the keys transposed), `v [.., N, D]`, an optional additive
/// `bias` broadcasting to the scores `[.., M, N]` (a mask, a relative position bias);
/// the output is `[.., M, D]`. The stages are in the module's header.
pub fn attention(
    q: &Tensor,
    kt: &Tensor,
    v: &Tensor,
    bias: Option<&Tensor>,
    scale: f64,
) -> Result<Tensor, TeError> {
    let (m, k, n, d) = check(q, kt, v, bias)?;
    let lead = &q.shape()[..q.ndim() - 2];
    let with = |extra: &[i64]| {
        let mut s = lead.to_vec();
        s.extend_from_slice(extra);
        s
    };
    let (rows, scores, out) = (with(&[m]), with(&[m, n]), with(&[m, d]));
    let tag = TAG_ATTENTION;
    let kk = reduce_axis(k, "k");
    // `ix` ends with (i, j): the operand `t` at (.., a, b)
    let at = |t: &Tensor, ix: &[Expr], a: Expr, b: Expr| {
        let mut v = ix[..ix.len() - 2].to_vec();
        v.extend([a, b]);
        t.at(&v)
    };
    let score = compute_tagged(&scores, "T_attn_score", tag, &[], |ix| {
        let (i, j) = (&ix[ix.len() - 2], &ix[ix.len() - 1]);
        sum(
            at(q, ix, i.clone(), kk.expr()) * at(kt, ix, kk.expr(), j.clone()),
            &[kk.clone()],
        )
    })?;
    let dtype = q.dtype();
    // the scaled, biased score at the scores' index `ix`
    let logit = |ix: &[Expr]| {
        let s = score.at(ix);
        let s = if scale == 1.0 {
            s
        } else {
            s * Expr::float_of(dtype, scale)
        };
        match bias {
            Some(b) => s + b.at(&broadcast_index(ix, &scores, b.shape())),
            None => s,
        }
    };
    // the scores' index (.., i, j) from a row index (.., i) and a column `j`
    let cell = |ix: &[Expr], j: Expr| {
        let mut v = ix.to_vec();
        v.push(j);
        v
    };
    let j1 = reduce_axis(n, "j");
    let row_max = compute_tagged(&rows, "T_attn_max", tag, &[], |ix| {
        max(logit(&cell(ix, j1.expr())), &[j1.clone()])
    })?;
    let exp = compute_tagged(&scores, "T_attn_exp", tag, &[], |ix| {
        (logit(ix) - row_max.at(&ix[..ix.len() - 1])).exp()
    })?;
    let j2 = reduce_axis(n, "j");
    let row_sum = compute_tagged(&rows, "T_attn_sum", tag, &[], |ix| {
        sum(exp.at(&cell(ix, j2.expr())), &[j2.clone()])
    })?;
    let j3 = reduce_axis(n, "j");
    let pv = compute_tagged(&out, "T_attn_pv", tag, &[], |ix| {
        let (i, c) = (&ix[ix.len() - 2], &ix[ix.len() - 1]);
        sum(
            at(&exp, ix, i.clone(), j3.expr()) * at(v, ix, j3.expr(), c.clone()),
            &[j3.clone()],
        )
    })?;
    compute_tagged(&out, "T_attention", tag, &[], |ix| {
        pv.at(ix) / row_sum.at(&ix[..ix.len() - 1])
    })
}
