//! Measurement (parallel builds, runs in isolated processes with timeouts, correctness
//! checks), the JSON-lines record log, and (later) the search drivers.

pub mod measure;
pub mod record;
pub mod types;

pub use types::{now, MeasureErrorNo, MeasureResult, ScheduleDesc, FAILED_COST};
