//! Index arithmetic over sizes read at run time, computed once per iteration of the
//! loop it depends on rather than in every iteration of the loops inside it.
//!
//! A kernel whose loops run to runtime extents (a range module's) rebuilds its indices
//! from values it reads when it starts (`sizes[k]`): a tile of a batch's rows starts at
//! `(o / c) · radix + …` with `c` the tiles a block computed from a size, a compacted
//! fused loop decomposes by a size. The C compiler does not move those divisions out of
//! the loops inside (the division may trap, and the floor-division helper's branches
//! split the inner loop's body): a register tile's every multiply-add paid three integer
//! divisions: a BERT-style range module at batch 8 ran 1.2–1.3 × its fixed builds on a
//! Zen 4 and at half speed on an Intel Xeon (issue 61).
//!
//! This pass binds each integer expression that reads sizes and divides, and does not
//! change inside a loop around it, to a variable at the start of the body of the
//! innermost loop (or `let`) whose variable it uses — the function's start if none —
//! where at least one loop lies between; smallest parts first, so that each goes as far
//! out as it can and what stays is cheap arithmetic on the variables (which count as
//! sizes for what contains them). Moving it is safe where evaluating it can fail
//! in no iteration: every divisor is provably positive, every read is at constant
//! indices of a buffer the function never writes, and every variable it uses is bound
//! by a loop or `let` (a GPU thread's index is not: nothing under one moves). Kernels of
//! fixed shapes read no sizes: the pass leaves them as they are.

use crate::arith::Analyzer;
use crate::buffer::Buffer;
use crate::expr::{BinOp, Expr, ExprNode, Var};
use crate::stmt::{Stmt, StmtNode};
use crate::visit::{mutate_expr_children, mutate_stmt_children, ExprMutator, StmtMutator};

/// `s` with its loop-invariant size arithmetic bound once per iteration of the loop it
/// depends on (see the module header).
pub fn hoist_size_arith(s: &Stmt) -> Stmt {
    let mut stored = Vec::new();
    Stores(&mut stored).mutate_stmt(s);
    let mut h = Hoist {
        frames: vec![Frame::default()],
        stored,
        an: Analyzer::new(),
        count: 0,
        sized: Vec::new(),
    };
    let body = h.mutate_stmt(s);
    let root = h.frames.pop().expect("the function's frame");
    root.wrap(body)
}

/// The buffers a function writes.
struct Stores<'a>(&'a mut Vec<Buffer>);

impl ExprMutator for Stores<'_> {
    fn mutate_expr(&mut self, e: &Expr) -> Expr {
        e.clone()
    }
}

impl StmtMutator for Stores<'_> {
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        if let StmtNode::Store { buffer, .. } = s.node() {
            if !self.0.contains(buffer) {
                self.0.push(buffer.clone());
            }
        }
        mutate_stmt_children(self, s)
    }
}

/// A scope that binds a variable: a loop's body, a `let`'s body, or the function.
#[derive(Default)]
struct Frame {
    /// The variable it binds (none for the function).
    var: Option<Var>,
    /// Whether it is a loop's body (it runs more than once).
    is_loop: bool,
    /// The values bound at its start, in order (a later one may use an earlier one).
    lets: Vec<(Var, Expr)>,
}

impl Frame {
    fn wrap(self, body: Stmt) -> Stmt {
        self.lets
            .into_iter()
            .rev()
            .fold(body, |s, (v, e)| Stmt::let_stmt(v, e, s))
    }
}

struct Hoist {
    frames: Vec<Frame>,
    stored: Vec<Buffer>,
    an: Analyzer,
    count: usize,
    /// The variables bound here (each to a value computed from sizes).
    sized: Vec<Var>,
}

/// What an expression holds, for deciding whether it moves.
#[derive(Default)]
struct Reads {
    /// It reads a size (a read at constant indices of a buffer never written, or a
    /// variable this pass bound to such a value).
    size: bool,
    /// It divides (a division or remainder of any kind).
    divides: bool,
    /// It holds something that cannot move: a read elsewhere, a call, a divisor not
    /// provably positive.
    pinned: bool,
    /// The variables it uses.
    vars: Vec<Var>,
}

impl Hoist {
    fn reads(&self, e: &Expr) -> Reads {
        let mut r = Reads::default();
        crate::visit::post_order_visit(e, &mut |x| match x.node() {
            ExprNode::Var(v) => {
                r.size |= self.sized.contains(v);
                r.vars.push(v.clone());
            }
            ExprNode::Load { buffer, indices } => {
                let constant = indices.iter().all(|i| i.as_int().is_some());
                r.size |= constant;
                r.pinned |= !constant || self.stored.contains(buffer);
            }
            ExprNode::Binary {
                op: BinOp::Div | BinOp::Mod | BinOp::FloorDiv | BinOp::FloorMod,
                b,
                ..
            } => {
                r.divides = true;
                r.pinned |= self.an.const_int_bound(b).min <= 0;
            }
            ExprNode::Call { .. } => r.pinned = true,
            _ => {}
        });
        r
    }

    /// The frame `e` moves to, where it may move and a loop lies between.
    fn target(&self, e: &Expr) -> Option<usize> {
        let t = e.dtype();
        if !(t.is_scalar() && (t.is_int() || t.is_uint())) {
            return None;
        }
        let r = self.reads(e);
        if !(r.size && r.divides) || r.pinned {
            return None;
        }
        let mut target = 0;
        for v in &r.vars {
            let bound = self
                .frames
                .iter()
                .rposition(|f| f.var.as_ref() == Some(v) || f.lets.iter().any(|(l, _)| l == v))?;
            target = target.max(bound);
        }
        self.frames[target + 1..]
            .iter()
            .any(|f| f.is_loop)
            .then_some(target)
    }

    /// A variable bound to `e` at the start of frame `at` (the one already bound to the
    /// same value there, if any).
    fn bind(&mut self, at: usize, e: &Expr) -> Expr {
        if let Some((v, _)) = self.frames[at].lets.iter().find(|(_, x)| x == e) {
            return v.to_expr();
        }
        let v = Var::new(format!("size_idx{}", self.count), e.dtype());
        self.count += 1;
        self.sized.push(v.clone());
        self.frames[at].lets.push((v.clone(), e.clone()));
        v.to_expr()
    }

    fn scoped(&mut self, var: &Var, is_loop: bool, body: &Stmt) -> Stmt {
        self.frames.push(Frame {
            var: Some(var.clone()),
            is_loop,
            lets: Vec::new(),
        });
        let b = self.mutate_stmt(body);
        let frame = self.frames.pop().expect("pushed above");
        frame.wrap(b)
    }
}

impl ExprMutator for Hoist {
    fn mutate_expr(&mut self, e: &Expr) -> Expr {
        if matches!(e.node(), ExprNode::Var(_) | ExprNode::IntImm { .. }) {
            return e.clone();
        }
        // the smallest parts first, each to the outermost loop it can leave: what is
        // left around them (a tile's row plus its offset) is cheap arithmetic
        let e = mutate_expr_children(self, e);
        match self.target(&e) {
            Some(at) => self.bind(at, &e),
            None => e,
        }
    }
}

impl StmtMutator for Hoist {
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        match s.node() {
            StmtNode::For {
                var,
                min,
                extent,
                kind,
                body,
            } => {
                let (m, e) = (self.mutate_expr(min), self.mutate_expr(extent));
                let b = self.scoped(var, true, body);
                if m.same_as(min) && e.same_as(extent) && b.same_as(body) {
                    return s.clone();
                }
                Stmt::for_loop(var.clone(), m, e, *kind, b)
            }
            StmtNode::Let { var, value, body } => {
                let v = self.mutate_expr(value);
                let b = self.scoped(var, false, body);
                if v.same_as(value) && b.same_as(body) {
                    return s.clone();
                }
                Stmt::let_stmt(var.clone(), v, b)
            }
            _ => mutate_stmt_children(self, s),
        }
    }
}
