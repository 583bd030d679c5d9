//! Operator fusion with TVM's rules, and the tensor expression of each fused group.
//!
//! Walking the operators in topological order, an operator joins the group of its data
//! producer when that producer has no other consumer (and is not a network output):
//! - elementwise and broadcast operators join any open group (so the bias, batch-norm,
//!   residual add and activation after a conv2d or dense fuse into its output, and
//!   elementwise chains fuse together);
//! - single-input injective operators (reshape, flatten, transpose, pad, layout
//!   transforms) join any open group;
//! - a reduction (pooling) joins a group without a conv2d / dense / matmul and closes
//!   it: reductions end a group;
//! - conv2d / dense / matmul, concatenation and softmax start a group of their own.
//!
//! Each group has exactly one output (every member but the last has its single consumer
//! inside the group), which is what TVM's fused functions are.

use crate::error::GraphError;
use crate::ir::{Graph, Op, Pattern};
use petgraph::stable_graph::NodeIndex;
use std::collections::HashMap;
use tessera_te::{placeholder, ComputeDag, Tensor};

/// A fused group of operator nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// The members in topological order; the last one is the group's output.
    pub nodes: Vec<NodeIndex>,
    /// Whether it holds a conv2d / dense / matmul.
    pub has_anchor: bool,
    /// Whether it ends with a reduction or an opaque operator (nothing more fuses in).
    pub closed: bool,
}

impl Group {
    /// The node whose value the group computes.
    pub fn output(&self) -> NodeIndex {
        *self.nodes.last().expect("a group is never empty")
    }
}

/// Partitions the operator nodes of `graph` into fused groups, in an order they can run.
pub fn fuse(graph: &Graph) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    let mut group_of: HashMap<NodeIndex, usize> = HashMap::new();
    let outputs = graph.outputs();
    let order = graph.topo_order();
    for &n in &order {
        let op = &graph.node(n).op;
        let Some(pattern) = op.pattern() else {
            continue;
        };
        let joinable = |g: &Group| {
            !g.closed
                && match pattern {
                    Pattern::ElemWise => true,
                    Pattern::Injective => !matches!(op, Op::Concat { .. }),
                    Pattern::Reduce => !g.has_anchor,
                    Pattern::OutFusable | Pattern::Opaque => false,
                }
        };
        let join = graph
            .args(n)
            .into_iter()
            .filter(|&a| graph.users(a).len() == 1 && !outputs.contains(&a))
            .filter_map(|a| group_of.get(&a).copied())
            .find(|&g| joinable(&groups[g]));
        let gi = match join {
            Some(g) => g,
            None => {
                groups.push(Group {
                    nodes: Vec::new(),
                    has_anchor: false,
                    closed: false,
                });
                groups.len() - 1
            }
        };
        let g = &mut groups[gi];
        g.nodes.push(n);
        g.has_anchor |= pattern == Pattern::OutFusable;
        g.closed |= matches!(pattern, Pattern::Reduce | Pattern::Opaque);
        group_of.insert(n, gi);
    }
    // Run order: by the position of each group's output. A member's inputs precede it,
    // so every value a group reads is the output of a group that sorts before it.
    let position: HashMap<NodeIndex, usize> =
        order.iter().enumerate().map(|(i, &n)| (n, i)).collect();
    groups.sort_by_key(|g| position[&g.output()]);
    groups
}

/// The name of a fused function in TVM's style: `fused_` and the operator names.
pub fn group_name(graph: &Graph, group: &Group) -> String {
    let mut name = String::from("fused");
    for &n in &group.nodes {
        name.push('_');
        name.push_str(graph.node(n).op.name());
    }
    name
}

/// The tensor expression of a fused group: one placeholder per value read from outside
/// the group (named `p0`, `p1`… in order of first use) and the output tensor.
#[derive(Clone, Debug)]
pub struct GroupCompute {
    /// The nodes whose values the placeholders stand for, in parameter order.
    pub params: Vec<NodeIndex>,
    pub placeholders: Vec<Tensor>,
    pub output: Tensor,
    /// The tensors of the members that are elementwise or injective and not the output:
    /// the default schedule inlines them into their consumers.
    pub inlinable: Vec<Tensor>,
    /// The group's conv2d / dense / matmul node and its tensor, if it has one: what a
    /// tuned template schedules.
    pub anchor: Option<(NodeIndex, Tensor)>,
}

impl GroupCompute {
    /// The kernel's arguments: the placeholders, then the output.
    pub fn args(&self) -> Vec<Tensor> {
        let mut a = self.placeholders.clone();
        a.push(self.output.clone());
        a
    }
    /// The compute DAG of the group.
    pub fn dag(&self) -> Result<ComputeDag, GraphError> {
        ComputeDag::new(&[self.output.clone()])
            .map_err(|e| GraphError::Invalid(format!("compute DAG of a fused group: {e}")))
    }
}

/// Builds the tensor expression of `group`.
pub fn group_compute(graph: &Graph, group: &Group) -> Result<GroupCompute, GraphError> {
    let mut value: HashMap<NodeIndex, Tensor> = HashMap::new();
    let mut params: Vec<NodeIndex> = Vec::new();
    let mut placeholders: Vec<Tensor> = Vec::new();
    let mut inlinable = Vec::new();
    let mut anchor = None;
    for &n in &group.nodes {
        let node = graph.node(n);
        let args = graph.args(n);
        let shapes: Vec<&[i64]> = args.iter().map(|&a| &graph.node(a).ty.shape[..]).collect();
        let mut ins = Vec::with_capacity(args.len());
        for (slot, &a) in args.iter().enumerate() {
            let view = node.op.input_view(slot, &shapes);
            let t = match value.get(&a) {
                Some(t) => match &view {
                    Some(v) => {
                        tessera_te::ops::reshape(t, v).map_err(|source| GraphError::Infer {
                            node: node.name.clone(),
                            op: node.op.name().into(),
                            source: Box::new(source),
                        })?
                    }
                    None => t.clone(),
                },
                None => {
                    // A value from outside: one placeholder per (node, view).
                    let shape = view.unwrap_or_else(|| graph.node(a).ty.shape.clone());
                    let existing = params
                        .iter()
                        .zip(&placeholders)
                        .find(|(p, t)| **p == a && t.shape() == &shape[..]);
                    match existing {
                        Some((_, t)) => t.clone(),
                        None => {
                            let t = placeholder(
                                &shape,
                                graph.node(a).ty.dtype,
                                &format!("p{}", params.len()),
                            )
                            .map_err(|source| GraphError::Infer {
                                node: node.name.clone(),
                                op: node.op.name().into(),
                                source: Box::new(source),
                            })?;
                            params.push(a);
                            placeholders.push(t.clone());
                            t
                        }
                    }
                }
            };
            ins.push(t);
        }
        let out = node.op.compute(&ins).map_err(|source| GraphError::Infer {
            node: node.name.clone(),
            op: node.op.name().into(),
            source: Box::new(source),
        })?;
        if n != group.output()
            && matches!(
                node.op.pattern(),
                Some(Pattern::ElemWise | Pattern::Injective)
            )
        {
            inlinable.push(out.clone());
        }
        if anchor.is_none() && node.op.pattern() == Some(Pattern::OutFusable) {
            anchor = Some((n, out.clone()));
        }
        value.insert(n, out);
    }
    let output = value
        .remove(&group.output())
        .expect("the output is a member");
    Ok(GroupCompute {
        params,
        placeholders,
        output,
        inlinable,
        anchor,
    })
}
