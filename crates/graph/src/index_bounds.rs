//! Index inputs checked before a run. A network input that a gather reads as indices
//! (token ids into an embedding table, positions into a cache) could hold an index past
//! the end of what it indexes; the gather kernels clamp every index into range so that
//! no read leaves its tensor, which turns a wrong tokenizer into a plausible wrong
//! answer. onnxruntime refuses such an input; so does [`check`], once per input set (off
//! the kernels' hot path), naming the input, the bad value and what it indexes.
//!
//! [`index_bounds`] finds, at build time, each input that reaches the indices operand of
//! a `take` (ONNX's `Gather`), `gather_elements` or `scatter_elements` unchanged in value
//! (through reshapes, casts between integer types and the like), with the size of the
//! indexed dimension; and each that reaches a `gather_nd` or `scatter_nd` (an index
//! tuple along the last axis, each component into a dimension of its own) in order
//! (reshapes and casts only), with the size each component indexes.

use crate::error::GraphError;
use crate::ir::{Graph, Op};
use petgraph::stable_graph::NodeIndex;
use serde::{Deserialize, Serialize};
use tessera_runtime::NDArray;

/// An input whose values index a dimension: each must lie in `[-size, size)` (a
/// negative one counts from the end, as ONNX's gathers define it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexBound {
    /// The network input.
    pub input: String,
    /// The size of the dimension it indexes.
    pub size: i64,
    /// For index tuples along the last axis (`gather_nd`, `scatter_nd`): the size that
    /// each component indexes (the value at flat position `p` is component
    /// `p % sizes.len()`); empty when every value indexes `size`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tuple_sizes: Vec<i64>,
    /// What it indexes, for messages: the gather's node and the indexed value.
    pub user: String,
}

/// The value-preserving operators an index may pass through between the input and the
/// gather.
fn passes_values(op: &Op) -> bool {
    matches!(
        op,
        Op::Reshape { .. }
            | Op::Flatten
            | Op::Transpose { .. }
            | Op::BroadcastTo { .. }
            | Op::Tile { .. }
            | Op::Cast { .. }
    )
}

/// The network input `n` is (through value-preserving operators), if any; `in_order`:
/// only through those that keep every value at its flat position (reshapes, casts).
fn source_input(graph: &Graph, mut n: NodeIndex, in_order: bool) -> Option<NodeIndex> {
    loop {
        let node = graph.node(n);
        match &node.op {
            Op::Input => return Some(n),
            Op::Cast { dtype } if !dtype.is_integer() => return None,
            Op::Reshape { .. } | Op::Flatten | Op::Cast { .. } => {}
            op if passes_values(op) && !in_order => {}
            _ => return None,
        }
        n = *graph.args(n).first()?;
    }
}

/// What the indices operand of gather or scatter node `n` indexes: the size of one
/// dimension, or per component of the index tuples along its last axis.
fn indexed(graph: &Graph, n: NodeIndex) -> Option<(i64, Vec<i64>, String)> {
    let args = graph.args(n);
    let (&data, &idx) = (args.first()?, args.get(1)?);
    let shape = &graph.node(data).ty.shape;
    let rank = shape.len() as i64;
    let data_name = &graph.node(data).name;
    let tuples = |from: usize| {
        let k = usize::try_from(*graph.node(idx).ty.shape.last()?).ok()?;
        let sizes = shape.get(from..from + k)?.to_vec();
        let size = sizes.iter().copied().max().unwrap_or(0);
        Some((size, sizes, format!("the index tuples into `{data_name}`")))
    };
    match graph.node(n).op {
        Op::Take { axis } | Op::GatherElements { axis } | Op::ScatterElements { axis, .. } => {
            let ax = if axis < 0 { axis + rank } else { axis };
            let size = *usize::try_from(ax).ok().and_then(|a| shape.get(a))?;
            Some((size, Vec::new(), format!("axis {ax} of `{data_name}`")))
        }
        Op::GatherNd { batch_dims } => tuples(batch_dims),
        Op::ScatterNd { .. } => tuples(0),
        _ => None,
    }
}

/// Every input of `graph` that a gather reads as indices, with the indexed size.
pub fn index_bounds(graph: &Graph) -> Vec<IndexBound> {
    let mut out: Vec<IndexBound> = Vec::new();
    for n in graph.topo_order() {
        let node = graph.node(n);
        let Some((size, tuple_sizes, what)) = indexed(graph, n) else {
            continue;
        };
        let Some(input) = graph
            .args(n)
            .get(1)
            .and_then(|&idx| source_input(graph, idx, !tuple_sizes.is_empty()))
        else {
            continue;
        };
        let bound = IndexBound {
            input: graph.node(input).name.clone(),
            size,
            tuple_sizes,
            user: format!("`{}` ({}) along {what}", node.name, node.op.name()),
        };
        if !out.contains(&bound) {
            out.push(bound);
        }
    }
    out
}

/// Checks `value`, given for input `name`, against the bounds on it.
pub fn check(bounds: &[IndexBound], name: &str, value: &NDArray) -> Result<(), GraphError> {
    let mine: Vec<&IndexBound> = bounds.iter().filter(|b| b.input == name).collect();
    if mine.is_empty() || !value.dtype().is_integer() {
        return Ok(());
    }
    let values = value.to_f64_vec();
    for b in mine {
        let size = |at: usize| match b.tuple_sizes.len() {
            0 => b.size,
            k => b.tuple_sizes[at % k],
        };
        let bad = values.iter().enumerate().find(|&(at, &v)| {
            let n = size(at) as f64;
            v < -n || v >= n
        });
        if let Some((at, v)) = bad {
            let n = size(at);
            let component = match b.tuple_sizes.len() {
                0 => String::new(),
                k => format!(", component {} of its tuple", at % k),
            };
            return Err(GraphError::Input {
                name: name.to_string(),
                reason: format!(
                    "holds the index {v} (at flat position {at}{component}), out of range \
                     [-{n}, {n}) for {}",
                    b.user
                ),
            });
        }
    }
    Ok(())
}
