//! Vector width legalization: a `Vectorized` loop wider than the machine's vector
//! register (its extent × the widest element it loads or stores, in bytes) becomes an
//! `Unrolled` loop of register-wide `Vectorized` loops, before `unroll_loops` and
//! `vectorize_loops` run.
//!
//! Why: a schedule may vectorize a loop of 16 floats on an AVX2 machine (8 lanes). The C
//! compiler splits such a vector itself, but when a small `local` buffer is accumulated
//! one register at a time and copied out 16 lanes at a time, GCC 12 no longer keeps the
//! buffer in registers: it stored every accumulator to the stack on every reduction
//! step (ResNet's 3×3 convs ran at 60 GFLOPS instead of 110–140). With every vector
//! access register-wide, the widths match whatever the schedule (default, sketch or
//! template) asked for.

use crate::buffer::Buffer;
use crate::expr::{Expr, Var};
use crate::stmt::{ForKind, Stmt, StmtNode};
use crate::visit::{
    mutate_stmt_children, substitute_stmt, walk_stmt, ExprMutator, ExprVisitor, StmtMutator,
    StmtVisitor,
};
use std::collections::HashMap;

/// Splits every `Vectorized` loop with a constant extent wider than `vector_bytes`, or
/// not a power of two, into pieces of the widest power of two of lanes, at most a
/// register's and at least [`MIN_PIECE_LANES`], that divides it (none: the loop stays).
///
/// A tile of 24 output channels on AVX-512 (16 float lanes) is three vectors of 8: left
/// whole, the vectorizer, which takes powers of two only, ran it one element at a time
/// (MobileNet-v2's int8 projections' requantizing epilogues, 56 GMAC/s).
pub fn split_wide_vectors(s: &Stmt, vector_bytes: usize) -> Stmt {
    Splitter { vector_bytes }.mutate_stmt(s)
}

/// The narrowest piece a loop is split into: a vector of fewer lanes does not pay for
/// its packing.
pub const MIN_PIECE_LANES: i64 = 4;

struct Splitter {
    vector_bytes: usize,
}

impl ExprMutator for Splitter {}

impl StmtMutator for Splitter {
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        let s = mutate_stmt_children(self, s);
        let StmtNode::For {
            var,
            min,
            extent,
            kind: ForKind::Vectorized,
            body,
        } = s.node()
        else {
            return s;
        };
        let Some(n) = extent.as_int() else {
            return s;
        };
        let mut widest = WidestElement(0);
        widest.visit_stmt(body);
        if widest.0 == 0 {
            return s;
        }
        let register = (self.vector_bytes / widest.0).max(1) as i64;
        if n <= register && (n as u64).is_power_of_two() {
            return s;
        }
        let mut lanes = 1;
        while lanes * 2 <= register && n % (lanes * 2) == 0 {
            lanes *= 2;
        }
        if lanes < MIN_PIECE_LANES {
            return s;
        }
        let outer = Var::new(format!("{}.reg", var.name()), var.dtype());
        let inner = Var::new(format!("{}.lane", var.name()), var.dtype());
        let value =
            min.clone() + outer.to_expr() * Expr::int_of(var.dtype(), lanes) + inner.to_expr();
        let body = substitute_stmt(body, &HashMap::from([(var.clone(), value)]));
        let zero = Expr::int_of(var.dtype(), 0);
        Stmt::for_loop(
            outer,
            zero.clone(),
            Expr::int_of(var.dtype(), n / lanes),
            ForKind::Unrolled,
            Stmt::for_loop(
                inner,
                zero,
                Expr::int_of(var.dtype(), lanes),
                ForKind::Vectorized,
                body,
            ),
        )
    }
}

/// The widest element, in bytes, among the buffers a statement loads or stores.
struct WidestElement(usize);

impl ExprVisitor for WidestElement {
    fn visit_buffer(&mut self, b: &Buffer) {
        self.0 = self.0.max(b.dtype().bytes());
    }
}

impl StmtVisitor for WidestElement {
    fn visit_stmt(&mut self, s: &Stmt) {
        if let StmtNode::Store { buffer, .. } = s.node() {
            self.visit_buffer(buffer);
        }
        walk_stmt(self, s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DataType;
    use crate::interp::{run, HostBuffer};
    use crate::stmt::PrimFunc;
    use crate::transform::{unroll_loops, vectorize_loops};

    /// `B[i] = A[i] * 2` for i in [min, min + extent), vectorized.
    fn scaled(min: i64, extent: i64, dtype: DataType) -> (Vec<Buffer>, Stmt) {
        let a = Buffer::global("A", dtype, &[64]);
        let b = Buffer::global("B", dtype, &[64]);
        let i = Var::int("i");
        let body = Stmt::for_loop(
            i.clone(),
            Expr::int(min),
            Expr::int(extent),
            ForKind::Vectorized,
            Stmt::store(
                &b,
                vec![i.to_expr()],
                Expr::load(&a, vec![i.to_expr()]) * Expr::constant(dtype, 2.0),
            ),
        );
        (vec![a, b], body)
    }

    fn results(params: &[Buffer], body: &Stmt) -> Vec<HostBuffer> {
        let mut args: Vec<HostBuffer> = params
            .iter()
            .map(|p| {
                let values: Vec<f64> = (0..64).map(|k| k as f64 - 20.0).collect();
                HostBuffer::from_f64(p.dtype(), &[64], &values)
            })
            .collect();
        run(
            &PrimFunc::new("f", params.to_vec(), body.clone()),
            &mut args,
        )
        .unwrap();
        args
    }

    #[test]
    fn a_loop_wider_than_a_register_becomes_register_wide_vectors() {
        // 16 floats at offset 3 on a 32-byte machine: two 8-lane vectors, same results
        let (params, body) = scaled(3, 16, DataType::float32());
        let split = split_wide_vectors(&body, 32);
        let text = split.to_string();
        assert!(text.contains("(i.reg, 0, 2) unrolled"), "{text}");
        assert!(text.contains("(i.lane, 0, 8) vectorized"), "{text}");
        let (code, skipped) = vectorize_loops(&unroll_loops(&split));
        assert!(skipped.is_empty(), "{skipped:?}");
        assert_eq!(results(&params, &code), results(&params, &body));
        // the element width counts: 16 doubles need four registers
        let (_, wide) = scaled(0, 16, DataType::float64());
        let text = split_wide_vectors(&wide, 32).to_string();
        assert!(text.contains("(i.reg, 0, 4) unrolled"), "{text}");
    }

    #[test]
    fn loops_of_no_power_of_two_become_the_widest_pieces_that_divide_them() {
        // (extent, register bytes, pieces, lanes): 24 floats on AVX-512 are three
        // vectors of 8; 12 on AVX2 three of 4; 48 on AVX-512 three of 16
        for (extent, bytes, pieces, lanes) in [(24, 64, 3, 8), (12, 32, 3, 4), (48, 64, 3, 16)] {
            let (params, body) = scaled(1, extent, DataType::float32());
            let split = split_wide_vectors(&body, bytes);
            let text = split.to_string();
            assert!(
                text.contains(&format!("(i.reg, 0, {pieces}) unrolled")),
                "{text}"
            );
            assert!(
                text.contains(&format!("(i.lane, 0, {lanes}) vectorized")),
                "{text}"
            );
            let (code, skipped) = vectorize_loops(&unroll_loops(&split));
            assert!(skipped.is_empty(), "{skipped:?}");
            assert_eq!(results(&params, &code), results(&params, &body));
        }
    }

    #[test]
    fn loops_that_fit_or_do_not_divide_are_the_same_node() {
        // a power of two that fits; 6 and 10, whose widest pieces would be 2 lanes
        for (extent, bytes) in [(8, 32), (16, 64), (6, 32), (10, 64)] {
            let (_, body) = scaled(0, extent, DataType::float32());
            let out = split_wide_vectors(&body, bytes);
            assert!(
                out.same_as(&body),
                "{extent} x f32 on {bytes} bytes:\n{out}"
            );
        }
    }
}
