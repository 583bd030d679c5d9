//! The errors of the cost models.

use std::path::PathBuf;

/// Why a cost model could not train, predict, save or load.
#[derive(Debug, thiserror::Error)]
pub enum CostModelError {
    /// The feature rows of one call do not all have the same length.
    #[error("ragged features: row {row} has {len} values but row 0 has {expected}")]
    RaggedFeatures {
        row: usize,
        len: usize,
        expected: usize,
    },
    /// The rows have another length than the rows the model was trained on.
    #[error("feature rows have {got} values but the model was trained on rows of {expected}")]
    FeatureWidth { expected: usize, got: usize },
    /// The rows have no values at all.
    #[error("feature rows are empty (zero values)")]
    EmptyFeatures,
    /// `update` was given a different number of labels than of feature rows.
    #[error("{features} feature rows but {labels} labels")]
    LabelCount { features: usize, labels: usize },
    /// A label is negative, infinite or NaN (labels are throughputs, 0 for a failed run).
    #[error("label {index} is {value}: labels are throughputs, finite and at least 0")]
    BadLabel { index: usize, value: f32 },
    /// `update` was called with no samples.
    #[error("no training samples")]
    NoData,
    /// `predict` on a model that was never trained (gradient-boosted trees). Tuners search at random
    /// until the first `update`, as TVM's XGBTuner does.
    #[error("the {model} cost model is not trained yet: call update first")]
    NotTrained { model: &'static str },
    /// A training parameter out of its range.
    #[error("cost-model parameter {name} is {value}: expected {expected}")]
    BadParameter {
        name: &'static str,
        value: f64,
        expected: &'static str,
    },
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A saved model's settings file is not what this version writes.
    #[error("{}: {message}", path.display())]
    BadFile { path: PathBuf, message: String },
}

impl CostModelError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        CostModelError::Io {
            path: path.into(),
            source,
        }
    }
}
