//! A record log's tuning curve (`search::curve`) drawn as an SVG with plotters
//! (`tessera records plot`): each task's best against trials — GFLOPS with a network's
//! tasks, else its best time — the costliest ten coloured with a legend, and with the
//! network the estimated latency above.

use crate::{DriverError, NetworkSpec, Toolchain};
use plotters::prelude::*;
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use tessera_search::curve::{tuning_curve, TaskCurve, TaskInfo, TuningCurve};
use tessera_search::record::LoadedLog;
use tessera_search::workload_key;

/// Tasks drawn with a colour and a legend entry (the most costly ones); the others are
/// grey.
const LABELLED: usize = 10;

/// What plotters reports when a picture cannot be drawn or written.
type DrawError = Box<dyn std::error::Error + Send + Sync>;

/// A curve drawn: where, and what it holds.
pub struct PlotSummary {
    pub out: PathBuf,
    pub trials: usize,
    /// Tasks with a successful record, and tasks in all.
    pub tuned: usize,
    pub tasks: usize,
    /// The network's estimated latency (seconds) after the trial, where a network was
    /// given.
    pub latency: Option<(usize, f64)>,
}

impl fmt::Display for PlotSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "wrote {}: {} trials, {} of {} tasks with a successful record",
            self.out.display(),
            self.trials,
            self.tuned,
            self.tasks
        )?;
        match self.latency {
            Some((trial, l)) => writeln!(
                f,
                ", estimated network latency {:.3} ms after trial {trial}",
                l * 1e3
            ),
            None => writeln!(f),
        }
    }
}

impl Toolchain {
    /// Draws `log`'s tuning curve into `out` (SVG); with `network`, its tasks' weights
    /// and FLOPs and its estimated latency.
    pub fn plot_log(
        &self,
        log: &LoadedLog,
        log_path: &Path,
        network: Option<&NetworkSpec>,
        out: &Path,
    ) -> Result<PlotSummary, DriverError> {
        let mut infos = HashMap::new();
        if let Some(spec) = network {
            let (_, tasks) = self.tuning_tasks(spec, false)?;
            for t in tasks {
                let info = TaskInfo {
                    weight: t.weight as f64,
                    flops: t.task.dag.flop_count(),
                    choice: t.choice.clone(),
                };
                infos.insert(t.task.workload_key, info);
            }
        }
        let curve = tuning_curve(log, &infos);
        if curve.tasks.iter().all(|t| t.points.is_empty()) {
            return Err(DriverError::Request(format!(
                "{}: no successful record to plot",
                log_path.display()
            )));
        }
        draw(&curve, out).map_err(|source| DriverError::Draw {
            out: out.to_path_buf(),
            source,
        })?;
        Ok(PlotSummary {
            out: out.to_path_buf(),
            trials: curve.trials,
            tuned: curve.tasks.iter().filter(|t| !t.points.is_empty()).count(),
            tasks: curve.tasks.len(),
            latency: curve.network.last().copied(),
        })
    }
}

/// A task's y values: GFLOPS where its FLOPs are known, else its best time in ms.
fn y_of(t: &TaskCurve, cost: f64) -> f64 {
    match &t.info {
        Some(i) if i.flops > 0.0 => i.flops / cost / 1e9,
        _ => cost * 1e3,
    }
}

/// The curve as a step line to the last trial.
fn steps(points: &[(usize, f64)], last: usize, y: impl Fn(f64) -> f64) -> Vec<(f64, f64)> {
    let mut v = Vec::new();
    for (k, &(t, c)) in points.iter().enumerate() {
        if k > 0 {
            v.push((t as f64, y(points[k - 1].1)));
        }
        v.push((t as f64, y(c)));
    }
    if let Some(&(_, c)) = points.last() {
        v.push((last as f64, y(c)));
    }
    v
}

fn draw(curve: &TuningCurve, out: &Path) -> Result<(), DrawError> {
    let root = SVGBackend::new(out, (1100, 800)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = if curve.network.is_empty() {
        (None, root.clone())
    } else {
        let (a, b) = root.split_vertically(300);
        (Some(a), b)
    };
    let last = curve.trials.max(1);
    if let (Some(area), Some(_)) = (top, curve.network.first()) {
        // the range the estimate moves in, so that its gains show
        let ys: Vec<f64> = curve.network.iter().map(|p| p.1 * 1e3).collect();
        let hi = ys.iter().cloned().fold(0.0, f64::max);
        let lo = ys.iter().cloned().fold(f64::INFINITY, f64::min);
        let pad = ((hi - lo) * 0.1).max(hi * 0.01);
        let (lo, hi) = ((lo - pad).max(0.0), hi + pad);
        let mut chart = ChartBuilder::on(&area)
            .caption("estimated network latency", ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..last as f64, lo..hi)?;
        chart
            .configure_mesh()
            .x_desc("trials")
            .y_desc("ms")
            .draw()?;
        chart.draw_series(LineSeries::new(
            steps(&curve.network, last, |c| c * 1e3),
            BLUE.stroke_width(2),
        ))?;
    }
    let gflops = curve
        .tasks
        .iter()
        .any(|t| t.info.as_ref().is_some_and(|i| i.flops > 0.0));
    let ymax = curve
        .tasks
        .iter()
        .flat_map(|t| t.points.iter().map(move |p| y_of(t, p.1)))
        .fold(0.0, f64::max)
        * 1.05;
    let mut chart = ChartBuilder::on(&bottom)
        .caption(
            if gflops {
                "best GFLOPS per task"
            } else {
                "best time per task"
            },
            ("sans-serif", 20),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..last as f64, 0f64..ymax.max(1e-9))?;
    chart
        .configure_mesh()
        .x_desc("trials")
        .y_desc(if gflops { "GFLOPS" } else { "ms" })
        .draw()?;
    // colour the tasks that cost the network (or the log) most
    let mut order: Vec<usize> = (0..curve.tasks.len())
        .filter(|&i| !curve.tasks[i].points.is_empty())
        .collect();
    let weight =
        |t: &TaskCurve| t.best().unwrap_or(0.0) * t.info.as_ref().map_or(1.0, |i| i.weight);
    order.sort_by(|&a, &b| weight(&curve.tasks[b]).total_cmp(&weight(&curve.tasks[a])));
    for (rank, &i) in order.iter().enumerate().rev() {
        let t = &curve.tasks[i];
        let line = steps(&t.points, last, |c| y_of(t, c));
        if rank < LABELLED {
            let color = Palette99::pick(rank).to_rgba();
            chart
                .draw_series(LineSeries::new(line, color.stroke_width(2)))?
                .label(format!(
                    "{} {}",
                    t.task,
                    workload_key::hash_prefix(&t.workload_key)
                ))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
        } else {
            chart.draw_series(LineSeries::new(line, RGBColor(190, 190, 190)))?;
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()?;
    root.present()?;
    Ok(())
}
