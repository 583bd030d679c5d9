//! The compute DAG: the operations of a tensor program in topological order, its FLOP
//! count, its workload key, and its print in TVM's format.

use crate::error::TeError;
use crate::tensor::{ComputeBody, OpKind, Tensor};
use md5::{Digest, Md5};
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::Direction;
use std::collections::{BinaryHeap, HashMap};
use std::fmt;
use tessera_ir::visit::{mutate_expr_children, ExprMutator};
use tessera_ir::{Buffer, Expr, ExprNode, TypeCode, Var};

/// A DAG of tensor operations, reachable from its output tensors.
#[derive(Clone, Debug)]
pub struct ComputeDag {
    /// Every operation, producers before consumers, ordered as TVM orders them.
    pub ops: Vec<Tensor>,
    /// The output tensors given at construction.
    pub outputs: Vec<Tensor>,
    /// Producer → consumer edges over indices of `ops`.
    pub graph: DiGraph<usize, ()>,
    flops: f64,
}

/// See [`ComputeDag::check_atol_of_max`].
pub const WINOGRAD_ATOL_OF_MAX: f64 = 1e-5;

impl ComputeDag {
    /// The DAG of everything `outputs` are computed from.
    pub fn new(outputs: &[Tensor]) -> Result<ComputeDag, TeError> {
        if outputs.is_empty() {
            return Err(TeError::Dag(
                "a compute DAG needs at least one output tensor".into(),
            ));
        }
        let ops = topo_sort(outputs);
        let index: HashMap<&Tensor, usize> = ops.iter().enumerate().map(|(i, t)| (t, i)).collect();
        let mut graph = DiGraph::new();
        let nodes: Vec<NodeIndex> = (0..ops.len()).map(|i| graph.add_node(i)).collect();
        for (i, t) in ops.iter().enumerate() {
            for inp in t.inputs() {
                graph.add_edge(nodes[index[inp]], nodes[i], ());
            }
        }
        let flops = ops.iter().map(flop_count).sum();
        Ok(ComputeDag {
            ops,
            outputs: outputs.to_vec(),
            graph,
            flops,
        })
    }

    /// The absolute tolerance of a correctness check of this DAG's outputs, as a fraction
    /// of the largest expected magnitude (0: none beyond the check's own). Winograd's
    /// transforms scale intermediate values up (F(4×4, 3×3): `Bᵀ d B` up to ~100× the
    /// input, `Aᵀ M A` up to 64×), so float32 rounding of those sums leaves absolute
    /// errors proportional to the output's largest values: on random inputs, an output
    /// near 0 next to outputs in the hundreds then fails any elementwise relative check,
    /// whatever the schedule (the unscheduled program too, with other rounding).
    pub fn check_atol_of_max(&self) -> f64 {
        let winograd = self.ops.iter().any(|t| {
            t.tag() == crate::ops::TAG_WINOGRAD_BLOCKED || t.tag() == crate::ops::TAG_WINOGRAD
        });
        if winograd {
            WINOGRAD_ATOL_OF_MAX
        } else {
            0.0
        }
    }

    /// The number of floating-point operations (TVM's estimate: arithmetic of the output
    /// type per element, reductions counted per reduced element).
    pub fn flop_count(&self) -> f64 {
        self.flops
    }

    /// The tensors that read `t`.
    pub fn consumers(&self, t: &Tensor) -> Vec<Tensor> {
        let Some(i) = self.ops.iter().position(|o| o == t) else {
            return Vec::new();
        };
        let mut v: Vec<usize> = self
            .graph
            .neighbors_directed(NodeIndex::new(i), Direction::Outgoing)
            .map(|n| self.graph[n])
            .collect();
        v.sort();
        v.dedup();
        v.into_iter().map(|i| self.ops[i].clone()).collect()
    }

    /// The placeholders, in topological order.
    pub fn inputs(&self) -> Vec<Tensor> {
        self.ops
            .iter()
            .filter(|t| t.is_placeholder())
            .cloned()
            .collect()
    }

    /// The DAG printed with canonical names, so that equal computations print equally
    /// whatever their tensors and variables are called.
    pub fn canonical_text(&self) -> String {
        let mut rename = Canon::default();
        let mut out = String::new();
        for (i, t) in self.ops.iter().enumerate() {
            let buf = Buffer::global(format!("t{i}"), t.dtype(), t.shape());
            rename.bufs.insert(t.buffer().clone(), buf);
            match t.kind() {
                OpKind::Placeholder => out.push_str(&format!(
                    "t{i} = PLACEHOLDER {} {:?}\n",
                    t.dtype(),
                    t.shape()
                )),
                OpKind::Compute { axis, body } => {
                    for (k, a) in axis.iter().enumerate() {
                        rename
                            .vars
                            .insert(a.var().clone(), Var::int(format!("a{k}")).to_expr());
                    }
                    for (k, a) in t.reduce_axis().iter().enumerate() {
                        rename.vars.insert(
                            a.var().clone(),
                            Var::int(format!("r{k}:{}", a.extent().unwrap_or(-1))).to_expr(),
                        );
                    }
                    let body = body.map(|e| rename.mutate_expr(e));
                    out.push_str(&format!(
                        "t{i} {} {:?} = {}",
                        t.dtype(),
                        t.shape(),
                        body_text(&body)
                    ));
                    // runtime extents, where any (a DAG without one keys as before)
                    let axes = axis.iter().map(|a| ('a', a));
                    let reduce = t.reduce_axis().iter().map(|a| ('r', a));
                    for (k, (kind, a)) in axes.enumerate().chain(reduce.enumerate()) {
                        if let Some(n) = a.bound() {
                            out.push_str(&format!(" {kind}{k}<{}", rename.mutate_expr(n)));
                        }
                        if let Some(b) = a.block() {
                            let valid = rename.mutate_expr(&b.valid);
                            out.push_str(&format!(" {kind}{k}%{}<{valid}", b.radix));
                        }
                    }
                    out.push('\n');
                }
            }
        }
        out
    }

    /// The workload key: `["<md5 of the canonical DAG>", [input shapes…], [output shapes…]]`,
    /// equal for equal DAGs wherever they occur.
    pub fn workload_key(&self) -> String {
        let digest = Md5::digest(self.canonical_text().as_bytes());
        let hash: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        let mut parts = vec![serde_json::Value::String(hash)];
        for t in self.inputs().iter().chain(self.outputs.iter()) {
            parts.push(serde_json::json!(t.shape()));
        }
        serde_json::Value::Array(parts)
            .to_string()
            .replace(",", ", ")
    }
}

fn body_text(b: &ComputeBody) -> String {
    match b {
        ComputeBody::Expr(e) => e.to_string(),
        ComputeBody::Reduce(r) => {
            let mut s = format!("{} {}", r.op.update_symbol(), r.source);
            if let Some(i) = &r.init {
                s.push_str(&format!(" init {i}"));
            }
            if let Some(c) = &r.condition {
                s.push_str(&format!(" if {c}"));
            }
            s
        }
    }
}

#[derive(Default)]
struct Canon {
    vars: HashMap<Var, Expr>,
    bufs: HashMap<Buffer, Buffer>,
}

impl ExprMutator for Canon {
    fn mutate_expr(&mut self, e: &Expr) -> Expr {
        if let ExprNode::Var(v) = e.node() {
            if let Some(r) = self.vars.get(v) {
                return r.clone();
            }
        }
        mutate_expr_children(self, e)
    }
    fn mutate_buffer(&mut self, b: &Buffer) -> Buffer {
        self.bufs.get(b).cloned().unwrap_or_else(|| b.clone())
    }
}

/// Topological order as TVM's auto-scheduler computes it: a depth-first walk from the
/// outputs gives each operation a priority (later discovery = higher), and Kahn's
/// algorithm always takes the ready operation of highest priority.
fn topo_sort(outputs: &[Tensor]) -> Vec<Tensor> {
    let mut priority: HashMap<Tensor, usize> = HashMap::new();
    let mut degree: HashMap<Tensor, usize> = HashMap::new();
    let mut consumers: HashMap<Tensor, Vec<Tensor>> = HashMap::new();
    let mut stack: Vec<Tensor> = outputs.to_vec();
    let mut order = Vec::new();
    while let Some(t) = stack.pop() {
        if priority.contains_key(&t) {
            continue;
        }
        priority.insert(t.clone(), priority.len());
        order.push(t.clone());
        degree.insert(t.clone(), t.inputs().len());
        for i in t.inputs() {
            consumers.entry(i.clone()).or_default().push(t.clone());
            stack.push(i.clone());
        }
    }
    let mut heap: BinaryHeap<(usize, usize)> = BinaryHeap::new();
    for (i, t) in order.iter().enumerate() {
        if degree[t] == 0 {
            heap.push((priority[t], i));
        }
    }
    let mut ops = Vec::with_capacity(order.len());
    while let Some((_, i)) = heap.pop() {
        let t = order[i].clone();
        for c in consumers.get(&t).cloned().unwrap_or_default() {
            let d = degree.get_mut(&c).unwrap();
            *d -= 1;
            if *d == 0 {
                let ci = order.iter().position(|o| *o == c).unwrap();
                heap.push((priority[&c], ci));
            }
        }
        ops.push(t);
    }
    ops
}

/// TVM's FLOP estimate of one operation.
fn flop_count(t: &Tensor) -> f64 {
    let OpKind::Compute { axis, body } = t.kind() else {
        return 0.0;
    };
    let elems: f64 = axis
        .iter()
        .map(|a| a.extent().unwrap_or(1) as f64)
        .product();
    let code = t.dtype().code;
    let per_elem = match body {
        ComputeBody::Expr(e) => expr_flops(e, code),
        ComputeBody::Reduce(r) => {
            let iters: f64 = r
                .axis
                .iter()
                .map(|a| a.extent().unwrap_or(1) as f64)
                .product();
            iters * (1.0 + expr_flops(&r.source, code))
        }
    };
    elems * per_elem
}

fn expr_flops(e: &Expr, code: TypeCode) -> f64 {
    let own = |t: tessera_ir::DataType| if t.code == code { 1.0 } else { 0.0 };
    match e.node() {
        ExprNode::Var(_)
        | ExprNode::IntImm { .. }
        | ExprNode::FloatImm { .. }
        | ExprNode::Load { .. } => 0.0,
        ExprNode::Binary { a, b, .. }
        | ExprNode::Cmp { a, b, .. }
        | ExprNode::And(a, b)
        | ExprNode::Or(a, b) => own(e.dtype()) + expr_flops(a, code) + expr_flops(b, code),
        ExprNode::Not(a) => own(e.dtype()) + expr_flops(a, code),
        ExprNode::Cast { value, .. } => expr_flops(value, code),
        ExprNode::Select {
            cond,
            then_value,
            else_value,
        } => {
            expr_flops(cond, code) + expr_flops(then_value, code).max(expr_flops(else_value, code))
        }
        ExprNode::Call { args, .. } => args.iter().map(|a| expr_flops(a, code)).sum(),
        ExprNode::Ramp { base, stride, .. } => expr_flops(base, code) + expr_flops(stride, code),
        ExprNode::Broadcast { value, .. } => expr_flops(value, code),
    }
}

impl fmt::Display for ComputeDag {
    /// Prints exactly as TVM's `ComputeDAG` prints.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for t in &self.ops {
            match t.kind() {
                OpKind::Placeholder => {
                    let dims: Vec<String> = t.shape().iter().map(|d| d.to_string()).collect();
                    writeln!(f, "{} = PLACEHOLDER [{}]", t.name(), dims.join(", "))?
                }
                OpKind::Compute { axis, body } => {
                    let names: Vec<&str> = axis.iter().map(|a| a.name()).collect();
                    write!(f, "{}({})", t.name(), names.join(", "))?;
                    match body {
                        ComputeBody::Expr(e) => write!(f, " = {e}")?,
                        ComputeBody::Reduce(r) => {
                            write!(f, " {} {}", r.op.update_symbol(), r.source)?
                        }
                    }
                    // runtime extents (TVM has none to print)
                    for a in axis.iter().chain(t.reduce_axis()) {
                        if let Some(n) = a.bound() {
                            write!(f, " ({} < {n})", a.name())?;
                        }
                        if let Some(b) = a.block() {
                            write!(f, " ({} % {} < {})", a.name(), b.radix, b.valid)?;
                        }
                    }
                    writeln!(f)?
                }
            }
        }
        Ok(())
    }
}
