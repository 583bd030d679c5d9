//! resize2d: its values against a direct f64 reference (bilinear half-pixel and
//! align-corners, nearest), the per-axis tables and the row pass of an upsampling, and
//! the default schedule against the unscheduled program at sizes it vectorizes and
//! parallelizes.

mod common;

use common::{assert_close, interpret, rand_vals};
use tessera_ir::DataType;
use tessera_te::ops::{self, CoordMode, NearestMode, ResizeAttrs, ResizeMethod};
use tessera_te::schedules::default_schedule;
use tessera_te::{placeholder, Schedule, Tensor};

const F32: DataType = DataType::float32();

fn attrs(
    input: (i64, i64),
    size: (i64, i64),
    coord: CoordMode,
    method: ResizeMethod,
) -> ResizeAttrs {
    ResizeAttrs {
        size,
        scale: (
            size.0 as f64 / input.0 as f64,
            size.1 as f64 / input.1 as f64,
        ),
        coord,
        method,
    }
}

/// The input coordinate of output index `i` (ONNX's formulas, in f64).
fn coord(mode: CoordMode, i: usize, len_in: i64, len_out: i64) -> f64 {
    let scale = len_out as f64 / len_in as f64;
    match mode {
        CoordMode::HalfPixel | CoordMode::PytorchHalfPixel => (i as f64 + 0.5) / scale - 0.5,
        CoordMode::AlignCorners => i as f64 * (len_in - 1) as f64 / (len_out - 1) as f64,
        CoordMode::Asymmetric => i as f64 / scale,
        // the sizes' own scale: no rounding to centre
        CoordMode::HalfPixelSymmetric => (i as f64 + 0.5) / scale - 0.5,
    }
}

/// Keys' cubic weights of the four taps around fraction `r` (ONNX's `cubic_coeffs`).
fn keys(r: f64, a: f64) -> [f64; 4] {
    let near = |d: f64| ((a + 2.0) * d - (a + 3.0)) * d * d + 1.0;
    let far = |d: f64| ((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a;
    [far(r + 1.0), near(r), near(1.0 - r), far(2.0 - r)]
}

/// One axis's bicubic taps at output `i`: clamped indices and weights.
fn cubic_taps(c: f64, len: i64, a: f64, exclude: bool) -> Vec<(i64, f64)> {
    let f = c.floor();
    let w = keys(c - f, a);
    let taps: Vec<(i64, f64)> = (0..4)
        .map(|k| {
            let at = f as i64 - 1 + k as i64;
            let inside = (0..len).contains(&at);
            (
                at.clamp(0, len - 1),
                if exclude && !inside { 0.0 } else { w[k] },
            )
        })
        .collect();
    let total: f64 = taps.iter().map(|t| t.1).sum();
    taps.into_iter()
        .map(|(i, w)| (i, if exclude { w / total } else { w }))
        .collect()
}

/// Bilinear or floor-nearest resize of `[planes, ih, iw]` to `[planes, oh, ow]`.
fn resize_ref(x: &[f64], planes: usize, (ih, iw): (i64, i64), a: &ResizeAttrs) -> Vec<f64> {
    let (oh, ow) = a.size;
    let at =
        |p: usize, y: i64, x_: i64| x[(p * ih as usize + y as usize) * iw as usize + x_ as usize];
    let mut out = Vec::new();
    for p in 0..planes {
        for y in 0..oh as usize {
            for xo in 0..ow as usize {
                if let ResizeMethod::Cubic {
                    a: k,
                    exclude_outside,
                } = a.method
                {
                    let ty = cubic_taps(coord(a.coord, y, ih, oh), ih, k, exclude_outside);
                    let tx = cubic_taps(coord(a.coord, xo, iw, ow), iw, k, exclude_outside);
                    let v = ty
                        .iter()
                        .map(|&(yi, wy)| {
                            wy * tx.iter().map(|&(xi, wx)| wx * at(p, yi, xi)).sum::<f64>()
                        })
                        .sum();
                    out.push(v);
                    continue;
                }
                let cy = coord(a.coord, y, ih, oh).clamp(0.0, (ih - 1) as f64);
                let cx = coord(a.coord, xo, iw, ow).clamp(0.0, (iw - 1) as f64);
                let (y0, x0) = (cy.floor() as i64, cx.floor() as i64);
                out.push(match a.method {
                    ResizeMethod::Nearest(_) | ResizeMethod::Cubic { .. } => at(p, y0, x0),
                    ResizeMethod::Linear => {
                        let (y1, x1) = ((y0 + 1).min(ih - 1), (x0 + 1).min(iw - 1));
                        let (wy, wx) = (cy - y0 as f64, cx - x0 as f64);
                        let top = at(p, y0, x0) * (1.0 - wx) + at(p, y0, x1) * wx;
                        let bottom = at(p, y1, x0) * (1.0 - wx) + at(p, y1, x1) * wx;
                        top * (1.0 - wy) + bottom * wy
                    }
                });
            }
        }
    }
    out
}

/// The names of `out`'s stages (placeholders included).
fn stage_names(out: &Tensor) -> Vec<String> {
    let s = Schedule::create(std::slice::from_ref(out)).unwrap();
    s.stages()
        .iter()
        .map(|st| st.op.name().to_string())
        .collect()
}

/// (leading axes, input rows and columns, output rows and columns, coordinates, method)
type Case = ([i64; 2], (i64, i64), (i64, i64), CoordMode, ResizeMethod);

const CASES: [Case; 7] = [
    // upsampling by 16 (DeepLab's head), by 2.5 × 1.5, from align-corners
    (
        [1, 3],
        (6, 7),
        (96, 112),
        CoordMode::HalfPixel,
        ResizeMethod::Linear,
    ),
    (
        [2, 2],
        (4, 6),
        (10, 9),
        CoordMode::HalfPixel,
        ResizeMethod::Linear,
    ),
    (
        [1, 2],
        (5, 5),
        (17, 33),
        CoordMode::AlignCorners,
        ResizeMethod::Linear,
    ),
    // downsampling rows: the direct form
    (
        [1, 2],
        (12, 8),
        (5, 16),
        CoordMode::HalfPixel,
        ResizeMethod::Linear,
    ),
    (
        [1, 3],
        (5, 6),
        (20, 48),
        CoordMode::Asymmetric,
        ResizeMethod::Nearest(NearestMode::Floor),
    ),
    // bicubic: PyTorch's kernel upsampling, TensorFlow's without the outside taps down
    (
        [1, 2],
        (5, 6),
        (11, 9),
        CoordMode::HalfPixel,
        ResizeMethod::Cubic {
            a: -0.75,
            exclude_outside: false,
        },
    ),
    (
        [2, 1],
        (9, 8),
        (4, 5),
        CoordMode::HalfPixel,
        ResizeMethod::Cubic {
            a: -0.5,
            exclude_outside: true,
        },
    ),
];

#[test]
fn resize_matches_the_direct_reference() {
    for (k, (lead, input, size, coord, method)) in CASES.into_iter().enumerate() {
        let x = placeholder(&[lead[0], lead[1], input.0, input.1], F32, "x").unwrap();
        let a = attrs(input, size, coord, method);
        let out = ops::resize2d(&x, &a).unwrap();
        assert_eq!(out.shape(), &[lead[0], lead[1], size.0, size.1]);
        let planes = (lead[0] * lead[1]) as usize;
        let xv = rand_vals(planes * (input.0 * input.1) as usize, 11 + k as u64);
        let got = interpret(&out, &[(&x, &xv)]);
        let want = resize_ref(&xv, planes, input, &a);
        assert_close(&format!("case {k}: {a:?}"), &got, &want, 1e-5);
    }
}

/// An upsampling of rows interpolates each input row once (`T_resize_h`); every resize
/// reads its indices and weights from per-axis tables, not per element.
#[test]
fn upsampling_interpolates_each_input_row_once() {
    for (lead, input, size, coord, method) in CASES {
        let x = placeholder(&[lead[0], lead[1], input.0, input.1], F32, "x").unwrap();
        let out = ops::resize2d(&x, &attrs(input, size, coord, method)).unwrap();
        let names = stage_names(&out);
        let has = |n: &str| names.iter().any(|s| s == n);
        let row_pass = matches!(method, ResizeMethod::Linear) && size.0 > input.0;
        assert_eq!(
            has("T_resize_h"),
            row_pass,
            "{size:?} from {input:?}: {names:?}"
        );
        match method {
            ResizeMethod::Linear => {
                for t in [
                    "T_resize_y0",
                    "T_resize_y1",
                    "T_resize_yw",
                    "T_resize_x0",
                    "T_resize_xw",
                ] {
                    assert!(has(t), "no {t}: {names:?}");
                }
            }
            ResizeMethod::Nearest(_) => {
                assert!(has("T_resize_y") && has("T_resize_x"), "{names:?}")
            }
            ResizeMethod::Cubic { .. } => {
                for t in ["T_resize_y0", "T_resize_y3", "T_resize_xw0", "T_resize_xw3"] {
                    assert!(has(t), "no {t}: {names:?}");
                }
            }
        }
    }
}

#[test]
fn the_default_schedule_computes_the_same() {
    for (lead, input, size, coord, method) in CASES {
        let x = placeholder(&[lead[0], lead[1], input.0, input.1], F32, "x").unwrap();
        let out = ops::resize2d(&x, &attrs(input, size, coord, method)).unwrap();
        let s = default_schedule(&[out.clone()], common::AVX2_TWO_CORES).unwrap();
        common::assert_same_as_unscheduled(&s, &[out.clone()], &[x, out], 1);
    }
}
