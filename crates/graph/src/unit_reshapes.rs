//! Elementwise operators moved inside the reshapes that drop and restore one unit axis
//! around them, so that the two reshapes cancel.
//!
//! An ONNX `Conv` over a sequence (a 1-D conv, `[N, C, W]`) is a 2-D convolution of
//! `[N, C, 1, W]` between two reshapes; the activation after it runs on the 3-D value,
//! and the next conv reshapes back to 4-D. So wav2vec2's feature extractor, seven convs
//! with a GELU after each, left every activation outside the NHWC layout: each conv
//! wrote its output transposed back to NCHW and the next one transposed it again (the
//! 3,199 × 512 maps of its first layers are 6.5 MiB each). With the chain
//! `reshape(4-D → 3-D) → elementwise… → reshape(3-D → 4-D)` rewritten as the
//! elementwise operators on the 4-D value, the layout pass keeps the whole extractor in
//! NHWC.
//!
//! The chain's operators are one-input elementwise ones, binary ones whose other
//! operand is a constant (reshaped to the 4-D value's axes: a per-channel scale
//! `[C, 1]` becomes `[C, 1, 1]`) or a single element, and instance norms (wav2vec2's
//! group norm of one channel a group: over the spatial axes, a unit one among them
//! changing nothing); each is used only by the next.

use crate::error::GraphError;
use crate::ir::{Graph, Op, Pattern};
use crate::passes::dead_code_elimination;
use crate::reference::reshape;
use petgraph::stable_graph::NodeIndex;

/// Rewrites every such chain; returns how many.
pub fn elementwise_inside_unit_reshapes(graph: &mut Graph) -> Result<usize, GraphError> {
    let mut done = 0;
    for r2 in graph.topo_order() {
        if !graph.contains(r2) || !matches!(graph.node(r2).op, Op::Reshape { .. }) {
            continue;
        }
        let Some(m) = chain_below(graph, r2) else {
            continue;
        };
        let mut v = m.x;
        for &e in m.chain.iter().rev() {
            let mut ins = Vec::new();
            let norm = matches!(graph.node(e).op, Op::InstanceNorm { .. });
            for (slot, a) in graph.args(e).into_iter().enumerate() {
                ins.push(if m.chain.contains(&a) || a == m.r1 {
                    v
                } else if norm && slot > 0 {
                    a // the per-channel scale and shift, whatever the rank
                } else {
                    unit_axis_operand(graph, a, m.axis, m.rank)?
                });
            }
            let name = format!("{}_unit", graph.node(e).name);
            v = graph.op(&name, graph.node(e).op.clone(), &ins)?;
        }
        graph.replace_uses(r2, v);
        done += 1;
    }
    if done > 0 {
        dead_code_elimination(graph);
    }
    Ok(done)
}

/// A chain found under a reshape: the value `x` of rank `rank` that the first reshape
/// `r1` took one unit `axis` from, and the elementwise operators between, top first.
struct Chain {
    x: NodeIndex,
    r1: NodeIndex,
    axis: usize,
    rank: usize,
    chain: Vec<NodeIndex>,
}

/// The chain that ends in reshape `r2`, if `r2` restores the shape its first reshape
/// dropped a unit axis from.
fn chain_below(graph: &Graph, r2: NodeIndex) -> Option<Chain> {
    let mut chain = Vec::new();
    let mut cur = *graph.args(r2).first()?;
    loop {
        if matches!(graph.node(cur).op, Op::Reshape { .. }) {
            break;
        }
        if graph.users(cur).len() != 1 || graph.outputs().contains(&cur) {
            return None;
        }
        chain.push(cur);
        cur = chain_input(graph, cur)?;
    }
    let r1 = cur;
    let x = *graph.args(r1).first()?;
    let (xs, ys) = (&graph.node(x).ty.shape, &graph.node(r1).ty.shape);
    if graph.node(r2).ty.shape != *xs || xs.len() != ys.len() + 1 {
        return None;
    }
    let axis =
        (0..xs.len()).find(|&p| xs[p] == 1 && xs[..p] == ys[..p] && xs[p + 1..] == ys[p..])?;
    // an instance norm of `[N, C, W]` is one of `[N, C, 1, W]` only where the unit axis
    // is a spatial one
    let norms = chain
        .iter()
        .any(|&e| matches!(graph.node(e).op, Op::InstanceNorm { .. }));
    if norms && axis < 2 {
        return None;
    }
    Some(Chain {
        x,
        r1,
        axis,
        rank: xs.len(),
        chain,
    })
}

/// The input of elementwise node `e` that the chain continues through: a one-input
/// elementwise operator's input, or a binary operator's one operand that is neither
/// a constant nor a single element.
fn chain_input(graph: &Graph, e: NodeIndex) -> Option<NodeIndex> {
    let node = graph.node(e);
    let args = graph.args(e);
    match &node.op {
        Op::Binary(_) => {
            let mut open = args
                .iter()
                .filter(|&&a| graph.constant_value(a).is_none() && graph.node(a).ty.numel() != 1);
            let a = *open.next()?;
            open.next().is_none().then_some(a)
        }
        op if args.len() == 1 && op.pattern() == Some(Pattern::ElemWise) => Some(args[0]),
        // normalizes over every axis past the channels: a unit one changes nothing
        Op::InstanceNorm {
            channels_last: false,
            ..
        } => Some(args[0]),
        _ => None,
    }
}

/// A binary operator's other operand on the value of `rank` axes: a single element as
/// it is; a constant right-aligned to `rank - 1` axes (numpy broadcasting), then given
/// the unit `axis`.
fn unit_axis_operand(
    graph: &mut Graph,
    a: NodeIndex,
    axis: usize,
    rank: usize,
) -> Result<NodeIndex, GraphError> {
    let Some(c) = graph.constant_value(a).cloned() else {
        return Ok(a);
    };
    if c.len() == 1 {
        return Ok(a);
    }
    let mut shape = vec![1usize; (rank - 1).saturating_sub(c.ndim())];
    shape.extend_from_slice(c.shape());
    shape.insert(axis.min(shape.len()), 1);
    let name = format!("{}_unit", graph.node(a).name);
    Ok(graph.constant(&name, reshape(&c, &shape)?))
}
