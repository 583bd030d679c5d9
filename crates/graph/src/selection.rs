//! Operators whose output size depends on the data (issue 61): `NonZero`,
//! `NonMaxSuppression`, `Compress` and `Unique` select some of their input's elements,
//! boxes or slices, and how many only the values tell.
//!
//! Such an operator's output has one dimension, its *count*, that is at most a *bound*
//! the input shapes give (NonZero: the input's elements; NonMaxSuppression: batches ×
//! classes × the boxes kept per class; Compress: the axis's length; Unique: the items it
//! compares, each of its outputs a node of its own). A network is built
//! with that dimension at some count (the bound, or smaller for the builds that show
//! what follows it: [`crate::dynamic`]); the module stores the output at the bound, and
//! the count becomes one of the module's runtime sizes, which the operator's host step
//! writes when it has run and every kernel after it reads, like a size an input tells.
//! There is no tensor expression for a selection: it always runs as a host step
//! ([`crate::host_ops`]), on every target, and the reference evaluation runs the same
//! code.
//!
//! The semantics are ONNX's reference's: NonZero's positions in row-major order of the
//! elements; NonMaxSuppression's boxes per batch and class by score, highest first (the
//! lower index first among equal scores), a box kept when its IoU with every box kept
//! before is at most the threshold and its score above the score threshold (when there
//! is one), corner boxes `[y1, x1, y2, x2]` in either order or centre boxes `[x, y, w,
//! h]`; Compress's slices where the condition holds (a condition shorter than the axis
//! selects none past its end); Unique's as numpy's `unique` (with `sorted = 0` in order
//! of first occurrence).

use crate::error::GraphError;
use crate::ir::TensorType;
use serde::{Deserialize, Serialize};
use tessera_ir::DataType;
use tessera_runtime::NDArray;

/// The smallest bound a selection's storage has: a build at a few counts below it is
/// what shows what follows the count.
pub const LEAST_BOUND: i64 = 3;

/// A selection: which operator, with the attributes its inputs fixed at import.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "select", rename_all = "snake_case")]
pub enum Selection {
    /// ONNX `NonZero`: int64 `[rank, count]`.
    NonZero,
    /// ONNX `NonMaxSuppression` on `boxes [B, N, 4]` and `scores [B, C, N]`: int64
    /// `[count, 3]` of (batch, class, box).
    NonMaxSuppression {
        center_point_box: bool,
        max_per_class: i64,
        iou_threshold: f32,
        score_threshold: Option<f32>,
    },
    /// ONNX `Compress` along `axis` (non-negative), or of the flattened input.
    Compress { axis: Option<usize> },
    /// One output of ONNX `Unique` along `axis` (non-negative: its distinct slices), or
    /// of the flattened input: each network output of one Unique is a node of its own.
    Unique {
        axis: Option<usize>,
        sorted: bool,
        part: UniquePart,
    },
}

/// An output of [`Selection::Unique`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UniquePart {
    /// The distinct values (slices): `[count]`, or the input with `count` slices.
    Values,
    /// Each one's first position in the input, int64 `[count]`.
    Indices,
    /// Each input element's (slice's) place among them, int64: its count is always the
    /// input's length.
    Inverse,
    /// How often each occurs, int64 `[count]`.
    Counts,
}

impl Selection {
    /// The operator's name in messages and profiles.
    pub fn name(&self) -> &'static str {
        match self {
            Selection::NonZero => "nonzero",
            Selection::NonMaxSuppression { .. } => "nms",
            Selection::Compress { .. } => "compress",
            Selection::Unique { .. } => "unique",
        }
    }

    /// How many inputs it takes.
    pub fn arity(&self) -> usize {
        match self {
            Selection::NonZero | Selection::Unique { .. } => 1,
            Selection::NonMaxSuppression { .. } | Selection::Compress { .. } => 2,
        }
    }

    /// The dimension of the output that is the count.
    pub fn count_dim(&self) -> usize {
        match self {
            Selection::NonZero => 1,
            Selection::NonMaxSuppression { .. } => 0,
            Selection::Compress { axis } => axis.unwrap_or(0),
            Selection::Unique { axis, part, .. } => match part {
                UniquePart::Values => axis.unwrap_or(0),
                _ => 0,
            },
        }
    }

    /// The most the count can be for inputs of `shapes` (at least [`LEAST_BOUND`]).
    pub fn bound(&self, shapes: &[&[i64]]) -> Result<i64, String> {
        if shapes.len() != self.arity() {
            return Err(format!(
                "takes {} inputs, not {}",
                self.arity(),
                shapes.len()
            ));
        }
        let exact = match self {
            Selection::NonZero => shapes[0].iter().product::<i64>(),
            Selection::NonMaxSuppression { max_per_class, .. } => {
                let (b, s) = (shapes[0], shapes[1]);
                if b.len() != 3 || b[2] != 4 || s.len() != 3 || s[0] != b[0] || s[2] != b[1] {
                    return Err(format!(
                        "boxes {b:?} must be [batches, boxes, 4] and scores {s:?} [batches, classes, boxes]"
                    ));
                }
                b[0] * s[1] * (*max_per_class).clamp(0, b[1])
            }
            Selection::Compress { axis } => {
                if shapes[1].len() != 1 {
                    return Err(format!("the condition {:?} must be 1-D", shapes[1]));
                }
                let n = match axis {
                    Some(a) => *shapes[0]
                        .get(*a)
                        .ok_or_else(|| format!("axis {a} of a rank-{} input", shapes[0].len()))?,
                    None => shapes[0].iter().product(),
                };
                n.min(shapes[1][0])
            }
            Selection::Unique { axis, .. } => unique_items(shapes[0], *axis)?,
        };
        Ok(exact.max(LEAST_BOUND))
    }

    /// The output's type for inputs of `types` with the count at `count`.
    pub fn output_type(&self, types: &[&TensorType], count: i64) -> Result<TensorType, String> {
        if types.len() != self.arity() {
            return Err(format!(
                "takes {} inputs, not {}",
                self.arity(),
                types.len()
            ));
        }
        let shapes: Vec<&[i64]> = types.iter().map(|t| &t.shape[..]).collect();
        let bound = self.bound(&shapes)?;
        if count < 1 || count > bound {
            return Err(format!("a count of {count} outside 1..{bound}"));
        }
        Ok(match self {
            Selection::NonZero => {
                if shapes[0].is_empty() {
                    return Err("a scalar has no positions".into());
                }
                TensorType::new(&[shapes[0].len() as i64, count], DataType::int64())
            }
            Selection::NonMaxSuppression { .. } => {
                let float = |t: &TensorType| t.dtype == DataType::float32();
                if !float(types[0]) || !float(types[1]) {
                    return Err("boxes and scores must be float32".into());
                }
                TensorType::new(&[count, 3], DataType::int64())
            }
            Selection::Compress { axis } => {
                if types[1].dtype != DataType::bool() {
                    return Err("the condition must be bool".into());
                }
                let mut shape = match axis {
                    Some(_) => shapes[0].to_vec(),
                    None => vec![0],
                };
                shape[self.count_dim()] = count;
                TensorType::new(&shape, types[0].dtype)
            }
            Selection::Unique { axis, part, .. } => match part {
                UniquePart::Values => {
                    let mut shape = match axis {
                        Some(_) => shapes[0].to_vec(),
                        None => vec![0],
                    };
                    shape[self.count_dim()] = count;
                    TensorType::new(&shape, types[0].dtype)
                }
                _ => TensorType::new(&[count], DataType::int64()),
            },
        })
    }

    /// Computes the selection on `inputs`: its output (the count's dimension the
    /// count) and the count.
    pub fn run(&self, inputs: &[&NDArray]) -> Result<(NDArray, i64), String> {
        if inputs.len() != self.arity() {
            return Err(format!(
                "takes {} inputs, not {}",
                self.arity(),
                inputs.len()
            ));
        }
        let x = inputs[0];
        if let Selection::Unique { axis, sorted, part } = self {
            return unique(x, *axis, *sorted, *part);
        }
        let (rows, count, mut shape, dtype): (Vec<Vec<u8>>, usize, Vec<usize>, DataType) =
            match self {
                Selection::NonZero => {
                    let (rows, n) = nonzero(x);
                    (rows, n, vec![x.ndim(), 0], DataType::int64())
                }
                Selection::NonMaxSuppression {
                    center_point_box,
                    max_per_class,
                    iou_threshold,
                    score_threshold,
                } => {
                    let kept = nms(
                        x,
                        inputs[1],
                        *center_point_box,
                        *max_per_class,
                        *iou_threshold,
                        *score_threshold,
                    )?;
                    let n = kept.len();
                    let rows = kept
                        .iter()
                        .map(|t| t.iter().flat_map(|v| v.to_ne_bytes()).collect())
                        .collect();
                    (rows, n, vec![0, 3], DataType::int64())
                }
                Selection::Compress { axis } => {
                    let (rows, n) = compress(x, inputs[1], *axis);
                    let shape = match axis {
                        Some(_) => x.shape().to_vec(),
                        None => vec![0],
                    };
                    (rows, n, shape, x.dtype())
                }
                Selection::Unique { .. } => unreachable!("computed above"),
            };
        let d = self.count_dim();
        shape[d] = count;
        let mut value = NDArray::zeros(dtype, &shape).map_err(|e| e.to_string())?;
        // `rows[j]` is slice j along the count dimension, row-major over the dimensions
        // before it (outer) and after it (inner)
        let outer: usize = shape[..d].iter().product();
        let inner_bytes: usize = shape[d + 1..].iter().product::<usize>() * dtype.bytes();
        let dst = value.as_bytes_mut();
        for (j, row) in rows.iter().enumerate() {
            for o in 0..outer {
                let at = (o * count + j) * inner_bytes;
                dst[at..at + inner_bytes]
                    .copy_from_slice(&row[o * inner_bytes..(o + 1) * inner_bytes]);
            }
        }
        Ok((value, count as i64))
    }
}

/// `value` laid out in an array of shape `max` (each dimension at least its own), its
/// leading block; the rest zeros (positions every gather may read).
pub(crate) fn placed(value: &NDArray, max: &[usize]) -> Result<NDArray, GraphError> {
    if value.shape() == max {
        return Ok(value.clone());
    }
    if value.ndim() != max.len() || value.shape().iter().zip(max).any(|(a, b)| a > b) {
        return Err(GraphError::Invalid(format!(
            "a value of shape {:?} does not fit in {max:?}",
            value.shape()
        )));
    }
    let mut out = NDArray::zeros(value.dtype(), max)?;
    let (src, dst) = (value.as_bytes(), out.as_bytes_mut());
    for (from, to, len) in crate::dynamic::leading_runs(value.shape(), max, value.dtype().bytes()) {
        dst[to..to + len].copy_from_slice(&src[from..from + len]);
    }
    Ok(out)
}

/// The leading block of shape `shape` of `whole` (each dimension at most its own).
pub(crate) fn cropped(whole: &NDArray, shape: &[usize]) -> Result<NDArray, GraphError> {
    if whole.shape() == shape {
        return Ok(whole.clone());
    }
    let mut out = NDArray::zeros(whole.dtype(), shape)?;
    let (src, dst) = (whole.as_bytes(), out.as_bytes_mut());
    for (to, from, len) in crate::dynamic::leading_runs(shape, whole.shape(), whole.dtype().bytes())
    {
        dst[to..to + len].copy_from_slice(&src[from..from + len]);
    }
    Ok(out)
}

/// How many items a Unique of an input of `shape` compares: its elements, or its slices
/// along `axis`.
fn unique_items(shape: &[i64], axis: Option<usize>) -> Result<i64, String> {
    match axis {
        Some(a) => shape
            .get(a)
            .copied()
            .ok_or_else(|| format!("axis {a} of a rank-{} input", shape.len())),
        None => Ok(shape.iter().product()),
    }
}

/// Unique's output `part` for `x`: its distinct elements (slices along `axis`), in
/// ascending (lexicographic) order when `sorted`, else in order of first occurrence
/// (numpy's `unique`, as ONNX defines it); returns the output and the count of distinct
/// ones (the inverse's: the input's items).
fn unique(
    x: &NDArray,
    axis: Option<usize>,
    sorted: bool,
    part: UniquePart,
) -> Result<(NDArray, i64), String> {
    let shape = x.shape().to_vec();
    let (outer, n, inner) = match axis {
        Some(a) if a < shape.len() => (
            shape[..a].iter().product::<usize>(),
            shape[a],
            shape[a + 1..].iter().product::<usize>(),
        ),
        Some(a) => return Err(format!("axis {a} of a rank-{} input", shape.len())),
        None => (1, x.len(), 1),
    };
    let values = x.to_f64_vec();
    let item = |j: usize| -> Vec<f64> {
        (0..outer)
            .flat_map(|o| (0..inner).map(move |i| (o * n + j) * inner + i))
            .map(|k| values[k])
            .collect()
    };
    let items: Vec<Vec<f64>> = (0..n).map(item).collect();
    let order = |a: &Vec<f64>, b: &Vec<f64>| {
        a.iter()
            .zip(b)
            .map(|(p, q)| p.total_cmp(q))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    };
    // the items by value (first occurrences first among equal ones), then the groups
    let mut by_value: Vec<usize> = (0..n).collect();
    by_value.sort_by(|&a, &b| order(&items[a], &items[b]));
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    for j in by_value {
        match groups.last_mut() {
            Some((first, members)) if order(&items[*first], &items[j]).is_eq() => members.push(j),
            _ => groups.push((j, vec![j])),
        }
    }
    if !sorted {
        groups.sort_by_key(|(first, _)| *first);
    }
    let count = groups.len();
    let ints = |v: Vec<i64>| NDArray::from_slice(&[v.len()], &v).map_err(|e| e.to_string());
    let out = match part {
        UniquePart::Indices => ints(groups.iter().map(|(f, _)| *f as i64).collect())?,
        UniquePart::Counts => ints(groups.iter().map(|(_, m)| m.len() as i64).collect())?,
        UniquePart::Inverse => {
            let mut place = vec![0i64; n];
            for (g, (_, members)) in groups.iter().enumerate() {
                for &j in members {
                    place[j] = g as i64;
                }
            }
            return Ok((ints(place)?, n as i64));
        }
        UniquePart::Values => {
            let es = x.dtype().bytes();
            let mut out_shape = match axis {
                Some(_) => shape.clone(),
                None => vec![0],
            };
            out_shape[axis.unwrap_or(0)] = count;
            let mut value = NDArray::zeros(x.dtype(), &out_shape).map_err(|e| e.to_string())?;
            let (src, dst) = (x.as_bytes(), value.as_bytes_mut());
            for (g, (first, _)) in groups.iter().enumerate() {
                for o in 0..outer {
                    let from = ((o * n + first) * inner) * es;
                    let to = ((o * count + g) * inner) * es;
                    dst[to..to + inner * es].copy_from_slice(&src[from..from + inner * es]);
                }
            }
            value
        }
    };
    Ok((out, count as i64))
}

/// NonZero's positions, one slice (the rank's coordinates) per nonzero element.
fn nonzero(x: &NDArray) -> (Vec<Vec<u8>>, usize) {
    let shape = x.shape().to_vec();
    let values = x.to_f64_vec();
    let mut rows = Vec::new();
    for (i, v) in values.iter().enumerate() {
        if *v == 0.0 {
            continue;
        }
        let mut rest = i;
        let mut coords = vec![0i64; shape.len()];
        for d in (0..shape.len()).rev() {
            coords[d] = (rest % shape[d]) as i64;
            rest /= shape[d];
        }
        rows.push(coords.iter().flat_map(|c| c.to_ne_bytes()).collect());
    }
    let n = rows.len();
    (rows, n)
}

/// Compress's slices along `axis` (or elements of the flattened input) where `cond`.
fn compress(x: &NDArray, cond: &NDArray, axis: Option<usize>) -> (Vec<Vec<u8>>, usize) {
    let keep: Vec<bool> = cond.to_f64_vec().iter().map(|&c| c != 0.0).collect();
    let es = x.dtype().bytes();
    let shape = x.shape();
    let (outer, n, inner) = match axis {
        Some(a) => (
            shape[..a].iter().product::<usize>(),
            shape[a],
            shape[a + 1..].iter().product::<usize>(),
        ),
        None => (1, x.len(), 1),
    };
    let src = x.as_bytes();
    let mut rows = Vec::new();
    for j in (0..n).filter(|&j| keep.get(j).copied().unwrap_or(false)) {
        let mut row = Vec::with_capacity(outer * inner * es);
        for o in 0..outer {
            let at = (o * n + j) * inner * es;
            row.extend_from_slice(&src[at..at + inner * es]);
        }
        rows.push(row);
    }
    let count = rows.len();
    (rows, count)
}

/// A box as `(x1, y1, x2, y2)` with `x1 ≤ x2`, `y1 ≤ y2`.
fn corners(b: &[f32], center: bool) -> [f32; 4] {
    if center {
        let (hw, hh) = (b[2] / 2.0, b[3] / 2.0);
        [b[0] - hw, b[1] - hh, b[0] + hw, b[1] + hh]
    } else {
        [
            b[1].min(b[3]),
            b[0].min(b[2]),
            b[1].max(b[3]),
            b[0].max(b[2]),
        ]
    }
}

/// Whether `a` suppresses `b`: their IoU is above `threshold` (ONNX's reference: no
/// overlap, or a box of no area, never suppresses).
fn suppresses(a: &[f32; 4], b: &[f32; 4], threshold: f32) -> bool {
    let (ix1, ix2) = (a[0].max(b[0]), a[2].min(b[2]));
    let (iy1, iy2) = (a[1].max(b[1]), a[3].min(b[3]));
    if ix2 <= ix1 || iy2 <= iy1 {
        return false;
    }
    let inter = (ix2 - ix1) * (iy2 - iy1);
    let area = |c: &[f32; 4]| (c[2] - c[0]) * (c[3] - c[1]);
    let (aa, ab) = (area(a), area(b));
    let union = aa + ab - inter;
    if inter <= 0.0 || aa <= 0.0 || ab <= 0.0 || union <= 0.0 {
        return false;
    }
    inter / union > threshold
}

/// NonMaxSuppression's kept (batch, class, box) triples, batch by batch and class by
/// class, each class's in the order kept.
fn nms(
    boxes: &NDArray,
    scores: &NDArray,
    center: bool,
    max_per_class: i64,
    iou_threshold: f32,
    score_threshold: Option<f32>,
) -> Result<Vec<[i64; 3]>, String> {
    let (bs, ss) = (boxes.shape(), scores.shape());
    let (batches, n, classes) = (bs[0], bs[1], ss[1]);
    let boxes = boxes.as_slice::<f32>().map_err(|e| e.to_string())?;
    let scores = scores.as_slice::<f32>().map_err(|e| e.to_string())?;
    let most = max_per_class.max(0) as usize;
    let mut kept = Vec::new();
    for b in 0..batches {
        let cs: Vec<[f32; 4]> = (0..n)
            .map(|i| corners(&boxes[(b * n + i) * 4..(b * n + i + 1) * 4], center))
            .collect();
        for c in 0..classes {
            let row = &scores[(b * classes + c) * n..(b * classes + c + 1) * n];
            let mut order: Vec<usize> = (0..n)
                .filter(|&i| score_threshold.is_none_or(|t| row[i] > t))
                .collect();
            // highest score first, the lower index first among equal ones (a stable sort)
            order.sort_by(|&i, &j| row[j].total_cmp(&row[i]));
            let mut selected: Vec<usize> = Vec::new();
            for i in order {
                if selected.len() >= most {
                    break;
                }
                if selected
                    .iter()
                    .all(|&s| !suppresses(&cs[i], &cs[s], iou_threshold))
                {
                    selected.push(i);
                    kept.push([b as i64, c as i64, i as i64]);
                }
            }
        }
    }
    Ok(kept)
}

/// A selection's host step as a graph error.
pub(crate) fn failed(sel: &Selection, why: String) -> GraphError {
    GraphError::Invalid(format!("`{}`: {why}", sel.name()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(shape: &[usize], v: &[f32]) -> NDArray {
        NDArray::from_slice(shape, v).unwrap()
    }

    #[test]
    fn nms_keeps_the_best_box_of_each_cluster_per_class() {
        // ONNX's `nonmaxsuppression_suppress_by_IOU` case: six boxes, two clusters
        let boxes = f32s(
            &[1, 6, 4],
            &[
                0.0, 0.0, 1.0, 1.0, 0.0, 0.1, 1.0, 1.1, 0.0, -0.1, 1.0, 0.9, 0.0, 10.0, 1.0, 11.0,
                0.0, 10.1, 1.0, 11.1, 0.0, 100.0, 1.0, 101.0,
            ],
        );
        let scores = f32s(&[1, 1, 6], &[0.9, 0.75, 0.6, 0.95, 0.5, 0.3]);
        let sel = Selection::NonMaxSuppression {
            center_point_box: false,
            max_per_class: 3,
            iou_threshold: 0.5,
            score_threshold: Some(0.0),
        };
        let (v, count) = sel.run(&[&boxes, &scores]).unwrap();
        assert_eq!(count, 3);
        assert_eq!(v.shape(), &[3, 3]);
        assert_eq!(v.as_slice::<i64>().unwrap(), &[0, 0, 3, 0, 0, 0, 0, 0, 5]);
        // a score threshold above every score keeps none
        let none = Selection::NonMaxSuppression {
            center_point_box: false,
            max_per_class: 3,
            iou_threshold: 0.5,
            score_threshold: Some(0.99),
        };
        let (v, count) = none.run(&[&boxes, &scores]).unwrap();
        assert_eq!((count, v.shape()), (0, &[0usize, 3][..]));
    }

    #[test]
    fn nonzero_placed_in_its_bound_pads_with_zeros() {
        let x = f32s(&[2, 2], &[1.0, 0.0, 0.0, 3.0]);
        let (v, count) = Selection::NonZero.run(&[&x]).unwrap();
        assert_eq!(count, 2);
        assert_eq!(v.as_slice::<i64>().unwrap(), &[0, 1, 0, 1]);
        let p = placed(&v, &[2, 4]).unwrap();
        assert_eq!(p.as_slice::<i64>().unwrap(), &[0, 1, 0, 0, 0, 1, 0, 0]);
        assert_eq!(
            cropped(&p, &[2, 2]).unwrap().as_slice::<i64>().unwrap(),
            &[0, 1, 0, 1]
        );
        assert!(placed(&v, &[2, 1]).is_err());
    }

    #[test]
    fn compress_takes_the_slices_the_condition_holds() {
        let x = f32s(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let cond = NDArray::from_slice::<bool>(&[2], &[false, true]).unwrap();
        let (v, count) = Selection::Compress { axis: Some(0) }
            .run(&[&x, &cond])
            .unwrap();
        assert_eq!((count, v.shape()), (1, &[1usize, 2][..]));
        assert_eq!(v.as_slice::<f32>().unwrap(), &[3.0, 4.0]);
        let (v, _) = Selection::Compress { axis: Some(1) }
            .run(&[&x, &cond])
            .unwrap();
        assert_eq!(v.as_slice::<f32>().unwrap(), &[2.0, 4.0, 6.0]);
        let (v, _) = Selection::Compress { axis: None }
            .run(&[&x, &cond])
            .unwrap();
        assert_eq!(v.as_slice::<f32>().unwrap(), &[2.0]);
    }

    #[test]
    fn unique_in_order_of_value_or_of_first_occurrence() {
        let x = f32s(&[6], &[2.0, 1.0, 1.0, 3.0, 4.0, 3.0]);
        let part = |sorted, part| {
            let (v, count) = Selection::Unique {
                axis: None,
                sorted,
                part,
            }
            .run(&[&x])
            .unwrap();
            (v.to_f64_vec(), count)
        };
        assert_eq!(
            part(true, UniquePart::Values),
            (vec![1.0, 2.0, 3.0, 4.0], 4)
        );
        assert_eq!(part(false, UniquePart::Values).0, vec![2.0, 1.0, 3.0, 4.0]);
        assert_eq!(part(false, UniquePart::Indices).0, vec![0.0, 1.0, 3.0, 4.0]);
        assert_eq!(part(false, UniquePart::Counts).0, vec![1.0, 2.0, 2.0, 1.0]);
        // the inverse's count is the input's length
        assert_eq!(
            part(false, UniquePart::Inverse),
            (vec![0.0, 1.0, 1.0, 2.0, 3.0, 2.0], 6)
        );
        // distinct rows, lexicographically
        let m = f32s(&[3, 2], &[1.0, 0.0, 0.0, 1.0, 1.0, 0.0]);
        let (v, count) = Selection::Unique {
            axis: Some(0),
            sorted: true,
            part: UniquePart::Values,
        }
        .run(&[&m])
        .unwrap();
        assert_eq!((count, v.shape()), (2, &[2usize, 2][..]));
        assert_eq!(v.as_slice::<f32>().unwrap(), &[0.0, 1.0, 1.0, 0.0]);
    }
}
