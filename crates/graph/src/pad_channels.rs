//! Output channels of NHWC convolutions, and columns of matrix products, padded to a
//! whole number of vectors.
//!
//! The default schedule vectorizes a convolution over its output channels with the
//! widest power of two that divides them: ShuffleNet-v2's 58 channels (2 · 29) took
//! 2-lane vectors and its 1×1 convolutions ran at 18 GFLOPS where 64 channels run at
//! 100. Here the weight gets zero filters up to a multiple of the vector lanes, the
//! per-channel elementwise operators after it (bias, activation) are computed on the
//! padded channels (the bias padded with zeros), and a slice drops the padding after
//! them. The convolution then takes whole vectors and packed weights; the slice reads
//! the padded result once (a fused group that ends in it keeps the convolution's result
//! in a buffer and applies the bias and activation on the way out). Matrix products of
//! a computed `b` get the same for their columns, and a softmax that reads one of them
//! runs on the padded columns, masked to add nothing.

use crate::error::GraphError;
use crate::ir::{Binary, Graph, Op};
use crate::passes::{dead_code_elimination, f32_values, nhwc_conv_with_constant_weight};
use petgraph::stable_graph::NodeIndex;
use tessera_ir::DataType;
use tessera_runtime::NDArray;

/// Pads the output channels of every one-group NHWC convolution with a constant
/// float32 weight whose channel count is not a multiple of `lanes` but at least
/// `2 · lanes`, with the single-reader chain of per-channel elementwise operators after
/// it (see the module's header). Returns each padded convolution's node before and
/// after.
pub fn pad_conv_channels(
    graph: &mut Graph,
    lanes: i64,
) -> Result<Vec<(NodeIndex, NodeIndex)>, GraphError> {
    let mut padded = Vec::new();
    for n in graph.topo_order().into_iter().filter(|_| lanes >= 2) {
        let Some((attrs, w)) = nhwc_conv_with_constant_weight(graph, n) else {
            continue;
        };
        let &[kh, kw, ci, co] = w.shape() else {
            continue;
        };
        let co = co as i64;
        if attrs.groups != 1
            || w.dtype() != DataType::float32()
            || co % lanes == 0
            || co < 2 * lanes
            || graph.outputs().contains(&n)
        {
            continue;
        }
        let to = round_up(co, lanes);
        let weight = pad_last_axis(w, &[kh, kw, ci], co as usize, to)?;
        let args = graph.args(n);
        let name = graph.node(n).name.clone();
        let wname = format!("{}_pad{to}", graph.node(args[1]).name);
        let wc = graph.constant(&wname, weight);
        let conv = graph.op(&name, graph.node(n).op.clone(), &[args[0], wc])?;
        let (old_end, new_end) = pad_epilogue(graph, n, conv, co, to)?;
        let out = slice_back(graph, &name, new_end, co)?;
        graph.replace_uses(old_end, out);
        padded.push((n, conv));
    }
    if !padded.is_empty() {
        dead_code_elimination(graph);
    }
    Ok(padded)
}

/// Pads the columns of every matrix product (`MatMul`, `a[.., M, K] · b[.., K, N]`) of
/// a computed `b` whose `N` is not a multiple of `lanes` but at least `2 · lanes`: `b` padded with zero
/// columns (a `Pad` that fuses into `b`'s producer), the product sliced back to `N`.
/// ViT's attention scores `QKᵀ` have 197 columns (a prime) and Swin's 49: the product's
/// register tile found no vector width and ran scalar (ViT's at 13 GFLOPS). A softmax
/// over the last axis that is the product's one reader is computed on the padded
/// columns too, masked ([`masked_softmax`]), and the slice goes after it. Returns the
/// padded products' nodes before and after.
pub fn pad_matmul_columns(
    graph: &mut Graph,
    lanes: i64,
) -> Result<Vec<(NodeIndex, NodeIndex)>, GraphError> {
    let mut padded = Vec::new();
    // (listed first: a rewrite removes the reshapes and softmax after its product)
    let products: Vec<NodeIndex> = graph
        .topo_order()
        .into_iter()
        .filter(|&n| lanes >= 2 && matches!(graph.node(n).op, Op::MatMul))
        .collect();
    for n in products {
        let args = graph.args(n);
        let b_shape = graph.node(args[1]).ty.shape.clone();
        let Some(&cols) = b_shape.last() else {
            continue;
        };
        // (a constant `b`, a weight, would be padded by a kernel on every run)
        let constant = graph.constant_value(args[1]).is_some();
        if b_shape.len() < 2 || cols % lanes == 0 || cols < 2 * lanes || constant {
            continue;
        }
        let to = round_up(cols, lanes);
        let name = graph.node(n).name.clone();
        let rank = b_shape.len();
        let mut after = vec![0; rank];
        after[rank - 1] = to - cols;
        let pad = Op::Pad {
            before: vec![0; rank],
            after,
            value: 0.0,
        };
        let b = graph.op(&format!("{name}_b_pad{to}"), pad, &[args[1]])?;
        let mm = graph.op(&name, Op::MatMul, &[args[0], b])?;
        // the nodes the padded ones replace, in order: the product, its reshapes, the softmax
        let (mut old, new_end) = match last_axis_softmax(graph, n, cols) {
            Some((mut chain, softmax)) => {
                let x = reshaped(graph, mm, &chain, to)?;
                let end = masked_softmax(graph, x, softmax, cols, to)?;
                chain.push(softmax);
                (chain, end)
            }
            None => (Vec::new(), mm),
        };
        old.insert(0, n);
        let out = slice_back(graph, &name, new_end, cols)?;
        graph.replace_uses(*old.last().unwrap_or(&n), out);
        for &o in old.iter().rev() {
            graph.remove(o);
        }
        padded.push((n, mm));
    }
    Ok(padded)
}

/// The softmax over the last axis that reads product `n` (`cols` columns, not an
/// output) through single-reader reshapes that keep the last axis (ViT's
/// `[12, 197, 197]` scores reshaped to `[1, 12, 197, 197]`): the reshapes and the
/// softmax.
fn last_axis_softmax(
    graph: &Graph,
    n: NodeIndex,
    cols: i64,
) -> Option<(Vec<NodeIndex>, NodeIndex)> {
    let mut reshapes = Vec::new();
    let mut at = n;
    loop {
        let users = graph.users(at);
        let [u] = users[..] else { return None };
        if graph.outputs().contains(&at) {
            return None;
        }
        let shape = &graph.node(u).ty.shape;
        match graph.node(u).op {
            Op::Reshape { .. } if shape.last() == Some(&cols) => reshapes.push(u),
            Op::Softmax { axis } if axis == -1 || axis == shape.len() as i64 - 1 => {
                return Some((reshapes, u));
            }
            _ => return None,
        }
        at = u;
    }
}

/// `x` (whose last axis is padded to `to`) through the reshapes `reshapes`, each with
/// its last axis padded the same.
fn reshaped(
    graph: &mut Graph,
    mut x: NodeIndex,
    reshapes: &[NodeIndex],
    to: i64,
) -> Result<NodeIndex, GraphError> {
    for &r in reshapes {
        let mut shape = graph.node(r).ty.shape.clone();
        if let Some(last) = shape.last_mut() {
            *last = to;
        }
        let name = format!("{}_pad{to}", graph.node(r).name);
        x = graph.op(&name, Op::Reshape { shape }, &[x])?;
    }
    Ok(x)
}

/// The softmax `old` computed over the padded product `mm` (`to` columns, the first
/// `cols` real): the padding columns get the lowest float first, so their exponentials
/// are 0 and the real columns' sums are unchanged. The exponentials and the division
/// then run on whole vectors (ViT's 197 columns ran scalar); the slice comes after.
fn masked_softmax(
    graph: &mut Graph,
    mm: NodeIndex,
    old: NodeIndex,
    cols: i64,
    to: i64,
) -> Result<NodeIndex, GraphError> {
    let name = graph.node(old).name.clone();
    let mask = graph.constant(&format!("{name}_mask{to}"), column_mask(cols, to)?);
    let masked = graph.op(
        &format!("{name}_masked"),
        Op::Binary(Binary::Add),
        &[mm, mask],
    )?;
    graph.op(&name, graph.node(old).op.clone(), &[masked])
}

/// `[to]`: 0 for the first `cols` columns, the lowest float for the padding after them
/// (added to scores, it makes the padding's exponentials 0).
pub(crate) fn column_mask(cols: i64, to: i64) -> Result<NDArray, GraphError> {
    let mask = pad_rows(
        &vec![0.0; cols as usize],
        cols as usize,
        to as usize,
        f32::MIN,
    );
    Ok(NDArray::from_slice_f32(&[to as usize], &mask)?)
}

/// The least multiple of `lanes` at least `n`.
pub(crate) fn round_up(n: i64, lanes: i64) -> i64 {
    (n + lanes - 1) / lanes * lanes
}

/// `x[.., :keep]`, named `{name}_unpad`: the padding dropped from the last axis.
fn slice_back(
    graph: &mut Graph,
    name: &str,
    x: NodeIndex,
    keep: i64,
) -> Result<NodeIndex, GraphError> {
    let shape = graph.node(x).ty.shape.clone();
    let mut end = shape.clone();
    if let Some(last) = end.last_mut() {
        *last = keep;
    }
    let slice = Op::StridedSlice {
        begin: vec![0; shape.len()],
        end,
        strides: vec![1; shape.len()],
    };
    graph.op(&format!("{name}_unpad"), slice, &[x])
}

/// Rebuilds on the padded convolution `conv` the chain of single-reader per-channel
/// elementwise operators after the old convolution `old` (bias of `co` channels padded
/// to `to` with zeros; activations as they are); returns the chain's old and new last
/// nodes.
fn pad_epilogue(
    graph: &mut Graph,
    old: NodeIndex,
    conv: NodeIndex,
    co: i64,
    to: i64,
) -> Result<(NodeIndex, NodeIndex), GraphError> {
    let (mut old_end, mut new_end) = (old, conv);
    loop {
        let users = graph.users(old_end);
        let [u] = users[..] else { break };
        if graph.outputs().contains(&old_end) {
            break;
        }
        let node = graph.node(u);
        let (op, name) = (node.op.clone(), node.name.clone());
        let inputs = match &op {
            Op::BiasAdd { axis: 3 | -1 } => {
                let bias = graph.args(u)[1];
                let Some(b) = graph
                    .constant_value(bias)
                    .filter(|b| b.shape() == [co as usize] && b.dtype() == DataType::float32())
                else {
                    break;
                };
                let b = pad_last_axis(b, &[], co as usize, to)?;
                let bname = format!("{}_pad{to}", graph.node(bias).name);
                vec![new_end, graph.constant(&bname, b)]
            }
            Op::Unary(_) | Op::Clip { .. } | Op::Math(_) | Op::Activation(_) => vec![new_end],
            _ => break,
        };
        new_end = graph.op(&name, op, &inputs)?;
        old_end = u;
    }
    Ok((old_end, new_end))
}

/// `x` (shape `lead` × `from`) with zeros appended along its last axis up to `to`.
fn pad_last_axis(x: &NDArray, lead: &[usize], from: usize, to: i64) -> Result<NDArray, GraphError> {
    let out = pad_rows(&f32_values(x)?, from, to as usize, 0.0);
    let mut shape = lead.to_vec();
    shape.push(to as usize);
    Ok(NDArray::from_slice_f32(&shape, &out)?)
}

/// Rows of `from` values, each with `fill` appended up to `to`.
pub(crate) fn pad_rows(values: &[f32], from: usize, to: usize, fill: f32) -> Vec<f32> {
    let mut out = Vec::with_capacity(values.len() / from.max(1) * to);
    for row in values.chunks(from.max(1)) {
        out.extend_from_slice(row);
        out.extend(std::iter::repeat_n(fill, to - row.len()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_axis_gets_zeros() {
        let x = NDArray::from_slice_f32(&[2, 3], &[1., 2., 3., 4., 5., 6.]).unwrap();
        let y = pad_last_axis(&x, &[2], 3, 4).unwrap();
        assert_eq!(y.shape(), [2, 4]);
        assert_eq!(
            y.as_slice::<f32>().unwrap(),
            [1., 2., 3., 0., 4., 5., 6., 0.]
        );
    }
}
