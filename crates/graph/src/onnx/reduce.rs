//! The reductions `ReduceSum`, `ReduceMean`, `ReduceMax`, `ReduceMin`, `ReduceProd`,
//! `ReduceL1`, `ReduceL2`, `ReduceSumSquare`, `ReduceLogSumExp` and `ReduceLogSum` (the
//! log of the sum): axes as an
//! attribute, or as an input (`ReduceSum` from opset 13, the others from 18), with
//! `keepdims` and `noop_with_empty_axes`. The mean over the spatial axes of a 4-D tensor
//! kept as 1×1 is global average pooling, which the layout pass and the schedules know.

use super::attrs::NodeCtx;
use super::{Importer, Outputs};
use crate::ir::{Layout, Op};
use tessera_te::ops::{MathFn, PoolType, ReduceKind};

pub(super) fn reduce(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let kind = match c.op {
        "ReduceSum" => ReduceKind::Sum,
        "ReduceMean" => ReduceKind::Mean,
        "ReduceMax" => ReduceKind::Max,
        "ReduceMin" => ReduceKind::Min,
        "ReduceProd" => ReduceKind::Prod,
        "ReduceL1" => ReduceKind::L1,
        "ReduceL2" => ReduceKind::L2,
        "ReduceSumSquare" => ReduceKind::SumSquare,
        "ReduceLogSum" => ReduceKind::Sum,
        _ => ReduceKind::LogSumExp,
    };
    let log = c.op == "ReduceLogSum";
    let x = c.input(0)?;
    let axes_as_input = imp.opset >= 18 || (imp.opset >= 13 && kind == ReduceKind::Sum);
    let axes = if axes_as_input {
        imp.const_ints(c, 1, "the axes")?
    } else {
        c.ints("axes")
    }
    .unwrap_or_default();
    if axes.is_empty() && c.int("noop_with_empty_axes", 0) != 0 {
        return Ok(vec![x]);
    }
    let keepdims = c.int("keepdims", 1) != 0;
    let rank = imp.rank(x) as i64;
    let mut norm: Vec<i64> = axes
        .iter()
        .map(|&a| if a < 0 { a + rank } else { a })
        .collect();
    norm.sort_unstable();
    if kind == ReduceKind::Mean && rank == 4 && norm == [2, 3] && imp.ty(x).dtype.is_float() {
        let op = Op::GlobalPool2d {
            kind: PoolType::Avg,
            layout: Layout::Nchw,
        };
        let gp = imp.op(&c.name, op, &[x])?;
        if keepdims {
            return Ok(vec![gp]);
        }
        let s = imp.shape(x)[..2].to_vec();
        return Ok(vec![imp.reshape(&c.sub("squeeze"), gp, s)?]);
    }
    let op = Op::Reduce {
        kind,
        axes,
        keepdims,
    };
    if log {
        let total = imp.op(&c.sub("sum"), op, &[x])?;
        return Ok(vec![imp.op(&c.name, Op::Math(MathFn::Log), &[total])?]);
    }
    Ok(vec![imp.op(&c.name, op, &[x])?])
}
