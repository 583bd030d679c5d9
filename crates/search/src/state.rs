//! The schedule as a step history (the auto-scheduler's `State`): a list of transform
//! steps over a compute DAG that can be replayed onto a te [`Schedule`], printed as a
//! loop nest, and written into the record log.
//!
//! Steps name stages and loops by position, as TVM's auto-scheduler does: `stage` is the
//! index of the stage in the schedule's stage list *at that point of the history*
//! (producers before consumers; `cache_write` and `rfactor` insert their new stage
//! before the stage they rewrite, `cache_read` right after the tensor it reads), and
//! `iter` the position of a loop in that stage's current loop order (data-parallel axes,
//! then reduce axes, as split, fused and reordered so far). A state is therefore only
//! meaningful with its DAG, and replay checks every index.
//!
//! In the log a history is a JSON array of steps, each an array whose first element is
//! TVM's step tag (`"SP"`, `"RE"`, `"FU"`, `"AN"`, `"PR"`, `"CA"`, `"CI"`, `"CR"`,
//! `"CHR"`, `"CHW"`, `"RF"`, `"FSP"`, `"FFSP"`, `"SA"`) followed by its fields in TVM's
//! order, and annotations carry TVM's numbers (0 none, 1 unroll, 2 vectorize,
//! 3 parallel, 4 vthread, 5–10 block/thread x, y, z).

use serde_json::Value;
use std::fmt::Write as _;
use tessera_ir::ThreadAxis;
use tessera_te::lower::leaf_extents;
use tessera_te::{Annotation, Attach, ComputeDag, Schedule, ScheduleError, Tensor};

/// How a loop runs (TVM's `IteratorAnnotation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IterAnnotation {
    None,
    Unroll,
    Vectorize,
    Parallel,
    Thread(ThreadAxis),
}

impl IterAnnotation {
    /// TVM's number of the annotation.
    pub fn code(self) -> i64 {
        match self {
            IterAnnotation::None => 0,
            IterAnnotation::Unroll => 1,
            IterAnnotation::Vectorize => 2,
            IterAnnotation::Parallel => 3,
            IterAnnotation::Thread(t) => match t {
                ThreadAxis::VThread => 4,
                ThreadAxis::BlockIdxX => 5,
                ThreadAxis::ThreadIdxX => 6,
                ThreadAxis::BlockIdxY => 7,
                ThreadAxis::ThreadIdxY => 8,
                ThreadAxis::BlockIdxZ => 9,
                ThreadAxis::ThreadIdxZ => 10,
            },
        }
    }

    pub fn from_code(code: i64) -> Option<IterAnnotation> {
        Some(match code {
            0 => IterAnnotation::None,
            1 => IterAnnotation::Unroll,
            2 => IterAnnotation::Vectorize,
            3 => IterAnnotation::Parallel,
            4 => IterAnnotation::Thread(ThreadAxis::VThread),
            5 => IterAnnotation::Thread(ThreadAxis::BlockIdxX),
            6 => IterAnnotation::Thread(ThreadAxis::ThreadIdxX),
            7 => IterAnnotation::Thread(ThreadAxis::BlockIdxY),
            8 => IterAnnotation::Thread(ThreadAxis::ThreadIdxY),
            9 => IterAnnotation::Thread(ThreadAxis::BlockIdxZ),
            10 => IterAnnotation::Thread(ThreadAxis::ThreadIdxZ),
            _ => return None,
        })
    }

    /// The word a printed loop starts with.
    pub fn keyword(self) -> &'static str {
        match self {
            IterAnnotation::None => "for",
            IterAnnotation::Unroll => "unroll",
            IterAnnotation::Vectorize => "vectorize",
            IterAnnotation::Parallel => "parallel",
            IterAnnotation::Thread(t) => t.name(),
        }
    }

    fn of(a: Annotation) -> IterAnnotation {
        match a {
            Annotation::None => IterAnnotation::None,
            Annotation::Parallel => IterAnnotation::Parallel,
            Annotation::Vectorize => IterAnnotation::Vectorize,
            Annotation::Unroll => IterAnnotation::Unroll,
            Annotation::Bind(t) => IterAnnotation::Thread(t),
        }
    }
}

mod steps;

pub use steps::{
    AnnotationStep, CacheReadStep, CacheWriteStep, ComputeAtStep, ComputeInlineStep,
    ComputeRootStep, FollowFusedSplitStep, FollowSplitStep, FuseStep, PragmaStep, ReorderStep,
    RfactorStep, SplitStep, StepKind, StorageAlignStep,
};
use steps::{Fields, Replay};

/// Defines [`Step`] over the kinds of `steps.rs` and its dispatch to them: one line per
/// kind.
macro_rules! step_kinds {
    ($($variant:ident($kind:ident)),* $(,)?) => {
        /// One transform step (TVM's auto-scheduler steps, same fields): one of the step
        /// kinds, each a type with its tag, record form and replay (`state/steps.rs`).
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        pub enum Step {
            $($variant($kind),)*
        }

        impl Step {
            /// TVM's tag of the step.
            pub fn tag(&self) -> &'static str {
                match self {
                    $(Step::$variant(_) => $kind::TAG,)*
                }
            }

            /// The stage the step works on.
            pub fn stage(&self) -> usize {
                match self {
                    $(Step::$variant(s) => s.stage(),)*
                }
            }

            /// The record form: `[tag, fields…]` in TVM's order.
            pub fn to_json(&self) -> Value {
                let (tag, fields) = match self {
                    $(Step::$variant(s) => ($kind::TAG, s.fields()),)*
                };
                let mut v = vec![Value::from(tag)];
                v.extend(fields);
                Value::Array(v)
            }

            /// The kind whose tag is `tag`, read from `f`; `None` for an unknown tag.
            fn read(tag: &str, f: &Fields<'_>) -> Option<Result<Step, StateError>> {
                $(if tag == $kind::TAG {
                    return Some($kind::read(f).map(Step::$variant));
                })*
                None
            }

            fn apply(&self, r: &mut Replay<'_>) -> Result<(), StateError> {
                match self {
                    $(Step::$variant(s) => s.apply(r),)*
                }
            }
        }

        $(impl From<$kind> for Step {
            fn from(s: $kind) -> Step {
                Step::$variant(s)
            }
        })*
    };
}

step_kinds! {
    Annotation(AnnotationStep),
    Fuse(FuseStep),
    Pragma(PragmaStep),
    Reorder(ReorderStep),
    Split(SplitStep),
    FollowSplit(FollowSplitStep),
    FollowFusedSplit(FollowFusedSplitStep),
    StorageAlign(StorageAlignStep),
    ComputeAt(ComputeAtStep),
    ComputeInline(ComputeInlineStep),
    ComputeRoot(ComputeRootStep),
    CacheRead(CacheReadStep),
    CacheWrite(CacheWriteStep),
    Rfactor(RfactorStep),
}

/// Errors of building, replaying or reading a step history.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum StateError {
    #[error("step {step}: {reason}")]
    Bad { step: usize, reason: String },
    #[error("step {step}: {source}")]
    Schedule {
        step: usize,
        #[source]
        source: ScheduleError,
    },
    #[error("the history's loop nest: {0}")]
    Bounds(String),
    #[error("a step history record: {0}")]
    Json(String),
    #[error("lowering the replayed schedule: {0}")]
    Lower(String),
}

fn bad(step: usize, reason: impl Into<String>) -> StateError {
    StateError::Bad {
        step,
        reason: reason.into(),
    }
}

impl Step {
    /// Reads the record form (errors name what is wrong, never panic).
    pub fn from_json(v: &Value) -> Result<Step, StateError> {
        let a = v
            .as_array()
            .ok_or_else(|| StateError::Json(format!("not an array in step {v}")))?;
        let f = Fields::new(a, v);
        let tag = a
            .first()
            .and_then(Value::as_str)
            .ok_or_else(|| f.err("no tag"))?;
        Step::read(tag, &f).unwrap_or_else(|| Err(f.err(&format!("unknown tag `{tag}`"))))
    }
}

/// A schedule as a step history over a compute DAG.
#[derive(Clone, Debug)]
pub struct State {
    dag: ComputeDag,
    steps: Vec<Step>,
}

impl PartialEq for State {
    /// Equal histories over the same DAG (by workload key).
    fn eq(&self, other: &State) -> bool {
        self.steps == other.steps && self.dag.workload_key() == other.dag.workload_key()
    }
}

/// A replayed history: the te schedule and the tensor of every stage (by stage index).
pub struct Replayed {
    pub schedule: Schedule,
    /// The function's arguments: the DAG's inputs, then its outputs.
    pub args: Vec<Tensor>,
}

impl State {
    /// The initial state of `dag`: every stage at root, loops in axis order.
    pub fn new(dag: &ComputeDag) -> State {
        State {
            dag: dag.clone(),
            steps: Vec::new(),
        }
    }

    /// A state of `dag` with `steps`, checked by replaying them.
    pub fn with_steps(dag: &ComputeDag, steps: Vec<Step>) -> Result<State, StateError> {
        let s = State {
            dag: dag.clone(),
            steps,
        };
        s.replay()?;
        Ok(s)
    }

    pub fn dag(&self) -> &ComputeDag {
        &self.dag
    }

    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Appends `step` if the history stays valid (replays); otherwise leaves the state
    /// unchanged and says why.
    pub fn push(&mut self, step: Step) -> Result<(), StateError> {
        self.steps.push(step);
        if let Err(e) = self.replay() {
            self.steps.pop();
            return Err(e);
        }
        Ok(())
    }

    /// Whether every split length is filled in (a sketch has unfilled ones, which
    /// replay as 1; only a complete state is a program worth measuring).
    pub fn is_complete(&self) -> bool {
        self.steps.iter().all(|s| match s {
            Step::Split(s) => s.lengths.iter().all(Option::is_some),
            _ => true,
        })
    }

    /// The state with every unfilled split length set to `len`.
    fn filled_with(&self, len: i64) -> State {
        let steps = self
            .steps
            .iter()
            .map(|s| match s {
                Step::Split(s) => Step::Split(SplitStep {
                    lengths: s.lengths.iter().map(|l| Some(l.unwrap_or(len))).collect(),
                    ..s.clone()
                }),
                other => other.clone(),
            })
            .collect();
        State {
            dag: self.dag.clone(),
            steps,
        }
    }

    /// Replaces the history by `steps` if it replays; otherwise leaves the state as it
    /// was and says why.
    pub fn set_steps(&mut self, steps: Vec<Step>) -> Result<(), StateError> {
        let old = std::mem::replace(&mut self.steps, steps);
        if let Err(e) = self.replay() {
            self.steps = old;
            return Err(e);
        }
        Ok(())
    }

    /// The function's arguments: the DAG's inputs, then its outputs.
    pub fn args(&self) -> Vec<Tensor> {
        let mut args = self.dag.inputs();
        args.extend(self.dag.outputs.iter().cloned());
        args
    }

    /// Replays the history onto a fresh schedule of the DAG.
    pub fn replay(&self) -> Result<Replayed, StateError> {
        let mut sch = Schedule::create(&self.dag.outputs)
            .map_err(|e| StateError::Schedule { step: 0, source: e })?;
        for (i, step) in self.steps.iter().enumerate() {
            let mut r = Replay {
                sch: &mut sch,
                steps: &self.steps,
                i,
            };
            step.apply(&mut r)?;
        }
        Ok(Replayed {
            schedule: sch,
            args: self.args(),
        })
    }

    /// The record form of the history.
    pub fn steps_json(&self) -> Value {
        Value::Array(self.steps.iter().map(Step::to_json).collect())
    }

    /// The state of `dag` whose record form is `v` (checked by replaying).
    pub fn from_json(dag: &ComputeDag, v: &Value) -> Result<State, StateError> {
        let steps = v
            .as_array()
            .ok_or_else(|| StateError::Json("a step history is a list of steps".into()))?
            .iter()
            .map(Step::from_json)
            .collect::<Result<Vec<_>, _>>()?;
        State::with_steps(dag, steps)
    }

    /// The loop nest the history describes, as TVM prints a state: the placeholders,
    /// then each stage computed at the root with its loops (annotation, name, range),
    /// the stages computed inside a loop printed inside it, and `name = ...` for each
    /// stage's body. Equal states print equally.
    ///
    /// A sketch's loops whose extent depends on an unfilled split length print as
    /// `(0,?)`.
    pub fn print(&self) -> Result<String, StateError> {
        let r = self.replay()?;
        let bounds = |r: &Replayed| {
            leaf_extents(&r.schedule, &r.args).map_err(|e| StateError::Bounds(e.to_string()))
        };
        let ext = bounds(&r)?;
        let ext: Vec<Vec<Option<i64>>> = if self.is_complete() {
            ext.iter()
                .map(|v| v.iter().map(|&e| Some(e)).collect())
                .collect()
        } else {
            // replay again with every unfilled length 2: what changes is unknown
            let probe = self.filled_with(2).replay()?;
            let other = bounds(&probe)?;
            ext.iter()
                .zip(&other)
                .map(|(a, b)| {
                    a.iter()
                        .zip(b)
                        .map(|(x, y)| (x == y).then_some(*x))
                        .collect()
                })
                .collect()
        };
        let stages = r.schedule.stages();
        let mut out = String::new();
        let placeholders: Vec<&str> = stages
            .iter()
            .filter(|s| s.is_placeholder())
            .map(|s| s.name())
            .collect();
        if !placeholders.is_empty() {
            let _ = writeln!(out, "Placeholder: {}", placeholders.join(", "));
        }
        for (i, s) in stages.iter().enumerate() {
            if !s.is_placeholder() && s.attach == Attach::Root {
                print_stage(&mut out, stages, &ext, i, 0);
            }
        }
        Ok(out)
    }
}

fn print_stage(
    out: &mut String,
    stages: &[tessera_te::Stage],
    ext: &[Vec<Option<i64>>],
    i: usize,
    indent: usize,
) {
    let s = &stages[i];
    let mut depth = indent;
    for (k, iv) in s.leaf_iter_vars.iter().enumerate() {
        let ann = IterAnnotation::of(s.annotation(iv));
        let e = match ext[i].get(k) {
            Some(Some(e)) => e.to_string(),
            Some(None) => "?".to_string(),
            None => "1".to_string(),
        };
        let _ = writeln!(
            out,
            "{:w$}{} {} (0,{e})",
            "",
            ann.keyword(),
            iv.name(),
            w = depth * 2
        );
        depth += 1;
        for (key, value) in s
            .pragmas
            .iter()
            .filter(|(p, _, _)| p == iv)
            .map(|(_, k, v)| (k, v))
        {
            let _ = writeln!(out, "{:w$}{} {key}: {value}", "", s.name(), w = depth * 2);
        }
        for (j, t) in stages.iter().enumerate() {
            if let Attach::At { target, axis } = &t.attach {
                if target == s.op.buffer() && axis == iv {
                    print_stage(out, stages, ext, j, depth);
                }
            }
        }
    }
    let _ = writeln!(out, "{:w$}{} = ...", "", s.name(), w = depth * 2);
}
