//! What a network run reports, as text and JSON for every face (the CLI prints them, a
//! Python caller gets them): the per-kernel profile (with a log, each kernel's time
//! alone beside it: `search::in_network`), TVM's execution time summary (and a
//! simulator's counters), the top-5 classes of a classifier's output, and the outputs
//! written to `.npy` / `.npz` files as tvmc names them.

use crate::{DriverError, Toolchain};
use std::fmt;
use std::path::Path;
use tessera_graph::GraphModule;
use tessera_runtime::{DeviceCounters, NDArray, TimeEvaluator, TimeResult};
use tessera_search::in_network::{self, StepTime};
use tessera_search::record::LoadedLog;

/// Each kernel's time inside whole runs, slowest first.
pub struct KernelProfile {
    /// Slowest first.
    pub steps: Vec<StepTime>,
    /// Whether a log gave each kernel's time alone.
    pub with_log: bool,
}

/// TVM's execution time summary of whole runs.
pub struct RunBenchmark {
    pub result: TimeResult,
    /// The device clock the times come from where it is not the host's (a simulator).
    pub clock: Option<String>,
    /// A simulator's counters of one inference (empty elsewhere).
    pub counters: DeviceCounters,
}

/// The five largest classes of row 0 of a classifier's output, as probabilities.
pub struct TopClasses {
    /// Whether the row was a softmax of the output (not probabilities already).
    pub softmaxed: bool,
    /// Class and probability, most probable first.
    pub top: Vec<(usize, f64)>,
}

impl Toolchain {
    /// Profiles `repeat` runs of `m` (`GraphModule::profile`), with `log` each kernel's
    /// time alone as the log measured it.
    pub fn profile(
        &self,
        m: &mut GraphModule,
        repeat: usize,
        log: Option<&LoadedLog>,
    ) -> Result<KernelProfile, DriverError> {
        let p = m.profile(repeat)?;
        let target = m.target().to_string();
        let mut steps = in_network::against_log(&p, &m.step_workload_keys(), &target, log);
        steps.sort_by(|a, b| b.in_network_ms.total_cmp(&a.in_network_ms));
        Ok(KernelProfile {
            steps,
            with_log: log.is_some(),
        })
    }

    /// Times whole runs of `m` (`Toolchain::benchmark`); `counted`: the device's counters
    /// of one run.
    pub fn benchmark_report(
        &self,
        m: &mut GraphModule,
        ev: &TimeEvaluator,
        counted: DeviceCounters,
    ) -> Result<RunBenchmark, DriverError> {
        let clock = self.needs(m.target()).device_clock;
        Ok(RunBenchmark {
            result: self.benchmark(m, ev)?,
            clock: clock.map(|c| {
                format!(
                    "(`{}`: the sum of each kernel's time on the device's clock, {c})",
                    m.target()
                )
            }),
            counters: counted,
        })
    }
}

impl KernelProfile {
    pub fn total_ms(&self) -> f64 {
        self.steps.iter().map(|s| s.in_network_ms).sum()
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!(self
            .steps
            .iter()
            .map(|s| serde_json::json!({
                "step": s.step, "kernel": s.kernel, "ms": s.in_network_ms,
                "alone_ms": s.alone_ms,
            }))
            .collect::<Vec<_>>())
    }
}

impl fmt::Display for KernelProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.total_ms();
        let alone = |s: &StepTime| match (s.alone_ms, s.ratio()) {
            (Some(a), Some(r)) => format!("  {a:>10.3}  {r:>5.2}×"),
            _ if self.with_log => format!("  {:>10}  {:>6}", "—", ""),
            _ => String::new(),
        };
        let header = if self.with_log {
            format!("  {:>10}  {:>6}", "alone (ms)", "ratio")
        } else {
            String::new()
        };
        writeln!(
            f,
            "{:>10}  {:>6}  {:>4}{header}  kernel (step, slowest first)",
            "time (ms)", "share", "step"
        )?;
        for s in &self.steps {
            writeln!(
                f,
                "{:>10.3}  {:>5.1}%  {:>4}{}  {}",
                s.in_network_ms,
                100.0 * s.in_network_ms / total,
                s.step,
                alone(s),
                s.kernel
            )?;
        }
        writeln!(
            f,
            "{total:>10.3}  100.0%  (all {} kernels)",
            self.steps.len()
        )?;
        let (inside, alone) = in_network::totals(&self.steps);
        if self.with_log && alone > 0.0 {
            writeln!(
                f,
                "the kernels the log knows take {inside:.3} ms inside the network, {alone:.3} ms \
                 alone as the log measured them ({:.2}×)",
                inside / alone
            )?;
        }
        Ok(())
    }
}

impl RunBenchmark {
    pub fn to_json(&self) -> serde_json::Value {
        let r = &self.result;
        serde_json::json!({
            "mean_ms": r.mean_ms(), "median_ms": r.median_ms(), "max_ms": r.max_ms(),
            "min_ms": r.min_ms(), "std_ms": r.std_ms(),
        })
    }
}

impl fmt::Display for RunBenchmark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(clock) = &self.clock {
            writeln!(f, "{clock}")?;
        }
        let r = &self.result;
        writeln!(f, "Execution time summary:")?;
        writeln!(
            f,
            " {:>10}  {:>11}  {:>8}  {:>8}  {:>8}",
            "mean (ms)", "median (ms)", "max (ms)", "min (ms)", "std (ms)"
        )?;
        writeln!(
            f,
            " {:>10.4}  {:>11.4}  {:>8.4}  {:>8.4}  {:>8.4}",
            r.mean_ms(),
            r.median_ms(),
            r.max_ms(),
            r.min_ms(),
            r.std_ms()
        )?;
        // a simulator's counters, as TVM's `simulator.stats()` prints them
        if !self.counters.is_empty() {
            writeln!(f, "Execution statistics (one inference):")?;
            for (name, value) in &self.counters.0 {
                writeln!(f, "\t{name:<20}: {value:>16}")?;
            }
        }
        Ok(())
    }
}

impl TopClasses {
    /// The top five of `outputs` where they are one row of at least five class scores
    /// per image (`[N, C]`), else `None`. A row that is not probabilities already is
    /// softmaxed.
    pub fn of(outputs: &[NDArray]) -> Option<TopClasses> {
        let [out] = outputs else { return None };
        if out.ndim() != 2 || out.shape()[1] < 5 {
            return None;
        }
        let v = out.to_f64_vec();
        let row = &v[..out.shape()[1]];
        let sum: f64 = row.iter().sum();
        let is_prob = row.iter().all(|&x| (0.0..=1.0).contains(&x)) && (sum - 1.0).abs() < 1e-3;
        let probs: Vec<f64> = if is_prob {
            row.to_vec()
        } else {
            let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = row.iter().map(|x| (x - m).exp()).collect();
            let s: f64 = e.iter().sum();
            e.iter().map(|x| x / s).collect()
        };
        let mut idx: Vec<usize> = (0..probs.len()).collect();
        idx.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]).then(a.cmp(&b)));
        Some(TopClasses {
            softmaxed: !is_prob,
            top: idx.into_iter().take(5).map(|c| (c, probs[c])).collect(),
        })
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!(self
            .top
            .iter()
            .map(|&(c, p)| serde_json::json!({"class": c, "probability": p}))
            .collect::<Vec<_>>())
    }
}

impl fmt::Display for TopClasses {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let how = if self.softmaxed {
            ", softmax of the output"
        } else {
            ""
        };
        writeln!(f, "top-5 classes (row 0{how}):")?;
        for (rank, (c, p)) in self.top.iter().enumerate() {
            writeln!(f, "  #{}  class {c:>4}  probability {p:.6}", rank + 1)?;
        }
        Ok(())
    }
}

/// Writes `outputs` to `path`: all of them to a `.npz` (`output_0`, `output_1`, …, as
/// tvmc names them), or the one output to a `.npy`; returns what was written, as a line.
pub fn save_outputs(path: &Path, outputs: &[NDArray]) -> Result<String, DriverError> {
    let npz = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("npz"));
    if npz {
        let names: Vec<String> = (0..outputs.len()).map(|i| format!("output_{i}")).collect();
        let arrays: Vec<(&str, &NDArray)> = names.iter().map(String::as_str).zip(outputs).collect();
        NDArray::save_npz(path, &arrays)?;
        return Ok(format!(
            "wrote {} ({} outputs: {})",
            path.display(),
            outputs.len(),
            names.join(", ")
        ));
    }
    let [one] = outputs else {
        return Err(DriverError::Request(format!(
            "--output {}: the network has {} outputs and a .npy file holds one: give a .npz \
             file (all outputs, as output_0, output_1, …)",
            path.display(),
            outputs.len()
        )));
    };
    one.save_npy(path)?;
    Ok(format!("wrote {}", path.display()))
}
