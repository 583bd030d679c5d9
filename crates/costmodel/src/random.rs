//! The random cost model.

use crate::gbdt::splitmix as mix;
use crate::{read_settings, row_width, write_settings, CostModel, CostModelError};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) const KIND: &str = "random";

/// Uniform random scores in `[0, 1)`, ignoring the features: the model of the "random"
/// tuner and the baseline of the cost-model benchmarks.
///
/// Deterministic by seed: two models with the same seed give the same scores for the
/// same sequence of `predict` calls. Each call draws fresh scores (the `n`-th call's
/// scores depend on the seed, `n` and the row), like Ansor's `RandomModel`, which draws
/// new numbers every time. `update` only checks its input. `save` writes the seed; a
/// loaded model starts its call count again from zero.
#[derive(Debug)]
pub struct RandomModel {
    seed: u64,
    calls: AtomicU64,
}

#[derive(Serialize, Deserialize)]
struct Settings {
    kind: String,
    version: u32,
    seed: u64,
}

impl RandomModel {
    pub fn new(seed: u64) -> Self {
        RandomModel {
            seed,
            calls: AtomicU64::new(0),
        }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }
}

impl CostModel for RandomModel {
    fn update(&mut self, features: &[Vec<f32>], labels: &[f32]) -> Result<(), CostModelError> {
        crate::check_training(features, labels).map(|_| ())
    }

    fn predict(&self, features: &[Vec<f32>]) -> Result<Vec<f32>, CostModelError> {
        if row_width(features)?.is_none() {
            return Ok(Vec::new());
        }
        let call = self.calls.fetch_add(1, Ordering::Relaxed);
        let stream = mix(self.seed ^ mix(call));
        Ok((0..features.len() as u64)
            .map(|i| {
                // 24 random bits: every value is exact in f32 and below 1.
                (mix(stream.wrapping_add(i)) >> 40) as f32 / (1u32 << 24) as f32
            })
            .collect())
    }

    fn save(&self, path: &Path) -> Result<(), CostModelError> {
        write_settings(
            path,
            &Settings {
                kind: KIND.to_string(),
                version: crate::SETTINGS_VERSION,
                seed: self.seed,
            },
        )
    }

    fn load(path: &Path) -> Result<Self, CostModelError> {
        let s: Settings = read_settings(path, KIND)?;
        Ok(RandomModel::new(s.seed))
    }

    fn name(&self) -> &str {
        "random"
    }
}
