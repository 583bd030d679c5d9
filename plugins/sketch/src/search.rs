//! The sketch search policy (TVM's `SketchPolicy`): the sketches of a task, random
//! annotation into an initial population, and evolutionary search guided by a cost
//! model, choosing the next batch of candidates to measure.
//!
//! - [`SketchPolicy::next_batch`]: before the model can answer, a batch of random
//!   annotations; after, the best predicted states of an evolutionary search whose
//!   initial population is fresh random annotations plus the best measured states
//!   (`use_measured_ratio`), with `eps_greedy` of the batch left to random samples.
//!   Every proposal is complete, replays, and has not been measured before (the dedup
//!   key is the step history: equal histories are equal programs), and its program is
//!   within `max_code_size` once its unrolled loops are expanded.
//! - Every sketch keeps being explored, and so do new tile sizes, which TVM does not
//!   do: the measured states seeded into the population are taken sketch by sketch
//!   (the best of each in turn), and `sketch_share` of the model's picks is spread
//!   evenly over the sketches, each sketch's best predicted states whose tile sizes
//!   (every split's lengths) were never measured, one per tiling; the rest go to the
//!   best predicted overall. Without it a model trained on a first round whose best
//!   program came from a weak sketch (a conv2d without its cache write) proposes
//!   variants of that program, and of one tiling of the strong sketch, for hundreds of
//!   trials; see BENCHMARKS.md.
//! - Mutations (TVM's CPU weights): a tile size (0.90, a factor moved between two levels
//!   of one split), the `auto_unroll_max_step` (0.04), a compute location (0.05), the
//!   number of loops fused for the parallel loop (0.01). A mutation that the schedule
//!   refuses is no mutation.
//! - Selection: parents drawn with probability proportional to the predicted score
//!   (negative scores count as zero), each mutated with `mutation_prob`; the best
//!   unmeasured states over all generations are kept in an elite list.

use crate::annotate::{annotate, check_gpu_limits, AnnotateParams, Factorizations};
use crate::sketch::{generate_sketches, SketchError, SketchTarget};
use std::collections::HashSet;
use tessera_search::rng::Rng;
use tessera_search::state::{
    AnnotationStep, ComputeAtStep, FollowFusedSplitStep, FollowSplitStep, FuseStep, IterAnnotation,
    PragmaStep, SplitStep, State, Step,
};
use tessera_te::ComputeDag;

/// The evolutionary search's knobs (TVM's `DEFAULT_PARAMS` but the population, which
/// is 2048 in TVM: lowering every member for its features costs about a millisecond
/// here, so the default is smaller; see the benchmarks).
#[derive(Clone, Debug)]
pub struct SearchParams {
    /// Members of each generation.
    pub population: usize,
    /// Generations.
    pub num_iters: usize,
    pub mutation_prob: f64,
    /// The fraction of each batch drawn at random rather than by the model.
    pub eps_greedy: f64,
    /// The fraction of the initial population taken from the best measured states.
    pub use_measured_ratio: f64,
    /// Random annotations tried per wanted state before sampling gives up (duplicates
    /// and already-measured states are retried).
    pub sample_attempts_per_state: usize,
    /// The fraction of the model's picks spread evenly over the sketches (each
    /// sketch's best predicted states with tilings never measured, one per tiling)
    /// before the rest go to the best predicted overall. 0: TVM's choice.
    pub sketch_share: f64,
    /// The largest program proposed for measurement, in IR nodes once its unrolled
    /// loops are expanded (`tessera_ir::transform::expanded_size`); 0: no limit.
    /// Larger programs are dropped before they cost a measurement: on the CPU they
    /// take seconds to compile, often hit the build timeout, and run at half the best
    /// speed or less.
    /// In our benchmark logs (12,072 programs of 9 tasks) no program within 0.8 of its
    /// task's best was over 267 nodes, while the programs over 4096 took 28–82 % of
    /// each run's build and run time; see BENCHMARKS.md.
    pub max_code_size: u64,
}

impl Default for SearchParams {
    fn default() -> Self {
        SearchParams {
            population: 256,
            num_iters: 4,
            mutation_prob: 0.85,
            eps_greedy: 0.05,
            use_measured_ratio: 0.2,
            sample_attempts_per_state: 8,
            sketch_share: 0.25,
            max_code_size: 4096,
        }
    }
}

/// Scores candidate states, higher is better (a cost model's prediction); a state that
/// cannot be lowered scores `f32::NEG_INFINITY` and is never proposed.
pub type Scorer<'a> = dyn FnMut(&[State]) -> Vec<f32> + 'a;

/// A state's sketch and split lengths: what the exploration share wants new.
pub type Tiling = (Option<usize>, Vec<Vec<Option<i64>>>);

/// The search policy of one task.
pub struct SketchPolicy {
    dag: ComputeDag,
    sketches: Vec<State>,
    annotate: AnnotateParams,
    params: SearchParams,
    rng: Rng,
    memo: Factorizations,
    measured: HashSet<Vec<Step>>,
    /// The tilings measured so far (see [`SketchPolicy::tiling_of`]).
    measured_tilings: HashSet<Tiling>,
    /// Successful measurements: the state, its throughput (higher is better) and its
    /// sketch.
    good: Vec<(State, f64, Option<usize>)>,
}

impl SketchPolicy {
    /// The policy of `dag`: its sketches for `target`, a seeded generator.
    pub fn new(
        dag: &ComputeDag,
        target: &SketchTarget,
        annotate: AnnotateParams,
        params: SearchParams,
        seed: u64,
    ) -> Result<SketchPolicy, SketchError> {
        let sketches = generate_sketches(dag, target)?;
        Ok(SketchPolicy {
            dag: dag.clone(),
            sketches,
            annotate,
            params,
            rng: Rng::new(seed),
            memo: Factorizations::default(),
            measured: HashSet::new(),
            measured_tilings: HashSet::new(),
            good: Vec::new(),
        })
    }

    pub fn dag(&self) -> &ComputeDag {
        &self.dag
    }
    pub fn sketches(&self) -> &[State] {
        &self.sketches
    }
    pub fn params(&self) -> &SearchParams {
        &self.params
    }
    /// States measured so far (successful or not).
    pub fn num_measured(&self) -> usize {
        self.measured.len()
    }
    pub fn is_measured(&self, s: &State) -> bool {
        self.measured.contains(s.steps())
    }

    /// Notes a measurement of `state`: `throughput` is `None` for a failure.
    pub fn record(&mut self, state: &State, throughput: Option<f64>) {
        self.measured.insert(state.steps().to_vec());
        let tiling = self.tiling_of(state);
        let sketch = tiling.0;
        self.measured_tilings.insert(tiling);
        if let Some(t) = throughput.filter(|t| t.is_finite() && *t > 0.0) {
            self.good.push((state.clone(), t, sketch));
        }
    }

    /// The tiling of `s`: its sketch and the lengths of each of its splits.
    pub fn tiling_of(&self, s: &State) -> Tiling {
        let lengths = s
            .steps()
            .iter()
            .filter_map(|st| match st {
                Step::Split(SplitStep { lengths, .. }) => Some(lengths.clone()),
                _ => None,
            })
            .collect();
        (self.sketch_of(s), lengths)
    }

    /// The sketch `s` was annotated from: the longest sketch whose steps begin `s`'s
    /// history, up to what annotation and mutation change in place (split lengths,
    /// compute-at loops, fused loops, pragma values). `None` for a history from
    /// elsewhere (a record of another policy version).
    pub fn sketch_of(&self, s: &State) -> Option<usize> {
        let steps = s.steps();
        self.sketches
            .iter()
            .enumerate()
            .filter(|(_, k)| {
                k.steps().len() <= steps.len()
                    && k.steps().iter().zip(steps).all(|(a, b)| same_shape(a, b))
            })
            .max_by_key(|(i, k)| (k.steps().len(), std::cmp::Reverse(*i)))
            .map(|(i, _)| i)
    }

    /// Up to `n` distinct complete states from random annotations of random sketches,
    /// none of them measured before, none in `exclude`, and each within
    /// `max_code_size` ([`SketchPolicy::code_fits`]).
    pub fn sample_initial_population(
        &mut self,
        n: usize,
        exclude: &HashSet<Vec<Step>>,
    ) -> Vec<State> {
        self.sample(n, exclude, true)
    }

    /// Whether the program of `s` is within `max_code_size`. A state that does not
    /// lower fits: its measurement records why it failed.
    pub fn code_fits(&self, s: &State) -> bool {
        let max = self.params.max_code_size;
        max == 0
            || crate::strategy::lower_state(s, "candidate")
                .map_or(true, |f| crate::strategy::code_within(&f, max))
    }

    /// [`SketchPolicy::sample_initial_population`]; `check_size: false` skips the code
    /// size check, for a population the scorer checks (the evolution's start).
    fn sample(&mut self, n: usize, exclude: &HashSet<Vec<Step>>, check_size: bool) -> Vec<State> {
        let mut out = Vec::new();
        let mut seen: HashSet<Vec<Step>> = HashSet::new();
        if self.sketches.is_empty() {
            return out;
        }
        let attempts = n.saturating_mul(self.params.sample_attempts_per_state.max(1));
        for _ in 0..attempts {
            if out.len() >= n {
                break;
            }
            let k = self.rng.index(self.sketches.len());
            let Ok(s) = annotate(
                &self.sketches[k],
                &self.annotate,
                &mut self.rng,
                &mut self.memo,
            ) else {
                continue;
            };
            let key = s.steps().to_vec();
            if !s.is_complete()
                || self.measured.contains(&key)
                || exclude.contains(&key)
                || !seen.insert(key)
                || (check_size && !self.code_fits(&s))
            {
                continue;
            }
            out.push(s);
        }
        out
    }

    /// The `n` fastest measured states with their throughputs, fastest first (ties:
    /// the first measured).
    pub fn fastest(&self, n: usize) -> Vec<(State, f64)> {
        let mut v: Vec<&(State, f64, Option<usize>)> = self.good.iter().collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1));
        v.into_iter()
            .take(n)
            .map(|(s, t, _)| (s.clone(), *t))
            .collect()
    }

    /// `n` of the best measured states, taken sketch by sketch: the best of each
    /// sketch (fastest sketch first), then the second best of each, and so on.
    fn best_measured(&self, n: usize) -> Vec<State> {
        let mut v: Vec<&(State, f64, Option<usize>)> = self.good.iter().collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1));
        let mut rank_in_sketch: std::collections::HashMap<Option<usize>, usize> =
            std::collections::HashMap::new();
        let mut ranked: Vec<(usize, usize, &State)> = v
            .into_iter()
            .enumerate()
            .map(|(overall, (s, _, k))| {
                let r = rank_in_sketch.entry(*k).or_insert(0);
                *r += 1;
                (*r, overall, s)
            })
            .collect();
        ranked.sort_by_key(|&(r, overall, _)| (r, overall));
        ranked
            .into_iter()
            .take(n)
            .map(|(_, _, s)| s.clone())
            .collect()
    }

    /// The next `n` states to measure. Without a scorer (the model is not trained
    /// yet): random annotations. With one: the evolutionary search's best predicted
    /// unmeasured states, and `eps_greedy` of the batch (at least one when the batch has
    /// room for it) random ones. Fewer than `n` only when the space seems exhausted.
    pub fn next_batch(&mut self, n: usize, scorer: Option<&mut Scorer>) -> Vec<State> {
        let Some(scorer) = scorer else {
            return self.sample_initial_population(n, &HashSet::new());
        };
        let n_random = if n > 1 {
            ((n as f64 * self.params.eps_greedy).round() as usize).max(1)
        } else {
            0
        };
        let pop = self.params.population.max(n);
        let n_measured_seed =
            ((pop as f64 * self.params.use_measured_ratio) as usize).min(self.good.len());
        let mut init = self.sample(pop - n_measured_seed, &HashSet::new(), false);
        init.extend(self.best_measured(n_measured_seed));
        let best = self.evolve(init, scorer, n - n_random);
        let mut chosen: HashSet<Vec<Step>> = best.iter().map(|s| s.steps().to_vec()).collect();
        let mut out = best;
        let want_random = n - out.len();
        let extra = self.sample_initial_population(want_random, &chosen);
        for s in extra {
            chosen.insert(s.steps().to_vec());
            out.push(s);
        }
        out
    }

    /// Evolutionary search from `init`: `num_iters` generations of score-proportional
    /// selection and mutation. Returns up to `out_size` unmeasured states seen whose
    /// code fits, best first: the best predicted of each sketch in turn for
    /// `sketch_share` of them, the best predicted overall for the rest.
    pub fn evolve(&mut self, init: Vec<State>, scorer: &mut Scorer, out_size: usize) -> Vec<State> {
        let n_sketches = self.sketches.len().max(1);
        let per_sketch = if n_sketches > 1 {
            (out_size as f64 * self.params.sketch_share / n_sketches as f64).floor() as usize
        } else {
            0
        };
        let keep_overall = out_size.max(1) * 2;
        // (state, score, its tiling if never measured)
        let mut elite: Vec<(State, f32, Option<Tiling>)> = Vec::new();
        let mut in_elite: HashSet<Vec<Step>> = HashSet::new();
        let mut pop = init;
        let size = self.params.population.max(out_size);
        for gen in 0..=self.params.num_iters {
            if pop.is_empty() {
                break;
            }
            let scores = scorer(&pop);
            for (s, &sc) in pop.iter().zip(&scores) {
                if !sc.is_finite() || self.measured.contains(s.steps()) {
                    continue;
                }
                if in_elite.insert(s.steps().to_vec()) {
                    let t = self.tiling_of(s);
                    let new = (t.0.is_some() && !self.measured_tilings.contains(&t)).then_some(t);
                    elite.push((s.clone(), sc, new));
                }
            }
            elite.sort_by(|a, b| b.1.total_cmp(&a.1));
            // keep the best overall, and the best of every sketch with a new tiling
            let explore = exploration_picks(&elite, per_sketch);
            let mut i = 0;
            elite.retain(|(s, _, _)| {
                let keep = i < keep_overall || explore.contains(&i);
                i += 1;
                if !keep {
                    in_elite.remove(s.steps());
                }
                keep
            });
            if gen == self.params.num_iters {
                break;
            }
            pop = self.next_generation(&pop, &scores, size);
        }
        let explore = exploration_picks(&elite, per_sketch);
        let mut out: Vec<State> = Vec::new();
        for &i in &explore {
            if out.len() >= out_size {
                break;
            }
            if self.code_fits(&elite[i].0) {
                out.push(elite[i].0.clone());
            }
        }
        for (i, (s, _, _)) in elite.iter().enumerate() {
            if out.len() >= out_size {
                break;
            }
            if !explore.contains(&i) && self.code_fits(s) {
                out.push(s.clone());
            }
        }
        out
    }

    /// Draws `size` children of `pop`, parents by score, each mutated with
    /// `mutation_prob` (a failed mutation keeps the parent).
    fn next_generation(&mut self, pop: &[State], scores: &[f32], size: usize) -> Vec<State> {
        let weights: Vec<f64> = scores
            .iter()
            .map(|&s| {
                if s.is_finite() {
                    s.max(0.0) as f64
                } else {
                    0.0
                }
            })
            .collect();
        let total: f64 = weights.iter().sum();
        let mut out = Vec::with_capacity(size);
        let mut seen: HashSet<Vec<Step>> = HashSet::new();
        let mut tries = 0;
        while out.len() < size && tries < size * 4 {
            tries += 1;
            let parent = if total > 0.0 {
                let mut x = self.rng.unit() * total;
                let mut k = 0;
                while k + 1 < weights.len() && x >= weights[k] {
                    x -= weights[k];
                    k += 1;
                }
                k
            } else {
                self.rng.index(pop.len())
            };
            let child = if self.rng.unit() < self.params.mutation_prob {
                self.mutate(&pop[parent])
                    .unwrap_or_else(|| pop[parent].clone())
            } else {
                pop[parent].clone()
            };
            if seen.insert(child.steps().to_vec()) {
                out.push(child);
            }
        }
        out
    }

    /// One random mutation of `s` (TVM's CPU or GPU weights), `None` when the chosen mutation
    /// has nothing to change or the schedule refuses the result.
    pub fn mutate(&mut self, s: &State) -> Option<State> {
        let x = self.rng.unit();
        if let Some(g) = self.annotate.gpu.clone() {
            // TVM's GPU weights; a child over the hardware's limits is dropped
            let child = if x < 0.90 {
                self.mutate_tile_size(s)
            } else {
                self.mutate_unroll(s)
            };
            return child.filter(|c| check_gpu_limits(c, &g).is_ok());
        }
        if x < 0.90 {
            self.mutate_tile_size(s)
        } else if x < 0.94 {
            self.mutate_unroll(s)
        } else if x < 0.99 {
            self.mutate_compute_location(s)
        } else {
            self.mutate_parallel(s)
        }
    }

    fn with_steps(&self, s: &State, steps: Vec<Step>) -> Option<State> {
        let mut t = s.clone();
        t.set_steps(steps).ok()?;
        (t.steps() != s.steps()).then_some(t)
    }

    /// TVM's `MutateTileSize`: one split's lengths (with the outermost, implied
    /// extent) lose a factor at one level and gain it at another, the innermost staying
    /// within `max_innermost_split_factor`.
    pub fn mutate_tile_size(&mut self, s: &State) -> Option<State> {
        let splits: Vec<usize> = s
            .steps()
            .iter()
            .enumerate()
            .filter(|(_, st)| matches!(st, Step::Split(SplitStep { lengths, extent: Some(_), .. }) if !lengths.is_empty() && lengths.iter().all(Option::is_some)))
            .map(|(k, _)| k)
            .collect();
        if splits.is_empty() {
            return None;
        }
        let k = splits[self.rng.index(splits.len())];
        let mut steps = s.steps().to_vec();
        let Step::Split(SplitStep {
            extent: Some(extent),
            lengths,
            inner_to_outer,
            ..
        }) = &mut steps[k]
        else {
            return None;
        };
        let inner: Vec<i64> = lengths.iter().map(|l| l.unwrap_or(1)).collect();
        let prod: i64 = inner.iter().product();
        if prod <= 0 || *extent % prod != 0 {
            return None;
        }
        // levels: the implied one first, then the given lengths
        let mut full = Vec::with_capacity(inner.len() + 1);
        full.push(*extent / prod);
        full.extend(&inner);
        let src_choices: Vec<usize> = (0..full.len()).filter(|&i| full[i] > 1).collect();
        if src_choices.is_empty() {
            return None;
        }
        let src = src_choices[self.rng.index(src_choices.len())];
        let divisors: Vec<i64> = (2..=full[src]).filter(|d| full[src] % d == 0).collect();
        let d = divisors[self.rng.index(divisors.len())];
        let mut dst = self.rng.index(full.len() - 1);
        if dst >= src {
            dst += 1;
        }
        full[src] /= d;
        full[dst] *= d;
        // the innermost level is the last length when splitting inner to outer
        let innermost = if *inner_to_outer {
            *full.last()?
        } else {
            full[0]
        };
        if innermost > self.annotate.max_innermost_split_factor {
            return None;
        }
        *lengths = full[1..].iter().map(|&l| Some(l)).collect();
        self.with_steps(s, steps)
    }

    /// A different `auto_unroll_max_step` on one stage.
    pub fn mutate_unroll(&mut self, s: &State) -> Option<State> {
        let prags: Vec<usize> = s
            .steps()
            .iter()
            .enumerate()
            .filter(|(_, st)| matches!(st, Step::Pragma(PragmaStep { pragma, .. }) if pragma.starts_with("auto_unroll_max_step$")))
            .map(|(k, _)| k)
            .collect();
        let choices = &self.annotate.unroll_steps;
        if prags.is_empty() || choices.len() < 2 {
            return None;
        }
        let k = prags[self.rng.index(prags.len())];
        let mut steps = s.steps().to_vec();
        let Step::Pragma(PragmaStep { pragma, .. }) = &mut steps[k] else {
            return None;
        };
        let now = pragma.clone();
        let others: Vec<i64> = choices
            .iter()
            .copied()
            .filter(|v| format!("auto_unroll_max_step${v}") != now)
            .collect();
        let v = others[self.rng.index(others.len())];
        *pragma = format!("auto_unroll_max_step${v}");
        self.with_steps(s, steps)
    }

    /// One `compute_at` moved to another loop of the same consumer (TVM's
    /// `MutateComputeLocation`; the new loop must be one the schedule accepts).
    pub fn mutate_compute_location(&mut self, s: &State) -> Option<State> {
        let cas: Vec<usize> = s
            .steps()
            .iter()
            .enumerate()
            .filter(|(_, st)| matches!(st, Step::ComputeAt(ComputeAtStep { .. })))
            .map(|(k, _)| k)
            .collect();
        if cas.is_empty() {
            return None;
        }
        let k = cas[self.rng.index(cas.len())];
        // the consumer's loops at the time of the step
        let before = State::with_steps(&self.dag, s.steps()[..k].to_vec()).ok()?;
        let sch = before.replay().ok()?.schedule;
        let Step::ComputeAt(ComputeAtStep {
            target_stage,
            target_iter,
            ..
        }) = s.steps()[k]
        else {
            return None;
        };
        let n_loops = sch.stages().get(target_stage)?.leaf_iter_vars.len();
        if n_loops < 2 {
            return None;
        }
        let mut to = self.rng.index(n_loops - 1);
        if to >= target_iter {
            to += 1;
        }
        let mut steps = s.steps().to_vec();
        if let Step::ComputeAt(ComputeAtStep { target_iter, .. }) = &mut steps[k] {
            *target_iter = to;
        }
        self.with_steps(s, steps)
    }

    /// TVM's `MutateParallel`: the parallel loop of one stage fuses a different number
    /// of outer loops; the later steps of that stage (and compute_ats into it) have
    /// their loop positions shifted to match.
    pub fn mutate_parallel(&mut self, s: &State) -> Option<State> {
        // a fuse of loops 0..m followed by a parallel annotation of loop 0
        let cands: Vec<usize> = s
            .steps()
            .windows(2)
            .enumerate()
            .filter(|(_, w)| {
                matches!((&w[0], &w[1]), (Step::Fuse(FuseStep { stage, iters }), Step::Annotation(AnnotationStep { stage: s2, iter: 0, ann: IterAnnotation::Parallel }))
                    if stage == s2 && iters.first() == Some(&0) && iters.windows(2).all(|p| p[1] == p[0] + 1))
            })
            .map(|(k, _)| k)
            .collect();
        if cands.is_empty() {
            return None;
        }
        let k = cands[self.rng.index(cands.len())];
        let Step::Fuse(FuseStep { stage, iters }) = &s.steps()[k] else {
            return None;
        };
        let (stage, m) = (*stage, iters.len());
        let before = State::with_steps(&self.dag, s.steps()[..k].to_vec()).ok()?;
        let n_loops = before.replay().ok()?.schedule.stages()[stage]
            .leaf_iter_vars
            .len();
        let new_m = 1 + self.rng.index(n_loops.min(m + 2).max(1));
        if new_m == m {
            return None;
        }
        let delta = m as i64 - new_m as i64; // positions after the fused loop move by this
        let shift = |i: usize| -> usize {
            if i >= 1 {
                (i as i64 + delta).max(0) as usize
            } else {
                i
            }
        };
        let mut steps = s.steps().to_vec();
        steps[k] = Step::Fuse(FuseStep {
            stage,
            iters: (0..new_m).collect(),
        });
        if new_m == 1 {
            steps.remove(k);
        }
        let start = if new_m == 1 { k + 1 } else { k + 2 };
        for st in steps.iter_mut().skip(start) {
            match st {
                Step::Annotation(AnnotationStep { stage: x, iter, .. })
                | Step::Pragma(PragmaStep { stage: x, iter, .. })
                | Step::Split(SplitStep { stage: x, iter, .. })
                | Step::FollowSplit(FollowSplitStep { stage: x, iter, .. })
                | Step::FollowFusedSplit(FollowFusedSplitStep { stage: x, iter, .. })
                    if *x == stage =>
                {
                    *iter = shift(*iter)
                }
                Step::Fuse(FuseStep { stage: x, iters }) if *x == stage => {
                    for i in iters.iter_mut() {
                        *i = shift(*i);
                    }
                }
                Step::ComputeAt(ComputeAtStep {
                    target_stage,
                    target_iter,
                    ..
                }) if *target_stage == stage => *target_iter = shift(*target_iter),
                _ => {}
            }
        }
        self.with_steps(s, steps)
    }
}

/// The exploration share of a sorted elite list: for every sketch, the indices of its
/// `per_sketch` best states with new tilings, one state per tiling.
fn exploration_picks(elite: &[(State, f32, Option<Tiling>)], per_sketch: usize) -> Vec<usize> {
    let mut out = Vec::new();
    if per_sketch == 0 {
        return out;
    }
    let mut taken: HashSet<&Tiling> = HashSet::new();
    let mut per: std::collections::HashMap<Option<usize>, usize> = std::collections::HashMap::new();
    for (i, (_, _, t)) in elite.iter().enumerate() {
        let Some(t) = t else { continue };
        let n = per.entry(t.0).or_insert(0);
        if *n < per_sketch && taken.insert(t) {
            *n += 1;
            out.push(i);
        }
    }
    out
}

/// Whether two steps are the same up to what annotation and mutation change in place.
fn same_shape(a: &Step, b: &Step) -> bool {
    match (a, b) {
        (
            Step::Split(SplitStep {
                stage: s1,
                iter: i1,
                extent: e1,
                lengths: l1,
                inner_to_outer: o1,
            }),
            Step::Split(SplitStep {
                stage: s2,
                iter: i2,
                extent: e2,
                lengths: l2,
                inner_to_outer: o2,
            }),
        ) => s1 == s2 && i1 == i2 && e1 == e2 && l1.len() == l2.len() && o1 == o2,
        (
            Step::ComputeAt(ComputeAtStep {
                stage: s1,
                target_stage: t1,
                ..
            }),
            Step::ComputeAt(ComputeAtStep {
                stage: s2,
                target_stage: t2,
                ..
            }),
        ) => s1 == s2 && t1 == t2,
        (Step::Fuse(FuseStep { stage: s1, .. }), Step::Fuse(FuseStep { stage: s2, .. })) => {
            s1 == s2
        }
        (
            Step::Pragma(PragmaStep {
                stage: s1,
                iter: i1,
                ..
            }),
            Step::Pragma(PragmaStep {
                stage: s2,
                iter: i2,
                ..
            }),
        ) => s1 == s2 && i1 == i2,
        _ => a == b,
    }
}
