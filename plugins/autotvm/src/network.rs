//! Templates in networks: the template tasks of a network (one per distinct conv2d /
//! dense / matmul of its fused groups) and the applier of configuration records
//! (apply-history-best, for networks and single operators alike); and the pipeline
//! extension that offers both (`tessera_search::extension::NetworkExtension`).

use crate::templates::{
    template_fits, template_of, GroupFit, Template, TemplateError, TemplateTask, Untuned,
};
use petgraph::stable_graph::NodeIndex;
use std::collections::HashMap;
use std::sync::Arc;
use tessera_backends::{HardwareParams, Target};
use tessera_graph::executor::BuildContext;
use tessera_graph::{fuse, op_spec_of, Graph};
use tessera_search::apply::{ApplyError, History, RecordApplier, Scheduled, Subject};
use tessera_search::extension::{NetworkExtension, RecordKind, TemplateTaskInfo};
use tessera_search::measure::ProgramError;
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

/// Template configurations applied ([`RecordApplier`]): a fused group whose anchor (or
/// an operator that) a template fits is built with its best configuration record (the
/// rest of a group keeps its default schedule); without one, with the space's fallback
/// configuration where the template's untuned build takes it (VTA's), else the default
/// schedule, with one warning per task.
pub struct Configurations {
    /// float32 lanes of the target's vectors.
    pub lanes: i64,
}

/// Where a template task's configuration comes from.
enum Entity {
    Tuned(Box<(serde_json::Value, tessera_search::record::Record)>),
    Fallback,
}

/// The record's configuration for `task`; `None`: no configuration applies (the
/// subject keeps its default schedule).
fn entity_of(task: &TemplateTask, history: &History) -> Option<Entity> {
    // A template whose default schedule runs elsewhere (VTA's, on the board's CPU)
    // prefers any configuration record, and without one takes TVM's fallback
    // configuration, which keeps the layer on its device, as TVM does
    let untuned = task.def.untuned();
    let key = &task.workload_key;
    let found = match untuned {
        Untuned::FallbackConfig { .. } => history.query_config(key).or_else(|| history.query(key)),
        Untuned::DefaultSchedule => history.query(key),
    };
    match found {
        Some(r) => match &r.schedule {
            ScheduleDesc::Config { entity, .. } => {
                Some(Entity::Tuned(Box::new((entity.clone(), r))))
            }
            _ => None,
        },
        None => match untuned {
            Untuned::FallbackConfig { what } => {
                history.warn_missing(key, &task.template, what);
                Some(Entity::Fallback)
            }
            Untuned::DefaultSchedule => {
                history.warn_missing(key, &task.template, "its default schedule");
                None
            }
        },
    }
}

/// The schedule of fused group `gc` whose anchor `task`'s template schedules with the
/// configuration `config`; the group's other stages keep their default schedule.
fn schedule_group(
    task: &TemplateTask,
    config: &crate::space::Config,
    fit: &GroupFit<'_>,
    anchor: &tessera_te::Tensor,
    ctx: &BuildContext,
) -> Result<Schedule, TemplateError> {
    let gc = fit.group;
    let outputs = [gc.output.clone()];
    let mut s = Schedule::create(&outputs)?;
    for t in &gc.inlinable {
        s.compute_inline(t)?;
    }
    let mut skip = gc.inlinable.clone();
    skip.push(anchor.clone());
    let rest = computed_stages(&s, &skip);
    task.apply_to(&mut s, anchor, config)?;
    task.def.fit_group(&mut s, anchor, fit)?;
    schedule_stages(&mut s, &outputs, &rest, ctx.cpu_params())?;
    Ok(s)
}

impl Configurations {
    /// The template task of `subject`: of a group's anchor, or of the operator.
    fn task(&self, subject: &Subject<'_>) -> Option<TemplateTask> {
        let spec = match subject {
            Subject::Group { graph, group, .. } => op_spec_of(graph, group.anchor.as_ref()?.0)?,
            Subject::Operator { spec, .. } => (*spec).clone(),
        };
        TemplateTask::new(template_of(&spec, self.lanes)?, self.lanes).ok()
    }
}

impl RecordApplier for Configurations {
    fn record_kind(&self) -> RecordKind {
        RecordKind::Configurations
    }

    fn workload_keys(&self, subject: &Subject<'_>) -> Vec<String> {
        self.task(subject)
            .map(|t| t.workload_key)
            .into_iter()
            .collect()
    }

    fn apply(
        &self,
        subject: &Subject<'_>,
        history: &History,
    ) -> Result<Option<Scheduled>, ApplyError> {
        let Some(task) = self.task(subject) else {
            return Ok(None);
        };
        let Some(entity) = entity_of(&task, history) else {
            return Ok(None);
        };
        let (entity, record) = match entity {
            Entity::Tuned(t) => (Some(t.0), Some(t.1)),
            Entity::Fallback => (None, None),
        };
        let config = match &entity {
            Some(entity) => task.space.from_entity(entity),
            None => task.space.fallback(),
        };
        let scheduled = config
            .map_err(TemplateError::from)
            .and_then(|config| match subject {
                Subject::Group { graph, group, ctx } => {
                    let (node, anchor) = group
                        .anchor
                        .clone()
                        .ok_or_else(|| TemplateError::Group("the group has no anchor".into()))?;
                    let fit = GroupFit { graph, node, group };
                    let schedule = schedule_group(&task, &config, &fit, &anchor, ctx)?;
                    Ok((schedule, group.args()))
                }
                Subject::Operator { .. } => Ok((task.schedule(&config)?, task.args.clone())),
            });
        match scheduled {
            Ok((schedule, args)) => Ok(Some(Scheduled {
                schedule,
                args,
                record,
            })),
            Err(e) => Err(ApplyError::new(
                format!(
                    "the {} configuration of `{}` (workload {}) did not apply",
                    if record.is_some() {
                        "tuned"
                    } else {
                        "fallback"
                    },
                    task.template,
                    task.workload_key
                ),
                e,
            )),
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

/// The templates' part of the pipeline: configurations applied to builds, the template
/// tasks of a network, and which operators a template session tunes for a target.
pub struct TemplatesExtension;

impl NetworkExtension for TemplatesExtension {
    fn name(&self) -> &str {
        "autotvm"
    }

    fn record_applier(
        &self,
        _target: &Target,
        hw: &HardwareParams,
    ) -> Option<Box<dyn RecordApplier>> {
        Some(Box::new(Configurations {
            lanes: hw.f32_lanes(),
        }))
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
