//! The values every part of measurement and the record log share.

use serde::{Deserialize, Serialize};

/// Why a measurement failed: TVM's `MeasureErrorNo` codes, stored as their numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "u8", try_from = "u8")]
pub enum MeasureErrorNo {
    NoError = 0,
    /// The schedule could not be applied or lowered.
    Instantiation = 1,
    /// The host compiler failed.
    CompileHost = 2,
    /// A device compiler failed.
    CompileDevice = 3,
    /// The kernel crashed or failed when run (a signal, a non-zero status).
    RuntimeDevice = 4,
    /// The kernel ran but computed a wrong result.
    WrongAnswer = 5,
    BuildTimeout = 6,
    RunTimeout = 7,
    Unknown = 8,
}

impl MeasureErrorNo {
    pub fn name(self) -> &'static str {
        match self {
            MeasureErrorNo::NoError => "NO_ERROR",
            MeasureErrorNo::Instantiation => "INSTANTIATION_ERROR",
            MeasureErrorNo::CompileHost => "COMPILE_HOST",
            MeasureErrorNo::CompileDevice => "COMPILE_DEVICE",
            MeasureErrorNo::RuntimeDevice => "RUNTIME_DEVICE",
            MeasureErrorNo::WrongAnswer => "WRONG_ANSWER",
            MeasureErrorNo::BuildTimeout => "BUILD_TIMEOUT",
            MeasureErrorNo::RunTimeout => "RUN_TIMEOUT",
            MeasureErrorNo::Unknown => "UNKNOWN_ERROR",
        }
    }
}

impl std::fmt::Display for MeasureErrorNo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl From<MeasureErrorNo> for u8 {
    fn from(e: MeasureErrorNo) -> u8 {
        e as u8
    }
}

/// A number that is no [`MeasureErrorNo`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown measure error number {0}")]
pub struct UnknownErrorNo(pub u8);

impl TryFrom<u8> for MeasureErrorNo {
    type Error = UnknownErrorNo;
    fn try_from(v: u8) -> Result<Self, UnknownErrorNo> {
        Ok(match v {
            0 => MeasureErrorNo::NoError,
            1 => MeasureErrorNo::Instantiation,
            2 => MeasureErrorNo::CompileHost,
            3 => MeasureErrorNo::CompileDevice,
            4 => MeasureErrorNo::RuntimeDevice,
            5 => MeasureErrorNo::WrongAnswer,
            6 => MeasureErrorNo::BuildTimeout,
            7 => MeasureErrorNo::RunTimeout,
            8 => MeasureErrorNo::Unknown,
            _ => return Err(UnknownErrorNo(v)),
        })
    }
}

/// The cost TVM gives a failed measurement (seconds).
pub const FAILED_COST: f64 = 1e10;

/// The outcome of measuring one candidate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeasureResult {
    /// Seconds per run, one per repeat (`[FAILED_COST]` on failure).
    pub costs: Vec<f64>,
    pub error_no: MeasureErrorNo,
    /// The error's message (compiler output, signal, mismatch), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_msg: Option<String>,
    /// Wall seconds the whole measurement took (build and run).
    pub all_cost: f64,
    /// Seconds since the Unix epoch when it finished.
    pub timestamp: u64,
    /// A task built for ranges of sizes (issue 61): the points it was timed at, their
    /// weights and each one's mean seconds (`costs` are the weighted means).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_points: Option<Box<tessera_runtime::runner::PointCosts>>,
}

impl MeasureResult {
    /// The mean of the costs (seconds); `FAILED_COST` for a failure.
    pub fn mean_cost(&self) -> f64 {
        if self.error_no != MeasureErrorNo::NoError || self.costs.is_empty() {
            return FAILED_COST;
        }
        self.costs.iter().sum::<f64>() / self.costs.len() as f64
    }
    pub fn is_ok(&self) -> bool {
        self.error_no == MeasureErrorNo::NoError
    }
    /// A failure of `kind` with `msg`.
    pub fn failed(kind: MeasureErrorNo, msg: impl Into<String>, all_cost: f64) -> Self {
        MeasureResult {
            costs: vec![FAILED_COST],
            error_no: kind,
            error_msg: Some(msg.into()),
            all_cost,
            timestamp: now(),
            at_points: None,
        }
    }
}

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

pub use tessera_policy::ScheduleDesc;
