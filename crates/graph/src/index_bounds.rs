//! Index inputs checked before a run. A network input that a gather reads as indices
//! (token ids into an embedding table, positions into a cache) could hold an index past
//! the end of what it indexes; the gather kernels clamp every index into range so that
//! no read leaves its tensor, which turns a wrong tokenizer into a plausible wrong
//! answer. onnxruntime refuses such an input; so does [`check`], once per input set (off
//! the kernels' hot path), naming the input, the bad value and what it indexes.
//!
//! [`index_bounds`] finds, at build time, each input that reaches the indices operand of
//! a `take` (ONNX's `Gather`) or `gather_elements` unchanged in value (through reshapes,
//! casts between integer types and the like), with the size of the indexed dimension.

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

/// The network input `n` is (through value-preserving operators), if any.
fn source_input(graph: &Graph, mut n: NodeIndex) -> Option<NodeIndex> {
    loop {
        let node = graph.node(n);
        match &node.op {
            Op::Input => return Some(n),
            Op::Cast { dtype } if !dtype.is_integer() => return None,
            op if passes_values(op) => n = *graph.args(n).first()?,
            _ => return None,
        }
    }
}

/// Every input of `graph` that a gather reads as indices, with the indexed size.
pub fn index_bounds(graph: &Graph) -> Vec<IndexBound> {
    let mut out: Vec<IndexBound> = Vec::new();
    for n in graph.topo_order() {
        let node = graph.node(n);
        let axis = match &node.op {
            Op::Take { axis } | Op::GatherElements { axis } => *axis,
            _ => continue,
        };
        let args = graph.args(n);
        let (Some(&data), Some(&idx)) = (args.first(), args.get(1)) else {
            continue;
        };
        let Some(input) = source_input(graph, idx) else {
            continue;
        };
        let shape = &graph.node(data).ty.shape;
        let rank = shape.len() as i64;
        let ax = if axis < 0 { axis + rank } else { axis };
        let Some(&size) = usize::try_from(ax).ok().and_then(|a| shape.get(a)) else {
            continue;
        };
        let bound = IndexBound {
            input: graph.node(input).name.clone(),
            size,
            user: format!(
                "`{}` ({}) along axis {ax} of `{}`",
                node.name,
                node.op.name(),
                graph.node(data).name
            ),
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
        let n = b.size as f64;
        if let Some((at, v)) = values.iter().enumerate().find(|(_, &v)| v < -n || v >= n) {
            return Err(GraphError::Input {
                name: name.to_string(),
                reason: format!(
                    "holds the index {v} (at flat position {at}), out of range [-{}, {}) for \
                     {}",
                    b.size, b.size, b.user
                ),
            });
        }
    }
    Ok(())
}
