//! Pooling (pool2d, global, adaptive), dense, batch_matmul, softmax, log_softmax and
//! layer norm against independent references written as plain loops over `Vec<f64>`,
//! over grids of cases (odd sizes, stride 2, dilation 2, asymmetric padding, batch > 1,
//! both layouts, count_include_pad on and off, ceil mode, several adaptive output
//! sizes); their error paths; FLOP counts, workload keys and DAG prints (snapshots).

mod common;

use common::{assert_close, interpret, rand_vals};
use tessera_ir::DataType;
use tessera_te::ops::{self, Pool2dAttrs, PoolType};
use tessera_te::{placeholder, ComputeDag, TeError, Tensor};

const F32: DataType = DataType::float32();
const TOL: f64 = 1e-5;

fn ph(shape: &[i64], name: &str) -> Tensor {
    placeholder(shape, F32, name).unwrap()
}

fn numel(shape: &[i64]) -> usize {
    shape.iter().product::<i64>() as usize
}

fn dag(t: &Tensor) -> String {
    ComputeDag::new(&[t.clone()]).unwrap().to_string()
}

fn key(t: &Tensor) -> String {
    ComputeDag::new(&[t.clone()]).unwrap().workload_key()
}

fn flops(t: &Tensor) -> f64 {
    ComputeDag::new(&[t.clone()]).unwrap().flop_count()
}

// ----- dense -----

/// `out[i, j] = Σ_k x[i, k]·w[j, k] (+ b[j])`.
fn dense_ref(x: &[f64], w: &[f64], b: Option<&[f64]>, m: usize, n: usize, k: usize) -> Vec<f64> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0.0;
            for kk in 0..k {
                acc += x[i * k + kk] * w[j * k + kk];
            }
            out[i * n + j] = acc + b.map_or(0.0, |b| b[j]);
        }
    }
    out
}

#[test]
fn dense_matches_reference() {
    for (m, n, k) in [(1, 7, 13), (3, 13, 7), (7, 5, 31), (2, 31, 3)] {
        let x = ph(&[m, k], "data");
        let w = ph(&[n, k], "weight");
        let b = ph(&[n], "bias");
        let (mu, nu, ku) = (m as usize, n as usize, k as usize);
        let xv = rand_vals(mu * ku, 1);
        let wv = rand_vals(nu * ku, 2);
        let bv = rand_vals(nu, 3);
        let out = ops::dense(&x, &w, None).unwrap();
        assert_eq!((out.name(), out.tag()), ("T_matmul_NT", "dense"));
        assert_eq!(out.shape(), [m, n]);
        let got = interpret(&out, &[(&x, &xv), (&w, &wv)]);
        assert_close(
            &format!("dense {m}x{n}x{k}"),
            &got,
            &dense_ref(&xv, &wv, None, mu, nu, ku),
            TOL,
        );
        let out = ops::dense(&x, &w, Some(&b)).unwrap();
        assert_eq!((out.name(), out.tag()), ("T_add", "broadcast"));
        assert_eq!(out.inputs()[0].name(), "T_matmul_NT");
        let got = interpret(&out, &[(&x, &xv), (&w, &wv), (&b, &bv)]);
        assert_close(
            &format!("dense+bias {m}x{n}x{k}"),
            &got,
            &dense_ref(&xv, &wv, Some(&bv), mu, nu, ku),
            TOL,
        );
    }
}

#[test]
fn dense_flops_and_workload_keys() {
    let (m, n, k) = (3i64, 5i64, 7i64);
    let x = ph(&[m, k], "data");
    let w = ph(&[n, k], "weight");
    let b = ph(&[n], "bias");
    let plain = ops::dense(&x, &w, None).unwrap();
    assert_eq!(flops(&plain), (2 * m * n * k) as f64);
    let biased = ops::dense(&x, &w, Some(&b)).unwrap();
    assert_eq!(flops(&biased), (2 * m * n * k + m * n) as f64);
    let x2 = ph(&[m, k], "A");
    let w2 = ph(&[n, k], "B");
    let b2 = ph(&[n], "C");
    assert_eq!(key(&plain), key(&ops::dense(&x2, &w2, None).unwrap()));
    assert_eq!(key(&biased), key(&ops::dense(&x2, &w2, Some(&b2)).unwrap()));
    assert_ne!(key(&plain), key(&biased));
    // dense is not matmul: the weight is read transposed.
    let wt = ph(&[k, n], "B");
    assert_ne!(key(&plain), key(&ops::matmul(&x2, &wt).unwrap()));
}

// ----- batch_matmul -----

#[allow(clippy::too_many_arguments)]
fn batch_matmul_ref(
    a: &[f64],
    b: &[f64],
    (xb, yb): (usize, usize),
    (m, n, k): (usize, usize, usize),
    ta: bool,
    tb: bool,
) -> Vec<f64> {
    let batch = xb.max(yb);
    let mut out = vec![0.0; batch * m * n];
    for bi in 0..batch {
        let ab = if xb == 1 { 0 } else { bi };
        let bb = if yb == 1 { 0 } else { bi };
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0.0;
                for kk in 0..k {
                    // a is [B, M, K] or, transposed, [B, K, M]; b is [B, K, N] or [B, N, K].
                    let av = if ta {
                        a[(ab * k + kk) * m + i]
                    } else {
                        a[(ab * m + i) * k + kk]
                    };
                    let bv = if tb {
                        b[(bb * n + j) * k + kk]
                    } else {
                        b[(bb * k + kk) * n + j]
                    };
                    acc += av * bv;
                }
                out[(bi * m + i) * n + j] = acc;
            }
        }
    }
    out
}

#[test]
fn batch_matmul_matches_reference() {
    let cases = [
        (2, 2, 3, 5, 7),
        (1, 3, 7, 5, 3),
        (3, 1, 5, 13, 7),
        (1, 1, 13, 7, 5),
        (2, 2, 1, 31, 3),
    ];
    for (xb, yb, m, n, k) in cases {
        for (ta, tb) in [(false, true), (false, false), (true, false), (true, true)] {
            let sa = if ta { [xb, k, m] } else { [xb, m, k] };
            let sb = if tb { [yb, n, k] } else { [yb, k, n] };
            let a = ph(&sa, "A");
            let b = ph(&sb, "B");
            let out = if (ta, tb) == (false, true) {
                ops::batch_matmul(&a, &b).unwrap()
            } else {
                ops::batch_matmul_with(&a, &b, ta, tb).unwrap()
            };
            let name = format!(
                "T_batch_matmul_{}{}",
                if ta { "T" } else { "N" },
                if tb { "T" } else { "N" }
            );
            assert_eq!((out.name(), out.tag()), (name.as_str(), "batch_matmul"));
            assert_eq!(out.shape(), [xb.max(yb), m, n]);
            assert_eq!(out.reduce_axis()[0].name(), "k");
            let av = rand_vals(numel(&sa), 11);
            let bv = rand_vals(numel(&sb), 12);
            let got = interpret(&out, &[(&a, &av), (&b, &bv)]);
            let want = batch_matmul_ref(
                &av,
                &bv,
                (xb as usize, yb as usize),
                (m as usize, n as usize, k as usize),
                ta,
                tb,
            );
            assert_close(&format!("{name} {sa:?} x {sb:?}"), &got, &want, TOL);
        }
    }
}

#[test]
fn batch_matmul_flops_and_workload_keys() {
    let a = ph(&[2, 3, 7], "A");
    let b = ph(&[2, 5, 7], "B");
    let out = ops::batch_matmul(&a, &b).unwrap();
    assert_eq!(flops(&out), (2 * 2 * 3 * 5 * 7) as f64);
    let bn = ph(&[2, 7, 5], "B");
    assert_eq!(
        flops(&ops::batch_matmul_with(&a, &bn, false, false).unwrap()),
        (2 * 2 * 3 * 5 * 7) as f64
    );
    let a2 = ph(&[2, 3, 7], "x");
    let b2 = ph(&[2, 5, 7], "y");
    assert_eq!(key(&out), key(&ops::batch_matmul(&a2, &b2).unwrap()));
    assert_ne!(
        key(&out),
        key(&ops::batch_matmul_with(&a2, &ph(&[2, 7, 5], "y"), false, false).unwrap())
    );
}

// ----- pool2d -----

/// One pool2d case: shapes in logical NCHW terms and the attributes.
#[derive(Clone, Copy, Debug)]
struct PoolCase {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    k: (usize, usize),
    s: (usize, usize),
    d: (usize, usize),
    /// top, left, bottom, right.
    pad: [usize; 4],
    ceil: bool,
}

impl PoolCase {
    fn attrs(&self, layout: &str, count_include_pad: bool) -> Pool2dAttrs {
        let [t, l, b, r] = self.pad.map(|p| p as i64);
        Pool2dAttrs::new(
            (self.k.0 as i64, self.k.1 as i64),
            (self.s.0 as i64, self.s.1 as i64),
            (0, 0),
        )
        .with_padding(t, l, b, r)
        .with_dilation((self.d.0 as i64, self.d.1 as i64))
        .with_layout(layout)
        .with_ceil_mode(self.ceil)
        .with_count_include_pad(count_include_pad)
    }
    /// Output (height, width): ⌊(in + pads − dilated kernel) / stride⌋ + 1, or with the
    /// ceiling in ceil mode.
    fn out_hw(&self) -> (usize, usize) {
        // in ceil mode a last window that would start in the right padding is dropped
        // (ONNX's and PyTorch's rule)
        let len = |n: usize, k: usize, s: usize, d: usize, p0: usize, p1: usize| {
            let span = (n + p0 + p1 - ((k - 1) * d + 1)) as f64 / s as f64;
            let out = (if self.ceil { span.ceil() } else { span.floor() }) as usize + 1;
            if self.ceil && out > 1 && (out - 1) * s >= n + p0 {
                out - 1
            } else {
                out
            }
        };
        (
            len(
                self.h,
                self.k.0,
                self.s.0,
                self.d.0,
                self.pad[0],
                self.pad[2],
            ),
            len(
                self.w,
                self.k.1,
                self.s.1,
                self.d.1,
                self.pad[1],
                self.pad[3],
            ),
        )
    }
}

/// Row-major offset of logical `(n, c, h, w)` in a tensor of logical dims `[N, C, H, W]`
/// stored as NCHW or NHWC.
fn offset(nhwc: bool, dims: [usize; 4], n: usize, c: usize, h: usize, w: usize) -> usize {
    let [_, cc, hh, ww] = dims;
    if nhwc {
        ((n * hh + h) * ww + w) * cc + c
    } else {
        ((n * cc + c) * hh + h) * ww + w
    }
}

/// Pooling by definition. `mode`: max, avg not counting padding, avg counting the
/// explicit padding (never the extra rows/columns of ceil mode). Padded positions are
/// the lowest float32 for max; a window without any counted element gives 0 for avg.
fn pool_ref(x: &[f64], pc: &PoolCase, nhwc: bool, mode: &str) -> Vec<f64> {
    let (oh, ow) = pc.out_hw();
    let in_dims = [pc.n, pc.c, pc.h, pc.w];
    let out_dims = [pc.n, pc.c, oh, ow];
    let mut out = vec![0.0; pc.n * pc.c * oh * ow];
    for n in 0..pc.n {
        for c in 0..pc.c {
            for y in 0..oh {
                for xo in 0..ow {
                    let mut best = f32::MIN as f64;
                    let mut total = 0.0;
                    let mut inside = 0usize;
                    let mut in_pad_y = 0usize;
                    let mut in_pad_x = 0usize;
                    for ky in 0..pc.k.0 {
                        let iy = (y * pc.s.0 + ky * pc.d.0) as i64 - pc.pad[0] as i64;
                        if iy >= -(pc.pad[0] as i64) && iy < (pc.h + pc.pad[2]) as i64 {
                            in_pad_y += 1;
                        }
                    }
                    for kx in 0..pc.k.1 {
                        let ix = (xo * pc.s.1 + kx * pc.d.1) as i64 - pc.pad[1] as i64;
                        if ix >= -(pc.pad[1] as i64) && ix < (pc.w + pc.pad[3]) as i64 {
                            in_pad_x += 1;
                        }
                    }
                    for ky in 0..pc.k.0 {
                        for kx in 0..pc.k.1 {
                            let iy = (y * pc.s.0 + ky * pc.d.0) as i64 - pc.pad[0] as i64;
                            let ix = (xo * pc.s.1 + kx * pc.d.1) as i64 - pc.pad[1] as i64;
                            let valid =
                                iy >= 0 && ix >= 0 && (iy as usize) < pc.h && (ix as usize) < pc.w;
                            let v = if valid {
                                inside += 1;
                                x[offset(nhwc, in_dims, n, c, iy as usize, ix as usize)]
                            } else {
                                f32::MIN as f64
                            };
                            best = best.max(v);
                            if valid {
                                total += v;
                            }
                        }
                    }
                    let count = match mode {
                        "avg" => inside,
                        _ => in_pad_y * in_pad_x,
                    };
                    let v = match mode {
                        "max" => best,
                        _ if count == 0 => 0.0,
                        _ => total / count as f64,
                    };
                    out[offset(nhwc, out_dims, n, c, y, xo)] = v;
                }
            }
        }
    }
    out
}

fn pool_cases() -> Vec<PoolCase> {
    let base = PoolCase {
        n: 1,
        c: 3,
        h: 7,
        w: 7,
        k: (3, 3),
        s: (1, 1),
        d: (1, 1),
        pad: [0; 4],
        ceil: false,
    };
    vec![
        base,
        // batch 2, stride 2, symmetric padding.
        PoolCase {
            n: 2,
            c: 2,
            h: 13,
            w: 7,
            s: (2, 2),
            pad: [1; 4],
            ..base
        },
        // dilation 2, asymmetric padding, non-square kernel and stride.
        PoolCase {
            c: 2,
            h: 9,
            w: 13,
            k: (2, 3),
            s: (2, 1),
            d: (2, 2),
            pad: [0, 1, 2, 0],
            ..base
        },
        // ceil mode: the width rounds up, the height does not need to.
        PoolCase {
            c: 2,
            h: 7,
            w: 8,
            s: (2, 2),
            ceil: true,
            ..base
        },
        // ceil mode with dilation and asymmetric padding, batch 2.
        PoolCase {
            n: 2,
            c: 1,
            h: 13,
            w: 10,
            k: (2, 2),
            s: (3, 3),
            d: (2, 2),
            pad: [1, 0, 0, 2],
            ceil: true,
        },
        // ceil mode with a stride larger than the window: a last row of windows would
        // lie past the input (TVM keeps it, and would divide by zero for
        // count_include_pad; ONNX and PyTorch drop it).
        PoolCase {
            c: 1,
            h: 8,
            w: 7,
            k: (1, 2),
            s: (4, 2),
            ceil: true,
            ..base
        },
        // padding as large as the window: some windows read padding only.
        PoolCase {
            c: 2,
            h: 6,
            w: 5,
            k: (2, 2),
            pad: [2, 0, 0, 2],
            ..base
        },
        // odd size 31.
        PoolCase {
            c: 1,
            h: 31,
            w: 31,
            s: (2, 2),
            pad: [1; 4],
            ..base
        },
    ]
}

#[test]
fn pool2d_matches_reference() {
    for (ci, pc) in pool_cases().iter().enumerate() {
        for layout in ["NCHW", "NHWC"] {
            let nhwc = layout == "NHWC";
            let (n, c, h, w) = (pc.n as i64, pc.c as i64, pc.h as i64, pc.w as i64);
            let shape = if nhwc { [n, h, w, c] } else { [n, c, h, w] };
            let x = ph(&shape, "data");
            let xv = rand_vals(numel(&shape), 20 + ci as u64);
            let (oh, ow) = pc.out_hw();
            let want_shape = if nhwc {
                [n, oh as i64, ow as i64, c]
            } else {
                [n, c, oh as i64, ow as i64]
            };
            for (mode, pool_type, cip) in [
                ("max", PoolType::Max, false),
                ("avg", PoolType::Avg, false),
                ("avg_include_pad", PoolType::Avg, true),
            ] {
                let out = ops::pool2d(&x, pool_type, &pc.attrs(layout, cip)).unwrap();
                assert_eq!(out.shape(), want_shape, "case {ci} {layout} {mode}");
                let got = interpret(&out, &[(&x, &xv)]);
                let want = pool_ref(&xv, pc, nhwc, mode);
                assert_close(
                    &format!("case {ci} {pc:?} {layout} {mode}"),
                    &got,
                    &want,
                    TOL,
                );
            }
        }
    }
}

#[test]
fn pool2d_stages_are_named_like_tvm() {
    let x = ph(&[1, 2, 7, 7], "data");
    // No padding (and no ceil-mode offset): the window reads the input directly.
    let a = Pool2dAttrs::new((3, 3), (2, 2), (0, 0));
    let mx = ops::pool2d(&x, PoolType::Max, &a).unwrap();
    assert_eq!((mx.name(), mx.tag()), ("tensor", "pool_max"));
    assert_eq!(mx.inputs(), [x.clone()]);
    let names: Vec<&str> = mx.reduce_axis().iter().map(|r| r.name()).collect();
    assert_eq!(names, ["rv0", "rv1"]);
    let avg = ops::pool2d(&x, PoolType::Avg, &a).unwrap();
    assert_eq!((avg.name(), avg.tag()), ("tensor", "elemwise"));
    let s = &avg.inputs()[0];
    assert_eq!((s.name(), s.tag()), ("tensor", "pool_sum"));
    assert_eq!(s.inputs(), [x.clone()]);
    // Ceil mode with stride 1 adds nothing; with stride 2 it pads the tail.
    let c1 = Pool2dAttrs::new((3, 3), (1, 1), (0, 0)).with_ceil_mode(true);
    assert_eq!(
        ops::pool2d(&x, PoolType::Max, &c1).unwrap().inputs(),
        [x.clone()]
    );
    let c2 = a.clone().with_ceil_mode(true);
    let p = ops::pool2d(&x, PoolType::Max, &c2).unwrap().inputs()[0].clone();
    assert_eq!(
        (p.name(), p.tag(), p.shape()),
        ("pad_temp", "elemwise", &[1i64, 2, 8, 8][..])
    );
    let p = ops::pool2d(&x, PoolType::Avg, &a.with_padding(1, 0, 0, 2))
        .unwrap()
        .inputs()[0]
        .inputs()[0]
        .clone();
    assert_eq!((p.name(), p.shape()), ("pad_temp", &[1i64, 2, 8, 9][..]));
}

#[test]
fn pool2d_workload_keys() {
    let a = Pool2dAttrs::new((3, 3), (2, 2), (1, 1));
    let k1 = key(&ops::pool2d(&ph(&[1, 4, 9, 9], "placeholder"), PoolType::Max, &a).unwrap());
    let k2 = key(&ops::pool2d(&ph(&[1, 4, 9, 9], "input"), PoolType::Max, &a).unwrap());
    assert_eq!(k1, k2);
    let k3 = key(&ops::pool2d(&ph(&[1, 4, 9, 9], "input"), PoolType::Avg, &a).unwrap());
    assert_ne!(k1, k3);
    let b = a.clone().with_count_include_pad(true);
    let k4 = key(&ops::pool2d(&ph(&[1, 4, 9, 9], "x"), PoolType::Avg, &b).unwrap());
    let k5 = key(&ops::pool2d(&ph(&[1, 4, 9, 9], "y"), PoolType::Avg, &b).unwrap());
    assert_eq!(k4, k5);
    assert_ne!(k3, k4);
}

// ----- adaptive and global pooling -----

/// Adaptive pooling by definition: window `[⌊o·n/m⌋, ⌈(o+1)·n/m⌉)` per pooled axis.
fn adaptive_ref(
    x: &[f64],
    dims: [usize; 4],
    (oh, ow): (usize, usize),
    nhwc: bool,
    max: bool,
) -> Vec<f64> {
    let [nn, cc, h, w] = dims;
    let window = |o: usize, n: usize, m: usize| (o * n / m, ((o + 1) * n).div_ceil(m));
    let mut out = vec![0.0; nn * cc * oh * ow];
    for n in 0..nn {
        for c in 0..cc {
            for y in 0..oh {
                for xo in 0..ow {
                    let (y0, y1) = window(y, h, oh);
                    let (x0, x1) = window(xo, w, ow);
                    let vals: Vec<f64> = (y0..y1)
                        .flat_map(|iy| (x0..x1).map(move |ix| (iy, ix)))
                        .map(|(iy, ix)| x[offset(nhwc, dims, n, c, iy, ix)])
                        .collect();
                    let v = if max {
                        vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
                    } else {
                        vals.iter().sum::<f64>() / vals.len() as f64
                    };
                    out[offset(nhwc, [nn, cc, oh, ow], n, c, y, xo)] = v;
                }
            }
        }
    }
    out
}

/// Input dims `[N, C, H, W]` and the output sizes to pool them to.
type AdaptiveCase = ([usize; 4], Vec<(usize, usize)>);

#[test]
fn adaptive_pool_matches_reference() {
    let cases: Vec<AdaptiveCase> = vec![
        (
            [2, 2, 7, 13],
            vec![(1, 1), (2, 3), (3, 5), (4, 4), (7, 13), (10, 17)],
        ),
        ([1, 1, 31, 5], vec![(4, 3), (6, 2), (31, 5)]),
    ];
    for (dims, outs) in cases {
        for (oh, ow) in outs {
            for layout in ["NCHW", "NHWC"] {
                let nhwc = layout == "NHWC";
                let [n, c, h, w] = dims.map(|d| d as i64);
                let shape = if nhwc { [n, h, w, c] } else { [n, c, h, w] };
                let x = ph(&shape, "data");
                let xv = rand_vals(numel(&shape), (oh * 100 + ow) as u64);
                for (pool_type, is_max) in [(PoolType::Max, true), (PoolType::Avg, false)] {
                    let out =
                        ops::adaptive_pool(&x, (oh as i64, ow as i64), pool_type, layout).unwrap();
                    let (name, tag) = if is_max {
                        ("adaptive_pool_max", "adaptive_pool_max")
                    } else {
                        ("adaptive_pool_avg", "elemwise")
                    };
                    assert_eq!((out.name(), out.tag()), (name, tag));
                    let got = interpret(&out, &[(&x, &xv)]);
                    let want = adaptive_ref(&xv, dims, (oh, ow), nhwc, is_max);
                    assert_close(
                        &format!("adaptive {dims:?} -> {oh}x{ow} {layout} {pool_type:?}"),
                        &got,
                        &want,
                        TOL,
                    );
                }
            }
        }
    }
}

/// The reduce axes span the largest window, and a condition masks the shorter windows
/// exactly when the windows differ in size.
#[test]
fn adaptive_pool_reduce_extent_is_the_largest_window() {
    for n in 1..=24usize {
        for m in 1..=24usize {
            let sizes: Vec<usize> = (0..m)
                .map(|o| ((o + 1) * n).div_ceil(m) - o * n / m)
                .collect();
            let largest = *sizes.iter().max().unwrap();
            let uniform = sizes.iter().all(|s| *s == largest);
            let x = ph(&[1, 1, n as i64, 3], "x");
            let out = ops::adaptive_pool(&x, (m as i64, 3), PoolType::Max, "NCHW").unwrap();
            let ext: Vec<i64> = out
                .reduce_axis()
                .iter()
                .map(|r| r.extent().unwrap())
                .collect();
            assert_eq!(ext, [largest as i64, 1], "{n} -> {m}: windows {sizes:?}");
            let cond = out.body().unwrap().as_reduce().unwrap().condition.is_some();
            assert_eq!(cond, !uniform, "{n} -> {m}: windows {sizes:?}");
        }
    }
}

#[test]
fn global_pool_matches_reference() {
    let dims = [2usize, 3, 7, 5];
    for layout in ["NCHW", "NHWC"] {
        let nhwc = layout == "NHWC";
        let [n, c, h, w] = dims.map(|d| d as i64);
        let shape = if nhwc { [n, h, w, c] } else { [n, c, h, w] };
        let x = ph(&shape, "data");
        let xv = rand_vals(numel(&shape), 5);
        for (pool_type, is_max) in [(PoolType::Max, true), (PoolType::Avg, false)] {
            let out = ops::global_pool(&x, pool_type, layout).unwrap();
            let want_shape = if nhwc { [n, 1, 1, c] } else { [n, c, 1, 1] };
            assert_eq!(out.shape(), want_shape);
            let mut want = Vec::new();
            for nn in 0..dims[0] {
                for cc in 0..dims[1] {
                    let vals: Vec<f64> = (0..dims[2] * dims[3])
                        .map(|p| xv[offset(nhwc, dims, nn, cc, p / dims[3], p % dims[3])])
                        .collect();
                    want.push(if is_max {
                        vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
                    } else {
                        vals.iter().sum::<f64>() / vals.len() as f64
                    });
                }
            }
            // [N, C] ordering is the output's for both layouts (H = W = 1).
            let got = interpret(&out, &[(&x, &xv)]);
            assert_close(&format!("global {layout} {pool_type:?}"), &got, &want, TOL);
        }
    }
}

#[test]
fn adaptive_and_global_workload_keys() {
    let a = ops::adaptive_pool(&ph(&[1, 3, 7, 9], "a"), (3, 4), PoolType::Avg, "NCHW").unwrap();
    let b = ops::adaptive_pool(&ph(&[1, 3, 7, 9], "b"), (3, 4), PoolType::Avg, "NCHW").unwrap();
    assert_eq!(key(&a), key(&b));
    let g1 = ops::global_pool(&ph(&[1, 7, 7, 8], "a"), PoolType::Max, "NHWC").unwrap();
    let g2 = ops::global_pool(&ph(&[1, 7, 7, 8], "b"), PoolType::Max, "NHWC").unwrap();
    assert_eq!(key(&g1), key(&g2));
}

// ----- softmax, log_softmax, layer norm -----

/// Splits `shape` around `axis`: (outer, len, inner) so that element `(o, r, i)` is at
/// `(o·len + r)·inner + i`.
fn split(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (
        shape[..axis].iter().product(),
        shape[axis],
        shape[axis + 1..].iter().product(),
    )
}

fn softmax_ref(x: &[f64], shape: &[usize], axis: usize, log: bool) -> Vec<f64> {
    let (outer, len, inner) = split(shape, axis);
    let mut out = vec![0.0; x.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |r: usize| (o * len + r) * inner + i;
            let m = (0..len).map(|r| x[at(r)]).fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = (0..len).map(|r| (x[at(r)] - m).exp()).sum();
            for r in 0..len {
                out[at(r)] = if log {
                    x[at(r)] - m - s.ln()
                } else {
                    (x[at(r)] - m).exp() / s
                };
            }
        }
    }
    out
}

#[test]
fn softmax_matches_reference() {
    // The 2-D entry point.
    let x = ph(&[3, 13], "x");
    let xv: Vec<f64> = rand_vals(39, 7).iter().map(|v| v * 4.0).collect();
    let got = interpret(&ops::softmax(&x).unwrap(), &[(&x, &xv)]);
    assert_close(
        "softmax 3x13",
        &got,
        &softmax_ref(&xv, &[3, 13], 1, false),
        TOL,
    );
    // Any axis of an N-D tensor.
    for shape in [vec![7usize], vec![2, 3, 5], vec![3, 1, 7]] {
        let dims: Vec<i64> = shape.iter().map(|d| *d as i64).collect();
        let x = ph(&dims, "x");
        let xv: Vec<f64> = rand_vals(x.shape().iter().product::<i64>() as usize, 8)
            .iter()
            .map(|v| v * 4.0)
            .collect();
        let nd = shape.len() as i64;
        for axis in -1..nd {
            let ax = axis.rem_euclid(nd) as usize;
            for log in [false, true] {
                let out = if log {
                    ops::log_softmax(&x, axis).unwrap()
                } else {
                    ops::softmax_axis(&x, axis).unwrap()
                };
                let got = interpret(&out, &[(&x, &xv)]);
                let want = softmax_ref(&xv, &shape, ax, log);
                assert_close(
                    &format!(
                        "{} {shape:?} axis {axis}",
                        if log { "log_softmax" } else { "softmax" }
                    ),
                    &got,
                    &want,
                    TOL,
                );
            }
        }
    }
}

#[test]
fn softmax_stages_are_named_like_tvm() {
    // softmax prints as it always has (other snapshots depend on it).
    let x = ph(&[1, 1000], "placeholder");
    assert_eq!(
        dag(&ops::softmax(&x).unwrap()),
        "placeholder = PLACEHOLDER [1, 1000]\n\
         T_softmax_maxelem(i0) max= placeholder[i0, k]\n\
         T_softmax_exp(i0, i1) = tir.exp((placeholder[i0, i1] - T_softmax_maxelem[i0]))\n\
         T_softmax_expsum(i0) += T_softmax_exp[i0, k]\n\
         T_softmax_norm(i0, i1) = (T_softmax_exp[i0, i1] / T_softmax_expsum[i0])\n"
    );
    let x = ph(&[4, 9], "x");
    let y = ops::log_softmax(&x, -1).unwrap();
    let d = ComputeDag::new(&[y.clone()]).unwrap();
    let names: Vec<&str> = d.ops.iter().map(|t| t.name()).collect();
    assert_eq!(names, ["x", "T_softmax_maxelem", "compute", "compute"]);
    assert!(d.ops[1..].iter().all(|t| t.tag() == "log_softmax_output"));
    // softmax over the last axis of a 2-D tensor is softmax_axis(x, 1) and (-1).
    let a = key(&ops::softmax(&x).unwrap());
    assert_eq!(a, key(&ops::softmax_axis(&ph(&[4, 9], "y"), 1).unwrap()));
    assert_eq!(a, key(&ops::softmax_axis(&ph(&[4, 9], "z"), -1).unwrap()));
    assert_eq!(
        key(&y),
        key(&ops::log_softmax(&ph(&[4, 9], "w"), 1).unwrap())
    );
}

/// Layer norm by definition: mean and population variance over `axes` (sorted),
/// `(x − mean)/√(var + ε)·γ + β`.
fn layer_norm_ref(
    x: &[f64],
    shape: &[usize],
    axes: &[usize],
    g: &[f64],
    b: Option<&[f64]>,
    eps: f64,
) -> Vec<f64> {
    let nd = shape.len();
    // For each flat index: (group of the non-normalized coordinates, index into γ/β).
    let keys: Vec<(usize, usize)> = (0..x.len())
        .map(|f| {
            let mut rest = f;
            let mut coord = vec![0; nd];
            for d in (0..nd).rev() {
                coord[d] = rest % shape[d];
                rest /= shape[d];
            }
            let (mut grp, mut gi) = (0, 0);
            for d in 0..nd {
                if axes.contains(&d) {
                    gi = gi * shape[d] + coord[d];
                } else {
                    grp = grp * shape[d] + coord[d];
                }
            }
            (grp, gi)
        })
        .collect();
    let groups = keys.iter().map(|k| k.0).max().unwrap() + 1;
    let mut sum = vec![0.0; groups];
    let mut cnt = vec![0.0; groups];
    for (f, (grp, _)) in keys.iter().enumerate() {
        sum[*grp] += x[f];
        cnt[*grp] += 1.0;
    }
    let mean: Vec<f64> = (0..groups).map(|i| sum[i] / cnt[i]).collect();
    let mut var = vec![0.0; groups];
    for (f, (grp, _)) in keys.iter().enumerate() {
        var[*grp] += (x[f] - mean[*grp]).powi(2) / cnt[*grp];
    }
    keys.iter()
        .enumerate()
        .map(|(f, (grp, gi))| {
            (x[f] - mean[*grp]) / (var[*grp] + eps).sqrt() * g[*gi] + b.map_or(0.0, |b| b[*gi])
        })
        .collect()
}

#[test]
fn layer_norm_matches_reference() {
    let shape = [2usize, 3, 7];
    let dims = [2i64, 3, 7];
    let x = ph(&dims, "x");
    let xv: Vec<f64> = rand_vals(42, 9).iter().map(|v| v * 3.0 + 0.5).collect();
    let cases: [(&[i64], Vec<usize>); 6] = [
        (&[], vec![2]),
        (&[-1], vec![2]),
        (&[1, 2], vec![1, 2]),
        (&[2, 0], vec![0, 2]),
        (&[0, 1, 2], vec![0, 1, 2]),
        (&[-2], vec![1]),
    ];
    for (axis, real) in cases {
        let gshape: Vec<i64> = real.iter().map(|a| dims[*a]).collect();
        let n: usize = gshape.iter().product::<i64>() as usize;
        let g = ph(&gshape, "gamma");
        let b = ph(&gshape, "beta");
        let gv: Vec<f64> = rand_vals(n, 10).iter().map(|v| v + 1.5).collect();
        let bv = rand_vals(n, 11);
        for eps in [1e-5, 0.25] {
            let out = ops::layer_norm(&x, &g, Some(&b), axis, eps).unwrap();
            assert_eq!((out.name(), out.tag()), ("T_layer_norm", "injective"));
            let got = interpret(&out, &[(&x, &xv), (&g, &gv), (&b, &bv)]);
            let want = layer_norm_ref(&xv, &shape, &real, &gv, Some(&bv), eps);
            assert_close(
                &format!("layer_norm axis {axis:?} eps {eps}"),
                &got,
                &want,
                1e-4,
            );
            let out = ops::layer_norm(&x, &g, None, axis, eps).unwrap();
            let got = interpret(&out, &[(&x, &xv), (&g, &gv)]);
            let want = layer_norm_ref(&xv, &shape, &real, &gv, None, eps);
            assert_close(
                &format!("layer_norm (no beta) axis {axis:?}"),
                &got,
                &want,
                1e-4,
            );
        }
    }
}

#[test]
fn layer_norm_stages_and_workload_keys() {
    let x = ph(&[2, 3, 7], "x");
    let g = ph(&[3, 7], "gamma");
    let out = ops::layer_norm(&x, &g, None, &[1, 2], 1e-5).unwrap();
    let d = ComputeDag::new(&[out.clone()]).unwrap();
    let stages: Vec<(&str, &str)> = d
        .ops
        .iter()
        .filter(|t| !t.is_placeholder())
        .map(|t| (t.name(), t.tag()))
        .collect();
    assert_eq!(
        stages,
        [
            ("T_layer_norm_mean", "comm_reduce"),
            ("T_layer_norm_var", "comm_reduce"),
            ("T_layer_norm", "injective")
        ]
    );
    let mean = &d.ops[1];
    let red: Vec<&str> = mean.reduce_axis().iter().map(|r| r.name()).collect();
    assert_eq!(red, ["k1", "k2"]);
    assert_eq!(mean.shape(), [2]);
    // Every axis normalized: the statistics are [1].
    let all = ops::layer_norm(&x, &ph(&[2, 3, 7], "g"), None, &[0, 1, 2], 1e-5).unwrap();
    assert_eq!(all.inputs()[1].shape(), [1]);
    let again = ops::layer_norm(
        &ph(&[2, 3, 7], "a"),
        &ph(&[3, 7], "b"),
        None,
        &[-2, -1],
        1e-5,
    )
    .unwrap();
    assert_eq!(key(&out), key(&again));
}

// ----- errors -----

#[track_caller]
fn assert_attr(r: Result<Tensor, TeError>, op: &str, attr: &str) {
    match r {
        Err(e @ TeError::BadAttr { .. }) => {
            let TeError::BadAttr { op: o, attr: a, .. } = &e else {
                unreachable!()
            };
            assert_eq!((o.as_str(), a.as_str()), (op, attr), "{e}");
            let msg = e.to_string();
            assert!(msg.contains(op) && msg.contains(attr), "{msg}");
        }
        Err(e) => panic!("want BadAttr {op}/{attr}, got {e:?}"),
        Ok(t) => panic!("want BadAttr {op}/{attr}, got a tensor {t}"),
    }
}

#[track_caller]
fn assert_shape(r: Result<Tensor, TeError>, op: &str) {
    match r {
        Err(e @ TeError::BadShape { .. }) => {
            let TeError::BadShape { op: o, .. } = &e else {
                unreachable!()
            };
            assert_eq!(o, op, "{e}");
            assert!(e.to_string().contains(op));
        }
        Err(e) => panic!("want BadShape {op}, got {e:?}"),
        Ok(t) => panic!("want BadShape {op}, got a tensor {t}"),
    }
}

#[test]
fn dense_and_batch_matmul_errors() {
    let x = ph(&[3, 5], "x");
    assert_shape(ops::dense(&x, &ph(&[4, 6], "w"), None), "dense");
    assert_shape(
        ops::dense(&ph(&[1, 3, 5], "x"), &ph(&[4, 5], "w"), None),
        "dense",
    );
    assert_shape(ops::dense(&x, &ph(&[5], "w"), None), "dense");
    let w = ph(&[4, 5], "w");
    assert_shape(ops::dense(&x, &w, Some(&ph(&[5], "b"))), "dense");
    assert_shape(ops::dense(&x, &w, Some(&ph(&[1, 4], "b"))), "dense");
    let w64 = placeholder(&[4, 5], DataType::float64(), "w").unwrap();
    assert_attr(ops::dense(&x, &w64, None), "dense", "dtype");
    let b64 = placeholder(&[4], DataType::float64(), "b").unwrap();
    assert_attr(ops::dense(&x, &w, Some(&b64)), "dense", "dtype");

    let a = ph(&[2, 3, 5], "a");
    assert_shape(ops::batch_matmul(&a, &ph(&[2, 4, 6], "b")), "batch_matmul");
    assert_shape(ops::batch_matmul(&a, &ph(&[4, 5], "b")), "batch_matmul");
    assert_shape(
        ops::batch_matmul(&ph(&[3, 5], "a"), &ph(&[2, 4, 5], "b")),
        "batch_matmul",
    );
    assert_shape(ops::batch_matmul(&a, &ph(&[3, 4, 5], "b")), "batch_matmul");
    assert_shape(
        ops::batch_matmul_with(&a, &ph(&[2, 4, 5], "b"), false, false),
        "batch_matmul",
    );
    assert_shape(
        ops::batch_matmul_with(&a, &ph(&[2, 5, 4], "b"), true, false),
        "batch_matmul",
    );
    let b64 = placeholder(&[2, 4, 5], DataType::float64(), "b").unwrap();
    assert_attr(ops::batch_matmul(&a, &b64), "batch_matmul", "dtype");
}

#[test]
fn pool_errors() {
    let x = ph(&[1, 2, 7, 7], "x");
    let ok = Pool2dAttrs::new((3, 3), (1, 1), (0, 0));
    let p = |a: Pool2dAttrs| ops::pool2d(&x, PoolType::Max, &a);
    let pa = |a: Pool2dAttrs| ops::pool2d(&x, PoolType::Avg, &a);
    assert!(p(ok.clone()).is_ok());
    for k in [(0, 3), (3, -1)] {
        assert_attr(
            p(Pool2dAttrs {
                pool_size: k,
                ..ok.clone()
            }),
            "pool2d",
            "pool_size",
        );
    }
    for s in [(0, 1), (1, -2)] {
        assert_attr(
            pa(Pool2dAttrs {
                strides: s,
                ..ok.clone()
            }),
            "pool2d",
            "strides",
        );
    }
    assert_attr(p(ok.clone().with_dilation((1, 0))), "pool2d", "dilation");
    assert_attr(p(ok.clone().with_padding(-1, 0, 0, 0)), "pool2d", "padding");
    assert_attr(
        pa(ok.clone().with_padding(0, 0, 0, -2)),
        "pool2d",
        "padding",
    );
    // The (dilated) window is larger than the padded input.
    assert_attr(
        p(Pool2dAttrs {
            pool_size: (8, 1),
            ..ok.clone()
        }),
        "pool2d",
        "pool_size",
    );
    assert_attr(p(ok.clone().with_dilation((4, 4))), "pool2d", "pool_size");
    assert!(p(ok.clone().with_dilation((4, 4)).with_padding(1, 1, 1, 1)).is_ok());
    // Values that would overflow the index arithmetic are refused, not panicked on.
    assert_attr(
        p(Pool2dAttrs {
            pool_size: (i64::MAX, 1),
            ..ok.clone()
        }),
        "pool2d",
        "pool_size",
    );
    assert_attr(
        p(Pool2dAttrs {
            pool_size: (3, 3),
            dilation: (i64::MAX / 2, 1),
            ..ok.clone()
        }),
        "pool2d",
        "dilation",
    );
    assert_attr(
        p(ok.clone().with_padding(i64::MAX, 0, i64::MAX, 0)),
        "pool2d",
        "padding",
    );
    assert_attr(
        p(Pool2dAttrs {
            strides: (i64::MAX, 1),
            ..ok.clone()
        }
        .with_ceil_mode(true)),
        "pool2d",
        "strides",
    );
    for layout in [
        "NCH", "NCHWX", "NCWX", "NHHW", "nchw", "NCH4w", "NC4hW", "NC_W", "", "NCHW4", "NC0cHW",
        "NCHW16c",
    ] {
        assert_attr(p(ok.clone().with_layout(layout)), "pool2d", "layout");
        assert_attr(
            ops::adaptive_pool(&x, (2, 2), PoolType::Avg, layout),
            "adaptive_pool",
            "layout",
        );
        assert_attr(
            ops::global_pool(&x, PoolType::Max, layout),
            "global_pool",
            "layout",
        );
    }
    // A sub-axis whose size is not its factor.
    let x5 = ph(&[1, 2, 7, 7, 8], "x");
    assert_shape(
        ops::pool2d(&x5, PoolType::Max, &ok.clone().with_layout("NCHW16c")),
        "pool2d",
    );
    assert!(ops::pool2d(&x5, PoolType::Max, &ok.clone().with_layout("NCHW8c")).is_ok());
    let xb = placeholder(&[1, 2, 7, 7], DataType::bool(), "x").unwrap();
    assert_attr(ops::pool2d(&xb, PoolType::Max, &ok), "pool2d", "dtype");

    for size in [(0, 2), (2, -1)] {
        assert_attr(
            ops::adaptive_pool(&x, size, PoolType::Max, "NCHW"),
            "adaptive_pool",
            "output_size",
        );
    }
    assert_attr(
        ops::adaptive_pool(&x, (i32::MAX as i64, 1), PoolType::Avg, "NCHW"),
        "adaptive_pool",
        "output_size",
    );
    assert_attr(
        ops::global_pool(&xb, PoolType::Avg, "NCHW"),
        "global_pool",
        "dtype",
    );
}

#[test]
fn norm_errors() {
    let x = ph(&[2, 3, 5], "x");
    assert_shape(ops::softmax(&x), "softmax");
    for axis in [3, -4] {
        assert_attr(ops::softmax_axis(&x, axis), "softmax", "axis");
        assert_attr(ops::log_softmax(&x, axis), "log_softmax", "axis");
    }
    let xi = placeholder(&[2, 3], DataType::int32(), "x").unwrap();
    assert_attr(ops::softmax_axis(&xi, 1), "softmax", "dtype");
    assert_attr(ops::log_softmax(&xi, 1), "log_softmax", "dtype");

    let g = ph(&[5], "gamma");
    assert!(ops::layer_norm(&x, &g, Some(&g), &[], 1e-5).is_ok());
    assert_attr(
        ops::layer_norm(&x, &g, None, &[3], 1e-5),
        "layer_norm",
        "axis",
    );
    assert_attr(
        ops::layer_norm(&x, &g, None, &[-4], 1e-5),
        "layer_norm",
        "axis",
    );
    assert_attr(
        ops::layer_norm(&x, &ph(&[3, 5], "g"), None, &[2, -2, 1], 1e-5),
        "layer_norm",
        "axis",
    );
    assert_shape(
        ops::layer_norm(&x, &ph(&[3], "g"), None, &[], 1e-5),
        "layer_norm",
    );
    assert_shape(
        ops::layer_norm(&x, &g, Some(&ph(&[3, 5], "b")), &[2], 1e-5),
        "layer_norm",
    );
    assert_shape(
        ops::layer_norm(&x, &ph(&[5, 3], "g"), None, &[1, 2], 1e-5),
        "layer_norm",
    );
    for eps in [-1e-5, f64::NAN, f64::INFINITY] {
        assert_attr(
            ops::layer_norm(&x, &g, None, &[], eps),
            "layer_norm",
            "epsilon",
        );
    }
    assert_attr(
        ops::layer_norm(&xi, &g, None, &[], 1e-5),
        "layer_norm",
        "dtype",
    );
    let g64 = placeholder(&[5], DataType::float64(), "g").unwrap();
    assert_attr(
        ops::layer_norm(&x, &g64, None, &[], 1e-5),
        "layer_norm",
        "dtype",
    );
}

// ----- DAG prints -----

#[test]
fn dag_dense() {
    let d = ph(&[1, 512], "placeholder");
    let w = ph(&[1000, 512], "placeholder");
    insta::assert_snapshot!(dag(&ops::dense(&d, &w, None).unwrap()));
}

#[test]
fn dag_dense_bias() {
    let d = ph(&[1, 512], "placeholder");
    let w = ph(&[1000, 512], "placeholder");
    let b = ph(&[1000], "placeholder");
    insta::assert_snapshot!(dag(&ops::dense(&d, &w, Some(&b)).unwrap()));
}

#[test]
fn dag_batch_matmul() {
    let a = ph(&[1, 128, 64], "placeholder");
    let b = ph(&[12, 128, 64], "placeholder");
    insta::assert_snapshot!(dag(&ops::batch_matmul(&a, &b).unwrap()));
}

#[test]
fn dag_max_pool2d() {
    let x = ph(&[1, 64, 112, 112], "placeholder");
    let a = Pool2dAttrs::new((3, 3), (2, 2), (1, 1));
    insta::assert_snapshot!(dag(&ops::pool2d(&x, PoolType::Max, &a).unwrap()));
}

#[test]
fn dag_avg_pool2d_nhwc() {
    let x = ph(&[1, 56, 56, 64], "placeholder");
    let a = Pool2dAttrs::new((3, 3), (2, 2), (1, 1)).with_layout("NHWC");
    insta::assert_snapshot!(dag(&ops::pool2d(&x, PoolType::Avg, &a).unwrap()));
}

#[test]
fn dag_global_avg_pool() {
    let x = ph(&[1, 2048, 7, 7], "placeholder");
    insta::assert_snapshot!(dag(&ops::global_pool(&x, PoolType::Avg, "NCHW").unwrap()));
}

#[test]
fn dag_log_softmax() {
    let x = ph(&[1, 1000], "placeholder");
    insta::assert_snapshot!(dag(&ops::log_softmax(&x, -1).unwrap()));
}

#[test]
fn dag_layer_norm() {
    let x = ph(&[1, 128, 768], "placeholder");
    let g = ph(&[768], "placeholder");
    let b = ph(&[768], "placeholder");
    insta::assert_snapshot!(dag(&ops::layer_norm(&x, &g, Some(&b), &[-1], 1e-5).unwrap()));
}

// ----- default schedules -----

/// The default CPU schedule (chosen by each stage's tag) of every operator here computes
/// what its unscheduled program computes.
#[test]
fn default_schedules_compute_the_same() {
    use tessera_te::schedules::default_schedule;
    let p = common::AVX2_TWO_CORES;
    let x = ph(&[2, 3, 9, 9], "x");
    let xh = ph(&[2, 9, 9, 3], "x");
    let d = ph(&[5, 16], "d");
    let w = ph(&[12, 16], "w");
    let b = ph(&[12], "b");
    let ba = ph(&[2, 5, 16], "a");
    let bb = ph(&[2, 8, 16], "b");
    let s = ph(&[3, 16], "s");
    let g = ph(&[16], "g");
    let pa = Pool2dAttrs::new((3, 3), (2, 2), (1, 1));
    let cases: Vec<(Tensor, Vec<Tensor>)> = vec![
        (
            ops::dense(&d, &w, None).unwrap(),
            vec![d.clone(), w.clone()],
        ),
        (
            ops::dense(&d, &w, Some(&b)).unwrap(),
            vec![d.clone(), w.clone(), b.clone()],
        ),
        (
            ops::batch_matmul(&ba, &bb).unwrap(),
            vec![ba.clone(), bb.clone()],
        ),
        (
            ops::pool2d(&x, PoolType::Max, &pa).unwrap(),
            vec![x.clone()],
        ),
        (
            ops::pool2d(&x, PoolType::Avg, &pa).unwrap(),
            vec![x.clone()],
        ),
        (
            ops::pool2d(&xh, PoolType::Avg, &pa.clone().with_layout("NHWC")).unwrap(),
            vec![xh.clone()],
        ),
        (
            ops::adaptive_pool(&x, (4, 3), PoolType::Max, "NCHW").unwrap(),
            vec![x.clone()],
        ),
        (
            ops::adaptive_pool(&x, (4, 3), PoolType::Avg, "NCHW").unwrap(),
            vec![x.clone()],
        ),
        (
            ops::global_pool(&xh, PoolType::Avg, "NHWC").unwrap(),
            vec![xh.clone()],
        ),
        (ops::log_softmax(&s, -1).unwrap(), vec![s.clone()]),
        (ops::softmax_axis(&s, 0).unwrap(), vec![s.clone()]),
        (
            ops::layer_norm(&s, &g, Some(&g), &[], 1e-5).unwrap(),
            vec![s.clone(), g.clone()],
        ),
    ];
    for (out, inputs) in cases {
        let sch = default_schedule(&[out.clone()], p)
            .unwrap_or_else(|e| panic!("default schedule of {}: {e}", out.name()));
        let mut args = inputs.clone();
        args.push(out.clone());
        common::assert_same_as_unscheduled(&sch, &[out], &args, inputs.len());
    }
}

/// A pool reads its input once: its padding is a guarded load in the window (no padded
/// copy), a concatenation feeding it is stored once (its select would scalarize the
/// window's channel vectors), and the pool's loops are parallel with the channels as
/// vectors (NHWC) — computing what the unscheduled program computes.
#[test]
fn a_pool_reads_its_input_once_in_parallel_vectors() {
    use tessera_te::schedules::default_schedule_inlined;
    let p = common::AVX2_TWO_CORES;
    let a = ph(&[1, 9, 9, 16], "a");
    let b = ph(&[1, 9, 9, 16], "b");
    let cat = ops::concatenate(&[a.clone(), b.clone()], 3).unwrap();
    let pa = Pool2dAttrs::new((3, 3), (2, 2), (1, 1)).with_layout("NHWC");
    let pool = ops::pool2d(&cat, PoolType::Max, &pa).unwrap();
    let sch = default_schedule_inlined(&[pool.clone()], &[cat.clone()], p).unwrap();
    let args = [a.clone(), b.clone(), pool.clone()];
    common::assert_same_as_unscheduled(&sch, &[pool.clone()], &args, 2);
    let text = tessera_te::lower(&sch, &args, "pool").unwrap().to_string();
    assert!(!text.contains("pad_temp"), "{text}");
    assert!(text.contains("T_concat"), "{text}");
    assert!(
        text.contains("parallel") && text.contains("vectorized"),
        "{text}"
    );
}

/// A dense layer on packed weights (`[N/b, K, b]`) runs its column tiles outermost and in
/// parallel, the row tiles inside: each weight block is read once while every row
/// passes. Rows 13 (a prime) take guarded tiles; the result is the unscheduled one.
#[test]
fn packed_dense_runs_its_column_tiles_outermost() {
    use tessera_te::schedules::default_schedule;
    let p = common::AVX2_TWO_CORES;
    let data = ph(&[13, 24], "data");
    let weight = ph(&[4, 24, 8], "weight");
    let out = ops::dense(&data, &weight, None).unwrap();
    assert_eq!(out.tag(), "dense_pack");
    let s = default_schedule(&[out.clone()], p).unwrap();
    let args = [data, weight, out.clone()];
    let text = tessera_te::lower(&s, &args, "f").unwrap().to_string();
    let parallel = text
        .lines()
        .find(|l| l.contains("parallel"))
        .unwrap_or_default();
    assert!(parallel.contains("j.outer"), "{text}");
    common::assert_same_as_unscheduled(&s, &[out], &args, 2);
}

/// A packed dense layer's register tile of two vectors of columns holds one row fewer
/// than the registers allow with AVX2's 16 (6 rows: 64 rows in 11 tiles), every row
/// with AVX-512's 32 (8: in 8 tiles); weights this small are read from cache by every
/// row tile, outermost (no chunks). Both compute the unscheduled result.
#[test]
fn packed_dense_tiles_take_the_rows_the_register_file_holds() {
    use tessera_te::schedules::{default_schedule, CpuParams};
    let avx512 = CpuParams {
        vector_lanes: 16,
        ..common::AVX2_TWO_CORES
    };
    for (p, block, row_tiles) in [(common::AVX2_TWO_CORES, 8, 11), (avx512, 16, 8)] {
        let data = ph(&[64, 24], "data");
        let weight = ph(&[64 / block, 24, block], "weight");
        let out = ops::dense(&data, &weight, None).unwrap();
        let s = default_schedule(&[out.clone()], p).unwrap();
        let args = [data, weight, out.clone()];
        let text = tessera_te::lower(&s, &args, "f").unwrap().to_string();
        assert!(
            text.contains(&format!("for (i.outer, 0, {row_tiles}) parallel")),
            "{} lanes: {text}",
            p.vector_lanes
        );
        common::assert_same_as_unscheduled(&s, &[out], &args, 2);
    }
}

/// Reductions along rows (softmax's maximum and sum, layer norm's mean and variance over
/// the last axis) accumulate a vector of partial results per row and run their rows in
/// parallel, all the output's axes fused (a `[1, 7]` mean is not one core's work); a
/// short row that is not a whole number of vectors keeps the scalar loop, a long one
/// guards its last step.
#[test]
fn row_reductions_accumulate_vectors_and_run_rows_in_parallel() {
    use tessera_te::schedules::default_schedule;
    let p = common::AVX2_TWO_CORES;
    let x = ph(&[1, 7, 32], "x");
    let gamma = ph(&[32], "gamma");
    let ln = ops::layer_norm(&x, &gamma, None, &[], 1e-5).unwrap();
    let s = default_schedule(&[ln.clone()], p).unwrap();
    let args = [x.clone(), gamma, ln.clone()];
    let text = tessera_te::lower(&s, &args, "ln").unwrap().to_string();
    assert!(text.contains("T_layer_norm_mean.rf"), "{text}");
    assert!(
        text.contains("for (ax0.ax1.fused, 0, 7) parallel"),
        "{text}"
    );
    common::assert_same_as_unscheduled(&s, &[ln], &args, 2);
    let sm = ops::softmax_axis(&x, -1).unwrap();
    let s = default_schedule(&[sm.clone()], p).unwrap();
    let args = [x, sm.clone()];
    let text = tessera_te::lower(&s, &args, "sm").unwrap().to_string();
    assert!(text.contains("T_softmax_maxelem.rf"), "{text}");
    common::assert_same_as_unscheduled(&s, &[sm], &args, 1);
    // 13 columns: no whole vectors, the rows as before
    let x = ph(&[2, 13], "x");
    let sm = ops::softmax(&x).unwrap();
    let s = default_schedule(&[sm.clone()], p).unwrap();
    let args = [x, sm.clone()];
    let text = tessera_te::lower(&s, &args, "sm").unwrap().to_string();
    assert!(!text.contains(".rf"), "{text}");
    common::assert_same_as_unscheduled(&s, &[sm], &args, 1);
    // 197 columns (ViT's tokens), no vector divides: a register's worth of partial
    // results all the same, the last step guarded
    let x = ph(&[3, 197], "x");
    let sm = ops::softmax(&x).unwrap();
    let s = default_schedule(&[sm.clone()], p).unwrap();
    let args = [x, sm.clone()];
    let text = tessera_te::lower(&s, &args, "sm").unwrap().to_string();
    assert!(text.contains("T_softmax_maxelem.rf"), "{text}");
    assert!(text.contains("< 197)"), "{text}");
    common::assert_same_as_unscheduled(&s, &[sm], &args, 1);
}

/// A softmax over the last axis computes its four stages per row of its output: the
/// rows (leading axes fused) in parallel, the exponentials of one row only (48 floats),
/// the maximum and the sum from vectors of partial results inside the row; the result
/// is the unscheduled one.
#[test]
fn a_softmax_computes_its_stages_per_row() {
    use tessera_te::schedules::default_schedule;
    let p = common::AVX2_TWO_CORES;
    let x = ph(&[2, 3, 48], "x");
    let sm = ops::softmax_axis(&x, -1).unwrap();
    let s = default_schedule(&[sm.clone()], p).unwrap();
    let args = [x, sm.clone()];
    let text = tessera_te::lower(&s, &args, "sm").unwrap().to_string();
    let at = |l: &str| text.find(l).unwrap_or_else(|| panic!("{l}: {text}"));
    let row = at("for (i0.i1.fused, 0, 6) parallel");
    for inside in [
        "allocate T_softmax_exp: float32[1, 1, 48]",
        "T_softmax_maxelem.rf",
        "T_softmax_expsum.rf",
    ] {
        assert!(at(inside) > row, "{inside}: {text}");
    }
    assert_eq!(text.matches("parallel").count(), 1, "{text}");
    common::assert_same_as_unscheduled(&s, &[sm], &args, 1);
}

/// A reduction over trailing axes (every axis: DynamicQuantizeLinear's minimum and
/// maximum of a whole activation) takes vector partial results along the innermost axis
/// — a vectorized rfactor stage, at root when the result is one value — and computes
/// what the unscheduled program computes.
#[test]
fn reductions_over_trailing_axes_are_vectorized() {
    use tessera_te::ops::ReduceKind;
    use tessera_te::schedules::default_schedule;
    let p = common::AVX2_TWO_CORES;
    let x = ph(&[2, 3, 32], "x");
    for (kind, axes, keepdims) in [
        (ReduceKind::Max, vec![], false),
        (ReduceKind::Min, vec![0, 1, 2], true),
        (ReduceKind::Sum, vec![1, 2], false),
    ] {
        let out = ops::reduce(&x, kind, &axes, keepdims).unwrap();
        let sch = default_schedule(&[out.clone()], p).unwrap();
        let args = [x.clone(), out.clone()];
        common::assert_same_as_unscheduled(&sch, &[out.clone()], &args, 1);
        let text = tessera_te::lower(&sch, &args, "r").unwrap().to_string();
        assert!(
            text.contains("vectorized") && text.contains(".rf"),
            "{kind:?} {axes:?}: {text}"
        );
    }
}

/// Instance norm of an NHWC value (`channels_last`) is the NCHW one transposed, and its
/// statistics — column reductions, the channels carried through — accumulate a tile of
/// channels per step with the pixels' loop outside (a `local` cache, vectorized), as
/// the unscheduled program computes.
#[test]
fn instance_norm_of_nhwc_values_reduces_columns() {
    use tessera_te::schedules::default_schedule;
    let (n, c, h, w) = (2usize, 16usize, 3usize, 5usize);
    let xv = rand_vals(n * c * h * w, 3);
    let gv = rand_vals(c, 4);
    let bv = rand_vals(c, 5);
    let (g, b) = (ph(&[c as i64], "g"), ph(&[c as i64], "b"));
    let nchw = ph(&[n as i64, c as i64, h as i64, w as i64], "x");
    let nhwc = ph(&[n as i64, h as i64, w as i64, c as i64], "x");
    let want = interpret(
        &ops::instance_norm(&nchw, &g, &b, 1e-5).unwrap(),
        &[(&nchw, &xv), (&g, &gv), (&b, &bv)],
    );
    // the same values laid out NHWC
    let mut xt = vec![0.0; xv.len()];
    for (i, v) in xv.iter().enumerate() {
        let (ni, ci, hi, wi) = (i / (c * h * w), i / (h * w) % c, i / w % h, i % w);
        xt[((ni * h + hi) * w + wi) * c + ci] = *v;
    }
    let out = ops::instance_norm_in(&nhwc, &g, &b, 1e-5, true).unwrap();
    let got = interpret(&out, &[(&nhwc, &xt), (&g, &gv), (&b, &bv)]);
    for (i, v) in want.iter().enumerate() {
        let (ni, ci, hi, wi) = (i / (c * h * w), i / (h * w) % c, i / w % h, i % w);
        let g = got[((ni * h + hi) * w + wi) * c + ci];
        assert!((g - v).abs() < 1e-4, "element {i}: {g} against {v}");
    }
    let p = common::AVX2_TWO_CORES;
    let sch = default_schedule(&[out.clone()], p).unwrap();
    let args = [nhwc, g, b, out.clone()];
    common::assert_same_as_unscheduled(&sch, &[out], &args, 3);
    let text = tessera_te::lower(&sch, &args, "inorm").unwrap().to_string();
    assert!(
        text.contains("T_instance_norm_mean.local") && text.contains("vectorized"),
        "{text}"
    );
}
