//! Integer matrix products of 8-bit operands with int32 sums: what onnxruntime's
//! `MatMulInteger`, `QLinearMatMul` and static-QDQ matmuls compute, on the CPU's int8
//! dot-product instructions.
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
//!   made once at build time.

use super::attr_err;
use crate::error::TeError;
use crate::tensor::{compute_tagged, reduce_axis, sum, Tensor};
use tessera_ir::{DataType, Expr, Intrinsic};

/// `data` (uint8 or int8, `[M, K]`) as int32 words of four consecutive bytes along `K`,
/// `[M, ⌈K/4⌉]`, little-endian (byte `4w + i` at bits `8i`), zero bytes past `K`; int8
/// bytes offset by 128 (read as uint8 `x + 128`).
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
    let &[m, k] = s else {
        return Err(TeError::BadShape {
            op: "pack_u8_words".into(),
            shape: s.to_vec(),
            reason: "data must be 2-D [M, K]".into(),
        });
    };
    let words = (k + 3) / 4;
    let i32t = DataType::int32();
    compute_tagged(&[m, words], "T_words", "injective", &["i", "w"], |ix| {
        let mut word: Option<Expr> = None;
        for b in 0..4i64 {
            let kk = ix[1].clone() * Expr::int(4) + Expr::int(b);
            let byte = data.at(&[ix[0].clone(), kk.clone()]);
            // the byte as unsigned 0..255 (int8: + 128), then the top one as signed so
            // that the word's sum never overflows int32
            let unsigned = if dt.is_uint() {
                Expr::cast(i32t, byte)
            } else {
                Expr::cast(i32t, byte) + Expr::int(128)
            };
            let v = if b == 3 {
                Expr::cast(i32t, Expr::cast(DataType::int(8), unsigned))
            } else {
                unsigned
            };
            let v = v * Expr::int(1 << (8 * b));
            let v = if b < k % 4 || k % 4 == 0 {
                v
            } else {
                // past K on the last word only
                Expr::if_then_else(kk.lt(Expr::int(k)), v, Expr::int(0))
            };
            word = Some(match word {
                None => v,
                Some(w) => w + v,
            });
        }
        word.expect("four bytes")
    })
}

/// `out[i, j] = Σ_k A[i, k] · W[j, k]` in int32 for uint8 (or, offset by 128, int8) data
/// `A [M, K]` and a weight of int8 words ([`pack_u8_words`]'s layout, signed bytes):
/// `[N, ⌈K/4⌉]` (tag `dense_u8i8`) or packed by blocks of `b` columns `[N/b, ⌈K/4⌉, b]`
/// (tag `dense_u8i8_pack`). `narrow`: the weight's bytes all lie in [−64, 64]
/// ([`Intrinsic::Dot4U8I7`], faster on CPUs without VNNI).
pub fn dense_u8i8(data: &Tensor, weight: &Tensor, narrow: bool) -> Result<Tensor, TeError> {
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
    let intrinsic = if narrow {
        Intrinsic::Dot4U8I7
    } else {
        Intrinsic::Dot4U8I8
    };
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
                let w = [
                    Expr::floordiv(ix[1].clone(), Expr::int(b)),
                    k.expr(),
                    Expr::floormod(ix[1].clone(), Expr::int(b)),
                ];
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

/// The patches of a 2-D convolution as the rows of a matrix (one group): `[N·OH·OW,
/// C·KH·KW]`, row `(n, oh, ow)`, column `(c, kh, kw)` (the order of an OIHW weight's
/// rows), positions in the padding `pad` (a quantized convolution pads with its data's
/// zero point). `layout` is the data's, `NCHW` or `NHWC`; the columns keep their order
/// either way, so a weight reshaped once serves both. Tag `injective`.
pub fn im2col(
    x: &Tensor,
    attrs: &super::Conv2dAttrs,
    kernel: (i64, i64),
    layout: &str,
    pad: i64,
) -> Result<Tensor, TeError> {
    let op = "im2col";
    let s = x.shape();
    let (n, c, h, w) = match (layout, s) {
        ("NCHW", &[n, c, h, w]) => (n, c, h, w),
        ("NHWC", &[n, h, w, c]) => (n, c, h, w),
        _ => {
            return Err(TeError::BadShape {
                op: op.into(),
                shape: s.to_vec(),
                reason: format!("data must be 4-D {layout} (NCHW or NHWC)"),
            })
        }
    };
    if attrs.groups != 1 {
        return Err(attr_err(
            op,
            "groups",
            format!("{} (one group only)", attrs.groups),
        ));
    }
    let (kh, kw) = kernel;
    let (oh, ow) = attrs.output_hw(op, h, w, kh, kw)?;
    let dt = x.dtype();
    let nchw = layout == "NCHW";
    let (sh, sw) = attrs.stride;
    let (dh, dw) = attrs.dilation;
    let [pt, pl, ..] = attrs.padding;
    let i = |v: i64| Expr::int(v);
    compute_tagged(
        &[n * oh * ow, c * kh * kw],
        "T_im2col",
        "injective",
        &["r", "q"],
        |ix| {
            let (r, q) = (ix[0].clone(), ix[1].clone());
            let b = Expr::floordiv(r.clone(), i(oh * ow));
            let y = Expr::floormod(Expr::floordiv(r.clone(), i(ow)), i(oh));
            let xw = Expr::floormod(r, i(ow));
            let ch = Expr::floordiv(q.clone(), i(kh * kw));
            let ky = Expr::floormod(Expr::floordiv(q.clone(), i(kw)), i(kh));
            let kx = Expr::floormod(q, i(kw));
            let ih = y * i(sh) + ky * i(dh) - i(pt);
            let iw = xw * i(sw) + kx * i(dw) - i(pl);
            let inside = Expr::all(vec![
                ih.clone().ge(i(0)),
                ih.clone().lt(i(h)),
                iw.clone().ge(i(0)),
                iw.clone().lt(i(w)),
            ]);
            let idx = if nchw {
                vec![b, ch, ih, iw]
            } else {
                vec![b, ih, iw, ch]
            };
            Expr::if_then_else(inside, x.at(&idx), Expr::constant(dt, pad as f64))
        },
    )
}
