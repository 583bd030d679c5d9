//! Integer matrix products and convolutions of 8-bit operands with int32 sums: what
//! onnxruntime's `MatMulInteger`, `QLinearMatMul`, `QLinearConv` and static-QDQ matmuls
//! and convolutions compute, on the CPU's int8 dot-product instructions.
//!
//! The products read their operands as int32 *words of four bytes* along the reduction:
//! `out[i, j] = Σ_w dot4(A[i, w], B[j, w])` with [`Intrinsic::Dot4U8I8`], one lane of
//! x86's `vpdpbusd` (the first operand's bytes unsigned, the second's signed). With the
//! output columns vectorized, a vector of `B`'s words and a broadcast word of `A` are
//! exactly that instruction's operands, so the schedules of the float products apply
//! unchanged and the C printer maps each step to one instruction (or its exact AVX2
//! emulation, see `tessera_backends`' `vdot`).
//!
//! - [`pack_u8_words`]: the data's bytes into words (a stage of the product, `K` padded
//!   with zero bytes to a multiple of 4); int8 data is offset by 128 into uint8 (`x ^
//!   0x80`), which the caller corrects for (`128 · Σ_k B[j, k]`, a constant per column);
//! - [`dense_u8i8`]: the product on a weight already in words — `[N, K/4]`, or packed by
//!   blocks of `b` output columns `[N/b, K/4, b]` as the float dense is (`dense_pack`),
//!   made once at build time;
//! - [`conv2d_nhwc_u8i8`]: the NHWC convolution of one group on the data's channels in
//!   words, the float NHWC convolution's stages and weight blocks (words along the input
//!   channels), so its register-tile schedule applies;
//! - [`int8_words`]: a constant int8 matrix as weight words, at build time;
//! - [`Int8Sums`]: how the products sum their bytes — exactly, on the shorter
//!   `vpmaddubsw` form where [`pairs_fit`] proves the weight cannot saturate it, or with
//!   that instruction's int16 saturation where a build asks for onnxruntime's arithmetic.

use super::attr_err;
use crate::error::TeError;
use crate::tensor::{compute_tagged, reduce_axis, sum, Tensor};
use tessera_ir::{DataType, Expr, Intrinsic};

/// The name of [`pack_u8_words`]' stage: the default schedules find it by it.
pub const WORDS: &str = "T_words";

/// `data` (uint8 or int8, `[…, K]`) as int32 words of four consecutive bytes along its
/// last axis, `[…, ⌈K/4⌉]`, little-endian (byte `4w + i` at bits `8i`), zero bytes past
/// `K`; int8 bytes offset by 128 (read as uint8 `x + 128`, that is `x ^ 0x80`).
///
/// A word is the OR of its bytes shifted into place, in uint32 (int8 data: the whole
/// word XOR `0x80808080` where `K` fills every word), which is bit for bit the four
/// bytes in memory: the CPU's C printer reads it as one 32-bit load (`tessera_backends`'
/// `cfamily::words`), so a product that reads this stage inlined (the default
/// schedule's choice) reads each word of its data in place.
pub fn pack_u8_words(data: &Tensor) -> Result<Tensor, TeError> {
    let dt = data.dtype();
    if dt != DataType::uint(8) && dt != DataType::int(8) {
        return Err(attr_err(
            "pack_u8_words",
            "dtype",
            format!("data must be uint8 or int8, got {dt}"),
        ));
    }
    let s = data.shape();
    let Some((&k, outer)) = s.split_last() else {
        return Err(TeError::BadShape {
            op: "pack_u8_words".into(),
            shape: s.to_vec(),
            reason: "data must have at least one axis".into(),
        });
    };
    let mut shape = outer.to_vec();
    shape.push((k + 3) / 4);
    let names: Vec<String> = (0..shape.len()).map(|i| format!("i{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let (u8t, u32t) = (DataType::uint(8), DataType::uint(32));
    let bits = |op: Intrinsic, a: Expr, b: Expr| Expr::call(u32t, op, vec![a, b]);
    let full_words = k % 4 == 0;
    let offset = dt.is_int();
    compute_tagged(&shape, WORDS, "injective", &names, |ix| {
        let (last, lead) = ix.split_last().expect("at least one axis");
        let mut word: Option<Expr> = None;
        for b in 0..4i64 {
            let kk = last.clone() * Expr::int(4) + Expr::int(b);
            let mut idx = lead.to_vec();
            idx.push(kk.clone());
            // the byte's bits, 0..255 (int8: as stored, two's complement)
            let mut v = Expr::cast(u32t, Expr::cast(u8t, data.at(&idx)));
            if offset && !full_words {
                v = bits(Intrinsic::BitXor, v, Expr::int_of(u32t, 0x80));
            }
            if !full_words && b >= k % 4 {
                // past K on the last word only
                v = Expr::if_then_else(kk.lt(Expr::int(k)), v, Expr::int_of(u32t, 0));
            }
            if b > 0 {
                v = bits(Intrinsic::ShiftLeft, v, Expr::int_of(u32t, 8 * b));
            }
            word = Some(match word {
                None => v,
                Some(w) => bits(Intrinsic::BitOr, w, v),
            });
        }
        let mut word = word.expect("four bytes");
        if offset && full_words {
            word = bits(Intrinsic::BitXor, word, Expr::int_of(u32t, 0x8080_8080));
        }
        Expr::cast(DataType::int32(), word)
    })
}

/// How an int8 product sums the byte products of a word: the intrinsic it computes with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Int8Sums {
    /// Exactly ([`Intrinsic::Dot4U8I8`]): ONNX's arithmetic, on any weight.
    Exact,
    /// Exactly, where [`pairs_fit`] holds for the weight ([`Intrinsic::Dot4U8I7`]): CPUs
    /// without VNNI then use the shorter `vpmaddubsw` form, which cannot saturate.
    PairsFit,
    /// Adjacent products summed in int16 with saturation ([`Intrinsic::Dot4U8I8Sat`]):
    /// what onnxruntime and TVM compute on CPUs without VNNI, asked for by a build.
    Saturating,
}

impl Int8Sums {
    /// The dot product of words this form computes with.
    pub fn intrinsic(self) -> Intrinsic {
        match self {
            Int8Sums::Exact => Intrinsic::Dot4U8I8,
            Int8Sums::PairsFit => Intrinsic::Dot4U8I7,
            Int8Sums::Saturating => Intrinsic::Dot4U8I8Sat,
        }
    }
}

/// Whether no adjacent pair of a weight word's bytes (bytes 0–1 and 2–3) can overflow
/// int16 against any uint8 data: `max(a₀b₀ + a₁b₁)` over bytes `a ≤ 255` is `255 ·
/// (b₀⁺ + b₁⁺)`, so each pair's positive parts, and its negative parts, must sum to at
/// most 128 (`255 · 128 < 32768`). Every weight in [−64, 64] passes; so do most pairs of
/// opposite signs.
pub fn pairs_fit(words: &[i32]) -> bool {
    words.iter().all(|&w| {
        let byte = |i: u32| i64::from((w >> (8 * i)) as u8 as i8);
        [0, 2].iter().all(|&i| {
            let (x, y) = (byte(i), byte(i + 1));
            x.max(0) + y.max(0) <= 128 && x.min(0) + y.min(0) >= -128
        })
    })
}

/// `out[i, j] = Σ_k A[i, k] · W[j, k]` in int32 for uint8 (or, offset by 128, int8) data
/// `A [M, K]` and a weight of int8 words ([`pack_u8_words`]'s layout, signed bytes):
/// `[N, ⌈K/4⌉]` (tag `dense_u8i8`) or packed by blocks of `b` columns `[N/b, ⌈K/4⌉, b]`
/// (tag `dense_u8i8_pack`), its bytes summed as `sums` says.
pub fn dense_u8i8(data: &Tensor, weight: &Tensor, sums: Int8Sums) -> Result<Tensor, TeError> {
    let op = "dense_u8i8";
    if weight.dtype() != DataType::int32() {
        return Err(attr_err(
            op,
            "dtype",
            format!("the weight must be int32 words, got {}", weight.dtype()),
        ));
    }
    let a = pack_u8_words(data)?;
    let (sa, sw) = (a.shape().to_vec(), weight.shape().to_vec());
    let words = sa[1];
    let bad = |reason: String| TeError::BadShape {
        op: op.into(),
        shape: sw.clone(),
        reason,
    };
    let k = reduce_axis(words, "k");
    let intrinsic = sums.intrinsic();
    let dot = |x: Expr, y: Expr| Expr::call(DataType::int32(), intrinsic, vec![x, y]);
    match *sw.as_slice() {
        [n, wk] if wk == words => {
            compute_tagged(&[sa[0], n], "T_matmul_NT", op, &["i", "j"], |ix| {
                sum(
                    dot(
                        a.at(&[ix[0].clone(), k.expr()]),
                        weight.at(&[ix[1].clone(), k.expr()]),
                    ),
                    &[k.clone()],
                )
            })
        }
        [nb, wk, b] if wk == words && b > 0 => compute_tagged(
            &[sa[0], nb * b],
            "T_matmul_NT",
            "dense_u8i8_pack",
            &["i", "j"],
            |ix| {
                let w = super::dense::blocked_index(&ix[1], &[k.expr()], b);
                sum(
                    dot(a.at(&[ix[0].clone(), k.expr()]), weight.at(&w)),
                    &[k.clone()],
                )
            },
        ),
        _ => Err(bad(format!(
            "the weight must be [N, {words}] or [N/b, {words}, b] words for data {:?}",
            data.shape()
        ))),
    }
}

/// An int8 matrix `[N, K]` (row-major, `values`) as [`dense_u8i8`]'s weight words
/// `[N, ⌈K/4⌉]`, zero bytes past `K`.
pub fn int8_words(values: &[i8], n: usize, k: usize) -> Vec<i32> {
    let words = k.div_ceil(4);
    let mut out = vec![0i32; n * words];
    for r in 0..n {
        for c in 0..k {
            let byte = values[r * k + c] as u8 as u32;
            let w = &mut out[r * words + c / 4];
            *w = (*w as u32 | (byte << (8 * (c % 4)))) as i32;
        }
    }
    out
}

/// The int8 2-D convolution of one group, NHWC, in int32: `out[n, y, x, o] = Σ_{ry, rx, w}
/// dot4(P[n, y·s + ry·d, x·s + rx·d, w], W[o, ry, rx, w])` where `P` is the data's
/// channels packed into words (`T_words`, `[N, H, W, ⌈C/4⌉]`, int8 offset by 128 as
/// in [`pack_u8_words`]) and padded by the word of four `pad` bytes (`pad_temp`: a
/// quantized convolution pads with its data's zero point, which its correction term
/// then cancels), and `W` the weight's words along its input channels, `[O, KH, KW,
/// ⌈C/4⌉]` or packed by blocks of `b` output channels `[O/b, KH, KW, ⌈C/4⌉, b]` — the
/// float NHWC convolution's stages, axes and weight blocks, so its schedule applies
/// (tag `conv2d_nhwc`), its bytes summed as `sums` says.
pub fn conv2d_nhwc_u8i8(
    data: &Tensor,
    kernel: &Tensor,
    attrs: &super::Conv2dAttrs,
    pad: i64,
    sums: Int8Sums,
) -> Result<Tensor, TeError> {
    let op = "conv2d_nhwc_u8i8";
    let dt = data.dtype();
    let s = data.shape().to_vec();
    let (k, &[n, h, w, c]) = (kernel.shape().to_vec(), s.as_slice()) else {
        return Err(TeError::BadShape {
            op: op.into(),
            shape: s.clone(),
            reason: "data must be 4-D NHWC".into(),
        });
    };
    if dt != DataType::uint(8) && dt != DataType::int(8) {
        return Err(attr_err(
            op,
            "dtype",
            format!("data must be uint8 or int8, got {dt}"),
        ));
    }
    if kernel.dtype() != DataType::int32() || attrs.groups != 1 {
        return Err(attr_err(
            op,
            "kernel",
            "the kernel must be int32 words and the convolution of one group".to_string(),
        ));
    }
    let words = (c + 3) / 4;
    let (cout, kh, kw, block) = match *k.as_slice() {
        [o, kh, kw, wc] if wc == words => (o, kh, kw, None),
        [ob, kh, kw, wc, b] if wc == words && b > 0 => (ob * b, kh, kw, Some(b)),
        _ => {
            return Err(TeError::BadShape {
                op: op.into(),
                shape: k.clone(),
                reason: format!(
                    "the kernel must be [O, KH, KW, {words}] or [O/b, KH, KW, {words}, b] words"
                ),
            })
        }
    };
    let (oh, ow) = attrs.output_hw(op, h, w, kh, kw)?;
    let as_nhwc = pack_u8_words(data)?;
    let i32t = DataType::int32();
    let byte = (pad + if dt.is_uint() { 0 } else { 128 }) & 0xff;
    let pad_word = (byte * 0x0101_0101) as u32 as i32 as i64;
    let [pt, pl, pb, pr] = attrs.padding;
    let padded = super::pad_with(
        &as_nhwc,
        &[0, pt, pl, 0],
        &[0, pb, pr, 0],
        Expr::int_of(i32t, pad_word),
        "pad_temp",
    )?;
    let (ry, rx, rc) = (
        reduce_axis(kh, "ry"),
        reduce_axis(kw, "rx"),
        reduce_axis(words, "rc"),
    );
    let intrinsic = sums.intrinsic();
    let (sh, sw) = attrs.stride;
    let (dh, dw) = attrs.dilation;
    compute_tagged(
        &[n, oh, ow, cout],
        "conv2d_nhwc",
        "conv2d_nhwc",
        &["nn", "yy", "xx", "ff"],
        |ix| {
            let y = ix[1].clone() * Expr::int(sh) + ry.expr() * Expr::int(dh);
            let x = ix[2].clone() * Expr::int(sw) + rx.expr() * Expr::int(dw);
            let ff = ix[3].clone();
            let kidx = match block {
                Some(b) => super::dense::blocked_index(&ff, &[ry.expr(), rx.expr(), rc.expr()], b),
                None => vec![ff, ry.expr(), rx.expr(), rc.expr()],
            };
            let d = padded.at(&[ix[0].clone(), y, x, rc.expr()]);
            sum(
                Expr::call(i32t, intrinsic, vec![d, kernel.at(&kidx)]),
                &[ry.clone(), rx.clone(), rc.clone()],
            )
        },
    )
}
