//! The losses ONNX defines as functions: `NegativeLogLikelihoodLoss` and
//! `SoftmaxCrossEntropyLoss` (a log-softmax over the classes, then the former), imported
//! as a gather of each target's score, its class weight, and the reduction (`none`,
//! `sum`, or `mean` over the weights), with `ignore_index` masked out. Evaluation
//! models export them to report a loss beside the logits.

use super::attrs::NodeCtx;
use super::{Importer, Outputs};
use crate::error::GraphError;
use crate::ir::{Binary, Op};
use petgraph::stable_graph::NodeIndex;
use tessera_ir::DataType;
use tessera_te::ops::{BinaryFn, MathFn, ReduceKind};

/// The loss of log-probabilities `x` `[N, C, d…]` at integer targets `t` `[N, d…]`.
fn nll(
    imp: &mut Importer,
    c: &NodeCtx,
    x: NodeIndex,
    t: NodeIndex,
    weight: Option<NodeIndex>,
) -> Result<NodeIndex, GraphError> {
    let (xs, ts) = (imp.shape(x), imp.shape(t));
    let mut want = xs.clone();
    if want.len() >= 2 {
        want.remove(1);
    }
    if xs.len() < 2 || ts != want || !imp.ty(t).dtype.is_integer() {
        return Err(c.bad(format!(
            "input {xs:?} and integer target {ts:?} do not fit ([N, C, d…] and [N, d…])"
        )));
    }
    let dt = imp.ty(x).dtype;
    let i64t = DataType::int64();
    let t = match imp.ty(t).dtype == i64t {
        true => t,
        false => imp.op(&c.sub("target_i64"), Op::Cast { dtype: i64t }, &[t])?,
    };
    // ignored targets gather class 0 and weigh nothing
    let valid = match c.has("ignore_index") {
        true => {
            let ii = imp.scalar(
                &c.sub("ignore_index"),
                i64t,
                c.int("ignore_index", 0) as f64,
            )?;
            let eq = imp.op(&c.sub("ignored"), Op::BinaryFn(BinaryFn::Equal), &[t, ii])?;
            Some(imp.op(&c.sub("kept"), Op::Math(MathFn::Not), &[eq])?)
        }
        false => None,
    };
    let safe = match valid {
        Some(v) => {
            let zero = imp.scalar(&c.sub("class0"), i64t, 0.0)?;
            imp.op(&c.sub("target_safe"), Op::Where, &[v, t, zero])?
        }
        None => t,
    };
    let mut idx_shape = ts.clone();
    idx_shape.insert(1, 1);
    let idx = imp.reshape(&c.sub("target_index"), safe, idx_shape)?;
    let picked = imp.op(&c.sub("picked"), Op::GatherElements { axis: 1 }, &[x, idx])?;
    let picked = imp.reshape(&c.sub("picked_flat"), picked, ts.clone())?;
    let neg = imp.op(&c.sub("neg"), Op::Math(MathFn::Neg), &[picked])?;
    let w = match weight {
        Some(w) => Some(imp.op(&c.sub("class_weight"), Op::Take { axis: 0 }, &[w, safe])?),
        None => None,
    };
    let w = match (w, valid) {
        (Some(w), Some(v)) => {
            let zero = imp.scalar(&c.sub("weight0"), dt, 0.0)?;
            Some(imp.op(&c.sub("weight_kept"), Op::Where, &[v, w, zero])?)
        }
        (None, Some(v)) => Some(imp.op(&c.sub("weight_kept"), Op::Cast { dtype: dt }, &[v])?),
        (w, None) => w,
    };
    let loss = match w {
        Some(w) => imp.op(&c.sub("weighted"), Op::Binary(Binary::Mul), &[neg, w])?,
        None => neg,
    };
    let total = |imp: &mut Importer, tag: &str, v: NodeIndex| {
        let op = Op::Reduce {
            kind: ReduceKind::Sum,
            axes: vec![],
            keepdims: false,
        };
        imp.op(&c.sub(tag), op, &[v])
    };
    match c.string("reduction").as_deref().unwrap_or("mean") {
        "none" => Ok(loss),
        "sum" => total(imp, "sum", loss),
        "mean" => {
            let s = total(imp, "sum", loss)?;
            let d = match w {
                Some(w) => total(imp, "weight_sum", w)?,
                None => imp.scalar(&c.sub("count"), dt, ts.iter().product::<i64>() as f64)?,
            };
            imp.op(&c.sub("mean"), Op::Binary(Binary::Div), &[s, d])
        }
        other => Err(c.bad(format!("reduction `{other}` is not defined"))),
    }
}

/// `NegativeLogLikelihoodLoss`.
pub(super) fn negative_log_likelihood(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    Ok(vec![nll(imp, c, c.input(0)?, c.input(1)?, c.opt(2))?])
}

/// `SoftmaxCrossEntropyLoss`: the loss and, when asked, the log-probabilities.
pub(super) fn softmax_cross_entropy(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let lp = imp.op(&c.sub("log_prob"), Op::LogSoftmax { axis: 1 }, &[x])?;
    let loss = nll(imp, c, lp, c.input(1)?, c.opt(2))?;
    Ok(vec![loss, lp])
}
