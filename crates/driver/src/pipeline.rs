//! [`Toolchain`]: the registry of backends, devices and strategies, the in-process
//! extensions, and where devices are (this machine, or a tracker's servers) — and the
//! pipeline's stages as its methods, in the order a network goes through them.

use crate::extension::{NetworkExtension, TargetNeeds};
use crate::history::BuildReport;
use crate::{DriverError, NetworkSource, NetworkSpec};
use std::sync::Arc;
use std::time::Duration;
use tessera_backends::{HardwareParams, Target, TargetKind};
use tessera_graph::ScheduleHook;
use tessera_graph::{passes, zoo, CompiledNetwork, ConvPlan, Graph, GraphModule, Layout};
use tessera_plugin::Registry;
use tessera_runtime::{Device, TimeEvaluator, TimeResult};
use tessera_search::measure::RemoteOptions;
use tessera_search::record::LoadedLog;

/// The longest a remote session (a network run or an operator's check on a tracker's
/// server) lasts.
const SESSION_LIMIT: Duration = Duration::from_secs(1800);

type WarningSink = Arc<dyn Fn(&str) + Send + Sync>;

/// Everything a process builds networks with. The registry and the extensions are
/// shared by the toolchains [`Toolchain::with_remote`] makes.
pub struct Toolchain {
    registry: Arc<Registry>,
    extensions: Arc<Vec<Box<dyn NetworkExtension>>>,
    remote: Option<RemoteOptions>,
    warn: WarningSink,
}

/// A compiled network and what its build applied.
pub struct Build {
    pub network: CompiledNetwork,
    pub report: BuildReport,
}

impl Toolchain {
    /// The plugins of `registry` and the extensions the binary links. Warnings of the
    /// stages (an ONNX importer's, a log's skipped lines) go to `tracing` until
    /// [`Toolchain::on_warning`] says where else.
    pub fn new(registry: Registry, extensions: Vec<Box<dyn NetworkExtension>>) -> Toolchain {
        Toolchain {
            registry: Arc::new(registry),
            extensions: Arc::new(extensions),
            remote: None,
            warn: Arc::new(|w| tracing::warn!("{w}")),
        }
    }

    /// Sends the stages' warnings to `sink` (a command prints them on stderr).
    pub fn on_warning(mut self, sink: impl Fn(&str) + Send + Sync + 'static) -> Toolchain {
        self.warn = Arc::new(sink);
        self
    }

    /// This toolchain with its devices ([`Toolchain::device_for`]) on the servers of
    /// `remote` (`None`: this machine's): the same registry, extensions and warnings,
    /// and this one unchanged.
    pub fn with_remote(&self, remote: Option<RemoteOptions>) -> Toolchain {
        Toolchain {
            registry: Arc::clone(&self.registry),
            extensions: Arc::clone(&self.extensions),
            remote,
            warn: Arc::clone(&self.warn),
        }
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    pub fn extensions(&self) -> &[Box<dyn NetworkExtension>] {
        &self.extensions
    }

    pub(crate) fn warn(&self, text: &str) {
        (self.warn)(text)
    }

    pub fn parse_target(&self, s: &str) -> Result<Target, DriverError> {
        Ok(self.registry.parse_target(s)?)
    }

    /// The hardware parameters of `target`'s backend.
    pub fn hardware(&self, target: &Target) -> Result<HardwareParams, DriverError> {
        Ok(self.registry.backend_for(target)?.hardware_params().clone())
    }

    /// Where this toolchain's devices are: a tracker's servers, or this machine (`None`).
    pub fn remote(&self) -> Option<&RemoteOptions> {
        self.remote.as_ref()
    }

    /// The device of `target`: a session on a server of the tracker's key for a
    /// toolchain [`Toolchain::with_remote`] made, else this machine's (the registry's).
    pub fn device_for(&self, target: &Target) -> Result<Arc<dyn Device>, DriverError> {
        let Some(r) = &self.remote else {
            return Ok(self.registry.device_for(target)?);
        };
        let d =
            tessera_rpc::RemoteSession::open(&r.tracker, &r.key, &r.token, r.wait, SESSION_LIMIT)?;
        if d.kind() != target.kind {
            return Err(DriverError::RemoteKind {
                key: r.key.clone(),
                served: d.kind().name().to_string(),
                wanted: target.kind.name().to_string(),
            });
        }
        Ok(Arc::new(d))
    }

    /// The extension that claims `target`, and what it needs.
    fn claimant(&self, target: &Target) -> Option<(&dyn NetworkExtension, TargetNeeds)> {
        self.extensions
            .iter()
            .find_map(|e| Some((e.as_ref(), e.target_needs(target)?)))
    }

    /// What `target` needs of a build (nothing special unless an extension claims it).
    pub fn needs(&self, target: &Target) -> TargetNeeds {
        self.claimant(target).map(|(_, n)| n).unwrap_or_default()
    }

    /// The layout a spec is built in: the one its target needs (a different one asked
    /// for is an error), else the one asked for, else NHWC.
    pub fn layout(&self, spec: &NetworkSpec) -> Result<Layout, DriverError> {
        match (self.needs(&spec.target).layout, spec.layout) {
            (Some(need), Some(asked)) if need != asked => Err(DriverError::Request(format!(
                "`{}` builds networks in {need} only, not {asked} (give {need}, or no layout)",
                spec.target
            ))),
            (Some(need), _) => Ok(need),
            (None, asked) => Ok(asked.unwrap_or(Layout::Nhwc)),
        }
    }

    // ---- The stages, in order ----

    /// Stage 1, import: the network of `spec.source`, in its own layout (a zoo network
    /// in the spec's, unless it is defined in NCHW only).
    pub fn import(&self, spec: &NetworkSpec) -> Result<Graph, DriverError> {
        match &spec.source {
            NetworkSource::Zoo { name, options } => {
                let layout = if zoo::nchw_only(name) {
                    Layout::Nchw
                } else {
                    self.layout(spec)?
                };
                let options = zoo::ZooOptions {
                    layout,
                    ..options.clone()
                };
                Ok(zoo::network(name, &options)?)
            }
            NetworkSource::Onnx { path, options } => {
                let (g, warnings) =
                    tessera_graph::onnx::load_reporting(path, options).map_err(|source| {
                        DriverError::Import {
                            path: path.clone(),
                            source: Box::new(source),
                        }
                    })?;
                for w in warnings {
                    self.warn(&w);
                }
                Ok(g)
            }
        }
    }

    /// Stages 1–3: imported, the graph passes run (batch norms and constants folded,
    /// the layout converted), and prepared for the target by the extension that claims
    /// it (VTA's: quantized to int8 and packed).
    pub fn optimized(&self, spec: &NetworkSpec) -> Result<Graph, DriverError> {
        let mut g = self.import(spec)?;
        passes::optimize(&mut g, Some(self.layout(spec)?))?;
        match self.claimant(&spec.target) {
            Some((ext, _)) => ext
                .prepare(&spec.target, g)
                .map_err(|e| DriverError::Prepare {
                    target: spec.target.to_string(),
                    extension: e.what.clone(),
                    message: e.source.to_string(),
                }),
            None => Ok(g),
        }
    }

    /// Stages 1–4: the optimized network with its algorithm plan — for a CPU build in
    /// NHWC each convolution's algorithm still to choose (direct or Winograd) and its
    /// weights to pack in blocks of one vector register; otherwise the network as it is.
    pub fn plan(&self, spec: &NetworkSpec) -> Result<ConvPlan, DriverError> {
        let g = self.optimized(spec)?;
        let claimed = self.claimant(&spec.target).is_some();
        if self.layout(spec)? != Layout::Nhwc || claimed || spec.target.kind != TargetKind::CPU {
            return Ok(ConvPlan::fixed(g));
        }
        let lanes = self.hardware(&spec.target)?.f32_lanes();
        Ok(ConvPlan::for_cpu(g, lanes, spec.winograd)?)
    }

    /// Stages 1–4 for template tuning: every convolution direct, its weights left HWIO
    /// (the form template tasks and their configurations take).
    pub fn plan_for_templates(&self, spec: &NetworkSpec) -> Result<ConvPlan, DriverError> {
        Ok(ConvPlan::fixed(self.optimized(spec)?))
    }

    /// Stages 1–7: `spec` compiled, with the history best of `log` when given (stage 5,
    /// [`Toolchain::compile_plan`]), else untuned.
    pub fn compile(
        &self,
        spec: &NetworkSpec,
        log: Option<&LoadedLog>,
    ) -> Result<Build, DriverError> {
        if let Some(rs) = &spec.runtime_size {
            return self.compile_for_range(spec, rs, log);
        }
        let plan = self.plan_for_log(spec, log)?;
        let counted = tessera_graph::dynamic::selection_ranges(plan.rule_graph());
        if !counted.is_empty() {
            let rs = crate::runtime_size::RuntimeSize {
                ranges: Vec::new(),
                at: Vec::new(),
            };
            return self.compile_for_range(spec, &rs, log);
        }
        self.compile_plan(&plan, &spec.target, log)
    }

    /// Stages 6–7 for one graph: compiled by the target's backend (from the registry),
    /// `hook` asked for each group's schedule first, its memory planned.
    pub fn compile_graph(
        &self,
        g: &Graph,
        target: &Target,
        hook: Option<&dyn ScheduleHook>,
    ) -> Result<CompiledNetwork, DriverError> {
        let backend = self.registry.backend_for(target)?;
        Ok(tessera_graph::compile(g, backend.as_ref(), hook)?)
    }

    /// Stage 8: the compiled network on its target's device ([`Toolchain::device_for`]).
    pub fn load(&self, compiled: CompiledNetwork) -> Result<GraphModule, DriverError> {
        let device = self.device_for(compiled.target())?;
        Ok(compiled.load(device)?)
    }

    /// [`Toolchain::compile`] then [`Toolchain::load`].
    pub fn build(
        &self,
        spec: &NetworkSpec,
        log: Option<&LoadedLog>,
    ) -> Result<(GraphModule, BuildReport), DriverError> {
        let b = self.compile(spec, log)?;
        Ok((self.load(b.network)?, b.report))
    }

    /// Times whole runs of `m` with `ev`: on the host's clock, or where the target
    /// needs it ([`TargetNeeds::device_clock`]) the sum of its kernels' device-clock
    /// times.
    pub fn benchmark(
        &self,
        m: &mut GraphModule,
        ev: &TimeEvaluator,
    ) -> Result<TimeResult, DriverError> {
        Ok(if self.needs(m.target()).device_clock.is_some() {
            m.benchmark_kernels(ev)?
        } else {
            m.benchmark(ev)?
        })
    }
}
