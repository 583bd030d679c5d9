//! What differs between the C-family languages the printer writes: the [`Dialect`]
//! trait, and [`CDialect`], the host C of the CPU backend (GCC/Clang vector extensions,
//! OpenMP). A backend — built in or a plugin — picks one, or writes its own by overriding
//! the hooks that differ; every default is the C dialect's (which adds only its float32
//! vector math, [`super::vmath`]).

use super::names::vec_name;
use tessera_ir::transform::{AllreduceInfo, ThreadExtents};
use tessera_ir::{DataType, Intrinsic, StorageScope, ThreadAxis};

/// What a dialect refuses to print: the printer reports it as
/// `BackendError::Unsupported` naming the function.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// A type the language (or the device) cannot compute in.
    #[error("{why}")]
    Type { dtype: DataType, why: &'static str },
    /// A vector width the language has no type for; `allowed` says which it has.
    #[error("a vector of {lanes} lanes ({allowed})")]
    Lanes { lanes: u16, allowed: &'static str },
    /// An allocation the language cannot make in this scope.
    #[error("{why}")]
    Allocation {
        scope: StorageScope,
        why: &'static str,
    },
}

/// How an allocation is declared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AllocDecl {
    /// A declaration where the allocation is (an array in scope for its body).
    Here(String),
    /// A declaration at the top of the function (OpenCL's `__local` arrays must be at
    /// kernel scope; CUDA's `__shared__` may be anywhere but is hoisted alike).
    Hoisted(String),
    /// Heap memory: `aligned_alloc` and `free` around the body, a failure reported by
    /// the function's status (the CPU's large allocations).
    Heap,
}

/// A C-family language: the hooks the printer calls where languages differ.
pub trait Dialect: Sync {
    /// The backend named in errors (`cpu`, `opencl`, `cuda`).
    fn backend(&self) -> &str;

    /// Identifiers of the language or its built-ins a variable may not be named (beyond
    /// C's keywords and the C library's names, which every dialect avoids).
    fn reserved(&self) -> &[&str] {
        &[]
    }

    /// Refuses a type the language (or the device) cannot compute in.
    fn check_type(&self, t: DataType) -> Result<(), Refusal> {
        let _ = t;
        Ok(())
    }

    /// Refuses a number of vector lanes the language has no type for.
    fn check_lanes(&self, lanes: u16) -> Result<(), Refusal> {
        if lanes.is_power_of_two() {
            Ok(())
        } else {
            Err(Refusal::Lanes {
                lanes,
                allowed: "C vector types need a power of two",
            })
        }
    }

    /// The name of a math function on `t` (`expf` for float in C).
    fn math_fn(&self, base: &str, t: DataType) -> String {
        match t.bits {
            64 => base.to_string(),
            _ => format!("{base}f"),
        }
    }

    /// The declaration of the vector type `name` of `lanes` lanes of `elem` (the C type
    /// of `t`; bool lanes are `int8_t`).
    fn vector_typedef(&self, elem: &str, t: DataType, lanes: u16) -> String {
        gcc_vector_typedef(elem, t, lanes)
    }

    /// `code` (a vector) with its bits read as the vector type `to` of the same size.
    fn reinterpret(&self, code: &str, to: &str) -> String {
        format!("({to}){code}")
    }

    /// A load of `lanes` contiguous elements at `buf[offset]`, as the vector type `vt`.
    fn vector_load(&self, vt: &str, buf: &str, offset: &str, lanes: u16) -> String {
        let _ = lanes;
        format!("(*({vt}_u*)(&{buf}[{offset}]))")
    }

    /// The little-endian word of the four bytes at `buf[offset]` (an 8-bit array), as
    /// uint32 — or, for `lanes` > 1, the vector of the words of `4 · lanes` consecutive
    /// bytes: what the IR's OR of four shifted byte loads computes
    /// ([`super::words`]), in one load. `None` (the default) prints the ORs.
    fn byte_words(&self, buf: &str, offset: &str, lanes: u16) -> Option<String> {
        let _ = (buf, offset, lanes);
        None
    }

    /// A store of the vector `value` to `lanes` contiguous elements at `buf[offset]`.
    fn vector_store(&self, vt: &str, buf: &str, offset: &str, value: &str, lanes: u16) -> String {
        let _ = lanes;
        format!("*({vt}_u*)(&{buf}[{offset}]) = {value};")
    }

    /// The line before a loop unrolled by the compiler.
    fn unroll_pragma(&self, factor: i64) -> String {
        format!("#pragma GCC unroll {factor}")
    }

    /// The line before a serial loop around an unrolled register tile (its reduction
    /// loop), `None` to leave it to the compiler.
    fn serial_pragma(&self) -> Option<String> {
        None
    }

    /// The line before a parallel loop (`None`: the language has no parallel loop, the
    /// loop runs serially).
    fn parallel_pragma(&self, num_threads: usize) -> Option<String> {
        Some(format!(
            "#pragma omp parallel for num_threads({num_threads}) schedule(static)"
        ))
    }

    /// The index of the calling thread along `axis` (`None`: not a GPU language).
    fn thread_index(&self, axis: ThreadAxis) -> Option<String> {
        let _ = axis;
        None
    }

    /// The barrier for memory of `scope` (`None`: the language has none).
    fn storage_sync(&self, scope: StorageScope) -> Option<String> {
        let _ = scope;
        None
    }

    /// How an allocation of `n` elements of the C type `elem` in `scope` is declared
    /// (`Err`: it cannot be, with the reason).
    fn allocation(
        &self,
        scope: StorageScope,
        elem: &str,
        name: &str,
        n: i64,
        bytes: usize,
    ) -> Result<AllocDecl, Refusal> {
        let _ = scope;
        if bytes <= super::STACK_LIMIT {
            Ok(AllocDecl::Here(format!(
                "{elem} {name}[{n}] __attribute__((aligned(64)));"
            )))
        } else {
            Ok(AllocDecl::Heap)
        }
    }

    /// Code that replaces the shared-memory tree of a cross-thread reduction (`buf`: the
    /// C name of its buffer, whose element 0 must hold the result when the code ends,
    /// reached by every thread of the block), or `None` to print the tree. CUDA's warp
    /// shuffles plug in here. `launch`: the kernel's launch extents.
    fn allreduce(
        &self,
        info: &AllreduceInfo,
        buf: &str,
        launch: Option<&ThreadExtents>,
    ) -> Option<Vec<String>> {
        let _ = (info, buf, launch);
        None
    }

    /// Which vectorized loops become vector code.
    fn vector_code(&self) -> VectorCode {
        VectorCode::Full
    }

    /// The floor modulo of two floats `x`, `y` of type `t` as one expression, or `None`
    /// for the default (a statement expression, which evaluates each operand once).
    fn float_floormod(&self, x: &str, y: &str, t: DataType) -> Option<String> {
        let _ = (x, y, t);
        None
    }

    /// `min(x, c)` (`max` where `min` is false) of float vectors of type `t`, `c` a
    /// constant that is not NaN, as one expression — or `None` for the printer's compare
    /// and blend. With such a `c` the IR's rule (a NaN operand loses) is "the second
    /// operand where either is NaN", x86's `vminps`/`vmaxps`: a quantizing epilogue's
    /// clip to [0, 255] in two instructions instead of eight.
    fn min_max_by_constant(
        &self,
        min: bool,
        t: DataType,
        lanes: u16,
        x: &str,
        c: &str,
    ) -> Option<String> {
        let _ = (min, t, lanes, x, c);
        None
    }

    /// The int32 vector `code` (of `lanes` lanes) truncated to the narrower integer type
    /// `to` (each lane's low bytes) as one expression, or `None` for the language's
    /// conversion. The printer registers `to`'s vector math helpers when it uses this.
    fn narrow_int32(&self, code: &str, to: DataType, lanes: u16) -> Option<String> {
        let _ = (code, to, lanes);
        None
    }

    /// The vector `code` of `lanes` lanes of the narrower integer type `from` widened to
    /// int32 (zero- or sign-extended as C converts) as one expression, or `None` for the
    /// language's conversion. The printer registers `from`'s vector math helpers when it
    /// uses this.
    fn widen_to_int32(&self, code: &str, from: DataType, lanes: u16) -> Option<String> {
        let _ = (code, from, lanes);
        None
    }

    /// `op` on the vectors `args` (of `lanes` lanes of `t`) as one expression of the
    /// language, or `None` to apply the scalar function lane by lane.
    fn vector_math(
        &self,
        op: Intrinsic,
        t: DataType,
        lanes: u16,
        args: &[String],
    ) -> Option<String> {
        let _ = (op, t, lanes, args);
        None
    }

    /// The definitions [`Dialect::vector_math`]'s expressions on vectors of `lanes` lanes
    /// of `t` call, printed once after the vector typedefs of a source that uses them.
    fn vector_math_helpers(&self, t: DataType, lanes: u16) -> String {
        let _ = (t, lanes);
        String::new()
    }

    /// The declaration of a parameter: a pointer to elements of the C type `elem`.
    fn param(&self, elem: &str, name: &str) -> String {
        format!("{elem}* __restrict__ {name}")
    }
}

/// The GCC/Clang vector type `v_<t>x<lanes>` of `lanes` lanes of `elem` (the C type of
/// `t`), and its unaligned variant `…_u`.
fn gcc_vector_typedef(elem: &str, t: DataType, lanes: u16) -> String {
    let bytes = t.bytes() * lanes as usize;
    let name = vec_name(t, lanes);
    format!(
        "typedef {elem} {name} __attribute__((vector_size({bytes})));\n\
         typedef {elem} {name}_u __attribute__((vector_size({bytes}), aligned({})));\n",
        t.bytes()
    )
}

/// Which vectorized loops a dialect prints as vector code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VectorCode {
    /// Every loop the vectorizer takes, with GCC/Clang vector types and statement
    /// expressions (C, OpenCL C).
    Full,
    /// Only aligned copies of 2 or 4 32-bit elements ([`super::copies`]), as one load
    /// and one store of the language's own vector type; the other vectorized loops stay
    /// loops (CUDA C: NVRTC has none of the extensions `Full` needs).
    AlignedCopies,
    /// None: vectorized loops stay loops.
    None,
}

/// The host C of the CPU backend.
pub struct CDialect;

impl Dialect for CDialect {
    fn backend(&self) -> &str {
        "cpu"
    }

    /// A serial loop around a register tile stays a loop: GCC unrolls a short one
    /// completely (ResNet's stem reduces over 3 channels), multiplying the tile's live
    /// registers, and spilled two accumulators of the stem's 7 × 2 tile (the fused stem
    /// kernel 1.80–1.94 ms kept a loop against 2.51–4.07 unrolled on an AVX2 EPYC,
    /// BENCHMARKS.md, issue 24's third part).
    fn serial_pragma(&self) -> Option<String> {
        Some("#pragma GCC unroll 1".into())
    }

    /// Float32 vector math as polynomials on whole registers ([`super::vmath`]); the
    /// int8 dot product on int32 words ([`super::vdot`]); words read in place
    /// ([`super::words`]).
    fn vector_math_helpers(&self, t: DataType, lanes: u16) -> String {
        if t == DataType::float32() {
            super::vmath::float32_helpers(lanes)
        } else if t == DataType::int32() {
            super::vdot::int32_helpers(lanes)
        } else if t == DataType::uint(32) {
            super::words::c_helpers(lanes)
        } else if t.is_integer() && t.bits < 32 {
            small_int_helpers(t, lanes)
        } else {
            String::new()
        }
    }

    /// The float32 vector math's `tsr_vmin`/`tsr_vmax` ([`super::vmath`]): one
    /// instruction where the target has it.
    fn min_max_by_constant(
        &self,
        min: bool,
        t: DataType,
        lanes: u16,
        x: &str,
        c: &str,
    ) -> Option<String> {
        let f = if min { "min" } else { "max" };
        (t == DataType::float32()).then(|| format!("tsr_v{f}_{}({x}, {c})", vec_name(t, lanes)))
    }

    /// A `memcpy` of the bytes into the word ([`super::words`]).
    fn byte_words(&self, buf: &str, offset: &str, lanes: u16) -> Option<String> {
        Some(super::words::c_call(buf, offset, lanes))
    }

    /// A byte shuffle (GCC 12 and Clang): GCC converts `int32 → int8` vectors lane by
    /// lane, a quantizing epilogue's last step.
    fn narrow_int32(&self, code: &str, to: DataType, lanes: u16) -> Option<String> {
        Some(format!(
            "tsr_narrow_{}({code})",
            super::names::vec_name(to, lanes)
        ))
    }

    /// A byte shuffle too: GCC 12 converts `int8 → int32` vectors lane by lane (an
    /// extract and an insert per lane), the dequantization of a QDQ epilogue's operands.
    fn widen_to_int32(&self, code: &str, from: DataType, lanes: u16) -> Option<String> {
        Some(format!(
            "tsr_widen_{}({code})",
            super::names::vec_name(from, lanes)
        ))
    }

    fn vector_math(
        &self,
        op: Intrinsic,
        t: DataType,
        lanes: u16,
        args: &[String],
    ) -> Option<String> {
        super::vmath::call(op, t, lanes, args).or_else(|| super::vdot::call(op, t, lanes, args))
    }
}

/// Where the C compiler has `__builtin_shufflevector` of the form the byte helpers use
/// (GCC 12, Clang) on a little-endian machine.
const SHUFFLES: &str = "((defined(__GNUC__) && __GNUC__ >= 12) || defined(__clang__)) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__";

/// `tsr_narrow_<vector of t>(int32 vector)`: each lane's low bytes, as C's conversion
/// keeps them — by `__builtin_shufflevector` of the bytes where the compiler has it
/// (GCC 12, Clang) on a little-endian machine, else `__builtin_convertvector`; and
/// `tsr_widen_<vector of t>(vector of t)`, the int32 lanes C's conversion gives — each
/// narrow lane shuffled into the low bytes of an int32 lane beside zeros (unsigned), or
/// into its high bytes and shifted down arithmetically (signed).
fn small_int_helpers(t: DataType, lanes: u16) -> String {
    let mut out = narrow_helper(t, lanes);
    out.push_str(&widen_helper(t, lanes));
    out
}

/// `tsr_widen_<vector of t>` (see [`small_int_helpers`]): one extension instruction
/// where the target has it ([`widen_instruction`]), else the shuffle, else C's
/// conversion.
fn widen_helper(t: DataType, lanes: u16) -> String {
    use super::names::vec_name;
    let v = vec_name(t, lanes);
    let w = vec_name(DataType::int32(), lanes);
    let bits = t.bits.max(8) as usize;
    let ratio = 32 / bits;
    // index `lanes` picks the zero vector's first element
    let picks: Vec<String> = (0..lanes as usize * ratio)
        .map(|k| {
            let (lane, part) = (k / ratio, k % ratio);
            let at = if t.is_int() { ratio - 1 } else { 0 };
            if part == at { lane } else { lanes as usize }.to_string()
        })
        .collect();
    let shift = if t.is_int() {
        format!(" >> {}", 32 - bits)
    } else {
        String::new()
    };
    let shuffles = SHUFFLES;
    let mut out = String::new();
    let first = match widen_instruction(lanes, bits, t.is_int()) {
        Some((guard, f)) => {
            let guard = format!("defined(__x86_64__) && {guard}");
            out.push_str(&format!("#if {guard}\n#include <immintrin.h>\n#endif\n"));
            format!("#if {guard}\n  return ({w}){f};\n#elif {shuffles}")
        }
        None => format!("#if {shuffles}"),
    };
    out.push_str(&format!(
        r#"static inline {w} tsr_widen_{v}({v} x) {{
{first}
  {v} zero = {{0}};
  return (({w})__builtin_shufflevector(x, zero, {picks})){shift};
#else
  return __builtin_convertvector(x, {w});
#endif
}}
"#,
        picks = picks.join(", ")
    ));
    out
}

/// The x86 instruction that extends `lanes` lanes of `bits` bits (`signed`) to int32 in
/// one step (`vpmovzxbd` and its kin), as `(the macro that guards it, the call on the
/// helper's argument x)`: AVX2's for 8 lanes, AVX-512's for 16. Without it GCC 12
/// widens a 16-lane byte vector by a two-table byte permutation (`vpermt2b`), and one
/// loaded under a condition (a padded depthwise convolution's taps) byte by byte — 24
/// scalar loads and inserts a vector, MobileNet-v2's int8 depthwise layers at 2–3× their
/// time on an AVX-512 Zen 4.
fn widen_instruction(lanes: u16, bits: usize, signed: bool) -> Option<(&'static str, String)> {
    let sign = if signed { "i" } else { "u" };
    let (avx2, avx512) = ("defined(__AVX2__)", "defined(__AVX512F__)");
    let load64 = "_mm_loadl_epi64((const __m128i*)&x)";
    let load128 = "_mm_loadu_si128((const __m128i*)&x)";
    let load256 = "_mm256_loadu_si256((const __m256i*)&x)";
    let (guard, prefix, load) = match (lanes, bits) {
        (8, 8) => (avx2, "_mm256", load64),
        (8, 16) => (avx2, "_mm256", load128),
        (16, 8) => (avx512, "_mm512", load128),
        (16, 16) => (avx512, "_mm512", load256),
        _ => return None,
    };
    Some((guard, format!("{prefix}_cvtep{sign}{bits}_epi32({load})")))
}

/// `tsr_narrow_<vector of t>` (see [`small_int_helpers`]).
fn narrow_helper(t: DataType, lanes: u16) -> String {
    use super::names::{scalar_c, vec_name};
    let v = vec_name(t, lanes);
    let w = vec_name(DataType::int32(), lanes);
    let ratio = (32 / t.bits.max(8)) as usize;
    let parts = lanes as usize * ratio;
    let c = scalar_c(t);
    let picks: Vec<String> = (0..lanes as usize)
        .map(|i| (i * ratio).to_string())
        .collect();
    format!(
        r#"static inline {v} tsr_narrow_{v}({w} x) {{
#if {shuffles}
  typedef {c} parts_t __attribute__((vector_size({bytes})));
  parts_t p = (parts_t)x;
  return __builtin_shufflevector(p, p, {picks});
#else
  return __builtin_convertvector(x, {v});
#endif
}}
"#,
        bytes = parts * (t.bits.max(8) as usize / 8),
        picks = picks.join(", "),
        shuffles = SHUFFLES,
    )
}
