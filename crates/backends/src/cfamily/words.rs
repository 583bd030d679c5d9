//! Words of four bytes read in place. The int8 products compute on int32 words of four
//! consecutive data bytes (`tessera_te`'s `pack_u8_words`), which the IR writes as the
//! OR of the four byte loads shifted into place — the semantics the interpreter and
//! every device share. That is bit for bit a little-endian 32-bit load from the first
//! byte's address, but a C compiler does not always see it: GCC merges `p[i] | p[i +
//! 1] << 8 | …` into one load only when it can prove the offsets adjacent, and an int32
//! offset (`p[x + 1]`, which C computes before widening) defeats it — 28 byte loads in a
//! MobileNet-v2 conv's register tile where 7 word loads do.
//!
//! [`byte_word`] recognizes the pattern in a scalar or vector expression (each lane a
//! word, its bytes 4 apart) and the dialect prints it ([`super::dialect::Dialect::
//! byte_words`]): in C a `memcpy` of the bytes into the word, one (vector) load; dialects
//! without it print the ORs as they are.

use super::flatten::flat_ramp;
use super::printer::Gen;
use crate::backend::BackendError;
use tessera_ir::arith::simplify;
use tessera_ir::{Buffer, DataType, Expr, ExprNode, Intrinsic};

/// A word (or vector of words) made of four consecutive bytes of `buffer`: the flat
/// offset of its first byte (of the first lane's, for a vector; lane `i` starts `4i`
/// further).
#[derive(Clone, Debug)]
pub(super) struct ByteWord {
    pub buffer: Buffer,
    pub offset: Expr,
}

/// `e` as a [`ByteWord`] when it is `b₀ | b₁ << 8 | b₂ << 16 | b₃ << 24` in uint32 (any
/// order and grouping of the ORs), each `bᵢ` a byte of an 8-bit buffer (uint8, or int8
/// read through uint8) widened to uint32, byte `i` at offset `i` after byte 0 — lane by
/// lane 4 apart in a vector.
pub(super) fn byte_word(e: &Expr) -> Option<ByteWord> {
    let t = e.dtype();
    if t.element_of() != DataType::uint(32) || !is_call(e, Intrinsic::BitOr) {
        return None;
    }
    let mut terms = Vec::new();
    or_terms(e, &mut terms);
    if terms.len() != 4 {
        return None;
    }
    let lane_stride = if t.is_scalar() { 0 } else { 4 };
    let mut bytes: [Option<(Buffer, Expr)>; 4] = Default::default();
    for term in terms {
        let (value, shift) = shifted(term)?;
        let slot = bytes.get_mut(usize::try_from(shift / 8).ok()?)?;
        if shift % 8 != 0 || slot.is_some() {
            return None;
        }
        let (buffer, indices) = byte_load(value)?;
        let (offset, stride) = flat_ramp(&buffer, indices)?;
        if stride != lane_stride {
            return None;
        }
        *slot = Some((buffer, offset));
    }
    let [Some((buffer, offset)), rest @ ..] = bytes else {
        return None;
    };
    for (i, byte) in rest.iter().enumerate() {
        let (b, o) = byte.as_ref()?;
        let step = simplify(&(o.clone() - offset.clone())).as_int();
        if *b != buffer || step != Some(i as i64 + 1) {
            return None;
        }
    }
    Some(ByteWord { buffer, offset })
}

fn is_call(e: &Expr, want: Intrinsic) -> bool {
    matches!(e.node(), ExprNode::Call { op, args, .. } if *op == want && args.len() == 2)
}

/// The operands of a tree of ORs.
fn or_terms<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e.node() {
        ExprNode::Call {
            op: Intrinsic::BitOr,
            args,
            ..
        } if args.len() == 2 => {
            or_terms(&args[0], out);
            or_terms(&args[1], out);
        }
        _ => out.push(e),
    }
}

/// A term `x << c` (`c` a constant, or its broadcast) as `(x, c)`; any other as `(x, 0)`.
fn shifted(e: &Expr) -> Option<(&Expr, i64)> {
    match e.node() {
        ExprNode::Call {
            op: Intrinsic::ShiftLeft,
            args,
            ..
        } if args.len() == 2 => {
            let amount = match args[1].node() {
                ExprNode::Broadcast { value, .. } => value.as_int()?,
                _ => args[1].as_int()?,
            };
            Some((&args[0], amount))
        }
        _ => Some((e, 0)),
    }
}

/// The load of a byte widened to uint32: `u32(load)` of a uint8 buffer, or `u32(u8(load))`
/// of an int8 or uint8 one.
fn byte_load(e: &Expr) -> Option<(Buffer, &[Expr])> {
    let ExprNode::Cast { dtype, value } = e.node() else {
        return None;
    };
    if dtype.element_of() != DataType::uint(32) {
        return None;
    }
    let load = match value.node() {
        ExprNode::Cast { dtype, value } if dtype.element_of() == DataType::uint(8) => value,
        _ if value.dtype().element_of() == DataType::uint(8) => value,
        _ => return None,
    };
    match load.node() {
        ExprNode::Load { buffer, indices } if buffer.dtype().bits == 8 => {
            Some((buffer.clone(), indices.as_slice()))
        }
        _ => None,
    }
}

impl Gen<'_> {
    /// The dialect's in-place load of `e` when it is a [`ByteWord`] and the dialect has
    /// one; `None` to print `e` as it is.
    pub(super) fn byte_word_code(&mut self, e: &Expr) -> Result<Option<String>, BackendError> {
        let Some(word) = byte_word(e) else {
            return Ok(None);
        };
        let lanes = e.dtype().lanes;
        let offset = self.scalar(&word.offset)?;
        let buf = self.use_buffer(&word.buffer)?;
        let Some(code) = self.dialect.byte_words(&buf, &offset, lanes) else {
            return Ok(None);
        };
        if lanes > 1 {
            self.vt(DataType::uint(32), lanes);
        }
        self.use_vector_math(DataType::uint(32), lanes);
        Ok(Some(code))
    }
}

/// The C dialect's helpers of [`super::dialect::Dialect::byte_words`] for `lanes` words:
/// `tsr_word` (one) or `tsr_words_v_uint32x<lanes>`, a `memcpy` of the bytes on a
/// little-endian machine (one load), the bytes shifted into place elsewhere.
pub(super) fn c_helpers(lanes: u16) -> String {
    let (name, ty, bytes) = if lanes == 1 {
        ("tsr_word".to_string(), "uint32_t".to_string(), 4)
    } else {
        let v = super::names::vec_name(DataType::uint(32), lanes);
        (format!("tsr_words_{v}"), v, 4 * lanes as usize)
    };
    format!(
        "static inline {ty} {name}(const void* p) {{\n  {ty} w;\n\
         #if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__\n  __builtin_memcpy(&w, p, {bytes});\n\
         #else\n  const uint8_t* b = (const uint8_t*)p;\n  uint32_t* l = (uint32_t*)&w;\n\
         \x20 for (int i = 0; i < {n}; ++i) l[i] = b[4 * i] | (uint32_t)b[4 * i + 1] << 8 | \
         (uint32_t)b[4 * i + 2] << 16 | (uint32_t)b[4 * i + 3] << 24;\n\
         #endif\n  return w;\n}}\n",
        n = bytes / 4
    )
}

/// The C dialect's call of [`c_helpers`]' function for a word at `buf[offset]`.
pub(super) fn c_call(buf: &str, offset: &str, lanes: u16) -> String {
    if lanes == 1 {
        format!("tsr_word(&{buf}[{offset}])")
    } else {
        let v = super::names::vec_name(DataType::uint(32), lanes);
        format!("tsr_words_{v}(&{buf}[{offset}])")
    }
}
