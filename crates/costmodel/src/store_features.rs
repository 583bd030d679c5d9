//! The auto-scheduler's program features (after TVM's `auto_scheduler/feature.cc`):
//! one row of [`STORE_FEATURE_LEN`] floats per buffer store of a lowered function, so
//! that a program is a bag of rows and the "pack-sum" model scores it as the sum of
//! its rows' scores ([`crate::PackSumXgb`]).
//!
//! Every store is looked at with the loops around it (outermost first; `outer_prod` is
//! the product of their extents: how often the store runs). Numeric values are scaled
//! by `log2(1 + x)`; one-hot fields are 0 or 1. The 164 fields, in order (names from
//! [`store_feature_names`]):
//!
//! - **compute (16)**: float `mad` (an add of a product), `addsub`, `mul`, `divmod`,
//!   `cmp`, `math_func` (exp, log, sqrt, tanh, …), `other_func`; the same seven for
//!   integers; `bool_op` (and/or/not), `select_op` — counted in the stored value and
//!   multiplied by `outer_prod`.
//! - **annotations (3 × 11 = 33)**: for vectorize, unroll and parallel: the number of
//!   such loops around the store, the product and the innermost one's extent, and the
//!   position of the innermost one, one-hot over none / inner spatial / middle spatial
//!   / outer spatial / inner reduce / middle reduce / outer reduce / mixed. A loop is a
//!   reduction loop of the store when the stored element does not move with it.
//! - **GPU (8)**: `is_gpu` (some loop bound to a thread axis), the extents bound to
//!   blockIdx.x/y/z, threadIdx.x/y/z and vthread.
//! - **buffer access (5 × 18 = 90)**: the buffers the store touches (the stored one and
//!   every loaded one), the five with the most bytes accessed first. Per buffer: the
//!   access type one-hot (read / write / read-write); `bytes` (accessed in all, bytes ×
//!   runs), `unique_bytes` (the footprint: the extents of the loops the access moves
//!   along, at most the buffer), `lines` and `unique_lines` (64-byte cache lines, for all
//!   accesses and for the footprint, from the innermost moving loop's stride); the reuse
//!   type one-hot (loop-multiple-read: some loop does not move the access /
//!   serial-multiple-read-write: read and written in place / none); for the innermost
//!   loop that does not move the access: the reuse distance in iterations (the
//!   iterations inside it) and in bytes (what every buffer touches inside it), the reuse
//!   count (its extent); `bytes`, `unique_bytes`, `lines`, `unique_lines` divided by the
//!   reuse count; the innermost nonzero stride (elements). Empty slots are zero.
//! - **arithmetic intensity (10)**: the float operations over the bytes touched inside
//!   each loop level, outermost to innermost, resampled at 10 evenly spaced points.
//! - **allocation (4)**: for a store into a buffer allocated inside the function (a
//!   cache): its size in bytes, the size times the product of the loops outside the
//!   allocation, that product, and `outer_prod` over it.
//! - **other (3)**: `outer_prod`, the number of loops around the store, and the
//!   `auto_unroll_max_step` pragma in force (0 when none).
//!
//! Simplifications against TVM: the touched region of an access is estimated from the
//! loops it moves along (TVM computes it with bound analysis), reuse is looked for only
//! along the loops around the store itself, and the intensity curve is sampled by loop
//! level rather than by compute amount.

use crate::features::access_strides;
use std::collections::HashMap;
use tessera_ir::visit::{post_order_visit, walk_stmt, ExprVisitor, StmtVisitor};
use tessera_ir::{BinOp, Buffer, Expr, ExprNode, ForKind, Intrinsic, PrimFunc, Stmt, StmtNode};
use tessera_ir::{ThreadAxis, Var};

/// Buffers described per store.
pub const STORE_BUFFERS: usize = 5;
const COMPUTE: [&str; 16] = [
    "float_mad",
    "float_addsub",
    "float_mul",
    "float_divmod",
    "float_cmp",
    "float_math_func",
    "float_other_func",
    "int_mad",
    "int_addsub",
    "int_mul",
    "int_divmod",
    "int_cmp",
    "int_math_func",
    "int_other_func",
    "bool_op",
    "select_op",
];
const ANN_KINDS: [&str; 3] = ["vec", "unroll", "parallel"];
const ANN_FIELDS: [&str; 3] = ["num", "prod", "len"];
const POSITIONS: [&str; 8] = [
    "none",
    "inner_spatial",
    "middle_spatial",
    "outer_spatial",
    "inner_reduce",
    "middle_reduce",
    "outer_reduce",
    "mixed",
];
const GPU: [&str; 8] = [
    "is_gpu",
    "blockIdx_x_len",
    "blockIdx_y_len",
    "blockIdx_z_len",
    "threadIdx_x_len",
    "threadIdx_y_len",
    "threadIdx_z_len",
    "vthread_len",
];
const BUFFER_FIELDS: [&str; 18] = [
    "acc_type.read",
    "acc_type.write",
    "acc_type.read_write",
    "bytes",
    "unique_bytes",
    "lines",
    "unique_lines",
    "reuse_type.loop_multiple_read",
    "reuse_type.serial_multiple_read_write",
    "reuse_type.no_reuse",
    "reuse_dis_iter",
    "reuse_dis_bytes",
    "reuse_ct",
    "bytes_d_reuse_ct",
    "unique_bytes_d_reuse_ct",
    "lines_d_reuse_ct",
    "unique_lines_d_reuse_ct",
    "stride",
];
const CURVE: usize = 10;
const ALLOC: [&str; 4] = [
    "alloc_size",
    "alloc_prod",
    "alloc_outer_prod",
    "alloc_inner_prod",
];
const OTHER: [&str; 3] = ["outer_prod", "num_loops", "auto_unroll_max_step"];
const CACHE_LINE: f64 = 64.0;

/// Floats per store.
pub const STORE_FEATURE_LEN: usize = COMPUTE.len()
    + ANN_KINDS.len() * (ANN_FIELDS.len() + POSITIONS.len())
    + GPU.len()
    + STORE_BUFFERS * BUFFER_FIELDS.len()
    + CURVE
    + ALLOC.len()
    + OTHER.len();

/// The name of every field of a store's row, in order.
pub fn store_feature_names() -> Vec<String> {
    let mut n: Vec<String> = COMPUTE.iter().map(|s| s.to_string()).collect();
    for k in ANN_KINDS {
        n.extend(ANN_FIELDS.iter().map(|f| format!("{k}_{f}")));
        n.extend(POSITIONS.iter().map(|p| format!("{k}_type.{p}")));
    }
    n.extend(GPU.iter().map(|s| s.to_string()));
    for b in 0..STORE_BUFFERS {
        n.extend(BUFFER_FIELDS.iter().map(|f| format!("B{b}.{f}")));
    }
    n.extend((0..CURVE).map(|i| format!("arith_intensity_curve_{i}")));
    n.extend(ALLOC.iter().map(|s| s.to_string()));
    n.extend(OTHER.iter().map(|s| s.to_string()));
    n
}

fn slog(x: f64) -> f32 {
    (x.max(0.0) + 1.0).log2() as f32
}

#[derive(Clone)]
struct Loop {
    var: Var,
    min: i64,
    extent: i64,
    kind: ForKind,
}

/// A store with its context.
struct Site {
    loops: Vec<Loop>,
    stmt: Stmt,
    unroll: i64,
    /// For a buffer allocated in the function: the loops outside its allocation.
    alloc_outer: Option<usize>,
}

#[derive(Default)]
struct Collector {
    stack: Vec<Loop>,
    unroll: Vec<i64>,
    allocs: HashMap<Buffer, usize>,
    sites: Vec<Site>,
}

// Expressions hold no statements: the default walk of them is all a store needs.
impl ExprVisitor for Collector {}

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
                self.stack.push(Loop {
                    var: var.clone(),
                    min: min.as_int().unwrap_or(0),
                    extent: extent.as_int().unwrap_or(1).max(1),
                    kind: *kind,
                });
                walk_stmt(self, s);
                self.stack.pop();
            }
            StmtNode::Attr { key, value, .. } if key == "pragma_auto_unroll_max_step" => {
                self.unroll.push(value.as_int().unwrap_or(0));
                walk_stmt(self, s);
                self.unroll.pop();
            }
            StmtNode::Allocate { buffer, .. } => {
                self.allocs.insert(buffer.clone(), self.stack.len());
                walk_stmt(self, s);
            }
            StmtNode::Store { buffer, .. } => {
                self.sites.push(Site {
                    loops: self.stack.clone(),
                    stmt: s.clone(),
                    unroll: self.unroll.last().copied().unwrap_or(0),
                    alloc_outer: self.allocs.get(buffer).copied(),
                });
                walk_stmt(self, s);
            }
            _ => walk_stmt(self, s),
        }
    }
}

/// One row per store of `func`, in program order (an empty list for a function with no
/// store).
pub fn store_features(func: &PrimFunc) -> Vec<Vec<f32>> {
    let mut c = Collector::default();
    c.visit_stmt(&func.body);
    c.sites.iter().map(site_features).collect()
}

/// Operation counts of an expression, TVM's `MathOpCounter` slots.
fn count_ops(value: &Expr) -> [f64; 16] {
    let mut n = [0.0f64; 16];
    post_order_visit(value, &mut |e| {
        let float = e.dtype().is_float();
        let base = if float { 0 } else { 7 };
        match e.node() {
            ExprNode::Binary { op, a, b } => {
                let is_mul = |x: &Expr| matches!(x.node(), ExprNode::Binary { op: BinOp::Mul, .. });
                match op {
                    BinOp::Add if is_mul(a) || is_mul(b) => {
                        // the product was counted as a mul: it becomes half of a mad
                        n[base] += 1.0;
                        n[base + 2] -= 1.0;
                    }
                    BinOp::Add | BinOp::Sub => n[base + 1] += 1.0,
                    BinOp::Mul => n[base + 2] += 1.0,
                    BinOp::Div | BinOp::Mod | BinOp::FloorDiv | BinOp::FloorMod => {
                        n[base + 3] += 1.0
                    }
                    BinOp::Min | BinOp::Max => n[base + 4] += 1.0,
                }
            }
            ExprNode::Cmp { a, .. } => {
                let b = if a.dtype().is_float() { 0 } else { 7 };
                n[b + 4] += 1.0
            }
            ExprNode::And(..) | ExprNode::Or(..) | ExprNode::Not(..) => n[14] += 1.0,
            ExprNode::Select { .. } => n[15] += 1.0,
            ExprNode::Call { op, .. } => match op {
                Intrinsic::IfThenElse => n[15] += 1.0,
                Intrinsic::Floor
                | Intrinsic::Ceil
                | Intrinsic::Round
                | Intrinsic::RoundEven
                | Intrinsic::Fabs => n[base + 6] += 1.0,
                // four multiply–adds of bytes
                Intrinsic::Dot4U8I8 | Intrinsic::Dot4U8I7 | Intrinsic::Dot4U8I8Sat => {
                    n[base + 1] += 4.0;
                    n[base + 2] += 4.0;
                }
                _ => n[base + 5] += 1.0,
            },
            _ => {}
        }
    });
    n.map(|v| v.max(0.0))
}

/// One access of a buffer by the store: its strides along the loops.
struct Access {
    buffer: Buffer,
    read: bool,
    write: bool,
    /// Per loop: elements moved per iteration.
    stride: Vec<i64>,
    count: usize,
}

fn accesses(stmt: &Stmt, loops: &[Loop]) -> Vec<Access> {
    let StmtNode::Store {
        buffer,
        indices,
        value,
    } = stmt.node()
    else {
        return Vec::new();
    };
    let mut raw: Vec<(Buffer, Vec<Expr>, bool)> = vec![(buffer.clone(), indices.clone(), true)];
    post_order_visit(value, &mut |e| {
        if let ExprNode::Load { buffer, indices } = e.node() {
            raw.push((buffer.clone(), indices.clone(), false));
        }
    });
    let heads: Vec<(Var, i64)> = loops.iter().map(|l| (l.var.clone(), l.min)).collect();
    let mut out: Vec<Access> = Vec::new();
    for (buffer, indices, is_write) in raw {
        if let Some(a) = out.iter_mut().find(|a| a.buffer == buffer) {
            a.read |= !is_write;
            a.write |= is_write;
            a.count += 1;
            continue;
        }
        let stride = access_strides(&buffer, &indices, &heads);
        out.push(Access {
            buffer,
            read: !is_write,
            write: is_write,
            stride,
            count: 1,
        });
    }
    out
}

fn buffer_bytes(b: &Buffer) -> f64 {
    let elems: f64 = b
        .shape()
        .iter()
        .map(|d| d.as_int().unwrap_or(1).max(1) as f64)
        .product();
    elems * b.dtype().bytes() as f64
}

/// Bytes of `a`'s footprint inside loops `from..` (the extents of the loops it moves
/// along, at most the whole buffer).
fn footprint(a: &Access, loops: &[Loop], from: usize) -> f64 {
    let elems: f64 = (from..loops.len())
        .filter(|&k| a.stride[k] != 0)
        .map(|k| loops[k].extent as f64)
        .product();
    (elems * a.buffer.dtype().bytes() as f64).min(buffer_bytes(&a.buffer))
}

/// Elements of one cache line the innermost moving loop walks through consecutively.
fn per_line(a: &Access, loops: &[Loop]) -> (f64, i64) {
    let ele = a.buffer.dtype().bytes().max(1) as f64;
    match (0..loops.len()).rev().find(|&k| a.stride[k] != 0) {
        Some(k) => {
            let s = a.stride[k];
            let step = s as f64 * ele;
            let n = if step < CACHE_LINE {
                (CACHE_LINE / step).min(loops[k].extent as f64).max(1.0)
            } else {
                1.0
            };
            (n, s)
        }
        None => (1.0, 0),
    }
}

/// The loop annotations' features (vectorized, unrolled, parallel): how many loops of
/// the kind, their product, the innermost one's extent, and where that one lies (one-hot
/// by level and by whether it moves the stored element `indices` address).
fn annotation_features(row: &mut Vec<f32>, loops: &[Loop], indices: &[Expr]) {
    let mut in_index = vec![false; loops.len()];
    for ix in indices {
        post_order_visit(ix, &mut |e| {
            if let ExprNode::Var(v) = e.node() {
                if let Some(k) = loops.iter().position(|l| &l.var == v) {
                    in_index[k] = true;
                }
            }
        });
    }
    for kind in [ForKind::Vectorized, ForKind::Unrolled, ForKind::Parallel] {
        let ks: Vec<usize> = (0..loops.len())
            .filter(|&k| loops[k].kind == kind)
            .collect();
        let prod: f64 = ks.iter().map(|&k| loops[k].extent as f64).product();
        row.push(ks.len() as f32);
        row.push(if ks.is_empty() { 0.0 } else { slog(prod) });
        row.push(ks.last().map_or(0.0, |&k| slog(loops[k].extent as f64)));
        let mut pos = [0.0f32; 8];
        let slot = match ks.last() {
            None => 0,
            Some(_) if ks.iter().any(|&k| in_index[k]) && ks.iter().any(|&k| !in_index[k]) => 7,
            Some(&k) => {
                let level = if k + 1 == loops.len() {
                    0
                } else if k == 0 {
                    2
                } else {
                    1
                };
                1 + level + if in_index[k] { 0 } else { 3 }
            }
        };
        pos[slot] = 1.0;
        row.extend(pos);
    }
}

/// The features of one buffer access `a` of the store (TVM's per-buffer block): kind,
/// bytes and lines touched, unique ones, reuse distance and count, stride.
fn access_features(
    row: &mut Vec<f32>,
    a: &Access,
    loops: &[Loop],
    outer_prod: f64,
    all_touched: &dyn Fn(usize) -> f64,
) {
    let ele = a.buffer.dtype().bytes() as f64;
    let bytes = outer_prod * ele * a.count as f64;
    let unique = footprint(a, loops, 0);
    let (n_line, stride) = per_line(a, loops);
    let lines = outer_prod * a.count as f64 / n_line;
    let unique_lines = (unique / CACHE_LINE).max(1.0).min(unique / ele.max(1.0));
    row.push((a.read && !a.write) as u8 as f32);
    row.push((a.write && !a.read) as u8 as f32);
    row.push((a.read && a.write) as u8 as f32);
    row.extend([slog(bytes), slog(unique), slog(lines), slog(unique_lines)]);
    let reuse_loop = (0..loops.len()).rev().find(|&k| a.stride[k] == 0);
    let (kind, dis_iter, dis_bytes, ct) = match reuse_loop {
        Some(k) => {
            let inner: f64 = loops[k + 1..].iter().map(|l| l.extent as f64).product();
            (0, inner, all_touched(k + 1), loops[k].extent as f64)
        }
        None if a.read && a.write => (1, 1.0, 0.0, 1.0),
        None => (2, 0.0, 0.0, 0.0),
    };
    let mut one_hot = [0.0f32; 3];
    one_hot[kind] = 1.0;
    row.extend(one_hot);
    row.extend([slog(dis_iter), slog(dis_bytes), slog(ct)]);
    let d = ct.max(1.0);
    row.extend([
        slog(bytes / d),
        slog(unique / d),
        slog(lines / d),
        slog(unique_lines / d),
    ]);
    row.push(slog(stride as f64));
}

fn site_features(site: &Site) -> Vec<f32> {
    let loops = &site.loops;
    let outer_prod: f64 = loops.iter().map(|l| l.extent as f64).product();
    let mut row: Vec<f32> = Vec::with_capacity(STORE_FEATURE_LEN);
    let StmtNode::Store {
        buffer: stored,
        indices,
        value,
    } = site.stmt.node()
    else {
        return vec![0.0; STORE_FEATURE_LEN];
    };

    // compute
    let ops = count_ops(value);
    row.extend(ops.iter().map(|&c| slog(c * outer_prod)));

    annotation_features(&mut row, loops, indices);

    // GPU
    let bound = |axes: &[ThreadAxis]| -> f64 {
        loops
            .iter()
            .filter(|l| matches!(l.kind, ForKind::ThreadBinding(a) if axes.contains(&a)))
            .map(|l| l.extent as f64)
            .product::<f64>()
    };
    let any_gpu = loops
        .iter()
        .any(|l| matches!(l.kind, ForKind::ThreadBinding(_)));
    row.push(any_gpu as u8 as f32);
    // TVM's order: blockIdx.x/y/z, threadIdx.x/y/z, vthread (`ThreadAxis::ALL`'s)
    for a in ThreadAxis::ALL {
        let has = loops
            .iter()
            .any(|l| matches!(l.kind, ForKind::ThreadBinding(b) if b == a));
        row.push(if has { slog(bound(&[a])) } else { 0.0 });
    }

    // buffer access
    let mut acc = accesses(&site.stmt, loops);
    acc.sort_by(|a, b| {
        let bytes = |x: &Access| x.count as f64 * x.buffer.dtype().bytes() as f64;
        bytes(b).total_cmp(&bytes(a))
    });
    let all_touched = |from: usize| -> f64 { acc.iter().map(|a| footprint(a, loops, from)).sum() };
    for slot in 0..STORE_BUFFERS {
        match acc.get(slot) {
            Some(a) => access_features(&mut row, a, loops, outer_prod, &all_touched),
            None => row.extend([0.0f32; 18]),
        }
    }

    // arithmetic intensity by loop level
    let flops: f64 = ops[..7].iter().sum::<f64>() + ops[0];
    let levels = loops.len().max(1);
    let curve: Vec<f64> = (0..levels)
        .map(|l| {
            let inner: f64 = loops
                .get(l..)
                .unwrap_or(&[])
                .iter()
                .map(|x| x.extent as f64)
                .product();
            let touched = all_touched(l.min(loops.len())).max(1.0);
            flops * inner / touched
        })
        .collect();
    for i in 0..CURVE {
        let x = i as f64 * (levels - 1) as f64 / (CURVE - 1) as f64;
        let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
        let t = x - lo as f64;
        let v = curve[lo] * (1.0 - t) + curve[hi.min(levels - 1)] * t;
        row.push(slog(v));
    }

    // allocation
    match site.alloc_outer {
        Some(n_outer) => {
            let size = buffer_bytes(stored);
            let outer: f64 = loops[..n_outer.min(loops.len())]
                .iter()
                .map(|l| l.extent as f64)
                .product();
            row.extend([
                slog(size),
                slog(size * outer),
                slog(outer),
                slog(outer_prod / outer.max(1.0)),
            ]);
        }
        None => row.extend([0.0f32; 4]),
    }

    row.extend([
        slog(outer_prod),
        loops.len() as f32,
        slog(site.unroll as f64),
    ]);
    debug_assert_eq!(row.len(), STORE_FEATURE_LEN);
    row
}
