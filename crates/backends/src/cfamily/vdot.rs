//! The int8 dot product of the CPU's C: `acc + dot4(a, b)` on vectors of int32 words
//! ([`Intrinsic::Dot4U8I8`]: each lane sums the products of `a`'s four bytes read
//! unsigned and `b`'s four read signed) as one function per vector type, choosing by
//! the compiler's predefined macros (that is, by the target's `-mcpu`):
//!
//! - AVX-512 VNNI (`vpdpbusd` on 16 lanes; on 8 with AVX-512 VL) or AVX-VNNI (8 lanes):
//!   the instruction itself, which is this operation exactly — 64 multiply–adds per
//!   instruction where a float32 FMA does 16;
//! - AVX2 without VNNI: the bytes split into 16-bit halves (`a`'s zero-extended, `b`'s
//!   sign-extended, even and odd bytes apart) and two `vpmaddwd`, which is exact. The
//!   shorter `vpmaddubsw` form (onnxruntime's on these CPUs) saturates where two
//!   adjacent products exceed 32767 — 255 · 127 · 2 does — so it serves only
//!   [`Intrinsic::Dot4U8I7`], whose 7-bit `b` cannot saturate it, and
//!   [`Intrinsic::Dot4U8I8Sat`], which is defined by that saturation (and so never uses
//!   VNNI, whose sum is exact);
//! - elsewhere: shifts and multiplies on int32 lanes (GCC vector extensions), exact on
//!   every target, the saturating form's pair sums clamped to int16 there too.
//!
//! The accumulator is the function's first argument because a VNNI instruction
//! accumulates in place: `acc + dpbusd(0, a, b)` costs an add more, and GCC does not fold
//! it.

use super::names::vec_name;
use tessera_ir::{DataType, Intrinsic};

/// The call computing `acc + dot4(a, b)` on int32 vectors of `lanes` lanes (`args`:
/// `[acc, a, b]`, or `[a, b]` for a zero accumulator), if `op` is a dot product.
pub fn call(op: Intrinsic, t: DataType, lanes: u16, args: &[String]) -> Option<String> {
    if !op.is_dot4() || t != DataType::int32() || lanes < 2 {
        return None;
    }
    let v = vec_name(t, lanes);
    let f = function(op, &v);
    match args {
        [acc, a, b] => Some(format!("{f}({acc}, {a}, {b})")),
        [a, b] => Some(format!("{f}((({v}){{0}}), {a}, {b})")),
        _ => None,
    }
}

fn function(op: Intrinsic, v: &str) -> String {
    match op {
        Intrinsic::Dot4U8I7 => format!("tsr_vdot4n_{v}"),
        Intrinsic::Dot4U8I8Sat => format!("tsr_vdot4s_{v}"),
        _ => format!("tsr_vdot4_{v}"),
    }
}

/// The definitions of [`call`]'s functions for int32 vectors of `lanes` lanes: the
/// general one, the one for 7-bit `b` ([`Intrinsic::Dot4U8I7`]) and the saturating one
/// ([`Intrinsic::Dot4U8I8Sat`]).
pub fn int32_helpers(lanes: u16) -> String {
    let mut out = String::new();
    if lanes == 8 || lanes == 16 {
        out.push_str(
            "#if defined(__x86_64__) && defined(__AVX2__)\n#include <immintrin.h>\n#endif\n",
        );
    }
    for op in [
        Intrinsic::Dot4U8I8,
        Intrinsic::Dot4U8I7,
        Intrinsic::Dot4U8I8Sat,
    ] {
        out.push_str(&definition(op, lanes));
    }
    out
}

/// One function: `(guard, body)` per instruction set, the first that the compiler's
/// macros allow, else the generic form.
fn definition(op: Intrinsic, lanes: u16) -> String {
    let v = vec_name(DataType::int32(), lanes);
    // vpmaddubsw: exact for 7-bit `b`, the definition of the saturating form
    let pairs16 = op != Intrinsic::Dot4U8I8;
    let vnni_ok = op != Intrinsic::Dot4U8I8Sat;
    let generic = if op == Intrinsic::Dot4U8I8Sat {
        format!(
            r#"  {v} r = acc;
  for (int i = 0; i < 4; i += 2) {{
    {v} p = ((a >> (8 * i)) & 0xff) * ((b << (24 - 8 * i)) >> 24)
      + ((a >> (8 * i + 8)) & 0xff) * ((b << (16 - 8 * i)) >> 24);
    {v} hi = p > 32767, lo = p < -32768;
    r = r + ((p & ~(hi | lo)) | (32767 & hi) | (-32768 & lo));
  }}
  return r;"#
        )
    } else {
        format!(
            r#"  {v} r = acc;
  for (int i = 0; i < 4; ++i) {{
    {v} x = (a >> (8 * i)) & 0xff;
    {v} y = (b << (24 - 8 * i)) >> 24;
    r = r + x * y;
  }}
  return r;"#
        )
    };
    let vnni = |bits: u16, f: &str| {
        format!("  return ({v}){f}((__m{bits}i)acc, (__m{bits}i)a, (__m{bits}i)b);")
    };
    let mut forms: Vec<(&str, String)> = Vec::new();
    match lanes {
        16 => {
            if vnni_ok {
                forms.push(("defined(__AVX512VNNI__)", vnni(512, "_mm512_dpbusd_epi32")));
            }
            forms.push(("defined(__AVX512BW__)", avx(512, pairs16, &v)));
        }
        8 => {
            if vnni_ok {
                forms.push((
                    "defined(__AVX512VNNI__) && defined(__AVX512VL__)",
                    vnni(256, "_mm256_dpbusd_epi32"),
                ));
                forms.push(("defined(__AVXVNNI__)", vnni(256, "_mm256_dpbusd_avx_epi32")));
            }
            forms.push(("defined(__AVX2__)", avx(256, pairs16, &v)));
        }
        _ => {}
    }
    let mut out = format!(
        "static inline {v} {}({v} acc, {v} a, {v} b) {{\n",
        function(op, &v)
    );
    for (i, (guard, body)) in forms.iter().enumerate() {
        let kw = if i == 0 { "#if" } else { "#elif" };
        out.push_str(&format!("{kw} defined(__x86_64__) && {guard}\n{body}\n"));
    }
    if forms.is_empty() {
        out.push_str(&generic);
        out.push('\n');
    } else {
        out.push_str(&format!("#else\n{generic}\n#endif\n"));
    }
    out.push_str("}\n");
    out
}

/// The AVX2 / AVX-512 BW forms on `bits`-bit registers. Exact for any bytes: even and
/// odd bytes widened to 16 bits (`a` zero-, `b` sign-extended) and multiplied pairwise
/// into int32 by `vpmaddwd` (|255 · −128 · 2| fits). `narrow` (7-bit `b`, or the
/// saturating form): `vpmaddubsw`'s int16 pair sums, widened by `vpmaddwd` with ones —
/// three instructions where the exact form takes eight.
fn avx(bits: u16, narrow: bool, v: &str) -> String {
    let p = if bits == 512 { "_mm512" } else { "_mm256" };
    let m = format!("__m{bits}i");
    if narrow {
        return format!(
            r#"  {m} pairs = {p}_maddubs_epi16(({m})a, ({m})b);
  return ({v}){p}_add_epi32(({m})acc, {p}_madd_epi16(pairs, {p}_set1_epi16(1)));"#
        );
    }
    format!(
        r#"  {m} x = ({m})a, y = ({m})b;
  {m} xe = {p}_and_si{bits}(x, {p}_set1_epi16(0xff)), xo = {p}_srli_epi16(x, 8);
  {m} ye = {p}_srai_epi16({p}_slli_epi16(y, 8), 8), yo = {p}_srai_epi16(y, 8);
  return ({v}){p}_add_epi32(({m})acc, {p}_add_epi32({p}_madd_epi16(xe, ye), {p}_madd_epi16(xo, yo)));"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_width_has_an_exact_fallback() {
        for lanes in [4, 8, 16] {
            let h = int32_helpers(lanes);
            assert!(h.contains(&format!("tsr_vdot4_v_int32x{lanes}(")), "{h}");
            assert!(h.contains("r = r + x * y;"), "{h}");
        }
        assert!(int32_helpers(16).contains("_mm512_dpbusd_epi32"));
        assert!(int32_helpers(8).contains("_mm256_dpbusd_avx_epi32"));
        // the saturating form only for 7-bit weights
        let h8 = int32_helpers(8);
        let (general, rest) = h8.split_at(h8.find("tsr_vdot4n_").unwrap());
        let (narrow, saturating) = rest.split_at(rest.find("tsr_vdot4s_").unwrap());
        assert!(!general.contains("maddubs"));
        assert!(narrow.contains("_mm256_maddubs_epi16"));
        // the saturating form is vpmaddubsw's saturation, never VNNI's exact sum
        assert!(saturating.contains("_mm256_maddubs_epi16"), "{saturating}");
        assert!(!saturating.contains("dpbusd"), "{saturating}");
        assert!(saturating.contains("32767"), "{saturating}");
    }

    #[test]
    fn only_int32_dot_products_have_a_vector_call() {
        let a = ["acc".to_string(), "a".into(), "b".into()];
        assert_eq!(
            call(Intrinsic::Dot4U8I8, DataType::int32(), 8, &a).as_deref(),
            Some("tsr_vdot4_v_int32x8(acc, a, b)")
        );
        assert!(call(Intrinsic::Exp, DataType::int32(), 8, &a).is_none());
        assert!(call(Intrinsic::Dot4U8I8, DataType::float32(), 8, &a).is_none());
    }
}
