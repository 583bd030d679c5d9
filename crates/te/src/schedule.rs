//! Schedules: one stage per operation, and the primitives that rewrite its loop nest
//! (split, fuse, reorder, tile, annotations, bind, pragma), move it (compute_at /
//! compute_inline / compute_root) or restructure the DAG (cache_read, cache_write,
//! rfactor). Every invalid request returns a [`ScheduleError`] naming stage and axis.

use crate::dag::ComputeDag;
use crate::error::ScheduleError;
use crate::tensor::{make_compute, ComputeBody, IterVar, Reduce, Tensor};
use std::collections::{HashMap, HashSet};
use tessera_ir::visit::{post_order_visit, substitute, ExprMutator};
use tessera_ir::{Buffer, Expr, ExprNode, StorageScope, ThreadAxis, Var};

/// How a loop of a leaf axis runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Annotation {
    None,
    Parallel,
    Vectorize,
    Unroll,
    Bind(ThreadAxis),
}

/// How leaf axes derive from the stage's root axes.
#[derive(Clone, Debug, PartialEq)]
pub enum Relation {
    /// `parent = outer * inner_extent + inner`; the split is given by the inner extent
    /// (`factor`) or by the outer extent (`nparts`).
    Split {
        parent: IterVar,
        outer: IterVar,
        inner: IterVar,
        factor: Option<i64>,
        nparts: Option<i64>,
    },
    /// `outer = fused / inner_extent`, `inner = fused % inner_extent`.
    Fuse {
        outer: IterVar,
        inner: IterVar,
        fused: IterVar,
    },
}

/// Where a stage is computed.
#[derive(Clone, Debug, PartialEq)]
pub enum Attach {
    /// In its own loop nest at the top of the function.
    Root,
    /// Substituted into its consumers.
    Inline,
    /// Inside the loop of axis `axis` of the stage producing `target`.
    At { target: Buffer, axis: IterVar },
}

/// The schedule of one operation.
#[derive(Clone, Debug)]
pub struct Stage {
    /// The operation, as rewritten by the schedule so far (same buffer as the original).
    pub op: Tensor,
    /// The root axes followed by every axis that relations created.
    pub all_iter_vars: Vec<IterVar>,
    /// The loop order, outermost first.
    pub leaf_iter_vars: Vec<IterVar>,
    pub relations: Vec<Relation>,
    pub annotations: HashMap<IterVar, Annotation>,
    pub pragmas: Vec<(IterVar, String, Expr)>,
    pub attach: Attach,
    pub scope: StorageScope,
    /// `(dimension, factor, offset)`: pad the stride of `dimension` to `offset` mod `factor`.
    pub storage_align: Vec<(usize, i64, i64)>,
    pub is_output: bool,
}

impl Stage {
    fn new(op: Tensor, is_output: bool) -> Stage {
        let roots: Vec<IterVar> = op.axis().iter().chain(op.reduce_axis()).cloned().collect();
        Stage {
            op,
            all_iter_vars: roots.clone(),
            leaf_iter_vars: roots,
            relations: Vec::new(),
            annotations: HashMap::new(),
            pragmas: Vec::new(),
            attach: Attach::Root,
            scope: StorageScope::Global,
            storage_align: Vec::new(),
            is_output,
        }
    }
    pub fn name(&self) -> &str {
        self.op.name()
    }
    pub fn is_placeholder(&self) -> bool {
        self.op.is_placeholder()
    }
    /// The root axes: the data-parallel axes then the reduce axes of the operation.
    pub fn root_iter_vars(&self) -> Vec<IterVar> {
        self.op
            .axis()
            .iter()
            .chain(self.op.reduce_axis())
            .cloned()
            .collect()
    }
    pub fn annotation(&self, iv: &IterVar) -> Annotation {
        self.annotations
            .get(iv)
            .copied()
            .unwrap_or(Annotation::None)
    }
}

/// A schedule of a set of output tensors.
#[derive(Clone, Debug)]
pub struct Schedule {
    /// The stages, producers before consumers. Private: the primitives keep the
    /// invariants lowering relies on (see ARCHITECTURE.md).
    pub(crate) stages: Vec<Stage>,
    pub(crate) outputs: Vec<Tensor>,
}

/// Rewrites loads of some buffers into loads of others.
struct ReplaceBuffers<'a>(&'a HashMap<Buffer, Buffer>);
impl ExprMutator for ReplaceBuffers<'_> {
    fn mutate_buffer(&mut self, b: &Buffer) -> Buffer {
        self.0.get(b).cloned().unwrap_or_else(|| b.clone())
    }
}

/// The buffers an expression loads from.
pub(crate) fn loaded_buffers(e: &Expr, out: &mut Vec<Buffer>) {
    post_order_visit(e, &mut |x| {
        if let ExprNode::Load { buffer, .. } = x.node() {
            if !out.contains(buffer) {
                out.push(buffer.clone());
            }
        }
    });
}

pub(crate) fn body_reads(body: &ComputeBody) -> Vec<Buffer> {
    let mut v = Vec::new();
    for e in body.exprs() {
        loaded_buffers(e, &mut v);
    }
    v
}

impl Schedule {
    /// A schedule with one stage per operation of the DAG of `outputs`, each computed at
    /// root with its loops in the order of its axes.
    pub fn create(outputs: &[Tensor]) -> Result<Schedule, ScheduleError> {
        let dag = ComputeDag::new(outputs)?;
        let stages = dag
            .ops
            .iter()
            .map(|t| Stage::new(t.clone(), outputs.contains(t)))
            .collect();
        Ok(Schedule {
            stages,
            outputs: outputs.to_vec(),
        })
    }

    /// The stages, producers before consumers.
    pub fn stages(&self) -> &[Stage] {
        &self.stages
    }

    /// The output tensors the schedule was created for.
    pub fn outputs(&self) -> &[Tensor] {
        &self.outputs
    }

    /// The index of the stage producing `t`.
    pub fn stage_index(&self, t: &Tensor) -> Result<usize, ScheduleError> {
        self.index_of_buffer(t.buffer())
            .ok_or_else(|| ScheduleError::UnknownStage(t.name().to_string()))
    }

    pub(crate) fn index_of_buffer(&self, b: &Buffer) -> Option<usize> {
        self.stages.iter().position(|s| s.op.buffer() == b)
    }

    /// The stage producing `t`.
    pub fn stage(&self, t: &Tensor) -> Result<&Stage, ScheduleError> {
        Ok(&self.stages[self.stage_index(t)?])
    }

    /// The current operation producing `t` (its body as rewritten by the schedule).
    pub fn op(&self, t: &Tensor) -> Result<Tensor, ScheduleError> {
        Ok(self.stage(t)?.op.clone())
    }

    /// The data-parallel axes of the stage of `t`.
    pub fn axis(&self, t: &Tensor) -> Result<Vec<IterVar>, ScheduleError> {
        Ok(self.stage(t)?.op.axis().to_vec())
    }

    /// The reduce axes of the stage of `t`.
    pub fn reduce_axis(&self, t: &Tensor) -> Result<Vec<IterVar>, ScheduleError> {
        Ok(self.stage(t)?.op.reduce_axis().to_vec())
    }

    /// The leaf axes (loop order) of the stage of `t`.
    pub fn leaf_axes(&self, t: &Tensor) -> Result<Vec<IterVar>, ScheduleError> {
        Ok(self.stage(t)?.leaf_iter_vars.clone())
    }

    fn compute_stage_mut(&mut self, t: &Tensor) -> Result<&mut Stage, ScheduleError> {
        let i = self.stage_index(t)?;
        let s = &mut self.stages[i];
        if s.is_placeholder() {
            return Err(ScheduleError::Invalid {
                stage: s.name().to_string(),
                reason: "a placeholder has no loops to schedule".into(),
            });
        }
        Ok(s)
    }

    /// Fails when another stage is computed at `iv` of the stage of `t` (transforming
    /// that loop would leave the other stage nowhere to go).
    fn check_not_attach_point(&self, t: &Tensor, iv: &IterVar) -> Result<(), ScheduleError> {
        let b = t.buffer();
        if let Some(o) = self
            .stages
            .iter()
            .find(|x| matches!(&x.attach, Attach::At { target, axis } if target == b && axis == iv))
        {
            return Err(ScheduleError::Invalid {
                stage: t.name().to_string(),
                reason: format!(
                    "stage `{}` is computed at axis `{}`; move it before transforming that axis",
                    o.name(),
                    iv.name()
                ),
            });
        }
        Ok(())
    }

    fn leaf_pos(s: &Stage, iv: &IterVar) -> Result<usize, ScheduleError> {
        s.leaf_iter_vars
            .iter()
            .position(|x| x == iv)
            .ok_or_else(|| ScheduleError::NotLeaf {
                stage: s.name().to_string(),
                axis: iv.name().to_string(),
            })
    }

    // ----- loop-nest primitives -----

    fn split_impl(
        &mut self,
        t: &Tensor,
        iv: &IterVar,
        factor: Option<i64>,
        nparts: Option<i64>,
    ) -> Result<(IterVar, IterVar), ScheduleError> {
        let s = self.compute_stage_mut(t)?;
        let pos = Self::leaf_pos(s, iv)?;
        let v = factor.or(nparts).unwrap_or(0);
        if v <= 0 {
            return Err(ScheduleError::BadSplit {
                stage: s.name().to_string(),
                axis: iv.name().to_string(),
                value: v,
            });
        }
        let outer = IterVar::new(format!("{}.outer", iv.name()), None, iv.kind());
        let inner = IterVar::new(format!("{}.inner", iv.name()), None, iv.kind());
        s.relations.push(Relation::Split {
            parent: iv.clone(),
            outer: outer.clone(),
            inner: inner.clone(),
            factor,
            nparts,
        });
        s.all_iter_vars.extend([outer.clone(), inner.clone()]);
        s.leaf_iter_vars
            .splice(pos..=pos, [outer.clone(), inner.clone()]);
        // a stage computed at the split loop is computed at its inner part: per (outer,
        // inner) iteration it covers what it covered per iteration before (TVM's
        // `AttachMap::UpdateIters`)
        let target = t.buffer().clone();
        for st in &mut self.stages {
            if let Attach::At { target: tb, axis } = &mut st.attach {
                if *tb == target && axis == iv {
                    *axis = inner.clone();
                }
            }
        }
        Ok((outer, inner))
    }

    /// Splits `iv` into `(outer, inner)` with `inner` of extent `factor`.
    pub fn split(
        &mut self,
        t: &Tensor,
        iv: &IterVar,
        factor: i64,
    ) -> Result<(IterVar, IterVar), ScheduleError> {
        self.split_impl(t, iv, Some(factor), None)
    }

    /// Splits `iv` into `(outer, inner)` with `outer` of extent `nparts`.
    pub fn split_nparts(
        &mut self,
        t: &Tensor,
        iv: &IterVar,
        nparts: i64,
    ) -> Result<(IterVar, IterVar), ScheduleError> {
        self.split_impl(t, iv, None, Some(nparts))
    }

    /// Fuses two adjacent leaf axes (`outer` right before `inner`) into one.
    pub fn fuse(
        &mut self,
        t: &Tensor,
        outer: &IterVar,
        inner: &IterVar,
    ) -> Result<IterVar, ScheduleError> {
        // a stage computed at the inner loop is computed at the fused loop: per fused
        // iteration both loops are fixed, as they were inside the inner one
        self.check_not_attach_point(t, outer)?;
        let s = self.compute_stage_mut(t)?;
        let po = Self::leaf_pos(s, outer)?;
        let pi = Self::leaf_pos(s, inner)?;
        let err = |reason: &str| ScheduleError::BadFuse {
            stage: s.name().to_string(),
            outer: outer.name().to_string(),
            inner: inner.name().to_string(),
            reason: reason.to_string(),
        };
        if pi != po + 1 {
            return Err(err("they are not adjacent, outer first, in the loop order"));
        }
        if outer.kind() != inner.kind() {
            return Err(err(
                "a data-parallel axis and a reduction axis cannot be fused",
            ));
        }
        let fused = IterVar::new(
            format!("{}.{}.fused", outer.name(), inner.name()),
            None,
            outer.kind(),
        );
        s.relations.push(Relation::Fuse {
            outer: outer.clone(),
            inner: inner.clone(),
            fused: fused.clone(),
        });
        s.all_iter_vars.push(fused.clone());
        s.leaf_iter_vars.splice(po..=pi, [fused.clone()]);
        let b = t.buffer();
        for st in &mut self.stages {
            if let Attach::At { target, axis } = &mut st.attach {
                if target == b && axis == inner {
                    *axis = fused.clone();
                }
            }
        }
        Ok(fused)
    }

    /// Puts the given leaf axes in this order, in the positions they occupy together.
    pub fn reorder(&mut self, t: &Tensor, order: &[IterVar]) -> Result<(), ScheduleError> {
        let s = self.compute_stage_mut(t)?;
        let mut positions = Vec::with_capacity(order.len());
        for iv in order {
            positions.push(Self::leaf_pos(s, iv)?);
        }
        let uniq: HashSet<usize> = positions.iter().copied().collect();
        if uniq.len() != positions.len() {
            return Err(ScheduleError::BadReorder {
                stage: s.name().to_string(),
                reason: "an axis appears more than once".into(),
            });
        }
        let mut sorted = positions.clone();
        sorted.sort();
        for (p, iv) in sorted.into_iter().zip(order) {
            s.leaf_iter_vars[p] = iv.clone();
        }
        Ok(())
    }

    /// Tiles two axes: returns `(x_outer, y_outer, x_inner, y_inner)` in that loop order.
    pub fn tile(
        &mut self,
        t: &Tensor,
        x: &IterVar,
        y: &IterVar,
        fx: i64,
        fy: i64,
    ) -> Result<(IterVar, IterVar, IterVar, IterVar), ScheduleError> {
        let (xo, xi) = self.split(t, x, fx)?;
        let (yo, yi) = self.split(t, y, fy)?;
        self.reorder(t, &[xo.clone(), yo.clone(), xi.clone(), yi.clone()])?;
        Ok((xo, yo, xi, yi))
    }

    fn annotate(
        &mut self,
        t: &Tensor,
        iv: &IterVar,
        ann: Annotation,
        what: &str,
    ) -> Result<(), ScheduleError> {
        let s = self.compute_stage_mut(t)?;
        Self::leaf_pos(s, iv)?;
        // a reduction loop may be unrolled, or bound to threadIdx.x (a cross-thread
        // reduction: the threads of a warp reduce together)
        let cross_thread = ann == Annotation::Bind(ThreadAxis::ThreadIdxX);
        if iv.is_reduce() && ann != Annotation::Unroll && !cross_thread {
            return Err(ScheduleError::ReduceAxis {
                stage: s.name().to_string(),
                axis: iv.name().to_string(),
                what: what.to_string(),
            });
        }
        if let Annotation::Bind(thread) = ann {
            if let Some((other, _)) = s.annotations.iter().find(|(o, a)| **a == ann && *o != iv) {
                return Err(ScheduleError::ThreadBoundTwice {
                    stage: s.name().to_string(),
                    axis: iv.name().to_string(),
                    thread: thread.name().to_string(),
                    bound: other.name().to_string(),
                });
            }
        }
        s.annotations.insert(iv.clone(), ann);
        Ok(())
    }

    /// Runs the loop of `iv` in parallel on the CPU.
    pub fn parallel(&mut self, t: &Tensor, iv: &IterVar) -> Result<(), ScheduleError> {
        self.annotate(t, iv, Annotation::Parallel, "parallelize")
    }
    /// Turns the loop of `iv` into vector operations.
    pub fn vectorize(&mut self, t: &Tensor, iv: &IterVar) -> Result<(), ScheduleError> {
        self.annotate(t, iv, Annotation::Vectorize, "vectorize")
    }
    /// Unrolls the loop of `iv`.
    pub fn unroll(&mut self, t: &Tensor, iv: &IterVar) -> Result<(), ScheduleError> {
        self.annotate(t, iv, Annotation::Unroll, "unroll")
    }
    /// Binds the loop of `iv` to a GPU thread axis (or a virtual thread).
    pub fn bind(
        &mut self,
        t: &Tensor,
        iv: &IterVar,
        thread: ThreadAxis,
    ) -> Result<(), ScheduleError> {
        self.annotate(t, iv, Annotation::Bind(thread), "bind to a thread axis")
    }
    /// Attaches a pragma (e.g. `auto_unroll_max_step`) to the loop of `iv`.
    pub fn pragma(
        &mut self,
        t: &Tensor,
        iv: &IterVar,
        key: &str,
        value: Expr,
    ) -> Result<(), ScheduleError> {
        let s = self.compute_stage_mut(t)?;
        Self::leaf_pos(s, iv)?;
        if key.is_empty() {
            return Err(ScheduleError::Invalid {
                stage: s.name().to_string(),
                reason: "a pragma needs a key".into(),
            });
        }
        s.pragmas.push((iv.clone(), key.to_string(), value));
        Ok(())
    }

    /// Stores the stage's tensor in `scope`.
    pub fn set_scope(&mut self, t: &Tensor, scope: StorageScope) -> Result<(), ScheduleError> {
        let s = self.compute_stage_mut(t)?;
        if s.is_output {
            return Err(ScheduleError::Invalid {
                stage: s.name().to_string(),
                reason: "an output is a function argument and stays in global memory".into(),
            });
        }
        s.scope = scope;
        Ok(())
    }

    /// Pads the allocation so that the stride of the dimension of root axis `iv` is
    /// `offset` modulo `factor` (avoids shared-memory bank conflicts).
    pub fn storage_align(
        &mut self,
        t: &Tensor,
        iv: &IterVar,
        factor: i64,
        offset: i64,
    ) -> Result<(), ScheduleError> {
        let s = self.compute_stage_mut(t)?;
        let dim =
            s.op.axis()
                .iter()
                .position(|a| a == iv)
                .ok_or_else(|| ScheduleError::Invalid {
                    stage: s.name().to_string(),
                    reason: format!(
                        "storage_align needs a data-parallel root axis, `{}` is not one",
                        iv.name()
                    ),
                })?;
        if factor <= 0 || offset < 0 || offset >= factor {
            return Err(ScheduleError::Invalid { stage: s.name().to_string(), reason: format!("storage_align factor {factor} offset {offset}: need factor > 0 and 0 <= offset < factor") });
        }
        if s.is_output {
            return Err(ScheduleError::Invalid {
                stage: s.name().to_string(),
                reason: "an output's layout is fixed by the function signature".into(),
            });
        }
        s.storage_align.push((dim, factor, offset));
        Ok(())
    }

    // ----- placement primitives -----

    /// Whether stage `i` reads `b`, looking through inlined stages (a stage that reads an
    /// inlined stage reading `b` reads `b`).
    fn reads_through_inline(&self, i: usize, b: &Buffer) -> bool {
        let Some(body) = self.stages[i].op.body() else {
            return false;
        };
        body_reads(body).iter().any(|r| {
            r == b
                || self.index_of_buffer(r).is_some_and(|j| {
                    matches!(self.stages[j].attach, Attach::Inline)
                        && self.reads_through_inline(j, b)
                })
        })
    }

    /// Whether stage `c` is computed at loop `axis` of the stage of `target`, or at a
    /// stage that is (transitively).
    pub(crate) fn computed_inside(&self, c: usize, target: &Buffer, axis: &IterVar) -> bool {
        let mut cur = c;
        for _ in 0..self.stages.len() {
            let Attach::At { target: t, axis: a } = &self.stages[cur].attach else {
                return false;
            };
            if t == target && a == axis {
                return true;
            }
            let Some(next) = self.index_of_buffer(t) else {
                return false;
            };
            cur = next;
        }
        false
    }

    /// Computes the stage of `t` inside the loop of `axis` of the stage of `target`:
    /// `target` reads it, or stages computed inside that loop do (and no other stage).
    pub fn compute_at(
        &mut self,
        t: &Tensor,
        target: &Tensor,
        axis: &IterVar,
    ) -> Result<(), ScheduleError> {
        let si = self.stage_index(t)?;
        let ti = self.stage_index(target)?;
        let sname = self.stages[si].name().to_string();
        let err = |reason: String| ScheduleError::BadComputeAt {
            stage: sname.clone(),
            target: target.name().to_string(),
            reason,
        };
        if self.stages[si].is_placeholder() {
            return Err(err("a placeholder is an input, not computed".into()));
        }
        if si == ti {
            return Err(err("a stage cannot be computed inside itself".into()));
        }
        if self.stages[si].is_output {
            return Err(err("an output stage must be computed at root".into()));
        }
        if matches!(self.stages[ti].attach, Attach::Inline) {
            return Err(err("the target stage is inlined".into()));
        }
        Self::leaf_pos(&self.stages[ti], axis)?;
        let buf = self.stages[si].op.buffer().clone();
        let consumers: Vec<usize> = (0..self.stages.len())
            .filter(|&c| {
                !matches!(self.stages[c].attach, Attach::Inline)
                    && self.reads_through_inline(c, &buf)
            })
            .collect();
        // the target's stage, or stages already computed inside the same loop of it
        // (an attention's exponentials, read by the row sums and the products with the
        // values, both computed per block of rows of the output)
        let target_buf = self.stages[ti].op.buffer().clone();
        let sibling = |c: usize| self.computed_inside(c, &target_buf, axis);
        if consumers.is_empty() {
            return Err(err(format!(
                "`{}` does not consume `{}`",
                target.name(),
                sname
            )));
        }
        let others: Vec<&str> = consumers
            .iter()
            .filter(|&&c| c != ti && !sibling(c))
            .map(|&c| self.stages[c].name())
            .collect();
        if !others.is_empty() {
            return Err(err(format!("`{sname}` is also consumed by [{}]; a stage computed at another must be read only by it and by stages computed at the same loop of it", others.join(", "))));
        }
        // No cycles: the target must not be (transitively) attached inside this stage.
        let mut cur = ti;
        while let Attach::At { target: tb, .. } = &self.stages[cur].attach {
            let next = self.index_of_buffer(tb).expect("attach targets are stages");
            if next == si {
                return Err(err("the target is itself computed inside this stage".into()));
            }
            cur = next;
        }
        self.stages[si].attach = Attach::At {
            target: self.stages[ti].op.buffer().clone(),
            axis: axis.clone(),
        };
        Ok(())
    }

    /// Substitutes the stage of `t` into its consumers.
    pub fn compute_inline(&mut self, t: &Tensor) -> Result<(), ScheduleError> {
        let si = self.stage_index(t)?;
        let s = &self.stages[si];
        let err = |reason: &str| ScheduleError::BadInline {
            stage: s.name().to_string(),
            reason: reason.to_string(),
        };
        if s.is_placeholder() {
            return Err(err("a placeholder is an input, not computed"));
        }
        if s.is_output {
            return Err(err("an output must be stored, not inlined"));
        }
        if s.op.body().and_then(|b| b.as_reduce()).is_some() {
            return Err(err("a reduction cannot be inlined"));
        }
        if !s.relations.is_empty() || !s.annotations.is_empty() {
            return Err(err("its loops are already transformed"));
        }
        let buf = s.op.buffer().clone();
        if let Some(a) = self
            .stages
            .iter()
            .find(|x| matches!(&x.attach, Attach::At { target, .. } if *target == buf))
        {
            return Err(err(&format!("stage `{}` is computed inside it", a.name())));
        }
        self.stages[si].attach = Attach::Inline;
        Ok(())
    }

    /// Computes the stage of `t` in its own loop nest at the top of the function.
    pub fn compute_root(&mut self, t: &Tensor) -> Result<(), ScheduleError> {
        let s = self.compute_stage_mut(t)?;
        s.attach = Attach::Root;
        Ok(())
    }

    // ----- DAG-rewriting primitives -----

    fn insert_stage(&mut self, at: usize, op: Tensor) {
        self.stages.insert(at, Stage::new(op, false));
    }

    /// Replaces the body of stage `i` by `body`, keeping its tensor (buffer and axes).
    fn rewrite_body(&mut self, i: usize, body: ComputeBody) -> Result<(), ScheduleError> {
        let old = self.stages[i].op.clone();
        let op = make_compute(
            old.name(),
            old.tag(),
            old.shape().to_vec(),
            old.axis().to_vec(),
            body,
            Some(old.buffer().clone()),
            old.attrs().clone(),
        )?;
        self.stages[i].op = op;
        Ok(())
    }

    /// Adds a stage that copies `t` into `scope`, and makes `readers` read the copy.
    /// Returns the copy.
    pub fn cache_read(
        &mut self,
        t: &Tensor,
        scope: StorageScope,
        readers: &[Tensor],
    ) -> Result<Tensor, ScheduleError> {
        let ti = self.stage_index(t)?;
        let err = |reason: String| ScheduleError::BadCache {
            stage: t.name().to_string(),
            what: "cache_read".into(),
            reason,
        };
        if readers.is_empty() {
            return Err(err("no readers given".into()));
        }
        if matches!(self.stages[ti].attach, Attach::At { .. } | Attach::Inline) {
            return Err(err(
                "the tensor is computed at another stage or inlined; cache it before moving it"
                    .into(),
            ));
        }
        let mut reader_idx = Vec::new();
        for r in readers {
            let ri = self.stage_index(r)?;
            let reads = self.stages[ri]
                .op
                .body()
                .map(|b| body_reads(b).contains(t.buffer()))
                .unwrap_or(false);
            if !reads {
                return Err(err(format!("`{}` does not read `{}`", r.name(), t.name())));
            }
            reader_idx.push(ri);
        }
        let names: Vec<String> = (0..t.ndim()).map(|i| format!("ax{i}")).collect();
        let name_refs: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
        let cache = crate::tensor::compute_tagged(
            t.shape(),
            &format!("{}.{}", t.name(), scope.name()),
            "",
            &name_refs,
            |idx| t.at(idx),
        )?;
        let map = HashMap::from([(t.buffer().clone(), cache.buffer().clone())]);
        for ri in reader_idx {
            let body = self.stages[ri]
                .op
                .body()
                .expect("readers are computes")
                .map(|e| ReplaceBuffers(&map).mutate_expr(e));
            self.rewrite_body(ri, body)?;
        }
        self.insert_stage(ti + 1, cache.clone());
        self.stages[ti + 1].scope = scope;
        Ok(cache)
    }

    /// Computes `t` into a new stage in `scope`, and turns the stage of `t` into a copy
    /// out of it. Must come before any loop transformation of `t`'s stage. Returns the
    /// new stage's tensor, which carries the original computation (and reduction).
    pub fn cache_write(
        &mut self,
        t: &Tensor,
        scope: StorageScope,
    ) -> Result<Tensor, ScheduleError> {
        let ti = self.stage_index(t)?;
        let s = &self.stages[ti];
        let err = |reason: &str| ScheduleError::BadCache {
            stage: s.name().to_string(),
            what: "cache_write".into(),
            reason: reason.to_string(),
        };
        let Some(body) = s.op.body() else {
            return Err(err("a placeholder is an input, not computed"));
        };
        if !s.relations.is_empty() || !s.annotations.is_empty() || !s.pragmas.is_empty() {
            return Err(err(
                "cache_write must be applied before the stage's loops are transformed",
            ));
        }
        if matches!(s.attach, Attach::Inline) {
            return Err(err("the stage is inlined"));
        }
        if self
            .stages
            .iter()
            .any(|x| matches!(&x.attach, Attach::At { target, .. } if target == s.op.buffer()))
        {
            return Err(err("other stages are computed inside it; cache_write must come before compute_at into it"));
        }
        let op = s.op.clone();
        let mut vmap: HashMap<Var, Expr> = HashMap::new();
        let axis: Vec<IterVar> = op
            .axis()
            .iter()
            .map(|a| {
                let n = a.copy_with_name(format!("{}.c", a.name()));
                vmap.insert(a.var().clone(), n.expr());
                n
            })
            .collect();
        let body = match body {
            ComputeBody::Expr(e) => ComputeBody::Expr(substitute(e, &vmap)),
            ComputeBody::Reduce(r) => {
                let raxis: Vec<IterVar> = r
                    .axis
                    .iter()
                    .map(|a| {
                        let n = a.copy_with_name(a.name());
                        vmap.insert(a.var().clone(), n.expr());
                        n
                    })
                    .collect();
                ComputeBody::Reduce(Reduce {
                    op: r.op,
                    source: substitute(&r.source, &vmap),
                    axis: raxis,
                    init: r.init.as_ref().map(|e| substitute(e, &vmap)),
                    condition: r.condition.as_ref().map(|e| substitute(e, &vmap)),
                })
            }
        };
        let cache = make_compute(
            &format!("{}.{}", op.name(), scope.name()),
            op.tag(),
            op.shape().to_vec(),
            axis,
            body,
            None,
            Default::default(),
        )?;
        let copy = cache.at(&op.axis().iter().map(|a| a.expr()).collect::<Vec<_>>());
        self.insert_stage(ti, cache.clone());
        self.stages[ti].scope = scope;
        let ci = ti + 1;
        self.rewrite_body(ci, ComputeBody::Expr(copy))?;
        let st = &mut self.stages[ci];
        st.all_iter_vars = st.op.axis().to_vec();
        st.leaf_iter_vars = st.op.axis().to_vec();
        Ok(cache)
    }

    /// Factors the reduction of `t` over the leaf reduce axis `axis`: a new stage computes
    /// partial results with `axis` as a new data-parallel dimension (inserted at position
    /// `factor_axis` of its shape), and the stage of `t` reduces them. Returns the new
    /// stage's tensor.
    pub fn rfactor(
        &mut self,
        t: &Tensor,
        axis: &IterVar,
        factor_axis: usize,
    ) -> Result<Tensor, ScheduleError> {
        crate::rfactor::rfactor(self, t, axis, factor_axis)
    }

    pub(crate) fn replace_with_rfactor(
        &mut self,
        ti: usize,
        rf: Tensor,
        new_body: ComputeBody,
    ) -> Result<(), ScheduleError> {
        self.rewrite_body(ti, new_body)?;
        let st = &mut self.stages[ti];
        let roots = st.root_iter_vars();
        st.all_iter_vars = roots.clone();
        st.leaf_iter_vars = roots;
        st.relations.clear();
        st.annotations.clear();
        st.pragmas.clear();
        self.insert_stage(ti, rf);
        Ok(())
    }
}
