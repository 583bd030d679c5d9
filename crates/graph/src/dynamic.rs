//! Networks whose size is known only when they run (issue 61's first part): one
//! module for every value of one symbolic size — a sequence length, a batch — in a
//! range, without compiling again.
//!
//! The network is imported and optimized at the largest size and at smaller ones (the
//! caller's: the same model, the same passes). Every value is stored as at the largest
//! size; each fused group's tensor expression at the different sizes gives, axis by
//! axis, which extents are the size ([`tessera_te::runtime_shape`]): those loops run to
//! the size a run reads from one int32 value (`tessera.sizes`), which every kernel that
//! needs it takes as one more argument. The builds must be the same network but for
//! the size: the same groups of the same operators, the same constants but where a
//! constant's shape follows the size and the smaller one is the larger one's first
//! elements (a causal mask, positions), the inputs' and outputs' sizes the size itself.
//! Anything else is refused, naming the group: a constant, an index or a divisor that
//! follows the size (the last token, a mean over the tokens), a reduction over values
//! that hold the size's padding apart, a host step.
//!
//! A run copies each input with the size into the largest layout (its other elements
//! are never read), checks that every such input has the same size, writes the size,
//! runs the kernels, and copies each output back in the size's layout.

use crate::deploy::{assemble, CompiledNetwork};
use crate::error::GraphError;
use crate::executor::{lower_distinct, BuildContext};
use crate::fuse::{fuse, group_compute, Group, GroupCompute};
use crate::host_ops::HostOp;
use crate::ir::{Graph, TensorType};
use petgraph::stable_graph::NodeIndex;
use serde::{Deserialize, Serialize};
use tessera_backends::Backend;
use tessera_ir::DataType;
use tessera_runtime::NDArray;
use tessera_te::runtime_shape::{bound_by_difference, extent_tensor, Symbol};
use tessera_te::{ComputeDag, Tensor};

/// The name of the input that holds the size of a run (the kernels' extent tensor).
pub const SIZES_INPUT: &str = "tessera.sizes";

/// The sizes one module runs: `min..=max` of the symbolic size `name`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizeRange {
    pub name: String,
    pub min: i64,
    pub max: i64,
}

impl std::fmt::Display for SizeRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} in {}..{}", self.name, self.min, self.max)
    }
}

/// Where a module's size is: the range, the storage the kernels read it from, and the
/// dimensions of each input and output that are the size.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DynamicIo {
    pub range: SizeRange,
    pub sizes_storage: usize,
    /// Per input with the size: its name and those dimensions.
    pub inputs: Vec<(String, Vec<usize>)>,
    /// Per output (every one): the dimensions that are the size.
    pub outputs: Vec<Vec<usize>>,
}

/// Compiles one network for every size of `range` with `backend`'s default schedules:
/// `builds` are the network imported and optimized at sizes `range.max` (first) and at
/// one or more smaller ones (a third tells an extent that is not affine in the size).
pub fn compile_dynamic(
    builds: &[(i64, Graph)],
    range: &SizeRange,
    backend: &dyn Backend,
) -> Result<CompiledNetwork, GraphError> {
    let refuse = |why: String| GraphError::Invalid(format!("a network for {range}: {why}"));
    let sizes: Vec<i64> = builds.iter().map(|(s, _)| *s).collect();
    if range.min < 1 || range.min > range.max {
        return Err(refuse(format!(
            "the range must be 1 ≤ min ≤ max, not {}..{}",
            range.min, range.max
        )));
    }
    if builds.len() < 2 || sizes[0] != range.max || sizes[1..].iter().any(|&s| s >= range.max) {
        return Err(refuse(format!(
            "builds at the largest size then smaller ones are needed, not at {sizes:?}"
        )));
    }
    for (_, g) in builds {
        g.validate()?;
    }
    let mut graph = builds[0].1.clone();
    let sizes_node = graph.input(SIZES_INPUT, TensorType::new(&[1], DataType::int32()));
    let groups = fuse(&graph);
    let others: Vec<(i64, &Graph, Vec<Group>)> =
        builds[1..].iter().map(|(s, g)| (*s, g, fuse(g))).collect();
    for (s, g, gs) in &others {
        same_structure(&graph, &groups, g, gs).map_err(|why| GraphError::SizeStructure {
            range: range.to_string(),
            size: *s,
            why,
        })?;
    }
    let target = backend.target().clone();
    if let Some(g) = groups
        .iter()
        .find(|g| HostOp::of(&graph, g, &target).is_some())
    {
        let n = graph.node(g.output());
        return Err(refuse(format!(
            "`{}` ({}) runs on the host, which takes no runtime size yet",
            n.name,
            n.op.name()
        )));
    }
    let io = io_dims(&graph, builds, range).map_err(refuse)?;
    let extents = extent_tensor(1, "sizes").map_err(|e| refuse(e.to_string()))?;
    let symbol = Symbol {
        extents: extents.clone(),
        index: 0,
    };
    let compute_of = |i: usize, g: &Group| -> Result<GroupCompute, GraphError> {
        let gc = group_compute(&graph, g)?;
        let mut outs = vec![(range.max, vec![gc.output.clone()])];
        for (s, og, ogs) in &others {
            let ogc = group_compute(og, &ogs[i])?;
            check_constants(&graph, &gc, og, &ogc)
                .map_err(|why| refuse(format!("at size {s}: {why}")))?;
            outs.push((*s, vec![ogc.output]));
        }
        let name = graph.node(g.output()).name.clone();
        let bounded = bound_by_difference(&outs, &symbol)
            .map_err(|e| refuse(format!("group `{name}`: {e}")))?;
        Ok(with_runtime_extents(gc, &bounded[0], &extents, sizes_node))
    };
    let ctx = BuildContext::of(backend);
    let lowered = lower_distinct(&graph, &groups, &ctx, None, &compute_of)?;
    let mut net = assemble(&graph, &groups, &lowered, backend)?;
    let sizes_storage = net
        .take_input(SIZES_INPUT)
        .ok_or_else(|| refuse("no size input".into()))?;
    net.dynamic = Some(DynamicIo {
        range: range.clone(),
        sizes_storage,
        inputs: io.0,
        outputs: io.1,
    });
    Ok(net)
}

/// `gc` with its output replaced by `bounded` (the same tensor with runtime extents)
/// and its inner tensors by theirs; the size's input one more parameter where the
/// kernel reads it.
fn with_runtime_extents(
    gc: GroupCompute,
    bounded: &Tensor,
    extents: &Tensor,
    sizes_node: NodeIndex,
) -> GroupCompute {
    let ops = ComputeDag::new(std::slice::from_ref(bounded))
        .map(|d| d.ops)
        .unwrap_or_default();
    let rebuilt = |t: &Tensor| {
        ops.iter()
            .find(|x| *x == t)
            .cloned()
            .unwrap_or_else(|| t.clone())
    };
    let mut gc = GroupCompute {
        inlinable: gc.inlinable.iter().map(rebuilt).collect(),
        anchor: gc.anchor.as_ref().map(|(n, t)| (*n, rebuilt(t))),
        output: bounded.clone(),
        ..gc
    };
    if ops.contains(extents) {
        gc.params.push(sizes_node);
        gc.placeholders.push(extents.clone());
    }
    gc
}

/// Whether `other` (with groups `og`) is `graph` (groups `groups`) built at another
/// size: the same groups of the same operators.
fn same_structure(
    graph: &Graph,
    groups: &[Group],
    other: &Graph,
    og: &[Group],
) -> Result<(), String> {
    if groups.len() != og.len() {
        return Err(format!(
            "{} fused groups against {}",
            og.len(),
            groups.len()
        ));
    }
    for (g, o) in groups.iter().zip(og) {
        let ops = |gr: &Graph, g: &Group| -> Vec<&'static str> {
            g.nodes.iter().map(|&n| gr.node(n).op.name()).collect()
        };
        if ops(graph, g) != ops(other, o) {
            return Err(format!(
                "group `{}` is {:?} there and {:?} at the largest size",
                graph.node(g.output()).name,
                ops(other, o),
                ops(graph, g)
            ));
        }
    }
    Ok(())
}

/// Whether the constants group `gc` reads in `graph` are those `ogc` reads in `other`:
/// equal, or (where the shape follows the size) the other's the first elements of the
/// largest one's.
fn check_constants(
    graph: &Graph,
    gc: &GroupCompute,
    other: &Graph,
    ogc: &GroupCompute,
) -> Result<(), String> {
    for (&a, &b) in gc.params.iter().zip(&ogc.params) {
        let (Some(big), Some(small)) = (graph.constant_value(a), other.constant_value(b)) else {
            continue;
        };
        if !is_leading_block(big, small) {
            return Err(format!(
                "constant `{}` ({:?} at the largest size, {:?} here) follows the size in its values",
                graph.node(a).name,
                big.shape(),
                small.shape()
            ));
        }
    }
    Ok(())
}

/// Whether `small` is the block of `big` at the start of every dimension.
fn is_leading_block(big: &NDArray, small: &NDArray) -> bool {
    let (bs, ss) = (big.shape(), small.shape());
    if bs.len() != ss.len() || big.dtype() != small.dtype() || bs.iter().zip(ss).any(|(b, s)| s > b)
    {
        return false;
    }
    let (b, s) = (big.as_bytes(), small.as_bytes());
    leading_runs(ss, bs, big.dtype().bytes())
        .all(|(at_s, at_b, len)| b[at_b..at_b + len] == s[at_s..at_s + len])
}

/// The contiguous runs of the leading block of shape `small` inside a row-major array
/// of shape `big` (every dimension of `small` at most `big`'s), elements `width` bytes:
/// `(byte offset in small, byte offset in big, bytes)`. The dimensions after the last
/// one that differs are whole, so each run is that dimension's first `small[j]` rows.
fn leading_runs<'a>(
    small: &'a [usize],
    big: &'a [usize],
    width: usize,
) -> impl Iterator<Item = (usize, usize, usize)> + 'a {
    let j = (0..small.len())
        .rev()
        .find(|&d| small[d] != big[d])
        .unwrap_or(0);
    let len: usize = small[j..].iter().product::<usize>() * width;
    let big_step: usize = big[j..].iter().product::<usize>() * width;
    let count: usize = small[..j].iter().product();
    (0..count).map(move |r| {
        // the outer index `r` over small[..j], placed in big[..j]
        let (mut i, mut at, mut stride) = (r, 0, 1);
        for d in (0..j).rev() {
            at += (i % small[d]) * stride;
            i /= small[d];
            stride *= big[d];
        }
        (r * len, at * big_step, len)
    })
}

/// Per input with the size, the dimensions that are the size; per output, the same.
#[allow(clippy::type_complexity)]
fn io_dims(
    graph: &Graph,
    builds: &[(i64, Graph)],
    range: &SizeRange,
) -> Result<(Vec<(String, Vec<usize>)>, Vec<Vec<usize>>), String> {
    let dims = |what: &str, shapes: Vec<(i64, Vec<i64>)>| -> Result<Vec<usize>, String> {
        let (_, first) = &shapes[0];
        let mut out = Vec::new();
        for (d, extent) in first.iter().enumerate() {
            if shapes.iter().all(|(_, s)| s.get(d) == Some(extent)) {
                continue;
            }
            if shapes.iter().all(|(size, s)| s.get(d) == Some(size)) {
                out.push(d);
            } else {
                let at: Vec<String> = shapes
                    .iter()
                    .map(|(z, s)| format!("{s:?} at {z}"))
                    .collect();
                return Err(format!(
                    "{what}'s dimension {d} is not the size itself ({}): only dimensions equal to {} may vary",
                    at.join(", "),
                    range.name
                ));
            }
        }
        Ok(out)
    };
    let shape = |g: &Graph, n: NodeIndex| g.node(n).ty.shape.clone();
    let mut inputs = Vec::new();
    for (k, &i) in builds[0].1.inputs().iter().enumerate() {
        let name = &graph.node(i).name;
        let shapes = builds
            .iter()
            .map(|(s, g)| (*s, shape(g, g.inputs()[k])))
            .collect();
        let d = dims(&format!("input `{name}`"), shapes)?;
        if !d.is_empty() {
            if graph.fixed_inputs().iter().any(|f| &f.input == name) {
                return Err(format!("input `{name}` was built for one value"));
            }
            inputs.push((name.clone(), d));
        }
    }
    let mut outputs = Vec::new();
    for k in 0..graph.outputs().len() {
        let shapes = builds
            .iter()
            .map(|(s, g)| (*s, shape(g, g.outputs()[k])))
            .collect();
        outputs.push(dims(&format!("output {k}"), shapes)?);
    }
    if inputs.is_empty() {
        return Err(format!("no input has a dimension that is {}", range.name));
    }
    Ok((inputs, outputs))
}

/// `value` (an input whose dimensions `dims` are the run's size) laid out in `max`, the
/// input's shape at the largest size: its bytes, and the size. Elements past the size
/// are zero.
pub(crate) fn pad_input(
    value: &NDArray,
    max: &TensorType,
    dims: &[usize],
    range: &SizeRange,
) -> Result<(Vec<u8>, i64), String> {
    let shape: Vec<usize> = value.shape().to_vec();
    let max_shape: Vec<usize> = max.shape.iter().map(|&d| d as usize).collect();
    if value.dtype() != max.dtype || shape.len() != max_shape.len() {
        return Err(format!(
            "expected {} of rank {}, got {} of rank {}",
            max.dtype,
            max_shape.len(),
            value.dtype(),
            shape.len()
        ));
    }
    let size = shape[dims[0]] as i64;
    for (d, (&s, &m)) in shape.iter().zip(&max_shape).enumerate() {
        let varies = dims.contains(&d);
        if varies && s as i64 != size {
            return Err(format!(
                "dimensions {dims:?} are all {}: {:?} has {} and {size}",
                range.name, shape, s
            ));
        }
        if !varies && s != m {
            return Err(format!("dimension {d} is {m}, not {s}"));
        }
    }
    if size < range.min || size > range.max {
        return Err(format!(
            "{} = {size} is outside the module's range {}..{}",
            range.name, range.min, range.max
        ));
    }
    let width = max.dtype.bytes();
    let mut out = vec![0u8; max_shape.iter().product::<usize>() * width];
    let src = value.as_bytes();
    for (at_s, at_b, len) in leading_runs(&shape, &max_shape, width) {
        out[at_b..at_b + len].copy_from_slice(&src[at_s..at_s + len]);
    }
    Ok((out, size))
}

/// An output laid out in `max` (its shape at the largest size) read back in the run's
/// layout: dimensions `dims` of extent `size`.
pub(crate) fn compact_output(
    bytes: &[u8],
    max: &TensorType,
    dims: &[usize],
    size: i64,
) -> Result<NDArray, GraphError> {
    let max_shape: Vec<usize> = max.shape.iter().map(|&d| d as usize).collect();
    let mut shape = max_shape.clone();
    for &d in dims {
        shape[d] = size as usize;
    }
    let mut out = NDArray::zeros(max.dtype, &shape)?;
    let dst = out.as_bytes_mut();
    for (at_s, at_b, len) in leading_runs(&shape, &max_shape, max.dtype.bytes()) {
        dst[at_s..at_s + len].copy_from_slice(&bytes[at_b..at_b + len]);
    }
    Ok(out)
}

/// A loaded module's runtime size: the inputs with the size given so far, and at
/// which size.
#[derive(Clone, Debug)]
pub(crate) struct RunSize {
    pub(crate) io: DynamicIo,
    given: Vec<Option<i64>>,
}

impl RunSize {
    pub(crate) fn new(io: DynamicIo) -> RunSize {
        let given = vec![None; io.inputs.len()];
        RunSize { io, given }
    }

    /// Whether input `name` has the size.
    pub(crate) fn has_input(&self, name: &str) -> bool {
        self.io.inputs.iter().any(|(n, _)| n == name)
    }

    /// Input `name` (of type `max` at the largest size) given `value`: its bytes in the
    /// largest layout, and its size (not yet the run's: [`RunSize::take`]).
    pub(crate) fn input(
        &self,
        name: &str,
        value: &NDArray,
        max: &TensorType,
    ) -> Result<(Vec<u8>, i64), GraphError> {
        let dims = self
            .io
            .inputs
            .iter()
            .find(|(n, _)| n == name)
            .map_or(&[][..], |(_, d)| &d[..]);
        pad_input(value, max, dims, &self.io.range).map_err(|reason| GraphError::Input {
            name: name.to_string(),
            reason,
        })
    }

    /// Input `name` set at `size`.
    pub(crate) fn take(&mut self, name: &str, size: i64) {
        if let Some(k) = self.io.inputs.iter().position(|(n, _)| n == name) {
            self.given[k] = Some(size);
        }
    }

    /// The size of the run: every input with the size given, at one size.
    pub(crate) fn size(&self) -> Result<i64, GraphError> {
        let mut size = None;
        for ((name, _), given) in self.io.inputs.iter().zip(&self.given) {
            let Some(s) = *given else {
                return Err(GraphError::Input {
                    name: name.clone(),
                    reason: format!("not set: the module runs {} from its inputs", self.io.range),
                });
            };
            match size {
                Some(z) if z != s => {
                    return Err(GraphError::Input {
                        name: name.clone(),
                        reason: format!(
                            "{} is {s} here and {z} in an input before",
                            self.io.range.name
                        ),
                    })
                }
                _ => size = Some(s),
            }
        }
        size.ok_or_else(|| {
            GraphError::Invalid("a module with a runtime size has inputs with it".into())
        })
    }

    /// Output `index`, read in the largest layout as `bytes` (type `max`), in the run's.
    pub(crate) fn output(
        &self,
        index: usize,
        bytes: &[u8],
        max: &TensorType,
    ) -> Result<NDArray, GraphError> {
        let dims = self.io.outputs.get(index).map_or(&[][..], |d| &d[..]);
        compact_output(bytes, max, dims, self.size()?)
    }
}

#[cfg(test)]
mod tests {
    use super::leading_runs;

    /// The runs cover the leading block element for element, as the row-major offsets
    /// of each index in both shapes say.
    #[test]
    fn leading_runs_are_the_leading_block() {
        for (small, big) in [
            (vec![2, 3], vec![2, 5]),
            (vec![2, 3, 4], vec![3, 5, 4]),
            (vec![1, 3, 2], vec![1, 3, 2]),
            (vec![3, 1], vec![4, 1]),
            (vec![], vec![]),
        ] {
            let mut covered = Vec::new();
            for (at_s, at_b, len) in leading_runs(&small, &big, 1) {
                covered.extend((0..len).map(|k| (at_s + k, at_b + k)));
            }
            let count: usize = small.iter().product();
            let want: Vec<(usize, usize)> = (0..count)
                .map(|i| {
                    let (mut r, mut at, mut stride) = (i, 0, 1);
                    for d in (0..small.len()).rev() {
                        at += (r % small[d]) * stride;
                        r /= small[d];
                        stride *= big[d];
                    }
                    (i, at)
                })
                .collect();
            assert_eq!(covered, want, "{small:?} in {big:?}");
        }
    }
}
