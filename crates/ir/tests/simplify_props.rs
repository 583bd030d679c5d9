//! Properties of the simplifier and the arithmetic analyses: simplification preserves the
//! value of integer expressions (with and without known variable ranges), constant bounds
//! contain every value, modular sets describe every value. Plus unit tests of single rules.

use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::OnceLock;
use tessera_ir::arith::{simplify, Analyzer, IntBound};
use tessera_ir::interp::eval_int;
use tessera_ir::visit::post_order_visit;
use tessera_ir::{BinOp, CmpOp, DataType, Expr, Var};

// ----- generators -----

/// The three int64 variables every generated expression ranges over.
fn vars() -> &'static [Var; 3] {
    static V: OnceLock<[Var; 3]> = OnceLock::new();
    V.get_or_init(|| {
        let t = DataType::int64();
        [Var::new("x", t), Var::new("y", t), Var::new("z", t)]
    })
}

fn lit(v: i64) -> Expr {
    Expr::int_of(DataType::int64(), v)
}

fn var_expr() -> impl Strategy<Value = Expr> {
    (0usize..3).prop_map(|i| vars()[i].to_expr())
}

fn leaf() -> BoxedStrategy<Expr> {
    prop_oneof![3 => var_expr(), 2 => (-10i64..=10).prop_map(lit)].boxed()
}

fn cmp_op() -> impl Strategy<Value = CmpOp> {
    prop::sample::select(vec![
        CmpOp::Eq,
        CmpOp::Ne,
        CmpOp::Lt,
        CmpOp::Le,
        CmpOp::Gt,
        CmpOp::Ge,
    ])
}

fn div_op() -> impl Strategy<Value = BinOp> {
    prop::sample::select(vec![
        BinOp::FloorDiv,
        BinOp::FloorMod,
        BinOp::Div,
        BinOp::Mod,
    ])
}

/// Random int64 expressions of depth at most 4. Every product has a small constant
/// operand or two leaf operands, so no value overflows for variables in [-60, 60].
fn int_expr() -> BoxedStrategy<Expr> {
    leaf()
        .prop_recursive(4, 48, 3, |inner| {
            let cmp = (cmp_op(), inner.clone(), inner.clone()).prop_map(|(op, a, b)| Expr::cmp(op, a, b)).boxed();
            let cond = prop_oneof![
                4 => cmp.clone(),
                1 => (cmp.clone(), cmp.clone()).prop_map(|(a, b)| Expr::and(a, b)),
                1 => (cmp.clone(), cmp.clone()).prop_map(|(a, b)| Expr::or(a, b)),
                1 => cmp.clone().prop_map(Expr::not),
                1 => cmp.clone().prop_map(|c| Expr::not(Expr::not(c))),
            ];
            prop_oneof![
                3 => (inner.clone(), inner.clone()).prop_map(|(a, b)| a + b),
                3 => (inner.clone(), inner.clone()).prop_map(|(a, b)| a - b),
                2 => (inner.clone(), -8i64..=8, any::<bool>())
                    .prop_map(|(a, c, left)| if left { lit(c) * a } else { a * lit(c) }),
                1 => (leaf(), leaf()).prop_map(|(a, b)| a * b),
                // Constant divisors, negative and zero ones included.
                4 => (div_op(), inner.clone(), -9i64..=9).prop_map(|(op, a, c)| Expr::binary(op, a, lit(c))),
                // The pattern loop splitting produces: (v * c + r) / c and (v * c + r) % c.
                2 => (div_op(), var_expr(), 1i64..=9, inner.clone(), any::<bool>()).prop_map(|(op, v, c, r, first)| {
                    let a = if first { v * lit(c) + r } else { r + v * lit(c) };
                    Expr::binary(op, a, lit(c))
                }),
                // A block index of a finer tile: (v * g + r) / (g * m), r often in [0, g).
                2 => (div_op(), var_expr(), 2i64..=4, 2i64..=3, inner.clone()).prop_map(|(op, v, g, m, r)| {
                    Expr::binary(op, v * lit(g) + r, lit(g * m))
                }),
                // Non-constant divisors.
                1 => (div_op(), inner.clone(), inner.clone()).prop_map(|(op, a, b)| Expr::binary(op, a, b)),
                2 => (inner.clone(), inner.clone()).prop_map(|(a, b)| Expr::min(a, b)),
                2 => (inner.clone(), inner.clone()).prop_map(|(a, b)| Expr::max(a, b)),
                2 => (cond, inner.clone(), inner.clone()).prop_map(|(c, a, b)| Expr::select(c, a, b)),
            ]
        })
        .boxed()
}

fn bindings(vals: &[i64; 3]) -> HashMap<Var, i64> {
    vars().iter().cloned().zip(vals.iter().copied()).collect()
}

/// A range of one of three kinds: entirely negative, straddling zero, non-negative.
fn bound_strategy() -> impl Strategy<Value = (i64, i64)> {
    prop_oneof![
        (-60i64..=-1, 0i64..=20).prop_map(|(lo, w)| (lo, (lo + w).min(-1))),
        (-30i64..=-1, 0i64..=30).prop_map(|(lo, hi)| (lo, hi)),
        (0i64..=30, 0i64..=30).prop_map(|(lo, w)| (lo, lo + w)),
    ]
}

/// A value in `[lo, hi]`, the ends chosen often.
fn sample_in((lo, hi): (i64, i64), s: u32) -> i64 {
    let width = (hi - lo + 1) as u32;
    match s % (width + 2) {
        0 => lo,
        1 => hi,
        k => lo + ((k - 2) % width) as i64,
    }
}

fn bounded_analyzer(ranges: &[(i64, i64); 3]) -> Analyzer {
    let mut an = Analyzer::new();
    for (v, (lo, hi)) in vars().iter().zip(ranges) {
        an.bind_bound(v, IntBound::new(*lo, *hi));
    }
    an
}

/// Checks that the analyzer's bound and modular set of `e` and of every sub-expression
/// hold the value the sub-expression takes under `b`.
fn check_analyses(an: &Analyzer, e: &Expr, b: &HashMap<Var, i64>) -> Result<(), TestCaseError> {
    let mut subs = Vec::new();
    post_order_visit(e, &mut |x| subs.push(x.clone()));
    for s in subs {
        let Some(v) = eval_int(&s, b) else { continue };
        let bound = an.const_int_bound(&s);
        prop_assert!(
            bound.min <= v && v <= bound.max,
            "bound [{}, {}] of `{}` misses its value {} (in `{}`)",
            bound.min,
            bound.max,
            s,
            v,
            e
        );
        let m = an.modular_set(&s);
        if m.coeff == 0 {
            prop_assert_eq!(v, m.base, "modular set {:?} of `{}` (in `{}`)", m, s, e);
        } else {
            prop_assert!(
                (v as i128 - m.base as i128).rem_euclid(m.coeff as i128) == 0,
                "modular set {:?} of `{}` misses its value {} (in `{}`)",
                m,
                s,
                v,
                e
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// With nothing known about the variables, simplification keeps every value.
    #[test]
    fn simplify_preserves_value(e in int_expr(), points in prop::collection::vec(prop::array::uniform3(-50i64..=50), 1..8)) {
        let s = simplify(&e);
        for p in &points {
            let b = bindings(p);
            let Some(want) = eval_int(&e, &b) else { continue };
            let got = eval_int(&s, &b);
            prop_assert_eq!(got, Some(want), "`{}` simplified to `{}` at {:?}", e, s, p);
        }
    }

    /// With the variables' ranges known, simplification keeps every value in those ranges.
    #[test]
    fn simplify_with_bounds_preserves_value(
        e in int_expr(),
        ranges in prop::array::uniform3(bound_strategy()),
        samples in prop::collection::vec(prop::array::uniform3(any::<u32>()), 1..8),
    ) {
        let an = bounded_analyzer(&ranges);
        let s = an.simplify(&e);
        for smp in &samples {
            let p = [sample_in(ranges[0], smp[0]), sample_in(ranges[1], smp[1]), sample_in(ranges[2], smp[2])];
            let b = bindings(&p);
            let Some(want) = eval_int(&e, &b) else { continue };
            let got = eval_int(&s, &b);
            prop_assert_eq!(got, Some(want), "`{}` simplified to `{}` at {:?} within {:?}", e, s, p, ranges);
        }
    }

    /// Constant bounds and modular sets hold every value the expression (and each of its
    /// sub-expressions, and its simplified form) takes within the variables' ranges.
    #[test]
    fn bounds_and_modular_sets_hold(
        e in int_expr(),
        ranges in prop::array::uniform3(bound_strategy()),
        samples in prop::collection::vec(prop::array::uniform3(any::<u32>()), 1..8),
    ) {
        let an = bounded_analyzer(&ranges);
        let s = an.simplify(&e);
        for smp in &samples {
            let p = [sample_in(ranges[0], smp[0]), sample_in(ranges[1], smp[1]), sample_in(ranges[2], smp[2])];
            let b = bindings(&p);
            check_analyses(&an, &e, &b)?;
            check_analyses(&an, &s, &b)?;
        }
    }

    /// Without bounds the analyses hold as well (variables take their type's range).
    #[test]
    fn unbounded_analyses_hold(e in int_expr(), points in prop::collection::vec(prop::array::uniform3(-50i64..=50), 1..8)) {
        let an = Analyzer::new();
        for p in &points {
            check_analyses(&an, &e, &bindings(p))?;
        }
    }
}

// ----- rules, one by one -----

fn ivar(name: &str) -> Var {
    Var::int(name)
}

fn with_bounds(bounds: &[(&Var, i64, i64)]) -> Analyzer {
    let mut an = Analyzer::new();
    for (v, lo, hi) in bounds {
        an.bind_bound(v, IntBound::new(*lo, *hi));
    }
    an
}

#[test]
fn split_loop_index_recombines() {
    let (io, ii) = (ivar("i_o"), ivar("i_i"));
    let an = with_bounds(&[(&io, 0, 7), (&ii, 0, 3)]);
    let fused = &io * 4 + &ii;
    assert_eq!(
        an.simplify(&Expr::floordiv(fused.clone(), Expr::int(4)))
            .to_string(),
        "i_o"
    );
    assert_eq!(
        an.simplify(&Expr::floormod(fused.clone(), Expr::int(4)))
            .to_string(),
        "i_i"
    );
    // Truncating division agrees on non-negative operands.
    assert_eq!(an.simplify(&(fused.clone() / 4)).to_string(), "i_o");
    assert_eq!(an.simplify(&(fused.clone() % 4)).to_string(), "i_i");
    // The inner index first, and with a constant offset that stays within the block.
    let swapped = &ii + &io * 4;
    assert_eq!(
        an.simplify(&Expr::floordiv(swapped, Expr::int(4)))
            .to_string(),
        "i_o"
    );
    let shifted = &io * 8 + &ii + 4;
    assert_eq!(
        an.simplify(&Expr::floordiv(shifted.clone(), Expr::int(8)))
            .to_string(),
        "i_o"
    );
    assert_eq!(
        an.simplify(&Expr::floormod(shifted, Expr::int(8)))
            .to_string(),
        "(i_i + 4)"
    );
    // Without the bound of i_i the division stays.
    let an = with_bounds(&[(&io, 0, 7)]);
    assert_eq!(
        an.simplify(&Expr::floordiv(fused, Expr::int(4)))
            .to_string(),
        "(i_o + floordiv(i_i, 4))"
    );
}

#[test]
fn floordiv_floormod_of_negative_ranges() {
    let x = ivar("x");
    // x in [-8, -5]: floordiv(x, 4) == -2, floormod(x, 4) == x + 8.
    let an = with_bounds(&[(&x, -8, -5)]);
    assert_eq!(
        an.simplify(&Expr::floordiv(x.to_expr(), Expr::int(4)))
            .to_string(),
        "-2"
    );
    assert_eq!(
        an.simplify(&Expr::floormod(x.to_expr(), Expr::int(4)))
            .to_string(),
        "(x + 8)"
    );
    // x in [-2, 1] straddles a multiple of 4: nothing to decide.
    let an = with_bounds(&[(&x, -2, 1)]);
    assert_eq!(
        an.simplify(&Expr::floordiv(x.to_expr(), Expr::int(4)))
            .to_string(),
        "floordiv(x, 4)"
    );
    assert_eq!(
        an.simplify(&Expr::floormod(x.to_expr(), Expr::int(4)))
            .to_string(),
        "floormod(x, 4)"
    );
    // Truncating division of a possibly negative value is left alone.
    let an = with_bounds(&[(&x, -8, -5)]);
    assert_eq!(an.simplify(&(x.to_expr() / 4)).to_string(), "(x / 4)");
}

#[test]
fn nested_divisions() {
    let x = ivar("x");
    let e = Expr::floordiv(Expr::floordiv(x.to_expr(), Expr::int(2)), Expr::int(3));
    assert_eq!(simplify(&e).to_string(), "floordiv(x, 6)");
    let e = Expr::floormod(Expr::floormod(x.to_expr(), Expr::int(12)), Expr::int(4));
    assert_eq!(simplify(&e).to_string(), "floormod(x, 4)");
    // 12 is not a multiple of 5: no rewrite.
    let e = Expr::floormod(Expr::floormod(x.to_expr(), Expr::int(12)), Expr::int(5));
    assert_eq!(simplify(&e).to_string(), "floormod(floormod(x, 12), 5)");
    // A negative inner divisor is not merged.
    let e = Expr::floordiv(Expr::floordiv(x.to_expr(), Expr::int(-2)), Expr::int(3));
    assert_eq!(simplify(&e).to_string(), "floordiv(floordiv(x, -2), 3)");
}

#[test]
fn linear_canonical_forms() {
    let (x, y) = (ivar("x"), ivar("y"));
    assert_eq!(simplify(&(&x + 1 - &x)).to_string(), "1");
    assert_eq!(simplify(&((&x + &y) * 2 - &y)).to_string(), "((x*2) + y)");
    assert_eq!(simplify(&(&y - (&x + 3))).to_string(), "((y - x) - 3)");
    assert_eq!(simplify(&(Expr::int(0) - &x * 3)).to_string(), "(x*-3)");
    assert_eq!(simplify(&(&x * 0 + 7)).to_string(), "7");
    assert!(Analyzer::new().can_prove_equal(&((&x + &y) * 3), &(&y * 3 + &x * 3)));
}

#[test]
fn constant_folding() {
    let i = |v| Expr::int(v);
    assert_eq!(simplify(&Expr::floordiv(i(-7), i(2))).to_string(), "-4");
    assert_eq!(simplify(&Expr::floormod(i(-7), i(2))).to_string(), "1");
    assert_eq!(simplify(&Expr::floordiv(i(7), i(-2))).to_string(), "-4");
    assert_eq!(simplify(&Expr::floormod(i(7), i(-2))).to_string(), "-1");
    assert_eq!(simplify(&(i(-7) / i(2))).to_string(), "-3");
    assert_eq!(simplify(&(i(-7) % i(2))).to_string(), "-1");
    assert_eq!(simplify(&(i(7) % i(-2))).to_string(), "1");
    // Division by a zero constant is left for the program to fail on.
    assert_eq!(
        simplify(&Expr::floordiv(i(7), i(0))).to_string(),
        "floordiv(7, 0)"
    );
    assert_eq!(simplify(&(i(7) % i(0))).to_string(), "(7 % 0)");
    assert_eq!(
        simplify(&(Expr::float(1.5) + Expr::float(2.25))).to_string(),
        "3.75f"
    );
    assert_eq!(
        simplify(&Expr::min(Expr::float(1.5), Expr::float(-2.0))).to_string(),
        "-2f"
    );
    assert_eq!(
        simplify(&Expr::cast(DataType::int(8), i(300))).to_string(),
        "(int8)44"
    );
    assert_eq!(
        simplify(&Expr::cast(DataType::bool(), i(-3))).to_string(),
        "True"
    );
}

#[test]
fn narrow_integer_folding_wraps() {
    // Folding must give what the interpreter computes: int8 arithmetic wraps.
    let b = |v| Expr::int_of(DataType::int(8), v);
    let u = |v| Expr::int_of(DataType::uint(8), v);
    let none = HashMap::new();
    for e in [
        b(100) + b(100),
        b(-100) - b(100),
        b(64) * b(4),
        u(3) - u(5),
        u(200) + u(100),
    ] {
        let s = simplify(&e);
        assert!(s.as_int().is_some(), "`{e}` is not folded: `{s}`");
        assert_eq!(
            eval_int(&s, &none),
            eval_int(&e, &none),
            "`{e}` folded to `{s}`"
        );
    }
    assert_eq!(simplify(&(b(100) + b(100))).to_string(), "(int8)-56");
}

#[test]
fn float_folding_rounds_to_the_type() {
    // Folding must give what the interpreter computes: results rounded to the type.
    let h = |v| Expr::float_of(DataType::float16(), v);
    let folded = simplify(&(h(0.1) + h(0.2)));
    assert_eq!(
        folded.as_float(),
        Some(half::f16::from_f64(0.1 + 0.2).to_f64())
    );
    let f = simplify(&Expr::cast(
        DataType::float32(),
        Expr::int_of(DataType::int64(), 16_777_217),
    ));
    assert_eq!(f.as_float(), Some(16_777_216.0));
    let f = simplify(&Expr::cast(DataType::float16(), Expr::int(2049)));
    assert_eq!(f.as_float(), Some(2048.0));
}

#[test]
fn min_max_rules() {
    let (x, y) = (ivar("x"), ivar("y"));
    assert_eq!(simplify(&Expr::min(x.to_expr(), &x + 1)).to_string(), "x");
    assert_eq!(
        simplify(&Expr::max(x.to_expr(), &x + 1)).to_string(),
        "(x + 1)"
    );
    assert_eq!(simplify(&Expr::max(&x - 2, x.to_expr())).to_string(), "x");
    assert_eq!(
        simplify(&Expr::min(y.to_expr(), y.to_expr())).to_string(),
        "y"
    );
    assert_eq!(
        simplify(&Expr::min(
            Expr::min(x.to_expr(), Expr::int(8)),
            Expr::int(5)
        ))
        .to_string(),
        "min(x, 5)"
    );
    assert_eq!(
        simplify(&Expr::max(
            Expr::max(x.to_expr(), Expr::int(8)),
            Expr::int(5)
        ))
        .to_string(),
        "max(x, 8)"
    );
    assert_eq!(
        simplify(&Expr::min(x.to_expr(), y.to_expr())).to_string(),
        "min(x, y)"
    );
    // Decided by bounds.
    let an = with_bounds(&[(&x, 0, 9), (&y, 10, 20)]);
    assert_eq!(
        an.simplify(&Expr::min(x.to_expr(), y.to_expr()))
            .to_string(),
        "x"
    );
    assert_eq!(
        an.simplify(&Expr::max(x.to_expr(), y.to_expr()))
            .to_string(),
        "y"
    );
    assert_eq!(
        an.simplify(&Expr::min(&x + 1, Expr::int(10))).to_string(),
        "(x + 1)"
    );
}

#[test]
fn comparisons_and_logic() {
    let (ii, x) = (ivar("i_i"), ivar("x"));
    let an = with_bounds(&[(&ii, 0, 3)]);
    assert_eq!(an.simplify(&ii.to_expr().lt(4)).to_string(), "True");
    assert_eq!(an.simplify(&ii.to_expr().ge(0)).to_string(), "True");
    assert_eq!(an.simplify(&ii.to_expr().gt(3)).to_string(), "False");
    assert_eq!(an.simplify(&ii.to_expr().eq(5)).to_string(), "False");
    assert_eq!(an.simplify(&ii.to_expr().lt(3)).to_string(), "(i_i < 3)");
    assert!(an.can_prove(&(&ii * 2 + 1).le(7)));
    assert!(!an.can_prove(&(&ii * 2 + 1).le(6)));
    assert_eq!(simplify(&(&x + 1).gt(x.to_expr())).to_string(), "True");
    assert_eq!(simplify(&x.to_expr().ne(x.to_expr())).to_string(), "False");
    assert_eq!(simplify(&x.to_expr().eq(&x * 1)).to_string(), "True");
    let c = x.to_expr().lt(3);
    assert_eq!(
        simplify(&Expr::and(c.clone(), Expr::bool(true))).to_string(),
        "(x < 3)"
    );
    assert_eq!(
        simplify(&Expr::and(c.clone(), Expr::bool(false))).to_string(),
        "False"
    );
    assert_eq!(
        simplify(&Expr::or(Expr::bool(false), c.clone())).to_string(),
        "(x < 3)"
    );
    assert_eq!(
        simplify(&Expr::or(c.clone(), Expr::bool(true))).to_string(),
        "True"
    );
    assert_eq!(
        simplify(&Expr::not(Expr::not(c.clone()))).to_string(),
        "(x < 3)"
    );
    assert_eq!(
        simplify(&Expr::and(c.clone(), c.clone())).to_string(),
        "(x < 3)"
    );
    let sel = Expr::select(an.simplify(&ii.to_expr().lt(4)), x.to_expr(), Expr::int(0));
    assert_eq!(simplify(&sel).to_string(), "x");
    assert_eq!(
        simplify(&Expr::select(c.clone(), &x + 1, Expr::int(1) + x.to_expr())).to_string(),
        "(x + 1)"
    );
    let ite = Expr::if_then_else(Expr::bool(false), x.to_expr(), Expr::int(2));
    assert_eq!(simplify(&ite).to_string(), "2");
}

#[test]
fn modular_facts() {
    let (x, y) = (ivar("x"), ivar("y"));
    let an = Analyzer::new();
    let m = an.modular_set(&(&x * 4 + 2));
    assert_eq!((m.coeff, m.base), (4, 2));
    let m = an.modular_set(&(&x * 6 + &y * 4 + 1));
    assert_eq!((m.coeff, m.base), (2, 1));
    let m = an.modular_set(&Expr::floordiv(&x * 8 + 4, Expr::int(4)));
    assert_eq!((m.coeff, m.base), (2, 1));
    let m = an.modular_set(&Expr::floormod(&x * 6 + 4, Expr::int(4)));
    assert_eq!((m.coeff, m.base), (2, 0));
    assert!(an.modular_set(&(&x * 12 - 6)).divisible_by(3));
    assert!(!an.modular_set(&(&x * 12 - 6)).divisible_by(4));
    // (x*4 + 2) % 2 style facts.
    assert_eq!(
        simplify(&Expr::floormod(&x * 4 + 2, Expr::int(2))).to_string(),
        "0"
    );
    assert_eq!(
        simplify(&Expr::floormod(&x * 4 + 3, Expr::int(2))).to_string(),
        "1"
    );
    assert_eq!(
        simplify(&Expr::floormod(&x * 4 - 3, Expr::int(2))).to_string(),
        "1"
    );
    assert_eq!(
        simplify(&Expr::floordiv(&x * 4 + 2, Expr::int(2))).to_string(),
        "((x*2) + 1)"
    );
    // Through an atom that is not linear: (x*4)*y + 3 is odd.
    let e = Expr::floormod((&x * 4) * y.to_expr() + 3, Expr::int(2));
    assert_eq!(simplify(&e).to_string(), "1");
    // A non-negative truncating remainder agrees with the flooring one.
    let an = with_bounds(&[(&x, 0, 100)]);
    assert_eq!(an.simplify(&((&x * 4 + 2) % 2)).to_string(), "0");
}

#[test]
fn bounds_of_operations() {
    let (x, y) = (ivar("x"), ivar("y"));
    let an = with_bounds(&[(&x, -5, 7), (&y, 2, 4)]);
    let b = |e: Expr| {
        let r = an.const_int_bound(&e);
        (r.min, r.max)
    };
    assert_eq!(b(&x + &y), (-3, 11));
    assert_eq!(b(&x - &y), (-9, 5));
    assert_eq!(b(&x * &y), (-20, 28));
    assert_eq!(b(Expr::floordiv(x.to_expr(), y.to_expr())), (-3, 3));
    assert_eq!(b(&x / &y), (-2, 3));
    assert_eq!(b(Expr::floormod(x.to_expr(), y.to_expr())), (0, 3));
    assert_eq!(b(&x % &y), (-3, 3));
    assert_eq!(b(Expr::min(x.to_expr(), y.to_expr())), (-5, 4));
    assert_eq!(b(Expr::max(x.to_expr(), y.to_expr())), (2, 7));
    assert_eq!(b(x.to_expr().lt(y.to_expr())), (0, 1));
    assert_eq!(b(Expr::floordiv(x.to_expr(), Expr::int(-2))), (-4, 2));
}

#[test]
fn bounds_of_narrowing_casts() {
    let x = ivar("x");
    let an = with_bounds(&[(&x, 0, 300)]);
    // int8(x) wraps for x > 127: every int8 value is possible.
    let b = an.const_int_bound(&Expr::cast(DataType::int(8), x.to_expr()));
    assert_eq!((b.min, b.max), (-128, 127));
    // bool(x) for x in [2, 5] is always true; the bound must not be empty.
    let an = with_bounds(&[(&x, 2, 5)]);
    let b = an.const_int_bound(&Expr::cast(DataType::bool(), x.to_expr()));
    assert!(
        b.min <= 1 && 1 <= b.max,
        "bound [{}, {}] misses 1",
        b.min,
        b.max
    );
    // A widening cast keeps the bound.
    let b = an.const_int_bound(&Expr::cast(DataType::int64(), x.to_expr()));
    assert_eq!((b.min, b.max), (2, 5));
    // The simplifier must not use a wrong bound: int8(x) < 0 is possible for x in [0, 300].
    let an = with_bounds(&[(&x, 0, 300)]);
    let c = Expr::cast(DataType::int(8), x.to_expr()).ge(Expr::int_of(DataType::int(8), 0));
    assert_ne!(an.simplify(&c).to_string(), "True");
}

#[test]
fn extreme_bounds_do_not_panic() {
    let x = Var::new("x", DataType::int64());
    let an = with_bounds(&[(&x, i64::MIN + 1, i64::MIN + 1)]);
    for c in [2, 3, 7] {
        let e = Expr::floormod(x.to_expr(), lit(c));
        let s = an.simplify(&e);
        let b: HashMap<Var, i64> = [(x.clone(), i64::MIN + 1)].into_iter().collect();
        assert_eq!(
            eval_int(&s, &b),
            eval_int(&e, &b),
            "`{e}` simplified to `{s}`"
        );
        let e = Expr::floordiv(x.to_expr(), lit(c));
        let s = an.simplify(&e);
        assert_eq!(
            eval_int(&s, &b),
            eval_int(&e, &b),
            "`{e}` simplified to `{s}`"
        );
    }
}

#[test]
fn modular_sets_of_extreme_products() {
    // x * 2^62 * -2 == x * -2^63: every value is a multiple of 2^63 (0 or i64::MIN).
    let x = Var::new("x", DataType::int64());
    let e = x.to_expr() * lit(1 << 62) * lit(-2);
    let m = Analyzer::new().modular_set(&e);
    for xv in [1, 2, 3, -1] {
        let v = eval_int(&e, &[(x.clone(), xv)].into_iter().collect()).unwrap();
        assert!(
            m.coeff != 0 && (v as i128 - m.base as i128).rem_euclid(m.coeff as i128) == 0,
            "{m:?} misses {v}"
        );
    }
}

#[test]
fn simplify_stmt_uses_loop_ranges() {
    use tessera_ir::arith::simplify_stmt;
    use tessera_ir::{Buffer, ForKind, Stmt};
    let a = Buffer::global("A", DataType::float32(), &[32]);
    let (io, ii) = (ivar("i_o"), ivar("i_i"));
    let idx = &io * 4 + &ii;
    let body = Stmt::if_then(
        idx.lt(32),
        Stmt::store(
            &a,
            vec![Expr::floormod(idx.clone(), Expr::int(4))],
            Expr::float(1.0),
        ),
    );
    let s = Stmt::for_loop(
        io.clone(),
        Expr::int(0),
        Expr::int(8),
        ForKind::Serial,
        Stmt::for_loop(
            ii.clone(),
            Expr::int(0),
            Expr::int(4),
            ForKind::Serial,
            body,
        ),
    );
    let got = simplify_stmt(&s).to_string();
    assert_eq!(
        got,
        "for (i_o, 0, 8) {\n  for (i_i, 0, 4) {\n    A[i_i] = 1f\n  }\n}\n"
    );
    // A loop of zero iterations disappears.
    let empty = Stmt::for_loop(
        io,
        Expr::int(0),
        Expr::int(0),
        ForKind::Serial,
        Stmt::evaluate(Expr::int(1)),
    );
    assert!(simplify_stmt(&empty).is_no_op());
}

// ----- whole statements -----

/// `for x in [x0, x0+nx): for y in [y0, y0+ny): let z = v { if c { B[...] = .. } else { B[...] = .. } }`
/// over an int64 buffer `B[16]`, indices taken modulo 16, everything else random.
fn loop_program() -> impl Strategy<Value = (tessera_ir::PrimFunc, Vec<i64>)> {
    use tessera_ir::{Buffer, ForKind, PrimFunc, Stmt};
    let ends = (-10i64..=10, 0i64..=6);
    let cond = (cmp_op(), int_expr(), int_expr()).prop_map(|(op, a, b)| Expr::cmp(op, a, b));
    (
        ends.clone(),
        ends,
        int_expr(),
        cond,
        [int_expr(), int_expr(), int_expr(), int_expr()],
        prop::collection::vec(-5i64..5, 16),
    )
        .prop_map(|((x0, nx), (y0, ny), zv, c, [i1, v1, i2, v2], init)| {
            let b = Buffer::global("B", DataType::int64(), &[16]);
            let [x, y, z] = vars().clone();
            let idx = |e: Expr| vec![Expr::floormod(e, lit(16))];
            let branch = Stmt::if_then_else(
                c,
                Stmt::store(&b, idx(i1), v1),
                Stmt::store(&b, idx(i2), v2),
            );
            let body = Stmt::for_loop(
                x,
                lit(x0),
                lit(nx),
                ForKind::Serial,
                Stmt::for_loop(
                    y,
                    lit(y0),
                    lit(ny),
                    ForKind::Serial,
                    Stmt::let_stmt(z, zv, branch),
                ),
            );
            (PrimFunc::new("f", vec![b], body), init)
        })
}

/// Checks that `pass` keeps what the loop program `f` computes from `init` (a program
/// the interpreter refuses, e.g. one dividing by zero, is skipped).
fn assert_pass_preserves(
    f: &tessera_ir::PrimFunc,
    init: &[i64],
    pass: fn(&tessera_ir::Stmt) -> tessera_ir::Stmt,
) -> Result<(), TestCaseError> {
    use tessera_ir::interp::{run, HostBuffer};
    let values: Vec<f64> = init.iter().map(|v| *v as f64).collect();
    let mut want = [HostBuffer::from_f64(DataType::int64(), &[16], &values)];
    if run(f, &mut want).is_err() {
        return Ok(());
    }
    let g = tessera_ir::PrimFunc {
        body: pass(&f.body),
        ..f.clone()
    };
    let mut got = [HostBuffer::from_f64(DataType::int64(), &[16], &values)];
    let r = run(&g, &mut got);
    prop_assert!(
        r.is_ok(),
        "rewritten program fails: {:?}\n{}\n=>\n{}",
        r,
        f,
        g
    );
    prop_assert_eq!(&got[0].data, &want[0].data, "\n{}\n=>\n{}", f, g);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// `simplify_stmt`, which uses the loop and let ranges, keeps what a program computes.
    #[test]
    fn simplify_stmt_preserves_programs((f, init) in loop_program()) {
        assert_pass_preserves(&f, &init, tessera_ir::arith::simplify_stmt)?;
    }

    /// `lower_floor_div`, which turns floor divisions it proves non-negative into C's
    /// truncating ones, keeps what a program computes (the interpreter runs `/` and `%`
    /// truncating, as C does).
    #[test]
    fn lower_floor_div_preserves_programs((f, init) in loop_program()) {
        assert_pass_preserves(&f, &init, tessera_ir::transform::lower_floor_div)?;
    }
}

#[test]
fn floor_division_of_loop_indices_becomes_truncating() {
    use tessera_ir::{Buffer, ForKind, Stmt, StorageScope};
    let t = DataType::int32();
    let out = Buffer::new("out", t, vec![Expr::int_of(t, 8)], StorageScope::Global);
    let i = Var::new("i", t);
    let j = Var::new("j", t);
    let idx = |e: Expr| Expr::binary(BinOp::FloorMod, e, Expr::int_of(t, 8));
    // i in [0, 10): floordiv(i, 3) and floormod(i, 3) are C's; (i - 5) may be negative
    let body = Stmt::seq(vec![
        Stmt::store(
            &out,
            vec![idx(i.to_expr())],
            Expr::binary(BinOp::FloorDiv, i.to_expr(), Expr::int_of(t, 3)),
        ),
        Stmt::store(
            &out,
            vec![idx(j.to_expr())],
            Expr::binary(BinOp::FloorMod, i.to_expr() - 5, Expr::int_of(t, 3)),
        ),
    ]);
    let s = Stmt::for_loop(
        i.clone(),
        Expr::int_of(t, 0),
        Expr::int_of(t, 10),
        ForKind::Serial,
        Stmt::for_loop(
            j.clone(),
            Expr::int_of(t, 0),
            Expr::int_of(t, 4),
            ForKind::Serial,
            body,
        ),
    );
    let text = tessera_ir::transform::lower_floor_div(&s).to_string();
    assert!(
        text.contains("(i / 3)") && text.contains("(i % 8)") && text.contains("(j % 8)"),
        "{text}"
    );
    assert!(text.contains("floormod((i - 5), 3)"), "{text}");
    assert!(!text.contains("floordiv"), "{text}");
}

#[test]
fn a_lane_index_into_wider_blocks_divides_its_tile_index_instead() {
    // co = 8·o + i in blocks of 16: floordiv(co, 16) == floordiv(o, 2),
    // floormod(co, 16) == floormod(o, 2)·8 + i
    let (o, i) = (ivar("o"), ivar("i"));
    let an = with_bounds(&[(&o, 0, 23), (&i, 0, 7)]);
    let co = o.to_expr() * lit(8) + i.to_expr();
    let div = an.simplify(&Expr::floordiv(co.clone(), lit(16)));
    let rem = an.simplify(&Expr::floormod(co.clone(), lit(16)));
    assert_eq!(div.to_string(), "floordiv(o, 2)");
    assert_eq!(rem.to_string(), "((floormod(o, 2)*8) + i)");
    // a remainder that can reach the next multiple of 8 keeps the division
    let wide = with_bounds(&[(&o, 0, 23), (&i, 0, 8)]);
    let kept = wide.simplify(&Expr::floordiv(co, lit(16)));
    assert!(
        kept.to_string().starts_with("floordiv(((o*8) + i), "),
        "{kept}"
    );
}
