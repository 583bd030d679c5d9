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
//! - conv2d / dense / matmul, concatenation and softmax start a group of their own;
//! - an elementwise operator that reads the outputs of several such open groups merges
//!   them into one (at most one of them holding a conv2d / dense / matmul), as TVM's
//!   post-dominator analysis does: an LSTM cell's `f·c' + i·g` and its three activations
//!   are one kernel, not four ([`merge_branches`]).
//!
//! A value read by several elementwise operators whose paths meet again within a few
//! elementwise steps (a diamond: GELU's `x · ½(1 + erf(x/√2))`, SiLU's `x · σ(x)`) counts
//! as having one consumer, the node where they meet ([`converging_values`]), as TVM's
//! post-dominator analysis fuses it: the whole diamond joins one group.
//!
//! Each group has exactly one output (every member but the last has all its consumers
//! inside the group), which is what TVM's fused functions are.

use crate::error::GraphError;
use crate::ir::{Graph, Op, Pattern};
use petgraph::stable_graph::NodeIndex;
use std::collections::{HashMap, HashSet};
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

    /// The value this group only relabels, if it is a view: a lone reshape or flatten
    /// of a value another group computes (not a constant or a network input), itself no
    /// network output. The bytes of a row-major tensor are those of every reshape of it,
    /// so a view runs no kernel: its value shares its source's storage, and it is no
    /// tuning task. Such groups are where fusion stops, after a reduction or a value
    /// with several readers: LLaMA-style decoders had 30 copy kernels a run (0.63 of
    /// `tessera run --profile`'s 14.1 ms), ResNet one after its pooling.
    pub fn view_of(&self, graph: &Graph) -> Option<NodeIndex> {
        let [node] = self.nodes[..] else {
            return None;
        };
        if !matches!(graph.node(node).op, Op::Reshape { .. } | Op::Flatten)
            || graph.outputs().contains(&node)
        {
            return None;
        }
        let [source] = graph.args(node)[..] else {
            return None;
        };
        let computed = graph.node(source).op.pattern().is_some();
        (computed && !graph.outputs().contains(&source)).then_some(source)
    }
}

/// Partitions the operator nodes of `graph` into fused groups, in an order they can run.
pub fn fuse(graph: &Graph) -> Vec<Group> {
    let groups = fuse_with(graph, &converging_values(graph));
    // a diamond that did not close inside one group would leave a member read from
    // outside it: then no diamond fuses
    if groups.iter().all(|g| single_output(graph, g)) {
        groups
    } else {
        fuse_with(graph, &HashSet::new())
    }
}

/// Whether every member of `g` but its output is read only inside `g` (and is not a
/// network output).
fn single_output(graph: &Graph, g: &Group) -> bool {
    let outputs = graph.outputs();
    g.nodes[..g.nodes.len() - 1]
        .iter()
        .all(|&m| !outputs.contains(&m) && graph.users(m).iter().all(|u| g.nodes.contains(u)))
}

/// The greedy fusion, where the values of `converging` count as read once.
fn fuse_with(graph: &Graph, converging: &HashSet<NodeIndex>) -> Vec<Group> {
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
        // the open groups whose output only this node reads, each once
        let mut open: Vec<usize> = Vec::new();
        for a in graph.args(n) {
            if (graph.users(a).len() == 1 || converging.contains(&a)) && !outputs.contains(&a) {
                if let Some(g) = group_of.get(&a).copied() {
                    if joinable(&groups[g]) && !open.contains(&g) {
                        open.push(g);
                    }
                }
            }
        }
        let join = match pattern {
            Pattern::ElemWise => merge_branches(&mut groups, &mut group_of, &open),
            _ => open.first().copied(),
        };
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
    groups.retain(|g| !g.nodes.is_empty());
    // Run order: by the position of each group's output. A member's inputs precede it,
    // so every value a group reads is the output of a group that sorts before it.
    let position: HashMap<NodeIndex, usize> =
        order.iter().enumerate().map(|(i, &n)| (n, i)).collect();
    groups.sort_by_key(|g| position[&g.output()]);
    groups
}

/// The group an elementwise operator joins when it reads the outputs of several open
/// groups that it alone reads (`c = f·c' + i·g` of an LSTM cell, `a·b + c·d`): they
/// become one, as TVM's post-dominator fusion makes them, unless two of them hold a
/// conv2d / dense / matmul; then it joins the first. The groups merged away are left
/// empty. The members stay in an order they can be computed in: no member of one
/// group reads a member of another (each group's values are read only inside it, its
/// output only by the joining operator), and the group with the anchor comes first, so
/// a group's anchor stays its first member.
fn merge_branches(
    groups: &mut [Group],
    group_of: &mut HashMap<NodeIndex, usize>,
    open: &[usize],
) -> Option<usize> {
    let (&first, rest) = open.split_first()?;
    let anchors = open.iter().filter(|&&g| groups[g].has_anchor).count();
    if rest.is_empty() || anchors > 1 {
        return Some(first);
    }
    let into = open
        .iter()
        .copied()
        .find(|&g| groups[g].has_anchor)
        .unwrap_or(first);
    for &g in open {
        if g == into {
            continue;
        }
        let nodes = std::mem::take(&mut groups[g].nodes);
        for &m in &nodes {
            group_of.insert(m, into);
        }
        groups[into].nodes.extend(nodes);
    }
    Some(into)
}

/// The most elementwise steps a diamond's paths take before they meet.
const DIAMOND_STEPS: usize = 8;

/// The values read by more than one operator, all elementwise, whose paths meet again:
/// from each reader, following single-consumer elementwise operators for at most
/// [`DIAMOND_STEPS`] steps, every path reaches one common node. The greedy fusion may
/// then take the value's readers into its group one by one: they all end up there, so
/// the value stays inside the group.
fn converging_values(graph: &Graph) -> HashSet<NodeIndex> {
    let outputs = graph.outputs();
    let elementwise = |n: NodeIndex| graph.node(n).op.pattern() == Some(Pattern::ElemWise);
    // the nodes a reader's value flows through: itself, then while each has one
    // elementwise consumer (and is not a network output), that consumer
    let path = |start: NodeIndex| {
        let mut p = vec![start];
        let mut at = start;
        while p.len() < DIAMOND_STEPS {
            let users = graph.users(at);
            match users.as_slice() {
                [next] if elementwise(*next) && !outputs.contains(&at) => {
                    p.push(*next);
                    at = *next;
                }
                _ => break,
            }
        }
        p
    };
    let mut out = HashSet::new();
    for n in graph.topo_order() {
        let mut users = graph.users(n);
        let reads = users.len();
        users.dedup();
        if reads < 2 || !users.iter().all(|&u| elementwise(u)) {
            continue;
        }
        if users.len() == 1 {
            // one operator reading the value twice (`x · x`)
            out.insert(n);
            continue;
        }
        let paths: Vec<Vec<NodeIndex>> = users.iter().map(|&u| path(u)).collect();
        let meet = paths[0]
            .iter()
            .position(|m| paths[1..].iter().all(|p| p.contains(m)));
        // every path must reach the meeting node before leaving the diamond
        if let Some(i) = meet {
            let m = paths[0][i];
            let inside = paths.iter().all(|p| {
                let k = p.iter().position(|x| *x == m).expect("contains");
                !p[..k].iter().any(|x| outputs.contains(x))
            });
            if inside {
                out.insert(n);
            }
        }
    }
    out
}

/// The longest fused-function name kept whole, as TVM's `kMaxFuncNameLength`: the
/// name becomes the kernel's file name, which file systems cap at 255 bytes.
const MAX_NAME: usize = 80;

/// The name of a fused function in TVM's style: `fused_` and the operator names. A name
/// longer than [`MAX_NAME`] keeps its first [`MAX_NAME`] characters and gets a hash of
/// the whole name, so that distinct long groups keep distinct names.
pub fn group_name(graph: &Graph, group: &Group) -> String {
    let mut name = String::from("fused");
    for &n in &group.nodes {
        name.push('_');
        name.push_str(graph.node(n).op.name());
    }
    if name.len() <= MAX_NAME {
        return name;
    }
    // FNV-1a: stable across runs and builds, unlike std's hasher
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let mut cut = MAX_NAME;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}_{:08x}", &name[..cut], hash as u32)
}

/// The tensor expression of a fused group: one placeholder per value read from outside
/// the group (named `p0`, `p1`… in order of first use) and the output tensor.
#[derive(Clone, Debug)]
pub struct GroupCompute {
    /// The nodes whose values the placeholders stand for, in parameter order.
    pub params: Vec<NodeIndex>,
    pub placeholders: Vec<Tensor>,
    pub output: Tensor,
    /// The tensors of the members that are elementwise or injective, not the output and
    /// not broadcast into it: the default schedule inlines them into their consumers.
    pub inlinable: Vec<Tensor>,
    /// The group's conv2d / dense / matmul node and its tensor, if it has one: what a
    /// tuned template schedules.
    pub anchor: Option<(NodeIndex, Tensor)>,
    /// The same group with some runtime sizes at fixed values, which its kernel runs
    /// where `condition` holds ([`crate::dynamic`]).
    pub specialized: Option<Box<Specialized>>,
    /// For a host step whose values follow runtime sizes: per parameter, then for the
    /// output, the dimensions that do ([`crate::dynamic`]); empty otherwise.
    pub host_dims: Vec<Vec<crate::dynamic::SizeDim>>,
    /// For a host TopK whose k follows runtime sizes: the size it writes its k to.
    pub host_count: Option<usize>,
}

/// A group's compute at fixed values of some runtime sizes, and the int32 condition
/// (on the sizes its kernel reads) under which it runs.
#[derive(Clone, Debug)]
pub struct Specialized {
    pub condition: tessera_ir::Expr,
    pub compute: GroupCompute,
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

/// Whether `t` (a member of `group`) has at most an eighth of the elements of the
/// group's output: a value broadcast into it, as a squeeze-excitation's channel scales
/// (`σ(conv(pool(x)))`, C values) into `x · scale` (H·W·C). Inlined, it would be computed
/// once per output element (a sigmoid per pixel instead of per channel); it is computed
/// once, into a buffer of its own.
fn broadcast_into(graph: &Graph, group: &Group, t: &Tensor) -> bool {
    let out: i64 = graph.node(group.output()).ty.shape.iter().product();
    t.shape().iter().product::<i64>() * 8 <= out
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
            && !broadcast_into(graph, group, &out)
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
        specialized: None,
        host_dims: Vec::new(),
        host_count: None,
    })
}
