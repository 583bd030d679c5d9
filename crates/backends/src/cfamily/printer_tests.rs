//! Unit tests of the printer through the C dialect: int64 offsets, typed refusals,
//! names kept away from C's, comments that stay comments.

use super::*;
use crate::cfamily::CDialect;
use crate::cpu::generate_c;
use tessera_ir::PrimFunc;
use tessera_ir::StorageScope;

fn ivar(name: &str) -> Var {
    Var::int(name)
}

fn serial(v: &Var, extent: i64, body: Stmt) -> Stmt {
    Stmt::for_loop(
        v.clone(),
        Expr::int(0),
        Expr::int(extent),
        ForKind::Serial,
        body,
    )
}

fn vectorized(v: &Var, extent: i64, body: Stmt) -> Stmt {
    Stmt::for_loop(
        v.clone(),
        Expr::int(0),
        Expr::int(extent),
        ForKind::Vectorized,
        body,
    )
}

/// The flat offsets of a buffer with more than 2^31 elements are int64 all the way:
/// no term, and no partial sum, is narrowed back to int32.
#[test]
fn offsets_into_huge_buffers_are_int64() {
    let a = Buffer::global("A", DataType::float32(), &[4, 1 << 30]);
    let (i, j) = (ivar("i"), ivar("j"));
    let scalar = serial(
        &i,
        4,
        serial(
            &j,
            1 << 30,
            Stmt::store(&a, vec![i.to_expr(), j.to_expr()], Expr::float(1.0)),
        ),
    );
    // Along the outer dimension: a gather and a scatter.
    let (r, c) = (ivar("r"), ivar("c"));
    let vector = serial(
        &c,
        1 << 30,
        vectorized(
            &r,
            4,
            Stmt::store(
                &a,
                vec![r.to_expr(), c.to_expr()],
                Expr::load(&a, vec![Expr::int(3) - r.to_expr(), c.to_expr()]),
            ),
        ),
    );
    let f = PrimFunc::new("huge", vec![a], Stmt::seq(vec![scalar, vector]));
    let src = generate_c(&f, 1).unwrap();
    assert!(!src.contains("(int32_t)("), "an offset is narrowed:\n{src}");
    assert!(
        src.contains("A[((((int64_t)(i)) * ((int64_t)1073741824LL)) + ((int64_t)(j)))]"),
        "{src}"
    );
    assert!(
        src.contains("{ v_int64x4 tsr_t"),
        "int64 scatter indices:\n{src}"
    );
    assert!(
        src.contains("({ v_int64x4 tsr_t"),
        "int64 gather indices:\n{src}"
    );

    // A buffer that int32 offsets cover keeps them.
    let b = Buffer::global("B", DataType::float32(), &[4, 1 << 20]);
    let small = serial(
        &i,
        4,
        serial(
            &j,
            1 << 20,
            Stmt::store(&b, vec![i.to_expr(), j.to_expr()], Expr::float(1.0)),
        ),
    );
    let src = generate_c(&PrimFunc::new("small", vec![b], small), 1).unwrap();
    assert!(src.contains("B[((i * 1048576) + j)] = 1.0f;"), "{src}");
}

/// The printer's own refusal of `f` (printed as given: in debug builds the pipeline's
/// verifier refuses most of these first, see `malformed_input_is_refused_by_the_verifier`).
fn refused(f: &PrimFunc, needle: &str) {
    match print_function(&CDialect, &f.name, &f.params, &f.body, None, 1) {
        Err(BackendError::Unsupported { reason, .. }) => {
            assert!(reason.contains(needle), "`{needle}` not in: {reason}")
        }
        Err(e) => panic!("expected Unsupported ({needle}), got {e}"),
        Ok(p) => panic!("expected Unsupported ({needle}), got C:\n{}", p.body),
    }
}

/// In debug builds the verifier checks what lowering gives before any pass, and names
/// the problem.
#[test]
fn malformed_input_is_refused_by_the_verifier() {
    let a = Buffer::global("A", DataType::float32(), &[8]);
    let free = ivar("free_var");
    let f = PrimFunc::new(
        "f",
        vec![a.clone()],
        Stmt::store(&a, vec![free.to_expr()], Expr::float(1.0)),
    );
    match generate_c(&f, 1) {
        Err(BackendError::Verify {
            func,
            pass,
            problem,
        }) if cfg!(debug_assertions) => {
            assert_eq!((func.as_str(), pass), ("f", "lowering"));
            assert!(problem.to_string().contains("free_var"), "{problem}");
        }
        Err(BackendError::Unsupported { reason, .. }) if !cfg!(debug_assertions) => {
            assert!(reason.contains("not bound"), "{reason}")
        }
        other => panic!("expected the verifier's refusal, got {other:?}"),
    }
}

/// What the backend cannot express is refused with a typed error, never left to the C
/// compiler (or worse, compiled into something else).
#[test]
fn unsupported_constructs_are_typed_errors() {
    let f32t = DataType::float32();
    let a = Buffer::global("A", f32t, &[8]);
    let m = Buffer::global("M", DataType::bool(), &[8]);
    let ramp = |lanes: u16| Expr::ramp(Expr::int(0), Expr::int(1), lanes);
    let func = |body: Stmt| PrimFunc::new("f", vec![a.clone(), m.clone()], body);
    let store8 = |v: Expr| Stmt::store(&a, vec![ramp(8)], v);

    refused(
        &func(Stmt::storage_sync(StorageScope::Shared)),
        "storage sync",
    );
    // An if_then_else whose condition varies across lanes (the vectorizer never makes
    // one; a hand-written one must not compile to `vector ? a : b`).
    let lanes_cond = Expr::load(&a, vec![ramp(8)]).gt(Expr::broadcast(Expr::float(0.0), 8));
    refused(
        &func(store8(Expr::if_then_else(
            lanes_cond,
            Expr::load(&a, vec![ramp(8)]),
            Expr::broadcast(Expr::float(0.0), 8),
        ))),
        "vector condition",
    );
    // Arithmetic on bool vectors.
    let mb = Expr::load(&m, vec![ramp(8)]);
    let reversed = Expr::load(&m, vec![Expr::ramp(Expr::int(7), Expr::int(-1), 8)]);
    refused(
        &func(Stmt::store(&m, vec![ramp(8)], Expr::max(mb, reversed))),
        "bool vectors",
    );
    // Vectors GCC cannot type.
    refused(
        &func(Stmt::store(
            &a,
            vec![ramp(3)],
            Expr::broadcast(Expr::float(1.0), 3),
        )),
        "power of two",
    );
    // Mixed lane counts, and a scalar operation on a vector.
    refused(
        &func(store8(
            Expr::load(&a, vec![ramp(8)]) + Expr::load(&a, vec![ramp(4)]),
        )),
        "different lanes",
    );
    refused(
        &func(Stmt::store(
            &a,
            vec![ramp(4)],
            Expr::broadcast(Expr::float(1.0), 8),
        )),
        "different lanes",
    );
    refused(
        &func(Stmt::store(
            &a,
            vec![Expr::int(0)],
            Expr::float(1.0) + Expr::load(&a, vec![ramp(8)]),
        )),
        "vector operands",
    );
    // Unbound variables and buffers that are neither parameters nor allocated.
    let free = ivar("free_var");
    refused(
        &func(Stmt::store(&a, vec![free.to_expr()], Expr::float(1.0))),
        "not bound",
    );
    let stranger = Buffer::global("stranger", f32t, &[8]);
    refused(
        &func(Stmt::store(&stranger, vec![Expr::int(0)], Expr::float(1.0))),
        "neither a parameter nor allocated",
    );
    let i = ivar("i");
    let scoped = Stmt::seq(vec![
        serial(&i, 8, Stmt::store(&a, vec![i.to_expr()], Expr::float(1.0))),
        Stmt::store(&a, vec![i.to_expr()], Expr::float(2.0)),
    ]);
    refused(&func(scoped), "not bound");
    // Wrong number of indices, scalar and vector.
    refused(
        &func(Stmt::store(
            &a,
            vec![Expr::int(0), Expr::int(0)],
            Expr::float(1.0),
        )),
        "accessed with 2 indices",
    );
    refused(
        &func(Stmt::store(
            &a,
            vec![ramp(8), Expr::broadcast(Expr::int(0), 8)],
            Expr::broadcast(Expr::float(1.0), 8),
        )),
        "accessed with 2 indices",
    );
    // Shapes that are not constant.
    let n = ivar("n");
    let sym = Buffer::new("S", f32t, vec![n.to_expr()], StorageScope::Global);
    refused(
        &PrimFunc::new("f", vec![sym.clone()], Stmt::no_op()),
        "not constant",
    );
    refused(
        &func(Stmt::let_stmt(
            n.clone(),
            Expr::int(4),
            Stmt::allocate(sym, Stmt::no_op()),
        )),
        "not constant",
    );
}

/// Variables named like the generator's own names, C keywords or header macros get
/// other names (and a name that keeps its prefix after a suffix does not loop).
#[test]
fn names_are_renamed_away_from_c_and_generated_names() {
    let names = [
        "tsr_t1",
        "v_float32x4",
        "_x",
        "linux",
        "INFINITY",
        "for",
        "a.b",
        "a_b",
    ];
    let bufs: Vec<Buffer> = names
        .iter()
        .map(|n| Buffer::global(*n, DataType::float32(), &[4]))
        .collect();
    let f = PrimFunc::new("f", bufs, Stmt::no_op());
    // On another thread: a renaming that never ends must fail the test, not hang it.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(generate_c(&f, 1));
    });
    let src = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("generate_c returns")
        .unwrap();
    let sig = src
        .lines()
        .find(|l| l.starts_with("static int32_t f_impl("))
        .unwrap();
    for want in [
        "utsr_t1",
        "uv_float32x4",
        "u_x",
        "linux_1",
        "INFINITY_1",
        "for_1",
        "a_b,",
        "a_b_1)",
    ] {
        assert!(sig.contains(want), "{want} not in {sig}");
    }
}

#[test]
fn comments_stay_comments() {
    let a = Buffer::global("A", DataType::float32(), &[1]);
    let body = Stmt::attr(
        "key\nA[0] = 2.0f; \\",
        Expr::int(1),
        Stmt::store(&a, vec![Expr::int(0)], Expr::float(1.0)),
    );
    let src = generate_c(&PrimFunc::new("f", vec![a], body), 1).unwrap();
    assert!(src.contains("  // key A[0] = 2.0f;   = 1\n"), "{src}");
}

/// Four consecutive bytes ORed into a uint32 word print as one load (`cfamily::words`),
/// and a vector of such words whose lanes are 4 bytes apart as one vector load; bytes
/// that are not the four consecutive ones in order stay ORs of byte loads.
#[test]
fn words_of_consecutive_bytes_are_one_load() {
    let (u8t, u32t) = (DataType::uint(8), DataType::uint(32));
    let a = Buffer::global("A", u8t, &[64]);
    let w = Buffer::global("W", u32t, &[16]);
    let j = ivar("j");
    let word = |offsets: [i64; 4]| -> Expr {
        let mut e: Option<Expr> = None;
        for (b, off) in offsets.into_iter().enumerate() {
            let at = j.to_expr() * Expr::int(4) + Expr::int(off);
            let mut v = Expr::cast(u32t, Expr::load(&a, vec![at]));
            if b > 0 {
                v = Expr::call(
                    u32t,
                    Intrinsic::ShiftLeft,
                    vec![v, Expr::int_of(u32t, 8 * b as i64)],
                );
            }
            e = Some(match e {
                None => v,
                Some(x) => Expr::call(u32t, Intrinsic::BitOr, vec![x, v]),
            });
        }
        e.unwrap()
    };
    let store = |offsets| Stmt::store(&w, vec![j.to_expr()], word(offsets));
    let src = |body: Stmt| generate_c(&PrimFunc::new("f", vec![a.clone(), w.clone()], body), 1);
    let scalar = src(serial(&j, 16, store([0, 1, 2, 3]))).unwrap();
    assert!(scalar.contains("W[j] = tsr_word(&A[(j * 4)]);"), "{scalar}");
    assert!(
        scalar.contains("static inline uint32_t tsr_word("),
        "{scalar}"
    );
    let vector = src(vectorized(&j, 16, store([0, 1, 2, 3]))).unwrap();
    assert!(vector.contains("tsr_words_v_uint32x"), "{vector}");
    assert!(!vector.contains("A[tsr_t"), "a gather of bytes: {vector}");
    for offsets in [[0, 1, 2, 4], [1, 0, 2, 3], [0, 1, 2, 2]] {
        let c = src(serial(&j, 16, store(offsets))).unwrap();
        assert!(!c.contains("tsr_word("), "{offsets:?}: {c}");
    }
}

/// `min`/`max` of float vectors by a constant other than NaN print as the vector math's
/// `tsr_vmin`/`tsr_vmax` (one instruction on x86); by a variable, or with the constant
/// first (whose swap could change a zero's sign), as the compare and blend.
#[test]
fn min_and_max_by_a_constant_are_one_instruction() {
    let f32t = DataType::float32();
    let (a, b) = (
        Buffer::global("A", f32t, &[16]),
        Buffer::global("B", f32t, &[16]),
    );
    let i = ivar("i");
    let at = |buf: &Buffer| Expr::load(buf, vec![i.to_expr()]);
    let src = |value: Expr| {
        let body = vectorized(&i, 16, Stmt::store(&b, vec![i.to_expr()], value));
        generate_c(&PrimFunc::new("f", vec![a.clone(), b.clone()], body), 1).unwrap()
    };
    let clip = src(Expr::max(
        Expr::min(at(&a), Expr::float(6.0)),
        Expr::float(0.0),
    ));
    assert!(
        clip.contains("tsr_vmax_v_float32x") && clip.contains("tsr_vmin_v_float32x"),
        "{clip}"
    );
    for value in [
        Expr::max(at(&a), at(&b)),
        Expr::max(Expr::float(0.0), at(&a)),
        Expr::min(at(&a), Expr::float(f64::NAN)),
    ] {
        let c = src(value);
        assert!(!c.contains("tsr_vmax_") && !c.contains("tsr_vmin_"), "{c}");
    }
}
