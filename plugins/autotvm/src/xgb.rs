//! The model-based tuner (AutoTVM's XGBTuner): a cost model, trained on every
//! measurement so far, guides a simulated-annealing search over the space whose best
//! predicted unmeasured points make up the next trials, with a share of random ones for
//! exploration (ε-greedy).
//!
//! As in TVM (`SimulatedAnnealingOptimizer`): `sa_parallel` chains start from random
//! points (persistent: later plans go on from where the last one stopped), each step
//! moves every chain by a random walk and accepts a move with probability
//! `exp((new − old) / t)`, the temperature falling linearly from 1 to 0 over `sa_iters`
//! steps; the `plan_size` best predicted unmeasured points seen are the plan, and the
//! search stops early when that set has not changed for `sa_early_stop` steps.
//!
//! Different from TVM, on purpose: TVM measures `plan_size` (64) random points before
//! its first fit and refits every `plan_size` measurements; here the first fit comes
//! after `warmup` (16) and the model is refit and the plan redone every `refit` (16)
//! measurements, so the model starts guiding after a quarter of TVM's random start.
//! Refitting costs milliseconds; the annealing about a second at most, since the
//! features of every point it visits are cached.

use crate::space::ConfigSpace;
use crate::templates::TemplateTask;
use crate::tuners::{Observation, Rng, Tuner};
use std::collections::{HashMap, HashSet};
use tessera_costmodel::{
    curve_features, itervar_features, knob_features, CostModel, LossType, RandomModel, XgbModel,
};

/// Which features describe a configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeatureType {
    /// The flattened knob values.
    Knob,
    /// Loop and access statistics of the lowered program.
    Itervar,
    /// Sampled reuse curves of the lowered program.
    Curve,
}

impl FeatureType {
    pub fn name(self) -> &'static str {
        match self {
            FeatureType::Knob => "knob",
            FeatureType::Itervar => "itervar",
            FeatureType::Curve => "curve",
        }
    }
}

/// Options of the model-based tuner (TVM's defaults: plan size 64, itervar features,
/// regression loss, 5 % random exploration, 128 annealing chains, 500 steps, early stop
/// after 50).
#[derive(Clone, Debug)]
pub struct XgbOptions {
    pub feature_type: FeatureType,
    pub loss: LossType,
    /// How many of the best predicted points the annealing keeps (the plan).
    pub plan_size: usize,
    pub eps_greedy: f64,
    /// Random measurements before the first fit.
    pub warmup: usize,
    /// Measurements between refits (each refit redoes the plan).
    pub refit: usize,
    /// Simulated annealing: chains, steps, and steps without a change of the plan
    /// before it stops.
    pub sa_parallel: usize,
    pub sa_iters: usize,
    pub sa_early_stop: usize,
    /// Use the random model instead of the gradient-boosted trees (the baseline of the model's value).
    pub random_model: bool,
}

impl Default for XgbOptions {
    fn default() -> Self {
        XgbOptions {
            feature_type: FeatureType::Itervar,
            loss: LossType::Reg,
            plan_size: 64,
            eps_greedy: 0.05,
            warmup: 16,
            refit: 16,
            sa_parallel: 128,
            sa_iters: 500,
            sa_early_stop: 50,
            random_model: false,
        }
    }
}

impl XgbOptions {
    /// Parses TVM's tuner names: `xgb`, `xgb_knob`, `xgb_itervar`, `xgb_curve`,
    /// `xgb_rank`, `xgb_rank_knob`, `xgb_rank_binary_curve`, … (loss, then features).
    pub fn parse(name: &str) -> Option<XgbOptions> {
        let rest = name.strip_prefix("xgb")?;
        let mut o = XgbOptions::default();
        let mut rest = rest.strip_prefix('_').unwrap_or(rest);
        for (prefix, loss) in [
            ("rank_binary", LossType::RankBinary),
            ("rank", LossType::Rank),
            ("reg", LossType::Reg),
        ] {
            if let Some(r) = rest.strip_prefix(prefix) {
                o.loss = loss;
                rest = r.strip_prefix('_').unwrap_or(r);
                break;
            }
        }
        o.feature_type = match rest {
            "" | "itervar" => FeatureType::Itervar,
            "knob" => FeatureType::Knob,
            "curve" => FeatureType::Curve,
            _ => return None,
        };
        Some(o)
    }
}

/// Features of visited points are cached up to this many entries (then the cache is
/// cleared; measured points keep theirs in the training set).
const FEATURE_CACHE: usize = 200_000;

/// The best-scored unmeasured points seen, best first (ties: lower index first).
struct TopK {
    keep: usize,
    items: Vec<(f32, u64)>,
    members: HashSet<u64>,
}

impl TopK {
    fn new(keep: usize) -> TopK {
        TopK {
            keep,
            items: Vec::new(),
            members: HashSet::new(),
        }
    }

    /// Offers point `p` of score `s`; true when it joined.
    fn offer(&mut self, s: f32, p: u64, visited: &HashSet<u64>) -> bool {
        if !s.is_finite() || visited.contains(&p) || self.members.contains(&p) {
            return false;
        }
        if self.items.len() == self.keep && self.items[self.keep - 1].0 >= s {
            return false;
        }
        let at = self
            .items
            .partition_point(|&(b, q)| b > s || (b == s && q < p));
        self.items.insert(at, (s, p));
        self.members.insert(p);
        if self.items.len() > self.keep {
            let (_, out) = self.items.pop().expect("over-full");
            self.members.remove(&out);
        }
        true
    }
}

/// The model-based tuner.
pub struct XgbTuner {
    task: TemplateTask,
    opts: XgbOptions,
    model: Box<dyn CostModel>,
    rng: Rng,
    visited: HashSet<u64>,
    features: HashMap<u64, Option<Vec<f32>>>,
    xs: Vec<Vec<f32>>,
    ys: Vec<f32>,
    trained_on: usize,
    /// The annealing's chains (persistent across plans).
    chains: Vec<u64>,
    /// The current plan, best predicted first, and how far it has been taken.
    plan: Vec<u64>,
    plan_pos: usize,
}

impl XgbTuner {
    pub fn new(task: &TemplateTask, opts: XgbOptions, seed: u64) -> Self {
        let model: Box<dyn CostModel> = if opts.random_model {
            Box::new(RandomModel::new(seed))
        } else {
            Box::new(XgbModel::new(opts.loss))
        };
        XgbTuner {
            task: task.clone(),
            opts,
            model,
            rng: Rng::new(seed),
            visited: HashSet::new(),
            features: HashMap::new(),
            xs: Vec::new(),
            ys: Vec::new(),
            trained_on: 0,
            chains: Vec::new(),
            plan: Vec::new(),
            plan_pos: 0,
        }
    }

    /// The features of configuration `index` (`None` when it cannot be instantiated).
    fn feature(&mut self, index: u64) -> Option<Vec<f32>> {
        if let Some(f) = self.features.get(&index) {
            return f.clone();
        }
        if self.features.len() >= FEATURE_CACHE {
            self.features.clear();
        }
        let f = self
            .task
            .space
            .get(index)
            .ok()
            .and_then(|c| match self.opts.feature_type {
                FeatureType::Knob => Some(knob_features(&self.task.space.knob_numbers(&c))),
                FeatureType::Itervar => self
                    .task
                    .instantiate(&c, "f")
                    .ok()
                    .map(|f| itervar_features(&f)),
                FeatureType::Curve => self
                    .task
                    .instantiate(&c, "f")
                    .ok()
                    .map(|f| curve_features(&f, 20)),
            });
        self.features.insert(index, f.clone());
        f
    }

    fn learn(&mut self, obs: &[Observation]) {
        for o in obs {
            if let Some(f) = self.feature(o.index) {
                self.xs.push(f);
                self.ys.push(o.gflops.max(0.0) as f32);
            }
        }
    }

    /// Refits the model once `warmup` measurements exist and `refit` more have come
    /// since the last fit, then redoes the plan.
    fn fit(&mut self) {
        let warmup = self.opts.warmup.min(self.task.space.len() as usize).max(1);
        let due = if self.trained_on == 0 {
            self.xs.len() >= warmup
        } else {
            self.xs.len() >= self.trained_on + self.opts.refit.max(1)
        };
        if due && self.ys.iter().any(|&y| y > 0.0) && self.model.update(&self.xs, &self.ys).is_ok()
        {
            self.trained_on = self.xs.len();
            self.plan = self.anneal();
            self.plan_pos = 0;
        }
    }

    /// The model's scores of `points` (a point that cannot be instantiated scores
    /// −∞); `None` when the model fails.
    fn scores(&mut self, points: &[u64]) -> Option<Vec<f32>> {
        let mut rows = Vec::with_capacity(points.len());
        let mut at = Vec::with_capacity(points.len());
        for &p in points {
            match self.feature(p) {
                Some(f) => {
                    at.push(Some(rows.len()));
                    rows.push(f);
                }
                None => at.push(None),
            }
        }
        let pred = if rows.is_empty() {
            Vec::new()
        } else {
            self.model.predict(&rows).ok()?
        };
        Some(
            at.into_iter()
                .map(|a| a.map_or(f32::NEG_INFINITY, |k| pred[k]))
                .collect(),
        )
    }

    /// Simulated annealing over the space with the model as the energy: the
    /// `plan_size` best predicted unmeasured points found, best first.
    fn anneal(&mut self) -> Vec<u64> {
        let space = self.task.space.clone();
        let len = space.len();
        let keep = self.opts.plan_size.max(1);
        let n_chains = self.opts.sa_parallel.max(1).min(len as usize);
        while self.chains.len() < n_chains {
            let i = self.rng.below(len);
            self.chains.push(i);
        }
        self.chains.truncate(n_chains);
        let mut points = self.chains.clone();
        let Some(mut scores) = self.scores(&points) else {
            return Vec::new();
        };
        let mut best = TopK::new(keep);
        for (&s, &p) in scores.iter().zip(&points) {
            best.offer(s, p, &self.visited);
        }
        let iters = self.opts.sa_iters.max(1);
        let mut last_change = 0;
        for step in 0..iters {
            if step - last_change > self.opts.sa_early_stop {
                break;
            }
            let t = 1.0 - step as f64 / iters as f64;
            let mut moved = Vec::with_capacity(points.len());
            for &p in &points {
                let mut r = || self.rng.next_u64();
                moved.push(space.random_walk(p, &mut r).unwrap_or(p));
            }
            let Some(new_scores) = self.scores(&moved) else {
                break;
            };
            for k in 0..points.len() {
                let (old, new) = (scores[k], new_scores[k]);
                if best.offer(new, moved[k], &self.visited) {
                    last_change = step;
                }
                let accept = if new >= old {
                    true
                } else if !new.is_finite() {
                    false
                } else {
                    let p = ((f64::from(new) - f64::from(old)) / (t + 1e-5)).exp();
                    self.rng.unit() < p
                };
                if accept {
                    points[k] = moved[k];
                    scores[k] = new;
                }
            }
        }
        self.chains = points;
        best.items.into_iter().map(|(_, p)| p).collect()
    }

    fn random_fresh(&mut self, taken: &HashSet<u64>) -> Option<u64> {
        let len = self.task.space.len();
        for _ in 0..64 {
            let i = self.rng.below(len);
            if !self.visited.contains(&i) && !taken.contains(&i) {
                return Some(i);
            }
        }
        let start = self.rng.below(len);
        (0..len)
            .map(|k| (start + k) % len)
            .find(|i| !self.visited.contains(i) && !taken.contains(i))
    }
}

impl Tuner for XgbTuner {
    fn name(&self) -> String {
        let model = if self.opts.random_model {
            "random-model"
        } else {
            "xgb"
        };
        format!(
            "{model}_{}_{}",
            self.opts.loss.name(),
            self.opts.feature_type.name()
        )
    }

    fn next_batch(&mut self, _space: &ConfigSpace, n: usize) -> Vec<u64> {
        let mut out: Vec<u64> = Vec::new();
        let mut taken: HashSet<u64> = HashSet::new();
        while out.len() < n {
            // the plan's next unmeasured point, or (ε of the time, or once the plan is
            // used up) a random one
            let mut pick = None;
            if self.rng.unit() >= self.opts.eps_greedy {
                while self.plan_pos < self.plan.len() {
                    let p = self.plan[self.plan_pos];
                    self.plan_pos += 1;
                    if !self.visited.contains(&p) && !taken.contains(&p) {
                        pick = Some(p);
                        break;
                    }
                }
            }
            match pick.or_else(|| self.random_fresh(&taken)) {
                Some(i) => {
                    taken.insert(i);
                    out.push(i);
                }
                None => break,
            }
        }
        for &i in &out {
            self.visited.insert(i);
        }
        out
    }

    fn update(&mut self, _space: &ConfigSpace, observations: &[Observation]) {
        self.learn(observations);
        self.fit();
    }

    /// Transfer learning: measurements of the same task from earlier runs join the
    /// training data (and are not proposed again).
    fn load_history(&mut self, _space: &ConfigSpace, observations: &[Observation]) {
        for o in observations {
            self.visited.insert(o.index);
        }
        self.learn(observations);
        self.fit();
    }
}
