//! Apply-history-best for networks: a [`ScheduleHook`] that builds each fused group
//! with the best step history the record log holds for the group's compute DAG
//! (matched by workload key and target), leaving the groups without one to the next
//! hook of the pipeline's chain (template records) or their default schedule; and the
//! pipeline extension that offers it (`tessera_search::extension::NetworkExtension`).

use std::sync::Mutex;
use tessera_backends::{HardwareParams, Target};
use tessera_graph::{BuildContext, Graph, GroupCompute, ScheduleHook};
use tessera_search::extension::{HistoryHook, NetworkExtension, RecordKind};
use tessera_search::record::ApplyHistoryBest;
use tessera_search::state::State;
use tessera_search::ScheduleDesc;
use tessera_te::Schedule;

/// Builds fused groups with their best auto-scheduler records.
pub struct SketchHook {
    best: ApplyHistoryBest,
    target: String,
    applied: Mutex<usize>,
    warnings: Mutex<Vec<String>>,
}

impl SketchHook {
    pub fn new(best: ApplyHistoryBest, target: &str) -> Self {
        SketchHook {
            best,
            target: target.to_string(),
            applied: Mutex::new(0),
            warnings: Mutex::new(Vec::new()),
        }
    }

    /// Distinct groups built with a step history so far.
    pub fn applied(&self) -> usize {
        *self.applied.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that did not apply (each with why).
    pub fn warnings(&self) -> Vec<String> {
        self.warnings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl ScheduleHook for SketchHook {
    fn schedule(&self, _: &Graph, gc: &GroupCompute, _: &BuildContext) -> Option<Schedule> {
        // no record for the group: the next hook's, or its default schedule
        let dag = gc.dag().ok()?;
        let key = dag.workload_key();
        let rec = self.best.query(&key, &self.target)?;
        let ScheduleDesc::Steps { steps } = &rec.schedule else {
            // the default schedule measured fastest, or a template record
            return None;
        };
        match State::from_json(&dag, steps).and_then(|s| s.replay()) {
            Ok(r) => {
                *self.applied.lock().unwrap_or_else(|e| e.into_inner()) += 1;
                Some(r.schedule)
            }
            Err(e) => {
                self.warnings
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(format!(
                        "the best record of `{}` (workload {key}) does not replay ({e}): using its default schedule",
                        rec.task
                    ));
                None
            }
        }
    }
}

impl HistoryHook for SketchHook {
    fn record_kind(&self) -> RecordKind {
        RecordKind::Steps
    }
    fn applied(&self) -> usize {
        SketchHook::applied(self)
    }
    fn warnings(&self) -> Vec<String> {
        SketchHook::warnings(self)
    }
}

/// The auto-scheduler's part of the pipeline: its step histories applied to builds.
pub struct SketchExtension;

impl NetworkExtension for SketchExtension {
    fn name(&self) -> &str {
        "sketch"
    }
    fn history_hook(
        &self,
        best: &ApplyHistoryBest,
        target: &Target,
        _hw: &HardwareParams,
    ) -> Option<Box<dyn HistoryHook>> {
        Some(Box::new(SketchHook::new(best.clone(), &target.to_string())))
    }
}
