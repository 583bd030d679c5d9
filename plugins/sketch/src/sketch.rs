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
    const_tensor_indices, consumers, direct_producers, has_cross_thread_reduction,
    is_cache_write_stage, is_output, is_strictly_inlineable, needs_multi_level_tiling,
    needs_rfactor, num_common_outer, producers, single_elementwise_consumer,
    space_and_reduce_lengths,
};
use tessera_ir::ThreadAxis;
use tessera_search::state::{
    AnnotationStep, CacheReadStep, CacheWriteStep, ComputeAtStep, ComputeInlineStep,
    FollowSplitStep, FuseStep, IterAnnotation, ReorderStep, RfactorStep, SplitStep, State,
    StateError, Step,
};
use tessera_te::{Annotation, ComputeDag, Schedule};

/// The kind of device a policy targets: the rule set and the annotation differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    Cpu,
    /// A GPU with TVM's CUDA rules (also the generic `opencl` target's).
    Gpu,
    /// A Mali GPU: TVM's Mali rules — the CPU's list on a GPU (no shared-memory cache
    /// reads, no cross-thread reduction), and vectorization in the annotation.
    Mali,
}

/// What the sketch rules (and the annotation of sketches) need to know of the target:
/// TVM's `HardwareParams` and the tiling structure.
#[derive(Clone, Debug)]
pub struct SketchTarget {
    pub kind: DeviceKind,
    /// CPU cores (the rfactor rule's parallelism test); streaming multiprocessors on a
    /// GPU.
    pub num_cores: i64,
    /// The multi-level tiling structure: `S` a spatial level, `R` a reduction level
    /// (TVM: `SSRSRS` on the CPU, `SSSRRSRS` on a GPU).
    pub structure: String,
    /// GPU: threads of a warp (the cross-thread reduction's split).
    pub warp_size: i64,
    /// GPU: threads one block may have.
    pub max_threads_per_block: i64,
    /// GPU: bytes of shared memory one block may use.
    pub max_shared_memory_per_block: i64,
    /// GPU: the largest virtual-thread extent.
    pub max_vthread_extent: i64,
}

impl SketchTarget {
    /// The CPU policy for `num_cores` cores.
    pub fn cpu(num_cores: i64) -> SketchTarget {
        SketchTarget {
            kind: DeviceKind::Cpu,
            num_cores: num_cores.max(1),
            structure: "SSRSRS".into(),
            warp_size: 1,
            max_threads_per_block: 1,
            max_shared_memory_per_block: 0,
            max_vthread_extent: 1,
        }
    }

    /// The GPU policy with TVM's CUDA hardware parameters: warps of 32, at most 1024
    /// threads and 48 KiB of shared memory per block, virtual threads up to 8
    /// (`warp_size / 4`); `num_sms` multiprocessors.
    pub fn cuda(num_sms: i64) -> SketchTarget {
        SketchTarget {
            kind: DeviceKind::Gpu,
            num_cores: num_sms.max(1),
            structure: "SSSRRSRS".into(),
            warp_size: 32,
            max_threads_per_block: 1024,
            max_shared_memory_per_block: 48 * 1024,
            max_vthread_extent: 8,
        }
    }

    /// A GPU policy from a device's limits (`num_cores`: its compute units).
    pub fn gpu(
        num_cores: i64,
        warp_size: i64,
        max_threads_per_block: i64,
        max_shared_memory_per_block: i64,
        max_vthread_extent: i64,
    ) -> SketchTarget {
        SketchTarget {
            kind: DeviceKind::Gpu,
            num_cores: num_cores.max(1),
            structure: "SSSRRSRS".into(),
            warp_size: warp_size.max(1),
            max_threads_per_block: max_threads_per_block.max(1),
            max_shared_memory_per_block: max_shared_memory_per_block.max(0),
            max_vthread_extent: max_vthread_extent.max(1),
        }
    }

    /// The Mali policy with TVM's Mali parameters: 256 threads and 32 KiB of shared
    /// memory per block, warps of one thread, no virtual threads.
    pub fn mali() -> SketchTarget {
        SketchTarget {
            kind: DeviceKind::Mali,
            ..SketchTarget::gpu(1, 1, 256, 32768, 1)
        }
    }

    /// Whether the policy targets a GPU (thread binding, the GPU tiling structure).
    pub fn is_gpu(&self) -> bool {
        self.kind != DeviceKind::Cpu
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

const ALWAYS_INLINE: Rule = Rule {
    name: "always-inline",
    cond: cond_always_inline,
    apply: apply_inline,
};
const SIMPLIFY_CONST_TENSOR: Rule = Rule {
    name: "simplify-compute-with-const-tensor",
    cond: cond_simplify_const,
    apply: apply_simplify_const,
};
const ADD_RFACTOR: Rule = Rule {
    name: "add-rfactor",
    cond: cond_rfactor,
    apply: apply_rfactor,
};
const ADD_CACHE_WRITE: Rule = Rule {
    name: "add-cache-write",
    cond: cond_cache_write,
    apply: apply_cache_write,
};
const TILING_WITH_FUSION: Rule = Rule {
    name: "multi-level-tiling-with-fusion",
    cond: cond_tiling_with_fusion,
    apply: apply_tiling_with_fusion,
};
const TILING: Rule = Rule {
    name: "multi-level-tiling",
    cond: cond_tiling,
    apply: apply_tiling,
};
const SKIP_STAGE: Rule = Rule {
    name: "skip-stage",
    cond: |_, _, _| Cond::Apply,
    apply: |_, s, _, i| Ok(vec![(s.clone(), below(i))]),
};
const ADD_CACHE_READ: Rule = Rule {
    name: "add-cache-read",
    cond: cond_cache_read,
    apply: apply_cache_read,
};
const SPECIAL_COMPUTE_LOCATION: Rule = Rule {
    name: "special-compute-location-gpu",
    cond: cond_special_location,
    apply: apply_special_location,
};
const CROSS_THREAD_REDUCTION: Rule = Rule {
    name: "cross-thread-reduction",
    cond: cond_cross_thread,
    apply: apply_cross_thread,
};

/// TVM's CPU rules, in its order.
const CPU_RULES: &[Rule] = &[
    ALWAYS_INLINE,
    SIMPLIFY_CONST_TENSOR,
    ADD_RFACTOR,
    ADD_CACHE_WRITE,
    TILING_WITH_FUSION,
    TILING,
    SKIP_STAGE,
];

/// TVM's Mali rules: the CPU's.
const MALI_RULES: &[Rule] = CPU_RULES;

/// TVM's GPU (CUDA) rules, in its order.
const GPU_RULES: &[Rule] = &[
    ADD_CACHE_READ,
    SPECIAL_COMPUTE_LOCATION,
    ALWAYS_INLINE,
    SIMPLIFY_CONST_TENSOR,
    CROSS_THREAD_REDUCTION,
    ADD_CACHE_WRITE,
    TILING_WITH_FUSION,
    TILING,
    SKIP_STAGE,
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
            // placeholders go through the rules too: a GPU caches them in shared memory
            let rules = match target.kind {
                DeviceKind::Gpu => GPU_RULES,
                DeviceKind::Mali => MALI_RULES,
                DeviceKind::Cpu => CPU_RULES,
            };
            for rule in rules {
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

/// A non-output stage that does not reduce: inlined when strictly inlineable, and
/// always on a GPU.
fn cond_always_inline(ctx: &Ctx, sch: &Schedule, i: usize) -> Cond {
    let t = &sch.stages()[i].op;
    if t.is_placeholder() || is_output(sch, i) || !t.reduce_axis().is_empty() {
        return Cond::Pass;
    }
    if is_strictly_inlineable(t) || (ctx.target.is_gpu() && !t.axis().is_empty()) {
        Cond::ApplyAndSkipRest
    } else {
        Cond::Pass
    }
}

fn apply_inline(_: &Ctx, s: &State, _: &Schedule, i: usize) -> Result<Vec<Partial>, StateError> {
    let mut s = s.clone();
    s.push(Step::ComputeInline(ComputeInlineStep { stage: i }))?;
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
        base.push(Step::Fuse(FuseStep {
            stage: i,
            iters: (n_space..n_space + n_reduce).collect(),
        }))?;
    }
    base.push(Step::Split(SplitStep {
        stage: i,
        iter: n_space,
        extent: st.op.reduce_axis().iter().map(|a| a.extent()).product(),
        lengths: vec![None],
        inner_to_outer: true,
    }))?;
    let mut out = Vec::new();
    for half in [n_space, n_space + 1] {
        let mut r = base.clone();
        r.push(Step::Rfactor(RfactorStep {
            stage: i,
            iter: half,
            factor_iter: n_space,
        }))?;
        // the factored stage is now stage i, the original i + 1
        if half == n_space + 1 {
            let n = r.replay()?.schedule.stages()[i].leaf_iter_vars.len();
            let mut order: Vec<usize> = (0..n).filter(|&k| k != n_space).collect();
            order.push(n_space);
            r.push(Step::Reorder(ReorderStep { stage: i, order }))?;
        }
        out.push((r, below(i)));
    }
    Ok(out)
}

// ----- cache write -----

fn cond_cache_write(ctx: &Ctx, sch: &Schedule, i: usize) -> Cond {
    let t = &sch.stages()[i].op;
    if needs_multi_level_tiling(t) && single_elementwise_consumer(sch, i).is_none() {
        // on a GPU the cache is always written (its tiling with fusion is the only sketch)
        if ctx.target.is_gpu() {
            Cond::ApplyAndSkipRest
        } else {
            Cond::Apply
        }
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
    s.push(Step::CacheWrite(CacheWriteStep {
        stage: i,
        scope: "local".into(),
    }))?;
    Ok(vec![(s, Some(i))])
}

// ----- multi-level tiling -----

fn cond_tiling_with_fusion(ctx: &Ctx, sch: &Schedule, i: usize) -> Cond {
    let t = &sch.stages()[i].op;
    if needs_multi_level_tiling(t) && single_elementwise_consumer(sch, i).is_some() {
        if is_cache_write_stage(sch, i) || ctx.target.is_gpu() {
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
/// consumer at the first and at the second spatial level on a CPU (TVM's levels 1 and
/// 2; two states), at the third on a GPU (one state, the block's threads): the consumer
/// follows the stage's spatial splits up to that level, and the stage is computed at the
/// consumer's innermost loop of that level.
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
    let levels: &[usize] = if ctx.target.is_gpu() { &[3] } else { &[1, 2] };
    let structure = ctx.target.structure.as_bytes();
    let mut out = Vec::new();
    for &level in levels {
        if structure.get(level - 1) != Some(&b'S') || splits.is_empty() {
            continue;
        }
        let mut t = base.clone();
        follow_tiling(&mut t, consumer, &splits, level)?;
        t.push(Step::ComputeAt(ComputeAtStep {
            stage: i,
            target_stage: consumer,
            target_iter: level * splits.len() - 1,
        }))?;
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
            s.push(Step::Split(SplitStep {
                stage: i,
                iter: pos,
                extent,
                lengths: vec![None; n - 1],
                inner_to_outer: true,
            }))?;
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
        s.push(Step::Reorder(ReorderStep { stage: i, order }))?;
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
        s.push(Step::FollowSplit(FollowSplitStep {
            stage: consumer,
            iter: j * per,
            src_step: src,
            n_split: level,
        }))?;
    }
    let n = splits.len();
    let order: Vec<usize> = (0..per)
        .flat_map(|l| (0..n).map(move |j| j * per + l))
        .collect();
    s.push(Step::Reorder(ReorderStep {
        stage: consumer,
        order,
    }))?;
    Ok(())
}

// ----- constant tensors (Winograd) -----

fn cond_simplify_const(_: &Ctx, sch: &Schedule, i: usize) -> Cond {
    let st = &sch.stages()[i];
    let Some(names) = const_tensor_indices(&st.op) else {
        return Cond::Pass;
    };
    // every other loop must be spatial: those are the ones tiled
    let ok = st
        .leaf_iter_vars
        .iter()
        .all(|iv| names.iter().any(|n| n == iv.name()) || !iv.is_reduce());
    if ok {
        Cond::ApplyAndSkipRest
    } else {
        Cond::Pass
    }
}

/// TVM's `RuleSimplifyComputeWithConstTensor`: the loops that index constant matrices
/// are unrolled (so the matrices' entries fold to constants) and moved innermost; every
/// other loop is tiled in two levels, outer levels first.
fn apply_simplify_const(
    _: &Ctx,
    s: &State,
    sch: &Schedule,
    i: usize,
) -> Result<Vec<Partial>, StateError> {
    let st = &sch.stages()[i];
    let names = const_tensor_indices(&st.op).unwrap_or_default();
    let mut s = s.clone();
    let (mut outer, mut inner, mut unrolled) = (Vec::new(), Vec::new(), Vec::new());
    let mut pos = 0;
    for iv in &st.leaf_iter_vars {
        if names.iter().any(|n| n == iv.name()) {
            s.push(Step::Annotation(AnnotationStep {
                stage: i,
                iter: pos,
                ann: IterAnnotation::Unroll,
            }))?;
            unrolled.push(pos);
            pos += 1;
        } else {
            s.push(Step::Split(SplitStep {
                stage: i,
                iter: pos,
                extent: iv.extent(),
                lengths: vec![None],
                inner_to_outer: true,
            }))?;
            outer.push(pos);
            inner.push(pos + 1);
            pos += 2;
        }
    }
    let order: Vec<usize> = outer.into_iter().chain(inner).chain(unrolled).collect();
    if order != (0..pos).collect::<Vec<_>>() {
        s.push(Step::Reorder(ReorderStep { stage: i, order }))?;
    }
    Ok(vec![(s, below(i))])
}

/// GPU: a stage read only by a constant-tensor stage (the Winograd input tile) is
/// computed inside that consumer, at its last loop before the unrolled ones. TVM's rule,
/// except that a stage needing multi-level tiling (the batched GEMM before the inverse
/// transform) is left to the tiling rules, as TVM's own sketch tests expect.
fn cond_special_location(_: &Ctx, sch: &Schedule, i: usize) -> Cond {
    let t = &sch.stages()[i].op;
    if producers(sch, i).is_empty() || needs_multi_level_tiling(t) {
        return Cond::Pass;
    }
    match consumers(sch, i)[..] {
        [c] if const_tensor_indices(&sch.stages()[c].op).is_some() => Cond::ApplyAndSkipRest,
        _ => Cond::Pass,
    }
}

fn apply_special_location(
    _: &Ctx,
    s: &State,
    sch: &Schedule,
    i: usize,
) -> Result<Vec<Partial>, StateError> {
    let mut s = s.clone();
    let c = consumers(sch, i)[0];
    let cst = &sch.stages()[c];
    let first_unrolled = cst
        .leaf_iter_vars
        .iter()
        .position(|iv| cst.annotation(iv) == Annotation::Unroll);
    if let Some(k) = first_unrolled.filter(|&k| k > 0) {
        s.push(Step::ComputeAt(ComputeAtStep {
            stage: i,
            target_stage: c,
            target_iter: k - 1,
        }))?;
    }
    Ok(vec![(s, below(i))])
}

// ----- GPU: shared-memory cache read -----

/// The single consumer of stage `i` is multi-level tiled, reads `i` directly and does
/// not reduce across threads: `i` is staged through shared memory.
fn cond_cache_read(_: &Ctx, sch: &Schedule, i: usize) -> Cond {
    let [c] = consumers(sch, i)[..] else {
        return Cond::Pass;
    };
    if !needs_multi_level_tiling(&sch.stages()[c].op)
        || has_cross_thread_reduction(sch, c)
        || !direct_producers(sch, c).contains(&i)
    {
        return Cond::Pass;
    }
    Cond::ApplyAndSkipRest
}

/// Adds `i.shared`, read by the consumer instead of `i`, and computes it inside the
/// consumer's outermost reduction tile (at its last loop): each block loads one tile of
/// the reduction at a time. Stage `i` is looked at again (its consumer is now the copy).
fn apply_cache_read(
    _: &Ctx,
    s: &State,
    sch: &Schedule,
    i: usize,
) -> Result<Vec<Partial>, StateError> {
    let c = consumers(sch, i)[0];
    let mut s = s.clone();
    s.push(Step::CacheRead(CacheReadStep {
        stage: i,
        scope: "shared".into(),
        readers: vec![c],
    }))?;
    let (added, target) = (i + 1, c + 1);
    let at = last_iter_of_outermost_reduce_tile(&s.replay()?.schedule.stages()[target]);
    s.push(Step::ComputeAt(ComputeAtStep {
        stage: added,
        target_stage: target,
        target_iter: at,
    }))?;
    Ok(vec![(s, Some(i))])
}

/// TVM's `GetLastReduceIteratorInOutermostReduceTile`: the loop where every reduction
/// axis has appeared once (the end of the first reduction level); for a stage without
/// reduction, where every spatial axis has.
fn last_iter_of_outermost_reduce_tile(st: &tessera_te::Stage) -> usize {
    let n_reduce = st.op.reduce_axis().len();
    let (want_reduce, n) = if n_reduce > 0 {
        (true, n_reduce)
    } else {
        (false, st.op.axis().len())
    };
    let mut seen = 0;
    for (k, iv) in st.leaf_iter_vars.iter().enumerate() {
        if iv.is_reduce() == want_reduce {
            seen += 1;
            if seen == n {
                return k;
            }
        }
    }
    st.leaf_iter_vars.len().saturating_sub(1)
}

// ----- GPU: cross-thread reduction -----

fn cond_cross_thread(ctx: &Ctx, sch: &Schedule, i: usize) -> Cond {
    let t = &sch.stages()[i].op;
    if t.is_placeholder() || is_cache_write_stage(sch, i) || t.reduce_axis().is_empty() {
        return Cond::Pass;
    }
    let (space, reduce) = space_and_reduce_lengths(t);
    let apply = if needs_multi_level_tiling(t) {
        // too little parallelism in the spatial loops
        space < reduce
    } else {
        reduce > ctx.target.warp_size
    };
    if apply {
        Cond::Apply
    } else {
        Cond::Pass
    }
}

/// TVM's `RuleCrossThreadReduction`: the reduction loops are fused and split by the
/// warp size, the inner part bound to `threadIdx.x` (the threads of a warp reduce
/// together). When the single consumer shares outer loops with the stage and is not
/// itself tiled, the stage is computed inside it, its threads following the consumer's.
fn apply_cross_thread(
    ctx: &Ctx,
    s: &State,
    sch: &Schedule,
    i: usize,
) -> Result<Vec<Partial>, StateError> {
    let st = &sch.stages()[i];
    let n_space = st.op.axis().len();
    let n_reduce = st.op.reduce_axis().len();
    let (_, reduce_extent) = space_and_reduce_lengths(&st.op);
    let mut s = s.clone();
    if n_reduce > 1 {
        s.push(Step::Fuse(FuseStep {
            stage: i,
            iters: (n_space..n_space + n_reduce).collect(),
        }))?;
    }
    let thread_x = IterAnnotation::Thread(ThreadAxis::ThreadIdxX);
    // fusion into the consumer
    let fused = match consumers(sch, i)[..] {
        [c] => {
            let common = num_common_outer(sch, i, c);
            let cst = &sch.stages()[c];
            (common > 0 && !needs_multi_level_tiling(&cst.op) && cst.op.reduce_axis().is_empty())
                .then_some((c, common))
        }
        _ => None,
    };
    let split_of = |s: &State, stage: usize| -> Vec<usize> {
        s.steps()
            .iter()
            .enumerate()
            .filter(|(_, st)| matches!(st, Step::Split(SplitStep { stage: x, .. }) if *x == stage))
            .map(|(k, _)| k)
            .collect()
    };
    if let Some((c, common)) = fused.filter(|(c, _)| split_of(&s, *c).len() <= 1) {
        let mut splits = split_of(&s, c);
        if splits.is_empty() {
            let cst = &sch.stages()[c];
            let last = cst.leaf_iter_vars.len() - 1;
            s.push(Step::Split(SplitStep {
                stage: c,
                iter: last,
                extent: cst.leaf_iter_vars[last].extent(),
                lengths: vec![Some(ctx.target.warp_size)],
                inner_to_outer: true,
            }))?;
            splits.push(s.steps().len() - 1);
            s.push(Step::Annotation(AnnotationStep {
                stage: c,
                iter: last + 1,
                ann: thread_x,
            }))?;
        }
        s.push(Step::FollowSplit(FollowSplitStep {
            stage: i,
            iter: n_space,
            src_step: splits[0],
            n_split: 1,
        }))?;
        s.push(Step::Annotation(AnnotationStep {
            stage: i,
            iter: n_space + 1,
            ann: thread_x,
        }))?;
        s.push(Step::ComputeAt(ComputeAtStep {
            stage: i,
            target_stage: c,
            target_iter: common - 1,
        }))?;
    } else {
        s.push(Step::Split(SplitStep {
            stage: i,
            iter: n_space,
            extent: Some(reduce_extent),
            lengths: vec![Some(ctx.target.warp_size)],
            inner_to_outer: true,
        }))?;
        s.push(Step::Annotation(AnnotationStep {
            stage: i,
            iter: n_space + 1,
            ann: thread_x,
        }))?;
    }
    Ok(vec![(s, below(i))])
}
