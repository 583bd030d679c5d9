//! `tessera-costmodel`: the cost models that rank candidate schedules between
//! measurements, and the program features they learn from.
//!
//! - [`CostModel`]: the interface a tuner uses — `update` (retrain on the whole history),
//!   `predict` (higher is better), `save`/`load`.
//! - [`XgbModel`]: gradient-boosted trees ([`gbdt`]: XGBoost's exact algorithm, in
//!   Rust) with TVM AutoTVM's XGBTuner settings and loss types ([`LossType`]: `reg`,
//!   `rank`, `rank-binary`).
//! - [`PackSumXgb`]: the same trees on the auto-scheduler's per-store rows, TVM Ansor's
//!   pack-sum model.
//! - [`RandomModel`]: uniform random scores from a seed (the "random" tuner, and the
//!   baseline of benchmarks).
//! - [`features`]: TVM AutoTVM's "itervar", "curve" and "knob" features of a lowered
//!   [`tessera_ir::PrimFunc`] or a configuration.
//!
//! Labels are throughputs (FLOP/s, 0 for a failed run); models normalize them by their
//! maximum, as TVM does (`y / max(y)`).
//!
//! A saved model is a small JSON settings file (`{"kind": "xgboost" | "random", …}`) at
//! the path given; the trees go to a sibling file (see [`XgbModel::save`]).
//! [`load_model`] reads either kind back behind a `Box<dyn CostModel>`.

pub mod error;
pub mod features;
pub mod gbdt;
pub mod packsum;
mod random;
pub mod store_features;
mod xgb;

pub use error::CostModelError;
pub use features::{
    curve_features, itervar_feature_names, itervar_features, knob_features, MAX_BUFFERS, MAX_LOOPS,
};
pub use packsum::{PackSumParams, PackSumXgb, ProgramCostModel, RandomProgramModel};
pub use random::RandomModel;
pub use store_features::{store_feature_names, store_features, STORE_FEATURE_LEN};
pub use xgb::{LossType, XgbModel, XgbParams, RANK_BINARY_THRESHOLD};

use std::path::Path;

/// A model of how fast a candidate program runs, trained on measured ones.
///
/// Rows of `features` are one candidate each and must all have the same length (and, once
/// a model is trained, the length it was trained on); a ragged batch is
/// [`CostModelError::RaggedFeatures`], never a panic.
pub trait CostModel: Send {
    /// Trains (from scratch) on every sample measured so far: the caller passes the whole
    /// history each time, as TVM's tuners do. `labels[i]` is the throughput of
    /// `features[i]` (FLOP/s or any quantity where higher is better; 0 for failures).
    fn update(&mut self, features: &[Vec<f32>], labels: &[f32]) -> Result<(), CostModelError>;

    /// One score per row; higher means faster. An empty batch gives an empty result.
    fn predict(&self, features: &[Vec<f32>]) -> Result<Vec<f32>, CostModelError>;

    /// Writes the model: a JSON settings file at `path` (plus, for trees, the trees in a
    /// sibling file).
    fn save(&self, path: &Path) -> Result<(), CostModelError>;

    /// Reads a model written by [`CostModel::save`] of the same type.
    fn load(path: &Path) -> Result<Self, CostModelError>
    where
        Self: Sized;

    /// A short name for logs and tuner tables (`xgb-rank`, `random`, …).
    fn name(&self) -> &str;

    /// Whether `predict` can answer. False for a trees model before its first
    /// `update`: tuners pick candidates at random until then.
    fn is_trained(&self) -> bool {
        true
    }
}

/// Reads a model saved by any of this crate's models, choosing the type by the settings
/// file's `kind`.
pub fn load_model(path: &Path) -> Result<Box<dyn CostModel>, CostModelError> {
    let text = std::fs::read_to_string(path).map_err(|e| CostModelError::io(path, e))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| CostModelError::BadFile {
            path: path.to_path_buf(),
            message: format!("not a cost-model settings file: {e}"),
        })?;
    match v.get("kind").and_then(|k| k.as_str()) {
        Some(xgb::KIND) => Ok(Box::new(XgbModel::load(path)?)),
        Some(random::KIND) => Ok(Box::new(RandomModel::load(path)?)),
        other => Err(CostModelError::BadFile {
            path: path.to_path_buf(),
            message: format!(
                "unknown cost-model kind {other:?} (expected \"{}\" or \"{}\")",
                xgb::KIND,
                random::KIND
            ),
        }),
    }
}

/// TVM's label normalization: `y / max(max(y), 1e-8)`, so the best sample scores 1.
pub fn normalize_labels(labels: &[f32]) -> Vec<f32> {
    let max = labels.iter().copied().fold(0.0f32, f32::max).max(1e-8);
    labels.iter().map(|y| y / max).collect()
}

/// The common row width of `features` (`None` for an empty batch), or the ragged row.
pub(crate) fn row_width(features: &[Vec<f32>]) -> Result<Option<usize>, CostModelError> {
    let Some(first) = features.first() else {
        return Ok(None);
    };
    let expected = first.len();
    if let Some((row, r)) = features
        .iter()
        .enumerate()
        .find(|(_, r)| r.len() != expected)
    {
        return Err(CostModelError::RaggedFeatures {
            row,
            len: r.len(),
            expected,
        });
    }
    if expected == 0 {
        return Err(CostModelError::EmptyFeatures);
    }
    Ok(Some(expected))
}

/// Checks a training batch: rows rectangular and non-empty, one finite non-negative
/// label per row. Returns the row width.
pub(crate) fn check_training(
    features: &[Vec<f32>],
    labels: &[f32],
) -> Result<usize, CostModelError> {
    if features.len() != labels.len() {
        return Err(CostModelError::LabelCount {
            features: features.len(),
            labels: labels.len(),
        });
    }
    let width = row_width(features)?.ok_or(CostModelError::NoData)?;
    if let Some((index, &value)) = labels
        .iter()
        .enumerate()
        .find(|(_, y)| !y.is_finite() || **y < 0.0)
    {
        return Err(CostModelError::BadLabel { index, value });
    }
    Ok(width)
}

/// The settings file format version written by this crate. Version 1 held XGBoost's
/// own model files (before [`gbdt`]); they do not load (retrain from the tuning log).
pub(crate) const SETTINGS_VERSION: u32 = 2;

pub(crate) fn read_settings<T: serde::de::DeserializeOwned>(
    path: &Path,
    kind: &str,
) -> Result<T, CostModelError> {
    let text = std::fs::read_to_string(path).map_err(|e| CostModelError::io(path, e))?;
    let bad = |message: String| CostModelError::BadFile {
        path: path.to_path_buf(),
        message,
    };
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| bad(format!("not a cost-model settings file: {e}")))?;
    let found = v.get("kind").and_then(|k| k.as_str());
    if found != Some(kind) {
        return Err(bad(format!("a {found:?} cost model, not a \"{kind}\" one")));
    }
    let version = v.get("version").and_then(|k| k.as_u64());
    if version != Some(SETTINGS_VERSION as u64) {
        return Err(bad(format!(
            "settings version {version:?}, this build reads version {SETTINGS_VERSION}"
        )));
    }
    serde_json::from_value(v).map_err(|e| bad(format!("bad \"{kind}\" settings: {e}")))
}

pub(crate) fn write_settings<T: serde::Serialize>(
    path: &Path,
    settings: &T,
) -> Result<(), CostModelError> {
    let mut text = serde_json::to_string_pretty(settings).expect("settings serialize");
    text.push('\n');
    std::fs::write(path, text).map_err(|e| CostModelError::io(path, e))
}
