//! Networks whose sizes are known only when they run (issue 61): one module for every
//! point of ranges of symbolic sizes — a sequence length, a cache's length and the new
//! tokens, a batch — without compiling again.
//!
//! The network is imported and optimized at the largest sizes and at points smaller in
//! one size or more (the caller's: the same model, the same passes). Every value is
//! stored as at the largest sizes; each fused group's tensor expression at the points
//! gives, axis by axis, which extents are a sum of sizes and a constant
//! ([`tessera_te::runtime_shape`]): those loops run to what a run reads from one int32
//! vector (`tessera.sizes`), which every kernel that needs it takes as one more
//! argument; a kernel whose extents follow a size whose range starts at 1 also has a
//! body for 1 ([`tessera_te::runtime_shape::specialize`]: a decode step's one token gets
//! a one-token build's schedules). The builds must be the same network but for the
//! sizes: the same groups of the same operators, the same constants but where a
//! constant's shape follows the sizes and the smaller one is the larger one's first
//! elements (a causal mask's positions), or an integer one's values all move by one
//! number that follows the sizes (positions that start at a cache's length: read plus
//! that number at run time); the inputs' and outputs' dimensions sums of sizes and a
//! constant, each size some input's dimension alone. Anything else is refused, naming
//! the group: a constant, an index or a divisor that follows the sizes otherwise (a
//! mean over the tokens), a reduction over values that hold the padding apart. A
//! dimension or constant may also follow a size up to a cap (`min(20, count)`: the first
//! 20 of a count), where the points below the cap fit a sum and those above reach it.
//!
//! Some sizes are no input's: a selection ([`crate::selection`]: NonZero,
//! NonMaxSuppression, Compress) counts its output when it runs, as a host step that
//! writes the count where the kernels after it read the sizes; such a size is built at
//! counts below its bound like any other ([`selection_ranges`], [`selection_points`],
//! [`counted_point`]). A host step reads the leading blocks of its inputs at the run's
//! sizes (the dimensions of its values that follow them, fitted like the inputs'), so
//! that a NonMaxSuppression of the boxes a NonZero kept, or a TopK of `min(k, count)`,
//! runs as the network says. [`compile_dynamic_with`] asks its hook (a log's history
//! best) for every group: one whose kernel reads no size has a fixed build's workload,
//! one that reads them a workload of its own (its DAG reads the sizes' vector), which a
//! tune for the ranges measures at a sample of points ([`crate::tasks::range_tasks`]).
//!
//! A run copies each input that follows the sizes into the largest layout, a
//! contiguous run at a time (its other elements are never read), checks that the
//! inputs agree on the sizes, writes them, runs the kernels, and copies each output
//! back in the sizes' layout the same way.

use crate::deploy::{assemble, CompiledNetwork};
use crate::error::GraphError;
use crate::executor::{lower_distinct, BuildContext, ScheduleHook};
use crate::fuse::{fuse, group_compute, Group, GroupCompute, Specialized};
use crate::host_ops::HostOp;
use crate::ir::{Graph, TensorType};
use petgraph::stable_graph::NodeIndex;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use tessera_backends::Backend;
use tessera_ir::{DataType, Expr};
use tessera_runtime::NDArray;
use tessera_te::runtime_shape::{
    bound_by_difference, extent_tensor, specialize, valid_dims, Affine, DimValid, Symbols,
};
use tessera_te::{ComputeDag, Tensor};

pub use crate::counted::{
    counted_builds, counted_point, selection_points, selection_ranges, with_top_k_counts,
};

/// The name of the input that holds the sizes of a run (the kernels' extent tensor).
pub const SIZES_INPUT: &str = "tessera.sizes";

/// The values one symbolic size of a module takes: `min..=max` of `name`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizeRange {
    pub name: String,
    pub min: i64,
    pub max: i64,
    /// Counted by the selection of that name when the module runs, not told by an input
    /// ([`crate::selection`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub produced: bool,
}

impl SizeRange {
    /// A size an input tells.
    pub fn new(name: impl Into<String>, min: i64, max: i64) -> SizeRange {
        SizeRange {
            name: name.into(),
            min,
            max,
            produced: false,
        }
    }
}

impl std::fmt::Display for SizeRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let how = if self.produced { "counted" } else { "in" };
        write!(f, "{} {how} {}..{}", self.name, self.min, self.max)
    }
}

/// A dimension of an input or output that follows the sizes: `offset` plus the sum of
/// sizes `sizes`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizeDim {
    pub dim: usize,
    pub sizes: Vec<usize>,
    pub offset: i64,
    /// The most it is (a slice of a count's first elements): `min(at_most, sum)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_most: Option<i64>,
}

impl SizeDim {
    /// Its extent at `values` (one per size).
    pub fn at(&self, values: &[i64]) -> i64 {
        let sum = self.offset + self.sizes.iter().map(|&k| values[k]).sum::<i64>();
        self.at_most.map_or(sum, |m| sum.min(m))
    }
}

/// Where a module's sizes are: their ranges, the storage the kernels read them from,
/// and the dimensions of each input and output that follow them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "DynamicIoFile")]
pub struct DynamicIo {
    pub ranges: Vec<SizeRange>,
    pub sizes_storage: usize,
    /// Per input that follows a size: its name and those dimensions.
    pub inputs: Vec<(String, Vec<SizeDim>)>,
    /// Per output (every one): the dimensions that follow the sizes.
    pub outputs: Vec<Vec<SizeDim>>,
}

/// What a module file holds: this build's form, or format version 3's (one size, each
/// dimension that size itself).
#[derive(Deserialize)]
#[serde(untagged)]
enum DynamicIoFile {
    Sizes {
        ranges: Vec<SizeRange>,
        sizes_storage: usize,
        inputs: Vec<(String, Vec<SizeDim>)>,
        outputs: Vec<Vec<SizeDim>>,
    },
    OneSize {
        range: SizeRange,
        sizes_storage: usize,
        inputs: Vec<(String, Vec<usize>)>,
        outputs: Vec<Vec<usize>>,
    },
}

impl From<DynamicIoFile> for DynamicIo {
    fn from(f: DynamicIoFile) -> DynamicIo {
        match f {
            DynamicIoFile::Sizes {
                ranges,
                sizes_storage,
                inputs,
                outputs,
            } => DynamicIo {
                ranges,
                sizes_storage,
                inputs,
                outputs,
            },
            DynamicIoFile::OneSize {
                range,
                sizes_storage,
                inputs,
                outputs,
            } => {
                let dims = |d: Vec<usize>| -> Vec<SizeDim> {
                    d.into_iter()
                        .map(|dim| SizeDim {
                            dim,
                            sizes: vec![0],
                            offset: 0,
                            at_most: None,
                        })
                        .collect()
                };
                DynamicIo {
                    ranges: vec![range],
                    sizes_storage,
                    inputs: inputs.into_iter().map(|(n, d)| (n, dims(d))).collect(),
                    outputs: outputs.into_iter().map(dims).collect(),
                }
            }
        }
    }
}

/// The ranges as one line: `seq in 1..32, past in 0..96`.
pub fn describe(ranges: &[SizeRange]) -> String {
    let parts: Vec<String> = ranges.iter().map(|r| r.to_string()).collect();
    parts.join(", ")
}

/// Compiles one network for every point of `ranges` (one range per symbolic size) with
/// `backend`'s default schedules: `builds` are the network imported and optimized at
/// every size's largest value (first) and at points smaller in one size or more (see
/// [`bound_by_difference`]: three values of a size tell a form that is not affine).
pub fn compile_dynamic(
    builds: &[(Vec<i64>, Graph)],
    ranges: &[SizeRange],
    backend: &dyn Backend,
) -> Result<CompiledNetwork, GraphError> {
    compile_dynamic_with(builds, ranges, backend, None)
}

/// A network prepared for ranges of sizes: the largest build's graph (with the sizes'
/// input), its fused groups, and each group's tensor expression with runtime extents —
/// what [`compile_prepared`] lowers and what a tune for the ranges takes its tasks from
/// ([`crate::tasks::range_tasks`]).
pub struct RangeNetwork {
    pub graph: Graph,
    pub groups: Vec<Group>,
    /// Per group, its tensor expression: loops that run to the sizes where its extents
    /// follow them (a kernel that reads `extents`), else the largest build's.
    pub computes: Vec<GroupCompute>,
    /// The int32 vector of sizes the kernels read, one element per range.
    pub extents: Tensor,
    pub ranges: Vec<SizeRange>,
    #[allow(clippy::type_complexity)]
    io: (Vec<(String, Vec<SizeDim>)>, Vec<Vec<SizeDim>>),
}

/// [`compile_dynamic`], asking `hook` (the history best of a record log) for the
/// schedule of every group: a group whose kernel reads no runtime size has a fixed
/// build's workload (a detector's backbone), one that reads them a workload of its own,
/// which a tune for the ranges measures (a one-token body keeps its defaults).
pub fn compile_dynamic_with(
    builds: &[(Vec<i64>, Graph)],
    ranges: &[SizeRange],
    backend: &dyn Backend,
    hook: Option<&dyn ScheduleHook>,
) -> Result<CompiledNetwork, GraphError> {
    let net = prepare_dynamic(builds, ranges, backend.target())?;
    compile_prepared(&net, backend, hook)
}

/// Prepares one network for every point of `ranges` from `builds` (see
/// [`compile_dynamic`]) for `target`: the groups' tensor expressions with runtime
/// extents, checked across the builds.
pub fn prepare_dynamic(
    builds: &[(Vec<i64>, Graph)],
    ranges: &[SizeRange],
    target: &tessera_backends::Target,
) -> Result<RangeNetwork, GraphError> {
    let all = describe(ranges);
    let refuse = |why: String| GraphError::Invalid(format!("a network for {all}: {why}"));
    if let Some(r) = ranges.iter().find(|r| r.min < 0 || r.min > r.max) {
        return Err(refuse(format!(
            "a range must be 0 ≤ min ≤ max, not {}..{}",
            r.min, r.max
        )));
    }
    let maxes: Vec<i64> = ranges.iter().map(|r| r.max).collect();
    let points: Vec<Vec<i64>> = builds.iter().map(|(s, _)| s.clone()).collect();
    let well_formed = builds.len() >= 2
        && points[0] == maxes
        && points[1..].iter().all(|p| {
            p.len() == maxes.len() && p != &maxes && p.iter().zip(&maxes).all(|(a, m)| a <= m)
        });
    if ranges.is_empty() || !well_formed {
        return Err(refuse(format!(
            "builds at the largest sizes then smaller ones are needed, not at {points:?}"
        )));
    }
    for (_, g) in builds {
        g.validate()?;
    }
    let mut graph = builds[0].1.clone();
    crate::counted::tell_selections(&mut graph, ranges).map_err(refuse)?;
    let count = ranges.len() as i64;
    let points = &points;
    let sizes_node = graph.input(SIZES_INPUT, TensorType::new(&[count], DataType::int32()));
    let groups = fuse(&graph);
    let others: Vec<(&Vec<i64>, &Graph, Vec<Group>)> =
        builds[1..].iter().map(|(s, g)| (s, g, fuse(g))).collect();
    for (s, g, gs) in &others {
        same_structure(&graph, &groups, g, gs).map_err(|why| GraphError::SizeStructure {
            range: all.clone(),
            size: format!("{s:?}"),
            why,
        })?;
    }
    let host = |g: &Group| HostOp::of(&graph, g, target);
    let io = io_dims(&graph, builds, ranges).map_err(refuse)?;
    let extents = extent_tensor(count, "sizes").map_err(|e| refuse(e.to_string()))?;
    // the sizes whose range starts at 1 (one token, one row), and when a run has them
    // there; on the CPU, whose kernels take no launch dimensions that two bodies would
    // have to share
    let cpu = target.kind == tessera_backends::TargetKind::CPU;
    let ones: Vec<(usize, i64)> = (0..ranges.len())
        .filter(|&k| cpu && ranges[k].min == 1 && ranges[k].max > 1)
        .map(|k| (k, 1))
        .collect();
    let at_ones = ones
        .iter()
        .map(|&(k, v)| extents.at(&[Expr::int(k as i64)]).eq(v))
        .reduce(Expr::and)
        .unwrap_or_else(|| Expr::bool(false));
    // `known`: per value a group before computes, its dimensions' valid indices (a
    // product's rows in blocks, which the shapes cannot tell its readers)
    let compute_of = |i: usize, g: &Group, known: &HashMap<NodeIndex, Vec<DimValid>>| {
        let gc = group_compute(&graph, g)?;
        if host(g).is_some() {
            return host_dims(gc, &graph, g, builds, &others, i, ranges).map_err(refuse);
        }
        let mut outs = vec![(maxes.clone(), vec![gc.output.clone()])];
        // per constant parameter, how much its values move at each point
        let mut shifts: Vec<Vec<i64>> = vec![vec![0; builds.len()]; gc.params.len()];
        for (b, (s, og, ogs)) in others.iter().enumerate() {
            let ogc = group_compute(og, &ogs[i])?;
            for (j, shift) in check_constants(&graph, &gc, og, &ogc)
                .map_err(|why| refuse(format!("at sizes {s:?}: {why}")))?
            {
                shifts[j][b + 1] = shift;
            }
            outs.push(((*s).clone(), vec![ogc.output]));
        }
        let name = graph.node(g.output()).name.clone();
        let mut symbols = Symbols::new(extents.clone());
        for (j, moved) in shifts.iter().enumerate() {
            if moved.iter().all(|&v| v == 0) {
                continue;
            }
            let form = Affine::fit_checked(points, moved).ok_or_else(|| {
                refuse(format!(
                    "constant `{}` moves by {moved:?} at sizes {points:?}: no form of the sizes the points show",
                    graph.node(gc.params[j]).name
                ))
            })?;
            symbols.shift(gc.placeholders[j].clone(), form);
        }
        for (node, p) in gc.params.iter().zip(&gc.placeholders) {
            if let Some(dims) = known.get(node) {
                symbols.knows(p.clone(), dims.clone());
            }
        }
        let bounded = bound_by_difference(&outs, &symbols)
            .map_err(|e| refuse(format!("group `{name}`: {e}")))?;
        let mut general = with_runtime_extents(gc.clone(), &bounded[0], &extents, sizes_node);
        // at one token (a decode step), where the range has it: its own schedules
        // (an optimization: where it cannot be built, the general body runs at 1 too)
        let special = match ones.is_empty() {
            true => None,
            false => specialize(&bounded, &extents, &ones).unwrap_or_else(|e| {
                tracing::debug!(group = %name, error = %e, "no one-token body");
                None
            }),
        };
        if let Some(s) = special.filter(|_| general.placeholders.contains(&extents)) {
            let compute = with_runtime_extents(gc, &s[0], &extents, sizes_node);
            general.specialized = Some(Box::new(Specialized {
                condition: at_ones.clone(),
                compute,
            }));
        }
        Ok(general)
    };
    let mut known = HashMap::new();
    let mut computes = Vec::with_capacity(groups.len());
    for (i, g) in groups.iter().enumerate() {
        let gc: GroupCompute = compute_of(i, g, &known)?;
        if host(g).is_none() {
            known.insert(g.output(), valid_dims(&gc.output));
        }
        computes.push(gc);
    }
    Ok(RangeNetwork {
        graph,
        groups,
        computes,
        extents,
        ranges: ranges.to_vec(),
        io,
    })
}

/// Lowers and builds a [`RangeNetwork`] with `backend`, each group's schedule from
/// `hook` where it has one, else the default.
pub fn compile_prepared(
    net: &RangeNetwork,
    backend: &dyn Backend,
    hook: Option<&dyn ScheduleHook>,
) -> Result<CompiledNetwork, GraphError> {
    let ctx = BuildContext::of(backend);
    let compute_of = |i: usize, _: &Group| Ok(net.computes[i].clone());
    let lowered = lower_distinct(&net.graph, &net.groups, &ctx, hook, &compute_of)?;
    let mut compiled = assemble(&net.graph, &net.groups, &lowered, backend)?;
    let sizes_storage = compiled.take_input(SIZES_INPUT).ok_or_else(|| {
        GraphError::Invalid(format!(
            "a network for {}: no size input",
            describe(&net.ranges)
        ))
    })?;
    compiled.dynamic = Some(DynamicIo {
        ranges: net.ranges.clone(),
        sizes_storage,
        inputs: net.io.0.clone(),
        outputs: net.io.1.clone(),
    });
    Ok(compiled)
}

/// A host step's group `gc` (group `i`, `g` of `graph`) with the dimensions of its
/// parameters and output that follow the sizes, from its values' shapes at every build
/// (`others`: the builds after the first, with their groups): the step reads the
/// leading blocks of its inputs at a run's sizes.
#[allow(clippy::type_complexity)]
fn host_dims(
    mut gc: GroupCompute,
    graph: &Graph,
    g: &Group,
    builds: &[(Vec<i64>, Graph)],
    others: &[(&Vec<i64>, &Graph, Vec<Group>)],
    i: usize,
    ranges: &[SizeRange],
) -> Result<GroupCompute, String> {
    let points: Vec<Vec<i64>> = builds.iter().map(|(p, _)| p.clone()).collect();
    let name = &graph.node(g.output()).name;
    // per build, the shapes of the parameters then of the output
    let mut shapes: Vec<Vec<Vec<i64>>> = vec![gc
        .params
        .iter()
        .chain([&g.output()])
        .map(|&n| graph.node(n).ty.shape.clone())
        .collect()];
    for (_, og, ogs) in others {
        let ogc = group_compute(og, &ogs[i]).map_err(|e| e.to_string())?;
        if ogc.params.len() != gc.params.len() {
            return Err(format!("`{name}` reads other values at other sizes"));
        }
        shapes.push(
            ogc.params
                .iter()
                .chain([&ogs[i].output()])
                .map(|&n| og.node(n).ty.shape.clone())
                .collect(),
        );
    }
    gc.host_count = ranges
        .iter()
        .position(|r| r.produced && &r.name == name)
        .filter(|_| matches!(graph.node(g.output()).op, crate::ir::Op::TopK { .. }));
    // a TopK that writes its k: its output's k from the other sizes (the step computes
    // it before writing it)
    let mut without_own = points.clone();
    if let Some(own) = gc.host_count {
        for p in &mut without_own {
            p[own] = 0;
        }
    }
    let mut dims = Vec::with_capacity(gc.params.len() + 1);
    for j in 0..=gc.params.len() {
        let of_j: Vec<Vec<i64>> = shapes.iter().map(|s| s[j].clone()).collect();
        let at = if j == gc.params.len() {
            &without_own
        } else {
            &points
        };
        dims.push(size_dims(
            &format!("host step `{name}`'s value {j}"),
            &of_j,
            at,
            ranges,
        )?);
    }
    if dims.iter().any(|d| !d.is_empty()) {
        gc.host_dims = dims;
    }
    Ok(gc)
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
/// equal, or (where the shape follows the sizes) the other's the first elements of the
/// largest one's; or, for integers, those plus one number, every element the same
/// (positions that start at a cache's length): `(parameter, that number)` for each.
fn check_constants(
    graph: &Graph,
    gc: &GroupCompute,
    other: &Graph,
    ogc: &GroupCompute,
) -> Result<Vec<(usize, i64)>, String> {
    let mut shifts = Vec::new();
    for (j, (&a, &b)) in gc.params.iter().zip(&ogc.params).enumerate() {
        let (Some(big), Some(small)) = (graph.constant_value(a), other.constant_value(b)) else {
            continue;
        };
        if is_leading_block(big, small) {
            continue;
        }
        match shift_of(big, small) {
            Some(shift) => shifts.push((j, shift)),
            None => {
                return Err(format!(
                    "constant `{}` ({:?} at the largest size, {:?} here) follows the size in its values",
                    graph.node(a).name,
                    big.shape(),
                    small.shape()
                ))
            }
        }
    }
    Ok(shifts)
}

/// `d` where every element of integer `small` is the element of `big`'s leading block
/// at its index plus `d`.
fn shift_of(big: &NDArray, small: &NDArray) -> Option<i64> {
    let (bs, ss) = (big.shape(), small.shape());
    if bs.len() != ss.len()
        || big.dtype() != small.dtype()
        || !big.dtype().is_int()
        || bs.iter().zip(ss).any(|(b, s)| s > b)
        || small.is_empty()
    {
        return None;
    }
    let (b, s) = (big.to_f64_vec(), small.to_f64_vec());
    let mut shift = None;
    for (at_s, at_b, len) in leading_runs(ss, bs, 1) {
        for k in 0..len {
            let d = s[at_s + k] - b[at_b + k];
            if *shift.get_or_insert(d) != d {
                return None;
            }
        }
    }
    shift.map(|d| d as i64)
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
pub(crate) fn leading_runs<'a>(
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

/// Per input that follows the sizes, and per output, the dimensions that follow them
/// (each a sum of sizes and a constant). Every size is some input's dimension alone: a
/// run reads its sizes from its inputs.
#[allow(clippy::type_complexity)]
fn io_dims(
    graph: &Graph,
    builds: &[(Vec<i64>, Graph)],
    ranges: &[SizeRange],
) -> Result<(Vec<(String, Vec<SizeDim>)>, Vec<Vec<SizeDim>>), String> {
    let points: Vec<Vec<i64>> = builds.iter().map(|(p, _)| p.clone()).collect();
    let dims = |what: &str, shapes: Vec<Vec<i64>>| size_dims(what, &shapes, &points, ranges);
    let shape = |g: &Graph, n: NodeIndex| g.node(n).ty.shape.clone();
    let mut inputs = Vec::new();
    for (k, &i) in builds[0].1.inputs().iter().enumerate() {
        let name = &graph.node(i).name;
        let shapes = builds
            .iter()
            .map(|(_, g)| shape(g, g.inputs()[k]))
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
            .map(|(_, g)| shape(g, g.outputs()[k]))
            .collect();
        outputs.push(dims(&format!("output {k}"), shapes)?);
    }
    for (k, r) in ranges.iter().enumerate().filter(|(_, r)| !r.produced) {
        if !inputs.iter().any(|(_, d)| d.iter().any(|s| s.sizes == [k])) {
            return Err(format!("no input has a dimension that is {}", r.name));
        }
    }
    Ok((inputs, outputs))
}

/// The dimensions of a value whose shapes at the builds' `points` are `shapes` that
/// follow the sizes: each a sum of sizes and a constant, or one up to its largest
/// value; anything else refused, naming `what`.
fn size_dims(
    what: &str,
    shapes: &[Vec<i64>],
    points: &[Vec<i64>],
    ranges: &[SizeRange],
) -> Result<Vec<SizeDim>, String> {
    let mut out = Vec::new();
    for (d, extent) in shapes[0].iter().enumerate() {
        let extents: Vec<i64> = shapes
            .iter()
            .map(|s| s.get(d).copied().unwrap_or(-1))
            .collect();
        if extents.iter().all(|e| e == extent) {
            continue;
        }
        let form = Affine::fit(points, &extents)
            .filter(|f| f.is_sum_of_sizes())
            .map(|f| (f, None))
            .or_else(|| Affine::fit_at_most(points, &extents).map(|(f, m)| (f, Some(m))));
        let Some((f, at_most)) = form else {
            let at: Vec<String> = shapes
                .iter()
                .zip(points)
                .map(|(s, p)| format!("{s:?} at {p:?}"))
                .collect();
            return Err(format!(
                "{what}'s dimension {d} is not a sum of sizes and a constant ({}; sizes {})",
                at.join(", "),
                describe(ranges)
            ));
        };
        out.push(SizeDim {
            dim: d,
            sizes: (0..f.slopes.len()).filter(|&k| f.slopes[k] == 1).collect(),
            offset: f.offset,
            at_most,
        });
    }
    Ok(out)
}

/// What an input tells of the sizes: `(sizes, value)`, their sum is `value` (one size:
/// its value).
pub(crate) type Told = Vec<(Vec<usize>, i64)>;

/// What `value` (an input whose dimensions `dims` follow the sizes, `max` its type at
/// the largest sizes) tells of the sizes, where it fits the module. It is laid out in
/// the largest layout by [`leading_runs`]; elements past the sizes keep what they held
/// (nothing at these sizes reads them).
pub(crate) fn check_input(
    (dtype, shape): (DataType, &[usize]),
    max: &TensorType,
    dims: &[SizeDim],
    ranges: &[SizeRange],
) -> Result<Told, String> {
    let max_shape: Vec<usize> = max.shape.iter().map(|&d| d as usize).collect();
    if dtype != max.dtype || shape.len() != max_shape.len() {
        return Err(format!(
            "expected {} of rank {}, got {} of rank {}",
            max.dtype,
            max_shape.len(),
            dtype,
            shape.len()
        ));
    }
    let mut told: Told = Vec::new();
    for (d, (&s, &m)) in shape.iter().zip(&max_shape).enumerate() {
        let Some(form) = dims.iter().find(|f| f.dim == d) else {
            if s != m {
                return Err(format!("dimension {d} is {m}, not {s}"));
            }
            continue;
        };
        let v = s as i64 - form.offset;
        let (lo, hi) = form.sizes.iter().fold((0, 0), |(lo, hi), &k| {
            (lo + ranges[k].min, hi + ranges[k].max)
        });
        if v < lo || v > hi {
            return Err(format!(
                "dimension {d} is {s}: {} = {v} is outside the module's range {lo}..{hi}",
                sum_name(ranges, &form.sizes)
            ));
        }
        told.push((form.sizes.clone(), v));
    }
    // one input, one value per size
    for (i, (a, v)) in told.iter().enumerate() {
        if let Some((_, w)) = told[..i].iter().find(|(b, _)| b == a) {
            if w != v {
                return Err(format!(
                    "{} is {w} in one dimension and {v} in another",
                    sum_name(ranges, a)
                ));
            }
        }
    }
    Ok(told)
}

/// `past + seq`: the names of sizes `sizes`.
fn sum_name(ranges: &[SizeRange], sizes: &[usize]) -> String {
    let names: Vec<&str> = sizes.iter().map(|&k| ranges[k].name.as_str()).collect();
    names.join(" + ")
}

/// A loaded module's runtime sizes: the sizes each input given so far told.
#[derive(Clone, Debug)]
pub(crate) struct RunSize {
    pub(crate) io: DynamicIo,
    given: Vec<Option<Told>>,
    /// The sizes of the last run: its outputs'.
    ran: Option<Vec<i64>>,
}

impl RunSize {
    pub(crate) fn new(io: DynamicIo) -> RunSize {
        let given = vec![None; io.inputs.len()];
        RunSize {
            io,
            given,
            ran: None,
        }
    }

    /// Whether input `name` follows a size.
    pub(crate) fn has_input(&self, name: &str) -> bool {
        self.io.inputs.iter().any(|(n, _)| n == name)
    }

    /// Input `name` (of type `max` at the largest sizes) given a value of `dtype` and
    /// `shape`: the sizes it tells (not yet the run's: [`RunSize::take`]).
    pub(crate) fn input(
        &self,
        name: &str,
        (dtype, shape): (DataType, &[usize]),
        max: &TensorType,
    ) -> Result<Told, GraphError> {
        let dims = self
            .io
            .inputs
            .iter()
            .find(|(n, _)| n == name)
            .map_or(&[][..], |(_, d)| &d[..]);
        check_input((dtype, shape), max, dims, &self.io.ranges).map_err(|reason| {
            GraphError::Input {
                name: name.to_string(),
                reason,
            }
        })
    }

    /// Input `name` set, telling `sizes`.
    pub(crate) fn take(&mut self, name: &str, sizes: Told) {
        if let Some(k) = self.io.inputs.iter().position(|(n, _)| n == name) {
            self.given[k] = Some(sizes);
        }
    }

    /// The sizes of the run: every input that follows a size given, all agreeing (each
    /// size from the inputs that tell it alone, then every sum checked).
    pub(crate) fn sizes(&self) -> Result<Vec<i64>, GraphError> {
        let ranges = &self.io.ranges;
        let mut sizes: Vec<Option<(i64, &str)>> = vec![None; ranges.len()];
        let mut told = Vec::new();
        for ((name, _), given) in self.io.inputs.iter().zip(&self.given) {
            let Some(t) = given else {
                return Err(GraphError::Input {
                    name: name.clone(),
                    reason: format!(
                        "not set: the module runs {} from its inputs",
                        describe(ranges)
                    ),
                });
            };
            told.extend(t.iter().map(|(k, v)| (name, k, *v)));
        }
        for &(name, k, v) in told.iter().filter(|(_, k, _)| k.len() == 1) {
            match sizes[k[0]] {
                Some((w, before)) if w != v => {
                    return Err(GraphError::Input {
                        name: name.clone(),
                        reason: format!(
                            "{} is {v} here and {w} in input `{before}`",
                            ranges[k[0]].name
                        ),
                    })
                }
                _ => sizes[k[0]] = Some((v, name)),
            }
        }
        let sizes: Vec<i64> = sizes
            .iter()
            .zip(ranges)
            .map(|(s, r)| {
                // a counted size: its largest until its selection has run
                let s = s.or((r.produced).then_some((r.max, "")));
                s.map(|(v, _)| v).ok_or_else(|| {
                    GraphError::Invalid(format!("no input of the module tells {}", r.name))
                })
            })
            .collect::<Result<_, _>>()?;
        for &(name, k, v) in told.iter().filter(|(_, k, _)| k.len() > 1) {
            let sum: i64 = k.iter().map(|&j| sizes[j]).sum();
            if sum != v {
                let values: Vec<String> = k.iter().map(|&j| sizes[j].to_string()).collect();
                return Err(GraphError::Input {
                    name: name.clone(),
                    reason: format!(
                        "{} is {v} here, not {} = {sum} as the other inputs say",
                        sum_name(ranges, k),
                        values.join(" + ")
                    ),
                });
            }
        }
        Ok(sizes)
    }

    /// The sizes of a run that starts: its outputs' from now on.
    pub(crate) fn start_run(&mut self) -> Result<Vec<i64>, GraphError> {
        let sizes = self.sizes()?;
        self.ran = Some(sizes.clone());
        Ok(sizes)
    }

    /// The sizes the last run's selections counted (`values`: every size's, as the
    /// kernels read them).
    pub(crate) fn ran_with_produced(&mut self, values: &[i64]) {
        if let Some(ran) = self.ran.as_mut() {
            for (k, r) in self.io.ranges.iter().enumerate() {
                if r.produced {
                    ran[k] = values[k];
                }
            }
        }
    }

    /// The shape of output `index` (type `max` at the largest sizes) at the last run's
    /// sizes (whatever inputs were set since).
    pub(crate) fn output_shape(
        &self,
        index: usize,
        max: &TensorType,
    ) -> Result<Vec<usize>, GraphError> {
        let sizes = self.ran.as_ref().ok_or_else(|| {
            GraphError::Invalid("the module has not run: its outputs have no size yet".into())
        })?;
        let mut shape: Vec<usize> = max.shape.iter().map(|&d| d as usize).collect();
        for f in self.io.outputs.get(index).map_or(&[][..], |d| &d[..]) {
            shape[f.dim] = f.at(sizes) as usize;
        }
        Ok(shape)
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
