//! One operator's run (`tessera op`) as text and JSON for every face: the schedule
//! built, whether it matched its reference, its time and GFLOPS, and on request its
//! compute DAG, lowered IR and generated source; and a kernel built without running it
//! (`--emit`: compiling for a device elsewhere).

use crate::{DriverError, OperatorRun, Toolchain};
use serde_json::json;
use std::fmt;
use std::path::{Path, PathBuf};
use tessera_backends::Target;
use tessera_ir::PrimFunc;
use tessera_te::catalog::OpSpec;
use tessera_te::ComputeDag;

/// What a report shows besides the outcome.
#[derive(Clone, Copy, Debug, Default)]
pub struct Shown {
    pub dag: bool,
    pub ir: bool,
    pub source: bool,
}

impl Shown {
    /// From `--show` items (`dag`, `ir`, `source`); an unknown item is an error.
    pub fn parse(items: &[String]) -> Result<Shown, DriverError> {
        let mut s = Shown::default();
        for item in items {
            match item.as_str() {
                "dag" => s.dag = true,
                "ir" => s.ir = true,
                "source" => s.source = true,
                other => {
                    return Err(DriverError::Request(format!(
                        "--show: unknown item `{other}` (known: dag, ir, source)"
                    )))
                }
            }
        }
        Ok(s)
    }
}

/// One operator's run, reported.
pub struct OperatorReport<'a> {
    pub spec: &'a OpSpec,
    pub target: &'a Target,
    /// Which schedule was built: `default`, `naive`, or a log's history best.
    pub schedule: &'a str,
    pub dag: &'a ComputeDag,
    pub func: &'a PrimFunc,
    pub run: &'a OperatorRun,
    pub shown: Shown,
}

impl OperatorReport<'_> {
    fn gflops(&self) -> f64 {
        self.dag.flop_count() / (self.run.timing.stats_ms().median * 1e-3) / 1e9
    }

    pub fn to_json(&self) -> serde_json::Value {
        let (r, stats) = (self.run, self.run.timing.stats_ms());
        let mut obj = json!({
            "op": self.spec.name,
            "shape": self.spec.shape,
            "target": self.target.to_string(),
            "device": r.device,
            "schedule": self.schedule,
            "workload_key": self.dag.workload_key(),
            "flops": self.dag.flop_count(),
            "correct": r.correct.as_ref().map(|c| c.is_ok()),
            "checked_against": r.checked_against.name(),
            "median_ms": stats.median,
            "mean_ms": stats.mean,
            "min_ms": stats.min,
            "max_ms": stats.max,
            "std_ms": stats.std,
            "number": r.timing.number,
            "repeat": r.timing.results.len(),
            "gflops": self.gflops(),
        });
        if let Some(Err(e)) = &r.correct {
            obj["mismatch"] = json!(e.to_string());
        }
        if self.shown.dag {
            obj["dag"] = json!(self.dag.to_string());
        }
        if self.shown.ir {
            obj["ir"] = json!(self.func.to_string());
        }
        if self.shown.source {
            obj["source"] = json!(r.source);
        }
        obj
    }
}

impl fmt::Display for OperatorReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.run;
        if self.shown.dag {
            writeln!(f, "== compute DAG ==\n{}", self.dag)?;
        }
        if self.shown.ir {
            writeln!(f, "== lowered IR ==\n{}", self.func)?;
        }
        if self.shown.source {
            writeln!(f, "== {} source ==\n{}", self.target.kind.name(), r.source)?;
        }
        let shape: Vec<String> = self.spec.shape.iter().map(|d| d.to_string()).collect();
        writeln!(
            f,
            "{} {} on `{}` ({}), {} schedule",
            self.spec.name,
            shape.join("x"),
            self.target,
            r.device,
            self.schedule
        )?;
        let against = r.checked_against.name();
        match &r.correct {
            Some(Ok(())) => writeln!(f, "correct: yes (checked against the {against})")?,
            Some(Err(e)) => writeln!(f, "correct: NO (checked against the {against}): {e}")?,
            None => writeln!(f, "correct: not checked")?,
        }
        writeln!(
            f,
            "time: {:.4} ms median ({} repeats of {} runs)  {:.2} GFLOPS",
            r.timing.stats_ms().median,
            r.timing.results.len(),
            r.timing.number,
            self.gflops()
        )?;
        writeln!(f, "{}", r.timing)
    }
}

/// A kernel built and not run.
pub struct EmittedKernel {
    pub name: String,
    pub target: String,
    pub artifact: PathBuf,
    pub bytes: u64,
    /// A GPU kernel's grid and block.
    pub launch: Option<([u32; 3], [u32; 3])>,
    pub device_name: String,
    /// The generated source, when asked for.
    pub source: Option<String>,
}

impl Toolchain {
    /// Builds `func` for `target` into `dir` without opening a device (`--emit`).
    pub fn emit_operator(
        &self,
        func: &PrimFunc,
        target: &Target,
        dir: &Path,
        with_source: bool,
    ) -> Result<EmittedKernel, DriverError> {
        std::fs::create_dir_all(dir).map_err(|source| DriverError::Io {
            what: format!("creating {}", dir.display()),
            source,
        })?;
        let backend = self.registry().backend_for(target)?;
        let artifact = backend.build(func, dir)?;
        Ok(EmittedKernel {
            name: func.name.clone(),
            target: target.to_string(),
            bytes: std::fs::metadata(&artifact.path).map_or(0, |m| m.len()),
            launch: artifact.launch.map(|l| (l.grid, l.block)),
            device_name: artifact.device.name().to_string(),
            source: with_source
                .then(|| std::fs::read_to_string(&artifact.source_path).unwrap_or_default()),
            artifact: artifact.path,
        })
    }
}

impl EmittedKernel {
    pub fn to_json(&self) -> serde_json::Value {
        let mut obj = json!({
            "op": self.name,
            "target": self.target,
            "artifact": self.artifact,
            "artifact_bytes": self.bytes,
            "launch": self.launch.map(|(grid, block)| json!({"grid": grid, "block": block})),
        });
        if let Some(src) = &self.source {
            obj["source"] = json!(src);
        }
        obj
    }
}

impl fmt::Display for EmittedKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(src) = &self.source {
            writeln!(f, "== {} source ==\n{src}", self.device_name)?;
        }
        writeln!(
            f,
            "{}: built for `{}` into {} ({} bytes); not run (--emit)",
            self.name,
            self.target,
            self.artifact.display(),
            self.bytes
        )
    }
}
