//! What a strategy or a target adds to the pipeline, in process: a target's preparation
//! of a network (VTA's int8 quantization and packing), the applier of a strategy's kind
//! of record (the templates' configurations; step histories are the core's), and a
//! template tuner's tasks. The binary lists the extensions it links (as it lists
//! its built-in plugins); the driver's pipeline asks each and never names one. The
//! traits live here, below the driver, so that a plugin implements them without
//! depending on the driver (the driver re-exports them).

use crate::apply::RecordApplier;
use crate::session::TuningTask;
use tessera_backends::{HardwareParams, Target};
use tessera_graph::{Graph, Layout};

/// Why a target's preparation of a network failed: what it was doing, and the cause.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct PrepareError {
    /// The preparation, in words (VTA's: `int8, NCHW1n16c`).
    pub what: String,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// How a target wants its networks built, from the extension that claims it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TargetNeeds {
    /// The only layout its networks can be built in (VTA packs NCHW).
    pub layout: Option<Layout>,
    /// Its anchor operators run only with a template configuration, so even an untuned
    /// build asks the configuration hooks (VTA's packed convolutions run on VTA only so;
    /// their default schedule would run on the board's CPU).
    pub configurations_always: bool,
    /// Whole runs are timed by the sum of each kernel's device-clock time, not the
    /// host's clock; the clock said in words (a simulator's cycle model).
    pub device_clock: Option<String>,
    /// Tuned kernels cannot be timed against their defaults inside whole runs here (the
    /// defaults run on another processor).
    pub no_network_check: bool,
}

/// Which kind of record an applier ([`crate::apply::RecordApplier`]) applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    /// Step histories (the auto-scheduler's): asked first.
    Steps,
    /// Template configurations: asked for the groups the step hooks leave, where the log
    /// holds configurations or the target needs them.
    Configurations,
}

/// One template task of a network, for listing (`tessera tasks --templates`).
#[derive(Clone, Debug)]
pub struct TemplateTaskInfo {
    pub workload_key: String,
    pub template: String,
    pub weight: usize,
    pub flop: f64,
    /// The configuration space, printed.
    pub space: String,
}

/// An in-process extension of the pipeline. Every method has a default that does
/// nothing, so an extension implements only what it adds.
pub trait NetworkExtension: Send + Sync {
    fn name(&self) -> &str;

    /// What `target` needs, if this extension claims it.
    fn target_needs(&self, _target: &Target) -> Option<TargetNeeds> {
        None
    }

    /// The target preparation: the optimized network rewritten for `target` (called only
    /// where [`NetworkExtension::target_needs`] claimed it).
    fn prepare(&self, _target: &Target, graph: Graph) -> Result<Graph, PrepareError> {
        Ok(graph)
    }

    /// The applier of this extension's kind of record (a template tuner's
    /// configurations), for builds on `target` ([`crate::apply`]). Step histories need
    /// none: their applier is the core's.
    fn record_applier(
        &self,
        _target: &Target,
        _hw: &HardwareParams,
    ) -> Option<Box<dyn RecordApplier>> {
        None
    }

    /// A template tuner's tasks of `graph` for `target`, for listing.
    fn template_tasks(
        &self,
        _graph: &Graph,
        _target: &Target,
        _hw: &HardwareParams,
    ) -> Option<Vec<TemplateTaskInfo>> {
        None
    }

    /// For a template tuner's session: whether `task` (a catalog operator of a network,
    /// or the one operator of `tessera tune --op`) is tuned for `target` — false where a
    /// template of another target fits it (VTA's for `vta` only) — with its baseline set
    /// to what an untuned build of it runs. `None`: this extension has no templates.
    fn keep_template_task(
        &self,
        _task: &mut TuningTask,
        _target: &Target,
        _hw: &HardwareParams,
    ) -> Option<bool> {
        None
    }
}
