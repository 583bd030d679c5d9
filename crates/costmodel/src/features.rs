//! Program features for the cost models, after TVM AutoTVM's `feature.py` /
//! `touch_extractor.cc`: "itervar", "curve" and "knob".
//!
//! Both program features look at the **main loop nest** of a lowered
//! [`PrimFunc`]: the loops around its innermost store (the store under the most loops;
//! the first one in program order on a tie), outermost first. For a matmul that is the
//! accumulation `C[i, j] = C[i, j] + A[i, k] * B[k, j]`, not the initialization or the
//! write-back of a cached tile. Its **buffers** are the distinct buffers that store
//! touches — the stored buffer first, then the loaded ones in the order they appear —
//! at most [`MAX_BUFFERS`]. For each buffer and each loop `L` of the nest, from its
//! first access's row-major flattened index:
//!
//! - **stride**: how far the access moves (in elements) when `L` advances by one with
//!   the other loops at their start — the index's coefficient of `L` when the index is
//!   linear, a finite difference when it is not (`floordiv`/`floormod` of fused loops).
//! - **count**: the product of the extents of `L` and the loops inside it along which
//!   the access moves (stride ≠ 0) — how many elements the body of `L` touches.
//! - **reuse**: the product of the extents of `L` and the loops inside it along which
//!   it does not move — how many times each touched element is reused in `L`'s body.
//!
//! (TVM's definitions; TVM also counts accesses in other nests below `L` and keeps a
//! separate entry per access of the same buffer, where we keep one per buffer.)
//!
//! ## itervar ([`itervar_features`], names from [`itervar_feature_names`])
//!
//! A fixed-length vector of [`ITERVAR_FEATURE_LEN`] floats, numeric values scaled by
//! `log2(1 + x)` as in TVM (marked *log* below; the others are raw):
//!
//! - a summary of the whole nest (9): `nest.loops` (number of loops), `nest.iterations`
//!   (*log*, product of all extents), `nest.parallel`, `nest.vectorize`, `nest.unroll`,
//!   `nest.threads` (*log*, product of the extents of the loops with that annotation,
//!   thread/block/vthread bindings together; 0 when there is none), `nest.buffers`
//!   (number of buffers), `func.loops` and `func.stores` (*log*, in the whole function);
//! - then [`MAX_LOOPS`] loop slots holding the innermost `MAX_LOOPS` loops of the nest,
//!   outermost first, the innermost loop always in the last slot (a shallower nest
//!   leaves the first slots zero; a deeper one drops its outermost loops here, though
//!   the summary and the products still count them). Per slot (29):
//!   - `length` (*log*, the extent), `depth` (1 for the outermost loop of the nest),
//!     `topdown` (*log*, product of the extents of this loop and those outside it),
//!     `bottomup` (*log*, product of this loop's and those inside it);
//!   - the annotation, one-hot over `serial`, `unroll`, `vectorize`, `parallel`,
//!     `blockIdx`, `threadIdx`, `vthread`;
//!   - `add`, `mul`, `div` (*log*): float additions/subtractions, multiplications and
//!     divisions/modulos whose innermost enclosing loop is this one (static counts);
//!   - for each of the [`MAX_BUFFERS`] buffer slots, `stride`, `count`, `reuse` (*log*;
//!     zero for an empty slot).
//!
//! The length does not depend on the program, so rows of any two schedules line up;
//! they mean the same thing position by position when the schedules come from one
//! template (same loop structure), which is how TVM uses them. A loop with a
//! non-constant extent counts as extent 1.
//!
//! ## curve ([`curve_features`])
//!
//! TVM's "curve sample" (relation) feature, invariant to the loop structure. For each
//! buffer slot, walking the nest gives one point per loop: `log2` of the bytes the loop
//! touches (count × element size — TVM uses element counts; bytes make float16 and
//! float32 kernels comparable), `log2` of its reuse and `log2` of its top-down product,
//! each list with a leading 0 and sorted on its own, as TVM does. Four curves are
//! sampled at `x = 0, 1, …, samples − 1`: bytes → reuse, reuse → bytes,
//! bytes → top-down, top-down → bytes; each sample is the `y` of the last point with
//! `x_j ≤ x` and the distance `x − x_j`. Length `MAX_BUFFERS × 4 × samples × 2`
//! ([`curve_feature_len`]), zero for empty buffer slots.
//!
//! ## knob ([`knob_features`])
//!
//! The configuration's knob values as floats, unscaled (TVM's
//! `get_flatten_feature`): only comparable between configurations of one space.

use std::collections::HashMap;
use tessera_ir::visit::{post_order_visit, walk_expr, walk_stmt, ExprVisitor, StmtVisitor};
use tessera_ir::{BinOp, Buffer, CmpOp, Expr, ExprNode, ForKind, PrimFunc, Stmt, StmtNode};
use tessera_ir::{Intrinsic, ThreadAxis, Var};

/// Loop slots of the itervar feature: the innermost loops of the main nest.
pub const MAX_LOOPS: usize = 10;
/// Buffer slots of both program features: the buffers of the innermost store.
pub const MAX_BUFFERS: usize = 5;

const SUMMARY: [&str; 9] = [
    "nest.loops",
    "nest.iterations",
    "nest.parallel",
    "nest.vectorize",
    "nest.unroll",
    "nest.threads",
    "nest.buffers",
    "func.loops",
    "func.stores",
];
const LOOP_FIELDS: [&str; 4] = ["length", "depth", "topdown", "bottomup"];
const ANNOTATIONS: [&str; 7] = [
    "serial",
    "unroll",
    "vectorize",
    "parallel",
    "blockIdx",
    "threadIdx",
    "vthread",
];
const ARITH_FIELDS: [&str; 3] = ["add", "mul", "div"];
const BUFFER_FIELDS: [&str; 3] = ["stride", "count", "reuse"];
const PER_LOOP: usize =
    LOOP_FIELDS.len() + ANNOTATIONS.len() + ARITH_FIELDS.len() + MAX_BUFFERS * BUFFER_FIELDS.len();

/// The length of [`itervar_features`]' vector, for every program.
pub const ITERVAR_FEATURE_LEN: usize = SUMMARY.len() + MAX_LOOPS * PER_LOOP;

/// The length of [`curve_features`]' vector with `samples` samples per curve.
pub fn curve_feature_len(samples: usize) -> usize {
    MAX_BUFFERS * 4 * samples * 2
}

/// `log2(1 + x)` for `x ≥ 0` (TVM's scaling; negative values are mirrored).
fn slog(x: f64) -> f32 {
    (x.abs() + 1.0).log2().copysign(x) as f32
}

/// One loop of the function.
#[derive(Clone, Debug)]
struct Loop {
    var: Var,
    min: i64,
    extent: i64,
    kind: ForKind,
    /// Float add/sub, mul, div/mod directly in this loop (not in a loop inside it).
    arith: [u64; 3],
}

impl Loop {
    fn annotation(&self) -> usize {
        match self.kind {
            ForKind::Serial => 0,
            ForKind::Unrolled => 1,
            ForKind::Vectorized => 2,
            ForKind::Parallel => 3,
            ForKind::ThreadBinding(a) => match a {
                ThreadAxis::BlockIdxX | ThreadAxis::BlockIdxY | ThreadAxis::BlockIdxZ => 4,
                ThreadAxis::ThreadIdxX | ThreadAxis::ThreadIdxY | ThreadAxis::ThreadIdxZ => 5,
                ThreadAxis::VThread => 6,
            },
        }
    }
}

/// A store and the loops around it (ids into `Collector::loops`, outermost first).
struct StoreSite {
    loops: Vec<usize>,
    stmt: Stmt,
}

/// Walks a function once: every loop, every store with its enclosing loops, the float
/// arithmetic of each loop.
#[derive(Default)]
struct Collector {
    loops: Vec<Loop>,
    stack: Vec<usize>,
    stores: Vec<StoreSite>,
}

impl ExprVisitor for Collector {
    fn visit_expr(&mut self, e: &Expr) {
        if let (ExprNode::Binary { op, .. }, Some(&top)) = (e.node(), self.stack.last()) {
            if e.dtype().is_float() {
                let slot = match op {
                    BinOp::Add | BinOp::Sub => Some(0),
                    BinOp::Mul => Some(1),
                    BinOp::Div | BinOp::Mod | BinOp::FloorDiv | BinOp::FloorMod => Some(2),
                    BinOp::Min | BinOp::Max => None,
                };
                if let Some(s) = slot {
                    self.loops[top].arith[s] += 1;
                }
            }
        }
        walk_expr(self, e)
    }
}

impl StmtVisitor for Collector {
    fn visit_stmt(&mut self, s: &Stmt) {
        match s.node() {
            StmtNode::For {
                var,
                min,
                extent,
                kind,
                ..
            } => {
                let id = self.loops.len();
                self.loops.push(Loop {
                    var: var.clone(),
                    min: min.as_int().unwrap_or(0),
                    extent: extent.as_int().unwrap_or(1).max(1),
                    kind: *kind,
                    arith: [0; 3],
                });
                self.stack.push(id);
                walk_stmt(self, s);
                self.stack.pop();
            }
            StmtNode::Store { .. } => {
                self.stores.push(StoreSite {
                    loops: self.stack.clone(),
                    stmt: s.clone(),
                });
                walk_stmt(self, s);
            }
            _ => walk_stmt(self, s),
        }
    }
}

/// A buffer of the main store and how its first access moves along each nest loop.
struct Touch {
    buffer: Buffer,
    /// Per nest loop: elements moved per iteration (absolute).
    stride: Vec<i64>,
    /// Per nest loop: product of the extents of this and the inner loops that move it.
    count: Vec<f64>,
    /// Per nest loop: product of the extents of this and the inner loops that do not.
    reuse: Vec<f64>,
}

/// The main nest of a function: see the module documentation.
struct Nest {
    loops: Vec<Loop>,
    touches: Vec<Touch>,
    func_loops: usize,
    func_stores: usize,
}

impl Nest {
    fn of(func: &PrimFunc) -> Nest {
        let mut c = Collector::default();
        c.visit_stmt(&func.body);
        let main = c
            .stores
            .iter()
            .enumerate()
            .max_by_key(|(i, s)| (s.loops.len(), std::cmp::Reverse(*i)))
            .map(|(_, s)| s);
        let loops: Vec<Loop> = main
            .map(|s| s.loops.iter().map(|&i| c.loops[i].clone()).collect())
            .unwrap_or_default();
        let touches = main.map(|s| touches(&s.stmt, &loops)).unwrap_or_default();
        Nest {
            loops,
            touches,
            func_loops: c.loops.len(),
            func_stores: c.stores.len(),
        }
    }

    /// Product of the extents of `loops[range]`.
    fn product(&self, range: std::ops::Range<usize>) -> f64 {
        self.loops[range].iter().map(|l| l.extent as f64).product()
    }

    /// Product of the extents of the loops of one annotation kind; 0 when none.
    fn annotated_product(&self, pred: impl Fn(&Loop) -> bool) -> f64 {
        let mut found = false;
        let mut p = 1.0;
        for l in self.loops.iter().filter(|l| pred(l)) {
            found = true;
            p *= l.extent as f64;
        }
        if found {
            p
        } else {
            0.0
        }
    }
}

/// The distinct buffers the store `stmt` touches (stored one first, then loads in order
/// of appearance) with their touch pattern along `loops`.
fn touches(stmt: &Stmt, loops: &[Loop]) -> Vec<Touch> {
    let StmtNode::Store {
        buffer,
        indices,
        value,
    } = stmt.node()
    else {
        return Vec::new();
    };
    let mut accesses: Vec<(Buffer, Vec<Expr>)> = vec![(buffer.clone(), indices.clone())];
    post_order_visit(value, &mut |e| {
        if let ExprNode::Load { buffer, indices } = e.node() {
            if !accesses.iter().any(|(b, _)| b == buffer) {
                accesses.push((buffer.clone(), indices.clone()));
            }
        }
    });
    accesses.truncate(MAX_BUFFERS);

    let heads: Vec<(Var, i64)> = loops.iter().map(|l| (l.var.clone(), l.min)).collect();
    accesses
        .into_iter()
        .map(|(buffer, indices)| {
            let stride = access_strides(&buffer, &indices, &heads);
            // TVM's ExitItervar_: walking outwards, a loop that moves the access
            // multiplies the count of itself and every loop around it, one that does not
            // multiplies their reuse.
            let n = loops.len();
            let (mut count, mut reuse) = (vec![1.0; n], vec![1.0; n]);
            let (mut c, mut r) = (1.0f64, 1.0f64);
            for k in (0..n).rev() {
                if stride[k] != 0 {
                    c *= loops[k].extent as f64;
                } else {
                    r *= loops[k].extent as f64;
                }
                count[k] = c;
                reuse[k] = r;
            }
            Touch {
                buffer,
                stride,
                count,
                reuse,
            }
        })
        .collect()
}

/// How far (in elements, absolute) the access `buffer[indices]` moves when each loop
/// (its variable and start) advances by one with the other loops at their start: the
/// index's coefficient when it is linear, a finite difference when it is not.
pub(crate) fn access_strides(buffer: &Buffer, indices: &[Expr], loops: &[(Var, i64)]) -> Vec<i64> {
    let start: HashMap<Var, i64> = loops.iter().cloned().collect();
    let base = flat_index(buffer, indices, &start);
    loops
        .iter()
        .map(|(var, min)| {
            let mut env = start.clone();
            env.insert(var.clone(), min.wrapping_add(1));
            flat_index(buffer, indices, &env)
                .wrapping_sub(base)
                .unsigned_abs()
                .min(i64::MAX as u64) as i64
        })
        .collect()
}

/// The row-major flattened index of `buffer[indices]` with the variables of `env` bound
/// (others 0).
fn flat_index(buffer: &Buffer, indices: &[Expr], env: &HashMap<Var, i64>) -> i64 {
    let shape: Vec<i64> = buffer
        .shape()
        .iter()
        .map(|d| eval_int(d, env).max(1))
        .collect();
    let mut flat = 0i64;
    for (d, idx) in indices.iter().enumerate() {
        let row: i64 = shape
            .get(d + 1..)
            .unwrap_or(&[])
            .iter()
            .fold(1i64, |a, &b| a.wrapping_mul(b));
        flat = flat.wrapping_add(eval_int(idx, env).wrapping_mul(row));
    }
    flat
}

/// Evaluates an integer index expression with the variables of `env` bound (unbound
/// ones, loaded values and calls other than `if_then_else` count as 0; a ramp as its
/// base). Wrapping arithmetic, division by zero gives 0: features must never panic.
fn eval_int(e: &Expr, env: &HashMap<Var, i64>) -> i64 {
    let mut stack: Vec<i64> = Vec::new();
    post_order_visit(e, &mut |x| {
        let mut pop = |n: usize| stack.split_off(stack.len().saturating_sub(n));
        let v = match x.node() {
            ExprNode::Var(v) => env.get(v).copied().unwrap_or(0),
            ExprNode::IntImm { value, .. } => *value,
            ExprNode::FloatImm { value, .. } => *value as i64,
            ExprNode::Binary { op, .. } => {
                let ab = pop(2);
                let (a, b) = (ab[0], ab[1]);
                match op {
                    BinOp::Add => a.wrapping_add(b),
                    BinOp::Sub => a.wrapping_sub(b),
                    BinOp::Mul => a.wrapping_mul(b),
                    BinOp::Div => a.checked_div(b).unwrap_or(0),
                    BinOp::Mod => a.checked_rem(b).unwrap_or(0),
                    BinOp::FloorDiv => floor_div(a, b),
                    BinOp::FloorMod => a.wrapping_sub(floor_div(a, b).wrapping_mul(b)),
                    BinOp::Min => a.min(b),
                    BinOp::Max => a.max(b),
                }
            }
            ExprNode::Cmp { op, .. } => {
                let ab = pop(2);
                let (a, b) = (ab[0], ab[1]);
                i64::from(match op {
                    CmpOp::Eq => a == b,
                    CmpOp::Ne => a != b,
                    CmpOp::Lt => a < b,
                    CmpOp::Le => a <= b,
                    CmpOp::Gt => a > b,
                    CmpOp::Ge => a >= b,
                })
            }
            ExprNode::And(..) => {
                let ab = pop(2);
                i64::from(ab[0] != 0 && ab[1] != 0)
            }
            ExprNode::Or(..) => {
                let ab = pop(2);
                i64::from(ab[0] != 0 || ab[1] != 0)
            }
            ExprNode::Not(_) => i64::from(pop(1)[0] == 0),
            ExprNode::Select { .. } => {
                let v = pop(3);
                if v[0] != 0 {
                    v[1]
                } else {
                    v[2]
                }
            }
            ExprNode::Cast { .. } | ExprNode::Broadcast { .. } => pop(1)[0],
            ExprNode::Load { indices, .. } => {
                pop(indices.len());
                0
            }
            ExprNode::Ramp { .. } => pop(2)[0],
            ExprNode::Call { op, args, .. } => {
                let v = pop(args.len());
                match op {
                    Intrinsic::IfThenElse if v.len() == 3 => {
                        if v[0] != 0 {
                            v[1]
                        } else {
                            v[2]
                        }
                    }
                    _ => 0,
                }
            }
        };
        stack.push(v);
    });
    stack.pop().unwrap_or(0)
}

fn floor_div(a: i64, b: i64) -> i64 {
    match a.checked_div(b) {
        Some(q) if (a % b != 0) && ((a < 0) != (b < 0)) => q - 1,
        Some(q) => q,
        None => 0,
    }
}

/// The itervar features of a lowered function: [`ITERVAR_FEATURE_LEN`] floats, laid out
/// as the module documentation describes (and [`itervar_feature_names`] names).
pub fn itervar_features(func: &PrimFunc) -> Vec<f32> {
    let nest = Nest::of(func);
    let n = nest.loops.len();
    let mut out = Vec::with_capacity(ITERVAR_FEATURE_LEN);

    out.push(n as f32);
    out.push(slog(nest.product(0..n)));
    out.push(slog(
        nest.annotated_product(|l| l.kind == ForKind::Parallel),
    ));
    out.push(slog(
        nest.annotated_product(|l| l.kind == ForKind::Vectorized),
    ));
    out.push(slog(
        nest.annotated_product(|l| l.kind == ForKind::Unrolled),
    ));
    out.push(slog(nest.annotated_product(|l| {
        matches!(l.kind, ForKind::ThreadBinding(_))
    })));
    out.push(nest.touches.len() as f32);
    out.push(slog(nest.func_loops as f64));
    out.push(slog(nest.func_stores as f64));

    for slot in 0..MAX_LOOPS {
        let Some(k) = (slot + n).checked_sub(MAX_LOOPS) else {
            out.extend(std::iter::repeat_n(0.0, PER_LOOP));
            continue;
        };
        let l = &nest.loops[k];
        out.push(slog(l.extent as f64));
        out.push((k + 1) as f32);
        out.push(slog(nest.product(0..k + 1)));
        out.push(slog(nest.product(k..n)));
        let ann = l.annotation();
        out.extend((0..ANNOTATIONS.len()).map(|a| if a == ann { 1.0 } else { 0.0 }));
        out.extend(l.arith.iter().map(|&c| slog(c as f64)));
        for b in 0..MAX_BUFFERS {
            match nest.touches.get(b) {
                Some(t) => {
                    out.push(slog(t.stride[k] as f64));
                    out.push(slog(t.count[k]));
                    out.push(slog(t.reuse[k]));
                }
                None => out.extend([0.0; BUFFER_FIELDS.len()]),
            }
        }
    }
    debug_assert_eq!(out.len(), ITERVAR_FEATURE_LEN);
    out
}

/// The name of each value of [`itervar_features`]`(func)`, for debugging: the summary
/// names, then `L<slot>[<loop var>].<field>` and
/// `L<slot>[<loop var>].B<slot>[<buffer>].<field>`, with `-` for an empty slot.
pub fn itervar_feature_names(func: &PrimFunc) -> Vec<String> {
    let nest = Nest::of(func);
    let n = nest.loops.len();
    let mut out: Vec<String> = SUMMARY.iter().map(|s| s.to_string()).collect();
    for slot in 0..MAX_LOOPS {
        let lname = match (slot + n).checked_sub(MAX_LOOPS) {
            Some(k) => format!("L{slot}[{}]", nest.loops[k].var.name()),
            None => format!("L{slot}[-]"),
        };
        for f in LOOP_FIELDS {
            out.push(format!("{lname}.{f}"));
        }
        for a in ANNOTATIONS {
            out.push(format!("{lname}.ann.{a}"));
        }
        for f in ARITH_FIELDS {
            out.push(format!("{lname}.{f}"));
        }
        for b in 0..MAX_BUFFERS {
            let bname = match nest.touches.get(b) {
                Some(t) => format!("B{b}[{}]", t.buffer.name()),
                None => format!("B{b}[-]"),
            };
            for f in BUFFER_FIELDS {
                out.push(format!("{lname}.{bname}.{f}"));
            }
        }
    }
    out
}

/// The curve features of a lowered function: [`curve_feature_len`]`(samples)` floats, as
/// the module documentation describes (TVM samples 20 points per curve).
pub fn curve_features(func: &PrimFunc, samples: usize) -> Vec<f32> {
    let nest = Nest::of(func);
    let n = nest.loops.len();
    let mut out = Vec::with_capacity(curve_feature_len(samples));
    // TVM's sample_curve: for x = 0, 1, …, the last point at or left of x.
    let sample = |out: &mut Vec<f32>, x: &[f64], y: &[f64]| {
        for i in 0..samples {
            let xx = i as f64;
            let j = x.iter().rposition(|&xj| xx > xj - 1e-6).unwrap_or(0);
            out.push(y[j] as f32);
            out.push((xx - x[j]) as f32);
        }
    };
    for b in 0..MAX_BUFFERS {
        let Some(t) = nest.touches.get(b) else {
            out.extend(std::iter::repeat_n(0.0, 4 * samples * 2));
            continue;
        };
        let elem = t.buffer.dtype().bytes().max(1) as f64;
        let curve = |f: &dyn Fn(usize) -> f64| -> Vec<f64> {
            let mut v: Vec<f64> = std::iter::once(0.0)
                .chain((0..n).map(|k| f(k).log2()))
                .collect();
            v.sort_by(f64::total_cmp);
            v
        };
        let bytes = curve(&|k| t.count[k] * elem);
        let reuse = curve(&|k| t.reuse[k]);
        let topdown = curve(&|k| nest.product(0..k + 1));
        sample(&mut out, &bytes, &reuse);
        sample(&mut out, &reuse, &bytes);
        sample(&mut out, &bytes, &topdown);
        sample(&mut out, &topdown, &bytes);
    }
    debug_assert_eq!(out.len(), curve_feature_len(samples));
    out
}

/// The knob feature: a configuration's knob values as floats (TVM's "knob" feature
/// type, `ConfigEntity.get_flatten_feature`).
pub fn knob_features(values: &[i64]) -> Vec<f32> {
    values.iter().map(|&v| v as f32).collect()
}
