//! Graph packing for VTA (TVM's `graph_pack`): the values of a region (by default the
//! quantized one, between the first `max_pool2d` and the `global_avg_pool2d` after it)
//! move to VTA's blocked layout — activations NCHW{bn}n{bc}c (`[N/bn, C/bc, H, W, bn,
//! bc]`), int8 convolution weights OIHW{bc}o{bc}i (`[O/bc, I/bc, KH, KW, bc, bc]`),
//! per-channel constants `[1, C/bc, 1, 1, 1, bc]` — with one layout transform where the
//! region starts and one where it ends. Weights are packed here, at build time.
//! Elementwise operators take the packed values as they are; an operator with a layout
//! of its own computes on an unpacked copy and its result is packed again.

use petgraph::stable_graph::NodeIndex;
use std::collections::HashMap;
use tessera_graph::quantize::region;
use tessera_graph::{Graph, GraphError, Op};
use tessera_runtime::NDArray;

/// The blocks and the region's boundaries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackConfig {
    /// Batch block (VTA's `BATCH`).
    pub bn: i64,
    /// Channel block (VTA's `BLOCK_IN` = `BLOCK_OUT`).
    pub bc: i64,
    pub start: String,
    pub stop: String,
}

impl Default for PackConfig {
    fn default() -> Self {
        PackConfig {
            bn: 1,
            bc: 16,
            start: "max_pool2d".into(),
            stop: "global_avg_pool2d".into(),
        }
    }
}

impl PackConfig {
    fn data_layout(&self) -> String {
        format!("NCHW{}n{}c", self.bn, self.bc)
    }
}

/// `w` `[O, I, KH, KW]` as `[O/b, I/b, KH, KW, b, b]` (any element type).
pub fn pack_weight(w: &NDArray, b: usize) -> Result<NDArray, GraphError> {
    let s = w.shape();
    let (o, i, kh, kw) = (s[0], s[1], s[2], s[3]);
    let es = w.dtype().bytes();
    let mut out = NDArray::zeros(w.dtype(), &[o / b, i / b, kh, kw, b, b])?;
    let (src, dst) = (w.as_bytes(), out.as_bytes_mut());
    for oo in 0..o {
        for ii in 0..i {
            for y in 0..kh {
                for x in 0..kw {
                    let from = ((oo * i + ii) * kh + y) * kw + x;
                    let to = ((((oo / b) * (i / b) + ii / b) * kh + y) * kw + x) * b * b
                        + (oo % b) * b
                        + ii % b;
                    dst[to * es..(to + 1) * es].copy_from_slice(&src[from * es..(from + 1) * es]);
                }
            }
        }
    }
    Ok(out)
}

/// Rewrites `graph` with its region packed (see the module's documentation).
pub fn pack(graph: &Graph, cfg: &PackConfig) -> Result<Graph, GraphError> {
    if cfg.bn <= 0 || cfg.bc <= 0 {
        return Err(GraphError::Invalid(format!(
            "pack: blocks must be positive, not {}n{}c",
            cfg.bn, cfg.bc
        )));
    }
    let r = region(graph, &cfg.start, &cfg.stop)?;
    let mut p = Packer {
        src: graph,
        out: Graph::new_like(graph),
        map: HashMap::new(),
        cfg,
    };
    for n in graph.topo_order() {
        let node = graph.node(n).clone();
        let args = graph.args(n);
        let new = match &node.op {
            Op::Input => p.out.input(&node.name, node.ty.clone()),
            Op::Constant(v) => p.out.constant(&node.name, (**v).clone()),
            _ if r.nodes.contains(&n) => p.packed_node(n)?,
            _ => {
                let mut ins: Vec<NodeIndex> = args.iter().map(|a| p.map[a]).collect();
                if n == r.stop {
                    ins[0] = p.transform(&format!("{}_unpack", node.name), ins[0], false)?;
                }
                let v = p.out.op(&node.name, node.op.clone(), &ins)?;
                if n == r.start {
                    p.check_packable(n)?;
                    p.transform(&format!("{}_pack", node.name), v, true)?
                } else {
                    v
                }
            }
        };
        p.map.insert(n, new);
    }
    let outs = graph.outputs().iter().map(|o| p.map[o]).collect();
    p.out.set_outputs(outs);
    let mut out = p.out;
    tessera_graph::passes::dead_code_elimination(&mut out);
    Ok(out)
}

struct Packer<'a> {
    src: &'a Graph,
    out: Graph,
    /// Old node → new node (packed inside the region).
    map: HashMap<NodeIndex, NodeIndex>,
    cfg: &'a PackConfig,
}

impl Packer<'_> {
    fn transform(
        &mut self,
        name: &str,
        v: NodeIndex,
        to_packed: bool,
    ) -> Result<NodeIndex, GraphError> {
        let (src, dst) = if to_packed {
            ("NCHW".to_string(), self.cfg.data_layout())
        } else {
            (self.cfg.data_layout(), "NCHW".to_string())
        };
        self.out.op(name, Op::LayoutTransform { src, dst }, &[v])
    }

    /// A 4-D NCHW value whose batch and channels divide by the blocks.
    fn check_packable(&self, n: NodeIndex) -> Result<(), GraphError> {
        let node = self.src.node(n);
        let s = &node.ty.shape;
        if s.len() != 4 || s[0] % self.cfg.bn != 0 || s[1] % self.cfg.bc != 0 {
            return Err(GraphError::Invalid(format!(
                "pack: `{}` ({}) has shape {s:?}, not NCHW with a batch divisible by {} and \
                 channels by {}",
                node.name,
                node.op.name(),
                self.cfg.bn,
                self.cfg.bc
            )));
        }
        Ok(())
    }

    /// A constant operand of an elementwise operator in the region, packed: a scalar
    /// stays as it is, a per-channel `[1, C, 1, 1]` becomes `[1, C/bc, 1, 1, 1, bc]`.
    fn constant(&mut self, n: NodeIndex, user: &str) -> Result<NodeIndex, GraphError> {
        let v = self.src.constant_value(n).expect("a constant").clone();
        let s = v.shape().to_vec();
        let bc = self.cfg.bc as usize;
        match s[..] {
            [] | [1] => Ok(self.map[&n]),
            [1, c, 1, 1] if c % bc == 0 => {
                let name = format!("{}_packed", self.src.node(n).name);
                let mut packed = NDArray::zeros(v.dtype(), &[1, c / bc, 1, 1, 1, bc])?;
                packed.as_bytes_mut().copy_from_slice(v.as_bytes());
                Ok(self.out.constant(&name, packed))
            }
            _ => Err(GraphError::Invalid(format!(
                "pack: `{user}` takes the constant `{}` of shape {s:?}; only scalars and \
                 per-channel [1, C, 1, 1] constants are packed",
                self.src.node(n).name
            ))),
        }
    }

    /// The packed rewrite of region node `n`.
    fn packed_node(&mut self, n: NodeIndex) -> Result<NodeIndex, GraphError> {
        let node = self.src.node(n).clone();
        let args = self.src.args(n);
        match &node.op {
            Op::Conv2dInt8 { .. } => {
                self.check_packable(n)?;
                let w = self.src.constant_value(args[1]).ok_or_else(|| {
                    GraphError::Invalid(format!("pack: `{}` has no constant weight", node.name))
                })?;
                let (o, i) = (w.shape()[0] as i64, w.shape()[1] as i64);
                if o % self.cfg.bc != 0 || i % self.cfg.bc != 0 {
                    return Err(GraphError::Invalid(format!(
                        "pack: `{}` has {i} input and {o} output channels, not multiples of {}",
                        node.name, self.cfg.bc
                    )));
                }
                let packed = pack_weight(w, self.cfg.bc as usize)?;
                let wn = self
                    .out
                    .constant(&format!("{}_packed", self.src.node(args[1]).name), packed);
                self.out
                    .op(&node.name, node.op.clone(), &[self.map[&args[0]], wn])
            }
            op if op.pattern() == Some(tessera_graph::Pattern::ElemWise)
                || matches!(op, Op::StopFusion) =>
            {
                let mut ins = Vec::new();
                for &a in &args {
                    ins.push(if self.src.constant_value(a).is_some() {
                        self.constant(a, &node.name)?
                    } else {
                        self.map[&a]
                    });
                }
                self.out.op(&node.name, node.op.clone(), &ins)
            }
            _ => {
                let mut ins = Vec::new();
                for &a in &args {
                    let v = self.map[&a];
                    ins.push(if self.src.constant_value(a).is_some() {
                        v
                    } else {
                        let name = format!("{}_unpacked", self.src.node(a).name);
                        self.transform(&name, v, false)?
                    });
                }
                let v = self
                    .out
                    .op(&format!("{}_nchw", node.name), node.op.clone(), &ins)?;
                self.check_packable(n)?;
                self.transform(&node.name, v, true)
            }
        }
    }
}

/// The preparation of a float network for an int8 accelerator with VTA's blocked
/// layout: [`tessera_graph::quantize::quantize`] then [`pack`], over the same region.
pub fn quantize_and_pack(
    graph: &Graph,
    q: &tessera_graph::quantize::QConfig,
    p: &PackConfig,
) -> Result<Graph, GraphError> {
    pack(&tessera_graph::quantize::quantize(graph, q)?, p)
}
