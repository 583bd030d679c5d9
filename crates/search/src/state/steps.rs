//! The step kinds of a state, each a type (as TVM gives each step its class): its tag,
//! the stage it works on, its record form (`fields` written after the tag, `read` back
//! with errors that name what is wrong) and its replay onto a te schedule (`apply`).
//! [`Step`](super::Step) holds one of them; adding a kind is a type here and a variant
//! there.

use super::{bad, IterAnnotation, StateError};
use serde_json::{json, Value};
use tessera_ir::{Expr, StorageScope};
use tessera_te::{IterVar, Schedule, Tensor};

/// What every step kind is.
pub trait StepKind: Sized {
    /// TVM's tag of the kind (`"SP"`, `"RE"`, …).
    const TAG: &'static str;
    /// The stage the step works on.
    fn stage(&self) -> usize;
    /// The record form's fields after the tag, in TVM's order.
    fn fields(&self) -> Vec<Value>;
    /// Reads the fields of a record whose tag is [`StepKind::TAG`].
    fn read(f: &Fields<'_>) -> Result<Self, StateError>;
    /// Replays the step onto the schedule.
    fn apply(&self, r: &mut Replay<'_>) -> Result<(), StateError>;
}

/// A step's record (`[tag, fields…]`) being read: each accessor names what is wrong.
pub struct Fields<'a> {
    a: &'a [Value],
    whole: &'a Value,
}

impl<'a> Fields<'a> {
    pub(super) fn new(a: &'a [Value], whole: &'a Value) -> Fields<'a> {
        Fields { a, whole }
    }

    pub(super) fn err(&self, what: &str) -> StateError {
        StateError::Json(format!("{what} in step {}", self.whole))
    }

    /// Exactly `n` elements, the tag included.
    fn want(&self, n: usize) -> Result<(), StateError> {
        if self.a.len() == n {
            return Ok(());
        }
        let have = self.a.len() - 1;
        Err(self.err(&format!("{have} fields instead of {}", n - 1)))
    }

    fn field(&self, i: usize) -> Result<&'a Value, StateError> {
        self.a
            .get(i)
            .ok_or_else(|| self.err(&format!("no field {i}")))
    }

    fn uint(&self, i: usize) -> Result<usize, StateError> {
        self.field(i)?
            .as_u64()
            .and_then(|x| usize::try_from(x).ok())
            .ok_or_else(|| self.err(&format!("field {i} is not an index")))
    }

    fn int(&self, i: usize) -> Result<i64, StateError> {
        self.field(i)?
            .as_i64()
            .ok_or_else(|| self.err(&format!("field {i} is not an integer")))
    }

    /// A length: an integer, or `null` for one not filled in.
    fn opt_int(&self, x: &Value) -> Result<Option<i64>, StateError> {
        if x.is_null() {
            return Ok(None);
        }
        x.as_i64()
            .map(Some)
            .ok_or_else(|| self.err("a length is not an integer"))
    }

    fn uints(&self, i: usize) -> Result<Vec<usize>, StateError> {
        self.field(i)?
            .as_array()
            .ok_or_else(|| self.err(&format!("field {i} is not a list")))?
            .iter()
            .map(|x| {
                x.as_u64()
                    .and_then(|x| usize::try_from(x).ok())
                    .ok_or_else(|| self.err(&format!("field {i} holds a non-index")))
            })
            .collect()
    }

    fn text(&self, i: usize) -> Result<String, StateError> {
        Ok(self
            .field(i)?
            .as_str()
            .ok_or_else(|| self.err(&format!("field {i} is not a string")))?
            .to_string())
    }

    fn flag(&self, i: usize) -> Result<bool, StateError> {
        match self.field(i)? {
            Value::Bool(b) => Ok(*b),
            x => match x.as_u64() {
                Some(0) => Ok(false),
                Some(1) => Ok(true),
                _ => Err(self.err(&format!("field {i} is not a flag"))),
            },
        }
    }
}

/// A history being replayed: the schedule, the whole history (a follow-split reads the
/// split it follows) and the index of the step being applied.
pub struct Replay<'a> {
    pub(super) sch: &'a mut Schedule,
    pub(super) steps: &'a [super::Step],
    pub(super) i: usize,
}

impl Replay<'_> {
    fn se(&self) -> impl Fn(tessera_te::ScheduleError) -> StateError {
        let step = self.i;
        move |e| StateError::Schedule { step, source: e }
    }

    /// The stage `stage`'s tensor.
    fn tensor(&self, stage: usize) -> Result<Tensor, StateError> {
        let stages = self.sch.stages();
        stages.get(stage).map(|s| s.op.clone()).ok_or_else(|| {
            let n = stages.len();
            bad(
                self.i,
                format!("stage {stage} does not exist (the schedule has {n})"),
            )
        })
    }

    /// Loop `iter` of stage `stage`.
    fn leaf(&self, stage: usize, iter: usize) -> Result<IterVar, StateError> {
        let s = self
            .sch
            .stages()
            .get(stage)
            .ok_or_else(|| bad(self.i, format!("stage {stage} does not exist")))?;
        s.leaf_iter_vars.get(iter).cloned().ok_or_else(|| {
            let n = s.leaf_iter_vars.len();
            let name = s.name();
            bad(
                self.i,
                format!("stage {stage} (`{name}`) has {n} loops, not {}", iter + 1),
            )
        })
    }

    fn leaves(&self, stage: usize, iters: &[usize]) -> Result<Vec<IterVar>, StateError> {
        iters.iter().map(|&k| self.leaf(stage, k)).collect()
    }

    fn scope(&self, scope: &str) -> Result<StorageScope, StateError> {
        StorageScope::parse(scope)
            .ok_or_else(|| bad(self.i, format!("unknown storage scope `{scope}`")))
    }

    /// The lengths of split step `src` (unfilled ones as 1), checked to be an earlier
    /// split.
    fn split_lengths(&self, src: usize) -> Result<Vec<i64>, StateError> {
        if src >= self.i {
            let why = format!("it follows step {src}, which is not before it");
            return Err(bad(self.i, why));
        }
        match &self.steps[src] {
            super::Step::Split(s) => Ok(s.lengths.iter().map(|l| l.unwrap_or(1)).collect()),
            other => {
                let tag = other.tag();
                let why = format!("it follows step {src}, a `{tag}` step, not a split");
                Err(bad(self.i, why))
            }
        }
    }

    /// Splits loop `iter` of `stage`: with `inner_to_outer`, `lengths` are the inner
    /// extents (outer to inner); otherwise the outer extents.
    fn split(
        &mut self,
        stage: usize,
        iter: usize,
        lengths: &[i64],
        inner_to_outer: bool,
    ) -> Result<(), StateError> {
        let t = self.tensor(stage)?;
        let mut x = self.leaf(stage, iter)?;
        let se = self.se();
        if inner_to_outer {
            for &l in lengths.iter().rev() {
                x = self.sch.split(&t, &x, l).map_err(&se)?.0;
            }
        } else {
            for &l in lengths {
                x = self.sch.split_nparts(&t, &x, l).map_err(&se)?.1;
            }
        }
        Ok(())
    }
}

/// A length in the record form: the number, or `null` unfilled.
fn len_json(l: &Option<i64>) -> Value {
    l.map_or(Value::Null, Value::from)
}

/// `AN`: annotate loop `iter` of `stage`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AnnotationStep {
    pub stage: usize,
    pub iter: usize,
    pub ann: IterAnnotation,
}

impl StepKind for AnnotationStep {
    const TAG: &'static str = "AN";
    fn stage(&self) -> usize {
        self.stage
    }
    fn fields(&self) -> Vec<Value> {
        vec![json!(self.stage), json!(self.iter), json!(self.ann.code())]
    }
    fn read(f: &Fields<'_>) -> Result<Self, StateError> {
        f.want(4)?;
        Ok(AnnotationStep {
            stage: f.uint(1)?,
            iter: f.uint(2)?,
            ann: IterAnnotation::from_code(f.int(3)?).ok_or_else(|| f.err("unknown annotation"))?,
        })
    }
    fn apply(&self, r: &mut Replay<'_>) -> Result<(), StateError> {
        let (t, iv, se) = (
            r.tensor(self.stage)?,
            r.leaf(self.stage, self.iter)?,
            r.se(),
        );
        match self.ann {
            IterAnnotation::None => Ok(()),
            IterAnnotation::Unroll => r.sch.unroll(&t, &iv).map_err(se),
            IterAnnotation::Vectorize => r.sch.vectorize(&t, &iv).map_err(se),
            IterAnnotation::Parallel => r.sch.parallel(&t, &iv).map_err(se),
            IterAnnotation::Thread(th) => r.sch.bind(&t, &iv, th).map_err(se),
        }
    }
}

/// `FU`: fuse the consecutive loops `iters` (outermost first) into one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FuseStep {
    pub stage: usize,
    pub iters: Vec<usize>,
}

impl StepKind for FuseStep {
    const TAG: &'static str = "FU";
    fn stage(&self) -> usize {
        self.stage
    }
    fn fields(&self) -> Vec<Value> {
        vec![json!(self.stage), json!(self.iters)]
    }
    fn read(f: &Fields<'_>) -> Result<Self, StateError> {
        f.want(3)?;
        Ok(FuseStep {
            stage: f.uint(1)?,
            iters: f.uints(2)?,
        })
    }
    fn apply(&self, r: &mut Replay<'_>) -> Result<(), StateError> {
        let t = r.tensor(self.stage)?;
        let iters = &self.iters;
        if iters.is_empty() {
            return Err(bad(r.i, "a fuse of no loops"));
        }
        if iters.windows(2).any(|w| w[1] != w[0] + 1) {
            return Err(bad(r.i, format!("loops {iters:?} are not consecutive")));
        }
        // the loops by their positions before any of them is fused
        let ivs = r.leaves(self.stage, iters)?;
        let se = r.se();
        let mut fused = ivs[0].clone();
        for next in &ivs[1..] {
            fused = r.sch.fuse(&t, &fused, next).map_err(&se)?;
        }
        Ok(())
    }
}

/// `PR`: a pragma on loop `iter`, TVM's `"key$value"` form (e.g.
/// `auto_unroll_max_step$64`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PragmaStep {
    pub stage: usize,
    pub iter: usize,
    pub pragma: String,
}

impl StepKind for PragmaStep {
    const TAG: &'static str = "PR";
    fn stage(&self) -> usize {
        self.stage
    }
    fn fields(&self) -> Vec<Value> {
        vec![json!(self.stage), json!(self.iter), json!(self.pragma)]
    }
    fn read(f: &Fields<'_>) -> Result<Self, StateError> {
        f.want(4)?;
        Ok(PragmaStep {
            stage: f.uint(1)?,
            iter: f.uint(2)?,
            pragma: f.text(3)?,
        })
    }
    fn apply(&self, r: &mut Replay<'_>) -> Result<(), StateError> {
        let (t, iv) = (r.tensor(self.stage)?, r.leaf(self.stage, self.iter)?);
        let pragma = &self.pragma;
        let (key, value) = match pragma.split_once('$') {
            Some((k, v)) => {
                let v = v.parse::<i64>().map_err(|_| {
                    bad(
                        r.i,
                        format!("pragma `{pragma}`: the value is not an integer"),
                    )
                })?;
                (k, Expr::int(v))
            }
            None => (pragma.as_str(), Expr::int(1)),
        };
        let se = r.se();
        r.sch.pragma(&t, &iv, key, value).map_err(se)
    }
}

/// `RE`: the new loop order, as the old positions of every loop.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReorderStep {
    pub stage: usize,
    pub order: Vec<usize>,
}

impl StepKind for ReorderStep {
    const TAG: &'static str = "RE";
    fn stage(&self) -> usize {
        self.stage
    }
    fn fields(&self) -> Vec<Value> {
        vec![json!(self.stage), json!(self.order)]
    }
    fn read(f: &Fields<'_>) -> Result<Self, StateError> {
        f.want(3)?;
        Ok(ReorderStep {
            stage: f.uint(1)?,
            order: f.uints(2)?,
        })
    }
    fn apply(&self, r: &mut Replay<'_>) -> Result<(), StateError> {
        let t = r.tensor(self.stage)?;
        let order = &self.order;
        let n = r.sch.stages()[self.stage].leaf_iter_vars.len();
        let mut seen = order.clone();
        seen.sort_unstable();
        if seen != (0..n).collect::<Vec<_>>() {
            let why = format!("order {order:?} is not a permutation of the stage's {n} loops");
            return Err(bad(r.i, why));
        }
        let ivs = r.leaves(self.stage, order)?;
        let se = r.se();
        r.sch.reorder(&t, &ivs).map_err(se)
    }
}

/// `SP`: split loop `iter` (of extent `extent`) into `lengths.len() + 1` loops. With
/// `inner_to_outer` the lengths are the inner loops' extents (outer to inner) and the
/// outermost takes the rest; otherwise they are the outer loops' extents and the
/// innermost takes the rest. A `None` length is a split not yet filled in (a sketch).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SplitStep {
    pub stage: usize,
    pub iter: usize,
    pub extent: Option<i64>,
    pub lengths: Vec<Option<i64>>,
    pub inner_to_outer: bool,
}

impl StepKind for SplitStep {
    const TAG: &'static str = "SP";
    fn stage(&self) -> usize {
        self.stage
    }
    fn fields(&self) -> Vec<Value> {
        vec![
            json!(self.stage),
            json!(self.iter),
            len_json(&self.extent),
            Value::Array(self.lengths.iter().map(len_json).collect()),
            json!(u8::from(self.inner_to_outer)),
        ]
    }
    fn read(f: &Fields<'_>) -> Result<Self, StateError> {
        f.want(6)?;
        Ok(SplitStep {
            stage: f.uint(1)?,
            iter: f.uint(2)?,
            extent: f.opt_int(f.field(3)?)?,
            lengths: f
                .field(4)?
                .as_array()
                .ok_or_else(|| f.err("field 4 is not a list"))?
                .iter()
                .map(|x| f.opt_int(x))
                .collect::<Result<_, _>>()?,
            inner_to_outer: f.flag(5)?,
        })
    }
    fn apply(&self, r: &mut Replay<'_>) -> Result<(), StateError> {
        // a sketch's unfilled length replays as 1: the loop structure is what the
        // sketch rules and printing need; measuring asks `is_complete` first
        let ls: Vec<i64> = self.lengths.iter().map(|l| l.unwrap_or(1)).collect();
        r.split(self.stage, self.iter, &ls, self.inner_to_outer)
    }
}

/// `FSP`: split loop `iter` like the split of step `src_step`, into `n_split` + 1
/// loops: the inner lengths are the source's first `n_split` − 1 lengths and the
/// product of the rest.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FollowSplitStep {
    pub stage: usize,
    pub iter: usize,
    pub src_step: usize,
    pub n_split: usize,
}

impl StepKind for FollowSplitStep {
    const TAG: &'static str = "FSP";
    fn stage(&self) -> usize {
        self.stage
    }
    fn fields(&self) -> Vec<Value> {
        let s = self;
        vec![
            json!(s.stage),
            json!(s.iter),
            json!(s.src_step),
            json!(s.n_split),
        ]
    }
    fn read(f: &Fields<'_>) -> Result<Self, StateError> {
        f.want(5)?;
        Ok(FollowSplitStep {
            stage: f.uint(1)?,
            iter: f.uint(2)?,
            src_step: f.uint(3)?,
            n_split: f.uint(4)?,
        })
    }
    fn apply(&self, r: &mut Replay<'_>) -> Result<(), StateError> {
        let src = r.split_lengths(self.src_step)?;
        let n_split = self.n_split;
        if n_split == 0 || n_split > src.len() + 1 {
            let why = format!(
                "n_split {n_split} for a source split of {} lengths",
                src.len()
            );
            return Err(bad(r.i, why));
        }
        // TVM: the source's first `n_split - 1` lengths, then the product of the rest
        // (inner to outer, like every split the sketch rules make)
        let mut ls = src[..n_split - 1].to_vec();
        ls.push(src[n_split - 1..].iter().product());
        r.split(self.stage, self.iter, &ls, true)
    }
}

/// `FFSP`: split loop `iter` by the product of the lengths at `level` of the splits
/// `src_steps` (as the inner factor when `factor_or_nparts`, else as the outer extent).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FollowFusedSplitStep {
    pub stage: usize,
    pub iter: usize,
    pub src_steps: Vec<usize>,
    pub level: usize,
    pub factor_or_nparts: bool,
}

impl StepKind for FollowFusedSplitStep {
    const TAG: &'static str = "FFSP";
    fn stage(&self) -> usize {
        self.stage
    }
    fn fields(&self) -> Vec<Value> {
        vec![
            json!(self.stage),
            json!(self.iter),
            json!(self.src_steps),
            json!(self.level),
            json!(u8::from(self.factor_or_nparts)),
        ]
    }
    fn read(f: &Fields<'_>) -> Result<Self, StateError> {
        f.want(6)?;
        Ok(FollowFusedSplitStep {
            stage: f.uint(1)?,
            iter: f.uint(2)?,
            src_steps: f.uints(3)?,
            level: f.uint(4)?,
            factor_or_nparts: f.flag(5)?,
        })
    }
    fn apply(&self, r: &mut Replay<'_>) -> Result<(), StateError> {
        let level = self.level;
        let mut factor = 1i64;
        for &s in &self.src_steps {
            let ls = r.split_lengths(s)?;
            factor *= ls
                .get(level)
                .copied()
                .ok_or_else(|| bad(r.i, format!("split step {s} has no level {level}")))?;
        }
        r.split(self.stage, self.iter, &[factor], self.factor_or_nparts)
    }
}

/// `SA`: pad the stride of the dimension of loop `iter` to `offset` mod `factor`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StorageAlignStep {
    pub stage: usize,
    pub iter: usize,
    pub factor: i64,
    pub offset: i64,
}

impl StepKind for StorageAlignStep {
    const TAG: &'static str = "SA";
    fn stage(&self) -> usize {
        self.stage
    }
    fn fields(&self) -> Vec<Value> {
        let s = self;
        vec![
            json!(s.stage),
            json!(s.iter),
            json!(s.factor),
            json!(s.offset),
        ]
    }
    fn read(f: &Fields<'_>) -> Result<Self, StateError> {
        f.want(5)?;
        Ok(StorageAlignStep {
            stage: f.uint(1)?,
            iter: f.uint(2)?,
            factor: f.int(3)?,
            offset: f.int(4)?,
        })
    }
    fn apply(&self, r: &mut Replay<'_>) -> Result<(), StateError> {
        let (t, iv, se) = (
            r.tensor(self.stage)?,
            r.leaf(self.stage, self.iter)?,
            r.se(),
        );
        r.sch
            .storage_align(&t, &iv, self.factor, self.offset)
            .map_err(se)
    }
}

/// `CA`: compute `stage` inside loop `target_iter` of `target_stage`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ComputeAtStep {
    pub stage: usize,
    pub target_stage: usize,
    pub target_iter: usize,
}

impl StepKind for ComputeAtStep {
    const TAG: &'static str = "CA";
    fn stage(&self) -> usize {
        self.stage
    }
    fn fields(&self) -> Vec<Value> {
        let s = self;
        vec![json!(s.stage), json!(s.target_stage), json!(s.target_iter)]
    }
    fn read(f: &Fields<'_>) -> Result<Self, StateError> {
        f.want(4)?;
        Ok(ComputeAtStep {
            stage: f.uint(1)?,
            target_stage: f.uint(2)?,
            target_iter: f.uint(3)?,
        })
    }
    fn apply(&self, r: &mut Replay<'_>) -> Result<(), StateError> {
        let t = r.tensor(self.stage)?;
        let target = r.tensor(self.target_stage)?;
        let iv = r.leaf(self.target_stage, self.target_iter)?;
        let se = r.se();
        r.sch.compute_at(&t, &target, &iv).map_err(se)
    }
}

/// `CI`: inline `stage` into its consumers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ComputeInlineStep {
    pub stage: usize,
}

impl StepKind for ComputeInlineStep {
    const TAG: &'static str = "CI";
    fn stage(&self) -> usize {
        self.stage
    }
    fn fields(&self) -> Vec<Value> {
        vec![json!(self.stage)]
    }
    fn read(f: &Fields<'_>) -> Result<Self, StateError> {
        f.want(2)?;
        Ok(ComputeInlineStep { stage: f.uint(1)? })
    }
    fn apply(&self, r: &mut Replay<'_>) -> Result<(), StateError> {
        let (t, se) = (r.tensor(self.stage)?, r.se());
        r.sch.compute_inline(&t).map_err(se)
    }
}

/// `CR`: compute `stage` at the root.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ComputeRootStep {
    pub stage: usize,
}

impl StepKind for ComputeRootStep {
    const TAG: &'static str = "CR";
    fn stage(&self) -> usize {
        self.stage
    }
    fn fields(&self) -> Vec<Value> {
        vec![json!(self.stage)]
    }
    fn read(f: &Fields<'_>) -> Result<Self, StateError> {
        f.want(2)?;
        Ok(ComputeRootStep { stage: f.uint(1)? })
    }
    fn apply(&self, r: &mut Replay<'_>) -> Result<(), StateError> {
        let (t, se) = (r.tensor(self.stage)?, r.se());
        r.sch.compute_root(&t).map_err(se)
    }
}

/// `CHR`: a cache of `stage`'s tensor in `scope`, read by `readers` instead.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheReadStep {
    pub stage: usize,
    pub scope: String,
    pub readers: Vec<usize>,
}

impl StepKind for CacheReadStep {
    const TAG: &'static str = "CHR";
    fn stage(&self) -> usize {
        self.stage
    }
    fn fields(&self) -> Vec<Value> {
        vec![json!(self.stage), json!(self.scope), json!(self.readers)]
    }
    fn read(f: &Fields<'_>) -> Result<Self, StateError> {
        f.want(4)?;
        Ok(CacheReadStep {
            stage: f.uint(1)?,
            scope: f.text(2)?,
            readers: f.uints(3)?,
        })
    }
    fn apply(&self, r: &mut Replay<'_>) -> Result<(), StateError> {
        let t = r.tensor(self.stage)?;
        let readers = self
            .readers
            .iter()
            .map(|&k| r.tensor(k))
            .collect::<Result<Vec<_>, _>>()?;
        let (scope, se) = (r.scope(&self.scope)?, r.se());
        r.sch.cache_read(&t, scope, &readers).map(drop).map_err(se)
    }
}

/// `CHW`: compute `stage` into a cache in `scope`, then copy it out.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheWriteStep {
    pub stage: usize,
    pub scope: String,
}

impl StepKind for CacheWriteStep {
    const TAG: &'static str = "CHW";
    fn stage(&self) -> usize {
        self.stage
    }
    fn fields(&self) -> Vec<Value> {
        vec![json!(self.stage), json!(self.scope)]
    }
    fn read(f: &Fields<'_>) -> Result<Self, StateError> {
        f.want(3)?;
        Ok(CacheWriteStep {
            stage: f.uint(1)?,
            scope: f.text(2)?,
        })
    }
    fn apply(&self, r: &mut Replay<'_>) -> Result<(), StateError> {
        let t = r.tensor(self.stage)?;
        let (scope, se) = (r.scope(&self.scope)?, r.se());
        r.sch.cache_write(&t, scope).map(drop).map_err(se)
    }
}

/// `RF`: factor the reduction of `stage` over loop `iter`, the factored axis at
/// position `factor_iter` of the new stage's axes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RfactorStep {
    pub stage: usize,
    pub iter: usize,
    pub factor_iter: usize,
}

impl StepKind for RfactorStep {
    const TAG: &'static str = "RF";
    fn stage(&self) -> usize {
        self.stage
    }
    fn fields(&self) -> Vec<Value> {
        let s = self;
        vec![json!(s.stage), json!(s.iter), json!(s.factor_iter)]
    }
    fn read(f: &Fields<'_>) -> Result<Self, StateError> {
        f.want(4)?;
        Ok(RfactorStep {
            stage: f.uint(1)?,
            iter: f.uint(2)?,
            factor_iter: f.uint(3)?,
        })
    }
    fn apply(&self, r: &mut Replay<'_>) -> Result<(), StateError> {
        let (t, iv, se) = (
            r.tensor(self.stage)?,
            r.leaf(self.stage, self.iter)?,
            r.se(),
        );
        r.sch
            .rfactor(&t, &iv, self.factor_iter)
            .map(drop)
            .map_err(se)
    }
}
