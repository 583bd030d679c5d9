//! Elementwise, broadcast and injective operators against independent references written
//! as plain loops over `Vec<f64>`, over grids of cases (odd sizes, batch > 1,
//! broadcasting in every position, every layout direction, negative strides, -1 in
//! reshape); their error paths; names, tags and axes; FLOPs, workload keys and the DAG
//! print of `relu(add(x, bias))`.

mod common;

use common::{assert_close, interpret, rand_vals};
use tessera_ir::DataType;
use tessera_te::ops;
use tessera_te::{placeholder, ComputeDag, TeError, Tensor};

const F32: DataType = DataType::float32();

// ----- helpers -----

fn ph(shape: &[i64], name: &str) -> Tensor {
    placeholder(shape, F32, name).unwrap()
}

fn ph_of(shape: &[i64], dtype: DataType, name: &str) -> Tensor {
    placeholder(shape, dtype, name).unwrap()
}

fn numel(shape: &[i64]) -> usize {
    shape.iter().product::<i64>() as usize
}

/// The row-major multi-index of `flat` in `shape`.
fn unravel(mut flat: usize, shape: &[i64]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = flat % shape[d] as usize;
        flat /= shape[d] as usize;
    }
    idx
}

/// The row-major offset of `idx` in `shape`.
fn ravel(idx: &[usize], shape: &[i64]) -> usize {
    let mut off = 0;
    for (i, d) in idx.iter().zip(shape) {
        assert!((*i as i64) < *d, "reference index {idx:?} out of {shape:?}");
        off = off * (*d as usize) + i;
    }
    off
}

/// Random integers in `[lo, hi]` as f64.
fn rand_ints(n: usize, seed: u64, lo: i64, hi: i64) -> Vec<f64> {
    rand_vals(n, seed)
        .iter()
        .map(|v| {
            let span = (hi - lo + 1) as f64;
            (lo as f64 + ((v + 1.0) / 2.0 * span).floor()).min(hi as f64)
        })
        .collect()
}

fn dag(t: &Tensor) -> String {
    ComputeDag::new(&[t.clone()]).unwrap().to_string()
}

fn attr_of(r: Result<Tensor, TeError>) -> (String, String) {
    match r {
        Err(TeError::BadAttr { op, attr, .. }) => (op, attr),
        Err(other) => panic!("expected BadAttr, got {other}"),
        Ok(t) => panic!("expected BadAttr, got tensor {t}"),
    }
}

/// The operator and message of a `BadShape` error.
fn shape_err_of(r: Result<Tensor, TeError>) -> (String, String) {
    match r {
        Err(e @ TeError::BadShape { .. }) => {
            let msg = e.to_string();
            let TeError::BadShape { op, .. } = e else {
                unreachable!()
            };
            (op, msg)
        }
        Err(other) => panic!("expected BadShape, got {other}"),
        Ok(t) => panic!("expected BadShape, got tensor {t}"),
    }
}

fn pair(a: &str, b: &str) -> (String, String) {
    (a.to_string(), b.to_string())
}

/// float32 rounding, as the interpreter stores float32 values.
fn f32r(v: f64) -> f64 {
    v as f32 as f64
}

/// erf by its Taylor series (exact to ~1e-15 for |x| ≤ 3).
fn erf_ref(x: f64) -> f64 {
    let mut term = x;
    let mut sum = x;
    for n in 1..80 {
        term *= -x * x / n as f64;
        sum += term / (2 * n + 1) as f64;
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

// ----- unary -----

const UNARY_SHAPES: &[&[i64]] = &[&[7], &[2, 13], &[3, 5, 31], &[2, 1, 3, 7]];

fn check_unary(
    what: &str,
    f: impl Fn(&Tensor) -> Result<Tensor, TeError>,
    input: impl Fn(f64) -> f64,
    reference: impl Fn(f64) -> f64,
    tol: f64,
) {
    for (i, shape) in UNARY_SHAPES.iter().enumerate() {
        let x = ph(shape, "x");
        let xv: Vec<f64> = rand_vals(numel(shape), 11 + i as u64)
            .into_iter()
            .map(|v| f32r(input(v)))
            .collect();
        let out = f(&x).unwrap();
        assert_eq!(out.shape(), *shape, "{what}: shape");
        let got = interpret(&out, &[(&x, &xv)]);
        let want: Vec<f64> = xv.iter().map(|v| reference(*v)).collect();
        assert_close(&format!("{what} {shape:?}"), &got, &want, tol);
    }
}

#[test]
fn unary_float_ops_match_references() {
    check_unary("relu", ops::relu, |v| v * 3.0, |v| v.max(0.0), 0.0);
    check_unary(
        "clip",
        |x| ops::clip(x, -0.5, 0.25),
        |v| v,
        |v| v.clamp(-0.5, 0.25),
        0.0,
    );
    check_unary(
        "sigmoid",
        ops::sigmoid,
        |v| v * 6.0,
        |v| 1.0 / (1.0 + (-v).exp()),
        1e-6,
    );
    check_unary("tanh", ops::tanh, |v| v * 4.0, f64::tanh, 1e-6);
    check_unary("exp", ops::exp, |v| v * 5.0, f64::exp, 1e-6);
    check_unary("sqrt", ops::sqrt, |v| (v + 1.0) * 50.0, f64::sqrt, 1e-6);
    check_unary("erf", ops::erf, |v| v * 2.5, erf_ref, 1e-6);
    check_unary(
        "gelu",
        ops::gelu,
        |v| v * 3.0,
        |v| 0.5 * v * (1.0 + erf_ref(v / 2f64.sqrt())),
        1e-6,
    );
}

#[test]
fn unary_float64_keeps_precision() {
    let x = ph_of(&[3, 7], DataType::float64(), "x");
    let xv: Vec<f64> = rand_vals(21, 5).iter().map(|v| v * 2.0).collect();
    for (name, out, f) in [
        ("exp", ops::exp(&x).unwrap(), f64::exp as fn(f64) -> f64),
        ("tanh", ops::tanh(&x).unwrap(), f64::tanh),
        ("relu", ops::relu(&x).unwrap(), |v: f64| v.max(0.0)),
    ] {
        assert_eq!(out.dtype(), DataType::float64());
        let got = interpret(&out, &[(&x, &xv)]);
        let want: Vec<f64> = xv.iter().map(|v| f(*v)).collect();
        assert_close(name, &got, &want, 1e-12);
    }
}

#[test]
fn integer_elementwise_ops_match_references() {
    // relu and clip on int32 / int8.
    let x = ph_of(&[5, 13], DataType::int32(), "x");
    let xv = rand_ints(65, 3, -1000, 1000);
    let got = interpret(&ops::relu(&x).unwrap(), &[(&x, &xv)]);
    let want: Vec<f64> = xv.iter().map(|v| v.max(0.0)).collect();
    assert_close("relu int32", &got, &want, 0.0);
    let got = interpret(&ops::clip(&x, -300.7, 250.9).unwrap(), &[(&x, &xv)]);
    let want: Vec<f64> = xv.iter().map(|v| v.clamp(-300.0, 250.0)).collect();
    assert_close("clip int32 (bounds truncate)", &got, &want, 0.0);
    let x8 = ph_of(&[31], DataType::int(8), "x");
    let xv8 = rand_ints(31, 4, -128, 127);
    let got = interpret(&ops::clip(&x8, -1000.0, 100.0).unwrap(), &[(&x8, &xv8)]);
    let want: Vec<f64> = xv8.iter().map(|v| v.clamp(-128.0, 100.0)).collect();
    assert_close("clip int8 (bounds saturate)", &got, &want, 0.0);

    // right_shift: int8 (every shift), int32, uint8, int64.
    for n in 0..8 {
        let out = ops::right_shift(&x8, n).unwrap();
        let got = interpret(&out, &[(&x8, &xv8)]);
        let want: Vec<f64> = xv8.iter().map(|v| ((*v as i64) >> n) as f64).collect();
        assert_close(&format!("right_shift int8 >> {n}"), &got, &want, 0.0);
    }
    for n in [0, 1, 5, 17, 31] {
        let got = interpret(&ops::right_shift(&x, n).unwrap(), &[(&x, &xv)]);
        let want: Vec<f64> = xv.iter().map(|v| ((*v as i32) >> n) as f64).collect();
        assert_close(&format!("right_shift int32 >> {n}"), &got, &want, 0.0);
    }
    let xu = ph_of(&[2, 7], DataType::uint(8), "x");
    let xuv = rand_ints(14, 8, 0, 255);
    for n in [1, 3, 7] {
        let got = interpret(&ops::right_shift(&xu, n).unwrap(), &[(&xu, &xuv)]);
        let want: Vec<f64> = xuv.iter().map(|v| ((*v as u8) >> n) as f64).collect();
        assert_close(&format!("right_shift uint8 >> {n}"), &got, &want, 0.0);
    }
    let x64 = ph_of(&[7], DataType::int64(), "x");
    let x64v = rand_ints(7, 9, -(1 << 40), 1 << 40);
    for n in [2, 33, 63] {
        let got = interpret(&ops::right_shift(&x64, n).unwrap(), &[(&x64, &x64v)]);
        let want: Vec<f64> = x64v.iter().map(|v| ((*v as i64) >> n) as f64).collect();
        assert_close(&format!("right_shift int64 >> {n}"), &got, &want, 0.0);
    }
}

#[test]
fn cast_matches_references() {
    let x = ph(&[3, 13], "x");
    let xv: Vec<f64> = rand_vals(39, 21).iter().map(|v| f32r(v * 300.0)).collect();
    let to_i = ops::cast(&x, DataType::int32()).unwrap();
    assert_eq!(to_i.dtype(), DataType::int32());
    let got = interpret(&to_i, &[(&x, &xv)]);
    let want: Vec<f64> = xv.iter().map(|v| v.trunc()).collect();
    assert_close("cast float32 -> int32", &got, &want, 0.0);
    let to_f64 = ops::cast(&x, DataType::float64()).unwrap();
    let got = interpret(&to_f64, &[(&x, &xv)]);
    assert_close("cast float32 -> float64", &got, &xv, 0.0);
    let xi = ph_of(&[2, 7], DataType::int32(), "x");
    let xiv = rand_ints(14, 22, -100_000, 100_000);
    let got = interpret(&ops::cast(&xi, F32).unwrap(), &[(&xi, &xiv)]);
    assert_close("cast int32 -> float32", &got, &xiv, 0.0);
    let got = interpret(&ops::cast(&xi, DataType::int(8)).unwrap(), &[(&xi, &xiv)]);
    let want: Vec<f64> = xiv.iter().map(|v| (*v as i64 as i8) as f64).collect();
    assert_close("cast int32 -> int8 wraps", &got, &want, 0.0);
    // A cast to the tensor's own type reads the element unchanged (TVM folds it).
    let same = ops::cast(&x, F32).unwrap();
    assert!(
        dag(&same).contains("T_cast(ax0, ax1) = x[ax0, ax1]"),
        "{}",
        dag(&same)
    );
}

// ----- broadcast -----

/// The NumPy broadcast reference: `out` given, each input read with index 0 along its
/// dimensions of size one.
fn broadcast_ref(
    a: &[f64],
    sa: &[i64],
    b: &[f64],
    sb: &[i64],
    out: &[i64],
    f: impl Fn(f64, f64) -> f64,
) -> Vec<f64> {
    let read = |v: &[f64], s: &[i64], oi: &[usize]| -> f64 {
        let off = out.len() - s.len();
        let idx: Vec<usize> = (0..s.len())
            .map(|k| if s[k] == 1 { 0 } else { oi[off + k] })
            .collect();
        v[ravel(&idx, s)]
    };
    (0..numel(out))
        .map(|flat| {
            let oi = unravel(flat, out);
            f(read(a, sa, &oi), read(b, sb, &oi))
        })
        .collect()
}

/// (lhs shape, rhs shape, expected output shape): broadcasting in every position.
const BCAST_CASES: &[(&[i64], &[i64], &[i64])] = &[
    (&[2, 3, 4], &[2, 3, 4], &[2, 3, 4]),
    (&[2, 3, 4], &[4], &[2, 3, 4]),
    (&[4], &[2, 3, 4], &[2, 3, 4]),
    (&[2, 3, 4], &[3, 1], &[2, 3, 4]),
    (&[2, 1, 4], &[1, 3, 1], &[2, 3, 4]),
    (&[7, 1, 13], &[1, 5, 1], &[7, 5, 13]),
    (&[1], &[7, 13], &[7, 13]),
    (&[7, 13], &[1, 1], &[7, 13]),
    (&[1], &[1], &[1]),
    (&[3, 1, 1], &[1, 1, 1], &[3, 1, 1]),
    (&[31], &[3, 31], &[3, 31]),
    (&[2, 3, 1, 5], &[1, 3, 4, 1], &[2, 3, 4, 5]),
    (&[2, 1, 1, 5], &[3, 4, 1], &[2, 3, 4, 5]),
];

#[test]
fn broadcast_binary_ops_match_numpy_references() {
    type Op = fn(&Tensor, &Tensor) -> Result<Tensor, TeError>;
    type Row = (&'static str, Op, fn(f64, f64) -> f64);
    let table: [Row; 6] = [
        ("add", ops::add, |a, b| a + b),
        ("subtract", ops::subtract, |a, b| a - b),
        ("multiply", ops::multiply, |a, b| a * b),
        ("divide", ops::divide, |a, b| a / b),
        ("maximum", ops::maximum, f64::max),
        ("minimum", ops::minimum, f64::min),
    ];
    for (i, (sa, sb, so)) in BCAST_CASES.iter().enumerate() {
        let a = ph(sa, "a");
        let b = ph(sb, "b");
        let av: Vec<f64> = rand_vals(numel(sa), 100 + i as u64)
            .into_iter()
            .map(f32r)
            .collect();
        // Denominators away from zero.
        let bv: Vec<f64> = rand_vals(numel(sb), 200 + i as u64)
            .into_iter()
            .map(|v| f32r(v.signum() * (0.25 + v.abs())))
            .collect();
        for (name, op, f) in &table {
            let out = op(&a, &b).unwrap();
            assert_eq!(out.shape(), *so, "{name} {sa:?} {sb:?}");
            assert_eq!(out.name(), format!("T_{name}"));
            let got = interpret(&out, &[(&a, &av), (&b, &bv)]);
            let want = broadcast_ref(&av, sa, &bv, sb, so, f);
            assert_close(&format!("{name} {sa:?} {sb:?}"), &got, &want, 1e-6);
        }
    }
}

#[test]
fn integer_broadcast_divide_truncates() {
    let a = ph_of(&[3, 7], DataType::int32(), "a");
    let b = ph_of(&[7], DataType::int32(), "b");
    let av = rand_ints(21, 31, -50, 50);
    let bv: Vec<f64> = rand_ints(7, 32, 1, 9)
        .iter()
        .enumerate()
        .map(|(i, v)| if i % 2 == 0 { -v } else { *v })
        .collect();
    let got = interpret(&ops::divide(&a, &b).unwrap(), &[(&a, &av), (&b, &bv)]);
    let want = broadcast_ref(&av, &[3, 7], &bv, &[7], &[3, 7], |x, y| (x / y).trunc());
    assert_close("divide int32", &got, &want, 0.0);
    let got = interpret(&ops::maximum(&a, &b).unwrap(), &[(&a, &av), (&b, &bv)]);
    let want = broadcast_ref(&av, &[3, 7], &bv, &[7], &[3, 7], f64::max);
    assert_close("maximum int32", &got, &want, 0.0);
}

#[test]
fn scalar_ops_match_references() {
    let x = ph(&[3, 13], "x");
    let xv: Vec<f64> = rand_vals(39, 41).into_iter().map(f32r).collect();
    type Op = fn(&Tensor, f64) -> Result<Tensor, TeError>;
    type Row = (&'static str, Op, fn(f64, f64) -> f64);
    let table: [Row; 6] = [
        ("add", |x, v| ops::add_scalar(x, v), |a, b| a + b),
        ("subtract", |x, v| ops::subtract_scalar(x, v), |a, b| a - b),
        ("multiply", |x, v| ops::multiply_scalar(x, v), |a, b| a * b),
        ("divide", |x, v| ops::divide_scalar(x, v), |a, b| a / b),
        ("maximum", |x, v| ops::maximum_scalar(x, v), f64::max),
        ("minimum", |x, v| ops::minimum_scalar(x, v), f64::min),
    ];
    for (name, op, f) in table {
        let out = op(&x, 0.375).unwrap();
        assert_eq!((out.name(), out.tag()), (&*format!("T_{name}"), "elemwise"));
        let got = interpret(&out, &[(&x, &xv)]);
        let want: Vec<f64> = xv.iter().map(|v| f(*v, 0.375)).collect();
        assert_close(&format!("{name}_scalar"), &got, &want, 1e-6);
    }
    // The constant takes the tensor's type: 2.7 on an int32 tensor is 2.
    let xi = ph_of(&[7], DataType::int32(), "x");
    let xiv = rand_ints(7, 42, -9, 9);
    let out = ops::multiply_scalar(&xi, 2.7).unwrap();
    assert!(dag(&out).contains("(x[ax0]*2)"), "{}", dag(&out));
    let got = interpret(&out, &[(&xi, &xiv)]);
    let want: Vec<f64> = xiv.iter().map(|v| v * 2.0).collect();
    assert_close("multiply_scalar int32", &got, &want, 0.0);
}

// ----- bias_add, batch_norm -----

#[test]
fn bias_add_matches_reference_on_every_axis() {
    let cases: &[(&[i64], i64)] = &[
        (&[2, 5, 3, 7], 1),
        (&[2, 3, 7, 5], 3),
        (&[2, 3, 7, 5], -1),
        (&[13, 3], 0),
        (&[3, 13], -1),
        (&[31], 0),
        (&[2, 7, 3], 1),
    ];
    for (i, (shape, axis)) in cases.iter().enumerate() {
        let ax = if *axis < 0 {
            (shape.len() as i64 + axis) as usize
        } else {
            *axis as usize
        };
        let c = shape[ax];
        let x = ph(shape, "x");
        let b = ph(&[c], "bias");
        let xv: Vec<f64> = rand_vals(numel(shape), 50 + i as u64)
            .into_iter()
            .map(f32r)
            .collect();
        let bv: Vec<f64> = rand_vals(c as usize, 60 + i as u64)
            .into_iter()
            .map(f32r)
            .collect();
        let out = ops::bias_add(&x, &b, *axis).unwrap();
        assert_eq!(out.name(), "T_add");
        let got = interpret(&out, &[(&x, &xv), (&b, &bv)]);
        let want: Vec<f64> = (0..xv.len())
            .map(|flat| xv[flat] + bv[unravel(flat, shape)[ax]])
            .collect();
        assert_close(
            &format!("bias_add {shape:?} axis {axis}"),
            &got,
            &want,
            1e-6,
        );
    }
}

#[test]
fn batch_norm_inference_matches_reference() {
    let cases: &[(&[i64], i64, f64)] = &[
        (&[2, 5, 3, 7], 1, 1e-5),
        (&[2, 3, 7, 5], 3, 1e-3),
        (&[3, 13], -1, 0.0),
        (&[1, 7, 13], 1, 0.1),
    ];
    for (i, (shape, axis, eps)) in cases.iter().enumerate() {
        let ax = if *axis < 0 {
            (shape.len() as i64 + axis) as usize
        } else {
            *axis as usize
        };
        let c = shape[ax];
        let x = ph(shape, "x");
        let params: Vec<Tensor> = ["gamma", "beta", "mean", "var"]
            .iter()
            .map(|n| ph(&[c], n))
            .collect();
        let xv: Vec<f64> = rand_vals(numel(shape), 70 + i as u64)
            .into_iter()
            .map(f32r)
            .collect();
        let pv: Vec<Vec<f64>> = (0..4)
            .map(|k| {
                rand_vals(c as usize, 80 + 4 * i as u64 + k)
                    .into_iter()
                    .map(|v| if k == 3 { f32r(v.abs() + 0.5) } else { f32r(v) })
                    .collect()
            })
            .collect();
        let out = ops::batch_norm_inference(
            &x, &params[0], &params[1], &params[2], &params[3], *axis, *eps,
        )
        .unwrap();
        assert_eq!(out.name(), "T_batch_norm");
        let inputs: Vec<(&Tensor, &[f64])> = std::iter::once((&x, &xv[..]))
            .chain(params.iter().zip(&pv).map(|(t, v)| (t, &v[..])))
            .collect();
        let got = interpret(&out, &inputs);
        let want: Vec<f64> = (0..xv.len())
            .map(|flat| {
                let k = unravel(flat, shape)[ax];
                let (g, b, m, v) = (pv[0][k], pv[1][k], pv[2][k], pv[3][k]);
                (xv[flat] - m) / (v + eps).sqrt() * g + b
            })
            .collect();
        assert_close(
            &format!("batch_norm {shape:?} axis {axis}"),
            &got,
            &want,
            1e-5,
        );
    }
}

// ----- reshape, flatten, transpose, concatenate -----

#[test]
fn reshape_keeps_row_major_order() {
    let cases: &[(&[i64], &[i64], &[i64])] = &[
        (&[2, 3, 4], &[6, -1], &[6, 4]),
        (&[2, 3, 4], &[4, 3, 2], &[4, 3, 2]),
        (&[2, 3, 4], &[24], &[24]),
        (&[2, 3, 4], &[-1], &[24]),
        (&[2, 3, 4], &[1, -1, 1], &[1, 24, 1]),
        (&[2, 3, 4], &[2, 3, 4], &[2, 3, 4]),
        (&[7, 13], &[13, 7], &[13, 7]),
        (&[7, 13], &[-1, 7], &[13, 7]),
        (&[91], &[7, 1, 13], &[7, 1, 13]),
        (&[3, 1, 31], &[31, 3], &[31, 3]),
        (&[2, 3, 4, 5], &[5, -1, 2], &[5, 12, 2]),
    ];
    for (i, (from, to, want_shape)) in cases.iter().enumerate() {
        let x = ph(from, "x");
        let xv = rand_vals(numel(from), 300 + i as u64);
        let out = ops::reshape(&x, to).unwrap();
        assert_eq!(out.shape(), *want_shape, "reshape {from:?} -> {to:?}");
        let got = interpret(&out, &[(&x, &xv)]);
        // Row-major reshape does not move data: the flat order is unchanged.
        let want: Vec<f64> = xv.iter().map(|v| f32r(*v)).collect();
        assert_close(&format!("reshape {from:?} -> {to:?}"), &got, &want, 0.0);
    }
}

#[test]
fn flatten_keeps_batch_and_row_major_order() {
    let cases: &[(&[i64], [i64; 2])] = &[
        (&[2, 3, 4], [2, 12]),
        (&[3, 7], [3, 7]),
        (&[5], [5, 1]),
        (&[2, 1, 3, 5], [2, 15]),
        (&[1, 13, 1, 7], [1, 91]),
    ];
    for (i, (shape, want_shape)) in cases.iter().enumerate() {
        let x = ph(shape, "x");
        let xv: Vec<f64> = rand_vals(numel(shape), 400 + i as u64)
            .into_iter()
            .map(f32r)
            .collect();
        let out = ops::flatten(&x).unwrap();
        assert_eq!(out.shape(), want_shape, "flatten {shape:?}");
        assert_eq!(out.name(), "tensor");
        let got = interpret(&out, &[(&x, &xv)]);
        assert_close(&format!("flatten {shape:?}"), &got, &xv, 0.0);
    }
}

#[test]
fn transpose_matches_reference_for_every_permutation() {
    let shape = [2i64, 3, 5];
    let x = ph(&shape, "x");
    let xv: Vec<f64> = rand_vals(30, 500).into_iter().map(f32r).collect();
    let mut cases: Vec<(Vec<i64>, Vec<usize>)> = vec![
        (vec![0, 1, 2], vec![0, 1, 2]),
        (vec![0, 2, 1], vec![0, 2, 1]),
        (vec![1, 0, 2], vec![1, 0, 2]),
        (vec![1, 2, 0], vec![1, 2, 0]),
        (vec![2, 0, 1], vec![2, 0, 1]),
        (vec![2, 1, 0], vec![2, 1, 0]),
        (vec![-1, 0, -2], vec![2, 0, 1]),
        (vec![], vec![2, 1, 0]),
    ];
    cases.sort();
    for (axes, perm) in &cases {
        let out = ops::transpose(&x, axes).unwrap();
        let oshape: Vec<i64> = perm.iter().map(|p| shape[*p]).collect();
        assert_eq!(out.shape(), &oshape[..], "transpose {axes:?}");
        let got = interpret(&out, &[(&x, &xv)]);
        let mut want = vec![0.0; 30];
        for (flat, w) in want.iter_mut().enumerate() {
            let oi = unravel(flat, &oshape);
            let mut ii = [0usize; 3];
            for (k, p) in perm.iter().enumerate() {
                ii[*p] = oi[k];
            }
            *w = xv[ravel(&ii, &shape)];
        }
        assert_close(&format!("transpose {axes:?}"), &got, &want, 0.0);
    }
    // Batch > 1, 4-D, odd sizes: NCHW -> NHWC as a transpose.
    let s4 = [2i64, 3, 7, 5];
    let x4 = ph(&s4, "x");
    let xv4: Vec<f64> = rand_vals(210, 501).into_iter().map(f32r).collect();
    let out = ops::transpose(&x4, &[0, 2, 3, 1]).unwrap();
    let got = interpret(&out, &[(&x4, &xv4)]);
    let mut want = Vec::new();
    for n in 0..2 {
        for h in 0..7 {
            for w in 0..5 {
                for c in 0..3 {
                    want.push(xv4[((n * 3 + c) * 7 + h) * 5 + w]);
                }
            }
        }
    }
    assert_close("transpose 4-D", &got, &want, 0.0);
}

#[test]
fn concatenate_matches_block_copy_reference() {
    let cases: &[(&[&[i64]], i64)] = &[
        (&[&[2, 3, 4], &[2, 5, 4], &[2, 1, 4]], 1),
        (&[&[1, 3], &[2, 3], &[4, 3]], 0),
        (&[&[2, 2], &[2, 7], &[2, 13]], -1),
        (&[&[2, 3, 4], &[2, 3, 1]], 2),
        (&[&[3, 7]], 0),
        (&[&[7], &[13], &[1], &[5]], 0),
        (&[&[2, 3, 5], &[3, 3, 5]], -3),
    ];
    for (i, (shapes, axis)) in cases.iter().enumerate() {
        let nd = shapes[0].len();
        let ax = if *axis < 0 {
            (nd as i64 + axis) as usize
        } else {
            *axis as usize
        };
        let ts: Vec<Tensor> = shapes
            .iter()
            .enumerate()
            .map(|(k, s)| ph(s, &format!("x{k}")))
            .collect();
        let vals: Vec<Vec<f64>> = shapes
            .iter()
            .enumerate()
            .map(|(k, s)| {
                rand_vals(numel(s), 600 + 10 * i as u64 + k as u64)
                    .into_iter()
                    .map(f32r)
                    .collect()
            })
            .collect();
        let out = ops::concatenate(&ts, *axis).unwrap();
        let mut oshape = shapes[0].to_vec();
        oshape[ax] = shapes.iter().map(|s| s[ax]).sum();
        assert_eq!(out.shape(), &oshape[..]);
        assert_eq!(out.name(), "T_concat");
        let inputs: Vec<(&Tensor, &[f64])> =
            ts.iter().zip(&vals).map(|(t, v)| (t, &v[..])).collect();
        let got = interpret(&out, &inputs);
        // For each outer index, copy each piece's contiguous block in turn.
        let outer: i64 = shapes[0][..ax].iter().product();
        let inner: i64 = shapes[0][ax + 1..].iter().product();
        let mut want = Vec::new();
        for o in 0..outer as usize {
            for (s, v) in shapes.iter().zip(&vals) {
                let block = (s[ax] * inner) as usize;
                want.extend_from_slice(&v[o * block..(o + 1) * block]);
            }
        }
        assert_close(
            &format!("concatenate {shapes:?} axis {axis}"),
            &got,
            &want,
            0.0,
        );
    }
}

// ----- strided slice -----

/// Python's `range(n)[b:e:s]` (None as `None`).
fn py_slice(n: i64, b: Option<i64>, e: Option<i64>, s: i64) -> Vec<usize> {
    let norm = |v: i64| if v < 0 { v + n } else { v };
    let mut out = Vec::new();
    if s > 0 {
        let lo = b.map_or(0, |b| norm(b).clamp(0, n));
        let hi = e.map_or(n, |e| norm(e).clamp(0, n));
        let mut i = lo;
        while i < hi {
            out.push(i as usize);
            i += s;
        }
    } else {
        let hi = b.map_or(n - 1, |b| norm(b).clamp(-1, n - 1));
        let lo = e.map_or(-1, |e| norm(e).clamp(-1, n - 1));
        let mut i = hi;
        while i > lo {
            out.push(i as usize);
            i += s;
        }
    }
    out
}

#[test]
fn py_slice_reference_agrees_with_python() {
    // Values printed by CPython for `list(range(n)[b:e:s])`.
    assert_eq!(py_slice(7, Some(1), Some(6), 2), [1, 3, 5]);
    assert_eq!(py_slice(13, Some(12), None, -3), [12, 9, 6, 3, 0]);
    assert_eq!(py_slice(13, Some(5), Some(0), -1), [5, 4, 3, 2, 1]);
    assert_eq!(py_slice(7, Some(-100), Some(100), 1), [0, 1, 2, 3, 4, 5, 6]);
    assert_eq!(py_slice(7, Some(-2), None, -2), [5, 3, 1]);
    assert_eq!(py_slice(6, Some(-2), Some(0), -2), [4, 2]);
    assert_eq!(py_slice(6, Some(100), Some(-100), -4), [5, 1]);
    assert_eq!(py_slice(7, Some(0), Some(7), 10), [0]);
    assert_eq!(py_slice(5, Some(3), Some(1), 1), Vec::<usize>::new());
}

#[test]
fn strided_slice_matches_python_slicing() {
    // (shape, begin, end, strides); `i64::MIN`/`i64::MAX` stand for an open end.
    let open_lo = i64::MIN;
    let open_hi = i64::MAX;
    type Case<'a> = (&'a [i64], &'a [i64], &'a [i64], &'a [i64]);
    let cases: &[Case] = &[
        (&[7, 13], &[1, 2], &[6, 11], &[2, 3]),
        (&[7, 13], &[6, 12], &[open_lo, open_lo], &[-1, -3]),
        (&[7, 13], &[-2, 0], &[open_lo, 13], &[-2, 1]),
        (&[7, 13], &[0], &[100], &[]),
        (&[7, 13], &[-100, 5], &[100, 0], &[1, -1]),
        (&[7, 13], &[0, open_hi], &[7, open_lo], &[10, -4]),
        (&[4, 5, 6], &[3, 0, 5], &[0, 5, 0], &[-1, 2, -2]),
        (&[4, 5, 6], &[1, -4, -1], &[3, -1, -7], &[1, 1, -1]),
        (&[2, 3, 31], &[], &[], &[]),
        (&[2, 3, 31], &[1, 1, 30], &[2, 3, 2], &[1, 1, -7]),
    ];
    for (i, (shape, b, e, s)) in cases.iter().enumerate() {
        let x = ph(shape, "x");
        let xv: Vec<f64> = rand_vals(numel(shape), 700 + i as u64)
            .into_iter()
            .map(f32r)
            .collect();
        let out = ops::strided_slice(&x, b, e, s).unwrap();
        let sel: Vec<Vec<usize>> = (0..shape.len())
            .map(|d| {
                let open = |v: i64| (v != open_lo && v != open_hi).then_some(v);
                py_slice(
                    shape[d],
                    b.get(d).copied().and_then(open),
                    e.get(d).copied().and_then(open),
                    s.get(d).copied().unwrap_or(1),
                )
            })
            .collect();
        let oshape: Vec<i64> = sel.iter().map(|v| v.len() as i64).collect();
        assert_eq!(out.shape(), &oshape[..], "slice {b:?} {e:?} {s:?}");
        let got = interpret(&out, &[(&x, &xv)]);
        let want: Vec<f64> = (0..numel(&oshape))
            .map(|flat| {
                let oi = unravel(flat, &oshape);
                let ii: Vec<usize> = (0..shape.len()).map(|d| sel[d][oi[d]]).collect();
                xv[ravel(&ii, shape)]
            })
            .collect();
        assert_close(&format!("strided_slice case {i}"), &got, &want, 0.0);
    }
}

// ----- layout transforms -----

/// A layout of the reference: NCHW, NHWC or NCHW{f}c.
#[derive(Clone, Copy, Debug)]
enum Lay {
    Nchw,
    Nhwc,
    Blocked(usize),
}

impl Lay {
    fn name(self) -> String {
        match self {
            Lay::Nchw => "NCHW".into(),
            Lay::Nhwc => "NHWC".into(),
            Lay::Blocked(f) => format!("NCHW{f}c"),
        }
    }
    /// The shape of logical NCHW dims `[n, c, h, w]` in this layout.
    fn shape(self, [n, c, h, w]: [usize; 4]) -> Vec<i64> {
        let v = match self {
            Lay::Nchw => vec![n, c, h, w],
            Lay::Nhwc => vec![n, h, w, c],
            Lay::Blocked(f) => vec![n, c / f, h, w, f],
        };
        v.into_iter().map(|d| d as i64).collect()
    }
    /// The flat offset of logical element `(n, c, h, w)`.
    fn offset(self, [_, cc, hh, ww]: [usize; 4], [n, c, h, w]: [usize; 4]) -> usize {
        match self {
            Lay::Nchw => ((n * cc + c) * hh + h) * ww + w,
            Lay::Nhwc => ((n * hh + h) * ww + w) * cc + c,
            Lay::Blocked(f) => ((((n * (cc / f) + c / f) * hh + h) * ww) + w) * f + c % f,
        }
    }
}

/// Re-lays `data` (in `src`) out as `dst`, element by element over logical indices.
fn relayout(data: &[f64], dims: [usize; 4], src: Lay, dst: Lay) -> Vec<f64> {
    let mut out = vec![f64::NAN; data.len()];
    for n in 0..dims[0] {
        for c in 0..dims[1] {
            for h in 0..dims[2] {
                for w in 0..dims[3] {
                    let e = [n, c, h, w];
                    out[dst.offset(dims, e)] = data[src.offset(dims, e)];
                }
            }
        }
    }
    out
}

#[test]
fn layout_transform_every_direction_matches_reference() {
    let cases: &[([usize; 4], Lay, Lay)] = &[
        ([2, 16, 3, 5], Lay::Nchw, Lay::Nhwc),
        ([2, 16, 3, 5], Lay::Nhwc, Lay::Nchw),
        ([2, 16, 3, 5], Lay::Nchw, Lay::Blocked(16)),
        ([1, 8, 7, 13], Lay::Nchw, Lay::Blocked(4)),
        ([2, 16, 3, 5], Lay::Blocked(8), Lay::Nchw),
        ([2, 16, 3, 5], Lay::Blocked(8), Lay::Nhwc),
        ([2, 12, 3, 5], Lay::Nhwc, Lay::Blocked(4)),
        ([2, 16, 3, 5], Lay::Blocked(8), Lay::Blocked(4)),
        ([2, 16, 3, 5], Lay::Blocked(4), Lay::Blocked(8)),
        ([2, 12, 3, 5], Lay::Blocked(3), Lay::Blocked(4)),
        ([3, 7, 1, 3], Lay::Nchw, Lay::Blocked(7)),
        ([2, 3, 5, 7], Lay::Nchw, Lay::Blocked(1)),
    ];
    for (i, (dims, src, dst)) in cases.iter().enumerate() {
        let sshape = src.shape(*dims);
        let x = ph(&sshape, "x");
        let xv: Vec<f64> = rand_vals(numel(&sshape), 800 + i as u64)
            .into_iter()
            .map(f32r)
            .collect();
        let what = format!("{} -> {} {dims:?}", src.name(), dst.name());
        let out = ops::layout_transform(&x, &src.name(), &dst.name()).unwrap();
        assert_eq!(out.shape(), &dst.shape(*dims)[..], "{what}");
        assert_eq!((out.name(), out.tag()), ("T_layout_trans", "injective"));
        let got = interpret(&out, &[(&x, &xv)]);
        assert_close(&what, &got, &relayout(&xv, *dims, *src, *dst), 0.0);
    }
}

#[test]
fn layout_transform_round_trips_and_identity() {
    let dims = [2usize, 16, 3, 5];
    let x = ph(&Lay::Nchw.shape(dims), "x");
    let xv: Vec<f64> = rand_vals(480, 900).into_iter().map(f32r).collect();
    for mid in ["NHWC", "NCHW16c", "NCHW2c"] {
        let there = ops::layout_transform(&x, "NCHW", mid).unwrap();
        let back = ops::layout_transform(&there, mid, "NCHW").unwrap();
        assert_eq!(back.shape(), x.shape());
        let got = interpret(&back, &[(&x, &xv)]);
        assert_close(&format!("NCHW -> {mid} -> NCHW"), &got, &xv, 0.0);
    }
    // Equal layouts: the tensor itself, as TVM returns it.
    assert_eq!(ops::layout_transform(&x, "NCHW", "NCHW").unwrap(), x);
    // Other primal axes permute as well (weights: OIHW -> HWIO).
    let w = ph(&[4, 3, 2, 5], "w");
    let wv: Vec<f64> = rand_vals(120, 901).into_iter().map(f32r).collect();
    let out = ops::layout_transform(&w, "OIHW", "HWIO").unwrap();
    assert_eq!(out.shape(), [2, 5, 3, 4]);
    let got = interpret(&out, &[(&w, &wv)]);
    let mut want = Vec::new();
    for h in 0..2 {
        for ww in 0..5 {
            for i in 0..3 {
                for o in 0..4 {
                    want.push(wv[((o * 3 + i) * 2 + h) * 5 + ww]);
                }
            }
        }
    }
    assert_close("OIHW -> HWIO", &got, &want, 0.0);
}

// ----- pad -----

#[test]
fn pad_and_pad_with_match_reference() {
    /// (shape, pad before, pad after, fill value)
    type Case<'a> = (&'a [i64], &'a [i64], &'a [i64], f64);
    let cases: &[Case] = &[
        (&[2, 3, 5], &[0, 1, 2], &[0, 2, 1], 0.0),
        (&[7, 13], &[3, 0], &[0, 4], 1.5),
        (&[1, 5, 5, 3], &[0, 1, 1, 0], &[0, 1, 1, 0], -2.0),
        (&[4], &[0], &[0], 9.0),
        (&[3, 1], &[2, 2], &[1, 3], f64::NEG_INFINITY),
    ];
    for (i, (shape, before, after, value)) in cases.iter().enumerate() {
        let x = ph(shape, "x");
        let xv: Vec<f64> = rand_vals(numel(shape), 1000 + i as u64)
            .into_iter()
            .map(f32r)
            .collect();
        let out = if *value == 0.0 {
            ops::pad(&x, before, after, "pad_temp").unwrap()
        } else {
            ops::pad_with(&x, before, after, *value, "pad_temp").unwrap()
        };
        let oshape: Vec<i64> = (0..shape.len())
            .map(|d| shape[d] + before[d] + after[d])
            .collect();
        assert_eq!(out.shape(), &oshape[..]);
        let got = interpret(&out, &[(&x, &xv)]);
        let want: Vec<f64> = (0..numel(&oshape))
            .map(|flat| {
                let oi = unravel(flat, &oshape);
                let inside = (0..shape.len()).all(|d| {
                    let j = oi[d] as i64 - before[d];
                    j >= 0 && j < shape[d]
                });
                if inside {
                    let ii: Vec<usize> = (0..shape.len())
                        .map(|d| (oi[d] as i64 - before[d]) as usize)
                        .collect();
                    xv[ravel(&ii, shape)]
                } else {
                    *value
                }
            })
            .collect();
        // `assert_close` cannot compare infinities; compare those exactly first.
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            if w.is_infinite() {
                assert_eq!(g, w, "pad case {i} element {k}");
            }
        }
        let finite = |v: &[f64]| -> Vec<f64> {
            v.iter()
                .map(|x| if x.is_infinite() { 0.0 } else { *x })
                .collect()
        };
        assert_close(&format!("pad case {i}"), &finite(&got), &finite(&want), 0.0);
    }
    // An integer tensor padded with -inf gets the type's lowest value.
    let xi = ph_of(&[3], DataType::int(8), "x");
    let out = ops::pad_with(&xi, &[1], &[1], f64::NEG_INFINITY, "pad").unwrap();
    let got = interpret(&out, &[(&xi, &[1.0, 2.0, 3.0])]);
    assert_eq!(got, [-128.0, 1.0, 2.0, 3.0, -128.0]);
}

#[test]
fn pad_print_is_unchanged() {
    let x = ph(&[1, 56, 56, 64], "placeholder");
    let p = ops::pad(&x, &[0, 1, 1, 0], &[0, 1, 1, 0], "pad_temp").unwrap();
    assert_eq!(
        dag(&p).lines().nth(1).unwrap(),
        "pad_temp(i0, i1, i2, i3) = tir.if_then_else(((((i1 >= 1) && (i1 < 57)) && (i2 >= 1)) \
         && (i2 < 57)), placeholder[i0, (i1 - 1), (i2 - 1), i3], 0f)"
    );
}

// ----- names, tags, axes -----

#[test]
fn stage_names_tags_and_axes_follow_tvm() {
    let x = ph(&[2, 16, 3, 5], "x");
    let v = ph(&[16], "v");
    let i8t = ph_of(&[4], DataType::int(8), "q");
    let cases: Vec<(Tensor, &str, &str)> = vec![
        (ops::relu(&x).unwrap(), "T_relu", "elemwise"),
        (ops::clip(&x, 0.0, 6.0).unwrap(), "T_clip", "elemwise"),
        (ops::sigmoid(&x).unwrap(), "T_sigmoid", "elemwise"),
        (ops::tanh(&x).unwrap(), "T_tanh", "elemwise"),
        (ops::exp(&x).unwrap(), "T_exp", "elemwise"),
        (ops::sqrt(&x).unwrap(), "T_sqrt", "elemwise"),
        (ops::erf(&x).unwrap(), "T_erf", "elemwise"),
        (ops::gelu(&x).unwrap(), "T_gelu", "elemwise"),
        (
            ops::cast(&x, DataType::int32()).unwrap(),
            "T_cast",
            "elemwise",
        ),
        (
            ops::right_shift(&i8t, 2).unwrap(),
            "T_right_shift",
            "elemwise",
        ),
        (ops::add(&x, &ph(&[5], "w")).unwrap(), "T_add", "broadcast"),
        (ops::multiply(&x, &x).unwrap(), "T_multiply", "broadcast"),
        (ops::subtract(&x, &x).unwrap(), "T_subtract", "broadcast"),
        (ops::divide(&x, &x).unwrap(), "T_divide", "broadcast"),
        (ops::maximum(&x, &x).unwrap(), "T_maximum", "broadcast"),
        (ops::minimum(&x, &x).unwrap(), "T_minimum", "broadcast"),
        (ops::bias_add(&x, &v, 1).unwrap(), "T_add", "broadcast"),
        (
            ops::batch_norm_inference(&x, &v, &v, &v, &v, 1, 1e-5).unwrap(),
            "T_batch_norm",
            "broadcast",
        ),
        (ops::reshape(&x, &[-1]).unwrap(), "T_reshape", "injective"),
        (ops::transpose(&x, &[]).unwrap(), "T_transpose", "injective"),
        (
            ops::concatenate(&[x.clone(), x.clone()], 0).unwrap(),
            "T_concat",
            "injective",
        ),
        (ops::flatten(&x).unwrap(), "tensor", "injective"),
        (
            ops::strided_slice(&x, &[1], &[2], &[]).unwrap(),
            "T_strided_slice",
            "injective",
        ),
        (
            ops::layout_transform(&x, "NCHW", "NHWC").unwrap(),
            "T_layout_trans",
            "injective",
        ),
    ];
    for (t, name, tag) in cases {
        assert_eq!((t.name(), t.tag()), (name, tag));
        let axes: Vec<&str> = t.axis().iter().map(|a| a.name()).collect();
        let want: Vec<String> = (0..t.ndim()).map(|i| format!("ax{i}")).collect();
        assert_eq!(axes, want, "{name}");
    }
}

#[test]
fn index_expressions_read_like_tvm() {
    let x = ph(&[2, 3, 4], "x");
    let lines = |t: &Tensor| dag(t).lines().last().unwrap().to_string();
    assert_eq!(
        lines(&ops::concatenate(&[x.clone(), x.clone(), x.clone()], 1).unwrap()),
        "T_concat(ax0, ax1, ax2) = tir.if_then_else((((ax1 - 3) - 3) >= 0), \
         x[ax0, ((ax1 - 3) - 3), ax2], tir.if_then_else(((ax1 - 3) >= 0), \
         x[ax0, (ax1 - 3), ax2], x[ax0, ax1, ax2]))"
    );
    assert_eq!(
        lines(&ops::transpose(&x, &[2, 0, 1]).unwrap()),
        "T_transpose(ax0, ax1, ax2) = x[ax1, ax2, ax0]"
    );
    assert_eq!(
        lines(&ops::reshape(&x, &[6, -1]).unwrap()),
        "T_reshape(ax0, ax1) = x[floordiv(ax0, 3), floormod(ax0, 3), ax1]"
    );
    assert_eq!(
        lines(&ops::flatten(&x).unwrap()),
        "tensor(ax0, ax1) = x[ax0, floordiv(ax1, 4), floormod(ax1, 4)]"
    );
    let z = ph(&[2, 32, 3, 5], "z");
    assert_eq!(
        lines(&ops::layout_transform(&z, "NCHW", "NCHW16c").unwrap()),
        "T_layout_trans(ax0, ax1, ax2, ax3, ax4) = z[ax0, ((ax1*16) + ax4), ax2, ax3]"
    );
    let blocked = ph(&[2, 2, 3, 5, 16], "z");
    assert_eq!(
        lines(&ops::layout_transform(&blocked, "NCHW16c", "NHWC").unwrap()),
        "T_layout_trans(ax0, ax1, ax2, ax3) = z[ax0, floordiv(ax3, 16), ax1, ax2, floormod(ax3, 16)]"
    );
    let v = ph(&[3], "v");
    assert_eq!(
        lines(&ops::bias_add(&x, &v, 1).unwrap()),
        "T_add(ax0, ax1, ax2) = (x[ax0, ax1, ax2] + v[ax1])"
    );
    let q = ph_of(&[4], DataType::int(8), "q");
    assert_eq!(
        lines(&ops::relu(&q).unwrap()),
        "T_relu(ax0) = max(q[ax0], (int8)0)"
    );
}

// ----- errors -----

#[test]
fn invalid_attributes_are_typed_errors() {
    let x = ph(&[2, 16, 3, 5], "x");
    let xi = ph_of(&[4], DataType::int32(), "xi");
    let x8 = ph_of(&[4], DataType::int(8), "x8");
    let v = ph(&[16], "v");

    // Float-only unary operators refuse integer tensors.
    type Un = fn(&Tensor) -> Result<Tensor, TeError>;
    for (name, f) in [
        ("sigmoid", ops::sigmoid as Un),
        ("tanh", ops::tanh),
        ("exp", ops::exp),
        ("sqrt", ops::sqrt),
        ("erf", ops::erf),
        ("gelu", ops::gelu),
    ] {
        assert_eq!(attr_of(f(&xi)), pair(name, "dtype"));
    }
    assert_eq!(attr_of(ops::clip(&x, 1.0, 0.0)), pair("clip", "a_min"));
    assert_eq!(attr_of(ops::clip(&x, f64::NAN, 0.0)), pair("clip", "a_min"));
    assert_eq!(
        attr_of(ops::cast(&x, F32.with_lanes(4))),
        pair("cast", "dtype")
    );
    assert_eq!(
        attr_of(ops::right_shift(&x, 1)),
        pair("right_shift", "dtype")
    );
    assert_eq!(
        attr_of(ops::right_shift(&x8, 8)),
        pair("right_shift", "shift")
    );
    assert_eq!(
        attr_of(ops::right_shift(&x8, -1)),
        pair("right_shift", "shift")
    );

    // Broadcast: mismatched shapes name the operator and both shapes; types must match.
    let a = ph(&[2, 3], "a");
    let b = ph(&[4, 3], "b");
    for (name, r) in [
        ("add", ops::add(&a, &b)),
        ("subtract", ops::subtract(&a, &b)),
        ("multiply", ops::multiply(&b, &a)),
        ("divide", ops::divide(&a, &b)),
        ("maximum", ops::maximum(&a, &b)),
        ("minimum", ops::minimum(&a, &b)),
    ] {
        let (op, msg) = shape_err_of(r);
        assert_eq!(op, name);
        assert!(
            msg.contains("[2, 3]") && msg.contains("[4, 3]"),
            "{name}: {msg}"
        );
    }
    let (_, msg) = shape_err_of(ops::add(&ph(&[5, 1, 7], "p"), &ph(&[3, 6], "q")));
    assert!(msg.contains("[5, 1, 7]") && msg.contains("[3, 6]"), "{msg}");
    assert_eq!(
        attr_of(ops::add(&a, &ph_of(&[2, 3], DataType::float64(), "d"))),
        pair("add", "dtype")
    );

    // bias_add and batch_norm.
    assert_eq!(attr_of(ops::bias_add(&x, &v, 4)), pair("bias_add", "axis"));
    assert_eq!(attr_of(ops::bias_add(&x, &v, -5)), pair("bias_add", "axis"));
    assert_eq!(shape_err_of(ops::bias_add(&x, &v, 2)).0, "bias_add");
    assert_eq!(
        shape_err_of(ops::bias_add(&x, &ph(&[1, 16], "b2"), 1)).0,
        "bias_add"
    );
    assert_eq!(
        attr_of(ops::bias_add(
            &x,
            &ph_of(&[16], DataType::float64(), "b"),
            1
        )),
        pair("bias_add", "dtype")
    );
    let bn = |axis, eps, g: &Tensor| ops::batch_norm_inference(&x, g, &v, &v, &v, axis, eps);
    assert_eq!(attr_of(bn(1, -1.0, &v)), pair("batch_norm", "epsilon"));
    assert_eq!(attr_of(bn(1, f64::NAN, &v)), pair("batch_norm", "epsilon"));
    assert_eq!(attr_of(bn(7, 1e-5, &v)), pair("batch_norm", "axis"));
    assert_eq!(shape_err_of(bn(1, 1e-5, &ph(&[3], "g"))).0, "batch_norm");
    assert_eq!(
        attr_of(ops::batch_norm_inference(&xi, &xi, &xi, &xi, &xi, 0, 1e-5)),
        pair("batch_norm", "dtype")
    );

    // reshape.
    assert_eq!(
        attr_of(ops::reshape(&x, &[-1, -1])),
        pair("reshape", "newshape")
    );
    assert_eq!(
        attr_of(ops::reshape(&x, &[0, 480])),
        pair("reshape", "newshape")
    );
    assert_eq!(
        attr_of(ops::reshape(&x, &[-2, 480])),
        pair("reshape", "newshape")
    );
    let (op, msg) = shape_err_of(ops::reshape(&x, &[7, 7]));
    assert_eq!(op, "reshape");
    assert!(msg.contains("480") && msg.contains("[7, 7]"), "{msg}");
    assert_eq!(shape_err_of(ops::reshape(&x, &[7, -1])).0, "reshape");

    // transpose.
    assert_eq!(
        attr_of(ops::transpose(&x, &[0, 1, 2])),
        pair("transpose", "axes")
    );
    assert_eq!(
        attr_of(ops::transpose(&x, &[0, 1, 1, 2])),
        pair("transpose", "axes")
    );
    assert_eq!(
        attr_of(ops::transpose(&x, &[0, 1, 2, 4])),
        pair("transpose", "axes")
    );
    assert_eq!(
        attr_of(ops::transpose(&x, &[0, 1, 2, -5])),
        pair("transpose", "axes")
    );

    // concatenate.
    assert_eq!(
        attr_of(ops::concatenate(&[], 0)),
        pair("concatenate", "tensors")
    );
    assert_eq!(
        attr_of(ops::concatenate(&[x.clone(), x.clone()], 4)),
        pair("concatenate", "axis")
    );
    assert_eq!(
        shape_err_of(ops::concatenate(&[x.clone(), ph(&[2, 16, 4, 5], "y")], 1)).0,
        "concatenate"
    );
    assert_eq!(
        shape_err_of(ops::concatenate(&[x.clone(), ph(&[2, 16, 3], "y")], 0)).0,
        "concatenate"
    );
    assert_eq!(
        attr_of(ops::concatenate(
            &[a.clone(), ph_of(&[2, 3], DataType::float64(), "d")],
            0
        )),
        pair("concatenate", "dtype")
    );

    // flatten of a 0-d tensor.
    assert_eq!(shape_err_of(ops::flatten(&ph(&[], "s"))).0, "flatten");

    // strided_slice.
    assert_eq!(
        attr_of(ops::strided_slice(&x, &[0, 0], &[1, 1], &[1, 0])),
        pair("strided_slice", "strides")
    );
    assert_eq!(
        attr_of(ops::strided_slice(&x, &[0; 5], &[1; 5], &[])),
        pair("strided_slice", "begin")
    );
    assert_eq!(
        attr_of(ops::strided_slice(&x, &[], &[], &[1; 5])),
        pair("strided_slice", "strides")
    );
    assert_eq!(
        shape_err_of(ops::strided_slice(&x, &[1], &[1], &[])).0,
        "strided_slice"
    );
    assert_eq!(
        shape_err_of(ops::strided_slice(&x, &[0, 3], &[1, 5], &[1, -1])).0,
        "strided_slice"
    );

    // layout_transform.
    let lt = |s: &str, d: &str| attr_of(ops::layout_transform(&x, s, d));
    let src = pair("layout_transform", "src_layout");
    let dst = pair("layout_transform", "dst_layout");
    assert_eq!(lt("NCHW16", "NCHW"), src, "trailing factor");
    assert_eq!(lt("NCHW", "NCHWc"), dst, "sub-axis without factor");
    assert_eq!(lt("NCHW", "NCHW0c"), dst, "zero factor");
    assert_eq!(lt("NCHW", "NCHX"), dst, "different primal axes");
    assert_eq!(lt("NCHW", "NCHW3c"), dst, "factor does not divide 16");
    assert_eq!(
        lt("NCHW", "NCHW16d"),
        dst,
        "sub-axis without its primal axis"
    );
    assert_eq!(lt("NCH_W", "NCHW"), src, "bad character");
    assert_eq!(lt("NCHW", "NCHW4c2c"), dst, "two sub-axes of one axis");
    assert_eq!(lt("NCHW", ""), dst, "empty");
    assert_eq!(lt("nchw", "NCHW"), src, "lower case without factors");
    assert_eq!(
        shape_err_of(ops::layout_transform(&x, "NCHW16c", "NCHW")).0,
        "layout_transform",
        "rank differs from the layout"
    );
    let blocked = ph(&[2, 2, 3, 5, 8], "b");
    assert_eq!(
        shape_err_of(ops::layout_transform(&blocked, "NCHW16c", "NCHW")).0,
        "layout_transform",
        "sub-axis extent is not its factor"
    );
    assert_eq!(
        attr_of(ops::layout_transform(&x, "NNHW", "NCHW")),
        src,
        "repeated axis"
    );

    // pad.
    assert_eq!(
        attr_of(ops::pad(&x, &[0, -1, 0, 0], &[0; 4], "p")),
        pair("pad", "pad_before")
    );
    assert_eq!(
        attr_of(ops::pad(&x, &[0; 4], &[0, 0, -2, 0], "p")),
        pair("pad", "pad_after")
    );
    assert_eq!(
        attr_of(ops::pad(&x, &[0; 3], &[0; 4], "p")),
        pair("pad", "pad_before")
    );
    assert_eq!(
        attr_of(ops::pad_with(&x, &[0; 4], &[0; 5], 1.0, "p")),
        pair("pad", "pad_after")
    );
}

// ----- DAG facts -----

#[test]
fn flop_counts_follow_tvm() {
    let flops = |t: Tensor| ComputeDag::new(&[t]).unwrap().flop_count();
    let x = ph(&[2, 3, 4], "x");
    let b = ph(&[4], "b");
    // add: one per element; relu: one max per element.
    assert_eq!(flops(ops::relu(&ops::add(&x, &b).unwrap()).unwrap()), 48.0);
    // gelu: 0.5*x, x*(1/sqrt 2), 1 + erf, the product: four per element.
    assert_eq!(flops(ops::gelu(&x).unwrap()), 96.0);
    // clip: max and min.
    assert_eq!(flops(ops::clip(&x, 0.0, 6.0).unwrap()), 48.0);
    // batch_norm: sub, add, div, mul, add per element.
    let v = ph(&[3], "v");
    assert_eq!(
        flops(ops::batch_norm_inference(&x, &v, &v, &v, &v, 1, 1e-5).unwrap()),
        120.0
    );
    // Index arithmetic is integer, not the output's float type: no FLOPs.
    assert_eq!(flops(ops::reshape(&x, &[4, -1]).unwrap()), 0.0);
    assert_eq!(
        flops(ops::layout_transform(&ph(&[1, 8, 2, 2], "y"), "NCHW", "NCHW4c").unwrap()),
        0.0
    );
}

#[test]
fn workload_keys_ignore_placeholder_names() {
    let build = |xn: &str, bn: &str| {
        let x = ph(&[1, 7, 7, 16], xn);
        let b = ph(&[1, 1, 1, 16], bn);
        let y = ops::relu(&ops::add(&x, &b).unwrap()).unwrap();
        ComputeDag::new(&[y]).unwrap().workload_key()
    };
    assert_eq!(build("data", "bias"), build("x", "y"));
    let build_lt = |name: &str| {
        let x = ph(&[2, 16, 3, 5], name);
        let y = ops::layout_transform(&x, "NCHW", "NCHW8c").unwrap();
        ComputeDag::new(&[y]).unwrap().workload_key()
    };
    assert_eq!(build_lt("a"), build_lt("b"));
    assert_ne!(build("x", "b"), build_lt("x"));
    // A different operator on the same shapes has a different key.
    let x = ph(&[1, 7, 7, 16], "x");
    let b = ph(&[1, 1, 1, 16], "b");
    let other = ops::relu(&ops::multiply(&x, &b).unwrap()).unwrap();
    assert_ne!(
        ComputeDag::new(&[other]).unwrap().workload_key(),
        build("x", "b")
    );
}

#[test]
fn dag_relu_add_bias() {
    let x = ph(&[1, 56, 56, 64], "placeholder");
    let bias = ph(&[1, 1, 1, 64], "placeholder");
    let y = ops::relu(&ops::add(&x, &bias).unwrap()).unwrap();
    let text = dag(&y);
    assert!(text.contains(
        "T_add(ax0, ax1, ax2, ax3) = (placeholder[ax0, ax1, ax2, ax3] + placeholder[ax0, 0, 0, ax3])"
    ));
    assert!(text.contains("T_relu(ax0, ax1, ax2, ax3) = max(T_add[ax0, ax1, ax2, ax3], 0f)"));
    insta::assert_snapshot!(text);
}

/// The default schedule of a transform from NCHW into NHWC with 3 channels (an image's)
/// vectorizes the width, along which it reads its source, inside the channels' loop —
/// the channels are too few for a vector — and computes what the unscheduled program
/// does; with 16 channels it vectorizes the channels as before.
#[test]
fn a_layout_transform_into_three_channels_vectorizes_the_width() {
    use tessera_te::schedules::{default_schedule, CpuParams};
    let p = CpuParams {
        vector_lanes: 8,
        num_cores: 2,
        vectorize: true,
        gpu_threads: 0,
    };
    for (c, width_vectors) in [(3, true), (16, false)] {
        let x = ph(&[1, c, 32, 16], "x");
        let out = ops::layout_transform(&x, "NCHW", "NHWC").unwrap();
        let sch = default_schedule(&[out.clone()], p).unwrap();
        let args = [x, out.clone()];
        let f = tessera_te::lower(&sch, &args, "f").unwrap();
        let text = f.to_string();
        let vectorized: Vec<&str> = text.lines().filter(|l| l.contains("vectorized")).collect();
        assert_eq!(vectorized.len(), 1, "{text}");
        assert_eq!(
            vectorized[0].contains("ax2"),
            width_vectors,
            "C={c}: {text}"
        );
        common::assert_same_as_unscheduled(&sch, &[out], &args, 1);
    }
}
