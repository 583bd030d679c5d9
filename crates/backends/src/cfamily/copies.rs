//! Aligned vector copies, for a language whose only vector code is loading and storing
//! its built-in vector types (CUDA's `float2`/`float4`, which must be aligned to their
//! size): every `vectorized` loop stays a serial loop unless it copies 2 or 4
//! contiguous 32-bit elements from one buffer to another, both offsets provably a
//! multiple of the lane count (a modular-set proof over the loop's other variables,
//! thread indices included). Those loops are left `vectorized` for `vectorize_loops`,
//! which turns each into one vector load and one vector store. This is the cooperative
//! fetching of shared-memory tiles that TVM's CUDA schedules vectorize.

use super::flatten::flat_expr;
use std::collections::HashMap;
use tessera_ir::arith::{simplify, Analyzer};
use tessera_ir::visit::{mutate_stmt_children, substitute, ExprMutator, StmtMutator};
use tessera_ir::{Expr, ExprNode, ForKind, Stmt, StmtNode, Var};

/// The lane counts a copy may have.
pub const COPY_LANES: [i64; 2] = [2, 4];

/// Demotes every vectorized loop of `s` that is not an aligned copy to a serial loop.
pub fn keep_aligned_copies(s: &Stmt) -> Stmt {
    Demote.mutate_stmt(s)
}

struct Demote;

impl ExprMutator for Demote {}

impl StmtMutator for Demote {
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        let s = mutate_stmt_children(self, s);
        match s.node() {
            StmtNode::For {
                var,
                min,
                extent,
                kind: ForKind::Vectorized,
                body,
            } if !is_aligned_copy(var, min, extent, body) => Stmt::for_loop(
                var.clone(),
                min.clone(),
                extent.clone(),
                ForKind::Serial,
                body.clone(),
            ),
            _ => s,
        }
    }
}

/// Whether `for var in min..min+extent { body }` copies `extent` (2 or 4) contiguous,
/// aligned 32-bit elements.
fn is_aligned_copy(var: &Var, min: &Expr, extent: &Expr, body: &Stmt) -> bool {
    let Some(lanes) = extent.as_int().filter(|l| COPY_LANES.contains(l)) else {
        return false;
    };
    if min.as_int() != Some(0) {
        return false;
    }
    let StmtNode::Store {
        buffer,
        indices,
        value,
    } = body.node()
    else {
        return false;
    };
    let ExprNode::Load {
        buffer: src,
        indices: src_indices,
    } = value.node()
    else {
        return false;
    };
    let t = buffer.dtype();
    t == src.dtype()
        && t.is_scalar()
        && t.bits == 32
        && !t.is_bool()
        && aligned_unit_stride(buffer, indices, var, lanes)
        && aligned_unit_stride(src, src_indices, var, lanes)
}

/// Whether the flat offset of the access is `base + var` with `base` a multiple of
/// `lanes` whatever the other variables are.
fn aligned_unit_stride(
    buffer: &tessera_ir::Buffer,
    indices: &[Expr],
    var: &Var,
    lanes: i64,
) -> bool {
    let Ok(flat) = flat_expr(buffer, indices) else {
        return false;
    };
    let zero = HashMap::from([(var.clone(), Expr::int_of(var.dtype(), 0))]);
    let base = simplify(&substitute(&flat, &zero));
    // The offset moves by exactly `var` (no division, modulo or widening cast of it).
    let step = simplify(&(flat - base.clone()));
    let unit = matches!(step.node(), ExprNode::Var(v) if v == var);
    unit && Analyzer::new().modular_set(&base).divisible_by(lanes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_ir::{Buffer, DataType, StorageScope, ThreadAxis};

    /// `for tx in 0..16 (threadIdx.x) { for v in 0..lanes (vectorized) { dst[..] = value } }`
    /// with the destination and source offsets `scale * tx + v`.
    fn fetch(lanes: i64, scale: i64, dtype: DataType, value: impl Fn(Expr) -> Expr) -> Stmt {
        let a = Buffer::global("A", dtype, &[64]);
        let s = Buffer::global("S", dtype, &[64]).with_scope(StorageScope::Shared);
        let (tx, v) = (Var::int("tx"), Var::int("v"));
        let at = tx.to_expr() * scale + v.to_expr();
        let copy = Stmt::store(&s, vec![at.clone()], value(Expr::load(&a, vec![at])));
        let inner = Stmt::for_loop(v, Expr::int(0), Expr::int(lanes), ForKind::Vectorized, copy);
        Stmt::for_loop(
            tx,
            Expr::int(0),
            Expr::int(16),
            ForKind::ThreadBinding(ThreadAxis::ThreadIdxX),
            inner,
        )
    }

    fn inner_kind(s: &Stmt) -> ForKind {
        let StmtNode::For { body, .. } = s.node() else {
            panic!("{s}")
        };
        match body.node() {
            StmtNode::For { kind, .. } => *kind,
            _ => panic!("{s}"),
        }
    }

    #[test]
    fn aligned_copies_stay_vectorized_and_nothing_changes() {
        for lanes in [2, 4] {
            let s = fetch(lanes, 4, DataType::float32(), |x| x);
            let kept = keep_aligned_copies(&s);
            assert_eq!(inner_kind(&kept), ForKind::Vectorized);
            assert!(kept.same_as(&s), "an unchanged statement is the same node");
        }
        let ints = fetch(4, 8, DataType::int32(), |x| x);
        assert_eq!(inner_kind(&keep_aligned_copies(&ints)), ForKind::Vectorized);
    }

    #[test]
    fn everything_else_becomes_serial() {
        let f32 = DataType::float32();
        let cases = [
            ("unaligned", fetch(4, 2, f32, |x| x)),
            ("8 lanes", fetch(8, 8, f32, |x| x)),
            ("arithmetic", fetch(4, 4, f32, |x| x * Expr::float(2.0))),
            ("64-bit", fetch(2, 2, DataType::float64(), |x| x)),
            ("8-bit", fetch(4, 4, DataType::int(8), |x| x)),
        ];
        for (what, s) in cases {
            assert_eq!(
                inner_kind(&keep_aligned_copies(&s)),
                ForKind::Serial,
                "{what}"
            );
        }
    }
}
