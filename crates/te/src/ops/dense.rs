//! Matrix products: matmul, dense, batch_matmul.
//!
//! `dense` and `batch_matmul` are written as TVM's TOPI writes them (`topi.nn.dense`,
//! which is `topi.nn.matmul` with `transpose_b`, and `topi.nn.batch_matmul`): stages
//! `T_matmul_NT` (tag `dense`) and `T_batch_matmul_{N,T}{N,T}` (tag `batch_matmul`), axes
//! `i, j` / `b, i, j`, reduce axis `k`.

use super::attr_err;
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

fn same_dtype(op: &str, a: &Tensor, b: &Tensor) -> Result<(), TeError> {
    if a.dtype() != b.dtype() {
        return Err(attr_err(
            op,
            "dtype",
            format!(
                "`{}` is {} but `{}` is {}",
                a.name(),
                a.dtype(),
                b.name(),
                b.dtype()
            ),
        ));
    }
    Ok(())
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

/// TVM's `topi.nn.dense`: `data [M, K]` times the transpose of `weight [N, K]`, plus an
/// optional `bias [N]`.
///
/// Stage `T_matmul_NT(i, j) += data[i, k]*weight[j, k]` (tag `dense`); with a bias, a
/// second stage `T_add(ax0, ax1) = T_matmul_NT[ax0, ax1] + bias[ax1]` (tag `broadcast`).
pub fn dense(data: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor, TeError> {
    let op = "dense";
    let (sd, sw) = (data.shape(), weight.shape());
    if sd.len() == 2 && sw.len() == 3 && bias.is_none() {
        return dense_packed(data, weight);
    }
    if sd.len() != 2 || sw.len() != 2 {
        return Err(shape_err(
            op,
            sd,
            format!("data {sd:?} and weight {sw:?} must both be 2-D"),
        ));
    }
    if sd[1] != sw[1] {
        return Err(shape_err(
            op,
            sd,
            format!(
                "data {sd:?} has {} input features but weight {sw:?} has {}",
                sd[1], sw[1]
            ),
        ));
    }
    same_dtype(op, data, weight)?;
    if let Some(b) = bias {
        if b.shape() != [sw[0]] {
            return Err(shape_err(
                op,
                b.shape(),
                format!(
                    "bias {:?} must be [{}] (the output features of weight {sw:?})",
                    b.shape(),
                    sw[0]
                ),
            ));
        }
        same_dtype(op, data, b)?;
    }
    let k = reduce_axis(sd[1], "k");
    let mat = compute_tagged(&[sd[0], sw[0]], "T_matmul_NT", "dense", &["i", "j"], |ix| {
        sum(
            data.at(&[ix[0].clone(), k.expr()]) * weight.at(&[ix[1].clone(), k.expr()]),
            &[k.clone()],
        )
    })?;
    match bias {
        None => Ok(mat),
        Some(b) => compute_tagged(
            &[sd[0], sw[0]],
            "T_add",
            "broadcast",
            &["ax0", "ax1"],
            |ix| mat.at(ix) + b.at(&ix[1..]),
        ),
    }
}

/// [`dense`] on a weight packed by blocks of `b` output features, `[N/b, K, b]` (made at
/// build time by the graph's weight packing, as TVM's `dense_pack.x86` packs): stage
/// `T_matmul_NT(i, j) += data[i, k]*weight[j / b, k, j % b]`, tag `dense_pack`. A register
/// tile of rows × `b` columns then reads, per `k`, one contiguous vector of each block,
/// where the `[N, K]` weight gives `b` rows `K` floats apart.
fn dense_packed(data: &Tensor, weight: &Tensor) -> Result<Tensor, TeError> {
    let op = "dense";
    let (sd, sw) = (data.shape(), weight.shape());
    if sd[1] != sw[1] || sw[2] <= 0 {
        return Err(shape_err(
            op,
            sd,
            format!(
                "data {sd:?} has {} input features but the packed weight {sw:?} [N/b, K, b] has {}",
                sd[1], sw[1]
            ),
        ));
    }
    same_dtype(op, data, weight)?;
    let b = sw[2];
    let k = reduce_axis(sd[1], "k");
    compute_tagged(
        &[sd[0], sw[0] * b],
        "T_matmul_NT",
        "dense_pack",
        &["i", "j"],
        |ix| {
            let w = blocked_index(&ix[1], &[k.expr()], b);
            sum(
                data.at(&[ix[0].clone(), k.expr()]) * weight.at(&w),
                &[k.clone()],
            )
        },
    )
}

/// The index of output column (or channel) `j` in a weight packed by blocks of `b`
/// columns, `[j / b, inner…, j % b]` (`dense_pack`'s `[N/b, K, b]`, the NHWC convolution's
/// `[O/b, KH, KW, I, b]`, and their int8 forms).
pub(super) fn blocked_index(j: &Expr, inner: &[Expr], b: i64) -> Vec<Expr> {
    let mut idx = vec![Expr::floordiv(j.clone(), Expr::int(b))];
    idx.extend_from_slice(inner);
    idx.push(Expr::floormod(j.clone(), Expr::int(b)));
    idx
}

/// TVM's `topi.nn.batch_matmul` with its defaults (`transpose_a = false`,
/// `transpose_b = true`): `a [B, M, K]` times the transposes of `b [B, N, K]`, stage
/// `T_batch_matmul_NT`. A batch dimension of 1 broadcasts against the other.
pub fn batch_matmul(a: &Tensor, b: &Tensor) -> Result<Tensor, TeError> {
    batch_matmul_with(a, b, false, true)
}

/// TVM's `topi.nn.batch_matmul` with explicit transposes: `a` is `[B, M, K]` (or
/// `[B, K, M]` with `transpose_a`), `b` is `[B, K, N]` (or `[B, N, K]` with
/// `transpose_b`). Stage `T_batch_matmul_{N|T}{N|T}(b, i, j)` (tag `batch_matmul`,
/// reduce axis `k`); a batch dimension of 1 broadcasts (its index is `0`).
pub fn batch_matmul_with(
    a: &Tensor,
    b: &Tensor,
    transpose_a: bool,
    transpose_b: bool,
) -> Result<Tensor, TeError> {
    let op = "batch_matmul";
    let (sa, sb) = (a.shape(), b.shape());
    if sa.len() != 3 || sb.len() != 3 {
        return Err(shape_err(
            op,
            sa,
            format!("a {sa:?} and b {sb:?} must both be 3-D"),
        ));
    }
    let (xb, xi, xk) = if transpose_a {
        (sa[0], sa[2], sa[1])
    } else {
        (sa[0], sa[1], sa[2])
    };
    let (yb, yj, yk) = if transpose_b {
        (sb[0], sb[1], sb[2])
    } else {
        (sb[0], sb[2], sb[1])
    };
    if xk != yk {
        return Err(shape_err(
            op,
            sa,
            format!(
                "the reduction dimensions differ: a {sa:?} has {xk}, b {sb:?} has {yk} \
                 (transpose_a = {transpose_a}, transpose_b = {transpose_b})"
            ),
        ));
    }
    if xb != yb && xb != 1 && yb != 1 {
        return Err(shape_err(
            op,
            sa,
            format!("the batch dimensions of a {sa:?} and b {sb:?} do not broadcast"),
        ));
    }
    same_dtype(op, a, b)?;
    let name = format!(
        "T_batch_matmul_{}{}",
        if transpose_a { "T" } else { "N" },
        if transpose_b { "T" } else { "N" }
    );
    let k = reduce_axis(xk, "k");
    compute_tagged(
        &[xb.max(yb), xi, yj],
        &name,
        "batch_matmul",
        &["b", "i", "j"],
        |ix| {
            let (bi, i, j) = (&ix[0], &ix[1], &ix[2]);
            let ab = if xb != 1 { bi.clone() } else { Expr::int(0) };
            let bb = if yb != 1 { bi.clone() } else { Expr::int(0) };
            let av = if transpose_a {
                a.at(&[ab, k.expr(), i.clone()])
            } else {
                a.at(&[ab, i.clone(), k.expr()])
            };
            let bv = if transpose_b {
                b.at(&[bb, j.clone(), k.expr()])
            } else {
                b.at(&[bb, k.expr(), j.clone()])
            };
            sum(av * bv, &[k.clone()])
        },
    )
}
