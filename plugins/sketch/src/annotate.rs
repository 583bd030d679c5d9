//! Random annotation of a sketch (Ansor's second level, TVM's CPU init-population
//! rules, in TVM's order): fill every unfilled tile size with a random factorization,
//! move the stages that are neither tiled nor inlined to a random compute location, fuse
//! and parallelize the outer loops of every root stage, put a random
//! `auto_unroll_max_step` on every stage that reduces, and vectorize (fusing) the
//! innermost spatial loops of every stage.
//!
//! On a GPU (TVM's GPU init rules): fill the tile sizes, bind threads (a tiled root
//! stage's three outer spatial levels to `blockIdx.x`, `vthread` and `threadIdx.x`;
//! other root stages' fused outer loops split by the warp size; shared-memory copies
//! fetched cooperatively by the block's threads), put a random `auto_unroll_max_step`
//! on every stage that reduces, then check the hardware's limits (threads per block,
//! virtual threads, shared memory per block): a state that breaks one is an error, so
//! it never costs a measurement.
//!
//! Each step is pushed onto the state, which replays it: a step the schedule refuses is
//! skipped, never a panic, and what comes out always replays.

use crate::analysis::{
    consumers, has_cross_thread_reduction, is_output, needs_multi_level_tiling,
    space_and_reduce_lengths,
};
use crate::sketch::SketchTarget;
use std::collections::{HashMap, HashSet};
use tessera_ir::ThreadAxis;
use tessera_search::rng::Rng;
use tessera_search::state::{
    AnnotationStep, CacheReadStep, CacheWriteStep, ComputeAtStep, ComputeInlineStep,
    FollowFusedSplitStep, FuseStep, IterAnnotation, PragmaStep, RfactorStep, SplitStep, State,
    StateError, Step,
};
use tessera_te::lower::leaf_extents;
use tessera_te::{Annotation, Attach, Schedule};

/// The knobs of random annotation (TVM's `SketchParamKey` defaults for the CPU).
#[derive(Clone, Debug)]
pub struct AnnotateParams {
    pub num_cores: i64,
    /// The largest innermost tile (`max_innermost_split_factor`, 64).
    pub max_innermost_split_factor: i64,
    /// The longest loop (after fusion) that is vectorized (`max_vectorize_size`, 16).
    pub max_vectorize_size: i64,
    /// The `auto_unroll_max_step` values drawn from (CPU: 0, 16, 64, 512).
    pub unroll_steps: Vec<i64>,
    /// float32 lanes of a vector register (CPU; 1 turns the bias below off): the split
    /// of a stage's last spatial axis (the one vectorized) draws, 9 times in 10 when its
    /// extent allows, an innermost length of whole registers that `vectorize` takes (at
    /// most `max_vectorize_size`). MetaSchedule's samples are good because their inner
    /// loops always vectorize; ours drew 2 lanes as often as 16, and 32 or 64, which
    /// are too long to vectorize.
    pub vector_lanes: i64,
    /// A GPU's limits: thread binding instead of parallel and vectorized loops.
    pub gpu: Option<GpuLimits>,
}

/// What a GPU allows one thread block (TVM's `HardwareParams`).
#[derive(Clone, Debug)]
pub struct GpuLimits {
    /// Vectorize the innermost spatial loops too (TVM's Mali `InitVectorization`), with
    /// 2, 4, 8 or 16 lanes (OpenCL's vector widths).
    pub vectorize: bool,
    pub warp_size: i64,
    pub max_threads_per_block: i64,
    pub max_shared_memory_per_block: i64,
    pub max_vthread_extent: i64,
}

impl AnnotateParams {
    pub fn cpu(num_cores: i64) -> AnnotateParams {
        AnnotateParams {
            num_cores: num_cores.max(1),
            max_innermost_split_factor: 64,
            max_vectorize_size: 16,
            unroll_steps: vec![0, 16, 64, 512],
            vector_lanes: 1,
            gpu: None,
        }
    }

    /// [`AnnotateParams::cpu`] with register-wide innermost tiles of `vector_lanes`.
    pub fn cpu_with_lanes(num_cores: i64, vector_lanes: i64) -> AnnotateParams {
        AnnotateParams {
            vector_lanes: vector_lanes.max(1),
            ..AnnotateParams::cpu(num_cores)
        }
    }

    /// The GPU parameters of `target` (TVM's: unroll steps up to 1024).
    pub fn gpu(target: &SketchTarget) -> AnnotateParams {
        AnnotateParams {
            num_cores: target.num_cores,
            max_innermost_split_factor: 64,
            max_vectorize_size: 16,
            unroll_steps: vec![0, 16, 64, 512, 1024],
            vector_lanes: 1,
            gpu: Some(GpuLimits {
                vectorize: target.kind == crate::sketch::DeviceKind::Mali,
                warp_size: target.warp_size,
                max_threads_per_block: target.max_threads_per_block,
                max_shared_memory_per_block: target.max_shared_memory_per_block,
                max_vthread_extent: target.max_vthread_extent,
            }),
        }
    }
}

/// The ways to factor an extent into split lengths, memoized (TVM's
/// `SplitFactorizationMemo`).
#[derive(Default)]
pub struct Factorizations {
    memo: HashMap<(i64, usize, i64), Vec<Vec<i64>>>,
    /// Per sketch (its steps as JSON): which steps split a stage's last spatial axis.
    vector_axes: HashMap<String, Vec<bool>>,
}

impl Factorizations {
    /// Every `n` lengths (outer to inner) whose product divides `extent`, the innermost
    /// at most `max_inner`.
    pub fn schemes(&mut self, extent: i64, n: usize, max_inner: i64) -> &[Vec<i64>] {
        self.memo.entry((extent, n, max_inner)).or_insert_with(|| {
            let mut out = Vec::new();
            let mut cur = Vec::with_capacity(n);
            enumerate(extent.max(1), n, max_inner, &mut cur, &mut out);
            out
        })
    }
}

fn enumerate(rest: i64, n: usize, max_inner: i64, cur: &mut Vec<i64>, out: &mut Vec<Vec<i64>>) {
    if cur.len() == n {
        out.push(cur.clone());
        return;
    }
    for d in 1..=rest {
        if rest % d != 0 || (cur.len() + 1 == n && d > max_inner) {
            continue;
        }
        cur.push(d);
        enumerate(rest / d, n, max_inner, cur, out);
        cur.pop();
    }
}

/// One random complete state from `sketch`.
pub fn annotate(
    sketch: &State,
    p: &AnnotateParams,
    rng: &mut Rng,
    memo: &mut Factorizations,
) -> Result<State, StateError> {
    let mut s = sketch.clone();
    fill_tile_sizes(&mut s, p, rng, memo)?;
    if let Some(g) = &p.gpu {
        fit_vthreads(&mut s, g)?;
        bind_threads(&mut s, g)?;
        unroll(&mut s, p, rng)?;
        if g.vectorize {
            vectorize(&mut s, p, rng)?;
        }
        check_gpu_limits(&s, g)?;
        return Ok(s);
    }
    change_compute_location(&mut s, rng)?;
    parallelize(&mut s, p)?;
    unroll(&mut s, p, rng)?;
    vectorize(&mut s, p, rng)?;
    Ok(s)
}

/// Every unfilled split gets a random factorization of its extent; the split of a
/// stage's last spatial axis prefers whole vector registers innermost (see
/// [`AnnotateParams::vector_lanes`]).
pub fn fill_tile_sizes(
    s: &mut State,
    p: &AnnotateParams,
    rng: &mut Rng,
    memo: &mut Factorizations,
) -> Result<(), StateError> {
    let lanes = p.vector_lanes;
    let vector_axes = if lanes > 1 {
        memo.vector_axes(s)
    } else {
        Vec::new()
    };
    let mut steps = s.steps().to_vec();
    for (k, step) in steps.iter_mut().enumerate() {
        if let Step::Split(SplitStep {
            extent, lengths, ..
        }) = step
        {
            if lengths.iter().all(Option::is_some) {
                continue;
            }
            let e = extent.unwrap_or(1);
            let schemes = memo.schemes(e, lengths.len(), p.max_innermost_split_factor);
            let whole = |l: &&Vec<i64>| {
                let inner = *l.last().unwrap_or(&1);
                inner % lanes == 0 && inner <= p.max_vectorize_size
            };
            let wide: Vec<&Vec<i64>> = if vector_axes.get(k) == Some(&true) {
                schemes.iter().filter(whole).collect()
            } else {
                Vec::new()
            };
            let pick = if !wide.is_empty() && rng.index(10) < 9 {
                wide[rng.index(wide.len())]
            } else {
                &schemes[rng.index(schemes.len())]
            };
            *lengths = pick.iter().map(|&l| Some(l)).collect();
        }
    }
    s.set_steps(steps)
}

impl Factorizations {
    /// For each step of `s`, whether it splits its stage's last spatial axis: the loop
    /// it splits is spatial and every loop after it is a reduction (the loop a CPU
    /// schedule vectorizes). A prefix that does not replay says no (the draw is then
    /// TVM's). Memoized per sketch.
    fn vector_axes(&mut self, s: &State) -> Vec<bool> {
        let key = s.steps_json().to_string();
        if let Some(v) = self.vector_axes.get(&key) {
            return v.clone();
        }
        let steps = s.steps();
        let mut out = vec![false; steps.len()];
        for (k, step) in steps.iter().enumerate() {
            let Step::Split(SplitStep { stage, iter, .. }) = step else {
                continue;
            };
            let replayed =
                State::with_steps(s.dag(), steps[..k].to_vec()).and_then(|prefix| replay(&prefix));
            let Ok(sch) = replayed else {
                continue;
            };
            let Some(st) = sch.stages().get(*stage) else {
                continue;
            };
            let leaves = &st.leaf_iter_vars;
            out[k] = leaves.get(*iter).is_some_and(|iv| !iv.is_reduce())
                && leaves[iter + 1..].iter().all(|iv| iv.is_reduce());
        }
        self.vector_axes.insert(key, out.clone());
        out
    }
}

fn replay(s: &State) -> Result<Schedule, StateError> {
    Ok(s.replay()?.schedule)
}

/// Whether a stage's loops were transformed (split, fused, reordered): a tiled stage.
fn is_tiled(sch: &Schedule, i: usize) -> bool {
    !sch.stages()[i].relations.is_empty()
}

/// Whether some stage is computed at loop `k` of stage `i`.
fn is_attach_point(sch: &Schedule, i: usize, k: usize) -> bool {
    let st = &sch.stages()[i];
    let iv = &st.leaf_iter_vars[k];
    sch.stages().iter().any(
        |x| matches!(&x.attach, Attach::At { target, axis } if target == st.op.buffer() && axis == iv),
    )
}

/// Stages neither tiled, inlined nor outputs, that do not need tiling, go to a random
/// place: inlined (when they can be), at the root, or at one of their single consumer's
/// outer spatial loops.
fn change_compute_location(s: &mut State, rng: &mut Rng) -> Result<(), StateError> {
    let n = replay(s)?.stages().len();
    for i in (0..n).rev() {
        let sch = replay(s)?;
        let st = &sch.stages()[i];
        if st.is_placeholder()
            || is_output(&sch, i)
            || st.attach == Attach::Inline
            || is_tiled(&sch, i)
            || needs_multi_level_tiling(&st.op)
        {
            continue;
        }
        let mut candidates = Vec::new();
        if let [c] = consumers(&sch, i)[..] {
            let cs = &sch.stages()[c];
            for (k, iv) in cs.leaf_iter_vars.iter().enumerate() {
                if iv.is_reduce() || is_attach_point(&sch, c, k) {
                    break;
                }
                candidates.push((c, k));
            }
        }
        let choice = rng.index(candidates.len() + 2);
        let step = match choice {
            0 if st.op.reduce_axis().is_empty() => {
                Step::ComputeInline(ComputeInlineStep { stage: i })
            }
            0 | 1 => continue,
            _ => {
                let (c, k) = candidates[choice - 2];
                Step::ComputeAt(ComputeAtStep {
                    stage: i,
                    target_stage: c,
                    target_iter: k,
                })
            }
        };
        // a place the schedule refuses is not a candidate: the stage stays at the root
        let _ = s.push(step);
    }
    Ok(())
}

/// Every root stage: its outer spatial, unannotated loops fused (up to the first attach
/// point, until `16 × cores` iterations) and run in parallel.
fn parallelize(s: &mut State, p: &AnnotateParams) -> Result<(), StateError> {
    let n = replay(s)?.stages().len();
    for i in 0..n {
        let r = s.replay()?;
        let sch = &r.schedule;
        let st = &sch.stages()[i];
        if st.is_placeholder() || st.attach != Attach::Root {
            continue;
        }
        let ext = leaf_extents(sch, &r.args).map_err(|e| StateError::Bounds(e.to_string()))?;
        let mut degree = 1i64;
        let mut k = 0;
        while k < st.leaf_iter_vars.len() {
            let iv = &st.leaf_iter_vars[k];
            if iv.is_reduce() || st.annotation(iv) != tessera_te::Annotation::None {
                break;
            }
            degree = degree.saturating_mul(ext[i][k]);
            k += 1;
            if degree > p.num_cores * 16 || is_attach_point(sch, i, k - 1) {
                break;
            }
        }
        if degree <= 1 || k == 0 {
            continue;
        }
        fuse_first(s, i, k)?;
        s.push(Step::Annotation(AnnotationStep {
            stage: i,
            iter: 0,
            ann: IterAnnotation::Parallel,
        }))?;
    }
    Ok(())
}

/// A random `auto_unroll_max_step` on the outermost loop of every stage that reduces.
fn unroll(s: &mut State, p: &AnnotateParams, rng: &mut Rng) -> Result<(), StateError> {
    if p.unroll_steps.is_empty() {
        return Ok(());
    }
    let sch = replay(s)?;
    for (i, st) in sch.stages().iter().enumerate() {
        if st.is_placeholder() || st.attach == Attach::Inline || st.op.reduce_axis().is_empty() {
            continue;
        }
        let v = p.unroll_steps[rng.index(p.unroll_steps.len())];
        s.push(Step::Pragma(PragmaStep {
            stage: i,
            iter: 0,
            pragma: format!("auto_unroll_max_step${v}"),
        }))?;
    }
    Ok(())
}

/// Every stage's innermost spatial loops (one, if the stage is tiled), unannotated, no
/// attach point among them, at most `max_vectorize_size` iterations together: a random
/// number of them fused and vectorized.
fn vectorize(s: &mut State, p: &AnnotateParams, rng: &mut Rng) -> Result<(), StateError> {
    let n = replay(s)?.stages().len();
    for i in 0..n {
        let r = s.replay()?;
        let sch = &r.schedule;
        let st = &sch.stages()[i];
        if st.is_placeholder() || st.attach == Attach::Inline {
            continue;
        }
        let ext = leaf_extents(sch, &r.args).map_err(|e| StateError::Bounds(e.to_string()))?;
        let len = st.leaf_iter_vars.len();
        let tiled = is_tiled(sch, i);
        let mut num = 0;
        let mut prod = 1i64;
        while num < len {
            let k = len - 1 - num;
            let iv = &st.leaf_iter_vars[k];
            if is_attach_point(sch, i, k)
                || iv.is_reduce()
                || st.annotation(iv) != tessera_te::Annotation::None
                || (tiled && num != 0)
            {
                break;
            }
            prod = prod.saturating_mul(ext[i][k]);
            if prod > p.max_vectorize_size {
                break;
            }
            num += 1;
        }
        if num > 1 {
            num = 1 + rng.index(num - 1);
        }
        if num == 0 {
            continue;
        }
        let first = len - num;
        let lanes: i64 = ext[i][first..].iter().product();
        if p.gpu.is_some() && !matches!(lanes, 2 | 4 | 8 | 16) {
            continue;
        }
        if num > 1 {
            s.push(Step::Fuse(FuseStep {
                stage: i,
                iters: (first..len).collect(),
            }))?;
        }
        s.push(Step::Annotation(AnnotationStep {
            stage: i,
            iter: first,
            ann: IterAnnotation::Vectorize,
        }))?;
    }
    Ok(())
}

// ----- GPU -----

fn invalid(s: &State, reason: String) -> StateError {
    StateError::Bad {
        step: s.steps().len(),
        reason,
    }
}

/// The index of the stage whose tensor has buffer `b`.
fn stage_of(sch: &Schedule, b: &tessera_ir::Buffer) -> Option<usize> {
    sch.stages().iter().position(|st| st.op.buffer() == b)
}

/// The leading spatial, unannotated loops of stage `i` (up to and including the first
/// attach point), fused into loop 0 (TVM's `FuseAllOuterSpaceIterators`); how many.
fn fuse_outer_space(s: &mut State, i: usize) -> Result<usize, StateError> {
    let sch = replay(s)?;
    let st = &sch.stages()[i];
    let mut k = 0;
    while k < st.leaf_iter_vars.len() {
        let iv = &st.leaf_iter_vars[k];
        if iv.is_reduce() || st.annotation(iv) != Annotation::None {
            break;
        }
        k += 1;
        if is_attach_point(&sch, i, k - 1) {
            break;
        }
    }
    fuse_first(s, i, k)?;
    Ok(k)
}

/// Fuses the first `k` loops of stage `i` into one (nothing to do for fewer than two).
fn fuse_first(s: &mut State, i: usize, k: usize) -> Result<(), StateError> {
    if k > 1 {
        s.push(Step::Fuse(FuseStep {
            stage: i,
            iters: (0..k).collect(),
        }))?;
    }
    Ok(())
}

fn bind(s: &mut State, stage: usize, iter: usize, t: ThreadAxis) -> Result<(), StateError> {
    s.push(Step::Annotation(AnnotationStep {
        stage,
        iter,
        ann: IterAnnotation::Thread(t),
    }))
}

/// The extent of loop `k` of stage `i`.
fn extent_of(s: &State, i: usize, k: usize) -> Result<i64, StateError> {
    let r = s.replay()?;
    let ext = leaf_extents(&r.schedule, &r.args).map_err(|e| StateError::Bounds(e.to_string()))?;
    Ok(ext[i][k])
}

/// The split steps made on stage `i` (as it is numbered after the whole history) that
/// split spatial loops: each step's stage number is followed back through the steps that
/// added stages (TVM's `GetSpatialSplitStepIds`; reduction loops are split last).
fn spatial_split_steps(s: &State, sch: &Schedule, i: usize) -> Vec<usize> {
    let mut idx = i;
    let mut found = Vec::new();
    for (k, step) in s.steps().iter().enumerate().rev() {
        // where a stage-adding step put its new stage
        let inserted = match step {
            Step::CacheRead(CacheReadStep { stage, .. }) => Some(stage + 1),
            Step::CacheWrite(CacheWriteStep { stage, .. })
            | Step::Rfactor(RfactorStep { stage, .. }) => Some(*stage),
            _ => None,
        };
        if let Some(q) = inserted {
            match idx.cmp(&q) {
                std::cmp::Ordering::Greater => idx -= 1,
                // the stage was made here: nothing before is about it
                std::cmp::Ordering::Equal => break,
                std::cmp::Ordering::Less => {}
            }
            continue;
        }
        if matches!(step, Step::Split(SplitStep { stage, .. }) if *stage == idx) {
            found.push(k);
        }
    }
    found.reverse();
    found.truncate(
        found
            .len()
            .saturating_sub(sch.stages()[i].op.reduce_axis().len()),
    );
    found
}

/// Beyond TVM: a multi-level tiling whose virtual-thread level (the second spatial
/// level) exceeds `max_vthread_extent` has that level's factors moved, axis by axis,
/// into the block level (the outermost, which takes what the others leave): still a
/// factorization of every axis, and within the limit. TVM refuses such a state; with
/// Mali's limit of 1, almost every random tiling would be refused.
fn fit_vthreads(s: &mut State, g: &GpuLimits) -> Result<(), StateError> {
    let sch = replay(s)?;
    let mut steps = s.steps().to_vec();
    let mut changed = false;
    for (i, st) in sch.stages().iter().enumerate() {
        if st.is_placeholder() || !needs_multi_level_tiling(&st.op) {
            continue;
        }
        let splits = spatial_split_steps(s, &sch, i);
        let vthread = |steps: &[Step]| -> i64 {
            splits
                .iter()
                .filter_map(|&k| match &steps[k] {
                    Step::Split(SplitStep { lengths, .. }) if lengths.len() >= 2 => lengths[0],
                    _ => None,
                })
                .product()
        };
        for &k in &splits {
            if vthread(&steps) <= g.max_vthread_extent {
                break;
            }
            if let Step::Split(SplitStep { lengths, .. }) = &mut steps[k] {
                if lengths.len() >= 2 && lengths[0].is_some_and(|l| l > 1) {
                    lengths[0] = Some(1);
                    changed = true;
                }
            }
        }
    }
    if changed {
        s.set_steps(steps)?;
    }
    Ok(())
}

/// TVM's `InitThreadBind`.
fn bind_threads(s: &mut State, g: &GpuLimits) -> Result<(), StateError> {
    let sch = replay(s)?;
    // the stages that multi-level tiled stages are computed in
    let mut tiled_roots = HashSet::new();
    for st in sch.stages() {
        if let Attach::At { target, .. } = &st.attach {
            if needs_multi_level_tiling(&st.op) {
                tiled_roots.extend(stage_of(&sch, target));
            }
        }
    }
    let n = sch.stages().len();
    for i in (0..n).rev() {
        let sch = replay(s)?;
        let st = &sch.stages()[i];
        if st.is_placeholder() || st.attach == Attach::Inline {
            continue;
        }
        if has_cross_thread_reduction(&sch, i) {
            if st.attach == Attach::Root && fuse_outer_space(s, i)? > 0 {
                bind(s, i, 0, ThreadAxis::BlockIdxX)?;
            }
            continue;
        }
        let thread_x = Annotation::Bind(ThreadAxis::ThreadIdxX);
        if st
            .leaf_iter_vars
            .iter()
            .any(|iv| st.annotation(iv) == thread_x)
        {
            continue;
        }
        match &st.attach {
            Attach::Root => {
                let n_axis = st.op.axis().len();
                let (space, _) = space_and_reduce_lengths(&st.op);
                if !tiled_roots.contains(&i) || space <= g.warp_size {
                    if fuse_outer_space(s, i)? == 0 {
                        continue;
                    }
                    if space <= g.warp_size || extent_of(s, i, 0)? <= g.warp_size {
                        bind(s, i, 0, ThreadAxis::ThreadIdxX)?;
                    } else {
                        s.push(Step::Split(SplitStep {
                            stage: i,
                            iter: 0,
                            extent: Some(extent_of(s, i, 0)?),
                            lengths: vec![Some(g.warp_size)],
                            inner_to_outer: true,
                        }))?;
                        bind(s, i, 0, ThreadAxis::BlockIdxX)?;
                        bind(s, i, 1, ThreadAxis::ThreadIdxX)?;
                    }
                    continue;
                }
                // a tiled root: its first three spatial levels, one loop per axis each
                let levels = [
                    ThreadAxis::BlockIdxX,
                    ThreadAxis::VThread,
                    ThreadAxis::ThreadIdxX,
                ];
                for (l, t) in levels.into_iter().enumerate() {
                    if n_axis > 1 {
                        s.push(Step::Fuse(FuseStep {
                            stage: i,
                            iters: (l..l + n_axis).collect(),
                        }))?;
                    }
                    let e = extent_of(s, i, l)?;
                    if t == ThreadAxis::VThread && e > g.max_vthread_extent {
                        return Err(invalid(
                            s,
                            format!("vthread extent {e} > {}", g.max_vthread_extent),
                        ));
                    }
                    if t == ThreadAxis::ThreadIdxX && e < g.warp_size {
                        return Err(invalid(s, format!("{e} threads, fewer than a warp")));
                    }
                    bind(s, i, l, t)?;
                }
            }
            Attach::At { target, .. } if st.name().ends_with(".shared") => {
                // cooperative fetching: all the block's threads copy the tile
                let Some(t) = stage_of(&sch, target) else {
                    continue;
                };
                let splits = spatial_split_steps(s, &sch, t);
                let n_loops = st.leaf_iter_vars.len();
                fuse_first(s, i, n_loops)?;
                s.push(Step::Split(SplitStep {
                    stage: i,
                    iter: 0,
                    extent: Some(extent_of(s, i, 0)?),
                    lengths: vec![Some(1)],
                    inner_to_outer: true,
                }))?;
                s.push(Step::Annotation(AnnotationStep {
                    stage: i,
                    iter: 1,
                    ann: IterAnnotation::Vectorize,
                }))?;
                if !splits.is_empty() {
                    s.push(Step::FollowFusedSplit(FollowFusedSplitStep {
                        stage: i,
                        iter: 0,
                        src_steps: splits,
                        level: 1,
                        factor_or_nparts: true,
                    }))?;
                    bind(s, i, 1, ThreadAxis::ThreadIdxX)?;
                }
            }
            Attach::At { .. } | Attach::Inline => {}
        }
    }
    Ok(())
}

/// The threads, virtual threads and shared memory of every kernel (root stage with the
/// stages computed inside it) within `g`'s limits.
pub fn check_gpu_limits(s: &State, g: &GpuLimits) -> Result<(), StateError> {
    let r = s.replay()?;
    let sch = &r.schedule;
    let ext = leaf_extents(sch, &r.args).map_err(|e| StateError::Bounds(e.to_string()))?;
    let root_of = |mut i: usize| {
        let mut hops = 0;
        while let Attach::At { target, .. } = &sch.stages()[i].attach {
            match stage_of(sch, target) {
                Some(t) if hops < sch.stages().len() => {
                    i = t;
                    hops += 1;
                }
                _ => break,
            }
        }
        i
    };
    let mut shared: HashMap<usize, i64> = HashMap::new();
    for (i, st) in sch.stages().iter().enumerate() {
        if st.is_placeholder() || st.attach == Attach::Inline {
            continue;
        }
        for (k, iv) in st.leaf_iter_vars.iter().enumerate() {
            let e = ext[i][k];
            match st.annotation(iv) {
                Annotation::Bind(ThreadAxis::VThread) if e > g.max_vthread_extent => {
                    return Err(invalid(
                        s,
                        format!(
                            "`{}`: vthread extent {e} > {}",
                            st.name(),
                            g.max_vthread_extent
                        ),
                    ));
                }
                Annotation::Bind(
                    ThreadAxis::ThreadIdxX | ThreadAxis::ThreadIdxY | ThreadAxis::ThreadIdxZ,
                ) if e > g.max_threads_per_block => {
                    return Err(invalid(
                        s,
                        format!(
                            "`{}`: {e} threads per block > {}",
                            st.name(),
                            g.max_threads_per_block
                        ),
                    ));
                }
                _ => {}
            }
        }
        if st.name().ends_with(".shared") {
            let elems: i64 = ext[i].iter().product();
            *shared.entry(root_of(i)).or_default() += elems * st.op.dtype().bytes() as i64;
        }
    }
    if let Some((&root, &bytes)) = shared
        .iter()
        .find(|(_, &b)| b > g.max_shared_memory_per_block)
    {
        return Err(invalid(
            s,
            format!(
                "kernel `{}` uses {bytes} bytes of shared memory > {}",
                sch.stages()[root].name(),
                g.max_shared_memory_per_block
            ),
        ));
    }
    Ok(())
}
