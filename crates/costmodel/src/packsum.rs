//! The auto-scheduler's cost model (TVM's `auto_scheduler.XGBModel`): a program is a
//! bag of per-store feature rows ([`crate::store_features`]), and its score is the sum
//! of its rows' scores ("pack-sum").
//!
//! Training (TVM's `pack_sum_square_error`): every row carries its program's label `y`
//! (a normalized throughput: the task's best cost over this program's cost, 0 for a
//! failure) and weight `y`; the gradient of row `i` in program `p` is
//! `(Σ_{j∈p} pred_j − y_p) · y_p`, its hessian `y_p`. Programs are passed to XGBoost
//! as groups of consecutive rows (the matrix's `group` info), which the objective
//! reads back; the base objective is `reg:squarederror` with base score 0, so what
//! `xgboost-rs` hands the objective (the transformed predictions) is the raw margin.
//!
//! Parameters are TVM's (depth 10, gamma 0.001, min_child_weight 0, eta 0.2, seed
//! 43); TVM boosts up to 10000 rounds with early stopping on its own metric, we boost
//! a fixed number ([`PackSumParams::num_rounds`]).

use crate::error::xgb_message;
use crate::CostModelError;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use xgboost_rs::{Booster, DMatrix};

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

/// XGBoost's training parameters for the pack-sum model (TVM's values).
#[derive(Clone, Debug, PartialEq)]
pub struct PackSumParams {
    pub max_depth: u32,
    pub gamma: f64,
    pub min_child_weight: f64,
    pub eta: f64,
    pub seed: u64,
    pub num_rounds: u32,
    pub nthread: u32,
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
            nthread: 2,
        }
    }
}

/// The pack-sum XGBoost model.
pub struct PackSumXgb {
    params: PackSumParams,
    booster: Option<Booster>,
    width: Option<usize>,
}

impl PackSumXgb {
    pub fn new(params: PackSumParams) -> Self {
        PackSumXgb {
            params,
            booster: None,
            width: None,
        }
    }

    fn config(&self) -> HashMap<String, String> {
        let p = &self.params;
        crate::xgb::booster_config(
            "reg:squarederror",
            p.nthread,
            &[
                ("base_score", "0".to_string()),
                ("max_depth", p.max_depth.to_string()),
                ("gamma", p.gamma.to_string()),
                ("min_child_weight", p.min_child_weight.to_string()),
                ("eta", p.eta.to_string()),
                ("seed", p.seed.to_string()),
            ],
        )
    }
}

/// The rows of `programs` as one matrix (programs without rows are left out) and the
/// number of rows of each program.
fn pack(
    programs: &[Vec<Vec<f32>>],
    nthread: u32,
) -> Result<(DMatrix, Vec<u32>, usize), CostModelError> {
    let width = programs
        .iter()
        .flatten()
        .map(Vec::len)
        .next()
        .ok_or(CostModelError::NoData)?;
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
    let n_rows = flat.len() / width;
    let f = std::mem::size_of::<f32>();
    let m = DMatrix::from_col_major_f32(
        &flat,
        width * f,
        f,
        n_rows,
        width,
        nthread.max(1) as i32,
        f32::NAN,
    )?;
    Ok((m, sizes, width))
}

/// TVM's `pack_sum_square_error` over the groups of `dtrain` (one per program).
pub fn pack_sum_objective(preds: &[f32], dtrain: &DMatrix) -> (Vec<f32>, Vec<f32>) {
    let ptr = dtrain.get_group().map(<[u32]>::to_vec).unwrap_or_default();
    let labels = dtrain.get_labels().map(<[f32]>::to_vec).unwrap_or_default();
    let weights = dtrain
        .get_weights()
        .map(<[f32]>::to_vec)
        .unwrap_or_default();
    pack_sum_gradient(preds, &ptr, &labels, &weights)
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
        let (mut m, sizes, width) = pack(programs, self.params.nthread)?;
        let mut row_labels = Vec::new();
        for (&n, &y) in sizes.iter().zip(labels) {
            row_labels.extend(std::iter::repeat_n(y, n as usize));
        }
        m.set_labels(&row_labels)?;
        // with groups, XGBoost takes one weight per group (program)
        let groups: Vec<u32> = sizes.iter().copied().filter(|&n| n > 0).collect();
        let group_weights: Vec<f32> = sizes
            .iter()
            .zip(labels)
            .filter(|(n, _)| **n > 0)
            .map(|(_, &y)| y)
            .collect();
        m.set_group(&groups)?;
        m.set_weights(&group_weights)?;
        let mut booster = Booster::new_with_json_config(&[&m], self.config())
            .map_err(|e| CostModelError::Xgboost(xgb_message(&e)))?;
        for _ in 0..self.params.num_rounds {
            booster.update_custom(&m, pack_sum_objective)?;
        }
        self.booster = Some(booster);
        self.width = Some(width);
        Ok(())
    }

    fn predict(&self, programs: &[Vec<Vec<f32>>]) -> Result<Vec<f32>, CostModelError> {
        let Some(booster) = &self.booster else {
            return Err(CostModelError::NotTrained {
                model: "pack-sum xgboost",
            });
        };
        if programs.iter().all(Vec::is_empty) {
            return Ok(vec![f32::NEG_INFINITY; programs.len()]);
        }
        let (m, sizes, width) = pack(programs, self.params.nthread)?;
        if Some(width) != self.width {
            return Err(CostModelError::FeatureWidth {
                expected: self.width.unwrap_or(0),
                got: width,
            });
        }
        let rows = booster.predict(&m)?;
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
        self.booster.is_some()
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
        let mut x = self
            .state
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((x ^ (x >> 31)) >> 40) as f32 / (1u64 << 24) as f32
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
