//! `tilewalk`: a third-party search strategy, written only against Tessera's public
//! interfaces (`tessera-search`'s `SearchPolicy` and step histories, `tessera-te`'s
//! lowering), loaded as a plugin. It is small on purpose: for the task's output stage
//! it splits the innermost data-parallel loop by a divisor of its extent and may run the
//! outermost loop in parallel; it proposes the combinations it has not measured in a
//! seeded random order and keeps no model. The core's session drives it like any other
//! strategy: baselines, rounds, the log, resume.

use tessera_ir::PrimFunc;
use tessera_plugin::{export_plugin, Plugin};
use tessera_search::policy::{
    Observation, PolicyError, PolicyInfo, PolicyOptions, Proposal, Scorer, SearchPolicy,
    SearchTask, StrategyFactory,
};
use tessera_search::state::{AnnotationStep, IterAnnotation, SplitStep, State, Step};
use tessera_search::ScheduleDesc;
use tessera_te::{lower, ComputeDag};

/// One point of the walk: the inner length of the split and whether the outermost loop
/// runs in parallel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Point {
    inner: i64,
    parallel: bool,
}

struct TileWalk;

impl StrategyFactory for TileWalk {
    fn name(&self) -> &str {
        "tilewalk"
    }

    fn create(
        &self,
        task: &SearchTask,
        options: &PolicyOptions,
    ) -> Result<Box<dyn SearchPolicy>, PolicyError> {
        let unsupported = |reason: &str| PolicyError::Unsupported {
            strategy: "tilewalk".into(),
            task: task.name.clone(),
            reason: reason.into(),
        };
        let stage = task.dag.ops.len() - 1;
        let out = &task.dag.ops[stage];
        let axes = out.axis().len();
        let extent = out
            .axis()
            .last()
            .and_then(|a| a.extent())
            .ok_or_else(|| unsupported("the output has no data-parallel loop"))?;
        let mut points: Vec<Point> = (1..=extent.min(64))
            .filter(|d| extent % d == 0)
            .flat_map(|inner| [false, true].map(|parallel| Point { inner, parallel }))
            .collect();
        // a seeded shuffle (xorshift): the same seed walks the same way
        let mut x = options.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        for i in (1..points.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            points.swap(i, (x % (i as u64 + 1)) as usize);
        }
        Ok(Box::new(Walk {
            dag: task.dag.clone(),
            stage,
            axes,
            extent,
            todo: points,
            info: PolicyInfo {
                workload_key: task.workload_key.clone(),
                record_name: task.name.clone(),
                uses_scorer: false,
            },
        }))
    }
}

struct Walk {
    dag: ComputeDag,
    stage: usize,
    axes: usize,
    extent: i64,
    /// Points not proposed yet, next last.
    todo: Vec<Point>,
    info: PolicyInfo,
}

impl Walk {
    fn steps(&self, p: Point) -> Vec<Step> {
        let mut steps = vec![Step::Split(SplitStep {
            stage: self.stage,
            iter: self.axes - 1,
            extent: Some(self.extent),
            lengths: vec![Some(p.inner)],
            inner_to_outer: true,
        })];
        if p.parallel {
            steps.push(Step::Annotation(AnnotationStep {
                stage: self.stage,
                iter: 0,
                ann: IterAnnotation::Parallel,
            }));
        }
        steps
    }

    fn program(&self, steps: Vec<Step>) -> Result<PrimFunc, PolicyError> {
        let failed = |e: &dyn std::fmt::Display| PolicyError::Failed(e.to_string());
        let s = State::with_steps(&self.dag, steps).map_err(|e| failed(&e))?;
        let r = s.replay().map_err(|e| failed(&e))?;
        lower(&r.schedule, &r.args, "tilewalk").map_err(|e| failed(&e))
    }

    fn point_of(&self, desc: &ScheduleDesc) -> Result<Point, PolicyError> {
        let bad = || PolicyError::BadCandidate("not a tilewalk step history".into());
        let ScheduleDesc::Steps { steps } = desc else {
            return Err(bad());
        };
        let s = State::from_json(&self.dag, steps).map_err(|_| bad())?;
        let inner = match s.steps().first() {
            Some(Step::Split(SplitStep { lengths, .. })) => lengths.first().copied().flatten(),
            _ => None,
        };
        Ok(Point {
            inner: inner.ok_or_else(bad)?,
            parallel: s.steps().len() > 1,
        })
    }
}

impl SearchPolicy for Walk {
    fn info(&self) -> PolicyInfo {
        self.info.clone()
    }

    fn propose(
        &mut self,
        n: usize,
        _scorer: Option<&mut dyn Scorer>,
    ) -> Result<Vec<Proposal>, PolicyError> {
        let take = n.min(self.todo.len());
        let batch: Vec<Point> = self.todo.split_off(self.todo.len() - take);
        Ok(batch
            .into_iter()
            .rev()
            .map(|p| {
                let steps = self.steps(p);
                let json = State::with_steps(&self.dag, steps.clone())
                    .map(|s| s.steps_json())
                    .unwrap_or_default();
                Proposal {
                    schedule: ScheduleDesc::Steps { steps: json },
                    program: self.program(steps),
                }
            })
            .collect())
    }

    fn observe(&mut self, measured: &[Observation]) -> Vec<Result<(), PolicyError>> {
        measured
            .iter()
            .map(|o| {
                // a point measured (now, or in the log read back) is not proposed again
                let p = self.point_of(&o.schedule)?;
                self.todo.retain(|q| *q != p);
                Ok(())
            })
            .collect()
    }

    fn lower(&self, candidates: &[ScheduleDesc]) -> Vec<Result<PrimFunc, PolicyError>> {
        candidates
            .iter()
            .map(|d| {
                let p = self.point_of(d)?;
                self.program(self.steps(p))
            })
            .collect()
    }

    fn reference(&self) -> Result<PrimFunc, PolicyError> {
        let r = State::new(&self.dag)
            .replay()
            .map_err(|e| PolicyError::Failed(e.to_string()))?;
        lower(&r.schedule, &r.args, "reference").map_err(|e| PolicyError::Failed(e.to_string()))
    }
}

struct TileWalkPlugin;

impl Plugin for TileWalkPlugin {
    fn name(&self) -> String {
        "tilewalk".into()
    }
    fn version(&self) -> String {
        env!("CARGO_PKG_VERSION").into()
    }
    fn strategies(&self) -> Vec<String> {
        vec!["tilewalk".into()]
    }
    fn create_policy(
        &self,
        strategy: &str,
        task: &SearchTask,
        options: &PolicyOptions,
    ) -> Result<Box<dyn SearchPolicy>, PolicyError> {
        match strategy {
            "tilewalk" => TileWalk.create(task, options),
            other => Err(PolicyError::UnknownStrategy {
                name: other.into(),
                known: "tilewalk".into(),
            }),
        }
    }
}

export_plugin!(TileWalkPlugin);
