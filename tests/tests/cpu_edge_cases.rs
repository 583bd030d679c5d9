//! The CPU backend on the corners of the IR: vector masks and bools, narrow and signed
//! integers, float16, NaN, literals, names, scalar statements, allocations, parallel and
//! unrolled loops. Each kernel is built by hand (or through `tessera_te`), compiled, run
//! natively and compared with the reference interpreter on chosen inputs; several checks
//! share one kernel so that each test runs the C compiler once.

use std::sync::mpsc;
use std::time::Duration;
use tessera_backends::cpu::generate_c;
use tessera_backends::{Backend, CpuBackend, Target};
use tessera_ir::interp::{self, HostBuffer};
use tessera_ir::{Buffer, DataType, Expr, ForKind, Intrinsic, PrimFunc, Stmt, Var};
use tessera_runtime::{Module, NDArray};

// ----- building kernels -----

fn f32t() -> DataType {
    DataType::float32()
}

fn buf(name: &str, t: DataType, shape: &[i64]) -> Buffer {
    Buffer::global(name, t, shape)
}

/// `for (v = min; v < min + extent; ++v) body(v)` with an int32 variable.
fn for_(kind: ForKind, name: &str, min: i64, extent: i64, body: impl FnOnce(Expr) -> Stmt) -> Stmt {
    let v = Var::int(name);
    let b = body(v.to_expr());
    Stmt::for_loop(v, Expr::int(min), Expr::int(extent), kind, b)
}

/// A vectorized loop over `0..lanes`.
fn vloop(lanes: i64, body: impl FnOnce(Expr) -> Stmt) -> Stmt {
    for_(ForKind::Vectorized, "i", 0, lanes, body)
}

fn ld(b: &Buffer, i: Expr) -> Expr {
    Expr::load(b, vec![i])
}

fn st(b: &Buffer, i: Expr, v: Expr) -> Stmt {
    Stmt::store(b, vec![i], v)
}

fn shape_of(b: &Buffer) -> Vec<usize> {
    b.const_shape()
        .unwrap()
        .iter()
        .map(|d| *d as usize)
        .collect()
}

fn host(b: &Buffer, values: &[f64]) -> HostBuffer {
    HostBuffer::from_f64(b.dtype(), &shape_of(b), values)
}

fn zeros(b: &Buffer) -> HostBuffer {
    HostBuffer::zeros(b.dtype(), &shape_of(b))
}

// ----- running them -----

fn close(got: f64, want: f64, t: DataType, exact: bool) -> bool {
    if got.is_nan() || want.is_nan() {
        return got.is_nan() && want.is_nan();
    }
    if exact || !t.is_float() {
        // Exactly, the sign of zero included.
        return got == want && got.is_sign_negative() == want.is_sign_negative();
    }
    let rel = match t.bits {
        16 => 1e-3,
        32 => 1e-5,
        _ => 1e-12,
    };
    got == want || (got - want).abs() <= rel * (1.0 + want.abs())
}

/// Compiles `func`, runs it natively and in the interpreter on `args` (every parameter,
/// outputs included) and compares every buffer afterwards; `exact` compares floats bit
/// for bit (but any NaN matches any NaN), else within a tolerance of their type.
fn check(func: &PrimFunc, args: &[HostBuffer], exact: bool) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let artifact = CpuBackend::new(Target::cpu())
        .build(func, dir.path())
        .map_err(|e| format!("{e}\n{func}"))?;
    let source = std::fs::read_to_string(&artifact.source_path).unwrap_or_default();
    let module = Module::load(&artifact).map_err(|e| e.to_string())?;
    let mut want = args.to_vec();
    interp::run(func, &mut want).map_err(|e| e.to_string())?;
    let mut native: Vec<NDArray> = args
        .iter()
        .map(|h| NDArray::from_host_buffer(h).unwrap())
        .collect();
    {
        let mut refs: Vec<&mut NDArray> = native.iter_mut().collect();
        module.call(&mut refs).map_err(|e| e.to_string())?;
    }
    let mut errors = Vec::new();
    for (k, (got, want)) in native.iter().zip(&want).enumerate() {
        let got = got.to_host_buffer();
        let bad: Vec<String> = got
            .data
            .iter()
            .zip(&want.data)
            .enumerate()
            .filter(|(_, (g, w))| !close(g.as_f64(), w.as_f64(), want.dtype, exact))
            .map(|(i, (g, w))| {
                format!("[{i}] native {:?} interpreter {:?}", g.as_f64(), w.as_f64())
            })
            .collect();
        if !bad.is_empty() {
            errors.push(format!("`{}`: {}", func.params[k].name(), bad.join(", ")));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!("{}\n{func}\n{source}", errors.join("\n")))
    }
}

/// A kernel with `inputs` (name, type, values) and one output per `(name, type, body)`
/// where `body` computes the output's element `i` of `n` in a vectorized loop.
struct Kernel {
    params: Vec<Buffer>,
    args: Vec<HostBuffer>,
    body: Vec<Stmt>,
}

impl Kernel {
    fn new() -> Self {
        Kernel {
            params: Vec::new(),
            args: Vec::new(),
            body: Vec::new(),
        }
    }
    fn input(&mut self, name: &str, t: DataType, values: &[f64]) -> Buffer {
        let b = buf(name, t, &[values.len() as i64]);
        self.args.push(host(&b, values));
        self.params.push(b.clone());
        b
    }
    fn output(&mut self, name: &str, t: DataType, n: i64) -> Buffer {
        let b = buf(name, t, &[n]);
        self.args.push(zeros(&b));
        self.params.push(b.clone());
        b
    }
    /// `name[i] = value(i)` for `i` in a vectorized loop over `0..n`.
    fn vec_out(&mut self, name: &str, t: DataType, n: i64, value: impl FnOnce(&Expr) -> Expr) {
        let o = self.output(name, t, n);
        self.body.push(vloop(n, |i| st(&o, i.clone(), value(&i))));
    }
    fn func(&self) -> PrimFunc {
        PrimFunc::new("kernel", self.params.clone(), Stmt::seq(self.body.clone()))
    }
    fn check(&self, exact: bool) {
        check(&self.func(), &self.args, exact).unwrap();
    }
}

/// `generate_c` on another thread, so that a generator that never returns fails the
/// test instead of hanging it.
fn generate_c_within(func: &PrimFunc, secs: u64) -> Result<String, String> {
    let (tx, rx) = mpsc::channel();
    let f = func.clone();
    std::thread::spawn(move || {
        let _ = tx.send(generate_c(&f, 2));
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err(format!("generate_c did not return within {secs} s")),
    }
}

// ----- vector masks and bools -----

const VA: [f64; 8] = [-1.5, 0.0, 2.0, -0.25, 3.0, 0.5, -4.0, 1.0];
const VB: [f64; 8] = [1.0, 0.0, -2.0, -0.5, 3.0, 1.5, -3.0, 0.0];
const VM: [f64; 8] = [1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0];

#[test]
fn vector_comparisons_cast_to_numbers_are_one_where_true() {
    let mut k = Kernel::new();
    let a = k.input("A", f32t(), &VA);
    let b = k.input("B", f32t(), &VB);
    let x = |i: &Expr| ld(&a, i.clone());
    let y = |i: &Expr| ld(&b, i.clone());
    // GCC's comparisons give -1 for true; the interpreter's bools are 1.
    k.vec_out("f32", f32t(), 8, |i| Expr::cast(f32t(), x(i).gt(y(i))));
    k.vec_out("i32", DataType::int32(), 8, |i| {
        Expr::cast(DataType::int32(), x(i).le(y(i))) * 5i64
    });
    k.vec_out("f64", DataType::float64(), 8, |i| {
        Expr::cast(DataType::float64(), Expr::and(x(i).ge(0.0), y(i).ne(0.0)))
    });
    k.check(true);
}

#[test]
fn vector_comparisons_and_bools_have_the_interpreters_values() {
    let mut k = Kernel::new();
    let b1 = DataType::bool();
    let a = k.input("A", f32t(), &VA);
    let b = k.input("B", f32t(), &VB);
    let m = k.input("M", b1, &VM);
    let d = k.input("D", DataType::float64(), &VA);
    let l = k.input("L", DataType::int64(), &[3., -1., 5., 2., 0., 7., -9., 3.]);
    let c = k.input("C", DataType::int(8), &[1., -1., 0., 5., -5., 2., -2., 0.]);
    let (x, y, mm) = (
        |i: &Expr| ld(&a, i.clone()),
        |i: &Expr| ld(&b, i.clone()),
        |i: &Expr| ld(&m, i.clone()),
    );
    k.vec_out("cast_bool_i32", DataType::int32(), 8, |i| {
        Expr::cast(DataType::int32(), x(i).gt(0.0)) + Expr::cast(DataType::int32(), mm(i))
    });
    // Bool buffers: stores of comparisons, loads as conditions, logic with masks.
    k.vec_out("store_cmp", b1, 8, |i| x(i).gt(y(i)));
    k.vec_out("load_cond", f32t(), 8, |i| Expr::select(mm(i), x(i), y(i)));
    k.vec_out("logic", b1, 8, |i| {
        Expr::or(Expr::and(mm(i), x(i).gt(0.0)), Expr::not(y(i).gt(0.0)))
    });
    k.vec_out("not_bool", b1, 8, |i| Expr::not(mm(i)));
    k.vec_out("bool_eq", b1, 8, |i| mm(i).eq(x(i).gt(0.0)));
    // Bools order as 0 < 1 (a mask's true would be -1).
    k.vec_out("bool_lt", b1, 8, |i| mm(i).lt(x(i).ge(0.0)));
    k.vec_out("cast_to_bool", b1, 8, |i| Expr::cast(b1, x(i)));
    k.vec_out("bool_to_u8", DataType::uint(8), 8, |i| {
        Expr::select(
            x(i).lt(y(i)),
            Expr::cast(DataType::uint(8), mm(i)),
            Expr::cast(DataType::uint(8), x(i).gt(0.0)),
        )
    });
    k.vec_out("bool_select", b1, 8, |i| {
        Expr::select(x(i).gt(y(i)), mm(i), x(i).lt(0.0))
    });
    // Gathers from and scatters into bool buffers.
    let scattered = k.output("scatter_bool", b1, 8);
    k.body.push(vloop(8, |i| {
        st(
            &scattered,
            Expr::int(7) - i.clone(),
            ld(&m, Expr::floordiv(i.clone(), Expr::int(2)) * 2i64),
        )
    }));
    // Masks of 64-, 32- and 8-bit lanes combined.
    k.vec_out("mixed_masks", DataType::int(16), 8, |i| {
        let c8 = ld(&c, i.clone());
        let cond = Expr::or(
            Expr::and(
                ld(&d, i.clone()).gt(0.0),
                Expr::not(c8.gt(Expr::int_of(DataType::int(8), 0))),
            ),
            Expr::and(
                ld(&l, i.clone()).lt(Expr::int_of(DataType::int64(), 3)),
                x(i).lt(1.0),
            ),
        );
        Expr::select(
            cond,
            Expr::int_of(DataType::int(16), 7),
            Expr::int_of(DataType::int(16), -7),
        )
    });
    // A scalar condition meeting vector ones (broadcast to a vector of bools).
    let rows = k.output("scalar_and_vector", f32t(), 16);
    k.body.push(for_(ForKind::Serial, "j", 0, 2, |j| {
        vloop(8, |i| {
            st(
                &rows,
                j.clone() * 8i64 + i.clone(),
                Expr::select(
                    Expr::and(j.gt(Expr::int(0)), x(&i).gt(0.0)),
                    x(&i),
                    Expr::float(9.0),
                ),
            )
        })
    }));
    k.check(true);
}

#[test]
fn stores_convert_values_to_the_buffer_type() {
    let mut k = Kernel::new();
    let a = k.input(
        "A",
        DataType::int32(),
        &[-3., 7., 0., 1., -1., 100., 5., -8.],
    );
    let f = k.input("F", f32t(), &[-3.75, 7.5, 0.25, -0.5, 1.0, 2.9, -2.9, 0.0]);
    k.vec_out("int_to_float", f32t(), 8, |i| ld(&a, i.clone()));
    k.vec_out("float_to_int", DataType::int32(), 8, |i| ld(&f, i.clone()));
    k.vec_out("float_to_i8", DataType::int(8), 8, |i| ld(&f, i.clone()));
    k.vec_out("int_to_bool", DataType::bool(), 8, |i| ld(&a, i.clone()));
    // A scalar (broadcast) value of another type, through a scatter.
    let o = k.output("scalar_scatter", f32t(), 16);
    k.body.push(vloop(8, |i| st(&o, i * 2i64, Expr::int(3))));
    k.check(true);
}

// ----- integers -----

#[test]
fn integer_arithmetic_wraps_like_the_interpreter() {
    let mut k = Kernel::new();
    let i8t = DataType::int(8);
    let u16t = DataType::uint(16);
    let i32t = DataType::int32();
    let a8 = k.input("A8", i8t, &[100., -100., 70., 3.]);
    let a16 = k.input("A16", u16t, &[65535., 300., 40000., 7.]);
    let a32 = k.input("A32", i32t, &[1073741829., -1073741900., 5., 2147483647.]);
    let two8 = || Expr::int_of(i8t, 2);
    // Scalar: C computes on int8 in int, the interpreter wraps each result to int8.
    let s8 = k.output("scalar_i8", i8t, 4);
    k.body.push(for_(ForKind::Serial, "j", 0, 4, |j| {
        let x = ld(&a8, j.clone());
        st(&s8, j, (x.clone() + x) / two8())
    }));
    // uint16 * uint16 overflows int.
    let s16 = k.output("scalar_u16", u16t, 4);
    k.body.push(for_(ForKind::Serial, "j", 0, 4, |j| {
        let x = ld(&a16, j.clone());
        st(&s16, j, (x.clone() * x) / Expr::int_of(u16t, 3))
    }));
    // Vectors: signed lanes must wrap, not be assumed not to overflow.
    k.vec_out("vector_i8", i8t, 4, |i| {
        let x = ld(&a8, i.clone());
        (x.clone() + x) / two8()
    });
    k.vec_out("vector_i32", i32t, 4, |i| {
        (ld(&a32, i.clone()) * 2i64) / Expr::int(2)
    });
    k.vec_out("vector_u16", u16t, 4, |i| {
        let x = ld(&a16, i.clone());
        (x.clone() * x) / Expr::int_of(u16t, 3)
    });
    k.check(true);
}

/// min, max, select, floordiv, floormod (negative operands included), multiplication
/// and a round trip through float32, for every signed and float type, vectorized.
#[test]
fn vector_arithmetic_on_every_type() {
    let mut k = Kernel::new();
    let xa = [7., -7., 5., -5., 0., 3., -1., 100.];
    let xb = [2., 2., -3., -3., 4., 3., 5., -7.];
    let fa = [7.5, -7.25, 5., -5., 0., 3., -1., 100.];
    for t in [
        DataType::int(8),
        DataType::int(16),
        DataType::int32(),
        DataType::int64(),
        DataType::float16(),
        f32t(),
        DataType::float64(),
    ] {
        let a = k.input(&format!("A_{t}"), t, if t.is_float() { &fa } else { &xa });
        let b = k.input(&format!("B_{t}"), t, &xb);
        let x = |i: &Expr| ld(&a, i.clone());
        let y = |i: &Expr| ld(&b, i.clone());
        k.vec_out(&format!("min_{t}"), t, 8, |i| Expr::min(x(i), y(i)));
        k.vec_out(&format!("max_{t}"), t, 8, |i| Expr::max(x(i), y(i)));
        k.vec_out(&format!("select_{t}"), t, 8, |i| {
            Expr::select(x(i).lt(y(i)), x(i) + y(i), x(i) - y(i))
        });
        k.vec_out(&format!("floordiv_{t}"), t, 8, |i| {
            Expr::floordiv(x(i), y(i))
        });
        k.vec_out(&format!("floormod_{t}"), t, 8, |i| {
            Expr::floormod(x(i), y(i))
        });
        k.vec_out(&format!("mul_{t}"), t, 8, |i| x(i) * y(i));
        k.vec_out(&format!("logic_{t}"), t, 8, |i| {
            Expr::select(
                Expr::and(x(i).ge(y(i)), Expr::not(x(i).eq(y(i)))),
                x(i),
                y(i),
            )
        });
        k.vec_out(&format!("via_f32_{t}"), t, 8, |i| {
            Expr::cast(t, Expr::cast(f32t(), x(i)) * Expr::float(0.5))
        });
    }
    // Unsigned: arithmetic only (the simplifier mishandles unsigned comparisons, see
    // `unsigned_min_max_compare` below).
    for t in [DataType::uint(8), DataType::uint(32), DataType::uint(64)] {
        let a = k.input(
            &format!("A_{t}"),
            t,
            &[7., 200., 5., 255., 0., 3., 1., 100.],
        );
        let b = k.input(&format!("B_{t}"), t, &[2., 2., 3., 3., 4., 3., 5., 7.]);
        let x = |i: &Expr| ld(&a, i.clone());
        let y = |i: &Expr| ld(&b, i.clone());
        k.vec_out(&format!("floordiv_{t}"), t, 8, |i| {
            Expr::floordiv(x(i), y(i))
        });
        k.vec_out(&format!("floormod_{t}"), t, 8, |i| {
            Expr::floormod(x(i), y(i))
        });
        k.vec_out(&format!("mul_{t}"), t, 8, |i| x(i) * y(i));
    }
    k.check(false);
}

/// `min(x, y)` and `x < y` of unsigned values: the simplifier must not decide them from
/// the difference `x - y`, which wraps.
#[test]
fn unsigned_min_max_compare() {
    let mut k = Kernel::new();
    let t = DataType::uint(8);
    let a = k.input("A", t, &[7., 200., 5., 255., 0., 3., 1., 100.]);
    let b = k.input("B", t, &[2., 2., 3., 3., 4., 3., 5., 7.]);
    k.vec_out("min", t, 8, |i| {
        Expr::min(ld(&a, i.clone()), ld(&b, i.clone()))
    });
    k.vec_out("lt", DataType::bool(), 8, |i| {
        ld(&a, i.clone()).lt(ld(&b, i.clone()))
    });
    k.check(true);
}

// ----- floats -----

#[test]
fn float16_rounds_after_every_operation() {
    let mut k = Kernel::new();
    let h = DataType::float16();
    let n = 64;
    let va: Vec<f64> = (0..n).map(|i| 1.0 + i as f64 * 0.0371).collect();
    let vb: Vec<f64> = (0..n).map(|i| 3.0 - i as f64 * 0.0533).collect();
    let a = k.input("A", h, &va);
    let b = k.input("B", h, &vb);
    let value = |i: &Expr| {
        let (x, y) = (ld(&a, i.clone()), ld(&b, i.clone()));
        x.clone() * y + x.clone() * x
    };
    k.vec_out("vector", h, n, value);
    let s = k.output("scalar", h, n);
    k.body.push(for_(ForKind::Serial, "j", 0, n, |j| {
        st(&s, j.clone(), value(&j))
    }));
    k.check(true);
}

#[test]
fn min_and_max_ignore_a_nan_operand_like_the_interpreter() {
    let mut k = Kernel::new();
    let nan = f64::NAN;
    for t in [DataType::float16(), f32t(), DataType::float64()] {
        let a = k.input(&format!("A_{t}"), t, &[nan, 1., -1., nan, 2., nan, -4., 0.]);
        let b = k.input(&format!("B_{t}"), t, &[0., nan, 3., nan, -2., 5., nan, 1.]);
        let x = |i: &Expr| ld(&a, i.clone());
        let y = |i: &Expr| ld(&b, i.clone());
        k.vec_out(&format!("vmin_{t}"), t, 8, |i| Expr::min(x(i), y(i)));
        k.vec_out(&format!("vmax_{t}"), t, 8, |i| Expr::max(x(i), y(i)));
        k.vec_out(&format!("relu_{t}"), t, 8, |i| {
            Expr::max(Expr::constant(t, 0.0), x(i))
        });
        let (smin, smax) = (
            k.output(&format!("smin_{t}"), t, 8),
            k.output(&format!("smax_{t}"), t, 8),
        );
        k.body.push(for_(ForKind::Serial, "j", 0, 8, |j| {
            Stmt::seq(vec![
                st(&smin, j.clone(), Expr::min(x(&j), y(&j))),
                st(&smax, j.clone(), Expr::max(x(&j), y(&j))),
            ])
        }));
    }
    k.check(true);
}

#[test]
fn math_intrinsics_lane_by_lane() {
    let mut k = Kernel::new();
    let ops = [
        Intrinsic::Exp,
        Intrinsic::Tanh,
        Intrinsic::Sigmoid,
        Intrinsic::Fabs,
        Intrinsic::Erf,
        Intrinsic::Floor,
        Intrinsic::Ceil,
        Intrinsic::Round,
    ];
    for t in [DataType::float16(), f32t(), DataType::float64()] {
        let a = k.input(
            &format!("A_{t}"),
            t,
            &[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.25, -3.75],
        );
        let x = |i: &Expr| ld(&a, i.clone());
        for op in ops {
            k.vec_out(
                &format!("{}_{t}", op.name().replace("tir.", "")),
                t,
                8,
                |i| Expr::math(op, x(i)),
            );
        }
        let pos = |i: &Expr| Expr::math(Intrinsic::Fabs, x(i)) + 0.5f64;
        k.vec_out(&format!("log_{t}"), t, 8, |i| {
            Expr::math(Intrinsic::Log, pos(i))
        });
        k.vec_out(&format!("sqrt_{t}"), t, 8, |i| {
            Expr::math(Intrinsic::Sqrt, pos(i))
        });
        k.vec_out(&format!("rsqrt_{t}"), t, 8, |i| {
            Expr::math(Intrinsic::Rsqrt, pos(i))
        });
        k.vec_out(&format!("pow_{t}"), t, 8, |i| pos(i).pow(x(i)));
        k.vec_out(&format!("fmod_{t}"), t, 8, |i| x(i) % 0.75f64);
    }
    k.check(false);
}

/// The CPU's float32 vector `exp`, `sigmoid`, `tanh` and `erf` (polynomials on whole registers,
/// not libm lane by lane) across their range: overflow to ∞, underflow through the
/// subnormals to 0, tiny arguments, NaN.
#[test]
fn float32_vector_math_over_its_range() {
    let mut k = Kernel::new();
    let values = [
        -200.0,
        -104.5,
        -100.0,
        -88.5,
        -87.0,
        -20.0,
        -1.0,
        -1e-6,
        0.0,
        1e-6,
        0.3,
        1.0,
        5.5,
        20.0,
        88.5,
        88.7,
        89.0,
        200.0,
        f64::NAN,
        -0.0,
        3.0,
        -3.0,
        0.7,
        -0.7,
    ];
    let a = k.input("A", f32t(), &values);
    for op in [
        Intrinsic::Exp,
        Intrinsic::Sigmoid,
        Intrinsic::Tanh,
        Intrinsic::Erf,
    ] {
        let name = op.name().replace("tir.", "");
        let o = k.output(&name, f32t(), values.len() as i64);
        k.body.push(for_(ForKind::Serial, "b", 0, 3, |b| {
            vloop(8, |i| {
                let at = i + b * 8i64;
                st(&o, at.clone(), Expr::math(op, ld(&a, at)))
            })
        }));
    }
    k.check(false);
}

#[test]
fn literals_keep_their_values_in_c() {
    let mut k = Kernel::new();
    let mut stores = |name: &str, t: DataType, values: Vec<Expr>| {
        let n = values.len() as i64;
        let o = k.output(name, t, n);
        let v = k.output(&format!("{name}_vector"), t, n * 4);
        for (j, x) in values.into_iter().enumerate() {
            k.body.push(st(&o, Expr::int(j as i64), x.clone()));
            // The same literal broadcast to a vector.
            k.body.push(vloop(4, |i| st(&v, i + (j as i64 * 4), x)));
        }
    };
    let f32s = [
        1e-45,
        -0.0,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1.17549435e-38 / 4.0,
        3.4028234663852886e38,
        1e39,
        -1e39,
        0.1,
    ];
    stores(
        "f32",
        f32t(),
        f32s.iter().map(|v| Expr::float(*v)).collect(),
    );
    let f64s = [
        5e-324,
        -0.0,
        f64::NAN,
        f64::INFINITY,
        -1e300,
        0.1,
        -2.2250738585072014e-308,
    ];
    let d = DataType::float64();
    stores(
        "f64",
        d,
        f64s.iter().map(|v| Expr::float_of(d, *v)).collect(),
    );
    let h = DataType::float16();
    let f16s = [6e-8, 65504.0, -0.0, f64::INFINITY, 0.1];
    stores(
        "f16",
        h,
        f16s.iter().map(|v| Expr::float_of(h, *v)).collect(),
    );
    let i32s = [i32::MIN as i64, i32::MAX as i64, -1, 0];
    stores(
        "i32",
        DataType::int32(),
        i32s.iter().map(|v| Expr::int(*v)).collect(),
    );
    let l = DataType::int64();
    let i64s = [i64::MIN, i64::MAX, -1, 1 << 40];
    stores("i64", l, i64s.iter().map(|v| Expr::int_of(l, *v)).collect());
    let i8t = DataType::int(8);
    stores(
        "i8",
        i8t,
        vec![Expr::int_of(i8t, -128), Expr::int_of(i8t, 127)],
    );
    let u = DataType::uint(64);
    stores(
        "u64",
        u,
        vec![Expr::int_of(u, -1), Expr::int_of(u, i64::MIN)],
    );
    stores(
        "bool",
        DataType::bool(),
        vec![Expr::bool(true), Expr::bool(false)],
    );
    // INT32_MIN in arithmetic.
    let a = k.input("A", DataType::int32(), &[1., -1.]);
    let o = k.output("int_min_arith", DataType::int32(), 2);
    k.body.push(for_(ForKind::Serial, "j", 0, 2, |j| {
        st(
            &o,
            j.clone(),
            ld(&a, j) * Expr::int(i32::MIN as i64 + 1) - Expr::int(-5),
        )
    }));
    k.check(true);
}

// ----- access patterns, vector loops of every shape -----

#[test]
fn vector_accesses_gathers_scatters_and_loop_shapes() {
    let a = buf("A", f32t(), &[8, 16]);
    let outs: Vec<Buffer> = (0..9)
        .map(|k| buf(&format!("O{k}"), f32t(), &[8, 16]))
        .collect();
    let s = |b: &Buffer, i: Expr, j: Expr, v: Expr| Stmt::store(b, vec![i, j], v);
    let l = |i: Expr, j: Expr| Expr::load(&a, vec![i, j]);
    let x = Var::new("x", f32t());
    let wide = Var::new("w", DataType::int64());
    let body = for_(ForKind::Serial, "j", 0, 8, |j| {
        Stmt::seq(vec![
            // Over the outer dimension; stride-2 gather.
            vloop(8, |i| {
                s(
                    &outs[0],
                    i.clone(),
                    j.clone(),
                    l(i.clone(), j.clone() * 2i64),
                )
            }),
            // Reversed gather, strided scatter.
            vloop(8, |i| {
                s(
                    &outs[1],
                    i.clone(),
                    j.clone() * 2i64 + 1i64,
                    l(Expr::int(7) - i.clone(), j.clone()),
                )
            }),
            // Reversed scatter; a broadcast load (independent of the loop).
            vloop(8, |i| {
                s(
                    &outs[2],
                    j.clone(),
                    Expr::int(15) - i.clone(),
                    l(j.clone(), i.clone() * 2i64) + l(j.clone(), Expr::int(3)),
                )
            }),
            // floordiv / floormod indices.
            vloop(8, |i| {
                s(
                    &outs[3],
                    j.clone(),
                    Expr::floordiv(i.clone(), Expr::int(2)) + 4i64,
                    l(j.clone(), Expr::floormod(i.clone() + 3i64, Expr::int(4))),
                )
            }),
            // An if_then_else with a scalar condition and vector branches; a select too.
            vloop(8, |i| {
                s(
                    &outs[4],
                    j.clone(),
                    i.clone() + 8i64,
                    Expr::if_then_else(
                        j.gt(Expr::int(1)),
                        l(j.clone() - 2i64, i.clone()),
                        Expr::select(
                            j.lt(Expr::int(1)),
                            l(j.clone(), i.clone()),
                            Expr::float(-1.0),
                        ),
                    ),
                )
            }),
            // A serial reduction loop, a let and an if inside the vector loop.
            vloop(8, |i| {
                Stmt::seq(vec![
                    s(&outs[5], j.clone(), i.clone(), Expr::float(0.0)),
                    for_(ForKind::Serial, "r", 0, 4, |r| {
                        Stmt::let_stmt(
                            x.clone(),
                            l(r.clone(), j.clone()) * 2.0f64,
                            Stmt::if_then(
                                r.lt(Expr::int(3)),
                                s(
                                    &outs[5],
                                    j.clone(),
                                    i.clone(),
                                    Expr::load(&outs[5], vec![j.clone(), i.clone()])
                                        + l(r.clone(), i.clone() + 8i64) * x.to_expr(),
                                ),
                            ),
                        )
                    }),
                ])
            }),
            // A loop with a non-zero start.
            for_(ForKind::Vectorized, "i", 4, 4, |i| {
                s(&outs[6], j.clone(), i.clone(), -l(j.clone(), i.clone()))
            }),
        ])
    });
    // An int64 vectorized loop; a scatter whose lanes write the same elements (the last
    // lane wins, as the last iteration does).
    let tail = Stmt::seq(vec![
        Stmt::for_loop(
            wide.clone(),
            Expr::int_of(DataType::int64(), 2),
            Expr::int_of(DataType::int64(), 8),
            ForKind::Vectorized,
            Stmt::store(
                &outs[7],
                vec![Expr::int(3), wide.to_expr()],
                Expr::load(
                    &a,
                    vec![
                        Expr::int(5),
                        wide.to_expr() + Expr::int_of(DataType::int64(), 1),
                    ],
                ),
            ),
        ),
        vloop(8, |i| {
            s(
                &outs[8],
                Expr::int(0),
                Expr::floordiv(i.clone(), Expr::int(4)),
                l(Expr::int(1), i.clone()),
            )
        }),
    ]);
    let mut params = vec![a.clone()];
    params.extend(outs.iter().cloned());
    let f = PrimFunc::new("kernel", params, Stmt::seq(vec![body, tail]));
    let src = generate_c(&f, 2).unwrap();
    assert!(
        !src.contains("stays scalar"),
        "every loop here is vectorizable:\n{src}"
    );
    let values: Vec<f64> = (0..128).map(|i| (i as f64 - 50.0) * 0.25).collect();
    let mut args = vec![host(&a, &values)];
    args.extend(outs.iter().map(zeros));
    check(&f, &args, false).unwrap();
}

// ----- names -----

#[test]
fn names_never_collide_in_c() {
    let names = [
        "placeholder",
        "placeholder",
        "placeholder_1",
        "int",
        "linux",
        "unix",
        "INFINITY",
        "NAN",
        "NULL",
        "M_PI",
        "errno",
        "expf",
        "int32_t",
        "free",
        "kernel_impl",
        "_Float16",
        "__x",
        "tsr_t1",
        "tsr_status",
        "v_float32x8",
        "a.b",
        "a_b",
        "0d",
        "",
    ];
    let bufs: Vec<Buffer> = names.iter().map(|n| buf(n, f32t(), &[8])).collect();
    let mut body = Vec::new();
    for (k, b) in bufs.iter().enumerate() {
        // The loop variable has the buffer's name too; the values use exp (`expf`), an
        // allocation and a vector loop (`v_*` and `tsr_*` names in the generated code).
        let v = Var::int(names[k]);
        let tmp = buf(names[k], f32t(), &[8]);
        body.push(Stmt::allocate(
            tmp.clone(),
            Stmt::seq(vec![
                Stmt::for_loop(
                    v.clone(),
                    Expr::int(0),
                    Expr::int(8),
                    ForKind::Serial,
                    st(
                        &tmp,
                        v.to_expr(),
                        Expr::math(Intrinsic::Exp, Expr::cast(f32t(), v.to_expr())) + k as f64,
                    ),
                ),
                vloop(8, |i| st(b, i.clone(), ld(&tmp, i) * 0.5f64)),
            ]),
        ));
    }
    let f = PrimFunc::new("kernel", bufs.clone(), Stmt::seq(body));
    generate_c_within(&f, 10).unwrap();
    let args: Vec<HostBuffer> = bufs.iter().map(zeros).collect();
    check(&f, &args, true).unwrap();
}

// ----- scalar statements, allocations, parallel loops -----

#[test]
fn statements_allocations_and_parallel_loops() {
    let a = buf("A", f32t(), &[16]);
    let o = buf("O", f32t(), &[16]);
    let p2 = buf("P", f32t(), &[16]);
    // 64 KiB: allocated on the heap, once per thread of the parallel loop.
    let big = buf("big", f32t(), &[16, 1024]);
    let small = buf("small", f32t(), &[16]);
    let x = Var::new("x", f32t());
    let body = Stmt::seq(vec![
        for_(ForKind::Parallel, "p", 0, 4, |p| {
            Stmt::allocate(
                big.clone(),
                Stmt::allocate(
                    small.clone(),
                    // A nested parallel loop.
                    for_(ForKind::Parallel, "q", 0, 4, |q| {
                        let idx = p.clone() * 4i64 + q.clone();
                        Stmt::seq(vec![
                            Stmt::store(
                                &big,
                                vec![q.clone(), Expr::int(1000)],
                                ld(&a, idx.clone()),
                            ),
                            st(&small, q.clone(), ld(&a, idx.clone()) * 2.0f64),
                            Stmt::evaluate(ld(&a, idx.clone())),
                            // A comment must not let its text escape into the code.
                            Stmt::attr(
                                "note\nP[0] = 42.0f; //",
                                Expr::int(1),
                                Stmt::let_stmt(
                                    x.clone(),
                                    Expr::load(&big, vec![q.clone(), Expr::int(1000)])
                                        + ld(&small, q.clone()),
                                    Stmt::if_then_else(
                                        x.to_expr().gt(0.0),
                                        st(&o, idx.clone(), x.to_expr()),
                                        st(&o, idx, -x.to_expr()),
                                    ),
                                ),
                            ),
                        ])
                    }),
                ),
            )
        }),
        // A parallel loop with a non-zero start inside a serial one.
        for_(ForKind::Serial, "s", 0, 2, |s| {
            for_(ForKind::Parallel, "t", 3, 5, |t| {
                let idx = s * 8i64 + t;
                st(&p2, idx.clone(), ld(&a, idx) + 1.0f64)
            })
        }),
    ]);
    let f = PrimFunc::new("kernel", vec![a.clone(), o.clone(), p2.clone()], body);
    let src = generate_c(&f, 2).unwrap();
    assert!(src.contains("aligned_alloc(64, 65536)"), "{src}");
    let values: Vec<f64> = (0..16).map(|i| (i as f64 - 7.5) * 0.75).collect();
    check(&f, &[host(&a, &values), zeros(&o), zeros(&p2)], true).unwrap();
}

#[test]
fn unrolled_loops() {
    let a = buf("A", f32t(), &[200]);
    let o = buf("O", f32t(), &[200]);
    let body = Stmt::seq(vec![
        // Nested, with non-zero starts.
        for_(ForKind::Unrolled, "i", 3, 5, |i| {
            for_(ForKind::Unrolled, "j", 2, 4, |j| {
                let idx = i * 10i64 + j;
                st(&o, idx.clone(), ld(&a, idx) + 1.0f64)
            })
        }),
        // Above MAX_UNROLL: stays a loop for the C compiler.
        for_(ForKind::Unrolled, "k", 100, 70, |k| {
            st(&o, k.clone(), ld(&a, k) * 3.0f64)
        }),
        // Empty.
        for_(ForKind::Unrolled, "e", 190, 0, |e| {
            st(&o, e.clone(), ld(&a, e))
        }),
        // Around a vector loop and an allocation.
        for_(ForKind::Unrolled, "u", 0, 3, |u| {
            let t = buf("t", f32t(), &[8]);
            Stmt::allocate(
                t.clone(),
                Stmt::seq(vec![
                    vloop(8, |i| st(&t, i.clone(), ld(&a, u.clone() * 8i64 + i))),
                    vloop(8, |i| {
                        st(
                            &o,
                            u.clone() * 8i64 + i.clone() + 150i64,
                            ld(&t, Expr::int(7) - i),
                        )
                    }),
                ]),
            )
        }),
    ]);
    let f = PrimFunc::new("kernel", vec![a.clone(), o.clone()], body);
    let src = generate_c(&f, 2).unwrap();
    assert!(src.contains("#pragma GCC unroll 70"), "{src}");
    let values: Vec<f64> = (0..200).map(|i| i as f64 * 0.5 - 40.0).collect();
    check(&f, &[host(&a, &values), zeros(&o)], true).unwrap();
}

// ----- through tessera_te -----

#[test]
fn te_bool_and_cast_outputs_vectorized() {
    use tessera_te::{compute, lower, placeholder, Schedule};
    let a = placeholder(&[4, 32], f32t(), "A").unwrap();
    let b = placeholder(&[4, 32], f32t(), "B").unwrap();
    let gt = compute(&[4, 32], "greater", &[], |ix| a.at(ix).gt(b.at(ix))).unwrap();
    let relu_mask = compute(&[4, 32], "masked", &[], |ix| {
        Expr::cast(f32t(), a.at(ix).gt(0.0)) * a.at(ix)
            + Expr::select(b.at(ix).lt(a.at(ix)), Expr::float(1.0), Expr::float(0.0))
    })
    .unwrap();
    let mut s = Schedule::create(&[gt.clone(), relu_mask.clone()]).unwrap();
    for t in [&gt, &relu_mask] {
        let ax = s.axis(t).unwrap();
        let (_, inner) = s.split(t, &ax[1], 8).unwrap();
        s.vectorize(t, &inner).unwrap();
        s.parallel(t, &ax[0]).unwrap();
    }
    let args = [a.clone(), b.clone(), gt.clone(), relu_mask.clone()];
    let f = lower(&s, &args, "te_kernel").unwrap();
    let src = generate_c(&f, 2).unwrap();
    assert!(!src.contains("stays scalar"), "{src}");
    let values =
        |seed: f64| -> Vec<f64> { (0..128).map(|i| ((i as f64 * seed) % 7.0) - 3.0).collect() };
    let host_args = vec![
        HostBuffer::from_f64(f32t(), &[4, 32], &values(1.7)),
        HostBuffer::from_f64(f32t(), &[4, 32], &values(2.3)),
        HostBuffer::zeros(DataType::bool(), &[4, 32]),
        HostBuffer::zeros(f32t(), &[4, 32]),
    ];
    check(&f, &host_args, true).unwrap();
}

/// A register tile of 3 rows over 10 (the last tile partial) guards each row's update
/// inside the reduction loop; the loop is copied without the guards, taken for full
/// tiles (`unswitch_guards`), and both copies compute what the interpreter does.
#[test]
fn guarded_tiles_run_an_unguarded_copy_when_full() {
    let f = tessera_ir::parser::parse_func(
        "func tile(a: float32[10, 8], w: float32[16, 8], c: float32[10, 8]) {
  for (t, 0, 4) {
    for (k, 0, 16) {
      if ((((t*3) + 0) < 10)) {
        for (j, 0, 8) vectorized {
          c[((t*3) + 0), j] = (c[((t*3) + 0), j] + (a[((t*3) + 0), floormod(k, 8)]*w[k, j]))
        }
      }
      if ((((t*3) + 1) < 10)) {
        for (j, 0, 8) vectorized {
          c[((t*3) + 1), j] = (c[((t*3) + 1), j] + (a[((t*3) + 1), floormod(k, 8)]*w[k, j]))
        }
      }
      if ((((t*3) + 2) < 10)) {
        for (j, 0, 8) vectorized {
          c[((t*3) + 2), j] = (c[((t*3) + 2), j] + (a[((t*3) + 2), floormod(k, 8)]*w[k, j]))
        }
      }
    }
  }
}
",
    )
    .unwrap();
    let src = generate_c(&f, 1).unwrap();
    assert!(
        src.contains("< 10) && ("),
        "the reduction loop is not unswitched:\n{src}"
    );
    let a: Vec<f64> = (0..80).map(|i| (i % 7) as f64 - 3.0).collect();
    let w: Vec<f64> = (0..128).map(|i| (i % 5) as f64 * 0.5).collect();
    let c: Vec<f64> = (0..80).map(|i| i as f64).collect();
    let args = [
        host(&f.params[0], &a),
        host(&f.params[1], &w),
        host(&f.params[2], &c),
    ];
    check(&f, &args, true).unwrap();
}
