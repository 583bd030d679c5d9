//! The pipeline: where a network becomes kernels, in one list.
//!
//! A [`Toolchain`] holds what a process builds with — the plugin registry (backends,
//! devices, strategies), the in-process [`NetworkExtension`]s the binary links, and
//! where devices are (this machine, or a tracker's servers). Its methods are the
//! stages, in the order a network goes through them (Halide's `Lower.cpp` reads the
//! same way):
//!
//! 1. **import** ([`Toolchain::import`]): a zoo network or an ONNX file
//!    ([`NetworkSource`]) into a `Graph`;
//! 2. **graph passes** ([`Toolchain::optimized`]): `graph::passes::optimize` — batch norms
//!    and constants folded, the layout converted to the one the build takes
//!    ([`Toolchain::layout`]);
//! 3. **target preparation** ([`NetworkExtension::prepare`]): the extension that claims
//!    the target rewrites the network for it (VTA's int8 quantization and packing);
//! 4. **algorithm plan** ([`Toolchain::plan`]): `graph::ConvPlan` — for the CPU in NHWC
//!    each 3×3 convolution direct or Winograd — then the CPU rewrites, one named list
//!    (`graph::cpu_rewrites::CPU_REWRITES`: winograd, pad-conv-channels, fuse-attention,
//!    pad-matmul-columns, pack-conv-weights, pack-dense-weights, dead-code);
//! 5. **schedule lookup** ([`Toolchain::compile_plan`], `history.rs`): with a log, the
//!    algorithms its measurements chose and each group's history best through the
//!    record appliers ([`Toolchain::appliers`], `tessera_search::apply`: step
//!    histories first, then the extensions' configurations), as for one operator;
//! 6. **compile** ([`Toolchain::compile_graph`]): every fused group lowered and built by
//!    the target's backend from the registry;
//! 7. **memory plan**: inside `graph::compile`, intermediates sharing storage;
//! 8. **load** ([`Toolchain::load`]): onto the device ([`Toolchain::device_for`]).
//!
//! [`Toolchain::compile`] runs 1–7, [`Toolchain::build`] 1–8. `tessera run`, `compile`,
//! `tasks`, `tune` and the tests call these; the command line only parses arguments,
//! calls one of them and prints. `tessera tune` is one call, [`Toolchain::tune`]
//! ([`tune`]: a typed request, events, a report), over tuning's tasks and closing checks
//! (`tuning.rs`); `tessera run` is [`Toolchain::run`] and `tessera compile`
//! [`Toolchain::compile_module`] ([`run`]); a run's input files are checked and set in
//! `inputs.rs`; one catalog
//! operator's build, check and timing (`tessera op`) is `operator.rs`; a tracker's
//! device server `serve.rs`; `tessera generate`, greedy decoding from one module of a
//! decoder with its KV cache, [`Toolchain::generate`] ([`generate`]).

mod build_report;
mod curve_svg;
mod error;
mod extension;
pub mod generate;
mod history;
mod inputs;
pub mod log_views;
mod operator;
pub mod operator_report;
mod pipeline;
pub mod range_tune;
pub mod run;
pub mod run_report;
pub mod runtime_size;
mod serve;
mod source;
pub mod task_listing;
pub mod tune;
mod tune_report;
mod tuning;

pub use build_report::ReportText;
pub use curve_svg::PlotSummary;
pub use error::DriverError;
pub use extension::{NetworkExtension, PrepareError, RecordKind, TargetNeeds, TemplateTaskInfo};
pub use history::{holds_configurations, BuildReport};
pub use inputs::{GivenInputs, InputError};
pub use operator::{CheckWith, OperatorProgram, OperatorRun, OperatorSchedule};
pub use pipeline::{Build, Toolchain};
pub use source::{NetworkSource, NetworkSpec};
pub use tuning::{BuildComparison, NetworkCheckOutcome, PhaseProgress};

/// What a caller reads of a record log without running the search: its records and
/// their schedules, workload keys (the reports of `log_views` print them).
pub mod records {
    pub use tessera_search::record::*;
    pub use tessera_search::workload_key;
    pub use tessera_search::ScheduleDesc;
}

/// A binary that is also its own measurement runner (as `tessera` is, with its hidden
/// `runner` command, served by `Toolchain::serve_runner_jobs`): the runner's hooks.
pub mod runner {
    pub use tessera_search::measure::{remove_scratch_dirs, use_this_binary_as_runner};
    pub use tessera_search::runner_process::JOBS_PER_PROCESS;
}
