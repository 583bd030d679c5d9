//! The XGBoost cost model (TVM AutoTVM's `XGBoostCostModel`).

use crate::error::xgb_message;
use crate::{
    check_training, normalize_labels, read_settings, row_width, write_settings, CostModel,
    CostModelError,
};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use xgboost_rs::{Booster, DMatrix};

pub(crate) const KIND: &str = "xgboost";

/// With [`LossType::RankBinary`], a sample is relevant (label 1) when its normalized
/// throughput is at least this fraction of the best one, else 0 (TVM's `_binarize_evals`
/// threshold).
pub const RANK_BINARY_THRESHOLD: f32 = 0.5;

/// What the trees are trained to predict (TVM's `loss_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LossType {
    /// `reg`: squared error on the normalized throughput (`reg:squarederror`, TVM's
    /// `reg:linear`); predictions estimate `throughput / best`.
    #[serde(rename = "reg")]
    Reg,
    /// `rank`: pairwise ranking (`rank:pairwise`) on the normalized throughput;
    /// predictions are relative scores, only their order means something.
    #[serde(rename = "rank")]
    Rank,
    /// `rank-binary`: pairwise ranking on binarized labels — 1 for candidates within
    /// [`RANK_BINARY_THRESHOLD`] of the best throughput, 0 for the rest.
    ///
    /// TVM added it for xgboost ≥ 2, whose ranking metrics want integer relevance
    /// degrees; there it binarizes the copy of the data that its early-stopping metric
    /// evaluates. We train a fixed number of rounds with no evaluation set, so we
    /// binarize the training labels themselves: the model learns to separate the top
    /// candidates from the rest rather than to order all of them.
    #[serde(rename = "rank-binary")]
    RankBinary,
}

impl LossType {
    pub const ALL: [LossType; 3] = [LossType::Reg, LossType::Rank, LossType::RankBinary];

    /// TVM's name: `reg`, `rank` or `rank-binary`.
    pub fn name(self) -> &'static str {
        match self {
            LossType::Reg => "reg",
            LossType::Rank => "rank",
            LossType::RankBinary => "rank-binary",
        }
    }

    /// Parses TVM's name (`rank_binary` is accepted too).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "reg" => Some(LossType::Reg),
            "rank" => Some(LossType::Rank),
            "rank-binary" | "rank_binary" => Some(LossType::RankBinary),
            _ => None,
        }
    }

    /// The XGBoost objective.
    pub fn objective(self) -> &'static str {
        match self {
            LossType::Reg => "reg:squarederror",
            LossType::Rank | LossType::RankBinary => "rank:pairwise",
        }
    }

    fn model_name(self) -> &'static str {
        match self {
            LossType::Reg => "xgb-reg",
            LossType::Rank => "xgb-rank",
            LossType::RankBinary => "xgb-rank-binary",
        }
    }
}

/// XGBoost's training parameters. [`Default`] is TVM AutoTVM's XGBTuner setting.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct XgbParams {
    pub max_depth: u32,
    pub gamma: f64,
    pub min_child_weight: f64,
    pub subsample: f64,
    pub eta: f64,
    pub lambda: f64,
    pub alpha: f64,
    /// Boosting rounds per `update`. TVM asks for 8000 and stops early once the
    /// training set's recall@plan_size has not improved for 20 rounds, which in
    /// practice ends after tens to a couple of hundred rounds. We train a fixed number
    /// instead: the result does not depend on a metric's ties, and the cost is known.
    /// With eta 0.3 and trees of depth 3 the training loss has levelled off well before
    /// 100 rounds on the few hundred to few thousand samples of a tuning run.
    pub num_rounds: u32,
    /// XGBoost's random seed. With `subsample` 1 and the exact tree method nothing
    /// is sampled; `rank:pairwise` draws its pairs with it.
    pub seed: u64,
    /// XGBoost's threads. 1 by default: training and prediction are then bitwise
    /// deterministic, and on a small data set threads gain little while the tuner's
    /// builds and measurements need the cores.
    pub nthread: u32,
}

impl Default for XgbParams {
    fn default() -> Self {
        XgbParams {
            max_depth: 3,
            gamma: 0.0001,
            min_child_weight: 1.0,
            subsample: 1.0,
            eta: 0.3,
            lambda: 1.0,
            alpha: 0.0,
            num_rounds: 100,
            seed: 0,
            nthread: 1,
        }
    }
}

/// Gradient-boosted trees predicting (normalized) throughput from features, TVM
/// AutoTVM's `XGBoostCostModel`.
///
/// `update` retrains from scratch on all the data it is given, after normalizing the
/// labels by their maximum (and binarizing them for [`LossType::RankBinary`]).
/// `predict` before the first `update` is [`CostModelError::NotTrained`]: a tuner
/// searches at random until the first fit, as TVM's XGBTuner does (see
/// [`CostModel::is_trained`]). Training is deterministic: the same data, in the same
/// order, gives the same trees and predictions.
///
/// Features go to XGBoost as dense rows with NaN as the missing value, so 0 is an
/// ordinary value (the padding of fixed-length feature vectors is 0).
pub struct XgbModel {
    loss: LossType,
    params: XgbParams,
    booster: Option<Booster>,
    num_features: Option<usize>,
}

impl std::fmt::Debug for XgbModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XgbModel")
            .field("loss", &self.loss)
            .field("params", &self.params)
            .field("trained", &self.booster.is_some())
            .field("num_features", &self.num_features)
            .finish()
    }
}

#[derive(Serialize, Deserialize)]
struct Settings {
    kind: String,
    version: u32,
    loss: LossType,
    params: XgbParams,
    /// Row width of the training data; `None` while untrained.
    num_features: Option<usize>,
    /// The trees (XGBoost's UBJSON model), relative to the settings file's folder.
    model_file: Option<String>,
}

impl XgbModel {
    /// A model with TVM's parameters for `loss`.
    pub fn new(loss: LossType) -> Self {
        Self::with_params(loss, XgbParams::default())
    }

    pub fn with_params(loss: LossType, params: XgbParams) -> Self {
        XgbModel {
            loss,
            params,
            booster: None,
            num_features: None,
        }
    }

    pub fn loss(&self) -> LossType {
        self.loss
    }

    pub fn params(&self) -> &XgbParams {
        &self.params
    }

    /// The row width the model was trained on.
    pub fn num_features(&self) -> Option<usize> {
        self.num_features
    }

    /// Where [`CostModel::save`] to `path` puts the trees: `<stem>.xgb.ubj` beside it.
    pub fn model_file_for(path: &Path) -> PathBuf {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".to_string());
        path.with_file_name(format!("{stem}.xgb.ubj"))
    }

    fn config(&self) -> HashMap<String, String> {
        let p = &self.params;
        booster_config(
            self.loss.objective(),
            p.nthread,
            &[
                ("max_depth", p.max_depth.to_string()),
                ("gamma", p.gamma.to_string()),
                ("min_child_weight", p.min_child_weight.to_string()),
                ("subsample", p.subsample.to_string()),
                ("eta", p.eta.to_string()),
                ("lambda", p.lambda.to_string()),
                ("alpha", p.alpha.to_string()),
                ("seed", p.seed.to_string()),
            ],
        )
    }

    /// Dense row-major rows as an XGBoost matrix, NaN meaning missing.
    fn matrix(&self, features: &[Vec<f32>], width: usize) -> Result<DMatrix, CostModelError> {
        let mut flat = Vec::with_capacity(features.len() * width);
        for row in features {
            flat.extend_from_slice(row);
        }
        let f32_bytes = std::mem::size_of::<f32>();
        // Despite its name this takes any strides: row-major is (width * 4, 4) bytes.
        // XGBoost copies the values, so `flat` may go once the matrix exists.
        Ok(DMatrix::from_col_major_f32(
            &flat,
            width * f32_bytes,
            f32_bytes,
            features.len(),
            width,
            self.params.nthread.max(1) as i32,
            f32::NAN,
        )?)
    }

    /// The training labels: normalized by the maximum, binarized for `RankBinary`.
    fn training_labels(&self, labels: &[f32]) -> Vec<f32> {
        let y = normalize_labels(labels);
        match self.loss {
            LossType::Reg | LossType::Rank => y,
            LossType::RankBinary => y
                .into_iter()
                .map(|v| if v >= RANK_BINARY_THRESHOLD { 1.0 } else { 0.0 })
                .collect(),
        }
    }
}

/// The booster settings every model of this crate uses (gradient-boosted trees, the
/// exact tree method, quiet, `nthread` threads) with `objective` and the model's own
/// `params`.
pub(crate) fn booster_config(
    objective: &str,
    nthread: u32,
    params: &[(&str, String)],
) -> HashMap<String, String> {
    let mut c: HashMap<String, String> = [
        ("booster", "gbtree".to_string()),
        ("objective", objective.to_string()),
        ("tree_method", "exact".to_string()),
        ("nthread", nthread.max(1).to_string()),
        ("verbosity", "0".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    c.extend(params.iter().map(|(k, v)| (k.to_string(), v.clone())));
    c
}

impl CostModel for XgbModel {
    fn update(&mut self, features: &[Vec<f32>], labels: &[f32]) -> Result<(), CostModelError> {
        let width = check_training(features, labels)?;
        let mut dtrain = self.matrix(features, width)?;
        dtrain.set_labels(&self.training_labels(labels))?;
        // Parameters are checked by XGBoost on the first round, so a bad one is an error
        // from `update` below.
        let mut booster = Booster::new_with_json_config(&[&dtrain], self.config())?;
        for round in 0..self.params.num_rounds {
            booster.update(&dtrain, round as i32)?;
        }
        self.booster = Some(booster);
        self.num_features = Some(width);
        Ok(())
    }

    fn predict(&self, features: &[Vec<f32>]) -> Result<Vec<f32>, CostModelError> {
        let Some(width) = row_width(features)? else {
            return Ok(Vec::new());
        };
        let (Some(booster), Some(expected)) = (&self.booster, self.num_features) else {
            return Err(CostModelError::NotTrained { model: KIND });
        };
        if width != expected {
            return Err(CostModelError::FeatureWidth {
                expected,
                got: width,
            });
        }
        let scores = booster.predict(&self.matrix(features, width)?)?;
        if scores.len() != features.len() {
            return Err(CostModelError::Xgboost(format!(
                "{} predictions for {} rows",
                scores.len(),
                features.len()
            )));
        }
        Ok(scores)
    }

    /// Writes the settings JSON at `path` and, once trained, the trees in XGBoost's
    /// UBJSON format at [`XgbModel::model_file_for`]`(path)` (exact floats, so a loaded
    /// model predicts bit for bit what this one does).
    fn save(&self, path: &Path) -> Result<(), CostModelError> {
        let model_path = Self::model_file_for(path);
        let model_file = match &self.booster {
            Some(booster) => {
                // XGBoost's own error for a missing folder is vague: check it here.
                if let Some(dir) = model_path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::metadata(dir).map_err(|e| CostModelError::io(dir, e))?;
                }
                booster.save(&model_path).map_err(|e| {
                    CostModelError::Xgboost(format!(
                        "saving {}: {}",
                        model_path.display(),
                        xgb_message(&e)
                    ))
                })?;
                Some(
                    model_path
                        .file_name()
                        .expect("model file name")
                        .to_string_lossy()
                        .into_owned(),
                )
            }
            None => None,
        };
        write_settings(
            path,
            &Settings {
                kind: KIND.to_string(),
                version: crate::SETTINGS_VERSION,
                loss: self.loss,
                params: self.params.clone(),
                num_features: self.num_features,
                model_file,
            },
        )
    }

    fn load(path: &Path) -> Result<Self, CostModelError> {
        let s: Settings = read_settings(path, KIND)?;
        let mut model = XgbModel::with_params(s.loss, s.params);
        match (s.model_file, s.num_features) {
            (Some(file), Some(width)) => {
                let model_path = path.with_file_name(file);
                std::fs::metadata(&model_path).map_err(|e| CostModelError::io(&model_path, e))?;
                let booster = Booster::load(&model_path).map_err(|e| {
                    CostModelError::Xgboost(format!(
                        "loading {}: {}",
                        model_path.display(),
                        xgb_message(&e)
                    ))
                })?;
                model.booster = Some(booster);
                model.num_features = Some(width);
            }
            (None, _) => {}
            (Some(_), None) => {
                return Err(CostModelError::BadFile {
                    path: path.to_path_buf(),
                    message: "a model file but no feature count".to_string(),
                })
            }
        }
        Ok(model)
    }

    fn name(&self) -> &str {
        self.loss.model_name()
    }

    fn is_trained(&self) -> bool {
        self.booster.is_some()
    }
}
