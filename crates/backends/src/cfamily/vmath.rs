//! Vector math for the CPU's C: `exp`, `sigmoid`, `tanh` and `erf` of float32 vectors as inline
//! polynomial code on GCC vector types, instead of a libm call per lane.
//!
//! A vector `exp` printed lane by lane is eight `expf` calls and the shuffles around
//! them; EfficientNet's SiLU (`x · σ(x)` after 49 of its convolutions) and the GELU of
//! every transformer's MLP (`erf`) spent most of their time there, where onnxruntime
//! (MLAS) evaluates a polynomial on whole registers. The functions here do the same:
//!
//! - `exp`: Cephes' `expf` — `x = n·ln 2 + r` (`n = rint(x·log₂e)`, ln 2 split in two
//!   constants for an exact `r`), a degree-6 polynomial for `e^r` on |r| ≤ ½ ln 2, times
//!   `2^n`: AVX-512's `vscalefps` where the target has it (one instruction, one
//!   rounding), else built in the exponent bits of two factors `2^⌊n/2⌋ · 2^⌈n/2⌉` (so
//!   that both are normal numbers from the largest result down through the subnormals);
//!   within 2 ulp of `expf`. `x` is clamped to [−104, 89] and nothing else is checked:
//!   above ln(FLT_MAX) ≈ 88.72 the product overflows to ∞ by itself, below −104 it
//!   underflows to 0, and a NaN passes the clamps (`min`/`max` return their second
//!   operand where either is NaN, and `x` is that operand) and every step after them.
//!   The comparisons and selects for ∞ and NaN, and the integer steps of `2^n`, were 17
//!   of the 32 instructions of a 16-lane `exp`, 15 % of Whisper's attention.
//! - `sigmoid`: a rational function of `x` clamped to [−18, 18], `½ + x·P(x²)/Q(x²)`
//!   with `P` of degree 4 and `Q` of degree 5 in `x²` (the minimax form MLAS's
//!   logistic uses), clamped to [0, 1]: absolute error under 2.5e-7 over the whole
//!   line (float32's rounding of ½ is 3e-8), NaN stays NaN. One division and ten FMAs
//!   where `1 / (1 + exp(-x))` took the exponential's ~30 operations and the division:
//!   EfficientNet's SiLU after 49 convolutions (the first two, on 112×112 maps, spent
//!   more time in it than in the convolution).
//! - `tanh`: `x·P(x²)/Q(x²)` on `x` clamped to ±7.905 (where float32's tanh is 1 to
//!   within an ulp), `P` of degree 6 and `Q` of degree 3 in `x²` (the minimax form of
//!   Eigen's and MLAS's float tanh): within a few ulp over the line, exactly ±0 at ±0,
//!   NaN stays NaN. GPT-2's GELU (`tanh` in the epilogue of its MLP's first dense) called
//!   `tanhf` per lane and ran that dense at ~80 GFLOPS where the next one ran at ~210.
//! - `rint` (round half to even, ONNX's quantization rounding): the x86 rounding
//!   instruction where the target has it (`vroundps` with AVX, 8 → 1 instruction), else
//!   `(|x| + 2²³) − 2²³`, which the FPU rounds to an integer with ties to even, the sign
//!   put back; `|x| ≥ 2²³` (already whole), ∞ and NaN pass through. Quantizing epilogues (QDQ models) called
//!   `floor` twice and selected among three candidates per element instead.
//! - `erf`: `x·P(x²)/Q(x²)` on `x` clamped to ±4 (where float32's erf is ±1), `P` of
//!   degree 6 and `Q` of degree 4 in `x²` (the minimax form of Eigen's float erf): one
//!   division and eleven FMAs, absolute error under 4e-7 over the line (at most ~6 ulp
//!   of the values near 1), relative error under 4e-7 near 0, clamped to [−1, 1] (the
//!   quotient passes 1 by an ulp near ±4), exactly ±0 at ±0, NaN stays NaN. It replaced Abramowitz & Stegun 7.1.26 (`1 − P(t)·e^{−x²}`, `t = 1/(1 +
//!   p|x|)`), which cost an `exp` and a division (about 45 operations a vector, as many
//!   as the 384-deep dense product before it in Whisper's MLP) and lost all relative
//!   accuracy near 0 to the cancellation.
//!
//! The clamps and the NaN cases go through five small helpers per vector type, one
//! instruction each where the target has it and masks or integer steps otherwise
//! ([`lane_helpers`]): `min`, `max`, a select by a comparison's mask, `rint` and the
//! scaling by `2^n`. With
//! the clamps written as three comparisons and five bit operations, and `n` as a floor
//! (`+ ½`, two conversions, a comparison and a correction), the exponential spent 19 %
//! of Whisper's attention; these took about a third of its operations away.
//!
//! Each vector type of float32 gets its functions with its typedef
//! ([`float32_helpers`]); [`call`] names the function for an intrinsic, or `None` for an
//! intrinsic that stays lane by lane.

use super::names::vec_name;
use tessera_ir::{DataType, Intrinsic};

/// The call of the vector function computing `op` on `args` (float32 vectors of
/// `lanes` lanes), if there is one.
pub fn call(op: Intrinsic, t: DataType, lanes: u16, args: &[String]) -> Option<String> {
    if t != DataType::float32() || lanes < 2 || args.len() != 1 {
        return None;
    }
    let f = match op {
        Intrinsic::Exp => "exp",
        Intrinsic::Sigmoid => "sigmoid",
        Intrinsic::Erf => "erf",
        Intrinsic::Tanh => "tanh",
        Intrinsic::RoundEven => "rint",
        _ => return None,
    };
    Some(format!("tsr_v{f}_{}({})", vec_name(t, lanes), args[0]))
}

/// The x86 instructions of a float32 vector width: the feature macro that guards them,
/// `rint` (round to nearest even without raising), `min`/`max` (the second operand
/// where either is NaN, as the portable forms) and a select by a lane mask, where the
/// width has one (`vblendvps`; AVX-512's takes mask registers, so 16 lanes select
/// portably).
struct X86Forms {
    guard: &'static str,
    round: &'static str,
    min: &'static str,
    max: &'static str,
    select: Option<&'static str>,
}

impl X86Forms {
    fn of(lanes: u16) -> Option<X86Forms> {
        Some(match lanes {
            4 => X86Forms {
                guard: "__SSE4_1__",
                round: "_mm_round_ps((__m128)x, 8)",
                min: "_mm_min_ps((__m128)a, (__m128)b)",
                max: "_mm_max_ps((__m128)a, (__m128)b)",
                select: Some("_mm_blendv_ps((__m128)b, (__m128)a, (__m128)m)"),
            },
            8 => X86Forms {
                guard: "__AVX__",
                round: "_mm256_round_ps((__m256)x, 8)",
                min: "_mm256_min_ps((__m256)a, (__m256)b)",
                max: "_mm256_max_ps((__m256)a, (__m256)b)",
                select: Some("_mm256_blendv_ps((__m256)b, (__m256)a, (__m256)m)"),
            },
            16 => X86Forms {
                guard: "__AVX512F__",
                round: "_mm512_roundscale_ps((__m512)x, 8)",
                min: "_mm512_min_ps((__m512)a, (__m512)b)",
                max: "_mm512_max_ps((__m512)a, (__m512)b)",
                select: None,
            },
            _ => return None,
        })
    }
}

/// The body of a helper of vector type `v` that returns `call` where the target has the
/// instruction (`forms`' guard), else computes `portable` (statements ending in a
/// `return`).
fn guarded_body(v: &str, forms: Option<(&str, &str)>, portable: &str) -> String {
    match forms {
        Some((guard, call)) => format!(
            "#if defined(__x86_64__) && defined({guard})\n  return ({v}){call};\n#else\n{portable}#endif\n"
        ),
        None => portable.to_string(),
    }
}

/// `min`, `max`, `select` (`m ? a : b` lane by lane, `m` a comparison's mask) and
/// `rint` of vector type `v` (integer lanes `vi`): one instruction each where the
/// target has it ([`X86Forms`]), else masks and bit operations.
fn lane_helpers(lanes: u16, v: &str, vi: &str, rint_portable: &str) -> String {
    let x86 = X86Forms::of(lanes);
    let pick = |f: fn(&X86Forms) -> Option<&'static str>| {
        x86.as_ref().and_then(|x| f(x).map(|call| (x.guard, call)))
    };
    let min = guarded_body(
        v,
        pick(|x| Some(x.min)),
        &format!("  {vi} m = a < b;\n  return ({v})((({vi})a & m) | (({vi})b & ~m));\n"),
    );
    let max = guarded_body(
        v,
        pick(|x| Some(x.max)),
        &format!("  {vi} m = a > b;\n  return ({v})((({vi})a & m) | (({vi})b & ~m));\n"),
    );
    let select = guarded_body(
        v,
        pick(|x| x.select),
        &format!("  return ({v})((({vi})a & m) | (({vi})b & ~m));\n"),
    );
    let rint = guarded_body(v, pick(|x| Some(x.round)), rint_portable);
    // `y · 2^n` for a whole `n`: AVX-512's `vscalefps` (one rounding, ∞ and the
    // subnormals as the product would give them), else the exponent bits of two factors
    // `2^⌊n/2⌋ · 2^⌈n/2⌉`, both normal for every `n` in [−150, 128]
    let scale = guarded_body(
        v,
        scalef_form(lanes),
        &format!(
            "  {vi} n = __builtin_convertvector(n_f, {vi});
               {vi} n1 = n >> 1, n2 = n - n1;
               return y * ({v})((n1 + 127) << 23) * ({v})((n2 + 127) << 23);
"
        ),
    );
    format!(
        "static inline {v} tsr_vmin_{v}({v} a, {v} b) {{\n{min}}}\n\
         static inline {v} tsr_vmax_{v}({v} a, {v} b) {{\n{max}}}\n\
         static inline {v} tsr_vselect_{v}({vi} m, {v} a, {v} b) {{\n{select}}}\n\
         static inline {v} tsr_vrint_{v}({v} x) {{\n{rint}}}\n\
         static inline {v} tsr_vscale_{v}({v} y, {v} n_f) {{\n{scale}}}\n"
    )
}

/// AVX-512's `vscalefps` for a float32 vector width (`y · 2^⌊n⌋`): the feature macro
/// that guards it and the call, for the widths it has (8 and 4 lanes need AVX-512 VL).
fn scalef_form(lanes: u16) -> Option<(&'static str, &'static str)> {
    match lanes {
        16 => Some(("__AVX512F__", "_mm512_scalef_ps((__m512)y, (__m512)n_f)")),
        8 => Some(("__AVX512VL__", "_mm256_scalef_ps((__m256)y, (__m256)n_f)")),
        4 => Some(("__AVX512VL__", "_mm_scalef_ps((__m128)y, (__m128)n_f)")),
        _ => None,
    }
}

/// A function computed as `x·P(x²)/Q(x²)` on `x` clamped to ±`bound`, then `result`
/// (a C expression of the quotient `pq`), NaN passing through: `sigmoid` (plus ½), `tanh`
/// and `erf` (clamped to their ranges). Coefficients highest degree first.
struct OddRational {
    name: &'static str,
    bound: &'static str,
    p: &'static [&'static str],
    q: &'static [&'static str],
    result: &'static str,
}

/// The rational functions of the module's header: MLAS's logistic, Eigen's float
/// `tanh` and `erf`.
const ODD_RATIONALS: [OddRational; 3] = [
    OddRational {
        name: "sigmoid",
        bound: "18.0f",
        p: &[
            "4.37031012579801e-11f",
            "1.15627324459942e-07f",
            "6.08574864600143e-05f",
            "8.51377133304701e-03f",
            "2.48287947061529e-01f",
        ],
        q: &[
            "6.10247389755681e-13f",
            "5.76102136993427e-09f",
            "6.29106785017040e-06f",
            "1.70198817374094e-03f",
            "1.16817656904453e-01f",
            "9.93151921023180e-01f",
        ],
        result: "{min}({max}(pq + {half}, {zero}), {one})",
    },
    OddRational {
        name: "tanh",
        bound: "7.90531110763549805f",
        p: &[
            "-2.76076847742355e-16f",
            "2.00018790482477e-13f",
            "-8.60467152213735e-11f",
            "5.12229709037114e-08f",
            "1.48572235717979e-05f",
            "6.37261928875436e-04f",
            "4.89352455891786e-03f",
        ],
        q: &[
            "1.19825839466702e-06f",
            "1.18534705686654e-04f",
            "2.26843463243900e-03f",
            "4.89352518554385e-03f",
        ],
        result: "pq",
    },
    OddRational {
        name: "erf",
        bound: "4.0f",
        p: &[
            "-2.72614225801306e-10f",
            "2.77068142495902e-08f",
            "-2.10102402082508e-06f",
            "-5.69250639462346e-05f",
            "-7.34990630326855e-04f",
            "-2.95459980854025e-03f",
            "-1.60960333262415e-02f",
        ],
        q: &[
            "-1.45660718464996e-05f",
            "-2.13374055278905e-04f",
            "-1.68282697438203e-03f",
            "-7.37332916720468e-03f",
            "-1.42647390514189e-02f",
        ],
        result: "{min}({max}(pq, -{one}), {one})",
    },
];

impl OddRational {
    /// The C definition for vector type `v` (integer lanes `vi`), constants made by
    /// `splat`.
    fn print(&self, v: &str, vi: &str, splat: &dyn Fn(&str) -> String) -> String {
        let horner = |var: &str, coefficients: &[&str]| {
            let mut text = format!("  {v} {var} = {};\n", splat(coefficients[0]));
            for c in &coefficients[1..] {
                text += &format!("  {var} = {var} * c2 + {};\n", splat(c));
            }
            text
        };
        let result = self
            .result
            .replace("{min}", &format!("tsr_vmin_{v}"))
            .replace("{max}", &format!("tsr_vmax_{v}"))
            .replace("{half}", &splat("0.5f"))
            .replace("{zero}", &splat("0.0f"))
            .replace("{one}", &splat("1.0f"));
        let bound = splat(self.bound);
        format!(
            "static inline {v} tsr_v{name}_{v}({v} x) {{\n\
             \x20 {vi} nan = x != x;\n\
             \x20 {v} c = tsr_vmax_{v}(tsr_vmin_{v}(x, {bound}), -{bound});\n\
             \x20 {v} c2 = c * c;\n\
             {p}\x20 p = p * c;\n\
             {q}\x20 {v} pq = p / q;\n\
             \x20 return tsr_vselect_{v}(nan, x, {result});\n\
             }}\n",
            name = self.name,
            p = horner("p", self.p),
            q = horner("q", self.q),
        )
    }
}

/// The definitions of the vector functions of float32 vectors of `lanes` lanes (after
/// the vector type's typedef).
pub fn float32_helpers(lanes: u16) -> String {
    let v = vec_name(DataType::float32(), lanes);
    let vi = format!("tsr_i32_{v}");
    let bytes = 4 * lanes as usize;
    let splat = |c: &str| {
        let items = vec![c; lanes as usize].join(", ");
        format!("(({v}){{{items}}})")
    };
    let one = splat("1.0f");
    let sign_bit = format!(
        "(({vi}){{{}}})",
        vec!["(int32_t)0x80000000"; lanes as usize].join(", ")
    );
    let two23 = splat("8388608.0f");
    let rint_portable = format!(
        "  {vi} sign = ({vi})x & {sign_bit};\n\
         \x20 {v} ax = ({v})(({vi})x & ~{sign_bit});\n\
         \x20 {v} r = ({v})(({vi})((ax + {two23}) - {two23}) | sign);\n\
         \x20 {vi} whole = ax >= {two23};\n\
         \x20 return ({v})((({vi})x & whole) | (({vi})r & ~whole));\n"
    );
    format!(
        r#"#if defined(__x86_64__)
#include <immintrin.h>
#endif
typedef int32_t {vi} __attribute__((vector_size({bytes})));
{lane_helpers}static inline {v} tsr_vexp_{v}({v} x) {{
  {v} c = tsr_vmax_{v}({lo}, tsr_vmin_{v}({hi}, x));
  {v} nf = tsr_vrint_{v}(c * {log2e});
  {v} r = c - nf * {c1} - nf * {c2};
  {v} z = r * r;
  {v} y = {p0};
  y = y * r + {p1};
  y = y * r + {p2};
  y = y * r + {p3};
  y = y * r + {p4};
  y = y * r + {p5};
  y = y * z + r + {one};
  return tsr_vscale_{v}(y, nf);
}}
{rationals}"#,
        rationals = ODD_RATIONALS
            .iter()
            .map(|f| f.print(&v, &vi, &splat))
            .collect::<String>(),
        hi = splat("89.0f"),
        lo = splat("-104.0f"),
        lane_helpers = lane_helpers(lanes, &v, &vi, &rint_portable),
        log2e = splat("1.44269504088896341f"),
        c1 = splat("0.693359375f"),
        c2 = splat("-2.12194440e-4f"),
        p0 = splat("1.9875691500e-4f"),
        p1 = splat("1.3981999507e-3f"),
        p2 = splat("8.3334519073e-3f"),
        p3 = splat("4.1665795894e-2f"),
        p4 = splat("1.6666665459e-1f"),
        p5 = splat("5.0000001201e-1f"),
    )
}
