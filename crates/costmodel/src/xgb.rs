//! The gradient-boosted-trees cost model (TVM AutoTVM's `XGBoostCostModel`), on this
//! crate's trees ([`crate::gbdt`]: XGBoost's exact algorithm).

use crate::gbdt::{BoostParams, Forest, Matrix, Objective, PairwiseRank, SquaredError};
use crate::{
    check_training, normalize_labels, read_settings, row_width, write_settings, CostModel,
    CostModelError,
};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

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

    /// XGBoost's name of the objective.
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

/// The training parameters, XGBoost's names and meanings ([`BoostParams`]).
/// [`Default`] is TVM AutoTVM's XGBTuner setting.
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
    /// The random seed. With `subsample` 1 nothing is sampled; `rank:pairwise` draws
    /// its pairs with it. Training is single-threaded and deterministic.
    pub seed: u64,
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
/// Features are dense rows with NaN as the missing value, so 0 is an ordinary value
/// (the padding of fixed-length feature vectors is 0).
pub struct XgbModel {
    loss: LossType,
    params: XgbParams,
    forest: Option<Forest>,
}

impl std::fmt::Debug for XgbModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XgbModel")
            .field("loss", &self.loss)
            .field("params", &self.params)
            .field("trained", &self.forest.is_some())
            .field("num_features", &self.num_features())
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
    /// The trees (a [`Forest`] as JSON), relative to the settings file's folder.
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
            forest: None,
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
        self.forest.as_ref().map(|f| f.num_features)
    }

    /// Where [`CostModel::save`] to `path` puts the trees: `<stem>.trees.json` beside it.
    pub fn model_file_for(path: &Path) -> PathBuf {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".to_string());
        path.with_file_name(format!("{stem}.trees.json"))
    }

    fn boost_params(&self) -> BoostParams {
        let p = &self.params;
        BoostParams {
            max_depth: p.max_depth,
            gamma: p.gamma,
            min_child_weight: p.min_child_weight,
            subsample: p.subsample,
            eta: p.eta,
            lambda: p.lambda,
            alpha: p.alpha,
            seed: p.seed,
        }
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

/// Dense row-major rows as one flat vector.
pub(crate) fn flatten(features: &[Vec<f32>]) -> Vec<f32> {
    features.iter().flatten().copied().collect()
}

impl CostModel for XgbModel {
    fn update(&mut self, features: &[Vec<f32>], labels: &[f32]) -> Result<(), CostModelError> {
        let width = check_training(features, labels)?;
        let flat = flatten(features);
        let y = self.training_labels(labels);
        let (mut reg, mut rank);
        // the mean for squared error (XGBoost's estimated intercept); for ranking
        // only differences of margins count
        let (objective, base): (&mut dyn Objective, f32) = match self.loss {
            LossType::Reg => {
                reg = SquaredError { labels: &y };
                (&mut reg, y.iter().sum::<f32>() / y.len() as f32)
            }
            LossType::Rank | LossType::RankBinary => {
                rank = PairwiseRank::new(&y);
                (&mut rank, 0.0)
            }
        };
        let forest = Forest::train(
            &self.boost_params(),
            Matrix::new(&flat, width)?,
            self.params.num_rounds,
            base,
            objective,
        )?;
        self.forest = Some(forest);
        Ok(())
    }

    fn predict(&self, features: &[Vec<f32>]) -> Result<Vec<f32>, CostModelError> {
        let Some(width) = row_width(features)? else {
            return Ok(Vec::new());
        };
        let Some(forest) = &self.forest else {
            return Err(CostModelError::NotTrained { model: KIND });
        };
        if width != forest.num_features {
            return Err(CostModelError::FeatureWidth {
                expected: forest.num_features,
                got: width,
            });
        }
        Ok(forest.predict(Matrix::new(&flatten(features), width)?))
    }

    /// Writes the settings JSON at `path` and, once trained, the trees as JSON at
    /// [`XgbModel::model_file_for`]`(path)` (shortest round-trip floats, so a loaded
    /// model predicts bit for bit what this one does).
    fn save(&self, path: &Path) -> Result<(), CostModelError> {
        let model_path = Self::model_file_for(path);
        let model_file = match &self.forest {
            Some(forest) => {
                crate::gbdt::save(forest, &model_path)?;
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
                num_features: self.num_features(),
                model_file,
            },
        )
    }

    fn load(path: &Path) -> Result<Self, CostModelError> {
        let s: Settings = read_settings(path, KIND)?;
        let mut model = XgbModel::with_params(s.loss, s.params);
        match (s.model_file, s.num_features) {
            (Some(file), Some(width)) => {
                let forest = crate::gbdt::load(&path.with_file_name(file))?;
                if forest.num_features != width {
                    return Err(CostModelError::BadFile {
                        path: path.to_path_buf(),
                        message: format!(
                            "the settings say {width} features, the trees {}",
                            forest.num_features
                        ),
                    });
                }
                model.forest = Some(forest);
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
        self.forest.is_some()
    }
}
