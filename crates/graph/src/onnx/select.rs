//! The operators whose output size depends on the data: `NonZero`,
//! `NonMaxSuppression`, `Compress` and `Unique` (an output each) become [`Op::Select`] nodes built at the count
//! [`ImportOptions::counts`](super::ImportOptions::counts) gives them (their bound when
//! it gives none; [`crate::selection`]). NonMaxSuppression's limit and thresholds must
//! be known at import (constants, or inputs given a value when building).

use super::attrs::NodeCtx;
use super::{Importer, Outputs};
use crate::ir::Op;
use crate::selection::{Selection, UniquePart};
use petgraph::stable_graph::NodeIndex;

/// One selection on `ins`, at the count asked for (at most its bound).
fn selection(imp: &mut Importer, c: &NodeCtx, how: Selection, ins: &[NodeIndex]) -> Outputs {
    Ok(vec![selection_named(imp, c, &c.name, how, ins)?])
}

/// [`selection`] of node `name`.
fn selection_named(
    imp: &mut Importer,
    c: &NodeCtx,
    name: &str,
    how: Selection,
    ins: &[NodeIndex],
) -> Result<NodeIndex, crate::error::GraphError> {
    let shapes: Vec<Vec<i64>> = ins.iter().map(|&i| imp.shape(i)).collect();
    let refs: Vec<&[i64]> = shapes.iter().map(|s| &s[..]).collect();
    let bound = how.bound(&refs).map_err(|why| c.bad(why))?;
    let count = imp
        .counts
        .get(name)
        .copied()
        .unwrap_or(bound)
        .clamp(1, bound);
    imp.op(
        name,
        Op::Select {
            how,
            count,
            size: None,
        },
        ins,
    )
}

/// `NonZero` (opsets 9, 13).
pub(super) fn non_zero(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    selection(imp, c, Selection::NonZero, &[x])
}

/// `NonMaxSuppression` (opsets 10, 11): no limit given keeps no box, as ONNX says.
pub(super) fn non_max_suppression(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let (boxes, scores) = (c.input(0)?, c.input(1)?);
    let first = |v: Option<Vec<f64>>| v.and_then(|v| v.first().copied());
    let max_per_class = first(imp.const_floats(c, 2, "max_output_boxes_per_class")?)
        .map_or(0, |v| v.min(i64::MAX as f64) as i64);
    let iou_threshold = first(imp.const_floats(c, 3, "iou_threshold")?).unwrap_or(0.0) as f32;
    let score_threshold = first(imp.const_floats(c, 4, "score_threshold")?).map(|v| v as f32);
    let how = Selection::NonMaxSuppression {
        center_point_box: c.int("center_point_box", 0) != 0,
        max_per_class,
        iou_threshold,
        score_threshold,
    };
    selection(imp, c, how, &[boxes, scores])
}

/// `Compress` (opsets 9, 11, 28: 28 adds element types): along `axis`, or of the flattened input.
pub(super) fn compress(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let (x, cond) = (c.input(0)?, c.input(1)?);
    let axis = optional_axis(c, imp.shape(x).len())?;
    selection(imp, c, Selection::Compress { axis }, &[x, cond])
}

/// `Unique` (opsets 11, 28: 28 adds element types): each of its outputs a selection of its own (the inverse's count
/// always the input's length).
pub(super) fn unique(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let shape = imp.shape(x);
    let axis = optional_axis(c, shape.len())?;
    let sorted = c.int("sorted", 1) != 0;
    let items = match axis {
        Some(a) => shape[a],
        None => shape.iter().product(),
    };
    let mut outs = Vec::new();
    for (slot, part) in [
        UniquePart::Values,
        UniquePart::Indices,
        UniquePart::Inverse,
        UniquePart::Counts,
    ]
    .into_iter()
    .enumerate()
    {
        let name = match slot {
            0 => c.name.clone(),
            _ => c.sub(&format!("{part:?}").to_lowercase()),
        };
        let how = Selection::Unique { axis, sorted, part };
        outs.push(match part {
            // as long as the input, whatever the data
            UniquePart::Inverse => imp.op(
                &name,
                Op::Select {
                    how,
                    count: items.max(1),
                    size: None,
                },
                &[x],
            )?,
            _ => selection_named(imp, c, &name, how, &[x])?,
        });
    }
    Ok(outs)
}

/// The `axis` attribute of `c` on an input of `rank` dimensions, non-negative; `None`
/// where it is absent (the input flattened).
fn optional_axis(c: &NodeCtx, rank: usize) -> Result<Option<usize>, crate::error::GraphError> {
    if !c.has("axis") {
        return Ok(None);
    }
    let (a, rank) = (c.int("axis", 0), rank as i64);
    let a = if a < 0 { a + rank } else { a };
    if !(0..rank).contains(&a) {
        return Err(c.bad(format!("axis {a} of a rank-{rank} input")));
    }
    Ok(Some(a as usize))
}
