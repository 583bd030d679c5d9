//! Operators a build runs on the host, as a step of its own, instead of as a kernel: a
//! CPU build's TopK, and every target's selections ([`crate::selection`]), whose output
//! size only the data tells.
//!
//! A tensor expression computes every output element from a fixed recipe; an operator
//! whose best algorithm is a data-dependent one — a partial sort — is slow in that
//! form. `TopK` as a tensor expression picks its `k` elements by `k` passes over the axis
//! (`tessera_te::ops::topk`): a sampler's top 50 of a 50,257-token vocabulary took 6 ms,
//! where onnxruntime's partial sort takes 0.04. TVM computes it with an extern sort
//! (`tvm.contrib.sort`) for the same reason. Here the executor runs such a node as a
//! *host step*: it reads the input from the device, computes on the host
//! ([`HostOp::run`]: a heap of the `k` first elements so far, whose last one most elements
//! of a long row fail to beat in one comparison, then a sort of the `k`: `O(n log k)` at
//! worst a row), and writes the output back — both of a TopK's outputs from one selection
//! where a network uses both (two nodes). Host steps are no tuning tasks
//! and keep a run out of the device's launch sequences (their launches are made one by
//! one). Other targets keep the tensor expression, which their devices run as kernels.
//!
//! The order is ONNX's: the larger (smaller) value first, the lower position first among
//! equal ones; a NaN counts as larger than every number (PyTorch's and NumPy's order).

use crate::dynamic::SizeDim;
use crate::error::GraphError;
use crate::fuse::Group;
use crate::ir::{Graph, Op, TensorType};
use crate::selection::Selection;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use tessera_backends::{Target, TargetKind};
use tessera_runtime::{Element, NDArray};
use tessera_te::ops::TopKOutput;

/// A host step: its operator and the types of its inputs and outputs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostStep {
    pub op: HostOp,
    /// At the largest sizes, where values follow runtime sizes.
    pub inputs: Vec<TensorType>,
    /// In the order of the operator's outputs.
    pub outputs: Vec<TensorType>,
    /// Where values follow runtime sizes ([`crate::dynamic`]): per input, then per
    /// output, the dimensions that do (a selection's count among them); empty where
    /// none does. The step reads its inputs' leading blocks at the run's sizes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dims: Vec<Vec<SizeDim>>,
    /// A TopK whose k follows runtime sizes (`min(1000, count)`): the size it writes its
    /// k to, which the values after it follow ([`crate::dynamic::with_top_k_counts`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<usize>,
}

/// One output of a host `TopK`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TopKPart {
    Values,
    /// The positions, int64.
    Indices,
}

/// An operator a host step computes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum HostOp {
    /// ONNX's `TopK` along `axis` (non-negative), writing `parts` in order: a network's
    /// values and positions of one TopK are two nodes, and one selection writes both.
    TopK {
        axis: usize,
        k: usize,
        largest: bool,
        parts: Vec<TopKPart>,
    },
    /// A selection ([`crate::selection`]) on every target, whose count is the module's
    /// runtime size `size` (set where the network is compiled for its sizes:
    /// [`crate::dynamic`]).
    Select {
        how: Selection,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        size: Option<usize>,
    },
}

/// What a host step computed: its outputs, and the runtime size it tells, if any
/// (`(size, value)`).
pub struct HostResult {
    pub outputs: Vec<NDArray>,
    pub size: Option<(usize, i64)>,
}

impl HostOp {
    /// The host operator that computes `group` for `target`, if it is one: a lone
    /// selection on any target, a lone `TopK` node on a CPU target.
    pub fn of(graph: &Graph, group: &Group, target: &Target) -> Option<HostOp> {
        let [node] = group.nodes[..] else {
            return None;
        };
        if let Op::Select { how, size, .. } = &graph.node(node).op {
            return Some(HostOp::Select {
                how: how.clone(),
                size: *size,
            });
        }
        let Op::TopK {
            axis,
            k,
            largest,
            output,
            on_host,
        } = graph.node(node).op
        else {
            return None;
        };
        if target.kind != TargetKind::CPU && !on_host {
            return None;
        }
        let [input] = graph.args(node)[..] else {
            return None;
        };
        let rank = graph.node(input).ty.shape.len() as i64;
        let axis = if axis < 0 { axis + rank } else { axis };
        Some(HostOp::TopK {
            axis: usize::try_from(axis).ok()?,
            k: usize::try_from(k).ok()?,
            largest,
            parts: vec![match output {
                TopKOutput::Values => TopKPart::Values,
                TopKOutput::Indices => TopKPart::Indices,
            }],
        })
    }

    /// `self` and `other` as one operator writing both's outputs (this one's first),
    /// where they are the same selection: two TopKs of one input and attributes.
    pub fn merged(&self, other: &HostOp) -> Option<HostOp> {
        let (
            HostOp::TopK {
                axis,
                k,
                largest,
                parts,
            },
            HostOp::TopK {
                axis: a2,
                k: k2,
                largest: l2,
                parts: p2,
            },
        ) = (self, other)
        else {
            return None;
        };
        (axis == a2 && k == k2 && largest == l2).then(|| HostOp::TopK {
            axis: *axis,
            k: *k,
            largest: *largest,
            parts: parts.iter().chain(p2).copied().collect(),
        })
    }

    /// The operator's name in messages and profiles.
    pub fn name(&self) -> &'static str {
        match self {
            HostOp::TopK { .. } => "topk",
            HostOp::Select { how, .. } => how.name(),
        }
    }

    /// Computes the operator on `inputs`; the results have the types `outs`.
    pub fn run(&self, inputs: &[NDArray], outs: &[TensorType]) -> Result<Vec<NDArray>, GraphError> {
        self.run_step(inputs, outs).map(|r| r.outputs)
    }

    /// [`HostOp::run`], with the runtime size a selection tells.
    pub fn run_step(
        &self,
        inputs: &[NDArray],
        outs: &[TensorType],
    ) -> Result<HostResult, GraphError> {
        let bad =
            |reason: String| GraphError::Invalid(format!("host step `{}`: {reason}", self.name()));
        let (axis, k, largest, parts) = match self {
            HostOp::TopK {
                axis,
                k,
                largest,
                parts,
            } => (*axis, *k, *largest, parts),
            HostOp::Select { how, size } => {
                let [out] = outs else {
                    return Err(bad(format!(
                        "writes one output, the plan has {}",
                        outs.len()
                    )));
                };
                let refs: Vec<&NDArray> = inputs.iter().collect();
                let (value, count) = how.run(&refs).map_err(bad)?;
                let room = out.shape.get(how.count_dim()).copied().unwrap_or(0);
                if count > room {
                    return Err(bad(format!(
                        "selected {count}, more than the {room} the plan has room for"
                    )));
                }
                return Ok(HostResult {
                    outputs: vec![value],
                    size: size.map(|k| (k, count)),
                });
            }
        };
        let [x] = inputs else {
            return Err(bad(format!("takes one input, got {}", inputs.len())));
        };
        if outs.len() != parts.len() {
            return Err(bad(format!(
                "writes {} outputs, the plan has {}",
                parts.len(),
                outs.len()
            )));
        }
        let shape = x.shape().to_vec();
        let n = *shape
            .get(axis)
            .ok_or_else(|| bad(format!("axis {axis} of a rank-{} input", shape.len())))?;
        // the outputs' axis: `k`, or where it follows runtime sizes, this run's
        let k = outs
            .first()
            .and_then(|o| o.shape.get(axis))
            .map_or(k, |&v| v as usize);
        if k > n {
            return Err(bad(format!("k = {k} on an axis of {n}")));
        }
        let mut out_shape = shape.clone();
        out_shape[axis] = k;
        if k == 0 {
            // a count of none: empty outputs
            let outputs = outs
                .iter()
                .map(|o| NDArray::zeros(o.dtype, &out_shape))
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(HostResult {
                outputs,
                size: None,
            });
        }
        for out in outs {
            let want = out.shape.iter().map(|&d| d as usize).collect::<Vec<_>>();
            if want != out_shape {
                return Err(bad(format!(
                    "computes {out_shape:?}, the plan has {want:?}"
                )));
            }
        }
        let rows = Rows {
            outer: shape[..axis].iter().product(),
            n,
            inner: shape[axis + 1..].iter().product(),
            k,
            largest,
        };
        macro_rules! typed {
            ($($t:ty),*) => {
                match x.dtype() {
                    $(d if d == <$t as Element>::DTYPE => {
                        let (values, positions) = rows.top_k(x.as_slice::<$t>()?);
                        parts
                            .iter()
                            .map(|p| match p {
                                TopKPart::Values => NDArray::from_slice(&out_shape, &values),
                                TopKPart::Indices => NDArray::from_slice(&out_shape, &positions),
                            })
                            .collect::<Result<Vec<_>, _>>()
                    })*
                    d => return Err(bad(format!("no order for {d}"))),
                }
            };
        }
        let results: Vec<NDArray> =
            typed!(f32, f64, half::f16, i8, i16, i32, i64, u8, u16, u32, u64)?;
        for (result, out) in results.iter().zip(outs) {
            if result.dtype() != out.dtype {
                return Err(bad(format!(
                    "computes {}, the plan has {}",
                    result.dtype(),
                    out.dtype
                )));
            }
        }
        Ok(HostResult {
            outputs: results,
            size: None,
        })
    }
}

/// The rows of a top-k: `outer × inner` rows of `n` elements, `inner` apart.
struct Rows {
    outer: usize,
    n: usize,
    inner: usize,
    k: usize,
    largest: bool,
}

/// `a` against `b`, a NaN larger than every number and equal to a NaN.
fn total<T: PartialOrd>(a: &T, b: &T) -> Ordering {
    a.partial_cmp(b).unwrap_or_else(|| {
        let nan = |v: &T| v.partial_cmp(v).is_none();
        nan(a).cmp(&nan(b))
    })
}

/// The elements of a row tested against the heap's root at once.
const BLOCK: usize = 64;

/// Restores the heap below `i` of `heap` (each parent after its children in `order`).
fn sift_down<E>(heap: &mut [E], mut i: usize, order: &impl Fn(&E, &E) -> Ordering) {
    loop {
        let (l, r) = (2 * i + 1, 2 * i + 2);
        let mut last = i;
        for c in [l, r] {
            if c < heap.len() && order(&heap[c], &heap[last]) == Ordering::Greater {
                last = c;
            }
        }
        if last == i {
            return;
        }
        heap.swap(i, last);
        i = last;
    }
}

impl Rows {
    /// The `k` first elements of each row in ONNX's order, and their positions, laid out
    /// as the output (`outer × k × inner`).
    fn top_k<T: Element + PartialOrd>(&self, x: &[T]) -> (Vec<T>, Vec<i64>) {
        let Rows {
            outer,
            n,
            inner,
            k,
            largest,
        } = *self;
        let size = outer * k * inner;
        let mut values = Vec::with_capacity(size);
        let mut positions = Vec::with_capacity(size);
        // (filled in output order below: row by row, then transposed into place)
        let mut picked: Vec<(T, usize)> = Vec::with_capacity(outer * inner * k);
        let mut best: Vec<(T, usize)> = Vec::with_capacity(k);
        // ONNX's order: `Less` where `a` comes first
        let order = |a: &(T, usize), b: &(T, usize)| {
            let by_value = if largest {
                total(&b.0, &a.0)
            } else {
                total(&a.0, &b.0)
            };
            by_value.then(a.1.cmp(&b.1))
        };
        for o in 0..outer {
            for i in 0..inner {
                let at = |j: usize| (x[(o * n + j) * inner + i], j);
                // the first k, as a heap with the last of them in order at its root;
                // then each later element replaces the root where it comes before it
                // (one comparison for most elements of a long row)
                best.clear();
                best.extend((0..k).map(at));
                for root in (0..k / 2).rev() {
                    sift_down(&mut best, root, &order);
                }
                let mut j = k;
                while j < n {
                    // a block none of whose elements can beat the root (each at most
                    // equal to it, and later) is passed over in one vectorizable test
                    let end = (j + BLOCK).min(n);
                    if inner == 1 {
                        let root = best[0].0;
                        let block = &x[o * n + j..o * n + end];
                        // (negated so that a NaN, which compares with nothing, beats)
                        #[allow(clippy::neg_cmp_op_on_partial_ord)]
                        let beats = |v: &T| {
                            if largest {
                                !(*v <= root)
                            } else {
                                !(*v >= root)
                            }
                        };
                        if !block.iter().fold(false, |any, v| any | beats(v)) {
                            j = end;
                            continue;
                        }
                    }
                    for j in j..end {
                        let e = at(j);
                        if order(&e, &best[0]) == Ordering::Less {
                            best[0] = e;
                            sift_down(&mut best, 0, &order);
                        }
                    }
                    j = end;
                }
                best.sort_unstable_by(order);
                picked.extend_from_slice(&best);
            }
        }
        for o in 0..outer {
            for j in 0..k {
                for i in 0..inner {
                    let (v, p) = picked[(o * inner + i) * k + j];
                    values.push(v);
                    positions.push(p as i64);
                }
            }
        }
        debug_assert_eq!(values.len(), size);
        (values, positions)
    }
}
