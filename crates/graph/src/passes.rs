//! Graph passes: constant folding, batch-norm folding, dead-code elimination, layout
//! conversion (NCHW → NHWC, the layout the auto-scheduler prefers) and the packing of
//! NHWC convolution weights by output-channel blocks (a CPU build's choice).

use crate::error::GraphError;
use crate::ir::{Binary, Graph, Layout, Op, Pattern};
use crate::reference::{eval_op, permute, reshape};
use petgraph::stable_graph::NodeIndex;
use std::collections::{HashMap, HashSet};
use tessera_runtime::NDArray;
use tessera_te::ops::Conv2dAttrs;

/// The standard pipeline before fusion: fold batch norms into convolutions, fold
/// constants, move elementwise chains inside the unit-axis reshapes around them
/// ([`crate::unit_reshapes`]), convert the layout if asked, fold again (the converted weights), split
/// the convolutions whose taps mostly read padding ([`crate::dead_taps`]) and fold
/// their cropped weights, remove what is dead.
pub fn optimize(graph: &mut Graph, layout: Option<Layout>) -> Result<(), GraphError> {
    fold_batch_norm(graph)?;
    fold_constants(graph)?;
    // before the layout conversion, which keeps 1-D convs' activations in NHWC once
    // they are on the 4-D value
    crate::unit_reshapes::elementwise_inside_unit_reshapes(graph)?;
    if let Some(Layout::Nhwc) = layout {
        *graph = convert_layout_nhwc(graph)?;
        fold_constants(graph)?;
    }
    // after the layout conversion, which would leave the slices in NCHW
    if crate::dead_taps::split_dead_taps(graph)? > 0 {
        fold_constants(graph)?;
    }
    dead_code_elimination(graph);
    Ok(())
}

/// Replaces every operator whose inputs are all constants by its value. Values folded
/// equal in one call (type, shape and bytes) are one constant: an operator repeated on
/// the same constant (an unrolled recurrence slicing its weights at every step) would
/// otherwise hold a copy per repetition.
pub fn fold_constants(graph: &mut Graph) -> Result<usize, GraphError> {
    use std::hash::{Hash, Hasher};
    let mut folded = 0;
    let mut seen: HashMap<u64, Vec<NodeIndex>> = HashMap::new();
    for n in graph.topo_order() {
        // a selection's count is the run's to tell, even on constants
        let op = &graph.node(n).op;
        if op.pattern().is_none() || graph.is_kept_broadcast(n) || matches!(op, Op::Select { .. }) {
            continue;
        }
        let args = graph.args(n);
        let values: Option<Vec<&NDArray>> = args
            .iter()
            .map(|&a| graph.constant_value(a).map(|v| &**v))
            .collect();
        let Some(values) = values else { continue };
        let v = eval_op(graph, n, &values)?;
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (v.dtype(), v.shape(), v.as_bytes()).hash(&mut h);
        let same = seen.entry(h.finish()).or_default();
        let earlier = same.iter().copied().find(|&e| {
            graph.constant_value(e).is_some_and(|u| {
                u.dtype() == v.dtype() && u.shape() == v.shape() && u.as_bytes() == v.as_bytes()
            })
        });
        let c = match earlier {
            Some(e) => e,
            None => {
                let name = graph.node(n).name.clone();
                let c = graph.constant(&name, v);
                same.push(c);
                c
            }
        };
        graph.replace_uses(n, c);
        graph.remove(n);
        folded += 1;
    }
    dead_code_elimination(graph);
    Ok(folded)
}

/// Removes the nodes no output depends on (the network's inputs stay).
pub fn dead_code_elimination(graph: &mut Graph) -> usize {
    let mut live: HashSet<NodeIndex> = HashSet::new();
    let mut stack: Vec<NodeIndex> = graph.outputs().to_vec();
    while let Some(n) = stack.pop() {
        if live.insert(n) {
            stack.extend(graph.args(n));
        }
    }
    let inputs: HashSet<NodeIndex> = graph.inputs().iter().copied().collect();
    let dead: Vec<NodeIndex> = graph
        .petgraph()
        .node_indices()
        .filter(|n| !live.contains(n) && !inputs.contains(n))
        .collect();
    for &n in &dead {
        graph.remove(n);
    }
    dead.len()
}

pub(crate) fn f32_values(v: &NDArray) -> Result<Vec<f32>, GraphError> {
    Ok(v.as_slice::<f32>()?.to_vec())
}

/// Folds `batch_norm(conv2d(x, W) [+ bias], γ, β, μ, σ²)` into `conv2d(x, W·s) + b'` with
/// `s = γ / sqrt(σ² + ε)` and `b' = (bias − μ)·s + β`, when the weights and statistics are
/// constants and the convolution has no other consumer; every other inference batch
/// norm becomes `x·s + (β − μ·s)` (a multiply and an add, which fuse with neighbours).
pub fn fold_batch_norm(graph: &mut Graph) -> Result<usize, GraphError> {
    let mut folded = 0;
    for n in graph.topo_order() {
        let Op::BatchNorm { epsilon, axis } = graph.node(n).op.clone() else {
            continue;
        };
        let args = graph.args(n);
        let params: Option<Vec<Vec<f32>>> = args[1..]
            .iter()
            .map(|&a| graph.constant_value(a).and_then(|v| f32_values(v).ok()))
            .collect();
        let Some(params) = params else { continue };
        let (gamma, beta, mean, var) = (&params[0], &params[1], &params[2], &params[3]);
        let c = gamma.len();
        if [beta.len(), mean.len(), var.len()].iter().any(|&l| l != c) {
            continue;
        }
        let scale: Vec<f32> = (0..c)
            .map(|i| gamma[i] / (var[i] + epsilon as f32).sqrt())
            .collect();
        let ty = graph.node(n).ty.clone();
        let rank = ty.shape.len() as i64;
        let ax = if axis < 0 { axis + rank } else { axis };
        let name = graph.node(n).name.clone();
        let x = args[0];

        // conv2d [+ bias_add] feeding the batch norm along the channels.
        let (conv, bias_node) = match &graph.node(x).op {
            Op::BiasAdd { .. } if graph.users(x).len() == 1 => {
                let a = graph.args(x);
                (a[0], graph.constant_value(a[1]).map(|_| a[1]))
            }
            _ => (x, None),
        };
        let conv_ok = match &graph.node(conv).op {
            Op::Conv2d { layout, .. } => {
                layout.channel_axis() == ax
                    && graph.users(conv).len() == 1
                    && graph.constant_value(graph.args(conv)[1]).is_some()
                    && (conv == x || bias_node.is_some())
            }
            _ => false,
        };
        let new_value = if conv_ok {
            let Op::Conv2d { layout, attrs } = graph.node(conv).op.clone() else {
                unreachable!()
            };
            let cargs = graph.args(conv);
            let w = graph.constant_value(cargs[1]).expect("checked").clone();
            let oc_axis = match layout {
                Layout::Nchw => 0,
                Layout::Nhwc => 3,
            };
            let ws: Vec<usize> = w.shape().to_vec();
            let mut wv = f32_values(&w)?;
            let inner: usize = ws[oc_axis + 1..].iter().product();
            for (i, v) in wv.iter_mut().enumerate() {
                *v *= scale[(i / inner) % ws[oc_axis]];
            }
            let bias: Vec<f32> = match bias_node {
                Some(b) => f32_values(graph.constant_value(b).expect("checked"))?,
                None => vec![0.0; c],
            };
            let nb: Vec<f32> = (0..c)
                .map(|i| (bias[i] - mean[i]) * scale[i] + beta[i])
                .collect();
            let wn = graph.constant(
                &format!("{name}_folded_weight"),
                NDArray::from_slice_f32(&ws, &wv)?,
            );
            let bn = graph.constant(
                &format!("{name}_folded_bias"),
                NDArray::from_slice_f32(&[c], &nb)?,
            );
            let conv2 = graph.op(
                &graph.node(conv).name.clone(),
                Op::Conv2d { attrs, layout },
                &[cargs[0], wn],
            )?;
            graph.op(&name, Op::BiasAdd { axis: ax }, &[conv2, bn])?
        } else {
            let shift: Vec<f32> = (0..c).map(|i| beta[i] - mean[i] * scale[i]).collect();
            let mut bshape = vec![1usize; rank as usize];
            bshape[ax as usize] = c;
            let s = graph.constant(
                &format!("{name}_scale"),
                NDArray::from_slice_f32(&bshape, &scale)?,
            );
            let b = graph.constant(
                &format!("{name}_shift"),
                NDArray::from_slice_f32(&bshape, &shift)?,
            );
            let m = graph.op(&format!("{name}_mul"), Op::Binary(Binary::Mul), &[x, s])?;
            graph.op(&name, Op::Binary(Binary::Add), &[m, b])?
        };
        graph.replace_uses(n, new_value);
        folded += 1;
    }
    dead_code_elimination(graph);
    Ok(folded)
}

/// Rewrites the NCHW parts of `graph` to NHWC: convolutions (weights OIHW → HWIO),
/// pooling, and the channel-wise and elementwise operators between them, with layout
/// transforms only where an operator that is not layout-aware (flatten, reshape, dense…)
/// or a network input or output needs NCHW.
pub fn convert_layout_nhwc(graph: &Graph) -> Result<Graph, GraphError> {
    let mut c = ToNhwc {
        graph,
        out: Graph::new_like(graph),
        map: HashMap::new(),
        to_nhwc: HashMap::new(),
        to_nchw: HashMap::new(),
    };
    for n in graph.topo_order() {
        let converted = c.node(n)?;
        c.map.insert(n, converted);
    }
    let mut outs = Vec::new();
    for &o in graph.outputs() {
        outs.push(c.nchw(o)?);
    }
    c.out.set_outputs(outs);
    Ok(c.out)
}

/// The state of [`convert_layout_nhwc`]: the graph being built, each old node's new one
/// and whether that holds the NHWC form of an NCHW value, and the layout transforms
/// made so far (one per value and direction).
struct ToNhwc<'a> {
    graph: &'a Graph,
    out: Graph,
    map: HashMap<NodeIndex, (NodeIndex, bool)>,
    to_nhwc: HashMap<NodeIndex, NodeIndex>,
    to_nchw: HashMap<NodeIndex, NodeIndex>,
}

impl ToNhwc<'_> {
    fn is4(&self, a: NodeIndex) -> bool {
        self.graph.node(a).ty.shape.len() == 4
    }

    /// Whether the new value of `a` is in NHWC form.
    fn flagged(&self, a: NodeIndex) -> bool {
        self.map[&a].1
    }

    /// The new value of old node `a` in NHWC form: as it is, a permuted constant, or
    /// through a layout transform.
    fn nhwc(&mut self, a: NodeIndex) -> Result<NodeIndex, GraphError> {
        let (v, f) = self.map[&a];
        if f {
            return Ok(v);
        }
        let name = format!("{}_nhwc", self.out.node(v).name);
        if let Some(c) = self
            .out
            .constant_value(v)
            .filter(|c| c.ndim() == 4)
            .cloned()
        {
            return Ok(self.out.constant(&name, permute(&c, &[0, 2, 3, 1])?));
        }
        if let Some(&t) = self.to_nhwc.get(&v) {
            return Ok(t);
        }
        let t = self.out.op(&name, transform("NCHW", "NHWC"), &[v])?;
        self.to_nhwc.insert(v, t);
        Ok(t)
    }

    /// The new value of old node `a` in its original form (NCHW where it was converted).
    fn nchw(&mut self, a: NodeIndex) -> Result<NodeIndex, GraphError> {
        let (v, f) = self.map[&a];
        if !f {
            return Ok(v);
        }
        if let Some(&t) = self.to_nchw.get(&v) {
            return Ok(t);
        }
        let name = format!("{}_nchw", self.out.node(v).name);
        let t = self.out.op(&name, transform("NHWC", "NCHW"), &[v])?;
        self.to_nchw.insert(v, t);
        Ok(t)
    }

    /// The new node of old node `n` and whether it is in NHWC form.
    fn node(&mut self, n: NodeIndex) -> Result<(NodeIndex, bool), GraphError> {
        let graph = self.graph;
        let node = graph.node(n);
        let args = graph.args(n);
        let name = node.name.as_str();
        let nhwc_op = |c: &mut Self, op: Op, ins: &[NodeIndex]| -> Result<_, GraphError> {
            Ok((c.out.op(name, op, ins)?, true))
        };
        match &node.op {
            Op::Input => Ok((self.out.input(name, node.ty.clone()), false)),
            Op::Constant(v) => Ok((self.out.constant(name, (**v).clone()), false)),
            Op::Conv2d {
                attrs,
                layout: Layout::Nchw,
            } => self.conv2d(n, *attrs),
            Op::Pool2d { kind, attrs } if attrs.layout == "NCHW" => {
                let d = self.nhwc(args[0])?;
                let op = Op::Pool2d {
                    kind: *kind,
                    attrs: attrs.clone().with_layout("NHWC"),
                };
                nhwc_op(self, op, &[d])
            }
            Op::GlobalPool2d {
                kind,
                layout: Layout::Nchw,
            } => {
                let d = self.nhwc(args[0])?;
                let op = Op::GlobalPool2d {
                    kind: *kind,
                    layout: Layout::Nhwc,
                };
                nhwc_op(self, op, &[d])
            }
            Op::BiasAdd { axis } | Op::BatchNorm { axis, .. }
                if self.is4(args[0]) && self.flagged(args[0]) && (*axis == 1 || *axis == -3) =>
            {
                let ins: Vec<NodeIndex> = args.iter().map(|a| self.map[a].0).collect();
                let op = match &node.op {
                    Op::BatchNorm { epsilon, .. } => Op::BatchNorm {
                        epsilon: *epsilon,
                        axis: 3,
                    },
                    _ => Op::BiasAdd { axis: 3 },
                };
                nhwc_op(self, op, &ins)
            }
            // normalized where it is: the statistics are per (n, c) in either layout
            Op::InstanceNorm {
                epsilon,
                channels_last: false,
            } if self.is4(args[0]) && self.flagged(args[0]) => {
                let ins: Vec<NodeIndex> = args.iter().map(|a| self.map[a].0).collect();
                let op = Op::InstanceNorm {
                    epsilon: *epsilon,
                    channels_last: true,
                };
                nhwc_op(self, op, &ins)
            }
            // any one-input elementwise operator (ReLU, clip, hard swish, hard sigmoid, a
            // cast, …) computes the same in either layout
            op if args.len() == 1
                && op.pattern() == Some(Pattern::ElemWise)
                && self.flagged(args[0]) =>
            {
                let d = self.map[&args[0]].0;
                nhwc_op(self, node.op.clone(), &[d])
            }
            Op::Binary(_) if self.binary_converts(n) => {
                let mut ins = Vec::new();
                for &a in &args {
                    ins.push(self.binary_operand(a)?);
                }
                nhwc_op(self, node.op.clone(), &ins)
            }
            Op::Concat { axis }
                if (*axis == 1 || *axis == -3)
                    && args.iter().all(|&a| self.is4(a))
                    && args.iter().any(|&a| self.flagged(a)) =>
            {
                let mut ins = Vec::new();
                for &a in &args {
                    ins.push(self.nhwc(a)?);
                }
                nhwc_op(self, Op::Concat { axis: 3 }, &ins)
            }
            // an NHWC value made NCHW: its NHWC form is the value itself; and an NCHW
            // value made NHWC where it is already converted is that value
            Op::LayoutTransform { src, dst }
                if src == "NHWC" && dst == "NCHW" && !self.flagged(args[0]) =>
            {
                Ok((self.map[&args[0]].0, true))
            }
            Op::LayoutTransform { src, dst }
                if src == "NCHW" && dst == "NHWC" && self.flagged(args[0]) =>
            {
                Ok((self.map[&args[0]].0, false))
            }
            Op::Pad {
                before,
                after,
                value,
            } if before.len() == 4 && self.flagged(args[0]) => {
                let p = |v: &Vec<i64>| vec![v[0], v[2], v[3], v[1]];
                let op = Op::Pad {
                    before: p(before),
                    after: p(after),
                    value: *value,
                };
                let d = self.map[&args[0]].0;
                nhwc_op(self, op, &[d])
            }
            _ => {
                let mut ins = Vec::new();
                for &a in &args {
                    ins.push(self.nchw(a)?);
                }
                Ok((self.out.op(name, node.op.clone(), &ins)?, false))
            }
        }
    }

    /// An NCHW conv2d as NHWC: its data converted, its weights OIHW → HWIO (permuted
    /// once when constant, else transposed in the graph).
    fn conv2d(
        &mut self,
        n: NodeIndex,
        attrs: Conv2dAttrs,
    ) -> Result<(NodeIndex, bool), GraphError> {
        let node = self.graph.node(n);
        let args = self.graph.args(n);
        let d = self.nhwc(args[0])?;
        let (wv, _) = self.map[&args[1]];
        let w = match self.out.constant_value(wv).cloned() {
            Some(c) => {
                let name = format!("{}_hwio", self.out.node(wv).name);
                self.out.constant(&name, permute(&c, &[2, 3, 1, 0])?)
            }
            None => self.out.op(
                &format!("{}_hwio", node.name),
                Op::Transpose {
                    axes: vec![2, 3, 1, 0],
                },
                &[wv],
            )?,
        };
        let op = Op::Conv2d {
            attrs,
            layout: Layout::Nhwc,
        };
        Ok((self.out.op(&node.name, op, &[d, w])?, true))
    }

    /// Whether binary operator `n` is computed in NHWC: rank 4, an NHWC operand, and the
    /// others convertible (NHWC, one element, a constant, or rank 4).
    fn binary_converts(&self, n: NodeIndex) -> bool {
        let graph = self.graph;
        let args = graph.args(n);
        graph.node(n).ty.shape.len() == 4
            && args.iter().any(|&a| self.flagged(a))
            && args.iter().all(|&a| {
                self.flagged(a)
                    || graph.node(a).ty.numel() == 1
                    || graph.constant_value(a).is_some()
                    || self.is4(a)
            })
    }

    /// An operand of a binary operator computed in NHWC: a constant of lower rank is
    /// right-aligned to rank 4 (numpy broadcasting), then permuted.
    fn binary_operand(&mut self, a: NodeIndex) -> Result<NodeIndex, GraphError> {
        let (v, f) = self.map[&a];
        if f || self.graph.node(a).ty.numel() == 1 {
            return Ok(v);
        }
        let Some(c) = self.out.constant_value(v).cloned() else {
            return self.nhwc(a);
        };
        let mut s = vec![1usize; 4 - c.ndim()];
        s.extend_from_slice(c.shape());
        let c4 = reshape(&c, &s)?;
        let name = format!("{}_nhwc", self.out.node(v).name);
        Ok(self.out.constant(&name, permute(&c4, &[0, 2, 3, 1])?))
    }
}

/// The weights of one output-channel block past which a CPU build packs a
/// convolution's weights ([`pack_conv_weights`]): 2 KiB. With AVX2's blocks of 8
/// channels, ResNet's 3×3 layers hold 18–144 KiB per block and are packed (those of
/// 28×28 and deeper ran 1.1–1.6× faster packed on an AVX2 EPYC, BENCHMARKS.md, "CPU
/// default schedules: packed weights, …"); so are the 1×1 layers of more than 64
/// input channels (ResNeXt's 128- and 256-channel ones read their HWIO weights with a
/// row stride of the output channels: packed, ResNeXt-50's kernel time fell 5–10 %,
/// EfficientNet's 4–15 %, alternated); narrow 1×1 layers (MobileNet's and
/// EfficientNet's 16–40 input channels, at most 1.3 KiB per block) keep HWIO weights.
pub const PACK_WEIGHTS_ABOVE: usize = 2 << 10;

/// Packs the constant weights of NHWC convolutions (grouped ones too, not depthwise)
/// whose blocks of `block` output channels each hold more than `min_block_bytes` of
/// weights: HWIO `[KH, KW, I, O]` (`I` per group) becomes `[O/block, KH, KW, I, block]`
/// (OHWI{block}o), once, at build time, as TVM's `alter_op_layout` packs x86
/// convolution weights. A CPU register tile of `block` output channels then reads its
/// weights contiguously: in HWIO their rows are `O` floats apart and, for deep layers,
/// crowd a few L1 sets, and inside a network, where they come cold from memory, a
/// grouped conv's tile reads 16–128 bytes per 2–4 KiB row (ResNeXt-50's 14×14 and 7×7
/// grouped convs ran 1.7–1.9× slower with cold caches than warm). The int8
/// convolutions' weight words `[O, KH, KW, W]` are packed the same way, by words, whatever
/// their size. Returns how many convolutions were packed (none for a block under 2).
pub fn pack_conv_weights(
    graph: &mut Graph,
    block: i64,
    min_block_bytes: usize,
) -> Result<usize, GraphError> {
    Ok(pack_conv_weights_mapped(graph, block, min_block_bytes)?.len())
}

/// [`pack_conv_weights`], returning each packed convolution's node before and after.
pub(crate) fn pack_conv_weights_mapped(
    graph: &mut Graph,
    block: i64,
    min_block_bytes: usize,
) -> Result<Vec<(NodeIndex, NodeIndex)>, GraphError> {
    let Some(b) = usize::try_from(block).ok().filter(|&b| b >= 2) else {
        return Ok(Vec::new());
    };
    let mut packed = Vec::new();
    let mut copies = PackedCopies::default();
    for n in graph.topo_order() {
        if let Some(p) = pack_int8_conv(graph, &mut copies, n, b)? {
            packed.push((n, p));
            continue;
        }
        let Some((attrs, w)) = nhwc_conv_with_constant_weight(graph, n) else {
            continue;
        };
        let &[kh, kw, ci, co] = w.shape() else {
            continue;
        };
        let block_bytes = kh * kw * ci * b * w.dtype().bytes();
        // (depthwise weights, one input channel per group, keep their own layout)
        let depthwise = attrs.groups > 1 && ci == 1;
        if depthwise || co % b != 0 || block_bytes <= min_block_bytes {
            continue;
        }
        let op = graph.node(n).op.clone();
        let conv = copies.rewire(graph, n, op, &format!("ohwi{b}o"), |w| {
            permute(&reshape(w, &[kh, kw, ci, co / b, b])?, &[3, 0, 1, 2, 4])
        })?;
        packed.push((n, conv));
    }
    dead_code_elimination(graph);
    Ok(packed)
}

/// An int8 convolution's constant weight words `[O, KH, KW, W]` packed by blocks of
/// output channels, `[O/b', KH, KW, W, b']` (the float NHWC convolution's packing, by
/// words), `b'` = `b` where it divides `O`, else the widest power of two below it that
/// does (`pick_vector`): the new node, if `n` is such a convolution and some `b' ≥ 2`
/// divides `O`. Unpacked, a vector of output
/// channels reads its weights `KH·KW·W` words apart, a gather per reduction step: with
/// AVX-512's 16 lanes MobileNet-v2's 24-channel projections (8 lanes a vector) ran so.
fn pack_int8_conv(
    graph: &mut Graph,
    copies: &mut PackedCopies,
    n: NodeIndex,
    b: usize,
) -> Result<Option<NodeIndex>, GraphError> {
    let op = graph.node(n).op.clone();
    if !matches!(op, Op::Conv2dU8I8 { .. }) {
        return Ok(None);
    }
    let Some(w) = graph.constant_value(graph.args(n)[1]) else {
        return Ok(None);
    };
    let &[o, kh, kw, wc] = w.shape() else {
        return Ok(None);
    };
    // the vector the default schedule reads a tile's columns with where `b` does not
    // divide the channels
    let b = if o % b == 0 {
        b
    } else {
        tessera_te::schedules::pick_vector(o as i64, b as i64) as usize
    };
    if b < 2 {
        return Ok(None);
    }
    Ok(Some(copies.rewire(
        graph,
        n,
        op,
        &format!("ohwi{b}o"),
        |w| permute(&reshape(w, &[o / b, b, kh, kw, wc])?, &[0, 2, 3, 4, 1]),
    )?))
}

/// [`pack_dense_weights_mapped`], returning how many dense layers were packed.
pub fn pack_dense_weights(graph: &mut Graph, block: i64) -> Result<usize, GraphError> {
    Ok(pack_dense_weights_mapped(graph, block)?.len())
}

/// Packs the constant weights of dense layers (`[N, K]`, `N` a multiple of `block`) by
/// blocks of `block` output features: `[N/block, K, block]`, once, at build time
/// (TVM's `dense_pack.x86` layout; the int8 product's weight words `[N, ⌈K/4⌉]` the
/// same way, by words); a weight several layers read is packed once ([`PackedCopies`]).
/// The default schedule then computes register tiles of rows × two blocks with one
/// broadcast and two contiguous vector loads per reduction step, where the `[N, K]`
/// weight needs a dot product per output and its horizontal sum. A matrix–vector
/// product (one row: a recurrence's step) is packed too: each block is one contiguous
/// stream and no sum is horizontal — the LSTM's `[1, 512] · [512, 2048]` step ran 29.8
/// µs on `[N, K]` and 24 µs packed on a Zen 4, alone. Returns each packed dense node
/// before and after.
pub(crate) fn pack_dense_weights_mapped(
    graph: &mut Graph,
    block: i64,
) -> Result<Vec<(NodeIndex, NodeIndex)>, GraphError> {
    let Some(b) = usize::try_from(block).ok().filter(|&b| b >= 2) else {
        return Ok(Vec::new());
    };
    let mut packed = Vec::new();
    let mut copies = PackedCopies::default();
    for n in graph.topo_order() {
        let op = graph.node(n).op.clone();
        if !matches!(op, Op::Dense | Op::DenseU8I8 { .. }) {
            continue;
        }
        let args = graph.args(n);
        let Some(w) = graph.constant_value(args[1]) else {
            continue;
        };
        let &[nf, k] = w.shape() else {
            continue;
        };
        if nf % b != 0 {
            continue;
        }
        let dense = copies.rewire(graph, n, op, &format!("nk{b}n"), |w| {
            permute(&reshape(w, &[nf / b, b, k])?, &[0, 2, 1])
        })?;
        packed.push((n, dense));
    }
    dead_code_elimination(graph);
    Ok(packed)
}

/// The attributes and constant weight of node `n` if it is an NHWC conv2d whose weight
/// is a constant.
pub(crate) fn nhwc_conv_with_constant_weight(
    graph: &Graph,
    n: NodeIndex,
) -> Option<(Conv2dAttrs, &NDArray)> {
    let Op::Conv2d {
        attrs,
        layout: Layout::Nhwc,
    } = &graph.node(n).op
    else {
        return None;
    };
    let w = graph.constant_value(graph.args(n)[1])?;
    Some((*attrs, w))
}

/// Replaces convolution (or dense layer) `n` with `op` (the same name and data input)
/// on the constant `weight`, named after the old weight with `_{suffix}`; returns the
/// new node.
pub(crate) fn replace_weight(
    graph: &mut Graph,
    n: NodeIndex,
    op: Op,
    suffix: &str,
    weight: NDArray,
) -> Result<NodeIndex, GraphError> {
    let wname = format!("{}_{suffix}", graph.node(graph.args(n)[1]).name);
    let c = graph.constant(&wname, weight);
    rewire(graph, n, op, c)
}

/// Node `n` rebuilt as `op` on its data (argument 0) and `weight`, in its place.
fn rewire(
    graph: &mut Graph,
    n: NodeIndex,
    op: Op,
    weight: NodeIndex,
) -> Result<NodeIndex, GraphError> {
    let name = graph.node(n).name.clone();
    let new = graph.op(&name, op, &[graph.args(n)[0], weight])?;
    graph.replace_uses(n, new);
    graph.remove(n);
    Ok(new)
}

/// The constants a packing pass made, by the weight and the layout they replace it
/// with: a weight that several nodes read (an unrolled recurrence's, every step's
/// product reading the one folded constant) is packed once and every reader reads the
/// one copy. Packed per reader, an LSTM of 64 steps held 64 copies of its 4 MiB
/// recurrent weights, and each step read its own from memory instead of cache.
#[derive(Default)]
struct PackedCopies(HashMap<(NodeIndex, String), NodeIndex>);

impl PackedCopies {
    /// Node `n` rebuilt as `op` on its data and `pack(its weight)` (argument 1, a
    /// constant), the packed constant named with `suffix` and made the first time only.
    fn rewire(
        &mut self,
        graph: &mut Graph,
        n: NodeIndex,
        op: Op,
        suffix: &str,
        pack: impl FnOnce(&NDArray) -> Result<NDArray, GraphError>,
    ) -> Result<NodeIndex, GraphError> {
        let args = graph.args(n);
        let key = (args[1], suffix.to_string());
        let c = match self.0.get(&key) {
            Some(&c) => c,
            None => {
                let weight = graph.constant_value(args[1]).ok_or_else(|| {
                    GraphError::Invalid(format!(
                        "`{}`: its weight is not a constant",
                        graph.node(n).name
                    ))
                })?;
                let value = pack(weight)?;
                let wname = format!("{}_{suffix}", graph.node(args[1]).name);
                let c = graph.constant(&wname, value);
                self.0.insert(key, c);
                c
            }
        };
        rewire(graph, n, op, c)
    }
}

fn transform(src: &str, dst: &str) -> Op {
    Op::LayoutTransform {
        src: src.into(),
        dst: dst.into(),
    }
}

/// A float32 constant filled by `f(index)`, for tests and the zoo.
pub fn constant_f32(shape: &[usize], f: impl Fn(usize) -> f32) -> Result<NDArray, GraphError> {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n).map(f).collect();
    Ok(NDArray::from_slice_f32(shape, &v)?)
}
