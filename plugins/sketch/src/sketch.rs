//! Sketch generation (Ansor's first level): the derivation rules applied to every stage
//! of a compute DAG, from the last stage to the first, each rule turning one partial
//! state into zero or more new ones. A sketch fixes the structure of a program (which
//! stages are inlined, tiled, cached, factored, where a consumer is fused) and leaves the
//! tile sizes unfilled (`None` split lengths); the annotation pass fills them in.
//!
//! The rules and their order for the CPU are TVM's (`sketch_policy_rules.cc`): always
//! inline, add rfactor, add cache write, multi-level tiling with consumer fusion,
//! multi-level tiling, skip. A rule's condition says whether it does not apply, applies,
//! or applies and the rules after it are skipped for this stage.

use crate::analysis::{
    is_cache_write_stage, is_output, is_strictly_inlineable, needs_multi_level_tiling,
    needs_rfactor, single_elementwise_consumer,
};
use tessera_search::state::{State, StateError, Step};
use tessera_te::{ComputeDag, Schedule};

/// What the sketch rules need to know of the target.
#[derive(Clone, Debug)]
pub struct SketchTarget {
    /// CPU cores (the rfactor rule's parallelism test).
    pub num_cores: i64,
    /// The multi-level tiling structure: `S` a spatial level, `R` a reduction level
    /// (TVM: `SSRSRS` on the CPU).
    pub structure: String,
}

impl SketchTarget {
    /// The CPU policy for `num_cores` cores.
    pub fn cpu(num_cores: i64) -> SketchTarget {
        SketchTarget {
            num_cores: num_cores.max(1),
            structure: "SSRSRS".into(),
        }
    }
}

/// Errors of sketch generation.
#[derive(Debug, thiserror::Error)]
pub enum SketchError {
    /// A rule built a step the schedule refused: a bug in the rule, reported with the
    /// stage it was working on.
    #[error("sketch rule `{rule}` on stage `{stage}`: {source}")]
    Rule {
        rule: &'static str,
        stage: String,
        #[source]
        source: Box<StateError>,
    },
    #[error("the tiling structure `{0}` needs at least one `S`, and only `S` and `R`")]
    Structure(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cond {
    Pass,
    Apply,
    ApplyAndSkipRest,
}

/// One partial state and the stage the rules look at next (`None`: all done).
type Partial = (State, Option<usize>);

struct Ctx<'a> {
    target: &'a SketchTarget,
}

/// What a rule does to a state whose next stage is the `usize`.
type ApplyFn = fn(&Ctx, &State, &Schedule, usize) -> Result<Vec<Partial>, StateError>;

/// A derivation rule: its name, its condition and what it does.
struct Rule {
    name: &'static str,
    cond: fn(&Ctx, &Schedule, usize) -> Cond,
    apply: ApplyFn,
}

const CPU_RULES: &[Rule] = &[
    Rule {
        name: "always-inline",
        cond: cond_always_inline,
        apply: apply_inline,
    },
    Rule {
        name: "add-rfactor",
        cond: cond_rfactor,
        apply: apply_rfactor,
    },
    Rule {
        name: "add-cache-write",
        cond: cond_cache_write,
        apply: apply_cache_write,
    },
    Rule {
        name: "multi-level-tiling-with-fusion",
        cond: cond_tiling_with_fusion,
        apply: apply_tiling_with_fusion,
    },
    Rule {
        name: "multi-level-tiling",
        cond: cond_tiling,
        apply: apply_tiling,
    },
    Rule {
        name: "skip-stage",
        cond: |_, _, _| Cond::Apply,
        apply: |_, s, _, i| Ok(vec![(s.clone(), below(i))]),
    },
];

fn below(i: usize) -> Option<usize> {
    i.checked_sub(1)
}

/// Every sketch of `dag` for `target`, in TVM's order.
pub fn generate_sketches(
    dag: &ComputeDag,
    target: &SketchTarget,
) -> Result<Vec<State>, SketchError> {
    let s = &target.structure;
    if !s.contains('S') || s.chars().any(|c| c != 'S' && c != 'R') {
        return Err(SketchError::Structure(s.clone()));
    }
    let ctx = Ctx { target };
    let init = State::new(dag);
    let last = init
        .replay()
        .map_err(|e| SketchError::Rule {
            rule: "initial state",
            stage: String::new(),
            source: Box::new(e),
        })?
        .schedule
        .stages()
        .len()
        .checked_sub(1);
    let mut now: Vec<Partial> = vec![(init, last)];
    let mut out = Vec::new();
    while !now.is_empty() {
        let mut next = Vec::new();
        for (state, stage) in now {
            let Some(i) = stage else {
                out.push(state);
                continue;
            };
            let sch = state
                .replay()
                .map_err(|e| SketchError::Rule {
                    rule: "replay",
                    stage: i.to_string(),
                    source: Box::new(e),
                })?
                .schedule;
            if sch.stages()[i].is_placeholder() {
                next.push((state, below(i)));
                continue;
            }
            for rule in CPU_RULES {
                let c = (rule.cond)(&ctx, &sch, i);
                if c == Cond::Pass {
                    continue;
                }
                let made = (rule.apply)(&ctx, &state, &sch, i).map_err(|e| SketchError::Rule {
                    rule: rule.name,
                    stage: sch.stages()[i].name().to_string(),
                    source: Box::new(e),
                })?;
                next.extend(made);
                if c == Cond::ApplyAndSkipRest {
                    break;
                }
            }
        }
        now = next;
    }
    Ok(out)
}

// ----- always inline -----

fn cond_always_inline(_: &Ctx, sch: &Schedule, i: usize) -> Cond {
    let t = &sch.stages()[i].op;
    if !is_output(sch, i) && is_strictly_inlineable(t) {
        Cond::ApplyAndSkipRest
    } else {
        Cond::Pass
    }
}

fn apply_inline(_: &Ctx, s: &State, _: &Schedule, i: usize) -> Result<Vec<Partial>, StateError> {
    let mut s = s.clone();
    s.push(Step::ComputeInline { stage: i })?;
    Ok(vec![(s, below(i))])
}

// ----- rfactor -----

fn cond_rfactor(ctx: &Ctx, sch: &Schedule, i: usize) -> Cond {
    if needs_rfactor(&sch.stages()[i].op, ctx.target.num_cores) && !is_cache_write_stage(sch, i) {
        Cond::Apply
    } else {
        Cond::Pass
    }
}

/// Fuses the reduction loops, splits the fused loop in two (length unfilled), and
/// factors the reduction over either half: two states. With the inner half factored the
/// new axis is moved innermost, for vectorization.
fn apply_rfactor(_: &Ctx, s: &State, sch: &Schedule, i: usize) -> Result<Vec<Partial>, StateError> {
    let st = &sch.stages()[i];
    let n_space = st
        .leaf_iter_vars
        .iter()
        .take_while(|iv| !iv.is_reduce())
        .count();
    let n_reduce = st.leaf_iter_vars.len() - n_space;
    let mut base = s.clone();
    if n_reduce > 1 {
        base.push(Step::Fuse {
            stage: i,
            iters: (n_space..n_space + n_reduce).collect(),
        })?;
    }
    base.push(Step::Split {
        stage: i,
        iter: n_space,
        extent: st.op.reduce_axis().iter().map(|a| a.extent()).product(),
        lengths: vec![None],
        inner_to_outer: true,
    })?;
    let mut out = Vec::new();
    for half in [n_space, n_space + 1] {
        let mut r = base.clone();
        r.push(Step::Rfactor {
            stage: i,
            iter: half,
            factor_iter: n_space,
        })?;
        // the factored stage is now stage i, the original i + 1
        if half == n_space + 1 {
            let n = r.replay()?.schedule.stages()[i].leaf_iter_vars.len();
            let mut order: Vec<usize> = (0..n).filter(|&k| k != n_space).collect();
            order.push(n_space);
            r.push(Step::Reorder { stage: i, order })?;
        }
        out.push((r, below(i)));
    }
    Ok(out)
}

// ----- cache write -----

fn cond_cache_write(_: &Ctx, sch: &Schedule, i: usize) -> Cond {
    let t = &sch.stages()[i].op;
    if needs_multi_level_tiling(t) && single_elementwise_consumer(sch, i).is_none() {
        Cond::Apply
    } else {
        Cond::Pass
    }
}

/// Computes the stage into a local cache; the cache (now stage `i`) is looked at next,
/// and has the original stage as its element-wise consumer.
fn apply_cache_write(
    _: &Ctx,
    s: &State,
    _: &Schedule,
    i: usize,
) -> Result<Vec<Partial>, StateError> {
    let mut s = s.clone();
    s.push(Step::CacheWrite {
        stage: i,
        scope: "local".into(),
    })?;
    Ok(vec![(s, Some(i))])
}

// ----- multi-level tiling -----

fn cond_tiling_with_fusion(_: &Ctx, sch: &Schedule, i: usize) -> Cond {
    let t = &sch.stages()[i].op;
    if needs_multi_level_tiling(t) && single_elementwise_consumer(sch, i).is_some() {
        if is_cache_write_stage(sch, i) {
            Cond::ApplyAndSkipRest
        } else {
            Cond::Apply
        }
    } else {
        Cond::Pass
    }
}

fn cond_tiling(_: &Ctx, sch: &Schedule, i: usize) -> Cond {
    if needs_multi_level_tiling(&sch.stages()[i].op) {
        Cond::ApplyAndSkipRest
    } else {
        Cond::Pass
    }
}

fn apply_tiling(
    ctx: &Ctx,
    s: &State,
    sch: &Schedule,
    i: usize,
) -> Result<Vec<Partial>, StateError> {
    let mut s = s.clone();
    multi_level_tiling(&mut s, sch, i, &ctx.target.structure)?;
    Ok(vec![(s, below(i))])
}

/// Tiles stage `i` into the levels of `structure`, then fuses its single element-wise
/// consumer at the first and at the second spatial level (TVM's CPU levels 1 and 2):
/// the consumer follows the stage's spatial splits up to that level, and the stage is
/// computed at the consumer's innermost loop of that level. Two states.
fn apply_tiling_with_fusion(
    ctx: &Ctx,
    s: &State,
    sch: &Schedule,
    i: usize,
) -> Result<Vec<Partial>, StateError> {
    let Some(consumer) = single_elementwise_consumer(sch, i) else {
        return Ok(Vec::new());
    };
    let mut base = s.clone();
    let splits = multi_level_tiling(&mut base, sch, i, &ctx.target.structure)?;
    let n_space_levels = ctx.target.structure.matches('S').count();
    let mut out = Vec::new();
    for level in [1usize, 2] {
        if level >= n_space_levels || splits.is_empty() {
            continue;
        }
        let mut t = base.clone();
        follow_tiling(&mut t, consumer, &splits, level)?;
        t.push(Step::ComputeAt {
            stage: i,
            target_stage: consumer,
            target_iter: level * splits.len() - 1,
        })?;
        out.push((t, below(i)));
    }
    Ok(out)
}

/// TVM's `DoMultiLevelTiling`: every spatial loop of stage `i` split into as many loops
/// as `structure` has `S`, every reduction loop into as many as it has `R` (lengths
/// unfilled), then the loops reordered level by level as the structure reads. Returns
/// the indices of the spatial split steps, in loop order.
fn multi_level_tiling(
    s: &mut State,
    sch: &Schedule,
    i: usize,
    structure: &str,
) -> Result<Vec<usize>, StateError> {
    let n_s = structure.matches('S').count();
    let n_r = structure.matches('R').count();
    let kinds: Vec<(bool, Option<i64>)> = sch.stages()[i]
        .leaf_iter_vars
        .iter()
        .map(|iv| (iv.is_reduce(), iv.extent()))
        .collect();
    let mut space: Vec<Vec<usize>> = vec![Vec::new(); n_s];
    let mut reduce: Vec<Vec<usize>> = vec![Vec::new(); n_r.max(1)];
    let mut spatial_splits = Vec::new();
    let mut pos = 0;
    for (is_reduce, extent) in kinds {
        let n = if is_reduce { n_r.max(1) } else { n_s };
        if n > 1 {
            s.push(Step::Split {
                stage: i,
                iter: pos,
                extent,
                lengths: vec![None; n - 1],
                inner_to_outer: true,
            })?;
            if !is_reduce {
                spatial_splits.push(s.steps().len() - 1);
            }
        }
        let levels = if is_reduce { &mut reduce } else { &mut space };
        for (l, level) in levels.iter_mut().enumerate().take(n) {
            level.push(pos + l);
        }
        pos += n;
    }
    let (mut si, mut ri) = (0, 0);
    let mut order = Vec::with_capacity(pos);
    for c in structure.chars() {
        if c == 'S' {
            order.extend(&space[si]);
            si += 1;
        } else {
            order.extend(&reduce[ri]);
            ri += 1;
        }
    }
    // a structure without R levels still keeps the reduction loops, innermost
    if n_r == 0 {
        order.extend(&reduce[0]);
    }
    if order != (0..pos).collect::<Vec<_>>() {
        s.push(Step::Reorder { stage: i, order })?;
    }
    Ok(spatial_splits)
}

/// TVM's `FollowTiling`: the consumer's spatial loops follow `splits` (one per loop, in
/// order) at `level` levels, then are reordered level by level.
fn follow_tiling(
    s: &mut State,
    consumer: usize,
    splits: &[usize],
    level: usize,
) -> Result<(), StateError> {
    let per = level + 1;
    for (j, &src) in splits.iter().enumerate() {
        s.push(Step::FollowSplit {
            stage: consumer,
            iter: j * per,
            src_step: src,
            n_split: level,
        })?;
    }
    let n = splits.len();
    let order: Vec<usize> = (0..per)
        .flat_map(|l| (0..n).map(move |j| j * per + l))
        .collect();
    s.push(Step::Reorder {
        stage: consumer,
        order,
    })?;
    Ok(())
}
