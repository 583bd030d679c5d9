//! Apply-history-best for networks: a [`ScheduleHook`] that builds each fused group
//! with the best step history the record log holds for the group's compute DAG
//! (matched by workload key and target), and hands the groups without one to a
//! fallback hook (template records) or their default schedule.

use std::sync::Mutex;
use tessera_graph::{BuildContext, Graph, GroupCompute, ScheduleHook};
use tessera_search::record::ApplyHistoryBest;
use tessera_search::state::State;
use tessera_search::ScheduleDesc;
use tessera_te::Schedule;

/// Builds fused groups with their best auto-scheduler records.
pub struct SketchHook<'a> {
    best: ApplyHistoryBest,
    target: String,
    fallback: Option<&'a dyn ScheduleHook>,
    applied: Mutex<usize>,
    warnings: Mutex<Vec<String>>,
}

impl<'a> SketchHook<'a> {
    pub fn new(
        best: ApplyHistoryBest,
        target: &str,
        fallback: Option<&'a dyn ScheduleHook>,
    ) -> Self {
        SketchHook {
            best,
            target: target.to_string(),
            fallback,
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

impl ScheduleHook for SketchHook<'_> {
    fn schedule(&self, graph: &Graph, gc: &GroupCompute, ctx: &BuildContext) -> Option<Schedule> {
        let fallback = || self.fallback.and_then(|f| f.schedule(graph, gc, ctx));
        let Ok(dag) = gc.dag() else {
            return fallback();
        };
        let key = dag.workload_key();
        let Some(rec) = self.best.query(&key, &self.target) else {
            return fallback();
        };
        let ScheduleDesc::Steps { steps } = &rec.schedule else {
            // the default schedule measured fastest, or a template record
            return fallback();
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
                fallback()
            }
        }
    }
}
