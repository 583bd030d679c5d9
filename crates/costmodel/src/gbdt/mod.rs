//! Gradient-boosted regression trees: XGBoost's algorithm, the part of it TVM's cost
//! models use, written here.
//!
//! - Second-order boosting: each round fits one tree to the objective's gradient and
//!   hessian at the current margins ([`Objective`]); a leaf's weight is
//!   `-T(G, alpha) / (H + lambda)` times `eta`, with `T` XGBoost's L1 soft threshold.
//! - The exact greedy split search (XGBoost's `tree_method=exact`): every threshold
//!   between two consecutive distinct values of every feature, grown level by level up
//!   to `max_depth`, a split kept when its loss change is positive and at least `gamma`
//!   and both children weigh at least `min_child_weight` ([`tree`]).
//! - Missing values (NaN) go to a default side learned per split, as XGBoost's
//!   sparsity-aware search does; 0 is an ordinary value.
//! - Row subsampling per tree (`subsample`), from a seeded generator.
//!
//! Why not the XGBoost library: its Rust bindings (`xgboost-rs`) build XGBoost's C++
//! with cmake and generate bindings with libclang at build time — 286 s of a 432 s
//! fresh build on 2 cores, and three system packages (`g++ cmake libclang-dev`) a
//! newcomer must install; the one pure-Rust reimplementation we found (`hessboost`,
//! 100k lines) took 230 s of CPU to compile alone. What
//! the cost models need — squared error, pairwise ranking and a custom (pack-sum)
//! objective, deterministic (the split search of a large level on every core, the same
//! trees for any number of threads), on at most tens of thousands of rows
//! — is this module.

mod objective;
mod tree;

pub use objective::{GradPair, Objective, PairwiseRank, SquaredError};
pub use tree::{Node, Tree};

use crate::CostModelError;
use serde::{Deserialize, Serialize};

/// The training parameters, with XGBoost's names and meanings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BoostParams {
    /// The deepest a tree grows (a root alone is depth 0).
    pub max_depth: u32,
    /// The least loss change a split must bring (`min_split_loss`).
    pub gamma: f64,
    /// The least hessian sum each side of a split must hold.
    pub min_child_weight: f64,
    /// The fraction of the rows each tree is grown on (1: all of them).
    pub subsample: f64,
    /// The shrinkage of every leaf weight (`learning_rate`).
    pub eta: f64,
    /// L2 regularization of the leaf weights.
    pub lambda: f64,
    /// L1 regularization of the leaf weights.
    pub alpha: f64,
    /// Seeds the row subsampling and the ranking objective's pairs.
    pub seed: u64,
}

/// The deepest tree allowed (up to 2^20 leaves): `max_depth` beyond it is a parameter
/// error.
pub const MAX_DEPTH: u32 = 20;

impl BoostParams {
    /// Refuses values XGBoost refuses, naming the parameter.
    pub fn check(&self) -> Result<(), CostModelError> {
        let bad = |name: &'static str, value: f64, expected: &'static str| {
            Err(CostModelError::BadParameter {
                name,
                value,
                expected,
            })
        };
        let finite_at_least_0 = |v: f64| v.is_finite() && v >= 0.0;
        if self.max_depth == 0 || self.max_depth > MAX_DEPTH {
            return bad(
                "max_depth",
                self.max_depth as f64,
                "an integer from 1 to 20",
            );
        }
        if !(self.eta.is_finite() && self.eta > 0.0) {
            return bad("eta (learning_rate)", self.eta, "a number above 0");
        }
        if !(self.subsample > 0.0 && self.subsample <= 1.0) {
            return bad("subsample", self.subsample, "a fraction in (0, 1]");
        }
        for (name, v) in [
            ("gamma", self.gamma),
            ("min_child_weight", self.min_child_weight),
            ("lambda", self.lambda),
            ("alpha", self.alpha),
        ] {
            if !finite_at_least_0(v) {
                return bad(name, v, "a finite number at least 0");
            }
        }
        Ok(())
    }
}

/// Rows of features, row-major; NaN is a missing value.
#[derive(Clone, Copy, Debug)]
pub struct Matrix<'a> {
    values: &'a [f32],
    cols: usize,
}

impl<'a> Matrix<'a> {
    /// `values` holds whole rows of `cols` values each (`cols` at least 1).
    pub fn new(values: &'a [f32], cols: usize) -> Result<Self, CostModelError> {
        if cols == 0 {
            return Err(CostModelError::EmptyFeatures);
        }
        if !values.len().is_multiple_of(cols) {
            return Err(CostModelError::RaggedFeatures {
                row: values.len() / cols,
                len: values.len() % cols,
                expected: cols,
            });
        }
        Ok(Matrix { values, cols })
    }

    pub fn rows(&self) -> usize {
        self.values.len() / self.cols
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    pub fn row(&self, r: usize) -> &'a [f32] {
        &self.values[r * self.cols..(r + 1) * self.cols]
    }

    fn get(&self, r: usize, c: usize) -> f32 {
        self.values[r * self.cols + c]
    }
}

/// A trained ensemble: a prediction is `base_score` plus one leaf value per tree.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Forest {
    pub base_score: f32,
    /// The row width it was trained on.
    pub num_features: usize,
    pub trees: Vec<Tree>,
}

impl Forest {
    /// Boosts `rounds` trees on `x` for `objective`, starting every margin at
    /// `base_score`, the split search on every core. Deterministic: the same inputs
    /// give the same trees.
    pub fn train(
        params: &BoostParams,
        x: Matrix<'_>,
        rounds: u32,
        base_score: f32,
        objective: &mut dyn Objective,
    ) -> Result<Forest, CostModelError> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Forest::train_on(params, x, rounds, base_score, objective, cores)
    }

    /// [`train`](Self::train) with the split search of a large level on `threads`
    /// threads (XGBoost's `nthread`): the features are scanned in parallel and their
    /// best splits taken in feature order, so the trees are the same for any number.
    /// A tuner retrains after every round, on thousands of programs once the model's
    /// memory is loaded: on one thread that was a quarter of a tuning run's time.
    pub fn train_on(
        params: &BoostParams,
        x: Matrix<'_>,
        rounds: u32,
        base_score: f32,
        objective: &mut dyn Objective,
        threads: usize,
    ) -> Result<Forest, CostModelError> {
        params.check()?;
        let threads = tree::threads_for(x.rows() * x.cols(), threads);
        let n = x.rows();
        if n == 0 {
            return Err(CostModelError::NoData);
        }
        let columns = tree::SortedColumns::new(x);
        let mut rng = SplitMix(params.seed ^ 0x5EED_0F7E);
        let mut margins = vec![base_score; n];
        let mut gpairs = vec![GradPair::default(); n];
        let mut trees = Vec::with_capacity(rounds as usize);
        let mut sampled = vec![true; n];
        for _ in 0..rounds {
            objective.gradients(&margins, &mut gpairs, &mut rng);
            if params.subsample < 1.0 {
                for s in sampled.iter_mut() {
                    *s = rng.unit() < params.subsample;
                }
            }
            let (tree, leaf_of) = tree::grow(params, x, &columns, &gpairs, &sampled, threads);
            for (r, m) in margins.iter_mut().enumerate() {
                // rows left out of this tree's sample are routed through it afterwards
                *m += match leaf_of[r] {
                    Some(leaf) => tree.leaf_value(leaf),
                    None => tree.predict(x.row(r)),
                };
            }
            trees.push(tree);
        }
        Ok(Forest {
            base_score,
            num_features: x.cols(),
            trees,
        })
    }

    /// The raw margin of every row of `x` (of this forest's width).
    pub fn predict(&self, x: Matrix<'_>) -> Vec<f32> {
        (0..x.rows())
            .map(|r| {
                let row = x.row(r);
                self.trees
                    .iter()
                    .fold(self.base_score, |m, t| m + t.predict(row))
            })
            .collect()
    }
}

/// SplitMix64's increment.
pub(crate) const SPLITMIX_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output for the state `z` before its increment: a bijective 64-bit
/// mix (also the random models' hash).
pub(crate) fn splitmix(z: u64) -> u64 {
    let mut z = z.wrapping_add(SPLITMIX_GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// SplitMix64: the row sampling's and the ranking pairs' generator.
#[derive(Clone, Debug)]
pub struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> Self {
        SplitMix(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        let z = self.0;
        self.0 = self.0.wrapping_add(SPLITMIX_GAMMA);
        splitmix(z)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..n` (`n` at least 1).
    pub fn below(&mut self, n: usize) -> usize {
        (((self.next_u64() >> 32) * n as u64) >> 32) as usize
    }
}

/// Writes `forest` as JSON at `path`, through a sibling temporary file and a rename so
/// that a killed process leaves the old file or the new one, never half of one.
pub fn save(forest: &Forest, path: &std::path::Path) -> Result<(), CostModelError> {
    let text = serde_json::to_string(forest).expect("a forest serializes");
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    std::fs::write(&tmp, text).map_err(|e| CostModelError::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| CostModelError::io(path, e))
}

/// Reads a forest written by [`save`], checking that every tree is well formed.
pub fn load(path: &std::path::Path) -> Result<Forest, CostModelError> {
    let text = std::fs::read_to_string(path).map_err(|e| CostModelError::io(path, e))?;
    let bad = |message: String| CostModelError::BadFile {
        path: path.to_path_buf(),
        message,
    };
    let forest: Forest =
        serde_json::from_str(&text).map_err(|e| bad(format!("not a saved forest: {e}")))?;
    if let Some(i) = forest
        .trees
        .iter()
        .position(|t| !t.is_well_formed(forest.num_features))
    {
        return Err(bad(format!("tree {i} is malformed")));
    }
    Ok(forest)
}
