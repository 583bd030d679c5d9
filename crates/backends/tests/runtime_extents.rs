//! Kernels whose extents are known only when they run (issue 61): one kernel, built for
//! the largest extent of an axis, reads the extent it runs from a one-element int32
//! tensor and computes exactly that many indices — rows of an elementwise stage, row
//! tiles of a register-tiled product, the terms of a reduction (also one factored into
//! vector lanes) — built by the CPU backend with two threads and run at every extent
//! up to the largest; the IR interpreter, our reference, runs the same function.
//!
//! A stage computes the indices below the extent and at most the rest of the tile or
//! vector they end in; what it does not compute keeps what it held (a sentinel here).
//! What a reduction does not reduce may be anything: NaN for a sum and 1e30 for a
//! maximum here (whose NaN rule would hide NaN), so that one term read past the extent
//! shows.

mod common;

use common::{build, bytes_of, values_of};
use tessera_ir::interp::{self, HostBuffer, Scalar};
use tessera_ir::{DataType, Expr, PrimFunc};
use tessera_te::schedules::{default_schedule, CpuParams};
use tessera_te::{compute_bounded, lower, max, placeholder, reduce_axis_bounded, sum, Tensor};

const SENTINEL: f32 = 777.0;

fn params() -> CpuParams {
    CpuParams {
        vector_lanes: 8,
        num_cores: 2,
        vectorize: true,
        gpu_threads: 0,
    }
}

/// A one-element int32 extent tensor and the expression that reads it.
fn extent(name: &str) -> (Tensor, Expr) {
    let t = placeholder(&[1], DataType::int32(), name).unwrap();
    let e = t.at(&[Expr::int(0)]);
    (t, e)
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    bytes_of(v, f32::to_ne_bytes)
}

fn i32_bytes(v: i32) -> Vec<u8> {
    v.to_ne_bytes().to_vec()
}

/// `rows × cols` values, NaN where `valid(row, col)` is false.
fn matrix(rows: usize, cols: usize, valid: impl Fn(usize, usize) -> bool) -> Vec<f32> {
    filled(rows, cols, f32::NAN, valid)
}

/// `rows × cols` values, `fill` where `valid(row, col)` is false.
fn filled(rows: usize, cols: usize, fill: f32, valid: impl Fn(usize, usize) -> bool) -> Vec<f32> {
    (0..rows * cols)
        .map(|i| {
            let (r, c) = (i / cols, i % cols);
            if valid(r, c) {
                ((i * 7 % 23) as f32 - 11.0) / 8.0
            } else {
                fill
            }
        })
        .collect()
}

/// `func` run by the interpreter on `args` (f32 buffers, and int32 extents given as
/// one-element vectors of `Scalar::I`).
fn interpret(func: &PrimFunc, args: Vec<HostBuffer>) -> Vec<HostBuffer> {
    let mut args = args;
    interp::run(func, &mut args).unwrap();
    args
}

fn host_f32(shape: &[usize], v: &[f32]) -> HostBuffer {
    HostBuffer {
        dtype: DataType::float32(),
        shape: shape.to_vec(),
        data: v.iter().map(|&x| Scalar::F(x as f64)).collect(),
    }
}

/// The kernel of `outputs` (a DAG reading its sizes from `extents`) with the default
/// schedule, its arguments the sizes, `inputs`, then the first output.
fn sized_kernel(
    extents: &Tensor,
    inputs: &[Tensor],
    outputs: &[Tensor],
    name: &str,
) -> common::Built {
    let mut args = vec![extents.clone()];
    args.extend(inputs.iter().cloned());
    args.push(outputs[0].clone());
    let func = lower(&default_schedule(outputs, params()).unwrap(), &args, name).unwrap();
    build(&func, "native", &[])
}

fn host_i32(v: i32) -> HostBuffer {
    HostBuffer {
        dtype: DataType::int32(),
        shape: vec![1],
        data: vec![Scalar::I(v as i64)],
    }
}

#[test]
fn an_elementwise_stage_computes_the_rows_below_its_runtime_extent() {
    let (rows, cols) = (13usize, 24usize);
    let (n_t, n) = extent("n");
    let x = placeholder(&[rows as i64, cols as i64], DataType::float32(), "x").unwrap();
    let y = compute_bounded(
        &[rows as i64, cols as i64],
        &[Some(n)],
        "y",
        "injective",
        &["i", "j"],
        |ix| x.at(ix) * 2.0 + 1.0,
    )
    .unwrap();
    let func = lower(
        &default_schedule(&[y.clone()], params()).unwrap(),
        &[n_t, x, y],
        "rows",
    )
    .unwrap();
    let text = func.to_string();
    assert!(text.contains("parallel"), "{text}");
    let kernel = build(&func, "native", &[]);
    let xv = matrix(rows, cols, |_, _| true);
    for n in 1..=rows {
        let mut args = vec![
            i32_bytes(n as i32),
            f32_bytes(&xv),
            f32_bytes(&vec![SENTINEL; rows * cols]),
        ];
        kernel.run(&mut args);
        let out = values_of(&args[2], f32::from_ne_bytes);
        for (i, (&o, &a)) in out.iter().zip(&xv).enumerate() {
            let want = if i / cols < n {
                a * 2.0 + 1.0
            } else {
                SENTINEL
            };
            assert_eq!(o, want, "n = {n}, element {i}");
        }
    }
}

#[test]
fn a_register_tiled_product_stops_at_runtime_rows_and_terms() {
    // 24 rows in tiles of 8 (a tile that the runtime rows cut is guarded), 21 terms,
    // 32 columns
    let (m, k, cols) = (24usize, 21usize, 32usize);
    let (rows_t, rows) = extent("rows");
    let (terms_t, terms) = extent("terms");
    let a = placeholder(&[m as i64, k as i64], DataType::float32(), "A").unwrap();
    let b = placeholder(&[k as i64, cols as i64], DataType::float32(), "B").unwrap();
    let r = reduce_axis_bounded(k as i64, terms, "k");
    let c = compute_bounded(
        &[m as i64, cols as i64],
        &[Some(rows)],
        "C",
        "matmul",
        &["i", "j"],
        |ix| {
            sum(
                a.at(&[ix[0].clone(), r.expr()]) * b.at(&[r.expr(), ix[1].clone()]),
                std::slice::from_ref(&r),
            )
        },
    )
    .unwrap();
    let args_t = [rows_t, terms_t, a, b, c.clone()];
    let func = lower(
        &default_schedule(&[c], params()).unwrap(),
        &args_t,
        "product",
    )
    .unwrap();
    let kernel = build(&func, "native", &[]);
    let text = func.to_string();
    assert!(text.contains("floordiv((rows[0] + 7), 8)"), "{text}");
    for (n_rows, n_terms) in [
        (1, 1),
        (1, 21),
        (7, 5),
        (8, 8),
        (9, 13),
        (16, 20),
        (19, 21),
        (24, 21),
    ] {
        let av = matrix(m, k, |i, kk| i < n_rows && kk < n_terms);
        let bv = matrix(k, cols, |kk, _| kk < n_terms);
        let mut args = vec![
            i32_bytes(n_rows as i32),
            i32_bytes(n_terms as i32),
            f32_bytes(&av),
            f32_bytes(&bv),
            f32_bytes(&vec![SENTINEL; m * cols]),
        ];
        kernel.run(&mut args);
        let out = values_of(&args[4], f32::from_ne_bytes);
        let reference = interpret(
            &func,
            vec![
                host_i32(n_rows as i32),
                host_i32(n_terms as i32),
                host_f32(&[m, k], &av),
                host_f32(&[k, cols], &bv),
                host_f32(&[m, cols], &vec![SENTINEL; m * cols]),
            ],
        );
        for i in 0..m {
            for j in 0..cols {
                let got = out[i * cols + j];
                let at = format!("rows {n_rows}, terms {n_terms}, C[{i}, {j}] = {got}");
                // the tile the runtime rows end in is computed whole (its rows past
                // them hold whatever the padded rows give); no tile after it is
                if i >= n_rows.div_ceil(8) * 8 {
                    assert_eq!(got, SENTINEL, "{at}: a tile past the runtime rows ran");
                    continue;
                }
                if i >= n_rows {
                    continue;
                }
                let want: f32 = (0..n_terms)
                    .map(|kk| av[i * k + kk] * bv[kk * cols + j])
                    .sum();
                assert!(
                    (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
                    "{at}, want {want}"
                );
                let interp = reference[4].data[i * cols + j].as_f64() as f32;
                assert!(
                    (got - interp).abs() <= 1e-5 * (1.0 + want.abs()),
                    "{at}, interpreter {interp}"
                );
            }
        }
    }
}

#[test]
fn a_reduction_factored_into_vector_lanes_stops_at_its_runtime_extent() {
    // the maximum over a last axis of 40 (five vectors of 8): the default schedule
    // factors it into lanes (rfactor), each lane stopping at the extent
    let (rows, len) = (5usize, 40usize);
    let (n_t, n) = extent("n");
    let x = placeholder(&[rows as i64, len as i64], DataType::float32(), "x").unwrap();
    let r = reduce_axis_bounded(len as i64, n, "k");
    let y = tessera_te::compute(&[rows as i64], "rowmax", &["i"], |ix| {
        max(x.at(&[ix[0].clone(), r.expr()]), std::slice::from_ref(&r))
    })
    .unwrap();
    let func = lower(
        &default_schedule(&[y.clone()], params()).unwrap(),
        &[n_t, x, y],
        "rowmax",
    )
    .unwrap();
    let text = func.to_string();
    assert!(
        text.contains(".rf"),
        "the reduction was not factored: {text}"
    );
    let kernel = build(&func, "native", &[]);
    for n in 1..=len {
        let xv = filled(rows, len, 1e30, |_, k| k < n);
        let mut args = vec![i32_bytes(n as i32), f32_bytes(&xv), f32_bytes(&[0.0; 5])];
        kernel.run(&mut args);
        let out = values_of(&args[2], f32::from_ne_bytes);
        let reference = interpret(
            &func,
            vec![
                host_i32(n as i32),
                host_f32(&[rows, len], &xv),
                host_f32(&[rows], &[0.0; 5]),
            ],
        );
        for i in 0..rows {
            let want = xv[i * len..i * len + n]
                .iter()
                .copied()
                .fold(f32::MIN, f32::max);
            assert_eq!(out[i], want, "n = {n}, row {i}");
            assert_eq!(
                reference[2].data[i].as_f64() as f32,
                want,
                "interpreter, n = {n}, row {i}"
            );
        }
    }
}

#[test]
fn a_kernel_without_runtime_extents_lowers_as_before() {
    // the same elementwise stage without a bound: static loops, no extent argument
    let x = placeholder(&[13, 24], DataType::float32(), "x").unwrap();
    let y = compute_bounded(&[13, 24], &[None], "y", "injective", &["i", "j"], |ix| {
        x.at(ix) * 2.0 + 1.0
    })
    .unwrap();
    let plain = tessera_te::compute_tagged(&[13, 24], "y", "injective", &["i", "j"], |ix| {
        x.at(ix) * 2.0 + 1.0
    })
    .unwrap();
    let a = lower(
        &default_schedule(&[y.clone()], params()).unwrap(),
        &[x.clone(), y],
        "f",
    )
    .unwrap();
    let b = lower(
        &default_schedule(&[plain.clone()], params()).unwrap(),
        &[x, plain],
        "f",
    )
    .unwrap();
    assert_eq!(a.to_string(), b.to_string());
}

/// An attention over `s` tokens of width 16 in two heads, from the operator library:
/// a projection, a reshape into heads and transposes, scores, a softmax over the keys,
/// the weighted sum of the values, a layer norm over the width. Inputs `x [s, 16]` and
/// `w [16, 16]`; output `[2, s, 8]`.
fn attention(s: i64) -> (Vec<Tensor>, Tensor) {
    use tessera_te::ops;
    let x = placeholder(&[s, 16], DataType::float32(), "x").unwrap();
    let w = placeholder(&[16, 16], DataType::float32(), "w").unwrap();
    let gamma = placeholder(&[16], DataType::float32(), "gamma").unwrap();
    let normed = ops::layer_norm(&x, &gamma, None, &[1], 1e-5).unwrap();
    let q = ops::dense(&normed, &w, None).unwrap();
    let heads = ops::transpose(&ops::reshape(&q, &[s, 2, 8]).unwrap(), &[1, 0, 2]).unwrap();
    let scores = ops::batch_matmul(&heads, &heads).unwrap();
    // the softmax over the keys of both heads' rows at once: [2·s, s], whose rows hold
    // the valid ones of each head apart at the largest size
    let rows = ops::softmax(&ops::reshape(&scores, &[2 * s, s]).unwrap()).unwrap();
    let p = ops::reshape(&rows, &[2, s, s]).unwrap();
    let values = ops::transpose(&ops::reshape(&x, &[s, 2, 8]).unwrap(), &[1, 2, 0]).unwrap();
    let out = ops::batch_matmul(&p, &values).unwrap();
    (vec![x, w, gamma], out)
}

#[test]
fn an_attention_built_at_two_sizes_runs_every_size_from_one_kernel() {
    use tessera_te::runtime_shape::{bound_by_difference, extent_tensor, Symbols};
    let max = 12i64;
    let (ins, out) = attention(max);
    let (_, other) = attention(max - 1);
    let extents = extent_tensor(1, "sizes").unwrap();
    let symbol = Symbols::new(extents.clone());
    let bounded = bound_by_difference(
        &[(vec![max], vec![out]), (vec![max - 1], vec![other])],
        &symbol,
    )
    .unwrap();
    let dag = tessera_te::ComputeDag::new(&bounded).unwrap();
    let printed = dag.to_string();
    // the scores' rows and keys, the softmax's reductions, the values' sum follow the size
    assert!(printed.contains("< sizes[0]"), "{printed}");
    let kernel = sized_kernel(&extents, &ins, &bounded, "attention");
    let w: Vec<f32> = (0..256)
        .map(|i| ((i * 5 % 17) as f32 - 8.0) / 16.0)
        .collect();
    let gamma: Vec<f32> = (0..16).map(|i| 0.5 + i as f32 / 16.0).collect();
    for s in 1..=max as usize {
        // the tokens past `s` are NaN: nothing at size `s` may read them
        let x = matrix(max as usize, 16, |r, _| r < s);
        let mut run = vec![
            i32_bytes(s as i32),
            f32_bytes(&x),
            f32_bytes(&w),
            f32_bytes(&gamma),
            f32_bytes(&vec![SENTINEL; 2 * max as usize * 8]),
        ];
        kernel.run(&mut run);
        let got = values_of(&run[4], f32::from_ne_bytes);
        // the same attention built for `s` alone, run by the interpreter
        let (ins_s, out_s) = attention(s as i64);
        let mut args_s = ins_s.clone();
        args_s.push(out_s.clone());
        let func_s = lower(
            &tessera_te::Schedule::create(&[out_s]).unwrap(),
            &args_s,
            "at_s",
        )
        .unwrap();
        let want = interpret(
            &func_s,
            vec![
                host_f32(&[s, 16], &x[..s * 16]),
                host_f32(&[16, 16], &w),
                host_f32(&[16], &gamma),
                host_f32(&[2, s, 8], &vec![0.0; 2 * s * 8]),
            ],
        );
        for h in 0..2 {
            for t in 0..max as usize {
                for d in 0..8 {
                    let g = got[(h * max as usize + t) * 8 + d];
                    if t >= s {
                        continue;
                    }
                    let r = want[3].data[(h * s + t) * 8 + d].as_f64() as f32;
                    assert!(
                        (g - r).abs() <= 1e-4 * (1.0 + r.abs()),
                        "size {s}: out[{h}, {t}, {d}] = {g}, want {r}"
                    );
                }
            }
        }
    }
}

#[test]
fn operations_whose_semantics_follow_the_size_are_refused() {
    use tessera_te::ops;
    use tessera_te::runtime_shape::{
        bound_by_difference, extent_tensor, RuntimeShapeError, Symbols,
    };
    let symbol = Symbols::new(extent_tensor(1, "sizes").unwrap());
    let two = |f: &dyn Fn(i64) -> Tensor| {
        bound_by_difference(&[(vec![9], vec![f(9)]), (vec![8], vec![f(8)])], &symbol)
    };
    // a mean over the tokens divides by their count
    let mean = |s: i64| {
        let x = placeholder(&[s, 4], DataType::float32(), "x").unwrap();
        ops::reduce(&x, ops::ReduceKind::Mean, &[0], false).unwrap()
    };
    let e = two(&mean).unwrap_err();
    assert!(matches!(e, RuntimeShapeError::SizeDependent { .. }), "{e}");
    // the last token: an index that follows the size
    let last = |s: i64| {
        let x = placeholder(&[s, 4], DataType::float32(), "x").unwrap();
        ops::strided_slice(&x, &[s - 1, 0], &[s, 4], &[1, 1]).unwrap()
    };
    let e = two(&last).unwrap_err();
    assert!(e.to_string().contains("depends on the size"), "{e}");
    // a sum over two rows of the size merged: the padding of the first would be summed
    let merged = |s: i64| {
        let x = placeholder(&[2, s], DataType::float32(), "x").unwrap();
        let flat = ops::reshape(&x, &[2 * s]).unwrap();
        ops::reduce(&flat, ops::ReduceKind::Sum, &[0], false).unwrap()
    };
    let e = two(&merged).unwrap_err();
    assert!(matches!(e, RuntimeShapeError::ReducesPadding { .. }), "{e}");
    // two sizes that are no multiple of the size plus a constant
    let odd = |s: i64| placeholder(&[s * s], DataType::float32(), "x").unwrap();
    let sq = |s: i64| {
        let x = odd(s);
        tessera_te::compute(&[s * s], "y", &["i"], |ix| x.at(ix) * 2.0).unwrap()
    };
    // (two builds cannot tell; a third does)
    two(&sq).unwrap();
    let e = bound_by_difference(
        &[
            (vec![9], vec![sq(9)]),
            (vec![8], vec![sq(8)]),
            (vec![7], vec![sq(7)]),
        ],
        &symbol,
    )
    .unwrap_err();
    assert!(matches!(e, RuntimeShapeError::NotAffine { .. }), "{e}");
    let e = bound_by_difference(&[(vec![8], vec![sq(8)]), (vec![9], vec![sq(9)])], &symbol)
        .unwrap_err();
    assert!(matches!(e, RuntimeShapeError::Builds(_)), "{e}");
    // a sum over a batch and a length merged into one axis: a product of two sizes,
    // named so (the rows of such an axis run in blocks, a sum over them is refused)
    let rows = |b: i64, l: i64| {
        let x = placeholder(&[b, l, 4], DataType::float32(), "x").unwrap();
        let flat = ops::reshape(&x, &[b * l, 4]).unwrap();
        ops::reduce(&flat, ops::ReduceKind::Sum, &[0], false).unwrap()
    };
    let points = [[8, 6], [7, 6], [6, 6], [8, 5], [8, 4], [7, 5]];
    let builds: Vec<(Vec<i64>, Vec<Tensor>)> = points
        .iter()
        .map(|p| (p.to_vec(), vec![rows(p[0], p[1])]))
        .collect();
    let e = bound_by_difference(&builds, &Symbols::new(extent_tensor(2, "sizes").unwrap()))
        .unwrap_err();
    assert!(matches!(e, RuntimeShapeError::ProductOfSizes { .. }), "{e}");
}

/// A cache of `p` rows and `t` new ones: the new rows' attention over both (`[t, 8]`);
/// with no cache (`p = 0`), over the new rows alone.
fn cache_attention(p: i64, t: i64) -> (Vec<Tensor>, Tensor) {
    use tessera_te::ops;
    let new = placeholder(&[t, 8], DataType::float32(), "new").unwrap();
    if p == 0 {
        let scores = ops::matmul(&new, &ops::transpose(&new, &[1, 0]).unwrap()).unwrap();
        let out = ops::matmul(&ops::softmax(&scores).unwrap(), &new).unwrap();
        return (vec![new], out);
    }
    let cache = placeholder(&[p, 8], DataType::float32(), "cache").unwrap();
    let all = ops::concatenate(&[cache.clone(), new.clone()], 0).unwrap();
    let scores = ops::matmul(&new, &ops::transpose(&all, &[1, 0]).unwrap()).unwrap();
    let out = ops::matmul(&ops::softmax(&scores).unwrap(), &all).unwrap();
    (vec![cache, new], out)
}

#[test]
fn two_sizes_a_cache_and_new_rows_run_every_pair_from_one_kernel() {
    use tessera_te::runtime_shape::{bound_by_difference, extent_tensor, Affine, Symbols};
    let (pm, tm) = (9i64, 4i64);
    let points = [
        vec![pm, tm],
        vec![pm - 1, tm],
        vec![pm - 2, tm],
        vec![pm, tm - 1],
        vec![pm, tm - 2],
        vec![pm - 1, tm - 1],
    ];
    let builds: Vec<(Vec<i64>, Vec<Tensor>)> = points
        .iter()
        .map(|p| (p.clone(), vec![cache_attention(p[0], p[1]).1]))
        .collect();
    // the placeholders of the largest build are the kernel's
    let (ins, out) = cache_attention(pm, tm);
    let mut builds = builds;
    builds[0].1 = vec![out];
    let extents = extent_tensor(2, "sizes").unwrap();
    let symbols = Symbols::new(extents.clone());
    let bounded = bound_by_difference(&builds, &symbols).unwrap();
    let printed = tessera_te::ComputeDag::new(&bounded).unwrap().to_string();
    // the concatenation's offset is the cache's length; the keys run to both lengths
    assert!(
        printed.contains("sizes[0]") && printed.contains("sizes[1]"),
        "{printed}"
    );
    assert_eq!(
        Affine::fit(&points[..4], &[13, 12, 11, 12]),
        Some(Affine {
            slopes: vec![1, 1],
            offset: 0
        })
    );
    // the same DAG at one new row (a decode step): its own shapes, and no size read but
    // the cache's
    let one = tessera_te::runtime_shape::specialize(&bounded, &extents, &[(1, 1)])
        .unwrap()
        .unwrap();
    assert_eq!(one[0].shape(), &[1, 8]);
    let printed = tessera_te::ComputeDag::new(&one).unwrap().to_string();
    assert!(
        !printed.contains("sizes[1]") && printed.contains("sizes[0]"),
        "{printed}"
    );
    for (what, dag, rows) in [("any", &bounded, 1..=tm as usize), ("one", &one, 1..=1)] {
        let kernel = sized_kernel(&extents, &ins, dag, "step");
        run_cache_attention(&kernel, what, pm, tm, rows);
    }
}

/// `kernel` (a cache attention of at most `pm` cached rows and `tm` new ones) run with
/// every cache length and `rows` new rows, each against the interpreter's build for it.
fn run_cache_attention(
    kernel: &common::Built,
    what: &str,
    pm: i64,
    tm: i64,
    rows: std::ops::RangeInclusive<usize>,
) {
    for p in 0..=pm as usize {
        for t in rows.clone() {
            let cache = matrix(pm as usize, 8, |r, _| r < p);
            let new = matrix(tm as usize, 8, |r, _| r < t);
            let sizes: Vec<u8> = [p as i32, t as i32]
                .iter()
                .flat_map(|v| v.to_ne_bytes())
                .collect();
            let mut run = vec![
                sizes,
                f32_bytes(&cache),
                f32_bytes(&new),
                f32_bytes(&vec![SENTINEL; tm as usize * 8]),
            ];
            kernel.run(&mut run);
            let got = values_of(&run[3], f32::from_ne_bytes);
            let (ins_s, out_s) = cache_attention(p as i64, t as i64);
            let mut args_s = ins_s.clone();
            args_s.push(out_s.clone());
            let func_s = lower(
                &tessera_te::Schedule::create(&[out_s]).unwrap(),
                &args_s,
                "at",
            )
            .unwrap();
            let mut bufs = vec![
                host_f32(&[t, 8], &new[..t * 8]),
                host_f32(&[t, 8], &vec![0.0; t * 8]),
            ];
            if p > 0 {
                bufs.insert(0, host_f32(&[p, 8], &cache[..p * 8]));
            }
            let want = interpret(&func_s, bufs);
            let want = &want.last().unwrap().data;
            for (i, (g, w)) in got.iter().zip(want).enumerate() {
                let r = w.as_f64() as f32;
                assert!(
                    (g - r).abs() <= 1e-4 * (1.0 + r.abs()),
                    "{what}: cache {p}, new {t}: out[{i}] = {g}, want {r}"
                );
            }
        }
    }
}

/// A batch and a length merged into a product's rows: `x [b, s, 16]` read as `b · s`
/// rows of 16 (a 3-D MatMul imported as a dense) times `w [24, 16]`; with `back`, the
/// product read back as `[b, s, 24]` plus one (its rows in two axes again).
fn merged_rows(b: i64, s: i64, back: bool) -> (Vec<Tensor>, Tensor) {
    use tessera_te::ops;
    let x = placeholder(&[b, s, 16], DataType::float32(), "x").unwrap();
    let w = placeholder(&[24, 16], DataType::float32(), "w").unwrap();
    let rows = ops::reshape(&x, &[b * s, 16]).unwrap();
    let y = ops::dense(&rows, &w, None).unwrap();
    if !back {
        return (vec![x, w], y);
    }
    let y3 = ops::reshape(&y, &[b, s, 24]).unwrap();
    let out = tessera_te::compute(&[b, s, 24], "plus_one", &["b", "s", "j"], |ix| {
        y3.at(ix) + 1.0
    })
    .unwrap();
    (vec![x, w], out)
}

#[test]
fn a_batch_and_a_length_merged_into_rows_run_every_pair_in_tiles_of_valid_rows() {
    run_merged_rows(false);
}

/// The product's rows read back in two axes, a batch's and a length's: their fused loop
/// runs the valid rows only (compacted), the product's tiles computed where it needs them.
#[test]
fn rows_in_blocks_read_back_in_two_axes_run_the_valid_rows_only() {
    run_merged_rows(true);
}

fn run_merged_rows(back: bool) {
    use tessera_te::runtime_shape::{bound_by_difference, extent_tensor, Symbols};
    let (bm, sm) = (4i64, 32i64);
    let points = [
        vec![bm, sm],
        vec![bm - 1, sm],
        vec![bm - 2, sm],
        vec![bm, sm - 8],
        vec![bm, sm - 16],
        vec![bm - 1, sm - 8],
    ];
    let (ins, out) = merged_rows(bm, sm, back);
    let mut builds: Vec<(Vec<i64>, Vec<Tensor>)> = points
        .iter()
        .map(|p| (p.clone(), vec![merged_rows(p[0], p[1], back).1]))
        .collect();
    builds[0].1 = vec![out];
    let extents = extent_tensor(2, "sizes").unwrap();
    let bounded = bound_by_difference(&builds, &Symbols::new(extents.clone())).unwrap();
    let printed = tessera_te::ComputeDag::new(&bounded).unwrap().to_string();
    // the rows run to the batch's blocks, and hold the length's first rows of each
    assert!(printed.contains("% 32 < sizes[1]"), "{printed}");
    assert!(printed.contains("< (sizes[0]*32)"), "{printed}");
    let kernel = sized_kernel(&extents, &ins, &bounded, "rows");
    // a tile's rows start where the sizes put them, computed once per tile: the loops
    // inside the tile (columns, terms, the register tile) read no size, divide nothing
    let inner = loop_body(&kernel.source, "for (int32_t j_outer = 0");
    assert!(!inner.is_empty(), "{}", kernel.source);
    assert!(
        !inner.contains("sizes[") && !inner.contains(" / ") && !inner.contains("floordiv"),
        "{inner}"
    );
    let w = matrix(24, 16, |_, _| true);
    for b in 1..=bm as usize {
        for s in 1..=sm as usize {
            // a padding row of the input is NaN: no valid row may read one
            let smu = sm as usize;
            let x = matrix(bm as usize * smu, 16, |r, _| r / smu < b && r % smu < s);
            let sizes: Vec<u8> = [b as i32, s as i32]
                .iter()
                .flat_map(|v| v.to_ne_bytes())
                .collect();
            let mut run = vec![
                sizes,
                f32_bytes(&x),
                f32_bytes(&w),
                f32_bytes(&vec![SENTINEL; (bm * sm * 24) as usize]),
            ];
            kernel.run(&mut run);
            let got = values_of(&run[3], f32::from_ne_bytes);
            for r in 0..(bm * sm) as usize {
                let (blk, t) = (r / sm as usize, r % sm as usize);
                for j in 0..24 {
                    let g = got[r * 24 + j];
                    let at = format!("batch {b}, length {s}: y[{blk}·{sm} + {t}, {j}] = {g}");
                    // (read back in two axes, a row past the length is not written)
                    let run = if back { s } else { s.div_ceil(16) * 16 };
                    if blk >= b || t >= run {
                        // a block past the batch, a tile past the length: not run
                        assert_eq!(g, SENTINEL, "{at}");
                    } else if t < s {
                        let dot: f32 = (0..16).map(|k| x[r * 16 + k] * w[j * 16 + k]).sum();
                        let want = if back { dot + 1.0 } else { dot };
                        assert!(
                            (g - want).abs() <= 1e-5 * (1.0 + want.abs()),
                            "{at}, want {want}"
                        );
                    }
                }
            }
        }
    }
}

/// The lines of the first C loop of `source` whose header starts with `header`, to its
/// closing brace (empty where there is none).
fn loop_body(source: &str, header: &str) -> String {
    let mut out = Vec::new();
    let mut depth = 0i64;
    for line in source
        .lines()
        .skip_while(|l| !l.trim_start().starts_with(header))
    {
        depth += line.matches('{').count() as i64 - line.matches('}').count() as i64;
        out.push(line);
        if depth <= 0 {
            break;
        }
    }
    out.join("\n")
}

/// An intermediate as large as those a module for a range of sizes allocates at the
/// largest (40 MiB here): kept between calls (the slot the C takes and gives back), and
/// each call computes from its own inputs, not the last call's.
#[test]
fn a_large_intermediate_is_kept_between_calls_and_recomputed_by_each() {
    let n = 10 * 1024 * 1024usize;
    let x = placeholder(&[n as i64], DataType::float32(), "x").unwrap();
    let y = tessera_te::compute(&[n as i64], "twice", &["i"], |ix| x.at(ix) * 2.0).unwrap();
    let z = tessera_te::compute(&[n as i64], "plus", &["i"], |ix| {
        y.at(&[Expr::int(n as i64 - 1) - ix[0].clone()]) + 1.0
    })
    .unwrap();
    let func = lower(
        &tessera_te::Schedule::create(&[z.clone()]).unwrap(),
        &[x, z],
        "kept",
    )
    .unwrap();
    let kernel = build(&func, "native", &["__atomic_exchange_n"]);
    for call in 0..3 {
        let xs: Vec<f32> = (0..n).map(|i| ((i + call) % 97) as f32).collect();
        let mut args = vec![f32_bytes(&xs), f32_bytes(&vec![0.0; n])];
        kernel.run(&mut args);
        let out = values_of(&args[1], f32::from_ne_bytes);
        for i in (0..n).step_by(4099).chain([0, n - 1]) {
            assert_eq!(
                out[i],
                xs[n - 1 - i] * 2.0 + 1.0,
                "call {call}, element {i}"
            );
        }
    }
}
