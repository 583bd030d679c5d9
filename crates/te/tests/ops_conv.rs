//! Convolutions against independent references written as plain loops, over a grid of
//! cases (odd sizes, stride 2, dilation 2, asymmetric padding, groups, batch > 1, both
//! layouts); their error paths; FLOPs and workload keys.

mod common;

use common::{assert_close, interpret, rand_vals};
use tessera_ir::DataType;
use tessera_te::ops::{self, Conv2dAttrs};
use tessera_te::{placeholder, ComputeDag, TeError, Tensor};

const F32: DataType = DataType::float32();

/// The shape facts of one case: batch, input h×w, channels in/out, kernel kh×kw.
#[derive(Clone, Copy, Debug)]
struct Case {
    n: usize,
    h: usize,
    w: usize,
    ci: usize,
    co: usize,
    kh: usize,
    kw: usize,
    a: Conv2dAttrs,
}

impl Case {
    fn out_hw(&self) -> (usize, usize) {
        let [pt, pl, pb, pr] = self.a.padding.map(|p| p as usize);
        let (sh, sw) = (self.a.stride.0 as usize, self.a.stride.1 as usize);
        let (dh, dw) = (self.a.dilation.0 as usize, self.a.dilation.1 as usize);
        (
            (self.h + pt + pb - ((self.kh - 1) * dh + 1)) / sh + 1,
            (self.w + pl + pr - ((self.kw - 1) * dw + 1)) / sw + 1,
        )
    }
}

fn conv_ref(
    c: &Case,
    d: impl Fn(usize, usize, i64, i64) -> f64,
    k: impl Fn(usize, usize, usize, usize) -> f64,
    mut out: impl FnMut(usize, usize, usize, usize, f64),
) {
    let (oh, ow) = c.out_hw();
    let g = c.a.groups as usize;
    let (cig, cog) = (c.ci / g, c.co / g);
    for n in 0..c.n {
        for o in 0..c.co {
            let grp = o / cog;
            for y in 0..oh {
                for x in 0..ow {
                    let mut acc = 0.0;
                    for cc in 0..cig {
                        for ky in 0..c.kh {
                            for kx in 0..c.kw {
                                let iy = (y as i64) * c.a.stride.0 + (ky as i64) * c.a.dilation.0
                                    - c.a.padding[0];
                                let ix = (x as i64) * c.a.stride.1 + (kx as i64) * c.a.dilation.1
                                    - c.a.padding[1];
                                acc += d(n, grp * cig + cc, iy, ix) * k(o, cc, ky, kx);
                            }
                        }
                    }
                    out(n, o, y, x, acc);
                }
            }
        }
    }
}

fn inside(v: i64, n: usize) -> bool {
    v >= 0 && (v as usize) < n
}

fn cases() -> Vec<Case> {
    let base = Case {
        n: 1,
        h: 7,
        w: 7,
        ci: 4,
        co: 6,
        kh: 3,
        kw: 3,
        a: Conv2dAttrs::default(),
    };
    vec![
        base,
        Case {
            h: 13,
            w: 7,
            a: Conv2dAttrs::new((2, 2), (1, 1), (1, 1)),
            ..base
        },
        Case {
            n: 2,
            h: 9,
            w: 13,
            a: Conv2dAttrs::new((1, 2), (0, 0), (2, 2)),
            ..base
        },
        Case {
            h: 8,
            w: 7,
            a: Conv2dAttrs::default().with_padding(0, 1, 2, 3),
            ..base
        },
        Case {
            ci: 6,
            co: 4,
            kh: 1,
            kw: 3,
            a: Conv2dAttrs::new((2, 1), (1, 0), (1, 1)).with_groups(2),
            ..base
        },
        Case {
            n: 2,
            ci: 4,
            co: 8,
            a: Conv2dAttrs::new((1, 1), (1, 1), (1, 1)).with_groups(4),
            ..base
        },
        Case {
            h: 31,
            w: 5,
            ci: 3,
            co: 3,
            kh: 5,
            kw: 1,
            a: Conv2dAttrs::new((2, 1), (2, 0), (1, 1)).with_groups(3),
            ..base
        },
    ]
}

#[test]
fn conv2d_nhwc_matches_reference() {
    for (i, c) in cases().iter().enumerate() {
        let cig = c.ci / c.a.groups as usize;
        let data = placeholder(
            &[c.n as i64, c.h as i64, c.w as i64, c.ci as i64],
            F32,
            "data",
        )
        .unwrap();
        let kern = placeholder(
            &[c.kh as i64, c.kw as i64, cig as i64, c.co as i64],
            F32,
            "kernel",
        )
        .unwrap();
        let out = ops::conv2d_nhwc_with(&data, &kern, &c.a).unwrap();
        let (dv, kv) = (
            rand_vals(data.shape().iter().product::<i64>() as usize, i as u64),
            rand_vals(
                kern.shape().iter().product::<i64>() as usize,
                100 + i as u64,
            ),
        );
        let got = interpret(&out, &[(&data, &dv), (&kern, &kv)]);
        let (oh, ow) = c.out_hw();
        assert_eq!(
            out.shape(),
            &[c.n as i64, oh as i64, ow as i64, c.co as i64],
            "case {i}"
        );
        let mut want = vec![0.0; got.len()];
        conv_ref(
            c,
            |n, ch, y, x| {
                if inside(y, c.h) && inside(x, c.w) {
                    dv[((n * c.h + y as usize) * c.w + x as usize) * c.ci + ch]
                } else {
                    0.0
                }
            },
            |o, cc, ky, kx| kv[((ky * c.kw + kx) * cig + cc) * c.co + o],
            |n, o, y, x, v| want[((n * oh + y) * ow + x) * c.co + o] = v,
        );
        assert_close(&format!("conv2d_nhwc case {i} {c:?}"), &got, &want, 1e-4);
    }
}

/// `kv` (HWIO `[kh, kw, ci, co]`) packed by blocks of `b` output channels:
/// `[co/b, kh, kw, ci, b]`.
fn pack_hwio(kv: &[f64], [kh, kw, ci, co]: [usize; 4], b: usize) -> Vec<f64> {
    let mut out = vec![0.0; kv.len()];
    for (i, v) in kv.iter().enumerate() {
        let (o, rest) = (i % co, i / co);
        let (c, rest) = (rest % ci, rest / ci);
        let (x, y) = (rest % kw, rest / kw);
        out[((((o / b) * kh + y) * kw + x) * ci + c) * b + o % b] = *v;
    }
    out
}

#[test]
fn conv2d_nhwc_with_a_packed_kernel_is_the_hwio_convolution() {
    // grouped cases too: a block of output channels may span groups (blocks of 2 and 4
    // over groups of 2, 3 and 4 output channels)
    for (i, c) in cases().iter().enumerate() {
        let b = [2, 4, 1].into_iter().find(|b| c.co % b == 0).unwrap();
        let cig = c.ci / c.a.groups as usize;
        let dims = [c.kh, c.kw, cig, c.co];
        let data = placeholder(
            &[c.n as i64, c.h as i64, c.w as i64, c.ci as i64],
            F32,
            "data",
        )
        .unwrap();
        let hwio = placeholder(&dims.map(|d| d as i64), F32, "kernel").unwrap();
        let packed = placeholder(
            &[
                (c.co / b) as i64,
                c.kh as i64,
                c.kw as i64,
                cig as i64,
                b as i64,
            ],
            F32,
            "kernel",
        )
        .unwrap();
        let dv = rand_vals(data.shape().iter().product::<i64>() as usize, i as u64);
        let kv = rand_vals(hwio.shape().iter().product::<i64>() as usize, 50 + i as u64);
        let want = interpret(
            &ops::conv2d_nhwc_with(&data, &hwio, &c.a).unwrap(),
            &[(&data, &dv), (&hwio, &kv)],
        );
        let out = ops::conv2d_nhwc_with(&data, &packed, &c.a).unwrap();
        let got = interpret(&out, &[(&data, &dv), (&packed, &pack_hwio(&kv, dims, b))]);
        assert_close(&format!("packed by {b}, case {i} {c:?}"), &got, &want, 1e-9);
    }
    // a packed kernel whose input channels are not the data's per group is refused
    let data = placeholder(&[1, 4, 4, 4], F32, "data").unwrap();
    let packed = placeholder(&[2, 3, 3, 4, 2], F32, "kernel").unwrap();
    let grouped = Conv2dAttrs::new((1, 1), (1, 1), (1, 1)).with_groups(2);
    let e = ops::conv2d_nhwc_with(&data, &packed, &grouped).unwrap_err();
    assert!(e.to_string().contains("expected 2"), "{e}");
}

#[test]
fn conv2d_nchw_matches_reference() {
    for (i, c) in cases().iter().enumerate() {
        let cig = c.ci / c.a.groups as usize;
        let data = placeholder(
            &[c.n as i64, c.ci as i64, c.h as i64, c.w as i64],
            F32,
            "data",
        )
        .unwrap();
        let kern = placeholder(
            &[c.co as i64, cig as i64, c.kh as i64, c.kw as i64],
            F32,
            "kernel",
        )
        .unwrap();
        let out = ops::conv2d_nchw(&data, &kern, &c.a).unwrap();
        let (dv, kv) = (
            rand_vals(data.shape().iter().product::<i64>() as usize, 7 + i as u64),
            rand_vals(kern.shape().iter().product::<i64>() as usize, 70 + i as u64),
        );
        let got = interpret(&out, &[(&data, &dv), (&kern, &kv)]);
        let (oh, ow) = c.out_hw();
        let mut want = vec![0.0; got.len()];
        conv_ref(
            c,
            |n, ch, y, x| {
                if inside(y, c.h) && inside(x, c.w) {
                    dv[((n * c.ci + ch) * c.h + y as usize) * c.w + x as usize]
                } else {
                    0.0
                }
            },
            |o, cc, ky, kx| kv[((o * cig + cc) * c.kh + ky) * c.kw + kx],
            |n, o, y, x, v| want[((n * c.co + o) * oh + y) * ow + x] = v,
        );
        assert_close(&format!("conv2d_nchw case {i} {c:?}"), &got, &want, 1e-4);
    }
}

#[test]
fn depthwise_matches_reference_in_both_layouts() {
    // (n, h, w, c, multiplier, kh, kw, attrs)
    let grid = [
        (
            1,
            7,
            7,
            3,
            1,
            3,
            3,
            Conv2dAttrs::new((1, 1), (1, 1), (1, 1)),
        ),
        (
            2,
            13,
            7,
            2,
            2,
            3,
            3,
            Conv2dAttrs::new((2, 2), (1, 1), (1, 1)),
        ),
        (
            1,
            9,
            11,
            4,
            1,
            3,
            3,
            Conv2dAttrs::new((1, 1), (0, 0), (2, 2)).with_padding(2, 1, 0, 3),
        ),
        (
            1,
            8,
            8,
            1,
            3,
            5,
            5,
            Conv2dAttrs::new((2, 1), (2, 2), (1, 1)),
        ),
    ];
    for (i, &(n, h, w, c, m, kh, kw, a)) in grid.iter().enumerate() {
        let case = Case {
            n,
            h,
            w,
            ci: c,
            co: c * m,
            kh,
            kw,
            a: a.with_groups(c as i64),
        };
        let (oh, ow) = case.out_hw();
        // NHWC, kernel [KH, KW, C, M].
        let data = placeholder(&[n as i64, h as i64, w as i64, c as i64], F32, "data").unwrap();
        let kern = placeholder(&[kh as i64, kw as i64, c as i64, m as i64], F32, "kernel").unwrap();
        let out = ops::depthwise_conv2d_nhwc(&data, &kern, &a).unwrap();
        let (dv, kv) = (
            rand_vals(n * h * w * c, i as u64),
            rand_vals(kh * kw * c * m, 50 + i as u64),
        );
        let got = interpret(&out, &[(&data, &dv), (&kern, &kv)]);
        let mut want = vec![0.0; got.len()];
        conv_ref(
            &case,
            |b, ch, y, x| {
                if inside(y, h) && inside(x, w) {
                    dv[((b * h + y as usize) * w + x as usize) * c + ch]
                } else {
                    0.0
                }
            },
            |o, _, ky, kx| kv[((ky * kw + kx) * c + o / m) * m + o % m],
            |b, o, y, x, v| want[((b * oh + y) * ow + x) * (c * m) + o] = v,
        );
        assert_close(&format!("depthwise nhwc case {i}"), &got, &want, 1e-4);
        // NCHW, kernel [C, M, KH, KW].
        let data = placeholder(&[n as i64, c as i64, h as i64, w as i64], F32, "data").unwrap();
        let kern = placeholder(&[c as i64, m as i64, kh as i64, kw as i64], F32, "kernel").unwrap();
        let out = ops::depthwise_conv2d_nchw(&data, &kern, &a).unwrap();
        let got = interpret(&out, &[(&data, &dv), (&kern, &kv)]);
        let mut want = vec![0.0; got.len()];
        conv_ref(
            &case,
            |b, ch, y, x| {
                if inside(y, h) && inside(x, w) {
                    dv[((b * c + ch) * h + y as usize) * w + x as usize]
                } else {
                    0.0
                }
            },
            |o, _, ky, kx| kv[(((o / m) * m + o % m) * kh + ky) * kw + kx],
            |b, o, y, x, v| want[((b * (c * m) + o) * oh + y) * ow + x] = v,
        );
        assert_close(&format!("depthwise nchw case {i}"), &got, &want, 1e-4);
    }
}

#[test]
fn winograd_matches_direct_convolution() {
    // (n, h, w, ci, co, padding, tile)
    for (i, &(n, h, w, ci, co, p, tile)) in [
        (1, 7, 7, 3, 4, [1, 1, 1, 1], 2),
        (2, 6, 9, 2, 3, [1, 0, 1, 2], 2),
        (1, 13, 7, 2, 2, [1, 1, 1, 1], 4),
        (1, 8, 8, 3, 2, [0, 0, 0, 0], 4),
    ]
    .iter()
    .enumerate()
    {
        let data = placeholder(&[n, h, w, ci], F32, "data").unwrap();
        let kern = placeholder(&[3, 3, ci, co], F32, "kernel").unwrap();
        let (dv, kv) = (
            rand_vals((n * h * w * ci) as usize, 5 + i as u64),
            rand_vals((9 * ci * co) as usize, 55 + i as u64),
        );
        let pack = ops::winograd_weight_transform_nhwc(&kern, tile).unwrap();
        let pv = interpret(&pack, &[(&kern, &kv)]);
        let kp = placeholder(pack.shape(), F32, "kernel_pack").unwrap();
        let out = ops::conv2d_winograd_nhwc(&data, &kp, p, tile).unwrap();
        let got = interpret(&out, &[(&data, &dv), (&kp, &pv)]);
        let direct = ops::conv2d_nhwc_with(
            &data,
            &kern,
            &Conv2dAttrs::default().with_padding(p[0], p[1], p[2], p[3]),
        )
        .unwrap();
        assert_eq!(out.shape(), direct.shape());
        let want = interpret(&direct, &[(&data, &dv), (&kern, &kv)]);
        assert_close(
            &format!("winograd F({tile}x{tile},3x3) case {i}"),
            &got,
            &want,
            1e-4,
        );
        // the CPU's form on the same weight, blocked [α, α, CO/b, CI, b]
        let (alpha, b) = ((tile + 2) as usize, if co % 2 == 0 { 2 } else { 1 });
        let (ciu, cou) = (ci as usize, co as usize);
        let mut blocked = vec![0.0; pv.len()];
        for (k, v) in pv.iter().enumerate() {
            let (e, o, c) = (k / (cou * ciu), k / ciu % cou, k % ciu);
            blocked[((e * (cou / b) + o / b) * ciu + c) * b + o % b] = *v;
        }
        let shape = [alpha as i64, alpha as i64, co / b as i64, ci, b as i64];
        let kb = placeholder(&shape, F32, "kernel_pack").unwrap();
        let out = ops::conv2d_winograd_nhwc_blocked(&data, &kb, p, tile).unwrap();
        assert_eq!(out.shape(), direct.shape());
        let got = interpret(&out, &[(&data, &dv), (&kb, &blocked)]);
        assert_close(
            &format!("blocked winograd F({tile}x{tile},3x3) case {i}"),
            &got,
            &want,
            1e-4,
        );
    }
}

#[test]
fn conv2d_transpose_matches_scatter_reference() {
    // (n, ci, h, w, co, kh, kw, stride, padding, output_padding)
    let grid = [
        (1, 2, 5, 5, 3, 3, 3, (2, 2), [1, 1, 1, 1], (1, 1)),
        (2, 3, 4, 7, 2, 3, 2, (1, 2), [0, 1, 2, 0], (0, 1)),
        (1, 1, 7, 3, 2, 4, 4, (3, 1), [2, 0, 1, 3], (2, 0)),
    ];
    for (i, &(n, ci, h, w, co, kh, kw, s, p, op)) in grid.iter().enumerate() {
        let data = placeholder(&[n, ci, h, w], F32, "data").unwrap();
        let kern = placeholder(&[ci, co, kh, kw], F32, "kernel").unwrap();
        let out = ops::conv2d_transpose_nchw(&data, &kern, s, p, op).unwrap();
        let (oh, ow) = (
            (h - 1) * s.0 - p[0] - p[2] + kh + op.0,
            (w - 1) * s.1 - p[1] - p[3] + kw + op.1,
        );
        assert_eq!(out.shape(), &[n, co, oh, ow], "case {i}");
        let (dv, kv) = (
            rand_vals((n * ci * h * w) as usize, 9 + i as u64),
            rand_vals((ci * co * kh * kw) as usize, 90 + i as u64),
        );
        let got = interpret(&out, &[(&data, &dv), (&kern, &kv)]);
        // Scatter: every input pixel adds its value times the kernel into the output.
        let mut want = vec![0.0; got.len()];
        for b in 0..n {
            for c in 0..ci {
                for y in 0..h {
                    for x in 0..w {
                        for o in 0..co {
                            for ky in 0..kh {
                                for kx in 0..kw {
                                    let (oy, ox) = (y * s.0 + ky - p[0], x * s.1 + kx - p[1]);
                                    if oy >= 0 && oy < oh && ox >= 0 && ox < ow {
                                        want[(((b * co + o) * oh + oy) * ow + ox) as usize] += dv
                                            [(((b * ci + c) * h + y) * w + x) as usize]
                                            * kv[(((c * co + o) * kh + ky) * kw + kx) as usize];
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        assert_close(&format!("conv2d_transpose case {i}"), &got, &want, 1e-4);
    }
}

#[test]
fn packed_int8_conv2d_matches_reference() {
    // data [N/1, C/16, H, W, 1, 16], kernel [O/16, C/16, KH, KW, 16, 16]
    let (cb, ob, h, w, k, s, p) = (2i64, 1i64, 5i64, 6i64, 3i64, (2i64, 1i64), (1i64, 1i64));
    let data = placeholder(&[1, cb, h, w, 1, 16], DataType::int(8), "data").unwrap();
    let kern = placeholder(&[ob, cb, k, k, 16, 16], DataType::int(8), "kernel").unwrap();
    let out = ops::conv2d_packed_int8(&data, &kern, s, p).unwrap();
    assert_eq!(out.dtype(), DataType::int32());
    let (oh, ow) = ((h + 2 * p.0 - k) / s.0 + 1, (w + 2 * p.1 - k) / s.1 + 1);
    assert_eq!(out.shape(), &[1, ob, oh, ow, 1, 16]);
    let to_i8 = |v: Vec<f64>| {
        v.into_iter()
            .map(|x| (x * 127.0).round())
            .collect::<Vec<f64>>()
    };
    let dv = to_i8(rand_vals((cb * h * w * 16) as usize, 3));
    let kv = to_i8(rand_vals((ob * cb * k * k * 256) as usize, 4));
    let got = interpret(&out, &[(&data, &dv), (&kern, &kv)]);
    let mut want = vec![0.0; got.len()];
    for co in 0..(ob * 16) {
        for y in 0..oh {
            for x in 0..ow {
                let mut acc = 0i64;
                for ci in 0..(cb * 16) {
                    for ky in 0..k {
                        for kx in 0..k {
                            let (iy, ix) = (y * s.0 + ky - p.0, x * s.1 + kx - p.1);
                            if iy < 0 || ix < 0 || iy >= h || ix >= w {
                                continue;
                            }
                            let dval = dv[((((ci / 16) * h + iy) * w + ix) * 16 + ci % 16) as usize]
                                as i64;
                            let kval = kv[(((((co / 16) * cb + ci / 16) * k + ky) * k + kx) * 16
                                + co % 16) as usize
                                * 16
                                + (ci % 16) as usize] as i64;
                            acc += dval * kval;
                        }
                    }
                }
                want[((((co / 16) * oh + y) * ow + x) * 16 + co % 16) as usize] = acc as f64;
            }
        }
    }
    assert_eq!(got, want);
}

fn attr_of(e: TeError) -> (String, String) {
    match e {
        TeError::BadAttr { op, attr, .. } => (op, attr),
        other => panic!("expected BadAttr, got {other}"),
    }
}

#[test]
fn invalid_attributes_are_typed_errors() {
    let d = placeholder(&[1, 5, 5, 4], F32, "data").unwrap();
    let k = placeholder(&[3, 3, 4, 8], F32, "kernel").unwrap();
    let big = placeholder(&[7, 7, 4, 8], F32, "kernel").unwrap();
    let a = Conv2dAttrs::default();
    assert_eq!(
        attr_of(ops::conv2d_nhwc_with(&d, &big, &a).unwrap_err()),
        ("conv2d_nhwc".into(), "kernel_size".into())
    );
    assert_eq!(
        attr_of(ops::conv2d_nhwc_with(&d, &k, &a.with_padding(-1, 0, 0, 0)).unwrap_err()),
        ("conv2d_nhwc".into(), "padding".into())
    );
    assert_eq!(
        attr_of(
            ops::conv2d_nhwc_with(
                &d,
                &k,
                &Conv2dAttrs {
                    stride: (0, 1),
                    ..a
                }
            )
            .unwrap_err()
        ),
        ("conv2d_nhwc".into(), "strides".into())
    );
    assert_eq!(
        attr_of(
            ops::conv2d_nhwc_with(
                &d,
                &k,
                &Conv2dAttrs {
                    dilation: (1, -2),
                    ..a
                }
            )
            .unwrap_err()
        ),
        ("conv2d_nhwc".into(), "dilation".into())
    );
    let kg = placeholder(&[3, 3, 2, 6], F32, "kernel").unwrap();
    assert_eq!(
        attr_of(ops::conv2d_nhwc_with(&d, &kg, &a.with_groups(3)).unwrap_err()),
        ("group_conv2d_nhwc".into(), "groups".into())
    );
    assert!(
        matches!(ops::conv2d_nhwc_with(&d, &kg, &a).unwrap_err(), TeError::BadShape { op, .. } if op == "conv2d_nhwc"),
        "mismatched channels"
    );
    let dn = placeholder(&[1, 4, 5, 5], F32, "data").unwrap();
    let kn = placeholder(&[8, 4, 3, 3], F32, "kernel").unwrap();
    assert_eq!(
        attr_of(ops::conv2d_nchw(&dn, &kn, &a.with_groups(0)).unwrap_err()),
        ("group_conv2d_nchw".into(), "groups".into())
    );
    let kd = placeholder(&[3, 3, 5, 1], F32, "kernel").unwrap();
    assert!(matches!(
        ops::depthwise_conv2d_nhwc(&d, &kd, &a),
        Err(TeError::BadShape { .. })
    ));
    let kp = placeholder(&[4, 4, 8, 4], F32, "kernel_pack").unwrap();
    assert_eq!(
        attr_of(ops::conv2d_winograd_nhwc(&d, &kp, [1; 4], 3).unwrap_err()),
        ("conv2d_winograd_nhwc".into(), "tile_size".into())
    );
    assert_eq!(
        attr_of(ops::conv2d_winograd_nhwc(&d, &kp, [1; 4], 4).unwrap_err()),
        ("conv2d_winograd_nhwc".into(), "tile_size".into())
    );
    // the CPU form: a tile it has no matrices for, a weight for another tile size,
    // another rank, other input channels
    let blocked = |k: &[i64], tile| {
        let kb = placeholder(k, F32, "kernel_pack").unwrap();
        ops::conv2d_winograd_nhwc_blocked(&d, &kb, [1; 4], tile).unwrap_err()
    };
    let blocked_op = "conv2d_winograd_nhwc_blocked".to_string();
    assert_eq!(
        attr_of(blocked(&[4, 4, 1, 4, 8], 3)),
        (blocked_op.clone(), "tile_size".into())
    );
    assert_eq!(
        attr_of(blocked(&[4, 4, 1, 4, 8], 4)),
        (blocked_op.clone(), "tile_size".into())
    );
    for k in [&[4, 4, 4, 8][..], &[4, 4, 1, 5, 8]] {
        assert!(
            matches!(blocked(k, 2), TeError::BadShape { ref op, .. } if *op == blocked_op),
            "{k:?}"
        );
    }
    assert_eq!(
        attr_of(ops::winograd_weight_transform_nhwc(&big, 2).unwrap_err()),
        ("winograd_weight_transform".into(), "kernel_size".into())
    );
    let kt = placeholder(&[4, 2, 3, 3], F32, "kernel").unwrap();
    assert_eq!(
        attr_of(ops::conv2d_transpose_nchw(&dn, &kt, (2, 2), [1; 4], (2, 0)).unwrap_err()),
        ("conv2d_transpose_nchw".into(), "output_padding".into())
    );
    assert_eq!(
        attr_of(ops::conv2d_transpose_nchw(&dn, &kt, (2, 2), [3, 0, 0, 0], (0, 0)).unwrap_err()),
        ("conv2d_transpose_nchw".into(), "padding".into())
    );
    let di = placeholder(&[1, 1, 5, 5, 1, 16], F32, "data").unwrap();
    let ki = placeholder(&[1, 1, 3, 3, 16, 16], DataType::int(8), "kernel").unwrap();
    assert_eq!(
        attr_of(ops::conv2d_packed_int8(&di, &ki, (1, 1), (1, 1)).unwrap_err()),
        ("conv2d_packed".into(), "dtype".into())
    );
    let e = ops::conv2d_nhwc_with(&d, &big, &a).unwrap_err().to_string();
    assert!(
        e.contains("conv2d_nhwc") && e.contains("kernel_size"),
        "{e}"
    );
}

#[test]
fn flops_and_workload_keys() {
    let conv = |dn: &str, kn: &str| -> Tensor {
        let d = placeholder(&[1, 14, 14, 16], F32, dn).unwrap();
        let k = placeholder(&[3, 3, 16, 32], F32, kn).unwrap();
        ops::conv2d_nhwc(&d, &k, (1, 1), (1, 1), (1, 1)).unwrap()
    };
    let dag = ComputeDag::new(&[conv("placeholder", "placeholder")]).unwrap();
    assert_eq!(dag.flop_count(), 2.0 * 14.0 * 14.0 * 32.0 * 9.0 * 16.0);
    assert_eq!(
        dag.workload_key(),
        ComputeDag::new(&[conv("x", "w")]).unwrap().workload_key()
    );
    let d = placeholder(&[1, 7, 7, 8], F32, "d").unwrap();
    let k = placeholder(&[3, 3, 8, 1], F32, "k").unwrap();
    let dw = ComputeDag::new(&[ops::depthwise_conv2d_nhwc(
        &d,
        &k,
        &Conv2dAttrs::new((1, 1), (1, 1), (1, 1)),
    )
    .unwrap()])
    .unwrap();
    assert_eq!(dw.flop_count(), 2.0 * 49.0 * 8.0 * 9.0);
}

#[test]
fn default_schedules_of_the_conv_family_compute_the_same() {
    use tessera_te::schedules::default_schedule;
    let p = common::AVX2_TWO_CORES;
    let a = Conv2dAttrs::new((1, 1), (1, 1), (1, 1));
    let mut cases: Vec<(Vec<Tensor>, Tensor)> = Vec::new();
    let d = placeholder(&[1, 6, 16, 8], F32, "data").unwrap();
    let k = placeholder(&[3, 3, 8, 16], F32, "kernel").unwrap();
    cases.push((
        vec![d.clone(), k.clone()],
        ops::conv2d_nhwc_with(&d, &k, &a).unwrap(),
    ));
    // rows with no divisor near the register tile's (13): the whole row, one vector
    let d13 = placeholder(&[1, 13, 13, 8], F32, "data").unwrap();
    let k13 = placeholder(&[1, 1, 8, 24], F32, "kernel").unwrap();
    cases.push((
        vec![d13.clone(), k13.clone()],
        ops::conv2d_nhwc_with(&d13, &k13, &Conv2dAttrs::new((1, 1), (0, 0), (1, 1))).unwrap(),
    ));
    // a deep layer whose 16 output channels read 288 KiB of weights: the reduction is
    // chunked over the input channels (checked below)
    let dd = placeholder(&[1, 2, 4, 512], F32, "data").unwrap();
    let kd = placeholder(&[3, 3, 512, 16], F32, "kernel").unwrap();
    let deep = ops::conv2d_nhwc_with(&dd, &kd, &a).unwrap();
    let chunked = default_schedule(&[deep.clone()], p).unwrap();
    let text = tessera_te::lower(&chunked, &[dd.clone(), kd.clone(), deep.clone()], "deep")
        .unwrap()
        .to_string();
    assert!(text.contains("rc.outer"), "no chunked reduction:\n{text}");
    cases.push((vec![dd.clone(), kd], deep));
    // the same with its weights packed by one vector (8 output channels), and the
    // 13-row tile of one vector on packed weights
    let kdp = placeholder(&[2, 3, 3, 512, 8], F32, "kernel").unwrap();
    let deep_packed = ops::conv2d_nhwc_with(&dd, &kdp, &a).unwrap();
    cases.push((vec![dd, kdp], deep_packed));
    let k13p = placeholder(&[3, 1, 1, 8, 8], F32, "kernel").unwrap();
    cases.push((
        vec![d13.clone(), k13p.clone()],
        ops::conv2d_nhwc_with(&d13, &k13p, &Conv2dAttrs::new((1, 1), (0, 0), (1, 1))).unwrap(),
    ));
    let dn = placeholder(&[2, 4, 5, 16], F32, "data").unwrap();
    let kn = placeholder(&[8, 4, 3, 3], F32, "kernel").unwrap();
    cases.push((
        vec![dn.clone(), kn.clone()],
        ops::conv2d_nchw(&dn, &kn, &Conv2dAttrs::new((1, 1), (1, 1), (1, 1))).unwrap(),
    ));
    let kg = placeholder(&[8, 2, 3, 3], F32, "kernel").unwrap();
    cases.push((
        vec![dn.clone(), kg.clone()],
        ops::conv2d_nchw(&dn, &kg, &a.with_groups(2)).unwrap(),
    ));
    let kd = placeholder(&[3, 3, 8, 1], F32, "kernel").unwrap();
    cases.push((
        vec![d.clone(), kd.clone()],
        ops::depthwise_conv2d_nhwc(&d, &kd, &a).unwrap(),
    ));
    let kdn = placeholder(&[4, 2, 3, 3], F32, "kernel").unwrap();
    cases.push((
        vec![dn.clone(), kdn.clone()],
        ops::depthwise_conv2d_nchw(&dn, &kdn, &Conv2dAttrs::new((2, 1), (1, 1), (1, 1))).unwrap(),
    ));
    let kp = placeholder(&[4, 4, 4, 8], F32, "kernel_pack").unwrap();
    cases.push((
        vec![d.clone(), kp.clone()],
        ops::conv2d_winograd_nhwc(&d, &kp, [1; 4], 2).unwrap(),
    ));
    let kt = placeholder(&[4, 3, 3, 3], F32, "kernel").unwrap();
    cases.push((
        vec![dn.clone(), kt.clone()],
        ops::conv2d_transpose_nchw(&dn, &kt, (2, 2), [1; 4], (1, 1)).unwrap(),
    ));
    // grouped NHWC: 4 and 8 output channels per group (vectors of 4 and 8 lanes), 3
    // (scalar), 16 (two vectors per group)
    for (groups, cout) in [(4, 16), (2, 16), (2, 6), (2, 32)] {
        let dg = placeholder(&[1, 5, 7, 8], F32, "data").unwrap();
        let kg = placeholder(&[3, 3, 8 / groups, cout], F32, "kernel").unwrap();
        let out = ops::conv2d_nhwc_with(&dg, &kg, &a.with_groups(groups)).unwrap();
        cases.push((vec![dg, kg], out));
    }
    // grouped NHWC on packed weights: blocks of 8 over groups of 4 (ResNeXt's first
    // stage) and of 16 output channels
    for (groups, cout) in [(4, 16), (2, 32)] {
        let dg = placeholder(&[1, 5, 7, 8], F32, "data").unwrap();
        let kg = placeholder(&[cout / 8, 3, 3, 8 / groups, 8], F32, "kernel").unwrap();
        let out = ops::conv2d_nhwc_with(&dg, &kg, &a.with_groups(groups)).unwrap();
        cases.push((vec![dg, kg], out));
    }
    for (ins, out) in cases {
        let s =
            default_schedule(&[out.clone()], p).unwrap_or_else(|e| panic!("{}: {e}", out.name()));
        let mut args = ins.clone();
        args.push(out.clone());
        common::assert_same_as_unscheduled(&s, &[out], &args, ins.len());
    }
}

/// A grouped NHWC conv's default schedule vectorizes over the output channels of one
/// group, so that every lane reads the same input channel: the input load is one
/// broadcast value, not a gather.
#[test]
fn grouped_conv_default_schedule_reads_its_input_as_a_broadcast() {
    use tessera_te::schedules::default_schedule;
    let p = common::AVX2_TWO_CORES;
    // ResNeXt's first stage in small: 4 channels per group
    let d = placeholder(&[1, 6, 6, 16], F32, "data").unwrap();
    let k = placeholder(&[3, 3, 4, 16], F32, "kernel").unwrap();
    let a = Conv2dAttrs::new((1, 1), (1, 1), (1, 1)).with_groups(4);
    let out = ops::conv2d_nhwc_with(&d, &k, &a).unwrap();
    let s = default_schedule(&[out.clone()], p).unwrap();
    let f = tessera_te::lower(&s, &[d.clone(), k, out], "group").unwrap();
    let (v, skipped) = tessera_ir::transform::vectorize_loops(&f.body);
    assert!(skipped.is_empty(), "{skipped:?}");
    let text = v.to_string();
    // the input read once (its padding in place: a guarded load) and broadcast, the
    // kernel as a 4-lane ramp
    assert!(text.contains("x4(tir.if_then_else("), "{text}");
    assert!(!text.contains("pad_temp["), "{text}");
    assert!(text.contains(", 1, 4)]"), "{text}");
    // the same on weights packed by blocks of 8 (two groups per block): the group
    // width is read from the packed kernel's input channels, its fourth axis
    let kp = placeholder(&[2, 3, 3, 4, 8], F32, "kernel").unwrap();
    let out = ops::conv2d_nhwc_with(&d, &kp, &a).unwrap();
    let s = default_schedule(&[out.clone()], p).unwrap();
    let f = tessera_te::lower(&s, &[d, kp, out], "group_packed").unwrap();
    let (v, skipped) = tessera_ir::transform::vectorize_loops(&f.body);
    assert!(skipped.is_empty(), "{skipped:?}");
    assert!(v.to_string().contains("x4(tir.if_then_else("), "{v}");
}

#[test]
fn conv2d_nchwc_matches_reference() {
    // groups = 1 cases, with input blocks ib = 2 and output blocks ob = 3 (or 2)
    for (i, c) in cases().iter().filter(|c| c.a.groups == 1).enumerate() {
        let (ib, ob) = (2, if c.co % 3 == 0 { 3 } else { 2 });
        let (cb, ocb) = (c.ci / ib, c.co / ob);
        let data = placeholder(
            &[c.n as i64, cb as i64, c.h as i64, c.w as i64, ib as i64],
            F32,
            "data",
        )
        .unwrap();
        let kern = placeholder(
            &[
                ocb as i64,
                cb as i64,
                c.kh as i64,
                c.kw as i64,
                ib as i64,
                ob as i64,
            ],
            F32,
            "kernel",
        )
        .unwrap();
        let out = ops::conv2d_nchwc(&data, &kern, &c.a).unwrap();
        let (dv, kv) = (
            rand_vals(data.shape().iter().product::<i64>() as usize, i as u64),
            rand_vals(kern.shape().iter().product::<i64>() as usize, 50 + i as u64),
        );
        let got = interpret(&out, &[(&data, &dv), (&kern, &kv)]);
        let (oh, ow) = c.out_hw();
        assert_eq!(
            out.shape(),
            &[c.n as i64, ocb as i64, oh as i64, ow as i64, ob as i64],
            "case {i}"
        );
        let mut want = vec![0.0; got.len()];
        conv_ref(
            c,
            |n, ch, y, x| {
                if inside(y, c.h) && inside(x, c.w) {
                    dv[(((n * cb + ch / ib) * c.h + y as usize) * c.w + x as usize) * ib + ch % ib]
                } else {
                    0.0
                }
            },
            |o, cc, ky, kx| {
                kv[((((o / ob * cb + cc / ib) * c.kh + ky) * c.kw + kx) * ib + cc % ib) * ob
                    + o % ob]
            },
            |n, o, y, x, v| want[(((n * ocb + o / ob) * oh + y) * ow + x) * ob + o % ob] = v,
        );
        assert_close(&format!("conv2d_nchwc case {i} {c:?}"), &got, &want, 1e-4);
    }
    // a kernel whose input blocks differ from the data's is refused
    let data = placeholder(&[1, 2, 5, 5, 2], F32, "data").unwrap();
    let kern = placeholder(&[2, 2, 3, 3, 4, 4], F32, "kernel").unwrap();
    let e = ops::conv2d_nchwc(&data, &kern, &Conv2dAttrs::default()).unwrap_err();
    assert!(e.to_string().contains("input blocks"), "{e}");
}

#[test]
fn a_conv_leaves_its_tiles_through_its_elementwise_epilogue() {
    use tessera_te::schedules::default_schedule_inlined;
    let p = common::AVX2_TWO_CORES;
    let d = placeholder(&[1, 7, 14, 8], F32, "data").unwrap();
    let k = placeholder(&[3, 3, 8, 16], F32, "kernel").unwrap();
    let b = placeholder(&[16], F32, "bias").unwrap();
    let r = placeholder(&[1, 7, 14, 16], F32, "residual").unwrap();
    let conv = ops::conv2d_nhwc_with(&d, &k, &Conv2dAttrs::new((1, 1), (1, 1), (1, 1))).unwrap();
    let biased = ops::bias_add(&conv, &b, 3).unwrap();
    let added = ops::add(&biased, &r).unwrap();
    let out = ops::relu(&added).unwrap();
    let s = default_schedule_inlined(&[out.clone()], &[biased, added], p).unwrap();
    let args = [d, k, b, r, out.clone()];
    let text = tessera_te::lower(&s, &args, "fused").unwrap().to_string();
    // the conv's result lives in the register tile only: no stored conv2d_nhwc
    assert!(!text.contains("conv2d_nhwc["), "{text}");
    common::assert_same_as_unscheduled(&s, &[out], &args, 4);
}

/// SiLU after a 1×1 conv reads the biased conv twice (`x · sigmoid(x)`): the branches
/// meet again at the output, so the conv still leaves its tiles through it; and a 1×1
/// conv's padding of nothing is read through, not copied.
#[test]
fn a_conv_leaves_its_tiles_through_a_diamond_and_reads_an_unpadded_input_directly() {
    use tessera_te::schedules::{conv_epilogue, default_schedule_inlined};
    let p = common::AVX2_TWO_CORES;
    let d = placeholder(&[1, 6, 14, 8], F32, "data").unwrap();
    let k = placeholder(&[1, 1, 8, 24], F32, "kernel").unwrap();
    let b = placeholder(&[24], F32, "bias").unwrap();
    let conv = ops::conv2d_nhwc_with(&d, &k, &Conv2dAttrs::default()).unwrap();
    let biased = ops::bias_add(&conv, &b, 3).unwrap();
    let gate = ops::sigmoid(&biased).unwrap();
    let out = ops::multiply(&biased, &gate).unwrap();
    let s = default_schedule_inlined(&[out.clone()], &[biased.clone(), gate.clone()], p).unwrap();
    let args = [d.clone(), k.clone(), b.clone(), out.clone()];
    let text = tessera_te::lower(&s, &args, "fused").unwrap().to_string();
    assert!(!text.contains("conv2d_nhwc["), "{text}");
    assert!(!text.contains("pad_temp"), "{text}");
    common::assert_same_as_unscheduled(&s, &[out.clone()], &args, 3);
    // a branch that leaves the group (the gate also an output) is not an epilogue
    let s = default_schedule_inlined(&[out.clone(), gate.clone()], &[biased.clone()], p).unwrap();
    assert_eq!(conv_epilogue(&s, &conv, &[out.clone(), gate.clone()]), None);
    let args = [d, k, b, out.clone(), gate.clone()];
    common::assert_same_as_unscheduled(&s, &[out, gate], &args, 3);
}

/// An NHWC conv with more input than weights keeps its pixels outermost; where its
/// weights pass 256 KiB (ResNeXt's 28×28 256 → 512 1×1 conv, 512 KiB) a row of pixels is
/// the block and the column tiles run inside it, before the row tiles. Smaller weights
/// keep the row tiles outside the column tiles.
#[test]
fn heavy_weights_make_a_conv_block_its_pixels_by_rows() {
    use tessera_te::schedules::default_schedule;
    let p = common::AVX2_TWO_CORES;
    let order = |ci: i64, co: i64| {
        let d = placeholder(&[1, 28, 28, ci], F32, "data").unwrap();
        let k = placeholder(&[1, 1, ci, co], F32, "kernel").unwrap();
        let conv = ops::conv2d_nhwc_with(&d, &k, &Conv2dAttrs::default()).unwrap();
        let s = default_schedule(&[conv.clone()], p).unwrap();
        let text = tessera_te::lower(&s, &[d, k, conv], "f")
            .unwrap()
            .to_string();
        let at = |loop_var: &str| text.find(&format!("for ({loop_var}, ")).unwrap();
        (at("ff.outer") < at("xx.outer"), text)
    };
    let (columns_first, text) = order(256, 512);
    assert!(columns_first, "{text}");
    let (columns_first, text) = order(64, 128);
    assert!(!columns_first, "{text}");
}

/// A row whose input outgrows L2 (a 1-D conv over a long sequence, wav2vec2's 3,199 ×
/// 512 map, 6.5 MiB) is cut into blocks of row tiles whose input fits, parallel with
/// the outer axes: one row left nothing to run in parallel, and every column tile
/// streamed the whole row. A row that fits stays one block.
#[test]
fn a_row_too_large_for_l2_is_cut_into_parallel_blocks() {
    use tessera_te::schedules::default_schedule;
    let p = common::AVX2_TWO_CORES;
    let lowered = |w: i64| {
        let d = placeholder(&[1, 1, w, 512], F32, "data").unwrap();
        let k = placeholder(&[1, 3, 512, 512], F32, "kernel").unwrap();
        let attrs = Conv2dAttrs {
            stride: (1, 2),
            ..Conv2dAttrs::default()
        };
        let conv = ops::conv2d_nhwc_with(&d, &k, &attrs).unwrap();
        let s = default_schedule(&[conv.clone()], p).unwrap();
        tessera_te::lower(&s, &[d, k, conv], "f")
            .unwrap()
            .to_string()
    };
    let long = lowered(3199);
    let par = long
        .lines()
        .find(|l| l.contains(") parallel"))
        .unwrap_or_else(|| panic!("no parallel loop:\n{long}"));
    assert!(par.contains("xx.outer.outer"), "{long}");
    // blocks of about 256 KiB of input: 3,199 × 2 KiB in 26 blocks of 63 columns
    assert!(par.contains(", 26)"), "{par}");
    let short = lowered(99);
    assert!(!short.contains("xx.outer.outer"), "{short}");
}
