//! Names in generated C-family code: the C names of IR types, identifiers made legal
//! and kept away from the language's and the generator's own, vector type names, and
//! text made safe for a comment.

use tessera_ir::{DataType, TypeCode};

/// The C name of a scalar type (OpenCL sources define the `<stdint.h>` names).
pub fn scalar_c(t: DataType) -> &'static str {
    match (t.code, t.bits) {
        (TypeCode::Bool, _) => "bool",
        (TypeCode::Int, 8) => "int8_t",
        (TypeCode::Int, 16) => "int16_t",
        (TypeCode::Int, 32) => "int32_t",
        (TypeCode::Int, _) => "int64_t",
        (TypeCode::UInt, 8) => "uint8_t",
        (TypeCode::UInt, 16) => "uint16_t",
        (TypeCode::UInt, 32) => "uint32_t",
        (TypeCode::UInt, _) => "uint64_t",
        (TypeCode::Float, 16) => "_Float16",
        (TypeCode::Float, 32) => "float",
        (TypeCode::Float, _) => "double",
    }
}

pub(crate) fn suffix(t: DataType) -> String {
    t.element_of().to_string()
}

/// Identifiers a variable may not be named in C: the keywords, the identifiers the
/// generated code itself uses (types, functions, macros), the object-like macros of the
/// included headers (glibc's and GCC's predefined `linux`/`unix`), any of which would
/// change the meaning of a declaration. Names starting with `_` are reserved to the
/// implementation and `tsr_`/`v_` to the generator: the printer prefixes those.
#[rustfmt::skip]
pub(crate) const RESERVED: &[&str] = &[
    // C11 keywords (the `_X` ones start with `_` and are prefixed anyway) and GNU ones.
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "asm", "typeof",
    // <stdbool.h>, <stdint.h> types and what the entry point and allocations use.
    "bool", "true", "false", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t",
    "uint32_t", "uint64_t", "args", "num_args", "main", "free", "aligned_alloc", "abs",
    // The math functions the generated code calls.
    "exp", "expf", "log", "logf", "sqrt", "sqrtf", "tanh", "tanhf", "pow", "powf", "fabs",
    "fabsf", "erf", "erff", "floor", "floorf", "ceil", "ceilf", "round", "roundf", "fmod",
    "fmodf", "sin", "sinf", "cos", "cosf", "tan", "tanf", "asin", "asinf", "acos", "acosf", "atan",
    "atanf", "sinh", "sinhf", "cosh", "coshf", "asinh", "asinhf", "acosh", "acoshf", "atanh",
    "atanhf",
    // Object-like macros of <math.h>, <stdbool.h>, <stdint.h>, <stdlib.h> and the compiler.
    "linux", "unix", "errno", "math_errhandling", "NULL", "NAN", "INFINITY", "HUGE_VAL",
    "HUGE_VALF", "HUGE_VALL", "MATH_ERRNO", "MATH_ERREXCEPT", "FP_NAN", "FP_INFINITE",
    "FP_ZERO", "FP_SUBNORMAL", "FP_NORMAL", "FP_FAST_FMA", "FP_FAST_FMAF", "FP_ILOGB0",
    "FP_ILOGBNAN", "M_E", "M_LOG2E", "M_LOG10E", "M_LN2", "M_LN10", "M_PI", "M_PI_2", "M_PI_4",
    "M_1_PI", "M_2_PI", "M_2_SQRTPI", "M_SQRT2", "M_SQRT1_2", "EXIT_FAILURE", "EXIT_SUCCESS",
    "RAND_MAX", "MB_CUR_MAX", "BIG_ENDIAN", "LITTLE_ENDIAN", "PDP_ENDIAN", "BYTE_ORDER",
    "FD_SETSIZE", "NFDBITS", "WNOHANG", "WUNTRACED", "WSTOPPED", "WEXITED", "WCONTINUED",
    "WNOWAIT", "INT8_MIN", "INT16_MIN", "INT32_MIN", "INT64_MIN", "INT8_MAX", "INT16_MAX",
    "INT32_MAX", "INT64_MAX", "UINT8_MAX", "UINT16_MAX", "UINT32_MAX", "UINT64_MAX",
    "INT_LEAST8_MIN", "INT_LEAST16_MIN", "INT_LEAST32_MIN", "INT_LEAST64_MIN", "INT_LEAST8_MAX",
    "INT_LEAST16_MAX", "INT_LEAST32_MAX", "INT_LEAST64_MAX", "UINT_LEAST8_MAX",
    "UINT_LEAST16_MAX", "UINT_LEAST32_MAX", "UINT_LEAST64_MAX", "INT_FAST8_MIN",
    "INT_FAST16_MIN", "INT_FAST32_MIN", "INT_FAST64_MIN", "INT_FAST8_MAX", "INT_FAST16_MAX",
    "INT_FAST32_MAX", "INT_FAST64_MAX", "UINT_FAST8_MAX", "UINT_FAST16_MAX", "UINT_FAST32_MAX",
    "UINT_FAST64_MAX", "INTPTR_MIN", "INTPTR_MAX", "UINTPTR_MAX", "INTMAX_MIN", "INTMAX_MAX",
    "UINTMAX_MAX", "PTRDIFF_MIN", "PTRDIFF_MAX", "SIG_ATOMIC_MIN", "SIG_ATOMIC_MAX", "SIZE_MAX",
    "WCHAR_MIN", "WCHAR_MAX", "WINT_MIN", "WINT_MAX",
];

pub fn sanitize(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, 'v');
    }
    s
}

/// Text made safe for a `//` comment: a line break (or a backslash ending the line) would
/// let the rest of it escape into the code.
pub fn comment(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() || c == '\\' { ' ' } else { c })
        .collect()
}

pub fn vec_name(t: DataType, lanes: u16) -> String {
    format!("v_{}x{lanes}", suffix(t))
}

pub(crate) fn mask_elem(bits: u8) -> DataType {
    DataType::int(bits)
}

/// The scalar helper functions every C-family source defines: floor division and
/// modulo of integers, min/max (of floats ignoring a NaN operand, as the interpreter
/// does), for the integer types and the float types `floats` (C names: `_Float16`,
/// `float`, `double`), then those of `guarded` each inside `#ifdef <macro>` (OpenCL's
/// `double` under `cl_khr_fp64`).
pub fn scalar_helpers(floats: &[&str], guarded: &[(&str, &str)]) -> String {
    let mut out = String::from(
        r#"#define TSR_INT_HELPERS(T, N) \
  static inline T tsr_min_##N(T a, T b) { return a < b ? a : b; } \
  static inline T tsr_max_##N(T a, T b) { return a > b ? a : b; } \
  static inline T tsr_floordiv_##N(T a, T b) { T q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; } \
  static inline T tsr_floormod_##N(T a, T b) { T r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
TSR_INT_HELPERS(int8_t, int8)
TSR_INT_HELPERS(int16_t, int16)
TSR_INT_HELPERS(int32_t, int32)
TSR_INT_HELPERS(int64_t, int64)
TSR_INT_HELPERS(uint8_t, uint8)
TSR_INT_HELPERS(uint16_t, uint16)
TSR_INT_HELPERS(uint32_t, uint32)
TSR_INT_HELPERS(uint64_t, uint64)
#define TSR_FLOAT_HELPERS(T, N) \
  static inline T tsr_min_##N(T a, T b) { return (a < b || b != b) ? a : b; } \
  static inline T tsr_max_##N(T a, T b) { return (a > b || b != b) ? a : b; }
"#,
    );
    let suffix = |c: &str| match c {
        "_Float16" | "half" => "float16",
        "double" => "float64",
        _ => "float32",
    };
    for f in floats {
        out.push_str(&format!("TSR_FLOAT_HELPERS({f}, {})\n", suffix(f)));
    }
    for (f, guard) in guarded {
        out.push_str(&format!(
            "#ifdef {guard}\nTSR_FLOAT_HELPERS({f}, {})\n#endif\n",
            suffix(f)
        ));
    }
    out.push('\n');
    out
}
