//! Quantization to int8 as TVM's `relay.quantize` realizes it for VTA: the operators
//! between two named operators (TVM's `start_name` / `stop_name`, by default the first
//! `max_pool2d` and the `global_avg_pool2d` after it) compute on int8 activations at one
//! global scale (`global_scale / 128`, 8.0 / 128 = 1/16 by default); the edges stay
//! float (a `quantize` where the region starts, a `dequantize` where it ends), and the
//! network's first convolution is never quantized (TVM's `skip_conv_layers=[0]`).
//!
//! Inside the region, with power-of-two scales so that every rescaling is a shift:
//! - `conv2d` [+ bias] [+ relu]: int8 weights at a per-tensor scale `s_w` (the power of
//!   two that fits the largest weight in 127), `conv2d_int8` accumulating in int32 at
//!   `s_a·s_w`, the bias rounded to int32 at that scale, then requantized to `s_a`: add
//!   half of the step, shift right, clip to [0 or −127, 127], cast to int8 — exactly the
//!   epilogue VTA's ALU runs — and fusion stops there (TVM's `stop_fusion`), so that the
//!   convolution's group is exactly what VTA computes;
//! - a residual `add` [+ relu]: both int8 operands widened to int32, added, clipped, cast;
//! - `multiply` / `add` by a per-channel constant (a batch norm on activations): the
//!   constant at its own power-of-two scale in int32, then requantized;
//! - `relu`: a clip to [0, 127];
//! - anything else computes in float between a `dequantize` and a `quantize`.

use crate::error::GraphError;
use crate::ir::{Binary, Graph, Op, Unary};
use petgraph::stable_graph::NodeIndex;
use std::collections::{HashMap, HashSet};
use tessera_ir::DataType;
use tessera_runtime::NDArray;

/// What to quantize and how.
#[derive(Clone, Debug, PartialEq)]
pub struct QConfig {
    /// TVM's `global_scale`: activations are int8 at `global_scale / 128`.
    pub global_scale: f64,
    /// The operator (by name, e.g. `max_pool2d`) after which the int8 region starts.
    pub start: String,
    /// The operator before which it ends.
    pub stop: String,
    /// Keep the network's first convolution in float (TVM's `skip_conv_layers=[0]`).
    pub skip_first_conv: bool,
}

impl Default for QConfig {
    fn default() -> Self {
        QConfig {
            global_scale: 8.0,
            start: "max_pool2d".into(),
            stop: "global_avg_pool2d".into(),
            skip_first_conv: true,
        }
    }
}

/// The nodes strictly between the first operator named `start` and the first operator
/// named `stop` after it; every input of the region comes from `start` or a constant,
/// and only `stop` reads the region's result.
#[derive(Clone, Debug)]
pub struct Region {
    pub start: NodeIndex,
    pub stop: NodeIndex,
    pub nodes: HashSet<NodeIndex>,
}

/// The region between `start` and `stop` (see [`Region`]).
pub fn region(graph: &Graph, start: &str, stop: &str) -> Result<Region, GraphError> {
    let order = graph.topo_order();
    let bad =
        |m: String| GraphError::Invalid(format!("the region from `{start}` to `{stop}`: {m}"));
    let at = order
        .iter()
        .position(|&n| graph.node(n).op.name() == start)
        .ok_or_else(|| bad(format!("the network has no `{start}`")))?;
    let s = order[at];
    let e = *order[at..]
        .iter()
        .find(|&&n| graph.node(n).op.name() == stop)
        .ok_or_else(|| bad(format!("no `{stop}` follows `{start}`")))?;
    let mut forward = HashSet::new();
    let mut stack = vec![s];
    while let Some(n) = stack.pop() {
        for u in graph.users(n) {
            if forward.insert(u) {
                stack.push(u);
            }
        }
    }
    let mut backward = HashSet::new();
    let mut stack = vec![e];
    while let Some(n) = stack.pop() {
        for a in graph.args(n) {
            if backward.insert(a) {
                stack.push(a);
            }
        }
    }
    let nodes: HashSet<NodeIndex> = forward
        .intersection(&backward)
        .copied()
        .filter(|n| graph.node(*n).op.pattern().is_some())
        .collect();
    for &n in &nodes {
        for a in graph.args(n) {
            let inside = a == s || nodes.contains(&a) || graph.constant_value(a).is_some();
            if !inside {
                return Err(bad(format!(
                    "`{}` reads `{}`, which is outside it",
                    graph.node(n).name,
                    graph.node(a).name
                )));
            }
        }
        for u in graph.users(n) {
            if u != e && !nodes.contains(&u) {
                return Err(bad(format!(
                    "`{}` is read by `{}`, which is outside it",
                    graph.node(n).name,
                    graph.node(u).name
                )));
            }
        }
    }
    Ok(Region {
        start: s,
        stop: e,
        nodes,
    })
}

/// The power of two `2^k` that brings the largest magnitude of `v` within 127 (1 for an
/// all-zero tensor), as `k`: values are quantized as `round(v · 2^−k)`... with `k` ≤ 0
/// for values below 1.
fn pow2_exponent(v: &[f32]) -> i32 {
    let m = v.iter().fold(0f32, |a, x| a.max(x.abs())) as f64;
    if m == 0.0 {
        return 0;
    }
    (m / 127.0).log2().ceil() as i32
}

fn f32s(v: &NDArray) -> Result<Vec<f32>, GraphError> {
    Ok(v.as_slice::<f32>()?.to_vec())
}

/// Rewrites `graph` with its region quantized (see the module's documentation).
pub fn quantize(graph: &Graph, cfg: &QConfig) -> Result<Graph, GraphError> {
    if !(cfg.global_scale.is_finite() && cfg.global_scale > 0.0) {
        return Err(GraphError::Invalid(format!(
            "quantize: global_scale {} is not a positive number",
            cfg.global_scale
        )));
    }
    let r = region(graph, &cfg.start, &cfg.stop)?;
    let first_conv = graph
        .topo_order()
        .into_iter()
        .find(|&n| matches!(graph.node(n).op, Op::Conv2d { .. }));
    let mut q = Quantizer {
        src: graph,
        out: Graph::new_like(graph),
        map: HashMap::new(),
        absorbed: HashMap::new(),
        act_scale: cfg.global_scale / 128.0,
        skip: if cfg.skip_first_conv {
            first_conv
        } else {
            None
        },
        region: r.clone(),
    };
    for n in graph.topo_order() {
        q.node(n)?;
    }
    let outs = graph.outputs().iter().map(|o| q.map[o]).collect();
    q.out.set_outputs(outs);
    Ok(q.out)
}

struct Quantizer<'a> {
    src: &'a Graph,
    out: Graph,
    /// Old node → its new value (int8 at the activation scale inside the region).
    map: HashMap<NodeIndex, NodeIndex>,
    /// Nodes folded into an earlier node's rewrite → the node that stands for them.
    absorbed: HashMap<NodeIndex, NodeIndex>,
    act_scale: f64,
    skip: Option<NodeIndex>,
    region: Region,
}

impl Quantizer<'_> {
    fn name(&self, n: NodeIndex) -> String {
        self.src.node(n).name.clone()
    }

    fn node(&mut self, n: NodeIndex) -> Result<(), GraphError> {
        if let Some(&by) = self.absorbed.get(&n) {
            self.map.insert(n, self.map[&by]);
            return Ok(());
        }
        let node = self.src.node(n);
        let args: Vec<NodeIndex> = self.src.args(n);
        let new = match &node.op {
            Op::Input => self.out.input(&node.name, node.ty.clone()),
            Op::Constant(v) => self.out.constant(&node.name, (**v).clone()),
            _ if self.region.nodes.contains(&n) => self.int8(n)?,
            _ => {
                let ins: Vec<NodeIndex> = args.iter().map(|a| self.map[a]).collect();
                let ins = if n == self.region.stop {
                    let deq = Op::Dequantize {
                        scale: self.act_scale,
                    };
                    let name = format!("{}_dequantize", node.name);
                    vec![self.out.op(&name, deq, &ins)?]
                } else {
                    ins
                };
                let v = self.out.op(&node.name, node.op.clone(), &ins)?;
                if n == self.region.start {
                    let op = Op::Quantize {
                        scale: self.act_scale,
                    };
                    self.out.op(&format!("{}_quantize", node.name), op, &[v])?
                } else {
                    v
                }
            }
        };
        self.map.insert(n, new);
        Ok(())
    }

    /// The single user of `n` when it is `pred`'s kind of node.
    fn sole_user(&self, n: NodeIndex, pred: impl Fn(&Op) -> bool) -> Option<NodeIndex> {
        let users = self.src.users(n);
        match users[..] {
            [u] if self.region.nodes.contains(&u) && pred(&self.src.node(u).op) => Some(u),
            _ => None,
        }
    }

    /// A following relu folds into the clip: its lower bound.
    fn relu_after(&mut self, n: NodeIndex, stands_for: NodeIndex) -> (NodeIndex, i64) {
        match self.sole_user(n, |op| matches!(op, Op::Unary(Unary::Relu))) {
            Some(r) => {
                self.absorbed.insert(r, stands_for);
                (r, 0)
            }
            None => (n, -127),
        }
    }

    /// The int8 rewrite of region node `n`.
    fn int8(&mut self, n: NodeIndex) -> Result<NodeIndex, GraphError> {
        let node = self.src.node(n).clone();
        let args = self.src.args(n);
        let constant = |a: NodeIndex| self.src.constant_value(a).cloned();
        match &node.op {
            Op::Conv2d { attrs, layout }
                if Some(n) != self.skip
                    && *layout == crate::ir::Layout::Nchw
                    && attrs.groups == 1
                    && attrs.dilation == (1, 1)
                    && attrs.padding[0] == attrs.padding[2]
                    && attrs.padding[1] == attrs.padding[3]
                    && constant(args[1]).is_some() =>
            {
                let w = constant(args[1]).expect("checked");
                let padding = (attrs.padding[0], attrs.padding[1]);
                self.conv(n, args[0], &w, attrs.stride, padding)
            }
            Op::Binary(Binary::Add)
                if args
                    .iter()
                    .all(|a| self.region.nodes.contains(a) || *a == self.region.start) =>
            {
                self.residual_add(n, args[0], args[1])
            }
            Op::Binary(b @ (Binary::Add | Binary::Mul)) => {
                let (x, c) = match (constant(args[0]), constant(args[1])) {
                    (None, Some(c)) => (args[0], c),
                    (Some(c), None) => (args[1], c),
                    _ => return self.in_float(n),
                };
                self.with_constant(n, *b, x, &c)
            }
            Op::Unary(Unary::Relu) => {
                let x = self.map[&args[0]];
                self.out.op(
                    &node.name,
                    Op::Clip {
                        min: 0.0,
                        max: 127.0,
                    },
                    &[x],
                )
            }
            _ => self.in_float(n),
        }
    }

    /// `n` in float between a dequantize and a quantize.
    fn in_float(&mut self, n: NodeIndex) -> Result<NodeIndex, GraphError> {
        let node = self.src.node(n).clone();
        let mut ins = Vec::new();
        for a in self.src.args(n) {
            let v = self.map[&a];
            ins.push(if self.src.constant_value(a).is_some() {
                v
            } else {
                let name = format!("{}_dequantize", self.src.node(a).name);
                self.out.op(
                    &name,
                    Op::Dequantize {
                        scale: self.act_scale,
                    },
                    &[v],
                )?
            });
        }
        let f = self
            .out
            .op(&format!("{}_float", node.name), node.op.clone(), &ins)?;
        let op = Op::Quantize {
            scale: self.act_scale,
        };
        self.out.op(&node.name, op, &[f])
    }

    /// An int32 constant of `values` shaped `shape`.
    fn int32_constant(
        &mut self,
        name: &str,
        shape: &[usize],
        values: &[i32],
    ) -> Result<NodeIndex, GraphError> {
        Ok(self.out.constant(name, NDArray::from_slice(shape, values)?))
    }

    /// `x` (int32 at `2^−k` times the activation scale) back to int8 at the activation
    /// scale: shift right by `k` rounding half up (or multiply by `2^−k`), clip to
    /// `[lo, 127]`, cast.
    fn requantize(
        &mut self,
        name: &str,
        x: NodeIndex,
        k: i32,
        lo: i64,
    ) -> Result<NodeIndex, GraphError> {
        let mut v = x;
        if k > 0 {
            let shift = Op::RightShift {
                bits: k as i64,
                round: true,
            };
            v = self.out.op(&format!("{name}_shift"), shift, &[v])?;
        } else if k < 0 {
            let m = self.int32_constant(&format!("{name}_scale"), &[1], &[1 << (-k).min(30)])?;
            v = self.out.op(
                &format!("{name}_mul_scale"),
                Op::Binary(Binary::Mul),
                &[v, m],
            )?;
        }
        let clip = Op::Clip {
            min: lo as f64,
            max: 127.0,
        };
        v = self.out.op(&format!("{name}_clip"), clip, &[v])?;
        self.out.op(
            name,
            Op::Cast {
                dtype: DataType::int(8),
            },
            &[v],
        )
    }

    fn widen(&mut self, name: &str, x: NodeIndex) -> Result<NodeIndex, GraphError> {
        self.out.op(
            name,
            Op::Cast {
                dtype: DataType::int32(),
            },
            &[x],
        )
    }

    /// `conv2d` [+ bias] [+ relu] as `conv2d_int8` and a requantizing epilogue.
    fn conv(
        &mut self,
        n: NodeIndex,
        data: NodeIndex,
        w: &NDArray,
        stride: (i64, i64),
        padding: (i64, i64),
    ) -> Result<NodeIndex, GraphError> {
        let name = self.name(n);
        let wv = f32s(w)?;
        let e = pow2_exponent(&wv);
        let ws = 2f64.powi(e);
        let wq: Vec<i8> = wv
            .iter()
            .map(|v| (*v as f64 / ws).round().clamp(-127.0, 127.0) as i8)
            .collect();
        let wn = self.out.constant(
            &format!("{name}_weight_int8"),
            NDArray::from_slice(w.shape(), &wq)?,
        );
        let conv = Op::Conv2dInt8 { stride, padding };
        let mut v = self.out.op(&name, conv, &[self.map[&data], wn])?;
        let mut last = n;
        let bias = self.sole_user(n, |op| {
            matches!(op, Op::BiasAdd { axis: 1 } | Op::Binary(Binary::Add))
        });
        if let Some(b) = bias {
            let bargs = self.src.args(b);
            let c = bargs
                .iter()
                .find(|a| **a != n)
                .and_then(|a| self.src.constant_value(*a).cloned());
            let channels = w.shape()[0];
            if let Some(c) = c.filter(|c| c.len() == channels) {
                let step = self.act_scale * ws;
                let bq: Vec<i32> = f32s(&c)?
                    .iter()
                    .map(|x| (*x as f64 / step).round() as i32)
                    .collect();
                let bn =
                    self.int32_constant(&format!("{name}_bias_int32"), &[1, channels, 1, 1], &bq)?;
                v = self
                    .out
                    .op(&format!("{name}_bias"), Op::Binary(Binary::Add), &[v, bn])?;
                self.absorbed.insert(b, n);
                last = b;
            }
        }
        let (_, lo) = self.relu_after(last, n);
        // int32 at s_a·2^e to int8 at s_a: shift right by −e; the group ends there
        let q = self.requantize(&format!("{name}_requantize"), v, -e, lo)?;
        self.out
            .op(&format!("{name}_stop_fusion"), Op::StopFusion, &[q])
    }

    /// The sum of two int8 activations, clipped (and a following relu folded in).
    fn residual_add(
        &mut self,
        n: NodeIndex,
        a: NodeIndex,
        b: NodeIndex,
    ) -> Result<NodeIndex, GraphError> {
        let name = self.name(n);
        let x = self.widen(&format!("{name}_lhs_int32"), self.map[&a])?;
        let y = self.widen(&format!("{name}_rhs_int32"), self.map[&b])?;
        let s = self.out.op(&name, Op::Binary(Binary::Add), &[x, y])?;
        let (_, lo) = self.relu_after(n, n);
        self.requantize(&format!("{name}_requantize"), s, 0, lo)
    }

    /// An activation multiplied by or added to a constant (a batch norm's scale and
    /// shift), requantized (a following relu folded in).
    fn with_constant(
        &mut self,
        n: NodeIndex,
        op: Binary,
        x: NodeIndex,
        c: &NDArray,
    ) -> Result<NodeIndex, GraphError> {
        let name = self.name(n);
        let cv = f32s(c)?;
        let shape = c.shape().to_vec();
        let xi = self.widen(&format!("{name}_int32"), self.map[&x])?;
        let (cq, k): (Vec<i32>, i32) = match op {
            Binary::Mul => {
                let e = pow2_exponent(&cv);
                let s = 2f64.powi(e);
                (
                    cv.iter()
                        .map(|v| (*v as f64 / s).round().clamp(-127.0, 127.0) as i32)
                        .collect(),
                    -e,
                )
            }
            _ => (
                cv.iter()
                    .map(|v| (*v as f64 / self.act_scale).round() as i32)
                    .collect(),
                0,
            ),
        };
        let cn = self.int32_constant(&format!("{name}_int32_constant"), &shape, &cq)?;
        let v = self.out.op(&name, Op::Binary(op), &[xi, cn])?;
        let (_, lo) = self.relu_after(n, n);
        self.requantize(&format!("{name}_requantize"), v, k, lo)
    }
}
