//! The network IR: a petgraph graph of typed operator nodes, constants (weights) and
//! named inputs and outputs.
//!
//! Every node has one output of a known [`TensorType`]; an edge `producer -> consumer`
//! carries the consumer's input slot. Types are inferred when a node is added, by
//! building the operator's tensor expression on placeholders of its input types, so the
//! graph and the kernels that are later compiled from it agree on every shape and every
//! attribute check (errors name the node and the operator).

use crate::error::GraphError;
use crate::fixed_inputs::FixedInput;
use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use std::fmt;
use std::sync::Arc;
use tessera_ir::DataType;
use tessera_runtime::NDArray;
use tessera_te::placeholder;

pub use crate::op::{Binary, Op, Pattern, Unary};

/// The shape and element type of a value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct TensorType {
    pub shape: Vec<i64>,
    pub dtype: DataType,
}

impl TensorType {
    pub fn new(shape: &[i64], dtype: DataType) -> Self {
        TensorType {
            shape: shape.to_vec(),
            dtype,
        }
    }
    pub fn f32(shape: &[i64]) -> Self {
        TensorType::new(shape, DataType::float32())
    }
    /// The number of elements.
    pub fn numel(&self) -> i64 {
        self.shape.iter().product()
    }
    /// The size in bytes.
    pub fn nbytes(&self) -> usize {
        self.numel() as usize * self.dtype.bytes()
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dims: Vec<String> = self.shape.iter().map(|d| d.to_string()).collect();
        write!(f, "{}[{}]", self.dtype, dims.join(", "))
    }
}

/// The data layout of a 4-D activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    Nchw,
    Nhwc,
}

impl Layout {
    pub fn as_str(self) -> &'static str {
        match self {
            Layout::Nchw => "NCHW",
            Layout::Nhwc => "NHWC",
        }
    }
    /// Parses `NCHW` / `NHWC` (any case).
    pub fn parse(s: &str) -> Option<Layout> {
        match s.to_ascii_uppercase().as_str() {
            "NCHW" => Some(Layout::Nchw),
            "NHWC" => Some(Layout::Nhwc),
            _ => None,
        }
    }
    /// The axis of the channels.
    pub fn channel_axis(self) -> i64 {
        match self {
            Layout::Nchw => 1,
            Layout::Nhwc => 3,
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The data layout of a 5-D (volumetric) activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout3d {
    Ncdhw,
    Ndhwc,
}

impl Layout3d {
    pub fn as_str(self) -> &'static str {
        match self {
            Layout3d::Ncdhw => "NCDHW",
            Layout3d::Ndhwc => "NDHWC",
        }
    }
    /// The axis of the channels.
    pub fn channel_axis(self) -> i64 {
        match self {
            Layout3d::Ncdhw => 1,
            Layout3d::Ndhwc => 4,
        }
    }
}

/// A node: its name, operator and output type.
#[derive(Clone, Debug)]
pub struct Node {
    pub name: String,
    pub op: Op,
    pub ty: TensorType,
}

/// A network: operator nodes with typed outputs, in a petgraph graph whose edges carry
/// the consumer's input slot, plus the ordered inputs and outputs.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub name: String,
    g: StableDiGraph<Node, usize>,
    inputs: Vec<NodeIndex>,
    outputs: Vec<NodeIndex>,
    /// Inputs the network was imported for one value of ([`crate::fixed_inputs`]).
    fixed_inputs: Vec<FixedInput>,
    /// Whether constant folding leaves broadcasts on constants to run time
    /// ([`Graph::keep_broadcasts`]).
    keeps_broadcasts: bool,
}

impl Graph {
    pub fn new(name: &str) -> Graph {
        Graph {
            name: name.to_string(),
            ..Graph::default()
        }
    }

    /// An empty graph for a rewrite of `graph` into a new one: its name, and the input
    /// values it was built for.
    pub fn new_like(graph: &Graph) -> Graph {
        Graph {
            name: graph.name.clone(),
            fixed_inputs: graph.fixed_inputs.clone(),
            keeps_broadcasts: graph.keeps_broadcasts,
            ..Graph::default()
        }
    }

    /// Constant folding leaves an elementwise operator on constants whose result is
    /// larger than each of them (a causal mask compared out of two position vectors) to
    /// run time: a network built for runtime sizes ([`crate::dynamic`]) then reads the
    /// vectors, whose values follow the sizes in a form it can run, not the mask.
    pub fn keep_broadcasts(&mut self) {
        self.keeps_broadcasts = true;
    }

    /// Whether folding node `n` (on constants) would make a broadcast that
    /// [`Graph::keep_broadcasts`] leaves to run time.
    pub fn is_kept_broadcast(&self, n: NodeIndex) -> bool {
        let numel = |m: NodeIndex| self.node(m).ty.numel();
        self.keeps_broadcasts
            && matches!(self.node(n).op.pattern(), Some(Pattern::ElemWise))
            && self.args(n).iter().all(|&a| numel(a) < numel(n))
    }

    /// The inputs this network was built for one value of.
    pub fn fixed_inputs(&self) -> &[FixedInput] {
        &self.fixed_inputs
    }

    /// Records that the network was built for `fixed`'s value of its input.
    pub fn fix_input(&mut self, fixed: FixedInput) {
        if !self.fixed_inputs.contains(&fixed) {
            self.fixed_inputs.push(fixed);
        }
    }

    /// Adds a named network input.
    pub fn input(&mut self, name: &str, ty: TensorType) -> NodeIndex {
        let n = self.g.add_node(Node {
            name: name.to_string(),
            op: Op::Input,
            ty,
        });
        self.inputs.push(n);
        n
    }

    /// Adds a constant.
    pub fn constant(&mut self, name: &str, value: NDArray) -> NodeIndex {
        let ty = TensorType::new(
            &value.shape().iter().map(|&d| d as i64).collect::<Vec<_>>(),
            value.dtype(),
        );
        self.g.add_node(Node {
            name: name.to_string(),
            op: Op::Constant(Arc::new(value)),
            ty,
        })
    }

    /// Adds an operator node on `inputs`, inferring its output type (an error names the
    /// node and the operator).
    pub fn op(
        &mut self,
        name: &str,
        op: Op,
        inputs: &[NodeIndex],
    ) -> Result<NodeIndex, GraphError> {
        let ty = self.infer(name, &op, inputs)?;
        let n = self.g.add_node(Node {
            name: name.to_string(),
            op,
            ty,
        });
        for (slot, &i) in inputs.iter().enumerate() {
            self.g.add_edge(i, n, slot);
        }
        Ok(n)
    }

    /// The output type `op` would have on `inputs`.
    pub fn infer(
        &self,
        name: &str,
        op: &Op,
        inputs: &[NodeIndex],
    ) -> Result<TensorType, GraphError> {
        let arity_ok = match op.arity() {
            Some(k) => inputs.len() == k,
            None => !inputs.is_empty(),
        };
        if !arity_ok {
            return Err(GraphError::Arity {
                node: name.to_string(),
                op: op.name().to_string(),
                expected: op.arity().map_or("at least 1".into(), |k| k.to_string()),
                got: inputs.len(),
            });
        }
        for &i in inputs {
            if !self.g.contains_node(i) {
                return Err(GraphError::Invalid(format!(
                    "node `{name}`: input {} is not in the graph",
                    i.index()
                )));
            }
        }
        let shapes: Vec<&[i64]> = inputs.iter().map(|&i| &self.g[i].ty.shape[..]).collect();
        let infer_err = |source| GraphError::Infer {
            node: name.to_string(),
            op: op.name().to_string(),
            source: Box::new(source),
        };
        let mut ts = Vec::with_capacity(inputs.len());
        for (slot, &i) in inputs.iter().enumerate() {
            let shape = op
                .input_view(slot, &shapes)
                .unwrap_or_else(|| shapes[slot].to_vec());
            ts.push(
                placeholder(&shape, self.g[i].ty.dtype, &format!("p{slot}")).map_err(infer_err)?,
            );
        }
        let out = op.compute(&ts).map_err(infer_err)?;
        Ok(TensorType::new(out.shape(), out.dtype()))
    }

    /// Marks `n` as a network output.
    pub fn mark_output(&mut self, n: NodeIndex) {
        self.outputs.push(n);
    }

    pub fn inputs(&self) -> &[NodeIndex] {
        &self.inputs
    }
    pub fn outputs(&self) -> &[NodeIndex] {
        &self.outputs
    }
    pub fn set_outputs(&mut self, outputs: Vec<NodeIndex>) {
        self.outputs = outputs;
    }
    pub fn node(&self, n: NodeIndex) -> &Node {
        &self.g[n]
    }
    pub fn node_mut(&mut self, n: NodeIndex) -> &mut Node {
        &mut self.g[n]
    }
    pub fn contains(&self, n: NodeIndex) -> bool {
        self.g.contains_node(n)
    }
    /// The number of nodes (inputs and constants included).
    pub fn len(&self) -> usize {
        self.g.node_count()
    }
    pub fn is_empty(&self) -> bool {
        self.g.node_count() == 0
    }
    /// The underlying petgraph graph.
    pub fn petgraph(&self) -> &StableDiGraph<Node, usize> {
        &self.g
    }

    /// The input nodes of `n`, in slot order.
    pub fn args(&self, n: NodeIndex) -> Vec<NodeIndex> {
        let mut es: Vec<(usize, NodeIndex)> = self
            .g
            .edges_directed(n, Direction::Incoming)
            .map(|e| (*e.weight(), e.source()))
            .collect();
        es.sort();
        es.into_iter().map(|(_, s)| s).collect()
    }

    /// The consumers of `n`, once per use, in node order.
    pub fn users(&self, n: NodeIndex) -> Vec<NodeIndex> {
        let mut us: Vec<NodeIndex> = self
            .g
            .edges_directed(n, Direction::Outgoing)
            .map(|e| e.target())
            .collect();
        us.sort();
        us
    }

    /// The nodes in a topological order: by insertion among the ready ones, so the order
    /// is deterministic and follows how the network was written.
    pub fn topo_order(&self) -> Vec<NodeIndex> {
        let mut indeg: std::collections::HashMap<NodeIndex, usize> = self
            .g
            .node_indices()
            .map(|n| (n, self.g.edges_directed(n, Direction::Incoming).count()))
            .collect();
        let mut ready: std::collections::BTreeSet<NodeIndex> = indeg
            .iter()
            .filter(|(_, &d)| d == 0)
            .map(|(&n, _)| n)
            .collect();
        let mut order = Vec::with_capacity(self.g.node_count());
        while let Some(n) = ready.pop_first() {
            order.push(n);
            for e in self.g.edges_directed(n, Direction::Outgoing) {
                let d = indeg.get_mut(&e.target()).expect("a node of the graph");
                *d -= 1;
                if *d == 0 {
                    ready.insert(e.target());
                }
            }
        }
        order
    }

    /// Replaces every use of `old` (as an input and as a network output) by `new`.
    pub fn replace_uses(&mut self, old: NodeIndex, new: NodeIndex) {
        let uses: Vec<(petgraph::stable_graph::EdgeIndex, NodeIndex, usize)> = self
            .g
            .edges_directed(old, Direction::Outgoing)
            .map(|e| (e.id(), e.target(), *e.weight()))
            .collect();
        for (e, target, slot) in uses {
            self.g.remove_edge(e);
            self.g.add_edge(new, target, slot);
        }
        for o in self.outputs.iter_mut() {
            if *o == old {
                *o = new;
            }
        }
    }

    /// Removes a node and its edges.
    pub fn remove(&mut self, n: NodeIndex) {
        self.g.remove_node(n);
        self.inputs.retain(|&i| i != n);
    }

    /// The constant value of `n`, if it is a constant.
    pub fn constant_value(&self, n: NodeIndex) -> Option<&Arc<NDArray>> {
        match &self.g[n].op {
            Op::Constant(v) => Some(v),
            _ => None,
        }
    }

    /// Checks the graph: at least one output, every output a node of the graph, no
    /// cycle, unique input names.
    pub fn validate(&self) -> Result<(), GraphError> {
        if self.outputs.is_empty() {
            return Err(GraphError::Invalid(format!(
                "network `{}` has no output",
                self.name
            )));
        }
        if let Some(o) = self.outputs.iter().find(|&&o| !self.g.contains_node(o)) {
            return Err(GraphError::Invalid(format!(
                "output node {} is not in the graph",
                o.index()
            )));
        }
        if self.topo_order().len() != self.g.node_count() {
            return Err(GraphError::Invalid(format!(
                "network `{}` has a cycle",
                self.name
            )));
        }
        let mut seen = std::collections::HashSet::new();
        for &i in &self.inputs {
            if !seen.insert(&self.g[i].name) {
                return Err(GraphError::Invalid(format!(
                    "two inputs are named `{}`",
                    self.g[i].name
                )));
            }
        }
        Ok(())
    }

    /// Counts the operator nodes by operator name (inputs and constants excluded).
    pub fn op_counts(&self) -> std::collections::BTreeMap<&'static str, usize> {
        let mut m = std::collections::BTreeMap::new();
        for n in self.g.node_indices() {
            if self.g[n].op.pattern().is_some() {
                *m.entry(self.g[n].op.name()).or_insert(0) += 1;
            }
        }
        m
    }

    /// The total number of weight elements (all constants).
    pub fn num_params(&self) -> usize {
        self.g
            .node_indices()
            .filter_map(|n| self.constant_value(n).map(|v| v.len()))
            .sum()
    }
}

impl fmt::Display for Graph {
    /// One line per operator node in topological order:
    /// `%name = op(%a, %b) : float32[1, 64, 56, 56]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "network {}", self.name)?;
        for &i in &self.inputs {
            writeln!(f, "  input %{} : {}", self.g[i].name, self.g[i].ty)?;
        }
        for x in &self.fixed_inputs {
            writeln!(f, "  fixed %{} = {:?} for {}", x.input, x.values, x.user)?;
        }
        for n in self.topo_order() {
            let node = &self.g[n];
            if node.op.pattern().is_none() {
                continue;
            }
            let args: Vec<String> = self
                .args(n)
                .iter()
                .map(|&a| match self.g[a].op {
                    Op::Constant(_) => format!("${}", self.g[a].name),
                    _ => format!("%{}", self.g[a].name),
                })
                .collect();
            writeln!(
                f,
                "  %{} = {}({}) : {}",
                node.name,
                node.op.name(),
                args.join(", "),
                node.ty
            )?;
        }
        let outs: Vec<String> = self
            .outputs
            .iter()
            .map(|&o| format!("%{}", self.g[o].name))
            .collect();
        writeln!(f, "  return {}", outs.join(", "))
    }
}
