//! Attention found in a network and made one operator ([`Op::Attention`]).
//!
//! Exports write a transformer's attention as network operators:
//! `MatMul(q, kt)` → reshapes → scale (`Mul`/`Div` by a scalar) and masks or
//! position biases (`Add`) → `Softmax` over the last axis → reshapes → `MatMul(·, v)`.
//! Fused by TVM's rules that is four or more kernels (the product with its epilogue,
//! the softmax, a reshape copy, the second product), and the scores make three round
//! trips through memory. [`fuse_attention`] rewrites the chain into one attention
//! operator, whose schedule computes it per block of query rows
//! ([`tessera_te::schedules::schedule_attention`]).
//!
//! The rewrite keeps the arithmetic: the scale becomes the operator's, the biases one
//! additive bias in the scores' `[B, M, N]` view (constant biases are added together at
//! build time; a computed one must broadcast over the leading axes, or else be the one
//! bias, added in a view of more axes whose leading ones make `B`, to which it
//! broadcasts: BERT's padding mask `[batch, 1, 1, N]` over `[batch, heads, M, N]`, the
//! attention then computed in that view). Where `N` is not a
//! multiple of the vector lanes, the keys get zero columns and the values zero rows up
//! to one (`Pad`s that fuse into their producers), and the bias the lowest float in the
//! added columns, so that their exponentials are 0 (ViT's 197 tokens: 200).

use crate::error::GraphError;
use crate::ir::{Binary, Graph, Op};
use crate::pad_channels::{column_mask, pad_rows, round_up};
use crate::passes::{dead_code_elimination, f32_values};
use crate::reference::broadcast_f32;
use petgraph::stable_graph::NodeIndex;
use tessera_ir::DataType;
use tessera_runtime::NDArray;

/// An attention chain found in the graph.
struct Chain {
    q: NodeIndex,
    kt: NodeIndex,
    v: NodeIndex,
    /// The second product, whose value the attention replaces.
    out: NodeIndex,
    scale: f64,
    bias: Bias,
}

/// The additive bias of the scores, in their `[B, M, N]` view.
enum Bias {
    None,
    /// The sum of the constant biases, `[B, M, N]`.
    Constant(Vec<f32>),
    /// A computed bias, broadcasting to `[M, N]` (its shape's trailing two axes).
    Computed(NodeIndex, Vec<i64>),
    /// A computed bias that varies along the leading axes of the scores' view `lead +
    /// [M, N]` (whose leading axes multiply to `B`) and broadcasts to it: BERT's padding
    /// mask `[batch, 1, 1, N]` over scores `[batch, heads, M, N]`. The attention is then
    /// computed in that view.
    Batched(NodeIndex, Vec<i64>),
}

/// Rewrites every attention chain of `graph` (see the module's header) into one
/// [`Op::Attention`], its keys padded to a multiple of `lanes` where that gives whole
/// vectors. Returns how many it rewrote.
pub fn fuse_attention(graph: &mut Graph, lanes: i64) -> Result<usize, GraphError> {
    let products: Vec<NodeIndex> = graph
        .topo_order()
        .into_iter()
        .filter(|&n| matches!(graph.node(n).op, Op::MatMul))
        .collect();
    let mut fused = 0;
    for n in products {
        if !graph.contains(n) {
            continue;
        }
        let Some(chain) = find_chain(graph, n)? else {
            continue;
        };
        let att = rewrite(graph, chain, lanes)?;
        graph.replace_uses(n, att);
        fused += 1;
    }
    if fused > 0 {
        dead_code_elimination(graph);
    }
    Ok(fused)
}

/// The one reader of `n` (not a network output).
fn only_reader(graph: &Graph, n: NodeIndex) -> Option<NodeIndex> {
    match graph.users(n)[..] {
        [u] if !graph.outputs().contains(&n) => Some(u),
        _ => None,
    }
}

/// The value of a constant of one float32 element.
fn scalar(graph: &Graph, n: NodeIndex) -> Option<f64> {
    let v = graph.constant_value(n)?;
    if v.dtype() != DataType::float32() || v.len() != 1 {
        return None;
    }
    f32_values(v).ok().map(|x| x[0] as f64)
}

/// The attention chain whose second product is `out` (`MatMul(p, v)`), if it is one.
fn find_chain(graph: &Graph, out: NodeIndex) -> Result<Option<Chain>, GraphError> {
    let [p, v] = graph.args(out)[..] else {
        return Ok(None);
    };
    let shape = |n: NodeIndex| graph.node(n).ty.shape.clone();
    let f32_typed = |n: NodeIndex| graph.node(n).ty.dtype == DataType::float32();
    // back from the probabilities through reshapes that keep the last axis
    let mut at = p;
    while let Op::Reshape { .. } = graph.node(at).op {
        let x = graph.args(at)[0];
        if shape(x).last() != shape(at).last() || only_reader(graph, x) != Some(at) {
            return Ok(None);
        }
        at = x;
    }
    let Op::Softmax { axis } = graph.node(at).op else {
        return Ok(None);
    };
    let rank = shape(at).len() as i64;
    if (axis != -1 && axis != rank - 1) || only_reader(graph, at).is_none() {
        return Ok(None);
    }
    // back from the softmax's input to the first product: the scale and the biases
    // (collected last to first), the reshapes
    let mut steps: Vec<(NodeIndex, NodeIndex)> = Vec::new();
    let mut x = graph.args(at)[0];
    loop {
        if only_reader(graph, x).is_none() {
            return Ok(None);
        }
        match graph.node(x).op {
            Op::MatMul => break,
            Op::Reshape { .. } => {
                let y = graph.args(x)[0];
                if shape(y).last() != shape(x).last() {
                    return Ok(None);
                }
                x = y;
            }
            Op::Binary(Binary::Add | Binary::Mul | Binary::Div) => {
                let [a, b] = graph.args(x)[..] else {
                    return Ok(None);
                };
                // the scores are the operand of the node's own shape
                let (s, other) = if shape(a) == shape(x) { (a, b) } else { (b, a) };
                let div = matches!(graph.node(x).op, Op::Binary(Binary::Div));
                if shape(s) != shape(x) || (div && s != a) {
                    return Ok(None);
                }
                steps.push((x, other));
                x = s;
            }
            _ => return Ok(None),
        }
    }
    let qk = x;
    let [q, kt] = graph.args(qk)[..] else {
        return Ok(None);
    };
    let (sq, sk, sv, sp, so) = (shape(q), shape(kt), shape(v), shape(p), shape(out));
    // one batch of 3-D products, the probabilities in the scores' own view
    let three_d = [&sq, &sk, &sv, &sp, &so].iter().all(|s| s.len() == 3);
    if !three_d || shape(qk) != sp || sq[0] != sk[0] || sq[0] != sv[0] {
        return Ok(None);
    }
    if ![q, kt, v, qk].iter().all(|&n| f32_typed(n)) {
        return Ok(None);
    }
    let scores = shape(qk);
    let mut scale = 1.0;
    let mut bias = Bias::None;
    for &(node, other) in steps.iter().rev() {
        let op = graph.node(node).op.clone();
        match op {
            Op::Binary(Binary::Mul | Binary::Div) => {
                let Some(c) = scalar(graph, other) else {
                    return Ok(None);
                };
                let c = if matches!(op, Op::Binary(Binary::Div)) {
                    1.0 / c
                } else {
                    c
                };
                scale *= c;
                match &mut bias {
                    Bias::None => {}
                    Bias::Constant(values) => values.iter_mut().for_each(|v| *v *= c as f32),
                    Bias::Computed(..) | Bias::Batched(..) => return Ok(None),
                }
            }
            _ => {
                let view = shape(node);
                let add = match scores_view_bias(graph, other, &view, &scores)? {
                    Some(add) => add,
                    None => match batched_bias(graph, other, &view, &scores) {
                        Some(add) => add,
                        None => return Ok(None),
                    },
                };
                bias = match (bias, add) {
                    (Bias::None, b) => b,
                    (Bias::Constant(mut a), Bias::Constant(b)) => {
                        a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                        Bias::Constant(a)
                    }
                    _ => return Ok(None),
                };
            }
        }
    }
    Ok(Some(Chain {
        q,
        kt,
        v,
        out,
        scale,
        bias,
    }))
}

/// The bias `b`, added to the scores in their view `view`, in the scores' `[B, M, N]`
/// view `scores`: a constant broadcast and reshaped; a computed one if it broadcasts
/// over the leading axes of the view (its shape then ends in `[M or 1, N or 1]`).
fn scores_view_bias(
    graph: &Graph,
    b: NodeIndex,
    view: &[i64],
    scores: &[i64],
) -> Result<Option<Bias>, GraphError> {
    let bshape = graph.node(b).ty.shape.clone();
    if graph.node(b).ty.dtype != DataType::float32() || bshape.len() > view.len() {
        return Ok(None);
    }
    if let Some(c) = graph.constant_value(b) {
        let to: Vec<usize> = view.iter().map(|&d| d as usize).collect();
        return Ok(Some(Bias::Constant(f32_values(&broadcast_f32(c, &to)?)?)));
    }
    let r = bshape.len();
    let lead_ones = bshape[..r.saturating_sub(2)].iter().all(|&d| d == 1);
    let tail_fits = view.len() >= 2
        && view[view.len() - 2..] == scores[1..]
        && bshape[r.saturating_sub(2)..]
            .iter()
            .zip(&view[view.len() - r.min(2)..])
            .all(|(&d, &v)| d == 1 || d == v);
    if !lead_ones || !tail_fits {
        return Ok(None);
    }
    let tail = bshape[r.saturating_sub(2)..].to_vec();
    Ok(Some(Bias::Computed(b, tail)))
}

/// The bias `b` (computed) added to the scores in their view `view` when it varies
/// along the view's leading axes ([`Bias::Batched`]): of the view's rank, broadcasting
/// to it, the view's leading axes making the scores' `B` and its last two their `[M, N]`.
fn batched_bias(graph: &Graph, b: NodeIndex, view: &[i64], scores: &[i64]) -> Option<Bias> {
    let ty = &graph.node(b).ty;
    let r = view.len();
    let fits = ty.dtype == DataType::float32()
        && graph.constant_value(b).is_none()
        && ty.shape.len() == r
        && r > 3
        && view[..r - 2].iter().product::<i64>() == scores[0]
        && view[r - 2..] == scores[1..]
        && ty.shape.iter().zip(view).all(|(&d, &v)| d == 1 || d == v);
    fits.then(|| Bias::Batched(b, view[..r - 2].to_vec()))
}

/// The attention operator computing `chain`, its keys padded to a multiple of `lanes`
/// where that gives whole vectors (not under a computed bias per query row, which
/// would need a mask of its own).
fn rewrite(graph: &mut Graph, chain: Chain, lanes: i64) -> Result<NodeIndex, GraphError> {
    let name = graph.node(chain.out).name.clone();
    let ks = graph.node(chain.kt).ty.shape.clone();
    let (batch, n) = (ks[0], ks[2]);
    let m = graph.node(chain.q).ty.shape[1];
    let row_bias = match &chain.bias {
        Bias::Computed(_, tail) => tail.last() == Some(&1),
        Bias::Batched(b, _) => graph.node(*b).ty.shape.last() == Some(&1),
        _ => false,
    };
    let to = if lanes >= 2 && n % lanes != 0 && n >= 2 * lanes && !row_bias {
        round_up(n, lanes)
    } else {
        n
    };
    let (mut kt, mut v) = (chain.kt, chain.v);
    if to != n {
        let pad = |after: Vec<i64>| Op::Pad {
            before: vec![0; 3],
            after,
            value: 0.0,
        };
        kt = graph.op(
            &format!("{name}_keys_pad{to}"),
            pad(vec![0, 0, to - n]),
            &[kt],
        )?;
        v = graph.op(
            &format!("{name}_values_pad{to}"),
            pad(vec![0, to - n, 0]),
            &[v],
        )?;
    }
    // a computed bias's leading axes are ones (`scores_view_bias`): one of more axes
    // than the scores' `[B, M, N]` (an exporter's `[1, 1, M, N]` padding mask) is taken
    // as its trailing two, which broadcast to them
    let bias = match chain.bias {
        Bias::Computed(b, tail) if graph.node(b).ty.shape.len() > 3 => {
            let op = Op::Reshape {
                shape: tail.clone(),
            };
            Bias::Computed(graph.op(&format!("{name}_bias_view"), op, &[b])?, tail)
        }
        other => other,
    };
    // a bias per batch: the attention computed in the view it was added in
    let lead = match &bias {
        Bias::Batched(_, lead) => Some(lead.clone()),
        _ => None,
    };
    let bias = match bias {
        Bias::Computed(b, _) | Bias::Batched(b, _) if to == n => b,
        Bias::Computed(b, _) | Bias::Batched(b, _) => {
            let rank = graph.node(b).ty.shape.len();
            let mut after = vec![0; rank];
            after[rank - 1] = to - n;
            let pad = Op::Pad {
                before: vec![0; rank],
                after,
                value: f32::MIN as f64,
            };
            graph.op(&format!("{name}_bias_pad{to}"), pad, &[b])?
        }
        Bias::Constant(values) => {
            let (values, shape) = compress([batch, m, n], values);
            let values = pad_rows(&values, n as usize, to as usize, f32::MIN);
            let mut shape: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
            *shape.last_mut().expect("at least the keys' axis") = to as usize;
            graph.constant(
                &format!("{name}_bias"),
                NDArray::from_slice_f32(&shape, &values)?,
            )
        }
        Bias::None => graph.constant(&format!("{name}_mask{to}"), column_mask(n, to)?),
    };
    let Some(lead) = lead else {
        return graph.op(
            &format!("{name}_attention"),
            Op::Attention { scale: chain.scale },
            &[chain.q, kt, v, bias],
        );
    };
    let mut view = |x: NodeIndex, what: &str| {
        let mut shape = lead.clone();
        shape.extend_from_slice(&graph.node(x).ty.shape[1..]);
        graph.op(&format!("{name}_{what}_view"), Op::Reshape { shape }, &[x])
    };
    let (q, kt, v) = (view(chain.q, "q")?, view(kt, "keys")?, view(v, "values")?);
    let att = graph.op(
        &format!("{name}_attention"),
        Op::Attention { scale: chain.scale },
        &[q, kt, v, bias],
    )?;
    let shape = graph.node(chain.out).ty.shape.clone();
    graph.op(
        &format!("{name}_attention_rows"),
        Op::Reshape { shape },
        &[att],
    )
}

/// A constant bias of shape `[B, M, N]` without the leading axes it does not vary
/// along: `[M, N]` when every batch is the same, `[N]` when every row is too.
fn compress([b, m, n]: [i64; 3], values: Vec<f32>) -> (Vec<f32>, Vec<i64>) {
    let (b, m, n) = (b as usize, m as usize, n as usize);
    let plane = m * n;
    if !values.chunks(plane.max(1)).all(|c| c == &values[..plane]) {
        return (values, vec![b as i64, m as i64, n as i64]);
    }
    let first = &values[..plane];
    if first.chunks(n.max(1)).all(|r| r == &first[..n]) {
        return (first[..n].to_vec(), vec![n as i64]);
    }
    (first.to_vec(), vec![m as i64, n as i64])
}
