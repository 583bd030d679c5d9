//! `tessera run` and `tessera compile` as library calls. [`Toolchain::run`] takes a
//! [`RunRequest`] — a network (and a log) to compile now or a module file to load, the
//! input files, what to measure — and gives a [`RunOutcome`]: the outputs, the top-5
//! classes, the profile and the time summary, as text and JSON for every face.
//! [`Toolchain::compile_module`] builds a network into a module file. What happens
//! meanwhile (what the build applied, where it loaded, warnings) goes to the caller's
//! [`Events`] as it happens, as a session's does: each `out` text ends its lines with
//! a newline.

use crate::run_report::{save_outputs, KernelProfile, RunBenchmark, TopClasses};
use crate::{DriverError, GivenInputs, NetworkSpec, Toolchain};
use std::path::{Path, PathBuf};
use std::time::Instant;
use tessera_backends::Target;
use tessera_graph::{BuildSummary, CompiledNetwork, GraphModule, LaunchMode};
use tessera_runtime::{NDArray, TimeEvaluator};
use tessera_search::record::LoadedLog;

pub use tessera_search::session_report::SessionReport as Events;

/// What a run builds or loads.
#[derive(Clone, Debug)]
pub enum RunSource {
    /// A network compiled now, with the history best of a record log when given.
    Network {
        spec: Box<NetworkSpec>,
        log: Option<PathBuf>,
    },
    /// A module file (`tessera compile`'s), refused if compiled for another target than
    /// `target` (when given). A log may still be given: the profile then shows each
    /// kernel's time alone beside it.
    Module {
        path: PathBuf,
        target: Option<Target>,
        log: Option<PathBuf>,
    },
}

/// `tessera run`, as data.
pub struct RunRequest {
    pub source: RunSource,
    /// The inputs' values (others are random); checked against the network.
    pub inputs: GivenInputs,
    /// Launch each kernel on its own rather than replaying a recorded sequence.
    pub step_by_step: bool,
    /// Where to write the outputs (`.npy` for one, `.npz` for several).
    pub save_outputs: Option<PathBuf>,
    /// Profile each kernel inside this many whole runs.
    pub profile: Option<usize>,
    /// Time whole runs so.
    pub benchmark: Option<TimeEvaluator>,
}

impl RunRequest {
    /// One run of `source` on random inputs, nothing measured.
    pub fn new(source: RunSource) -> RunRequest {
        RunRequest {
            source,
            inputs: GivenInputs::default(),
            step_by_step: false,
            save_outputs: None,
            profile: None,
            benchmark: None,
        }
    }
}

/// What a run gives back.
pub struct RunOutcome {
    /// The module file run, if the network was not compiled now.
    pub module: Option<PathBuf>,
    pub target: Target,
    pub summary: BuildSummary,
    /// The device, described.
    pub device: String,
    pub launch_sequence: bool,
    pub outputs: Vec<NDArray>,
    pub top5: Option<TopClasses>,
    pub profile: Option<KernelProfile>,
    pub benchmark: Option<RunBenchmark>,
}

impl RunOutcome {
    pub fn to_json(&self) -> serde_json::Value {
        let s = &self.summary;
        let shape =
            |o: &NDArray| serde_json::json!({"shape": o.shape(), "dtype": o.dtype().to_string()});
        serde_json::json!({
            "target": self.target.to_string(),
            "module": self.module.as_ref().map(|p| p.display().to_string()),
            "groups": s.groups, "kernels": s.kernels,
            "planned_bytes": s.planned_bytes, "unplanned_bytes": s.unplanned_bytes,
            "weight_bytes": s.weight_bytes,
            "launch_sequence": self.launch_sequence,
            "device": self.device,
            "output": self.outputs.first().map(shape),
            "outputs": self.outputs.iter().map(shape).collect::<Vec<_>>(),
            "top5": self.top5.as_ref().map(TopClasses::to_json),
            "profile": self.profile.as_ref().map(KernelProfile::to_json),
            "benchmark": self.benchmark.as_ref().map(RunBenchmark::to_json),
        })
    }
}

impl Toolchain {
    /// Compiles `spec` with the history best of the log at `log` (read here), checking
    /// `given` against it; says what the build applied and its summary.
    pub fn build_network(
        &self,
        spec: &NetworkSpec,
        log: Option<&Path>,
        given: &GivenInputs,
        events: &mut dyn Events,
    ) -> Result<CompiledNetwork, DriverError> {
        let loaded = log.map(|p| self.read_log(p)).transpose()?;
        self.build_with(spec, log, loaded.as_ref(), given, events)
    }

    fn build_with(
        &self,
        spec: &NetworkSpec,
        log: Option<&Path>,
        loaded: Option<&LoadedLog>,
        given: &GivenInputs,
        events: &mut dyn Events,
    ) -> Result<CompiledNetwork, DriverError> {
        let start = Instant::now();
        let build = self.compile_network(spec, loaded, given)?;
        let report = build.report.text(log);
        if !report.lines.is_empty() {
            events.out(&report.lines);
        }
        for w in &report.warnings {
            events.warn(w);
        }
        events.out(&format!("{}\n", build.summary_line(start.elapsed())));
        Ok(build.network)
    }

    /// `tessera compile`: `spec` built with the log at `log` into the module file `out`;
    /// its size in bytes.
    pub fn compile_module(
        &self,
        spec: &NetworkSpec,
        log: Option<&Path>,
        given: &GivenInputs,
        out: &Path,
        events: &mut dyn Events,
    ) -> Result<u64, DriverError> {
        let compiled = self.build_network(spec, log, given, events)?;
        compiled.save(out)?;
        let bytes = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
        events.out(&format!(
            "wrote {} ({:.1} MiB): `tessera run --module {}` runs it without compiling\n",
            out.display(),
            bytes as f64 / (1 << 20) as f64,
            out.display()
        ));
        Ok(bytes)
    }

    /// `tessera run`: builds or loads the network, loads it on this toolchain's device,
    /// runs it once on the given inputs, and measures what `req` asks.
    pub fn run(
        &self,
        req: &RunRequest,
        events: &mut dyn Events,
    ) -> Result<RunOutcome, DriverError> {
        let log_path = match &req.source {
            RunSource::Network { log, .. } | RunSource::Module { log, .. } => log.as_deref(),
        };
        let loaded = log_path.map(|p| self.read_log(p)).transpose()?;
        let compiled = match &req.source {
            RunSource::Network { spec, .. } => {
                self.build_with(spec, log_path, loaded.as_ref(), &req.inputs, events)?
            }
            RunSource::Module { path, target, .. } => {
                let c = self.read_module(path, target.as_ref())?;
                events.out(&format!(
                    "loaded `{}` for `{}` from {} ({} fused groups, {} kernels)\n",
                    c.name(),
                    c.target(),
                    path.display(),
                    c.summary().groups,
                    c.summary().kernels
                ));
                c
            }
        };
        let ranges = compiled.size_ranges();
        if !ranges.is_empty() {
            let what = match ranges.iter().all(|r| r.produced) {
                true => "outputs of the size each run counts",
                false => "inputs of any such size, outputs of the size given",
            };
            events.out(&format!(
                "one module for {}: {what}\n",
                tessera_graph::dynamic::describe(ranges)
            ));
        }
        let mut m = self.load_saying(compiled, events)?;
        if req.step_by_step {
            m.launch_step_by_step()?;
        }
        let summary = m.summary();
        events.out(&format!(
            "weights: {:.1} MiB ({} bytes), on the device from the build on\n",
            summary.weight_bytes as f64 / (1 << 20) as f64,
            summary.weight_bytes
        ));
        events.out(&format!("device: {}\n", m.device().describe()));
        events.out(&format!("launches: {}\n", m.launch_mode()));
        req.inputs.set_on(&mut m)?;
        let before = m.device_counters()?;
        m.run()?;
        let counted = m.device_counters()?.since(&before);
        let outputs: Vec<NDArray> = (0..m.output_types().count())
            .map(|i| m.get_output(i))
            .collect::<Result<_, _>>()?;
        for (i, o) in outputs.iter().enumerate() {
            events.out(&format!("output {i}: {:?} {}\n", o.shape(), o.dtype()));
        }
        if let Some(path) = &req.save_outputs {
            events.out(&format!("{}\n", save_outputs(path, &outputs)?));
        }
        let top5 = TopClasses::of(&outputs);
        let profile = req
            .profile
            .map(|repeat| self.profile(&mut m, repeat.max(1), loaded.as_ref()))
            .transpose()?;
        let benchmark = req
            .benchmark
            .as_ref()
            .map(|ev| self.benchmark_report(&mut m, ev, counted))
            .transpose()?;
        Ok(RunOutcome {
            module: match &req.source {
                RunSource::Module { path, .. } => Some(path.clone()),
                RunSource::Network { .. } => None,
            },
            target: m.target().clone(),
            summary,
            device: m.device().describe(),
            launch_sequence: *m.launch_mode() == LaunchMode::Sequence,
            outputs,
            top5,
            profile,
            benchmark,
        })
    }

    /// Loads `compiled` on this toolchain's device, saying how long it took: a device
    /// whose driver compiles the kernels itself (OpenCL) does so here.
    fn load_saying(
        &self,
        compiled: CompiledNetwork,
        events: &mut dyn Events,
    ) -> Result<GraphModule, DriverError> {
        let start = Instant::now();
        let target = compiled.target().clone();
        let m = self.load(compiled)?;
        events.out(&format!(
            "loaded onto the device of `{target}` in {:.1} s (a driver that compiles the \
             kernels itself, as OpenCL's, does it here)\n",
            start.elapsed().as_secs_f64()
        ));
        Ok(m)
    }
}
