//! Measurement (parallel builds, runs in isolated processes with timeouts, correctness
//! checks), the JSON-lines record log, the schedule as a step history (`state`), the
//! one seam from a record to a schedule (`apply`), the
//! task scheduler that splits a budget across a network's tasks (`scheduler`), and the
//! tuning session over them all (`session`; the driver's `Toolchain::tune` runs it).

pub mod apply;
pub mod curve;
pub mod extension;
pub mod in_network;
pub mod measure;
pub mod memory;
pub mod network_check;
pub mod par;
pub mod prepare;
pub use tessera_policy as policy;
pub mod record;
pub mod remote;
pub mod rng;
pub mod runner_process;
pub mod scheduler;
pub mod session;
pub mod session_report;
pub mod sizes;
pub mod state;
pub mod tasks;
pub mod time_profile;
pub mod types;
pub mod workload_key;

pub use types::{now, MeasureErrorNo, MeasureResult, ScheduleDesc, FAILED_COST};
