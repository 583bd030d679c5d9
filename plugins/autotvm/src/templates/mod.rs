//! Schedule templates with real knobs, one type per template (TVM's
//! `register_topi_compute` / `register_topi_schedule` pairs): each builds its operator's
//! tensor expression and defines its configuration space ([`Template::define`]), and
//! turns a configuration into a schedule ([`Template::apply`]).
//!
//! Which template fits a catalog operator is a table: the CPU's templates
//! ([`linalg`], [`conv`]) are built in, and a backend plugin adds its own with
//! [`register_templates`] (VTA's `conv2d_packed.vta` lives in `plugins/vta`). An entry
//! made for one target kind tunes that kind's kernels only, and a kind with templates of
//! its own takes none of the generic ones ([`template_fits`]).

pub mod conv;
pub mod linalg;

use crate::space::{Config, ConfigSpace, SpaceError};
use petgraph::stable_graph::NodeIndex;
use std::fmt;
use std::sync::{Arc, RwLock};
use tessera_backends::Target;
use tessera_graph::{Graph, GroupCompute};
use tessera_ir::PrimFunc;
use tessera_te::catalog::OpSpec;
use tessera_te::ops::Conv2dAttrs;
use tessera_te::{lower, ComputeDag, Schedule, ScheduleError, Tensor};

pub use conv::{Conv2dNchw, Conv2dNchwc, Conv2dNhwc, DepthwiseNhwc};
pub use linalg::{BatchMatmul, Dense, Matmul};

/// One schedule template: an operator of fixed shape, its knobs and their schedule.
pub trait Template: fmt::Debug + Send + Sync {
    /// The template's name, as TVM's: the operator and the target key
    /// (`conv2d_nchw.x86`, `conv2d_packed.vta`).
    fn name(&self) -> &'static str;

    /// The operator's tensors (its inputs, then the output), with the template's knobs
    /// defined in `space`.
    fn define(&self, space: &mut ConfigSpace) -> Result<Vec<Tensor>, TemplateError>;

    /// Schedules the stage `out` of `s` (this template's operator, possibly inside a
    /// fused function whose other stages are scheduled apart) with the configuration
    /// `knobs` reads.
    fn apply(&self, s: &mut Schedule, out: &Tensor, knobs: &Knobs<'_>)
        -> Result<(), ScheduleError>;

    /// What the operator alone needs beyond [`Template::apply`] (VTA's: the catalog
    /// operator's own epilogue).
    fn finish_alone(&self, _s: &mut Schedule, _out: &Tensor) -> Result<(), TemplateError> {
        Ok(())
    }

    /// Fits the configured stage `out` into its fused group of a network (VTA's: the
    /// group's epilogue must be what its kernel computes); an error leaves the group
    /// to its default schedule.
    fn fit_group(
        &self,
        _s: &mut Schedule,
        _out: &Tensor,
        _group: &GroupFit<'_>,
    ) -> Result<(), TemplateError> {
        Ok(())
    }

    /// What a build without a record for this template runs.
    fn untuned(&self) -> Untuned {
        Untuned::DefaultSchedule
    }

    /// A word on why the template's computation may differ from a task's (the blocks it
    /// chose, say), added to that refusal.
    fn mismatch_hint(&self, _lanes: i64) -> Option<String> {
        None
    }
}

/// What a build of a template's operator without a record runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Untuned {
    /// The operator's default schedule, whose time compares with the configurations'.
    DefaultSchedule,
    /// The space's fallback configuration (TVM's `FallbackConfigEntity`): where the
    /// default schedule runs on another processor whose times do not compare (VTA's
    /// board CPU against VTA), so a configuration record is preferred to any other and
    /// the session's baseline is this configuration. `what` says so in the warning.
    FallbackConfig { what: &'static str },
}

/// A fused group of a network, as [`Template::fit_group`] sees it.
pub struct GroupFit<'a> {
    pub graph: &'a Graph,
    /// The group's anchor node (the template's operator).
    pub node: NodeIndex,
    pub group: &'a GroupCompute,
}

/// A configuration as a template reads it: each knob's values by name.
pub struct Knobs<'a> {
    space: &'a ConfigSpace,
    config: &'a Config,
    lanes: i64,
}

impl Knobs<'_> {
    /// The values of knob `name` (a split's factors, a reorder's permutation, a knob's
    /// value). Panics when the template never defined `name`: a template's own bug.
    pub fn get(&self, name: &str) -> Vec<i64> {
        let i = self
            .space
            .knobs
            .iter()
            .position(|k| k.name() == name)
            .expect("a knob of this template");
        self.space.knobs[i].value_numbers(self.config.choices[i])
    }

    /// float32 lanes of the target's vectors.
    pub fn lanes(&self) -> i64 {
        self.lanes
    }
}

/// Template errors.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("{0}")]
    Space(#[from] SpaceError),
    #[error("{0}")]
    Op(String),
    /// A configuration's schedule refused by the schedule primitives.
    #[error("{0}")]
    Schedule(#[from] tessera_te::ScheduleError),
    /// A scheduled program that does not lower.
    #[error("{0}")]
    Lower(#[from] tessera_te::LowerError),
    /// A fused group the template's kernel cannot compute.
    #[error("{0}")]
    Group(String),
}

/// A template error from an operator's construction.
pub fn op_err(e: impl fmt::Display) -> TemplateError {
    TemplateError::Op(e.to_string())
}

/// Templates of one-group convolutions refuse grouped ones.
pub fn one_group(template: &str, attrs: &Conv2dAttrs) -> Result<(), TemplateError> {
    if attrs.groups != 1 {
        return Err(TemplateError::Op(format!("{template} takes one group")));
    }
    Ok(())
}

/// A tuning task of a template: the operator, its space and its identity.
#[derive(Clone, Debug)]
pub struct TemplateTask {
    /// The template's name ([`Template::name`]).
    pub template: String,
    pub def: Arc<dyn Template>,
    /// The kernel's arguments (inputs, then the output).
    pub args: Vec<Tensor>,
    pub space: ConfigSpace,
    /// `template:` + the compute DAG's workload key.
    pub workload_key: String,
    pub flop: f64,
    /// float32 lanes of a vector register.
    pub lanes: i64,
}

impl TemplateTask {
    /// The task of template `def`; `lanes`: float32 lanes of the target's vectors.
    pub fn new(def: Arc<dyn Template>, lanes: i64) -> Result<TemplateTask, TemplateError> {
        let mut space = ConfigSpace::new();
        let args = def.define(&mut space)?;
        let out = args
            .last()
            .ok_or_else(|| op_err("a template without tensors"))?;
        let dag = ComputeDag::new(std::slice::from_ref(out)).map_err(op_err)?;
        let template = def.name();
        Ok(TemplateTask {
            template: template.to_string(),
            workload_key: format!("{template}:{}", dag.workload_key()),
            flop: dag.flop_count(),
            def,
            args,
            space,
            lanes: lanes.max(1),
        })
    }

    /// [`TemplateTask::new`] of a template value.
    pub fn of(def: impl Template + 'static, lanes: i64) -> Result<TemplateTask, TemplateError> {
        TemplateTask::new(Arc::new(def), lanes)
    }

    /// The task of catalog operator `spec`, if a registered template fits it
    /// ([`template_of`]).
    pub fn from_op(spec: &OpSpec, lanes: i64) -> Option<Result<TemplateTask, TemplateError>> {
        template_of(spec, lanes).map(|def| TemplateTask::new(def, lanes))
    }

    fn output(&self) -> &Tensor {
        self.args.last().expect("a task has an output")
    }

    /// The schedule of configuration `config`.
    pub fn schedule(&self, config: &Config) -> Result<Schedule, TemplateError> {
        let out = self.output().clone();
        let mut s = Schedule::create(std::slice::from_ref(&out))?;
        self.apply_to(&mut s, &out, config)?;
        self.def.finish_alone(&mut s, &out)?;
        Ok(s)
    }

    /// The lowered function of configuration `config` (named `name`): an error is the
    /// candidate's instantiation error.
    pub fn instantiate(&self, config: &Config, name: &str) -> Result<PrimFunc, TemplateError> {
        let s = self.schedule(config)?;
        Ok(lower(&s, &self.args, name)?)
    }

    /// The unscheduled function: the reference of the correctness check.
    pub fn naive(&self, name: &str) -> Result<PrimFunc, TemplateError> {
        let s = Schedule::create(std::slice::from_ref(self.output()))?;
        Ok(lower(&s, &self.args, name)?)
    }

    /// Schedules the stage `out` of `s` with `config` ([`Template::apply`]).
    pub fn apply_to(
        &self,
        s: &mut Schedule,
        out: &Tensor,
        config: &Config,
    ) -> Result<(), ScheduleError> {
        let knobs = Knobs {
            space: &self.space,
            config,
            lanes: self.lanes,
        };
        self.def.apply(s, out, &knobs)
    }
}

/// Makes the template of a catalog operator, if its shape and attributes fit;
/// `lanes`: float32 lanes of the target's vectors.
pub type TemplateMaker = fn(&OpSpec, i64) -> Option<Arc<dyn Template>>;

/// One row of the template table.
#[derive(Clone, Copy, Debug)]
pub struct TemplateEntry {
    /// The template's name (`conv2d_nchw.x86`).
    pub template: &'static str,
    /// The catalog operator it schedules (`conv2d_nchw`).
    pub op: &'static str,
    /// The target kind whose kernels it tunes; `None`: every kind without templates of
    /// its own.
    pub target_kind: Option<&'static str>,
    pub make: TemplateMaker,
}

/// The CPU's templates, built in.
const BUILT_IN: &[TemplateEntry] = &[
    linalg::MATMUL,
    linalg::DENSE,
    linalg::BATCH_MATMUL,
    conv::CONV2D_NHWC,
    conv::CONV2D_NCHW,
    conv::CONV2D_NCHWC,
    conv::DEPTHWISE_NHWC,
];

/// The rows plugins added.
static REGISTERED: RwLock<Vec<TemplateEntry>> = RwLock::new(Vec::new());

/// Adds a plugin's templates to the table (a template already there by name is kept
/// once).
pub fn register_templates(entries: &[TemplateEntry]) {
    let mut table = REGISTERED.write().unwrap_or_else(|e| e.into_inner());
    for e in entries {
        if !table.iter().any(|t| t.template == e.template) {
            table.push(*e);
        }
    }
}

/// The whole table: the built-in templates, then the registered ones.
pub fn template_table() -> Vec<TemplateEntry> {
    let table = REGISTERED.read().unwrap_or_else(|e| e.into_inner());
    BUILT_IN.iter().chain(table.iter()).copied().collect()
}

/// The template of catalog operator `spec`: the first row of the table for its operator
/// whose maker takes its shape and attributes.
pub fn template_of(spec: &OpSpec, lanes: i64) -> Option<Arc<dyn Template>> {
    let name = spec.entry().ok()?.name;
    template_table()
        .iter()
        .filter(|e| e.op == name)
        .find_map(|e| (e.make)(spec, lanes))
}

/// The catalog operators the table's templates schedule, for messages.
pub fn template_ops() -> Vec<&'static str> {
    let mut ops: Vec<&str> = template_table().iter().map(|e| e.op).collect();
    ops.dedup();
    ops
}

/// Whether template `template` tunes a kernel of `target`: a template made for a target
/// kind, for that kind only; a generic one, for every kind that has no templates of its
/// own (as TVM's VTA tutorial keeps only the packed conv2d tasks). A name not in the
/// table fits no target.
pub fn template_fits(target: &Target, template: &str) -> bool {
    let table = template_table();
    let Some(entry) = table.iter().find(|e| e.template == template) else {
        return false;
    };
    match entry.target_kind {
        Some(kind) => kind == target.kind.name(),
        None => !table
            .iter()
            .any(|e| e.target_kind == Some(target.kind.name())),
    }
}

/// A conv2d's attributes from a catalog spec (`pad: None` is "same" padding,
/// `kernel / 2`, as in the catalog).
pub fn conv_attrs(spec: &OpSpec, kh: i64, kw: i64) -> Conv2dAttrs {
    let a = &spec.attrs;
    Conv2dAttrs::new(
        (a.stride, a.stride),
        (a.pad.unwrap_or(kh / 2), a.pad.unwrap_or(kw / 2)),
        (a.dilation, a.dilation),
    )
}
