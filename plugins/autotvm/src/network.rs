//! Templates in networks: the template tasks of a network (one per distinct conv2d /
//! dense / matmul of its fused groups) and the schedule hook that builds a network with
//! the best configurations of a record log (apply-history-best); and the pipeline
//! extension that offers both (`tessera_search::extension::NetworkExtension`).

use crate::templates::{
    template_fits, template_of, GroupFit, Template, TemplateError, TemplateTask, Untuned,
};
use petgraph::stable_graph::NodeIndex;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tessera_backends::{HardwareParams, Target};
use tessera_graph::executor::{BuildContext, ScheduleHook};
use tessera_graph::{fuse, op_spec_of, Graph, GroupCompute};
use tessera_search::extension::{HistoryHook, NetworkExtension, RecordKind, TemplateTaskInfo};
use tessera_search::measure::ProgramError;
use tessera_search::record::ApplyHistoryBest;
use tessera_search::session::TuningTask;
use tessera_search::ScheduleDesc;
use tessera_te::schedules::{computed_stages, schedule_stages};
use tessera_te::Schedule;

/// The template of an operator node, if one fits it: the node as a catalog operator
/// ([`op_spec_of`]: conv2d with one group, NHWC or NCHW, depthwise conv2d NHWC with
/// multiplier 1, 2-D dense and matmul, with attributes the catalog can express), then
/// [`template_of`]; `lanes`: float32 lanes of the target's vectors.
pub fn template_of_node(graph: &Graph, n: NodeIndex, lanes: i64) -> Option<Arc<dyn Template>> {
    template_of(&op_spec_of(graph, n)?, lanes)
}

/// One template task of a network and how many fused groups use it.
#[derive(Clone, Debug)]
pub struct NetworkTemplateTask {
    pub task: TemplateTask,
    pub weight: usize,
}

/// The distinct template tasks of `graph` (in order of first occurrence).
pub fn extract_template_tasks(graph: &Graph, lanes: i64) -> Vec<NetworkTemplateTask> {
    let mut out: Vec<NetworkTemplateTask> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for g in fuse(graph) {
        for &n in &g.nodes {
            let Some(def) = template_of_node(graph, n, lanes) else {
                continue;
            };
            let Ok(task) = TemplateTask::new(def, lanes) else {
                continue;
            };
            match index.get(&task.workload_key) {
                Some(&i) => out[i].weight += 1,
                None => {
                    index.insert(task.workload_key.clone(), out.len());
                    out.push(NetworkTemplateTask { task, weight: 1 });
                }
            }
        }
    }
    out
}

/// Builds each fused group whose anchor has a tuned record with that record's
/// configuration (the rest of the group keeps its default schedule); groups without one
/// keep their default schedule, with one warning per task (collected in `warnings`).
pub struct TunedHook {
    best: Mutex<ApplyHistoryBest>,
    target: String,
    lanes: i64,
    warnings: Mutex<Vec<String>>,
    applied: Mutex<usize>,
}

impl TunedHook {
    pub fn new(best: ApplyHistoryBest, target: &str, lanes: i64) -> Self {
        TunedHook {
            best: Mutex::new(best),
            target: target.to_string(),
            lanes,
            warnings: Mutex::new(Vec::new()),
            applied: Mutex::new(0),
        }
    }
    /// The warnings so far (one per task without a record, or whose record failed to
    /// apply).
    pub fn warnings(&self) -> Vec<String> {
        self.warnings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
    /// How many distinct groups were built with a tuned configuration.
    pub fn applied(&self) -> usize {
        *self.applied.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn warn(&self, w: String) {
        self.warnings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(w);
    }
}

impl TunedHook {
    /// The record's configuration entity for `task`; `Ok(None)`: build with the space's
    /// fallback configuration; `Err(())`: no configuration applies (the group keeps its
    /// default schedule).
    fn entity_of(&self, task: &TemplateTask) -> Result<Option<serde_json::Value>, ()> {
        // A template whose default schedule runs elsewhere (VTA's, on the board's CPU)
        // prefers any configuration record, and without one takes TVM's fallback
        // configuration, which keeps the layer on its device, as TVM does
        let untuned = task.def.untuned();
        let mut best = self.best.lock().unwrap_or_else(|e| e.into_inner());
        let found = match untuned {
            Untuned::FallbackConfig { .. } => best
                .query_config(&task.workload_key, &self.target)
                .or_else(|| best.query(&task.workload_key, &self.target)),
            Untuned::DefaultSchedule => best.query(&task.workload_key, &self.target),
        };
        match found.map(|r| &r.schedule) {
            Some(ScheduleDesc::Config { entity, .. }) => Ok(Some(entity.clone())),
            Some(_) => Err(()),
            None => {
                let (key, template) = (&task.workload_key, &task.template);
                let warning = match untuned {
                    Untuned::FallbackConfig { what } => {
                        best.warn_missing_using(key, &self.target, template, what)
                    }
                    Untuned::DefaultSchedule => best.warn_missing(key, &self.target, template),
                };
                drop(best);
                if let Some(w) = warning {
                    self.warn(w);
                }
                match untuned {
                    Untuned::FallbackConfig { .. } => Ok(None),
                    Untuned::DefaultSchedule => Err(()),
                }
            }
        }
    }
}

/// The schedule of fused group `gc` whose anchor `task`'s template schedules with the
/// configuration of `entity` (`None`: the space's fallback one); the group's other
/// stages keep their default schedule.
fn schedule_group(
    task: &TemplateTask,
    entity: Option<&serde_json::Value>,
    fit: &GroupFit<'_>,
    anchor: &tessera_te::Tensor,
    ctx: &BuildContext,
) -> Result<Schedule, TemplateError> {
    let gc = fit.group;
    let config = match entity {
        Some(entity) => task.space.from_entity(entity),
        None => task.space.fallback(),
    }?;
    let outputs = [gc.output.clone()];
    let mut s = Schedule::create(&outputs)?;
    for t in &gc.inlinable {
        s.compute_inline(t)?;
    }
    let mut skip = gc.inlinable.clone();
    skip.push(anchor.clone());
    let rest = computed_stages(&s, &skip);
    task.apply_to(&mut s, anchor, &config)?;
    task.def.fit_group(&mut s, anchor, fit)?;
    schedule_stages(&mut s, &outputs, &rest, ctx.cpu_params())?;
    Ok(s)
}

impl ScheduleHook for TunedHook {
    fn schedule(&self, graph: &Graph, gc: &GroupCompute, ctx: &BuildContext) -> Option<Schedule> {
        let (node, anchor) = gc.anchor.clone()?;
        let def = template_of_node(graph, node, self.lanes)?;
        let task = TemplateTask::new(def, self.lanes).ok()?;
        let entity = self.entity_of(&task).ok()?;
        let fit = GroupFit {
            graph,
            node,
            group: gc,
        };
        match schedule_group(&task, entity.as_ref(), &fit, &anchor, ctx) {
            Ok(s) => {
                if entity.is_some() {
                    *self.applied.lock().unwrap_or_else(|e| e.into_inner()) += 1;
                }
                Some(s)
            }
            Err(e) => {
                let which = if entity.is_some() {
                    "tuned"
                } else {
                    "fallback"
                };
                self.warn(format!(
                    "the {which} configuration of `{}` (workload {}) did not apply ({e}): using its default schedule",
                    task.template, task.workload_key
                ));
                None
            }
        }
    }
}

/// A session's baseline for template task `task` (a catalog operator's): for a template
/// whose untuned build runs its fallback configuration ([`Untuned::FallbackConfig`]:
/// VTA's, whose default schedule runs on the board's CPU, a time that does not compare),
/// that configuration; other tasks keep their default schedule. A task no template
/// fits is left as it is.
pub fn fallback_baseline(task: &mut TuningTask, lanes: i64) {
    let Some(def) = task.task.op.as_ref().and_then(|o| template_of(o, lanes)) else {
        return;
    };
    if def.untuned() == Untuned::DefaultSchedule {
        return;
    }
    let func = TemplateTask::new(def, lanes).and_then(|t| {
        let config = t.space.fallback()?;
        t.instantiate(&config, "default_schedule")
    });
    task.default = Some(func.map_err(ProgramError::lowering));
}

impl HistoryHook for TunedHook {
    fn record_kind(&self) -> RecordKind {
        RecordKind::Configurations
    }
    fn applied(&self) -> usize {
        TunedHook::applied(self)
    }
    fn warnings(&self) -> Vec<String> {
        TunedHook::warnings(self)
    }
}

/// The templates' part of the pipeline: configurations applied to builds, the template
/// tasks of a network, and which operators a template session tunes for a target.
pub struct TemplatesExtension;

impl NetworkExtension for TemplatesExtension {
    fn name(&self) -> &str {
        "autotvm"
    }

    fn history_hook(
        &self,
        best: &ApplyHistoryBest,
        target: &Target,
        hw: &HardwareParams,
    ) -> Option<Box<dyn HistoryHook>> {
        let hook = TunedHook::new(best.clone(), &target.to_string(), hw.f32_lanes());
        Some(Box::new(hook))
    }

    fn template_tasks(
        &self,
        graph: &Graph,
        target: &Target,
        hw: &HardwareParams,
    ) -> Option<Vec<TemplateTaskInfo>> {
        let tasks = extract_template_tasks(graph, hw.f32_lanes())
            .into_iter()
            .filter(|t| template_fits(target, &t.task.template))
            .map(|t| TemplateTaskInfo {
                workload_key: t.task.workload_key.clone(),
                template: t.task.template.clone(),
                weight: t.weight,
                flop: t.task.flop,
                space: t.task.space.to_string(),
            })
            .collect();
        Some(tasks)
    }

    fn keep_template_task(
        &self,
        task: &mut TuningTask,
        target: &Target,
        hw: &HardwareParams,
    ) -> Option<bool> {
        let lanes = hw.f32_lanes();
        let def = task.task.op.as_ref().and_then(|o| template_of(o, lanes));
        let keep = def.as_ref().is_none_or(|d| template_fits(target, d.name()));
        if keep {
            fallback_baseline(task, lanes);
            // a sequential session gives the task at most its whole space
            task.space = def
                .and_then(|d| TemplateTask::new(d, lanes).ok())
                .map(|t| t.space.len());
        }
        Some(keep)
    }
}
