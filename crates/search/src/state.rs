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

use serde_json::{json, Value};
use std::fmt::Write as _;
use tessera_ir::{Expr, StorageScope, ThreadAxis};
use tessera_te::lower::leaf_extents;
use tessera_te::{Annotation, Attach, ComputeDag, IterVar, Schedule, ScheduleError, Tensor};

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

/// One transform step (TVM's auto-scheduler steps, same fields).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// `AN`: annotate loop `iter` of `stage`.
    Annotation {
        stage: usize,
        iter: usize,
        ann: IterAnnotation,
    },
    /// `FU`: fuse the consecutive loops `iters` (outermost first) into one.
    Fuse { stage: usize, iters: Vec<usize> },
    /// `PR`: a pragma on loop `iter`, TVM's `"key$value"` form (e.g.
    /// `auto_unroll_max_step$64`).
    Pragma {
        stage: usize,
        iter: usize,
        pragma: String,
    },
    /// `RE`: the new loop order, as the old positions of every loop.
    Reorder { stage: usize, order: Vec<usize> },
    /// `SP`: split loop `iter` (of extent `extent`) into `lengths.len() + 1` loops. With
    /// `inner_to_outer` the lengths are the inner loops' extents (outer to inner) and
    /// the outermost takes the rest; otherwise they are the outer loops' extents and the
    /// innermost takes the rest. A `None` length is a split not yet filled in (a sketch).
    Split {
        stage: usize,
        iter: usize,
        extent: Option<i64>,
        lengths: Vec<Option<i64>>,
        inner_to_outer: bool,
    },
    /// `FSP`: split loop `iter` like the split of step `src_step`, into `n_split` + 1
    /// loops: the inner lengths are the source's first `n_split` − 1 lengths and the
    /// product of the rest.
    FollowSplit {
        stage: usize,
        iter: usize,
        src_step: usize,
        n_split: usize,
    },
    /// `FFSP`: split loop `iter` by the product of the lengths at `level` of the splits
    /// `src_steps` (as the inner factor when `factor_or_nparts`, else as the outer
    /// extent).
    FollowFusedSplit {
        stage: usize,
        iter: usize,
        src_steps: Vec<usize>,
        level: usize,
        factor_or_nparts: bool,
    },
    /// `SA`: pad the stride of the dimension of loop `iter` to `offset` mod `factor`.
    StorageAlign {
        stage: usize,
        iter: usize,
        factor: i64,
        offset: i64,
    },
    /// `CA`: compute `stage` inside loop `target_iter` of `target_stage`.
    ComputeAt {
        stage: usize,
        target_stage: usize,
        target_iter: usize,
    },
    /// `CI`: inline `stage` into its consumers.
    ComputeInline { stage: usize },
    /// `CR`: compute `stage` at the root.
    ComputeRoot { stage: usize },
    /// `CHR`: a cache of `stage`'s tensor in `scope`, read by `readers` instead.
    CacheRead {
        stage: usize,
        scope: String,
        readers: Vec<usize>,
    },
    /// `CHW`: compute `stage` into a cache in `scope`, then copy it out.
    CacheWrite { stage: usize, scope: String },
    /// `RF`: factor the reduction of `stage` over loop `iter`, the factored axis at
    /// position `factor_iter` of the new stage's axes.
    Rfactor {
        stage: usize,
        iter: usize,
        factor_iter: usize,
    },
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
    /// TVM's tag of the step.
    pub fn tag(&self) -> &'static str {
        match self {
            Step::Annotation { .. } => "AN",
            Step::Fuse { .. } => "FU",
            Step::Pragma { .. } => "PR",
            Step::Reorder { .. } => "RE",
            Step::Split { .. } => "SP",
            Step::FollowSplit { .. } => "FSP",
            Step::FollowFusedSplit { .. } => "FFSP",
            Step::StorageAlign { .. } => "SA",
            Step::ComputeAt { .. } => "CA",
            Step::ComputeInline { .. } => "CI",
            Step::ComputeRoot { .. } => "CR",
            Step::CacheRead { .. } => "CHR",
            Step::CacheWrite { .. } => "CHW",
            Step::Rfactor { .. } => "RF",
        }
    }

    /// The stage the step works on.
    pub fn stage(&self) -> usize {
        match self {
            Step::Annotation { stage, .. }
            | Step::Fuse { stage, .. }
            | Step::Pragma { stage, .. }
            | Step::Reorder { stage, .. }
            | Step::Split { stage, .. }
            | Step::FollowSplit { stage, .. }
            | Step::FollowFusedSplit { stage, .. }
            | Step::StorageAlign { stage, .. }
            | Step::ComputeAt { stage, .. }
            | Step::ComputeInline { stage }
            | Step::ComputeRoot { stage }
            | Step::CacheRead { stage, .. }
            | Step::CacheWrite { stage, .. }
            | Step::Rfactor { stage, .. } => *stage,
        }
    }

    /// The record form: `[tag, fields…]` in TVM's order.
    pub fn to_json(&self) -> Value {
        let len = |l: &Option<i64>| l.map_or(Value::Null, Value::from);
        match self {
            Step::Annotation { stage, iter, ann } => json!(["AN", stage, iter, ann.code()]),
            Step::Fuse { stage, iters } => json!(["FU", stage, iters]),
            Step::Pragma {
                stage,
                iter,
                pragma,
            } => json!(["PR", stage, iter, pragma]),
            Step::Reorder { stage, order } => json!(["RE", stage, order]),
            Step::Split {
                stage,
                iter,
                extent,
                lengths,
                inner_to_outer,
            } => json!([
                "SP",
                stage,
                iter,
                len(extent),
                lengths.iter().map(len).collect::<Vec<_>>(),
                u8::from(*inner_to_outer)
            ]),
            Step::FollowSplit {
                stage,
                iter,
                src_step,
                n_split,
            } => json!(["FSP", stage, iter, src_step, n_split]),
            Step::FollowFusedSplit {
                stage,
                iter,
                src_steps,
                level,
                factor_or_nparts,
            } => json!([
                "FFSP",
                stage,
                iter,
                src_steps,
                level,
                u8::from(*factor_or_nparts)
            ]),
            Step::StorageAlign {
                stage,
                iter,
                factor,
                offset,
            } => json!(["SA", stage, iter, factor, offset]),
            Step::ComputeAt {
                stage,
                target_stage,
                target_iter,
            } => json!(["CA", stage, target_stage, target_iter]),
            Step::ComputeInline { stage } => json!(["CI", stage]),
            Step::ComputeRoot { stage } => json!(["CR", stage]),
            Step::CacheRead {
                stage,
                scope,
                readers,
            } => json!(["CHR", stage, scope, readers]),
            Step::CacheWrite { stage, scope } => json!(["CHW", stage, scope]),
            Step::Rfactor {
                stage,
                iter,
                factor_iter,
            } => json!(["RF", stage, iter, factor_iter]),
        }
    }

    /// Reads the record form (errors name what is wrong, never panic).
    pub fn from_json(v: &Value) -> Result<Step, StateError> {
        let err = |what: &str| StateError::Json(format!("{what} in step {v}"));
        let a = v.as_array().ok_or_else(|| err("not an array"))?;
        let tag = a
            .first()
            .and_then(Value::as_str)
            .ok_or_else(|| err("no tag"))?;
        let field = |i: usize| a.get(i).ok_or_else(|| err(&format!("no field {i}")));
        let uint = |i: usize| -> Result<usize, StateError> {
            field(i)?
                .as_u64()
                .and_then(|x| usize::try_from(x).ok())
                .ok_or_else(|| err(&format!("field {i} is not an index")))
        };
        let int = |i: usize| -> Result<i64, StateError> {
            field(i)?
                .as_i64()
                .ok_or_else(|| err(&format!("field {i} is not an integer")))
        };
        let opt_int = |x: &Value| -> Result<Option<i64>, StateError> {
            if x.is_null() {
                Ok(None)
            } else {
                x.as_i64()
                    .map(Some)
                    .ok_or_else(|| err("a length is not an integer"))
            }
        };
        let uints = |i: usize| -> Result<Vec<usize>, StateError> {
            field(i)?
                .as_array()
                .ok_or_else(|| err(&format!("field {i} is not a list")))?
                .iter()
                .map(|x| {
                    x.as_u64()
                        .and_then(|x| usize::try_from(x).ok())
                        .ok_or_else(|| err(&format!("field {i} holds a non-index")))
                })
                .collect()
        };
        let text = |i: usize| -> Result<String, StateError> {
            Ok(field(i)?
                .as_str()
                .ok_or_else(|| err(&format!("field {i} is not a string")))?
                .to_string())
        };
        let flag = |i: usize| -> Result<bool, StateError> {
            match field(i)? {
                Value::Bool(b) => Ok(*b),
                x => match x.as_u64() {
                    Some(0) => Ok(false),
                    Some(1) => Ok(true),
                    _ => Err(err(&format!("field {i} is not a flag"))),
                },
            }
        };
        let want = |n: usize| {
            if a.len() == n {
                Ok(())
            } else {
                Err(err(&format!("{} fields instead of {}", a.len() - 1, n - 1)))
            }
        };
        let step = match tag {
            "AN" => {
                want(4)?;
                Step::Annotation {
                    stage: uint(1)?,
                    iter: uint(2)?,
                    ann: IterAnnotation::from_code(int(3)?)
                        .ok_or_else(|| err("unknown annotation"))?,
                }
            }
            "FU" => {
                want(3)?;
                Step::Fuse {
                    stage: uint(1)?,
                    iters: uints(2)?,
                }
            }
            "PR" => {
                want(4)?;
                Step::Pragma {
                    stage: uint(1)?,
                    iter: uint(2)?,
                    pragma: text(3)?,
                }
            }
            "RE" => {
                want(3)?;
                Step::Reorder {
                    stage: uint(1)?,
                    order: uints(2)?,
                }
            }
            "SP" => {
                want(6)?;
                Step::Split {
                    stage: uint(1)?,
                    iter: uint(2)?,
                    extent: opt_int(field(3)?)?,
                    lengths: field(4)?
                        .as_array()
                        .ok_or_else(|| err("field 4 is not a list"))?
                        .iter()
                        .map(opt_int)
                        .collect::<Result<_, _>>()?,
                    inner_to_outer: flag(5)?,
                }
            }
            "FSP" => {
                want(5)?;
                Step::FollowSplit {
                    stage: uint(1)?,
                    iter: uint(2)?,
                    src_step: uint(3)?,
                    n_split: uint(4)?,
                }
            }
            "FFSP" => {
                want(6)?;
                Step::FollowFusedSplit {
                    stage: uint(1)?,
                    iter: uint(2)?,
                    src_steps: uints(3)?,
                    level: uint(4)?,
                    factor_or_nparts: flag(5)?,
                }
            }
            "SA" => {
                want(5)?;
                Step::StorageAlign {
                    stage: uint(1)?,
                    iter: uint(2)?,
                    factor: int(3)?,
                    offset: int(4)?,
                }
            }
            "CA" => {
                want(4)?;
                Step::ComputeAt {
                    stage: uint(1)?,
                    target_stage: uint(2)?,
                    target_iter: uint(3)?,
                }
            }
            "CI" => {
                want(2)?;
                Step::ComputeInline { stage: uint(1)? }
            }
            "CR" => {
                want(2)?;
                Step::ComputeRoot { stage: uint(1)? }
            }
            "CHR" => {
                want(4)?;
                Step::CacheRead {
                    stage: uint(1)?,
                    scope: text(2)?,
                    readers: uints(3)?,
                }
            }
            "CHW" => {
                want(3)?;
                Step::CacheWrite {
                    stage: uint(1)?,
                    scope: text(2)?,
                }
            }
            "RF" => {
                want(4)?;
                Step::Rfactor {
                    stage: uint(1)?,
                    iter: uint(2)?,
                    factor_iter: uint(3)?,
                }
            }
            other => return Err(err(&format!("unknown tag `{other}`"))),
        };
        Ok(step)
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
            Step::Split { lengths, .. } => lengths.iter().all(Option::is_some),
            _ => true,
        })
    }

    /// The state with every unfilled split length set to `len`.
    fn filled_with(&self, len: i64) -> State {
        let steps = self
            .steps
            .iter()
            .map(|s| match s {
                Step::Split {
                    stage,
                    iter,
                    extent,
                    lengths,
                    inner_to_outer,
                } => Step::Split {
                    stage: *stage,
                    iter: *iter,
                    extent: *extent,
                    lengths: lengths.iter().map(|l| Some(l.unwrap_or(len))).collect(),
                    inner_to_outer: *inner_to_outer,
                },
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
            apply(&mut sch, &self.steps, i, step)?;
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

/// The stage `stage` of `sch` (for step `step`).
fn stage_tensor(sch: &Schedule, step: usize, stage: usize) -> Result<Tensor, StateError> {
    sch.stages()
        .get(stage)
        .map(|s| s.op.clone())
        .ok_or_else(|| {
            bad(
                step,
                format!(
                    "stage {stage} does not exist (the schedule has {})",
                    sch.stages().len()
                ),
            )
        })
}

/// Loop `iter` of stage `stage`.
fn leaf(sch: &Schedule, step: usize, stage: usize, iter: usize) -> Result<IterVar, StateError> {
    let s = sch
        .stages()
        .get(stage)
        .ok_or_else(|| bad(step, format!("stage {stage} does not exist")))?;
    s.leaf_iter_vars.get(iter).cloned().ok_or_else(|| {
        bad(
            step,
            format!(
                "stage {stage} (`{}`) has {} loops, not {}",
                s.name(),
                s.leaf_iter_vars.len(),
                iter + 1
            ),
        )
    })
}

fn scope_of(step: usize, scope: &str) -> Result<StorageScope, StateError> {
    StorageScope::parse(scope).ok_or_else(|| bad(step, format!("unknown storage scope `{scope}`")))
}

/// The lengths of split step `src` (all filled in), checked to be a split.
fn split_lengths(steps: &[Step], step: usize, src: usize) -> Result<Vec<i64>, StateError> {
    if src >= step {
        return Err(bad(
            step,
            format!("it follows step {src}, which is not before it"),
        ));
    }
    match &steps[src] {
        Step::Split { lengths, .. } => Ok(lengths.iter().map(|l| l.unwrap_or(1)).collect()),
        other => Err(bad(
            step,
            format!(
                "it follows step {src}, a `{}` step, not a split",
                other.tag()
            ),
        )),
    }
}

/// Splits loop `iv` of `t`: with `inner_to_outer`, `lengths` are the inner extents
/// (outer to inner); otherwise the outer extents. Returns the new loops, outermost first.
fn split_by(
    sch: &mut Schedule,
    t: &Tensor,
    iv: &IterVar,
    lengths: &[i64],
    inner_to_outer: bool,
    step: usize,
) -> Result<Vec<IterVar>, StateError> {
    let se = |e| StateError::Schedule { step, source: e };
    let mut outs = Vec::new();
    let mut x = iv.clone();
    if inner_to_outer {
        for &l in lengths.iter().rev() {
            let (o, i) = sch.split(t, &x, l).map_err(se)?;
            outs.push(i);
            x = o;
        }
        outs.push(x);
        outs.reverse();
    } else {
        for &l in lengths {
            let (o, i) = sch.split_nparts(t, &x, l).map_err(se)?;
            outs.push(o);
            x = i;
        }
        outs.push(x);
    }
    Ok(outs)
}

/// Applies step `i` of `steps` to `sch`.
fn apply(sch: &mut Schedule, steps: &[Step], i: usize, step: &Step) -> Result<(), StateError> {
    let se = |e| StateError::Schedule { step: i, source: e };
    match step {
        Step::Annotation { stage, iter, ann } => {
            let t = stage_tensor(sch, i, *stage)?;
            let iv = leaf(sch, i, *stage, *iter)?;
            match ann {
                IterAnnotation::None => {}
                IterAnnotation::Unroll => sch.unroll(&t, &iv).map_err(se)?,
                IterAnnotation::Vectorize => sch.vectorize(&t, &iv).map_err(se)?,
                IterAnnotation::Parallel => sch.parallel(&t, &iv).map_err(se)?,
                IterAnnotation::Thread(th) => sch.bind(&t, &iv, *th).map_err(se)?,
            }
        }
        Step::Fuse { stage, iters } => {
            let t = stage_tensor(sch, i, *stage)?;
            if iters.is_empty() {
                return Err(bad(i, "a fuse of no loops"));
            }
            if iters.windows(2).any(|w| w[1] != w[0] + 1) {
                return Err(bad(i, format!("loops {iters:?} are not consecutive")));
            }
            // the loops by their positions before any of them is fused
            let ivs = iters
                .iter()
                .map(|&k| leaf(sch, i, *stage, k))
                .collect::<Result<Vec<_>, _>>()?;
            let mut fused = ivs[0].clone();
            for next in &ivs[1..] {
                fused = sch.fuse(&t, &fused, next).map_err(se)?;
            }
        }
        Step::Pragma {
            stage,
            iter,
            pragma,
        } => {
            let t = stage_tensor(sch, i, *stage)?;
            let iv = leaf(sch, i, *stage, *iter)?;
            let (key, value) = match pragma.split_once('$') {
                Some((k, v)) => (
                    k,
                    Expr::int(v.parse::<i64>().map_err(|_| {
                        bad(i, format!("pragma `{pragma}`: the value is not an integer"))
                    })?),
                ),
                None => (pragma.as_str(), Expr::int(1)),
            };
            sch.pragma(&t, &iv, key, value).map_err(se)?;
        }
        Step::Reorder { stage, order } => {
            let t = stage_tensor(sch, i, *stage)?;
            let n = sch.stages()[*stage].leaf_iter_vars.len();
            let mut seen = order.clone();
            seen.sort_unstable();
            if seen != (0..n).collect::<Vec<_>>() {
                return Err(bad(
                    i,
                    format!("order {order:?} is not a permutation of the stage's {n} loops"),
                ));
            }
            let ivs = order
                .iter()
                .map(|&k| leaf(sch, i, *stage, k))
                .collect::<Result<Vec<_>, _>>()?;
            sch.reorder(&t, &ivs).map_err(se)?;
        }
        Step::Split {
            stage,
            iter,
            lengths,
            inner_to_outer,
            ..
        } => {
            let t = stage_tensor(sch, i, *stage)?;
            let iv = leaf(sch, i, *stage, *iter)?;
            // a sketch's unfilled length replays as 1: the loop structure is what the
            // sketch rules and printing need; measuring asks `is_complete` first
            let ls: Vec<i64> = lengths.iter().map(|l| l.unwrap_or(1)).collect();
            split_by(sch, &t, &iv, &ls, *inner_to_outer, i)?;
        }
        Step::FollowSplit {
            stage,
            iter,
            src_step,
            n_split,
        } => {
            let src = split_lengths(steps, i, *src_step)?;
            if *n_split == 0 || *n_split > src.len() + 1 {
                return Err(bad(
                    i,
                    format!(
                        "n_split {n_split} for a source split of {} lengths",
                        src.len()
                    ),
                ));
            }
            // TVM: the source's first `n_split - 1` lengths, then the product of the
            // rest (inner to outer, like every split the sketch rules make).
            let mut ls = src[..n_split - 1].to_vec();
            ls.push(src[n_split - 1..].iter().product());
            let t = stage_tensor(sch, i, *stage)?;
            let iv = leaf(sch, i, *stage, *iter)?;
            split_by(sch, &t, &iv, &ls, true, i)?;
        }
        Step::FollowFusedSplit {
            stage,
            iter,
            src_steps,
            level,
            factor_or_nparts,
        } => {
            let mut factor = 1i64;
            for &s in src_steps {
                let ls = split_lengths(steps, i, s)?;
                factor *= ls
                    .get(*level)
                    .copied()
                    .ok_or_else(|| bad(i, format!("split step {s} has no level {level}")))?;
            }
            let t = stage_tensor(sch, i, *stage)?;
            let iv = leaf(sch, i, *stage, *iter)?;
            split_by(sch, &t, &iv, &[factor], *factor_or_nparts, i)?;
        }
        Step::StorageAlign {
            stage,
            iter,
            factor,
            offset,
        } => {
            let t = stage_tensor(sch, i, *stage)?;
            let iv = leaf(sch, i, *stage, *iter)?;
            sch.storage_align(&t, &iv, *factor, *offset).map_err(se)?;
        }
        Step::ComputeAt {
            stage,
            target_stage,
            target_iter,
        } => {
            let t = stage_tensor(sch, i, *stage)?;
            let target = stage_tensor(sch, i, *target_stage)?;
            let iv = leaf(sch, i, *target_stage, *target_iter)?;
            sch.compute_at(&t, &target, &iv).map_err(se)?;
        }
        Step::ComputeInline { stage } => {
            let t = stage_tensor(sch, i, *stage)?;
            sch.compute_inline(&t).map_err(se)?;
        }
        Step::ComputeRoot { stage } => {
            let t = stage_tensor(sch, i, *stage)?;
            sch.compute_root(&t).map_err(se)?;
        }
        Step::CacheRead {
            stage,
            scope,
            readers,
        } => {
            let t = stage_tensor(sch, i, *stage)?;
            let rs = readers
                .iter()
                .map(|&r| stage_tensor(sch, i, r))
                .collect::<Result<Vec<_>, _>>()?;
            sch.cache_read(&t, scope_of(i, scope)?, &rs).map_err(se)?;
        }
        Step::CacheWrite { stage, scope } => {
            let t = stage_tensor(sch, i, *stage)?;
            sch.cache_write(&t, scope_of(i, scope)?).map_err(se)?;
        }
        Step::Rfactor {
            stage,
            iter,
            factor_iter,
        } => {
            let t = stage_tensor(sch, i, *stage)?;
            let iv = leaf(sch, i, *stage, *iter)?;
            sch.rfactor(&t, &iv, *factor_iter).map_err(se)?;
        }
    }
    Ok(())
}
