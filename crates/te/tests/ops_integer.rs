//! The int8 products (`dense_u8i8` on words of four bytes): exactly the integer product
//! of the bytes, unscheduled and under the default CPU schedule, whatever the data's
//! signedness, `K`'s remainder by 4 or the weight's packing.

mod common;

use tessera_ir::interp::{self, HostBuffer};
use tessera_ir::DataType;
use tessera_te::ops::{self, Int8Sums};
use tessera_te::schedules::default_schedule;
use tessera_te::{lower, placeholder, Schedule, Tensor};

fn bytes(n: usize, seed: u64, signed: bool) -> Vec<i64> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let b = (x >> 24) as u8;
            if signed {
                b as i8 as i64
            } else {
                b as i64
            }
        })
        .collect()
}

fn buffer(dt: DataType, shape: &[usize], v: &[i64]) -> HostBuffer {
    let f: Vec<f64> = v.iter().map(|&x| x as f64).collect();
    HostBuffer::from_f64(dt, shape, &f)
}

/// The weight words `[N, ⌈K/4⌉]`, packed by blocks of `b` columns when `b > 0`.
fn weight_words(w: &[i64], n: usize, k: usize, b: usize) -> (Vec<usize>, Vec<i64>) {
    let w8: Vec<i8> = w.iter().map(|&x| x as i8).collect();
    let words = ops::int8_words(&w8, n, k);
    let kw = k.div_ceil(4);
    if b == 0 {
        return (vec![n, kw], words.iter().map(|&x| x as i64).collect());
    }
    let mut packed = vec![0i64; n * kw];
    for j in 0..n {
        for q in 0..kw {
            packed[((j / b) * kw + q) * b + j % b] = words[j * kw + q] as i64;
        }
    }
    (vec![n / b, kw, b], packed)
}

/// The exact sums, on the short form where the weight is 7-bit.
fn sums_of(narrow: bool) -> Int8Sums {
    if narrow {
        Int8Sums::PairsFit
    } else {
        Int8Sums::Exact
    }
}

/// A pair fits int16 against any uint8 data when its positive parts, and its negative
/// parts, sum to at most 128; the bytes of a word pair up 0–1 and 2–3.
#[test]
fn pairs_fit_is_the_int16_bound_of_each_byte_pair() {
    let word = |b: [i8; 4]| i32::from_le_bytes(b.map(|x| x as u8));
    assert!(ops::pairs_fit(&[word([64, 64, -64, -64])]));
    assert!(ops::pairs_fit(&[word([127, -128, -128, 127])]));
    assert!(ops::pairs_fit(&[word([100, 28, 0, -128])]));
    assert!(!ops::pairs_fit(&[word([100, 29, 0, 0])]));
    assert!(!ops::pairs_fit(&[word([0, 0, -100, -29])]));
    // bytes 1 and 2 are not a pair
    assert!(ops::pairs_fit(&[word([0, 127, 127, 0])]));
    assert!(!ops::pairs_fit(&[
        word([0, 0, 0, 0]),
        word([127, 127, 0, 0])
    ]));
}

fn run(f: &tessera_ir::PrimFunc, mut bufs: Vec<HostBuffer>) -> Vec<i64> {
    interp::run(f, &mut bufs).unwrap_or_else(|e| panic!("interpreter: {e}\n{f}"));
    bufs[2].to_f64().iter().map(|&x| x as i64).collect()
}

#[test]
fn dense_u8i8_is_the_integer_product_scheduled_or_not() {
    let (m, n) = (5usize, 16usize);
    for (signed, k, b, narrow) in [
        (false, 16, 0, false),
        (true, 16, 0, false),
        (false, 13, 0, true),
        (true, 13, 8, false),
        (false, 32, 8, false),
        (false, 32, 8, true),
    ] {
        let dt = if signed {
            DataType::int(8)
        } else {
            DataType::uint(8)
        };
        let a = bytes(m * k, 3 + k as u64, signed);
        let w: Vec<i64> = bytes(n * k, 11, true)
            .into_iter()
            .map(|x| if narrow { x.clamp(-64, 64) } else { x })
            .collect();
        let (wshape, wv) = weight_words(&w, n, k, b);
        let data = placeholder(&[m as i64, k as i64], dt, "data").unwrap();
        let ws: Vec<i64> = wshape.iter().map(|&d| d as i64).collect();
        let weight = placeholder(&ws, DataType::int32(), "weight").unwrap();
        let out = ops::dense_u8i8(&data, &weight, sums_of(narrow)).unwrap();
        let tag = if b == 0 {
            "dense_u8i8"
        } else {
            "dense_u8i8_pack"
        };
        assert_eq!(out.tag(), tag);
        let want: Vec<i64> = (0..m * n)
            .map(|e| {
                let (i, j) = (e / n, e % n);
                (0..k)
                    .map(|q| (a[i * k + q] + if signed { 128 } else { 0 }) * w[j * k + q])
                    .sum()
            })
            .collect();
        let args: [Tensor; 3] = [data, weight, out.clone()];
        let bufs = || {
            vec![
                buffer(dt, &[m, k], &a),
                buffer(DataType::int32(), &wshape, &wv),
                HostBuffer::zeros(DataType::int32(), &[m, n]),
            ]
        };
        let plain = lower(&Schedule::create(&[out.clone()]).unwrap(), &args, "plain").unwrap();
        assert_eq!(run(&plain, bufs()), want, "unscheduled, {tag} K={k}");
        let sch = default_schedule(&[out.clone()], common::AVX2_TWO_CORES).unwrap();
        let f = lower(&sch, &args, "scheduled").unwrap();
        let text = f.to_string();
        let dot = if narrow { "dot4_u8i7" } else { "dot4_u8i8" };
        assert!(text.contains(&format!("tessera.{dot}")), "{text}");
        assert!(text.contains("vectorized"), "{text}");
        assert_eq!(run(&f, bufs()), want, "scheduled, {tag} K={k}\n{f}");
    }
}

#[test]
fn wrong_operands_are_refused() {
    let f = placeholder(&[4, 8], DataType::float32(), "data").unwrap();
    let w = placeholder(&[4, 2], DataType::int32(), "weight").unwrap();
    assert!(ops::dense_u8i8(&f, &w, Int8Sums::Exact).is_err());
    let d = placeholder(&[4, 8], DataType::uint(8), "data").unwrap();
    let w3 = placeholder(&[4, 3], DataType::int32(), "weight").unwrap();
    let err = ops::dense_u8i8(&d, &w3, Int8Sums::Exact)
        .unwrap_err()
        .to_string();
    assert!(err.contains("[N, 2]"), "{err}");
    let wf = placeholder(&[4, 2], DataType::float32(), "weight").unwrap();
    assert!(ops::dense_u8i8(&d, &wf, Int8Sums::PairsFit).is_err());
}

/// The int8 NHWC convolution on words: the integer convolution of the bytes with the
/// padding read as `pad` (data offset by 128 when int8), unscheduled and under the float
/// NHWC convolution's default schedule, for unpacked and packed weights, 6 input
/// channels (not a multiple of 4), stride 2 and padding 1.
#[test]
fn conv2d_nhwc_u8i8_is_the_integer_convolution() {
    use tessera_te::ops::Conv2dAttrs;
    let (n, h, w, c, o, kh, kw) = (1usize, 7usize, 6usize, 6usize, 16usize, 3usize, 3usize);
    let attrs = Conv2dAttrs::new((2, 2), (1, 1), (1, 1));
    let (oh, ow) = ((h + 2 - kh) / 2 + 1, (w + 2 - kw) / 2 + 1);
    let cw = c.div_ceil(4);
    for (signed, block, sums, pad) in [
        (false, None, Int8Sums::Exact, 3),
        (true, Some(8), Int8Sums::Exact, -5),
        (false, Some(8), Int8Sums::PairsFit, 0),
        (false, Some(8), Int8Sums::Saturating, 0),
    ] {
        let narrow = sums == Int8Sums::PairsFit;
        let dt = if signed {
            DataType::int(8)
        } else {
            DataType::uint(8)
        };
        let x = bytes(n * h * w * c, 21, signed);
        let wt: Vec<i64> = bytes(o * kh * kw * c, 5, true)
            .into_iter()
            .map(|v| if narrow { v.clamp(-64, 64) } else { v })
            .collect();
        // OHWI bytes → words along I → [O, KH, KW, ⌈C/4⌉], packed by `block` output channels
        let w8: Vec<i8> = wt.iter().map(|&v| v as i8).collect();
        let rows = ops::int8_words(&w8, o * kh * kw, c);
        let (wshape, wv): (Vec<usize>, Vec<i64>) = if let Some(block) = block {
            let mut p = vec![0i64; rows.len()];
            for oo in 0..o {
                for q in 0..kh * kw * cw {
                    p[((oo / block) * kh * kw * cw + q) * block + oo % block] =
                        rows[oo * kh * kw * cw + q] as i64;
                }
            }
            (vec![o / block, kh, kw, cw, block], p)
        } else {
            (
                vec![o, kh, kw, cw],
                rows.iter().map(|&v| v as i64).collect(),
            )
        };
        let off = if signed { 128 } else { 0 };
        let read = |b: usize, y: i64, xx: i64, ch: usize| -> i64 {
            if y < 0 || xx < 0 || y >= h as i64 || xx >= w as i64 {
                (pad + off) & 0xff
            } else {
                x[((b * h + y as usize) * w + xx as usize) * c + ch] + off
            }
        };
        // the sum of each pair of channels (0–1, 2–3, … of a word), saturated to int16
        // where `sums` says so
        let mut want = vec![0i64; n * oh * ow * o];
        let mut exact = want.clone();
        for y in 0..oh {
            for xx in 0..ow {
                for oo in 0..o {
                    let (mut acc, mut acc_exact) = (0, 0);
                    for ry in 0..kh {
                        for rx in 0..kw {
                            for ch in (0..c).step_by(2) {
                                let term = |ch: usize| {
                                    let v = read(
                                        0,
                                        (y * 2 + ry) as i64 - 1,
                                        (xx * 2 + rx) as i64 - 1,
                                        ch,
                                    );
                                    v * wt[((oo * kh + ry) * kw + rx) * c + ch]
                                };
                                let pair = term(ch) + if ch + 1 < c { term(ch + 1) } else { 0 };
                                acc_exact += pair;
                                acc += match sums {
                                    Int8Sums::Saturating => pair.clamp(-32768, 32767),
                                    _ => pair,
                                };
                            }
                        }
                    }
                    want[(y * ow + xx) * o + oo] = acc;
                    exact[(y * ow + xx) * o + oo] = acc_exact;
                }
            }
        }
        assert_eq!(want == exact, sums != Int8Sums::Saturating, "{sums:?}");
        let data = placeholder(&[n as i64, h as i64, w as i64, c as i64], dt, "data").unwrap();
        let ws: Vec<i64> = wshape.iter().map(|&d| d as i64).collect();
        let weight = placeholder(&ws, DataType::int32(), "weight").unwrap();
        let out = ops::conv2d_nhwc_u8i8(&data, &weight, &attrs, pad, sums).unwrap();
        let args: [Tensor; 3] = [data, weight, out.clone()];
        let bufs = || {
            vec![
                buffer(dt, &[n, h, w, c], &x),
                buffer(DataType::int32(), &wshape, &wv),
                HostBuffer::zeros(DataType::int32(), &[n, oh, ow, o]),
            ]
        };
        let plain = lower(&Schedule::create(&[out.clone()]).unwrap(), &args, "plain").unwrap();
        assert_eq!(
            run(&plain, bufs()),
            want,
            "unscheduled, block {block:?}, signed {signed}"
        );
        let sch = default_schedule(&[out.clone()], common::AVX2_TWO_CORES).unwrap();
        let f = lower(&sch, &args, "scheduled").unwrap();
        assert!(f.to_string().contains("vectorized"), "{f}");
        assert_eq!(
            run(&f, bufs()),
            want,
            "scheduled, block {block:?}, signed {signed}\n{f}"
        );
    }
}
