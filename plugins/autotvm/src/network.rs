//! Templates in networks: the template tasks of a network (one per distinct conv2d /
//! dense / matmul of its fused groups) and the schedule hook that builds a network with
//! the best configurations of a record log (apply-history-best); and the pipeline
//! extension that offers both (`tessera_driver::NetworkExtension`).

use crate::templates::{TemplateKind, TemplateTask};
use petgraph::stable_graph::NodeIndex;
use std::collections::HashMap;
use std::sync::Mutex;
use tessera_backends::{HardwareParams, Target};
use tessera_driver::{HistoryHook, NetworkExtension, RecordKind, TemplateTaskInfo};
use tessera_graph::executor::{BuildContext, ScheduleHook};
use tessera_graph::{fuse, op_spec_of, Graph, GroupCompute};
use tessera_search::measure::ProgramError;
use tessera_search::record::ApplyHistoryBest;
use tessera_search::session::TuningTask;
use tessera_search::ScheduleDesc;
use tessera_te::schedules::{computed_stages, schedule_stages};
use tessera_te::Schedule;

/// The template of an operator node, if one fits it: the node as a catalog operator
/// ([`op_spec_of`]: conv2d with one group, NHWC or NCHW, depthwise conv2d NHWC with
/// multiplier 1, 2-D dense and matmul, with attributes the catalog can express), then
/// [`TemplateKind::from_op`]; `lanes`: float32 lanes of the target's vectors.
pub fn template_kind_of(graph: &Graph, n: NodeIndex, lanes: i64) -> Option<TemplateKind> {
    TemplateKind::from_op(&op_spec_of(graph, n)?, lanes)
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
            let Some(kind) = template_kind_of(graph, n, lanes) else {
                continue;
            };
            let Ok(task) = TemplateTask::new(kind, lanes) else {
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

/// What a VTA task without a record builds with.
const VTA_FALLBACK: &str =
    "VTA's fallback configuration (every tile 1, one thread), which can be far slower";

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

impl ScheduleHook for TunedHook {
    fn schedule(&self, graph: &Graph, gc: &GroupCompute, ctx: &BuildContext) -> Option<Schedule> {
        let (node, anchor) = gc.anchor.clone()?;
        let kind = template_kind_of(graph, node, self.lanes)?;
        let task = TemplateTask::new(kind, self.lanes).ok()?;
        // VTA's configurations run on VTA, its default schedule on the board's CPU
        // (this machine's here): their times do not compare, so the best configuration
        // applies, and without one TVM's fallback configuration (every tile 1, one
        // thread) keeps the layer on VTA, as TVM does
        let on_vta = matches!(task.kind, TemplateKind::Conv2dPackedVta { .. });
        let entity = {
            let mut best = self.best.lock().unwrap_or_else(|e| e.into_inner());
            let found = if on_vta {
                best.query_config(&task.workload_key, &self.target)
                    .or_else(|| best.query(&task.workload_key, &self.target))
            } else {
                best.query(&task.workload_key, &self.target)
            };
            match found.map(|r| &r.schedule) {
                Some(ScheduleDesc::Config { entity, .. }) => Some(entity.clone()),
                Some(_) => return None,
                None => {
                    let (key, template) = (&task.workload_key, &task.template);
                    let warning = if on_vta {
                        best.warn_missing_using(key, &self.target, template, VTA_FALLBACK)
                    } else {
                        best.warn_missing(key, &self.target, template)
                    };
                    if let Some(w) = warning {
                        self.warn(w);
                    }
                    if !on_vta {
                        return None;
                    }
                    None
                }
            }
        };
        let built = (|| -> Result<Schedule, String> {
            let config = match &entity {
                Some(entity) => task.space.from_entity(entity),
                None => task.space.fallback(),
            }
            .map_err(|e| e.to_string())?;
            let outputs = [gc.output.clone()];
            let mut s = Schedule::create(&outputs).map_err(|e| e.to_string())?;
            for t in &gc.inlinable {
                s.compute_inline(t).map_err(|e| e.to_string())?;
            }
            let mut skip = gc.inlinable.clone();
            skip.push(anchor.clone());
            let rest = computed_stages(&s, &skip);
            task.apply_to(&mut s, &anchor, &config)
                .map_err(|e| e.to_string())?;
            if let TemplateKind::Conv2dPackedVta { .. } = task.kind {
                let e = vta_epilogue(graph, node, gc).ok_or(
                    "the group does more than VTA's epilogue (bias, shift, clip, cast): it runs on the board's CPU",
                )?;
                crate::templates::vta_pragmas(&mut s, &anchor, &e).map_err(|e| e.to_string())?;
            }
            schedule_stages(&mut s, &outputs, &rest, ctx.cpu_params())
                .map_err(|e| e.to_string())?;
            Ok(s)
        })();
        match built {
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

/// The epilogue of a packed conv2d's fused group as VTA's pragmas — an optional bias
/// (`add` of an int32 constant per channel), a right shift (rounding or not), a clip
/// and the cast to int8, and nothing else in the group (`None` otherwise: a fused
/// residual add, say, which VTA's kernel does not compute).
pub fn vta_epilogue(
    graph: &Graph,
    conv: NodeIndex,
    gc: &GroupCompute,
) -> Option<Vec<(&'static str, i64)>> {
    use tessera_graph::{Binary, Op};
    let next = |n: NodeIndex| -> Option<NodeIndex> {
        match graph.users(n)[..] {
            [u] => Some(u),
            _ => None,
        }
    };
    let mut cur = next(conv)?;
    let mut bias = 0;
    if let Op::Binary(Binary::Add) = graph.node(cur).op {
        let other = graph.args(cur).into_iter().find(|&a| a != conv)?;
        let b = graph.constant_value(other)?;
        if b.dtype() != tessera_ir::DataType::int32() || b.shape().len() != 6 {
            return None;
        }
        bias = 1;
        cur = next(cur)?;
    }
    let Op::RightShift { bits, round } = graph.node(cur).op else {
        return None;
    };
    cur = next(cur)?;
    let Op::Clip { min, max } = graph.node(cur).op else {
        return None;
    };
    cur = next(cur).unwrap_or(cur);
    if !matches!(graph.node(cur).op, Op::Cast { dtype } if dtype == tessera_ir::DataType::int(8)) {
        return None;
    }
    // the group is exactly these: data, weight and the bias are its only inputs
    if gc.params.len() != 2 + bias as usize {
        return None;
    }
    let int8 = |v: f64| ((-128.0..=127.0).contains(&v) && v.fract() == 0.0).then_some(v as i64);
    Some(vec![
        ("bias", bias),
        ("shift", bits),
        ("round", round as i64),
        ("clip_lo", int8(min)?),
        ("clip_hi", int8(max)?),
    ])
}

/// A session's baseline for template task `task` (a catalog operator's): for VTA's
/// template, whose default schedule runs on the board's CPU (a time that does not
/// compare with VTA's), the template's fallback configuration — what an untuned build
/// runs on VTA; other tasks keep their default schedule. A task no template fits is
/// left as it is.
pub fn vta_fallback_baseline(task: &mut TuningTask, lanes: i64) {
    let Some(kind) = task
        .task
        .op
        .as_ref()
        .and_then(|o| TemplateKind::from_op(o, lanes))
    else {
        return;
    };
    if !matches!(kind, TemplateKind::Conv2dPackedVta { .. }) {
        return;
    }
    let func = TemplateTask::new(kind, lanes).and_then(|t| {
        let config = t.space.fallback()?;
        t.instantiate(&config, "default_schedule")
    });
    let func = func.map_err(ProgramError::lowering);
    task.default = Some(func);
}

/// Whether template `template` (`conv2d_nchw.x86`, `conv2d_packed.vta`) tunes a kernel of
/// `target`: VTA's templates for VTA (as TVM's tutorial keeps only the packed conv2d
/// tasks), the others for every other target.
pub fn template_fits(target: &Target, template: &str) -> bool {
    let vta_template = template.ends_with(".vta");
    vta_template == (target.kind == tessera_backends::TargetKind::VTA)
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
        let kind = task
            .task
            .op
            .as_ref()
            .and_then(|o| TemplateKind::from_op(o, lanes));
        let keep = kind.is_none_or(|k| template_fits(target, k.template()));
        if keep {
            vta_fallback_baseline(task, lanes);
        }
        Some(keep)
    }
}
