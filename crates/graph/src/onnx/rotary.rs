//! `RotaryEmbedding` (opset 23): each head's first `rotary_embedding_dim` features
//! rotated pairwise by the cached cosines and sines of the token's position — halves
//! (`x₁ = x[:d/2]`, `x₂ = x[d/2:]`) or interleaved pairs (`x[0::2]`, `x[1::2]`) —
//! `(x₁ cos − x₂ sin, x₁ sin + x₂ cos)`, the rest passed through. Imported as gathers of
//! the caches, slices and elementwise arithmetic, which fusion joins to the neighbours.

use super::attrs::NodeCtx;
use super::{Importer, Outputs};
use crate::error::GraphError;
use crate::ir::{Binary, Op};
use petgraph::stable_graph::NodeIndex;

fn slice_last(
    imp: &mut Importer,
    name: &str,
    x: NodeIndex,
    from: i64,
    to: i64,
    step: i64,
) -> Result<NodeIndex, GraphError> {
    let s = imp.shape(x);
    let r = s.len();
    let mut begin = vec![0; r];
    let mut end = s.clone();
    let mut strides = vec![1; r];
    begin[r - 1] = from;
    end[r - 1] = to;
    strides[r - 1] = step;
    imp.op(
        name,
        Op::StridedSlice {
            begin,
            end,
            strides,
        },
        &[x],
    )
}

/// A cache `[max_pos, d/2]` at the position ids `[B, S]` (or, without ids, already
/// `[B, S, d/2]`) as `[B, S, 1, d/2]`.
fn cache_at(
    imp: &mut Importer,
    c: &NodeCtx,
    cache: NodeIndex,
    ids: Option<NodeIndex>,
    tag: &str,
) -> Result<NodeIndex, GraphError> {
    let v = match ids {
        Some(p) => imp.op(
            &c.sub(&format!("{tag}_at")),
            Op::Take { axis: 0 },
            &[cache, p],
        )?,
        None => cache,
    };
    let s = imp.shape(v);
    if s.len() != 3 {
        return Err(c.bad(format!(
            "the {tag} cache gives shape {s:?}, not [B, S, d/2]"
        )));
    }
    imp.reshape(
        &c.sub(&format!("{tag}_heads")),
        v,
        vec![s[0], s[1], 1, s[2]],
    )
}

/// `RotaryEmbedding`.
pub(super) fn rotary_embedding(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let shape = imp.shape(x);
    // as [B, S, H, D]
    let bshd = match shape.len() {
        4 => imp.op(
            &c.sub("bshd"),
            Op::Transpose {
                axes: vec![0, 2, 1, 3],
            },
            &[x],
        )?,
        3 => {
            let h = c.int("num_heads", 0);
            if h < 1 || shape[2] % h != 0 {
                return Err(c.bad(format!(
                    "a rank-3 input {shape:?} needs num_heads dividing {}",
                    shape[2]
                )));
            }
            imp.reshape(&c.sub("bshd"), x, vec![shape[0], shape[1], h, shape[2] / h])?
        }
        r => return Err(c.bad(format!("the input has rank {r}; 3 or 4 are defined"))),
    };
    let head = imp.shape(bshd)[3];
    let rd = match c.int("rotary_embedding_dim", 0) {
        0 => head,
        d if d > 0 && d <= head && d % 2 == 0 => d,
        d => {
            return Err(c.bad(format!(
                "rotary_embedding_dim {d} does not fit head size {head}"
            )))
        }
    };
    let ids = c.opt(3);
    let cos = cache_at(imp, c, c.input(1)?, ids, "cos")?;
    let sin = cache_at(imp, c, c.input(2)?, ids, "sin")?;
    let interleaved = c.int("interleaved", 0) != 0;
    let (x1, x2) = if interleaved {
        (
            slice_last(imp, &c.sub("x1"), bshd, 0, rd, 2)?,
            slice_last(imp, &c.sub("x2"), bshd, 1, rd, 2)?,
        )
    } else {
        (
            slice_last(imp, &c.sub("x1"), bshd, 0, rd / 2, 1)?,
            slice_last(imp, &c.sub("x2"), bshd, rd / 2, rd, 1)?,
        )
    };
    let mul = |imp: &mut Importer, tag: &str, a: NodeIndex, b: NodeIndex| {
        imp.op(&c.sub(tag), Op::Binary(Binary::Mul), &[a, b])
    };
    let (a, b) = (mul(imp, "x1_cos", x1, cos)?, mul(imp, "x2_sin", x2, sin)?);
    let real = imp.op(&c.sub("real"), Op::Binary(Binary::Sub), &[a, b])?;
    let (a, b) = (mul(imp, "x1_sin", x1, sin)?, mul(imp, "x2_cos", x2, cos)?);
    let imag = imp.op(&c.sub("imag"), Op::Binary(Binary::Add), &[a, b])?;
    let s = imp.shape(bshd);
    let rotated = if interleaved {
        let mut one = imp.shape(real);
        one.push(1);
        let re = imp.reshape(&c.sub("real_pair"), real, one.clone())?;
        let im = imp.reshape(&c.sub("imag_pair"), imag, one)?;
        let pairs = imp.op(&c.sub("pairs"), Op::Concat { axis: 4 }, &[re, im])?;
        imp.reshape(&c.sub("rotated"), pairs, vec![s[0], s[1], s[2], rd])?
    } else {
        imp.op(&c.sub("rotated"), Op::Concat { axis: 3 }, &[real, imag])?
    };
    let full = if rd < head {
        let rest = slice_last(imp, &c.sub("pass"), bshd, rd, head, 1)?;
        imp.op(&c.sub("joined"), Op::Concat { axis: 3 }, &[rotated, rest])?
    } else {
        rotated
    };
    let out = if shape.len() == 4 {
        imp.op(
            &c.name,
            Op::Transpose {
                axes: vec![0, 2, 1, 3],
            },
            &[full],
        )?
    } else {
        imp.reshape(&c.name, full, shape)?
    };
    Ok(vec![out])
}
