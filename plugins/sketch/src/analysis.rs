//! What the sketch rules ask of a stage, answered from the schedule a state replays to
//! (TVM's `AccessAnalyzer` and the predicates of `search_policy/utils.h`): is it
//! elementwise and cheap enough to always inline, does it reuse data enough to need
//! multi-level tiling, which stages consume it, does one consumer match it element by
//! element, how long are its spatial and reduction loops.

use std::collections::HashSet;
use tessera_ir::visit::post_order_visit;
use tessera_ir::ThreadAxis;
use tessera_ir::{Buffer, Expr, ExprNode, Var};
use tessera_te::ops::SIMPLIFY_CONST_TENSOR_INDICES;
use tessera_te::{Annotation, Attach, Schedule, Tensor};

/// Every read of a tensor in `t`'s body: the buffer and the index expressions.
pub fn reads(t: &Tensor) -> Vec<(Buffer, Vec<Expr>)> {
    let mut out = Vec::new();
    if let Some(body) = t.body() {
        for e in body.exprs() {
            post_order_visit(e, &mut |x| {
                if let ExprNode::Load { buffer, indices } = x.node() {
                    out.push((buffer.clone(), indices.clone()));
                }
            });
        }
    }
    out
}

fn vars_of(e: &Expr, into: &mut HashSet<Var>) {
    post_order_visit(e, &mut |x| {
        if let ExprNode::Var(v) = x.node() {
            into.insert(v.clone());
        }
    });
}

/// Whether `t`'s body branches (a `Select`) or calls an intrinsic (`exp`, `tanh`, …):
/// TVM does not inline those on the CPU without tuning where they go.
fn branches_or_expensive(t: &Tensor) -> bool {
    let mut found = false;
    if let Some(body) = t.body() {
        for e in body.exprs() {
            post_order_visit(e, &mut |x| {
                if matches!(x.node(), ExprNode::Select { .. } | ExprNode::Call { .. }) {
                    found = true;
                }
            });
        }
    }
    found
}

/// A read whose every index is one of the stage's axes, each at most once (a
/// transposition or a broadcast counts; `i + 1`, `2 * i` do not).
fn is_simple_access(axes: &[Var], indices: &[Expr]) -> bool {
    let mut seen = HashSet::new();
    indices.iter().all(|ix| match ix.node() {
        ExprNode::Var(v) => axes.contains(v) && seen.insert(v.clone()),
        ExprNode::IntImm { .. } => true,
        _ => false,
    })
}

fn axis_vars(t: &Tensor) -> Vec<Var> {
    t.axis().iter().map(|a| a.var().clone()).collect()
}

/// TVM's `IsStrictlyInlineable`: a computed, non-reducing stage whose reads are all
/// simple, with no branch and no expensive call.
pub fn is_strictly_inlineable(t: &Tensor) -> bool {
    if t.is_placeholder() || !t.reduce_axis().is_empty() || t.axis().is_empty() {
        return false;
    }
    // A constant table (reads nothing, e.g. a Winograd transform matrix): its selects
    // fold away once the loops that index it are unrolled.
    if t.inputs().is_empty() {
        return true;
    }
    let axes = axis_vars(t);
    reads(t).iter().all(|(_, ix)| is_simple_access(&axes, ix)) && !branches_or_expensive(t)
}

/// TVM's `NeedsMultilevelTiling`: some read leaves out at least one of the stage's
/// spatial axes (the data it reads is reused across that axis), and the stage reduces,
/// or two reads do.
pub fn needs_multi_level_tiling(t: &Tensor) -> bool {
    // TVM: no multi-level tiling for the "fake reductions" over constant matrices
    if t.is_placeholder() || const_tensor_indices(t).is_some() {
        return false;
    }
    let axes = axis_vars(t);
    let reduces = !t.reduce_axis().is_empty();
    let mut missing = 0;
    for (_, ix) in reads(t) {
        let mut vars = HashSet::new();
        for e in &ix {
            vars_of(e, &mut vars);
        }
        if axes.iter().any(|a| !vars.contains(a)) {
            missing += 1;
        }
        if missing >= 2 || (missing >= 1 && reduces) {
            return true;
        }
    }
    false
}

/// The products of the stage's spatial and of its reduction extents.
pub fn space_and_reduce_lengths(t: &Tensor) -> (i64, i64) {
    let len = |ivs: &[tessera_te::IterVar]| ivs.iter().map(|a| a.extent().unwrap_or(1)).product();
    (len(t.axis()), len(t.reduce_axis()))
}

/// TVM's `NeedsRfactor` for a CPU of `num_cores`: a tiled reduction whose spatial loops
/// give too little parallelism, or a plain reduction longer than the core count.
pub fn needs_rfactor(t: &Tensor, num_cores: i64) -> bool {
    if t.is_placeholder() || t.reduce_axis().is_empty() {
        return false;
    }
    let (space, reduce) = space_and_reduce_lengths(t);
    if needs_multi_level_tiling(t) {
        !(space > reduce || space > num_cores * 16)
    } else {
        reduce > 1 && reduce > num_cores
    }
}

/// The stages that read stage `i`'s tensor, looking through inlined stages to their
/// own consumers (TVM's `GetConsumers`), in stage order.
pub fn consumers(sch: &Schedule, i: usize) -> Vec<usize> {
    let stages = sch.stages();
    let mut out: Vec<usize> = Vec::new();
    let mut todo = vec![stages[i].op.clone()];
    let mut seen = HashSet::new();
    while let Some(t) = todo.pop() {
        if !seen.insert(t.clone()) {
            continue;
        }
        for (j, s) in stages.iter().enumerate() {
            if s.op.inputs().contains(&t) {
                if s.attach == Attach::Inline {
                    todo.push(s.op.clone());
                } else if !out.contains(&j) {
                    out.push(j);
                }
            }
        }
    }
    out.sort_unstable();
    out
}

/// TVM's `ElementWiseMatch`: `consumer` has `producer`'s shape and reads it only at its
/// own axes in order (through inlined stages between them, each of which must also
/// match).
fn elementwise_match(sch: &Schedule, producer: &Tensor, consumer: &Tensor) -> bool {
    if producer.shape() != consumer.shape() || consumer.is_placeholder() {
        return false;
    }
    let axes: Vec<Expr> = consumer.axis().iter().map(|a| a.expr()).collect();
    let direct = reads(consumer)
        .into_iter()
        .filter(|(b, _)| b == producer.buffer())
        .collect::<Vec<_>>();
    if !direct.is_empty() {
        return direct.iter().all(|(_, ix)| ix == &axes);
    }
    // read through an inlined intermediate that itself matches
    sch.stages().iter().any(|s| {
        s.attach == Attach::Inline
            && s.op.inputs().contains(producer)
            && consumer.inputs().contains(&s.op)
            && elementwise_match(sch, producer, &s.op)
            && elementwise_match(sch, &s.op, consumer)
    })
}

/// TVM's `HasSingleElementwiseMatchedConsumer`: stage `i` has exactly one consumer, it
/// matches element by element, and it is not already tiled for something else. Returns
/// that consumer.
pub fn single_elementwise_consumer(sch: &Schedule, i: usize) -> Option<usize> {
    let cs = consumers(sch, i);
    let [c] = cs[..] else { return None };
    let stages = sch.stages();
    let (p, q) = (&stages[i].op, &stages[c].op);
    let untouched = stages[c].relations.is_empty() && stages[c].attach == Attach::Root;
    (untouched && q.reduce_axis().is_empty() && elementwise_match(sch, p, q)).then_some(c)
}

/// TVM's `HasCacheWriteStage` for stage `i`: stage `i` is the `.local` cache that a
/// cache write made of the stage after it.
pub fn is_cache_write_stage(sch: &Schedule, i: usize) -> bool {
    let stages = sch.stages();
    stages.get(i + 1).is_some_and(|next| {
        stages[i].name() == format!("{}.local", next.name())
            && next.op.inputs().contains(&stages[i].op)
    })
}

/// Whether stage `i` computes one of the DAG's outputs.
pub fn is_output(sch: &Schedule, i: usize) -> bool {
    sch.stages()[i].is_output
}

/// The axes (by name) that index constant matrices in `t`, from its
/// `auto_scheduler_simplify_const_tensor_indices` attribute (the Winograd transforms).
pub fn const_tensor_indices(t: &Tensor) -> Option<&[String]> {
    t.attrs()
        .get(SIMPLIFY_CONST_TENSOR_INDICES)
        .map(|v| v.as_slice())
}

/// The stages stage `i` reads, looking through inlined stages to what they read (TVM's
/// `GetProducers`), in stage order.
pub fn producers(sch: &Schedule, i: usize) -> Vec<usize> {
    let stages = sch.stages();
    let mut out = Vec::new();
    let mut todo: Vec<Tensor> = stages[i].op.inputs().to_vec();
    let mut seen = HashSet::new();
    while let Some(t) = todo.pop() {
        if !seen.insert(t.clone()) {
            continue;
        }
        if let Some(j) = stages.iter().position(|s| s.op == t) {
            if stages[j].attach == Attach::Inline {
                todo.extend(stages[j].op.inputs().iter().cloned());
            } else if !out.contains(&j) {
                out.push(j);
            }
        }
    }
    out.sort_unstable();
    out
}

/// The stages stage `i` reads directly (TVM's `GetDirectProducers`).
pub fn direct_producers(sch: &Schedule, i: usize) -> Vec<usize> {
    let stages = sch.stages();
    let inputs = stages[i].op.inputs();
    (0..stages.len())
        .filter(|&j| inputs.contains(&stages[j].op))
        .collect()
}

/// TVM's `HasCrossThreadReduction`: a reduction loop of stage `i`, or of a stage
/// computed at one of its loops, is bound to `threadIdx.x`.
pub fn has_cross_thread_reduction(sch: &Schedule, i: usize) -> bool {
    let reduces_across = |st: &tessera_te::Stage| {
        st.leaf_iter_vars.iter().any(|iv| {
            iv.is_reduce() && st.annotation(iv) == Annotation::Bind(ThreadAxis::ThreadIdxX)
        })
    };
    let st = &sch.stages()[i];
    reduces_across(st)
        || sch.stages().iter().any(|c| {
            matches!(&c.attach, tessera_te::Attach::At { target, .. } if target == st.op.buffer())
                && reduces_across(c)
        })
}

/// TVM's `GetNumCommonOuterIterator` for a producer read directly by `consumer`: how
/// many of the consumer's outer axes index the producer at the same position in every
/// read (0 when it does not read it directly).
pub fn num_common_outer(sch: &Schedule, producer: usize, consumer: usize) -> usize {
    let stages = sch.stages();
    let (p, c) = (&stages[producer].op, &stages[consumer].op);
    let axes: Vec<Expr> = c.axis().iter().map(|a| a.expr()).collect();
    reads(c)
        .into_iter()
        .filter(|(b, _)| b == p.buffer())
        .map(|(_, ix)| ix.iter().zip(&axes).take_while(|(a, b)| a == b).count())
        .min()
        .unwrap_or(0)
}
