//! Random annotation of a sketch (Ansor's second level, TVM's CPU init-population
//! rules, in TVM's order): fill every unfilled tile size with a random factorization,
//! move the stages that are neither tiled nor inlined to a random compute location, fuse
//! and parallelize the outer loops of every root stage, put a random
//! `auto_unroll_max_step` on every stage that reduces, and vectorize (fusing) the
//! innermost spatial loops of every stage.
//!
//! Each step is pushed onto the state, which replays it: a step the schedule refuses is
//! skipped, never a panic, and what comes out always replays.

use crate::analysis::{consumers, is_output, needs_multi_level_tiling};
use std::collections::HashMap;
use tessera_search::rng::Rng;
use tessera_search::state::{IterAnnotation, State, StateError, Step};
use tessera_te::lower::leaf_extents;
use tessera_te::{Attach, Schedule};

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
}

impl AnnotateParams {
    pub fn cpu(num_cores: i64) -> AnnotateParams {
        AnnotateParams {
            num_cores: num_cores.max(1),
            max_innermost_split_factor: 64,
            max_vectorize_size: 16,
            unroll_steps: vec![0, 16, 64, 512],
        }
    }
}

/// The ways to factor an extent into split lengths, memoized (TVM's
/// `SplitFactorizationMemo`).
#[derive(Default)]
pub struct Factorizations {
    memo: HashMap<(i64, usize, i64), Vec<Vec<i64>>>,
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
    change_compute_location(&mut s, rng)?;
    parallelize(&mut s, p)?;
    unroll(&mut s, p, rng)?;
    vectorize(&mut s, p, rng)?;
    Ok(s)
}

/// Every unfilled split gets a random factorization of its extent.
pub fn fill_tile_sizes(
    s: &mut State,
    p: &AnnotateParams,
    rng: &mut Rng,
    memo: &mut Factorizations,
) -> Result<(), StateError> {
    let mut steps = s.steps().to_vec();
    for step in &mut steps {
        if let Step::Split {
            extent, lengths, ..
        } = step
        {
            if lengths.iter().all(Option::is_some) {
                continue;
            }
            let e = extent.unwrap_or(1);
            let schemes = memo.schemes(e, lengths.len(), p.max_innermost_split_factor);
            let pick = &schemes[rng.index(schemes.len())];
            *lengths = pick.iter().map(|&l| Some(l)).collect();
        }
    }
    s.set_steps(steps)
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
            0 if st.op.reduce_axis().is_empty() => Step::ComputeInline { stage: i },
            0 | 1 => continue,
            _ => {
                let (c, k) = candidates[choice - 2];
                Step::ComputeAt {
                    stage: i,
                    target_stage: c,
                    target_iter: k,
                }
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
        if k > 1 {
            s.push(Step::Fuse {
                stage: i,
                iters: (0..k).collect(),
            })?;
        }
        s.push(Step::Annotation {
            stage: i,
            iter: 0,
            ann: IterAnnotation::Parallel,
        })?;
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
        s.push(Step::Pragma {
            stage: i,
            iter: 0,
            pragma: format!("auto_unroll_max_step${v}"),
        })?;
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
        if num > 1 {
            s.push(Step::Fuse {
                stage: i,
                iters: (first..len).collect(),
            })?;
        }
        s.push(Step::Annotation {
            stage: i,
            iter: first,
            ann: IterAnnotation::Vectorize,
        })?;
    }
    Ok(())
}
