//! The auto-scheduler's cost model (TVM's `auto_scheduler.XGBModel`): a program is a
//! bag of per-store feature rows ([`crate::store_features`]), and its score is the sum
//! of its rows' scores ("pack-sum").
//!
//! Training (TVM's `pack_sum_square_error`): every row carries its program's label `y`
//! (a normalized throughput: the task's best cost over this program's cost, 0 for a
//! failure) and weight `y`; the gradient of row `i` in program `p` is
//! `(Σ_{j∈p} pred_j − y_p) · y_p`, its hessian `y_p`. A program's rows are
//! consecutive in the training matrix; every margin starts at 0 (TVM's base score).
//! The trees are this crate's ([`crate::gbdt`]: XGBoost's exact algorithm).
//!
//! Parameters are TVM's (depth 10, gamma 0.001, min_child_weight 0, eta 0.2, seed
//! 43); TVM boosts up to 10000 rounds with early stopping on its own metric, we boost
//! a fixed number ([`PackSumParams::num_rounds`]).

use crate::gbdt::{BoostParams, Forest, GradPair, Matrix, Objective, SplitMix};
use crate::CostModelError;
use std::sync::atomic::{AtomicU64, Ordering};

/// A model that scores programs given as bags of feature rows (higher is better).
pub trait ProgramCostModel: Send {
    /// Trains from scratch on every program measured so far. `labels[p]` is the
    /// normalized throughput of `programs[p]` (0 for a failure).
    fn update(&mut self, programs: &[Vec<Vec<f32>>], labels: &[f32]) -> Result<(), CostModelError>;
    /// One score per program; a program without rows scores `f32::NEG_INFINITY`.
    fn predict(&self, programs: &[Vec<Vec<f32>>]) -> Result<Vec<f32>, CostModelError>;
    fn name(&self) -> &str;
    /// Whether `predict` answers from data (the search samples at random until then).
    fn is_trained(&self) -> bool;
}

/// The training parameters of the pack-sum model (TVM's values, XGBoost's names).
#[derive(Clone, Debug, PartialEq)]
pub struct PackSumParams {
    pub max_depth: u32,
    pub gamma: f64,
    pub min_child_weight: f64,
    pub eta: f64,
    pub seed: u64,
    pub num_rounds: u32,
}

impl Default for PackSumParams {
    fn default() -> Self {
        PackSumParams {
            max_depth: 10,
            gamma: 0.001,
            min_child_weight: 0.0,
            eta: 0.2,
            seed: 43,
            num_rounds: 100,
        }
    }
}

/// The pack-sum gradient-boosted-trees model.
pub struct PackSumXgb {
    params: PackSumParams,
    forest: Option<Forest>,
}

impl PackSumXgb {
    pub fn new(params: PackSumParams) -> Self {
        PackSumXgb {
            params,
            forest: None,
        }
    }

    fn boost_params(&self) -> BoostParams {
        let p = &self.params;
        BoostParams {
            max_depth: p.max_depth,
            gamma: p.gamma,
            min_child_weight: p.min_child_weight,
            subsample: 1.0,
            eta: p.eta,
            lambda: 1.0,
            alpha: 0.0,
            seed: p.seed,
        }
    }
}

/// The rows of `programs` as one flat row-major vector (programs without rows add
/// none), the number of rows of each program and the row width.
fn pack(programs: &[Vec<Vec<f32>>]) -> Result<(Vec<f32>, Vec<u32>, usize), CostModelError> {
    let width = programs
        .iter()
        .flatten()
        .map(Vec::len)
        .next()
        .ok_or(CostModelError::NoData)?;
    if width == 0 {
        return Err(CostModelError::EmptyFeatures);
    }
    let mut flat = Vec::new();
    let mut sizes = Vec::with_capacity(programs.len());
    for (p, rows) in programs.iter().enumerate() {
        for r in rows {
            if r.len() != width {
                return Err(CostModelError::RaggedFeatures {
                    row: p,
                    len: r.len(),
                    expected: width,
                });
            }
            flat.extend_from_slice(r);
        }
        sizes.push(rows.len() as u32);
    }
    Ok((flat, sizes, width))
}

/// TVM's `pack_sum_square_error` as an objective: programs are the row ranges
/// `ptr[p]..ptr[p+1]`, each with its label and weight.
struct PackSum {
    ptr: Vec<u32>,
    row_labels: Vec<f32>,
    weights: Vec<f32>,
}

impl Objective for PackSum {
    fn gradients(&mut self, margins: &[f32], out: &mut [GradPair], _: &mut SplitMix) {
        let (grad, hess) = pack_sum_gradient(margins, &self.ptr, &self.row_labels, &self.weights);
        for ((o, g), h) in out.iter_mut().zip(grad).zip(hess) {
            *o = GradPair { grad: g, hess: h };
        }
    }
}

/// The gradient and hessian of `Σ_p w_p/2 · (Σ_{i∈p} pred_i − y_p)²` by each row's
/// prediction, programs given by the group pointer `ptr` (rows `ptr[p]..ptr[p+1]`).
/// `labels` are per row (equal within a program), `weights` per program; no weights
/// means 1.
pub fn pack_sum_gradient(
    preds: &[f32],
    ptr: &[u32],
    labels: &[f32],
    weights: &[f32],
) -> (Vec<f32>, Vec<f32>) {
    let n = preds.len();
    let mut grad = vec![0.0f32; n];
    let mut hess = vec![1.0f32; n];
    for (p, g) in ptr.windows(2).enumerate() {
        let (a, b) = (g[0] as usize, (g[1] as usize).min(n));
        if a >= b {
            continue;
        }
        let sum: f32 = preds[a..b].iter().sum();
        let w = weights.get(p).copied().unwrap_or(1.0);
        for i in a..b {
            let y = labels.get(i).copied().unwrap_or(0.0);
            grad[i] = (sum - y) * w;
            hess[i] = w;
        }
    }
    (grad, hess)
}

impl ProgramCostModel for PackSumXgb {
    fn update(&mut self, programs: &[Vec<Vec<f32>>], labels: &[f32]) -> Result<(), CostModelError> {
        if programs.len() != labels.len() {
            return Err(CostModelError::LabelCount {
                features: programs.len(),
                labels: labels.len(),
            });
        }
        if let Some((index, &value)) = labels
            .iter()
            .enumerate()
            .find(|(_, y)| !y.is_finite() || **y < 0.0)
        {
            return Err(CostModelError::BadLabel { index, value });
        }
        let (flat, sizes, width) = pack(programs)?;
        let mut objective = PackSum {
            ptr: Vec::with_capacity(sizes.len() + 1),
            row_labels: Vec::with_capacity(flat.len() / width),
            weights: Vec::with_capacity(sizes.len()),
        };
        // programs without rows take no part (they have no margin to move)
        objective.ptr.push(0);
        for (&n, &y) in sizes.iter().zip(labels).filter(|(n, _)| **n > 0) {
            objective
                .row_labels
                .extend(std::iter::repeat_n(y, n as usize));
            objective
                .ptr
                .push(objective.ptr.last().copied().unwrap_or(0) + n);
            objective.weights.push(y);
        }
        let forest = Forest::train(
            &self.boost_params(),
            Matrix::new(&flat, width)?,
            self.params.num_rounds,
            0.0,
            &mut objective,
        )?;
        self.forest = Some(forest);
        Ok(())
    }

    fn predict(&self, programs: &[Vec<Vec<f32>>]) -> Result<Vec<f32>, CostModelError> {
        let Some(forest) = &self.forest else {
            return Err(CostModelError::NotTrained { model: "pack-sum" });
        };
        if programs.iter().all(Vec::is_empty) {
            return Ok(vec![f32::NEG_INFINITY; programs.len()]);
        }
        let (flat, sizes, width) = pack(programs)?;
        if width != forest.num_features {
            return Err(CostModelError::FeatureWidth {
                expected: forest.num_features,
                got: width,
            });
        }
        let rows = forest.predict(Matrix::new(&flat, width)?);
        let mut out = Vec::with_capacity(sizes.len());
        let mut at = 0usize;
        for n in sizes {
            let n = n as usize;
            out.push(if n == 0 {
                f32::NEG_INFINITY
            } else {
                rows.get(at..at + n).map_or(0.0, |r| r.iter().sum())
            });
            at += n;
        }
        Ok(out)
    }

    fn name(&self) -> &str {
        "xgb-pack-sum"
    }

    fn is_trained(&self) -> bool {
        self.forest.is_some()
    }
}

/// Uniform random scores from a seed: the baseline the learned model must beat.
pub struct RandomProgramModel {
    state: AtomicU64,
}

impl RandomProgramModel {
    pub fn new(seed: u64) -> Self {
        RandomProgramModel {
            state: AtomicU64::new(seed ^ 0x2545_F491_4F6C_DD1D),
        }
    }
    fn next(&self) -> f32 {
        let x = crate::gbdt::splitmix(
            self.state
                .fetch_add(crate::gbdt::SPLITMIX_GAMMA, Ordering::Relaxed),
        );
        (x >> 40) as f32 / (1u64 << 24) as f32
    }
}

impl ProgramCostModel for RandomProgramModel {
    fn update(&mut self, _: &[Vec<Vec<f32>>], _: &[f32]) -> Result<(), CostModelError> {
        Ok(())
    }
    fn predict(&self, programs: &[Vec<Vec<f32>>]) -> Result<Vec<f32>, CostModelError> {
        Ok(programs
            .iter()
            .map(|p| {
                if p.is_empty() {
                    f32::NEG_INFINITY
                } else {
                    self.next()
                }
            })
            .collect())
    }
    fn name(&self) -> &str {
        "random"
    }
    fn is_trained(&self) -> bool {
        true
    }
}
