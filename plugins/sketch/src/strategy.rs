//! The sketch search as a core search strategy: [`SketchStrategy`] creates, for each
//! task, a [`SketchSearch`] — the task's [`SketchPolicy`] behind the core's
//! [`SearchPolicy`]. Candidates are step histories (`ScheduleDesc::Steps`); the
//! evolutionary search ranks states through the core's scorer by lowering them (on all
//! cores) and passing the programs, so the session's shared cost model decides.
//!
//! Parameters (`PolicyOptions::params`): `population`, `sketch_share`,
//! `max_code_size` (see [`SearchParams`]).

use crate::annotate::AnnotateParams;
use crate::search::{SearchParams, SketchPolicy};
use crate::sketch::{DeviceKind, SketchTarget};
use tessera_ir::transform::expanded_size;
use tessera_ir::PrimFunc;
use tessera_search::par::par_map;
use tessera_search::policy::{
    Observation, PolicyError, PolicyInfo, PolicyOptions, Proposal, Scorer, SearchPolicy,
    SearchTask, StrategyFactory,
};
use tessera_search::state::{State, StateError};
use tessera_search::ScheduleDesc;
use tessera_te::{lower, ComputeDag, LowerError};

/// Why a state has no program.
#[derive(Debug, thiserror::Error)]
pub enum LowerStateError {
    /// A step does not replay onto the DAG's schedule.
    #[error("{0}")]
    Replay(#[from] StateError),
    /// The replayed schedule does not lower.
    #[error("{0}")]
    Lower(#[from] LowerError),
}

/// Lowers a complete state into the function that is measured.
pub fn lower_state(state: &State, name: &str) -> Result<PrimFunc, LowerStateError> {
    let r = state.replay()?;
    Ok(lower(&r.schedule, &r.args, name)?)
}

/// Whether `func` is within `max_code_size` IR nodes once its unrolled loops are
/// expanded (0: no limit).
pub(crate) fn code_within(func: &PrimFunc, max_code_size: u64) -> bool {
    max_code_size == 0 || expanded_size(&func.body) <= max_code_size
}

/// The code size limit of `task`'s candidates: `base`, or twice the expanded size of the
/// task's CPU default program where that is larger (0 stays "no limit"). A DAG whose
/// bodies are long — Winograd's transforms, each row's terms written out and unrolled —
/// has a default program of 8,741 nodes at 28×28×128, over the 4,096 that bounds a
/// conv's or a matmul's candidates; with the base alone, every candidate was dropped.
pub(crate) fn code_limit(task: &SearchTask, base: u64) -> u64 {
    let hw = &task.hardware;
    if base == 0 || hw.max_threads_per_block != 0 {
        return base;
    }
    let p = tessera_te::schedules::CpuParams {
        vector_lanes: hw.f32_lanes(),
        num_cores: hw.num_cores.max(1),
        vectorize: true,
        gpu_threads: 0,
    };
    let default_size = tessera_te::schedules::default_schedule(&task.dag.outputs, p)
        .ok()
        .and_then(|s| lower(&s, &State::new(&task.dag).args(), "default").ok())
        .map_or(0, |f| expanded_size(&f.body));
    base.max(default_size.saturating_mul(2))
}

/// The rules and annotation for a task's target: the CPU's where the device has no
/// threads per block; else a GPU's with its limits — TVM's Mali rules for
/// `-device=mali`, its CUDA rules otherwise.
pub fn sketch_target(task: &SearchTask) -> (SketchTarget, AnnotateParams) {
    let hw = &task.hardware;
    let cores = hw.num_cores.max(1) as i64;
    if hw.max_threads_per_block == 0 {
        let annotate = AnnotateParams::cpu_with_lanes(cores, hw.f32_lanes());
        return (SketchTarget::cpu(cores), annotate);
    }
    let mut target = SketchTarget::gpu(
        cores,
        hw.warp_size as i64,
        hw.max_threads_per_block as i64,
        hw.max_shared_memory_per_block as i64,
        hw.max_vthread_extent as i64,
    );
    if is_mali_target(&task.target) {
        // the Mali rules with the target's limits (TVM's Mali values unless overridden)
        target.kind = DeviceKind::Mali;
    }
    let annotate = AnnotateParams::gpu(&target);
    (target, annotate)
}

/// Whether a target string names the Mali variant (`-device=mali`).
fn is_mali_target(target: &str) -> bool {
    target.split_whitespace().any(|w| w == "-device=mali")
}

/// The sketch auto-scheduler (TVM's `SketchPolicy`) as a strategy.
pub struct SketchStrategy;

impl StrategyFactory for SketchStrategy {
    fn name(&self) -> &str {
        "sketch"
    }

    fn create(
        &self,
        task: &SearchTask,
        options: &PolicyOptions,
    ) -> Result<Box<dyn SearchPolicy>, PolicyError> {
        let d = SearchParams::default();
        let params = SearchParams {
            population: options.param("population", d.population)?,
            sketch_share: options.param("sketch_share", d.sketch_share)?,
            max_code_size: code_limit(task, options.param("max_code_size", d.max_code_size)?),
            ..d
        };
        let (target, annotate) = sketch_target(task);
        let policy = SketchPolicy::new(&task.dag, &target, annotate, params, options.seed)
            .map_err(|e| PolicyError::Unsupported {
                strategy: "sketch".into(),
                task: task.name.clone(),
                reason: e.to_string(),
            })?;
        Ok(Box::new(SketchSearch {
            policy,
            info: PolicyInfo {
                workload_key: task.workload_key.clone(),
                record_name: task.name.clone(),
                uses_scorer: true,
            },
        }))
    }
}

/// One task's sketch search behind the core's interface.
pub struct SketchSearch {
    policy: SketchPolicy,
    info: PolicyInfo,
}

impl SketchSearch {
    fn dag(&self) -> &ComputeDag {
        self.policy.dag()
    }

    fn state_of(&self, desc: &ScheduleDesc) -> Result<State, PolicyError> {
        let ScheduleDesc::Steps { steps } = desc else {
            return Err(PolicyError::BadCandidate(
                "not a step history (ScheduleDesc::Steps)".into(),
            ));
        };
        State::from_json(self.dag(), steps).map_err(|e| PolicyError::BadCandidate(e.to_string()))
    }
}

impl SearchPolicy for SketchSearch {
    fn info(&self) -> PolicyInfo {
        self.info.clone()
    }

    fn propose(
        &mut self,
        n: usize,
        scorer: Option<&mut dyn Scorer>,
    ) -> Result<Vec<Proposal>, PolicyError> {
        let max_code_size = self.policy.params().max_code_size;
        let batch = match scorer {
            None => self.policy.next_batch(n, None),
            Some(core) => {
                // a state that does not lower, or lowers too large, is never proposed
                let mut by_state = |states: &[State]| -> Vec<f32> {
                    let funcs = par_map(states, None, |s| {
                        lower_state(s, "candidate")
                            .ok()
                            .filter(|f| code_within(f, max_code_size))
                    });
                    let (at, ok): (Vec<usize>, Vec<PrimFunc>) = funcs
                        .into_iter()
                        .enumerate()
                        .filter_map(|(i, f)| f.map(|f| (i, f)))
                        .unzip();
                    let mut scores = vec![f32::NEG_INFINITY; states.len()];
                    for (i, s) in at.into_iter().zip(core.score(&ok)) {
                        scores[i] = s;
                    }
                    scores
                };
                self.policy.next_batch(n, Some(&mut by_state))
            }
        };
        Ok(batch
            .iter()
            .enumerate()
            .map(|(k, s)| Proposal {
                schedule: ScheduleDesc::Steps {
                    steps: s.steps_json(),
                },
                program: lower_state(s, &format!("cand{k}"))
                    .map_err(|e| PolicyError::Failed(e.to_string())),
            })
            .collect())
    }

    fn observe(&mut self, measured: &[Observation]) -> Vec<Result<(), PolicyError>> {
        let flop = self.dag().flop_count();
        measured
            .iter()
            .map(|o| {
                let s = self.state_of(&o.schedule)?;
                self.policy.record(&s, o.cost.map(|c| flop / c.max(1e-12)));
                Ok(())
            })
            .collect()
    }

    fn lower(&self, candidates: &[ScheduleDesc]) -> Vec<Result<PrimFunc, PolicyError>> {
        candidates
            .iter()
            .map(|d| {
                let s = self.state_of(d)?;
                lower_state(&s, "candidate").map_err(|e| PolicyError::Failed(e.to_string()))
            })
            .collect()
    }

    fn reference(&self) -> Result<PrimFunc, PolicyError> {
        lower_state(&State::new(self.dag()), "reference")
            .map_err(|e| PolicyError::Failed(e.to_string()))
    }
}
