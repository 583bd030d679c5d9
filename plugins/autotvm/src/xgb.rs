//! The model-based tuner (AutoTVM's XGBTuner): a cost model, trained on every
//! measurement so far, ranks candidate configurations; each batch is the model's top
//! choices among a candidate pool, with a share of random ones for exploration.
//!
//! Differences from TVM, on purpose: TVM explores the space with simulated annealing
//! (500 iterations over 128 parallel chains); here the pool is a random sample of
//! unmeasured configurations plus random-walk neighbours of the best measured ones,
//! which covers the same ground for spaces of a few thousand points and costs less.
//! The model is refit after every batch once `plan_size` measurements exist (random
//! search until then, as TVM does before its first fit).

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
/// regression loss, 5 % random exploration).
#[derive(Clone, Debug)]
pub struct XgbOptions {
    pub feature_type: FeatureType,
    pub loss: LossType,
    pub plan_size: usize,
    pub eps_greedy: f64,
    /// Size of the candidate pool ranked before each batch.
    pub pool: usize,
    /// Use the random model instead of XGBoost (the baseline of the model's value).
    pub random_model: bool,
}

impl Default for XgbOptions {
    fn default() -> Self {
        XgbOptions {
            feature_type: FeatureType::Itervar,
            loss: LossType::Reg,
            plan_size: 64,
            eps_greedy: 0.05,
            pool: 512,
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
    observed: Vec<Observation>,
    trained_on: usize,
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
            observed: Vec::new(),
            trained_on: 0,
        }
    }

    /// The features of configuration `index` (`None` when it cannot be instantiated).
    fn feature(&mut self, index: u64) -> Option<Vec<f32>> {
        if let Some(f) = self.features.get(&index) {
            return f.clone();
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

    fn fit(&mut self) {
        if self.xs.len()
            >= self
                .opts
                .plan_size
                .min(self.task.space.len() as usize)
                .max(1)
            && self.xs.len() > self.trained_on
            && self.ys.iter().any(|&y| y > 0.0)
            && self.model.update(&self.xs, &self.ys).is_ok()
        {
            self.trained_on = self.xs.len();
        }
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

    fn next_batch(&mut self, space: &ConfigSpace, n: usize) -> Vec<u64> {
        let mut out: Vec<u64> = Vec::new();
        let mut taken: HashSet<u64> = HashSet::new();
        if self.model.is_trained() && self.trained_on > 0 {
            // The pool: random unmeasured points and neighbours of the best measured.
            let mut pool: Vec<u64> = Vec::new();
            let mut best = self.observed.clone();
            best.sort_by(|a, b| b.gflops.total_cmp(&a.gflops));
            for o in best.iter().take(8) {
                let mut idx = o.index;
                for _ in 0..self.opts.pool / 16 {
                    let mut r = || self.rng.next_u64();
                    if let Ok(j) = space.random_walk(idx, &mut r) {
                        idx = j;
                        if !self.visited.contains(&j) && !taken.contains(&j) {
                            taken.insert(j);
                            pool.push(j);
                        }
                    }
                }
            }
            while pool.len() < self.opts.pool {
                match self.random_fresh(&taken) {
                    Some(i) => {
                        taken.insert(i);
                        pool.push(i);
                    }
                    None => break,
                }
            }
            let mut scored: Vec<(u64, Vec<f32>)> = Vec::new();
            for i in pool {
                if let Some(f) = self.feature(i) {
                    scored.push((i, f));
                }
            }
            let xs: Vec<Vec<f32>> = scored.iter().map(|(_, f)| f.clone()).collect();
            if let Ok(pred) = self.model.predict(&xs) {
                let mut order: Vec<usize> = (0..scored.len()).collect();
                order.sort_by(|&a, &b| {
                    pred[b]
                        .total_cmp(&pred[a])
                        .then(scored[a].0.cmp(&scored[b].0))
                });
                let greedy = ((n as f64) * (1.0 - self.opts.eps_greedy)).ceil() as usize;
                for &k in order.iter().take(greedy.min(n)) {
                    out.push(scored[k].0);
                }
            }
            taken.clear();
            taken.extend(out.iter().copied());
        }
        while out.len() < n {
            match self.random_fresh(&taken) {
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
        self.observed.extend_from_slice(observations);
        self.learn(observations);
        self.fit();
    }

    /// Transfer learning: measurements of the same task from earlier runs join the
    /// training data (and are not proposed again).
    fn load_history(&mut self, _space: &ConfigSpace, observations: &[Observation]) {
        for o in observations {
            self.visited.insert(o.index);
        }
        self.observed.extend_from_slice(observations);
        self.learn(observations);
        self.fit();
    }
}
