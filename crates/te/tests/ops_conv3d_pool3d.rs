//! conv3d (NCDHW / NDHWC), pool3d and global / adaptive 3-D pooling against
//! independent references written as plain loops over `Vec<f64>`, over a grid of cases
//! (odd sizes, strides, dilation, asymmetric padding, groups, batch > 1, both layouts,
//! count_include_pad, ceil mode); stage, axis and reduce-axis names; error paths.

mod common;

use common::{assert_close, interpret, rand_vals};
use tessera_ir::DataType;
use tessera_te::ops::{self, Conv3dAttrs, Pool3dAttrs, PoolType};
use tessera_te::{placeholder, ComputeDag, TeError, Tensor};

const F32: DataType = DataType::float32();
const TOL: f64 = 1e-5;

fn ph(shape: &[i64], name: &str) -> Tensor {
    placeholder(shape, F32, name).unwrap()
}

/// Row-major strides.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len() - 1).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// `x` (of logical shape `shape`) with its axes permuted: `out.shape[i] = shape[perm[i]]`.
fn permute(x: &[f64], shape: &[usize], perm: &[usize]) -> Vec<f64> {
    let st = strides(shape);
    let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let mut out = Vec::with_capacity(x.len());
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..x.len() {
        let off: usize = idx.iter().zip(perm).map(|(&i, &p)| i * st[p]).sum();
        out.push(x[off]);
        for d in (0..idx.len()).rev() {
            idx[d] += 1;
            if idx[d] < out_shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

/// Logical NCDHW ↔ NDHWC.
const TO_NDHWC: [usize; 5] = [0, 2, 3, 4, 1];
/// Logical OIDHW -> DHWIO.
const TO_DHWIO: [usize; 5] = [2, 3, 4, 1, 0];

// ----- conv3d -----

#[derive(Clone, Copy, Debug)]
struct ConvCase {
    n: usize,
    ci: usize,
    co: usize,
    /// input depth, height, width
    dims: [usize; 3],
    /// kernel depth, height, width
    k: [usize; 3],
    a: Conv3dAttrs,
}

impl ConvCase {
    fn s(&self) -> [usize; 3] {
        let s = self.a.stride;
        [s.0 as usize, s.1 as usize, s.2 as usize]
    }
    fn dl(&self) -> [usize; 3] {
        let d = self.a.dilation;
        [d.0 as usize, d.1 as usize, d.2 as usize]
    }
    fn out(&self) -> [usize; 3] {
        let p = self.a.padding.map(|v| v as usize);
        let (s, dl) = (self.s(), self.dl());
        [0, 1, 2]
            .map(|i| (self.dims[i] + p[i] + p[i + 3] - ((self.k[i] - 1) * dl[i] + 1)) / s[i] + 1)
    }
}

/// conv3d on logical NCDHW data and an OIDHW kernel; the output is NCDHW.
fn conv3d_ref(c: &ConvCase, x: &[f64], w: &[f64]) -> Vec<f64> {
    let [d, h, wd] = c.dims;
    let [kd, kh, kw] = c.k;
    let [od, oh, ow] = c.out();
    let g = c.a.groups as usize;
    let (cig, cog) = (c.ci / g, c.co / g);
    let (s, dl, p) = (c.s(), c.dl(), c.a.padding);
    let mut out = vec![0.0; c.n * c.co * od * oh * ow];
    let mut o_i = 0;
    for n in 0..c.n {
        for o in 0..c.co {
            let grp = o / cog;
            for z in 0..od {
                for y in 0..oh {
                    for xx in 0..ow {
                        let mut acc = 0.0;
                        for cc in 0..cig {
                            for a in 0..kd {
                                for b in 0..kh {
                                    for e in 0..kw {
                                        let iz = (z * s[0] + a * dl[0]) as i64 - p[0];
                                        let iy = (y * s[1] + b * dl[1]) as i64 - p[1];
                                        let ix = (xx * s[2] + e * dl[2]) as i64 - p[2];
                                        if iz < 0
                                            || iy < 0
                                            || ix < 0
                                            || iz >= d as i64
                                            || iy >= h as i64
                                            || ix >= wd as i64
                                        {
                                            continue;
                                        }
                                        let ch = grp * cig + cc;
                                        let xi = (((n * c.ci + ch) * d + iz as usize) * h
                                            + iy as usize)
                                            * wd
                                            + ix as usize;
                                        let wi = (((o * cig + cc) * kd + a) * kh + b) * kw + e;
                                        acc += x[xi] * w[wi];
                                    }
                                }
                            }
                        }
                        out[o_i] = acc;
                        o_i += 1;
                    }
                }
            }
        }
    }
    out
}

fn conv_cases() -> Vec<ConvCase> {
    let base = ConvCase {
        n: 1,
        ci: 3,
        co: 4,
        dims: [4, 5, 6],
        k: [3, 3, 3],
        a: Conv3dAttrs::new((1, 1, 1), (1, 1, 1), (1, 1, 1)),
    };
    vec![
        base,
        // no padding, 1x1x1
        ConvCase {
            k: [1, 1, 1],
            a: Conv3dAttrs::default(),
            ..base
        },
        // stride 2 everywhere, batch 2, odd sizes
        ConvCase {
            n: 2,
            dims: [5, 7, 6],
            a: Conv3dAttrs::new((2, 2, 2), (1, 1, 1), (1, 1, 1)),
            ..base
        },
        // resnet3d's stem: (3, 7, 7) window, stride (1, 2, 2), padding (1, 3, 3)
        ConvCase {
            dims: [3, 9, 8],
            k: [3, 7, 7],
            a: Conv3dAttrs::new((1, 2, 2), (1, 3, 3), (1, 1, 1)),
            ..base
        },
        // dilation 2 and asymmetric padding
        ConvCase {
            dims: [5, 6, 7],
            a: Conv3dAttrs::new((1, 1, 1), (0, 0, 0), (2, 1, 2)).with_padding([2, 0, 1, 1, 2, 0]),
            ..base
        },
        // groups
        ConvCase {
            ci: 4,
            co: 6,
            dims: [3, 4, 5],
            a: Conv3dAttrs::new((1, 2, 1), (1, 1, 1), (1, 1, 1)).with_groups(2),
            ..base
        },
    ]
}

#[test]
fn conv3d_matches_reference_in_both_layouts() {
    for (i, c) in conv_cases().iter().enumerate() {
        let [d, h, w] = c.dims.map(|v| v as i64);
        let [kd, kh, kw] = c.k.map(|v| v as i64);
        let (n, ci, co) = (c.n as i64, c.ci as i64, c.co as i64);
        let cig = ci / c.a.groups;
        let xshape = [c.n, c.ci, c.dims[0], c.dims[1], c.dims[2]];
        let wshape = [c.co, cig as usize, c.k[0], c.k[1], c.k[2]];
        let xv = rand_vals(xshape.iter().product(), 10 + i as u64);
        let wv = rand_vals(wshape.iter().product(), 20 + i as u64);
        let want = conv3d_ref(c, &xv, &wv);
        let [od, oh, ow] = c.out();

        let x = ph(&[n, ci, d, h, w], "data");
        let k = ph(&[co, cig, kd, kh, kw], "kernel");
        let out = ops::conv3d_ncdhw(&x, &k, &c.a).unwrap();
        assert_eq!(
            out.shape(),
            &[n, co, od as i64, oh as i64, ow as i64],
            "case {i}"
        );
        let got = interpret(&out, &[(&x, &xv), (&k, &wv)]);
        assert_close(&format!("conv3d_ncdhw case {i} {c:?}"), &got, &want, TOL);

        let x = ph(&[n, d, h, w, ci], "data");
        let k = ph(&[kd, kh, kw, cig, co], "kernel");
        let out = ops::conv3d_ndhwc(&x, &k, &c.a).unwrap();
        let got = interpret(
            &out,
            &[
                (&x, &permute(&xv, &xshape, &TO_NDHWC)),
                (&k, &permute(&wv, &wshape, &TO_DHWIO)),
            ],
        );
        let oshape = [c.n, c.co, od, oh, ow];
        let want_ndhwc = permute(&want, &oshape, &TO_NDHWC);
        assert_close(
            &format!("conv3d_ndhwc case {i} {c:?}"),
            &got,
            &want_ndhwc,
            TOL,
        );
    }
}

#[test]
fn conv3d_stages_and_axes_are_named_like_tvm() {
    let a = Conv3dAttrs::new((1, 1, 1), (1, 1, 1), (1, 1, 1));
    let x = ph(&[1, 4, 3, 5, 5], "data");
    let k = ph(&[8, 4, 3, 3, 3], "kernel");
    let out = ops::conv3d_ncdhw(&x, &k, &a).unwrap();
    assert_eq!((out.name(), out.tag()), ("conv3d_ncdhw", "conv3d_ncdhw"));
    let axes: Vec<&str> = out.axis().iter().map(|v| v.name()).collect();
    assert_eq!(axes, ["nn", "ff", "yy", "xx", "zz"]);
    let raxes: Vec<&str> = out.reduce_axis().iter().map(|v| v.name()).collect();
    assert_eq!(raxes, ["rc", "ry", "rx", "rz"]);
    assert_eq!(out.inputs()[0].name(), "pad_temp");
    assert_eq!(out.inputs()[0].shape(), &[1, 4, 5, 7, 7]);

    let x = ph(&[1, 3, 5, 5, 4], "data");
    let k = ph(&[3, 3, 3, 2, 8], "kernel");
    let out = ops::conv3d_ndhwc(&x, &k, &a.with_groups(2)).unwrap();
    assert_eq!(
        (out.name(), out.tag()),
        ("group_conv3d_ndhwc", "group_conv3d_ndhwc")
    );
    let axes: Vec<&str> = out.axis().iter().map(|v| v.name()).collect();
    assert_eq!(axes, ["nn", "yy", "xx", "zz", "ff"]);
    let raxes: Vec<&str> = out.reduce_axis().iter().map(|v| v.name()).collect();
    assert_eq!(raxes, ["ry", "rx", "rz", "rc"]);
    // 2·(3·3·3·2) multiply-adds per output element
    let flops = ComputeDag::new(&[out.clone()]).unwrap().flop_count();
    assert_eq!(flops, (3 * 5 * 5 * 8) as f64 * 2.0 * 54.0);
}

#[test]
fn conv3d_errors_name_the_attribute() {
    let x = ph(&[1, 4, 2, 5, 5], "data");
    let k = ph(&[8, 4, 3, 3, 3], "kernel");
    let attr = |e: TeError| match e {
        TeError::BadAttr { op, attr, .. } => format!("{op}.{attr}"),
        e => panic!("expected a BadAttr error, got {e}"),
    };
    let ok = Conv3dAttrs::new((1, 1, 1), (1, 1, 1), (1, 1, 1));
    let e = ops::conv3d_ncdhw(
        &x,
        &k,
        &Conv3dAttrs {
            stride: (1, 0, 1),
            ..ok
        },
    )
    .unwrap_err();
    assert_eq!(attr(e), "conv3d_ncdhw.strides");
    let e = ops::conv3d_ncdhw(
        &x,
        &k,
        &Conv3dAttrs {
            dilation: (1, 1, -1),
            ..ok
        },
    )
    .unwrap_err();
    assert_eq!(attr(e), "conv3d_ncdhw.dilation");
    let e = ops::conv3d_ncdhw(&x, &k, &ok.with_padding([0, 0, 0, -1, 0, 0])).unwrap_err();
    assert_eq!(attr(e), "conv3d_ncdhw.padding");
    let e = ops::conv3d_ncdhw(&x, &k, &Conv3dAttrs::default()).unwrap_err();
    assert!(
        e.to_string().contains("larger than the padded input 2x5x5"),
        "{e}"
    );
    assert_eq!(attr(e), "conv3d_ncdhw.kernel_size");
    let e = ops::conv3d_ncdhw(&x, &k, &ok.with_groups(3)).unwrap_err();
    assert_eq!(attr(e), "group_conv3d_ncdhw.groups");
    let e = ops::conv3d_ncdhw(&x, &k, &ok.with_groups(0)).unwrap_err();
    assert_eq!(attr(e), "group_conv3d_ncdhw.groups");
    // the kernel's input channels
    let k2 = ph(&[8, 3, 3, 3, 3], "kernel");
    let e = ops::conv3d_ncdhw(&x, &k2, &ok).unwrap_err();
    assert!(matches!(e, TeError::BadShape { .. }), "{e}");
    // ranks and types
    let x4 = ph(&[1, 4, 5, 5], "data");
    let e = ops::conv3d_ndhwc(&x4, &k, &ok).unwrap_err();
    assert!(e.to_string().contains("must both be 5-D"), "{e}");
    let xi = placeholder(&[1, 4, 2, 5, 5], DataType::int32(), "data").unwrap();
    let e = ops::conv3d_ncdhw(&xi, &k, &ok).unwrap_err();
    assert_eq!(attr(e), "conv3d_ncdhw.dtype");
}

// ----- pool3d -----

#[derive(Clone, Debug)]
struct PoolCase {
    /// logical NCDHW input
    shape: [usize; 5],
    a: Pool3dAttrs,
}

/// pool3d on logical NCDHW data by definition: each window's in-bounds elements; the
/// divisor counts the window positions inside the input (or inside the input and its
/// padding, without the extra tail of ceil mode, with count_include_pad).
fn pool3d_ref(c: &PoolCase, x: &[f64], max: bool) -> (Vec<f64>, [usize; 5]) {
    let a = &c.a;
    let k = [a.pool_size.0, a.pool_size.1, a.pool_size.2];
    let s = [a.strides.0, a.strides.1, a.strides.2];
    let dl = [a.dilation.0, a.dilation.1, a.dilation.2];
    let p = a.padding;
    let dims = [c.shape[2], c.shape[3], c.shape[4]].map(|v| v as i64);
    let out: Vec<i64> = (0..3)
        .map(|i| {
            let dk = (k[i] - 1) * dl[i] + 1;
            let extra = if a.ceil_mode { s[i] - 1 } else { 0 };
            (dims[i] + p[i] + p[i + 3] + extra - dk) / s[i] + 1
        })
        .collect();
    let oshape = [
        c.shape[0],
        c.shape[1],
        out[0] as usize,
        out[1] as usize,
        out[2] as usize,
    ];
    let mut res = Vec::new();
    for n in 0..c.shape[0] {
        for ch in 0..c.shape[1] {
            for z in 0..out[0] {
                for y in 0..out[1] {
                    for xx in 0..out[2] {
                        let o = [z, y, xx];
                        let (mut acc, mut inside, mut counted) =
                            (if max { f64::NEG_INFINITY } else { 0.0 }, 0i64, 0i64);
                        for a0 in 0..k[0] {
                            for a1 in 0..k[1] {
                                for a2 in 0..k[2] {
                                    let r = [a0, a1, a2];
                                    let pos: Vec<i64> =
                                        (0..3).map(|i| o[i] * s[i] + r[i] * dl[i] - p[i]).collect();
                                    if (0..3)
                                        .all(|i| pos[i] >= -p[i] && pos[i] < dims[i] + p[i + 3])
                                    {
                                        counted += 1;
                                    }
                                    if (0..3).all(|i| pos[i] >= 0 && pos[i] < dims[i]) {
                                        inside += 1;
                                        let xi = (((n * c.shape[1] + ch) * c.shape[2]
                                            + pos[0] as usize)
                                            * c.shape[3]
                                            + pos[1] as usize)
                                            * c.shape[4]
                                            + pos[2] as usize;
                                        if max {
                                            acc = acc.max(x[xi]);
                                        } else {
                                            acc += x[xi];
                                        }
                                    }
                                }
                            }
                        }
                        let div = if a.count_include_pad { counted } else { inside };
                        res.push(if max { acc } else { acc / div.max(1) as f64 });
                    }
                }
            }
        }
    }
    (res, oshape)
}

#[test]
fn pool3d_matches_reference_in_both_layouts() {
    let cases = [
        PoolCase {
            shape: [1, 2, 4, 5, 6],
            a: Pool3dAttrs::new((2, 2, 2), (2, 2, 2), (0, 0, 0)),
        },
        PoolCase {
            shape: [2, 3, 5, 7, 6],
            a: Pool3dAttrs::new((3, 3, 3), (2, 2, 2), (1, 1, 1)),
        },
        PoolCase {
            shape: [1, 2, 5, 6, 7],
            a: Pool3dAttrs::new((3, 2, 3), (1, 2, 2), (0, 0, 0))
                .with_padding([1, 0, 2, 0, 1, 1])
                .with_dilation((1, 2, 1)),
        },
        PoolCase {
            shape: [1, 2, 6, 7, 5],
            a: Pool3dAttrs::new((3, 3, 2), (2, 2, 2), (1, 1, 0)).with_ceil_mode(true),
        },
    ];
    for (i, c) in cases.iter().enumerate() {
        let xv = rand_vals(c.shape.iter().product(), 30 + i as u64);
        let s: Vec<i64> = c.shape.iter().map(|&v| v as i64).collect();
        for layout in ["NCDHW", "NDHWC"] {
            let (x, xin) = if layout == "NCDHW" {
                (ph(&s, "data"), xv.clone())
            } else {
                (
                    ph(&[s[0], s[2], s[3], s[4], s[1]], "data"),
                    permute(&xv, &c.shape, &TO_NDHWC),
                )
            };
            for (pool_type, max, cip) in [
                (PoolType::Max, true, false),
                (PoolType::Avg, false, false),
                (PoolType::Avg, false, true),
            ] {
                let a = c.a.clone().with_layout(layout).with_count_include_pad(cip);
                let out = ops::pool3d(&x, pool_type, &a).unwrap();
                let got = interpret(&out, &[(&x, &xin)]);
                let (mut want, oshape) = pool3d_ref(&PoolCase { a, ..c.clone() }, &xv, max);
                if layout == "NDHWC" {
                    want = permute(&want, &oshape, &TO_NDHWC);
                }
                assert_close(
                    &format!("pool3d case {i} {layout} {pool_type:?} cip={cip}"),
                    &got,
                    &want,
                    TOL,
                );
            }
        }
    }
}

#[test]
fn pool3d_stages_and_errors() {
    let x = ph(&[1, 2, 5, 5, 5], "data");
    let a = Pool3dAttrs::new((3, 3, 3), (2, 2, 2), (0, 0, 0));
    let mx = ops::pool3d(&x, PoolType::Max, &a).unwrap();
    assert_eq!((mx.name(), mx.tag()), ("tensor", "pool_max"));
    let names: Vec<&str> = mx.reduce_axis().iter().map(|r| r.name()).collect();
    assert_eq!(names, ["rv0", "rv1", "rv2"]);
    assert_eq!(mx.shape(), &[1, 2, 2, 2, 2]);
    let bad = |a: Pool3dAttrs| ops::pool3d(&x, PoolType::Avg, &a).unwrap_err().to_string();
    assert!(bad(Pool3dAttrs::new((0, 3, 3), (2, 2, 2), (0, 0, 0))).contains("pool_size"));
    assert!(bad(a.clone().with_layout("NCHW")).contains("needs a `D`, an `H` and a `W` axis"));
    assert!(bad(a.clone().with_layout("NCDHW4d")).contains("cannot be split"));
    assert!(bad(a.clone().with_padding([0, 0, 0, 0, -1, 0])).contains("padding"));
    let g = ops::global_pool3d(&ph(&[1, 5, 5, 4], "x"), PoolType::Avg, "NDHWC").unwrap_err();
    assert!(g.to_string().contains("4 dimensions"), "{g}");
}

// ----- global and adaptive 3-D pooling -----

#[test]
fn global_and_adaptive_pool3d_match_reference() {
    let shape = [2usize, 3, 4, 5, 6];
    let xv = rand_vals(shape.iter().product(), 40);
    let s: Vec<i64> = shape.iter().map(|&v| v as i64).collect();
    for layout in ["NCDHW", "NDHWC"] {
        let (x, xin) = if layout == "NCDHW" {
            (ph(&s, "data"), xv.clone())
        } else {
            (
                ph(&[s[0], s[2], s[3], s[4], s[1]], "data"),
                permute(&xv, &shape, &TO_NDHWC),
            )
        };
        for (pool_type, max) in [(PoolType::Max, true), (PoolType::Avg, false)] {
            // global: one value per (n, c)
            let out = ops::global_pool3d(&x, pool_type, layout).unwrap();
            let got = interpret(&out, &[(&x, &xin)]);
            let inner = 4 * 5 * 6;
            let want: Vec<f64> = xv
                .chunks(inner)
                .map(|w| {
                    if max {
                        w.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
                    } else {
                        w.iter().sum::<f64>() / inner as f64
                    }
                })
                .collect();
            // [N, C] values are in the same order in both layouts (the pooled axes are 1)
            assert_close(&format!("global {layout} {pool_type:?}"), &got, &want, TOL);

            // adaptive to (2, 3, 4): windows [floor(o·n/m), ceil((o+1)·n/m))
            let m = [2usize, 3, 4];
            let out = ops::adaptive_pool3d(&x, (2, 3, 4), pool_type, layout).unwrap();
            let got = interpret(&out, &[(&x, &xin)]);
            let win = |o: usize, n: usize, m: usize| (o * n / m, ((o + 1) * n).div_ceil(m));
            let mut want = Vec::new();
            for b in 0..2 {
                for c in 0..3 {
                    for z in 0..m[0] {
                        for y in 0..m[1] {
                            for xx in 0..m[2] {
                                let (z0, z1) = win(z, 4, m[0]);
                                let (y0, y1) = win(y, 5, m[1]);
                                let (x0, x1) = win(xx, 6, m[2]);
                                let mut acc = if max { f64::NEG_INFINITY } else { 0.0 };
                                for zi in z0..z1 {
                                    for yi in y0..y1 {
                                        for xi in x0..x1 {
                                            let v = xv[(((b * 3 + c) * 4 + zi) * 5 + yi) * 6 + xi];
                                            acc = if max { acc.max(v) } else { acc + v };
                                        }
                                    }
                                }
                                let cnt = ((z1 - z0) * (y1 - y0) * (x1 - x0)) as f64;
                                want.push(if max { acc } else { acc / cnt });
                            }
                        }
                    }
                }
            }
            if layout == "NDHWC" {
                want = permute(&want, &[2, 3, 2, 3, 4], &TO_NDHWC);
            }
            assert_close(
                &format!("adaptive {layout} {pool_type:?}"),
                &got,
                &want,
                TOL,
            );
        }
    }
}
