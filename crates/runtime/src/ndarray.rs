//! [`NDArray`]: a dense, row-major, 64-byte-aligned host array of one scalar type.

use crate::error::{CompareError, NpyError, RuntimeError};
use std::alloc::{self, Layout};
use std::ffi::c_void;
use std::fmt;
use std::path::Path;
use std::ptr::NonNull;
use tessera_ir::interp::{HostBuffer, Scalar};
use tessera_ir::{DataType, TypeCode};

/// Alignment of every array's data, in bytes (TVM's `kAllocAlignment`).
pub const ALIGNMENT: usize = 64;

/// Stands in for the data pointer of an empty array: dangling but 64-byte aligned.
#[repr(C, align(64))]
struct Aligned64([u8; 64]);

mod sealed {
    pub trait Sealed {}
}

/// A Rust element type an [`NDArray`] can be viewed as (see [`NDArray::as_slice`]).
///
/// Implemented for `bool`, `i8`..`i64`, `u8`..`u64`, `half::f16`, `f32` and `f64`;
/// sealed, since the runtime relies on `DTYPE` describing the type's memory exactly.
pub trait Element: sealed::Sealed + Copy + Send + Sync + 'static {
    /// The scalar data type whose storage is this type.
    const DTYPE: DataType;
    /// The Rust name, for error messages.
    const NAME: &'static str;
    /// `v` converted to this type: floats rounded, integers truncated toward zero
    /// (saturating at the 64-bit range, NaN to 0) then wrapped to the width, bools `v != 0`.
    fn from_f64(v: f64) -> Self;
    /// The value as `f64` (64-bit integers beyond 2^53 are rounded).
    fn to_f64(self) -> f64;
    /// The value converted from an interpreter scalar (like the interpreter's `cast`).
    fn from_scalar(s: Scalar) -> Self;
    /// The value as an interpreter scalar (`u64` above `i64::MAX` wraps negative).
    fn to_scalar(self) -> Scalar;
}

macro_rules! int_element {
    ($($t:ty => $dt:expr),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DataType = $dt;
            const NAME: &'static str = stringify!($t);
            fn from_f64(v: f64) -> Self {
                // Through i64 like the interpreter: saturate, then wrap to the width.
                (v as i64) as $t
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_scalar(s: Scalar) -> Self {
                s.as_i64() as $t
            }
            fn to_scalar(self) -> Scalar {
                Scalar::I(self as i64)
            }
        }
    )*};
}

int_element! {
    i8 => DataType::int(8),
    i16 => DataType::int(16),
    i32 => DataType::int(32),
    i64 => DataType::int(64),
    u8 => DataType::uint(8),
    u16 => DataType::uint(16),
    u32 => DataType::uint(32),
}

impl sealed::Sealed for u64 {}
impl Element for u64 {
    const DTYPE: DataType = DataType::uint(64);
    const NAME: &'static str = "u64";
    fn from_f64(v: f64) -> Self {
        if v >= 9_223_372_036_854_775_808.0 {
            v as u64
        } else {
            (v as i64) as u64
        }
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::F(v) => Self::from_f64(v),
            Scalar::I(v) => v as u64,
        }
    }
    fn to_scalar(self) -> Scalar {
        Scalar::I(self as i64)
    }
}

impl sealed::Sealed for f32 {}
impl Element for f32 {
    const DTYPE: DataType = DataType::float(32);
    const NAME: &'static str = "f32";
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_scalar(s: Scalar) -> Self {
        s.as_f64() as f32
    }
    fn to_scalar(self) -> Scalar {
        Scalar::F(self as f64)
    }
}

impl sealed::Sealed for f64 {}
impl Element for f64 {
    const DTYPE: DataType = DataType::float(64);
    const NAME: &'static str = "f64";
    fn from_f64(v: f64) -> Self {
        v
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn from_scalar(s: Scalar) -> Self {
        s.as_f64()
    }
    fn to_scalar(self) -> Scalar {
        Scalar::F(self)
    }
}

impl sealed::Sealed for half::f16 {}
impl Element for half::f16 {
    const DTYPE: DataType = DataType::float(16);
    const NAME: &'static str = "f16";
    fn from_f64(v: f64) -> Self {
        half::f16::from_f64(v)
    }
    fn to_f64(self) -> f64 {
        half::f16::to_f64(self)
    }
    fn from_scalar(s: Scalar) -> Self {
        half::f16::from_f64(s.as_f64())
    }
    fn to_scalar(self) -> Scalar {
        Scalar::F(half::f16::to_f64(self))
    }
}

impl sealed::Sealed for bool {}
impl Element for bool {
    const DTYPE: DataType = DataType::bool();
    const NAME: &'static str = "bool";
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    fn from_scalar(s: Scalar) -> Self {
        s.as_f64() != 0.0
    }
    fn to_scalar(self) -> Scalar {
        Scalar::I(self as i64)
    }
}

/// The storage of a supported scalar data type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Bool,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F16,
    F32,
    F64,
}

impl Kind {
    pub(crate) fn of(dtype: DataType) -> Option<Kind> {
        if dtype.lanes != 1 {
            return None;
        }
        Some(match (dtype.code, dtype.bits) {
            (TypeCode::Bool, 1) => Kind::Bool,
            (TypeCode::Int, 8) => Kind::I8,
            (TypeCode::Int, 16) => Kind::I16,
            (TypeCode::Int, 32) => Kind::I32,
            (TypeCode::Int, 64) => Kind::I64,
            (TypeCode::UInt, 8) => Kind::U8,
            (TypeCode::UInt, 16) => Kind::U16,
            (TypeCode::UInt, 32) => Kind::U32,
            (TypeCode::UInt, 64) => Kind::U64,
            (TypeCode::Float, 16) => Kind::F16,
            (TypeCode::Float, 32) => Kind::F32,
            (TypeCode::Float, 64) => Kind::F64,
            _ => return None,
        })
    }
}

/// Runs `$body` with `$T` the element type of `$kind`; bool arrays are handled as `u8`
/// (their bytes are only ever read as bytes internally, so a stray byte written by a
/// kernel cannot become an invalid `bool`), so `$body` must special-case `$is_bool`.
macro_rules! with_kind {
    ($kind:expr, $T:ident, $is_bool:ident => $body:expr) => {
        match $kind {
            Kind::Bool => {
                type $T = u8;
                let $is_bool = true;
                $body
            }
            Kind::I8 => with_kind!(@ i8, $T, $is_bool, $body),
            Kind::I16 => with_kind!(@ i16, $T, $is_bool, $body),
            Kind::I32 => with_kind!(@ i32, $T, $is_bool, $body),
            Kind::I64 => with_kind!(@ i64, $T, $is_bool, $body),
            Kind::U8 => with_kind!(@ u8, $T, $is_bool, $body),
            Kind::U16 => with_kind!(@ u16, $T, $is_bool, $body),
            Kind::U32 => with_kind!(@ u32, $T, $is_bool, $body),
            Kind::U64 => with_kind!(@ u64, $T, $is_bool, $body),
            Kind::F16 => with_kind!(@ half::f16, $T, $is_bool, $body),
            Kind::F32 => with_kind!(@ f32, $T, $is_bool, $body),
            Kind::F64 => with_kind!(@ f64, $T, $is_bool, $body),
        }
    };
    (@ $t:ty, $T:ident, $is_bool:ident, $body:expr) => {{
        type $T = $t;
        let $is_bool = false;
        $body
    }};
}

/// A dense, row-major host array of one scalar data type.
///
/// The data is 64-byte aligned (also for empty arrays, whose pointer is dangling but
/// aligned and never dereferenced), zero-initialized on creation, owned by the array and
/// freed on drop. `Clone` copies the data. Equality (`==`) is bitwise: same dtype, shape
/// and bytes.
pub struct NDArray {
    dtype: DataType,
    kind: Kind,
    shape: Vec<usize>,
    len: usize,
    nbytes: usize,
    data: NonNull<u8>,
    /// How far `data` is past the start of its allocation ([`allocation`]).
    offset: usize,
}

/// The layout of the allocation behind an array of `nbytes` bytes: `ALIGNMENT` bytes
/// more at the allocator's own alignment, `data` the first 64-byte aligned address in
/// it. At that alignment `alloc_zeroed` is glibc's `calloc`, which maps large arrays as
/// fresh zero pages instead of writing them: a large array costs nothing until touched
/// (at 64 the allocator's `aligned_alloc` and a `memset` would write every page).
fn allocation(nbytes: usize) -> Option<Layout> {
    Layout::from_size_align(nbytes.checked_add(ALIGNMENT)?, 16).ok()
}

// SAFETY: the array owns its allocation exclusively; shared access only reads it and
// mutation needs `&mut self`.
unsafe impl Send for NDArray {}
// SAFETY: as above.
unsafe impl Sync for NDArray {}

/// Allocations from this size on are checked against the memory the system has
/// available before they are made.
const CHECKED_ALLOCATION: usize = 256 << 20;

/// The memory the system can give without swapping (`MemAvailable` of
/// `/proc/meminfo`), where it tells it.
fn available_memory() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

impl NDArray {
    /// The bytes an array of `dtype` and `shape` holds, or why it cannot exist (a dtype
    /// arrays do not store, a size that overflows). Device arrays follow the same rules.
    pub fn byte_size(dtype: DataType, shape: &[usize]) -> Result<usize, RuntimeError> {
        Kind::of(dtype).ok_or(RuntimeError::UnsupportedDtype(dtype))?;
        let too_large = || RuntimeError::TooLarge {
            dtype,
            shape: shape.to_vec(),
        };
        shape
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .and_then(|len| len.checked_mul(dtype.bytes()))
            .filter(|&n| n <= isize::MAX as usize)
            .ok_or_else(too_large)
    }

    /// An array of zeros.
    pub fn zeros(dtype: DataType, shape: &[usize]) -> Result<NDArray, RuntimeError> {
        let kind = Kind::of(dtype).ok_or(RuntimeError::UnsupportedDtype(dtype))?;
        let too_large = || RuntimeError::TooLarge {
            dtype,
            shape: shape.to_vec(),
        };
        let nbytes = Self::byte_size(dtype, shape)?;
        // `byte_size` checked that the product does not overflow.
        let len: usize = shape.iter().product();
        let (data, offset) = if nbytes == 0 {
            (NonNull::<Aligned64>::dangling().cast::<u8>(), 0)
        } else {
            let layout = allocation(nbytes).ok_or_else(too_large)?;
            let oom = |reason: String| RuntimeError::OutOfMemory {
                dtype,
                shape: shape.to_vec(),
                bytes: nbytes,
                reason,
            };
            // past the available memory an allocation may still succeed (overcommit)
            // and the process be killed when it touches the pages: refuse it here
            if nbytes >= CHECKED_ALLOCATION {
                if let Some(free) = available_memory().filter(|&f| nbytes > f) {
                    return Err(oom(format!("only {free} bytes of memory are available")));
                }
            }
            // SAFETY: the layout has a non-zero size.
            let base = unsafe { alloc::alloc_zeroed(layout) };
            if base.is_null() {
                return Err(oom("the allocator refused it".into()));
            }
            let offset = base.align_offset(ALIGNMENT);
            // SAFETY: the allocation has ALIGNMENT bytes more than the array needs, and
            // `offset < ALIGNMENT`.
            let data = unsafe { base.add(offset) };
            (
                NonNull::new(data).expect("inside a live allocation"),
                offset,
            )
        };
        Ok(NDArray {
            dtype,
            kind,
            shape: shape.to_vec(),
            len,
            nbytes,
            data,
            offset,
        })
    }

    /// An array holding `values` (row-major), of `T`'s data type.
    pub fn from_slice<T: Element>(shape: &[usize], values: &[T]) -> Result<NDArray, RuntimeError> {
        let mut a = NDArray::zeros(T::DTYPE, shape)?;
        a.check_count(values.len())?;
        a.as_mut_slice::<T>()?.copy_from_slice(values);
        Ok(a)
    }

    /// A float32 array holding `values` (row-major).
    pub fn from_slice_f32(shape: &[usize], values: &[f32]) -> Result<NDArray, RuntimeError> {
        NDArray::from_slice(shape, values)
    }

    /// An array of `dtype` holding `values` converted to the type (see
    /// [`Element::from_f64`]: floats rounded, integers truncated then wrapped, bools
    /// `v != 0`).
    pub fn from_f64(
        dtype: DataType,
        shape: &[usize],
        values: &[f64],
    ) -> Result<NDArray, RuntimeError> {
        let mut a = NDArray::zeros(dtype, shape)?;
        a.check_count(values.len())?;
        with_kind!(a.kind, T, is_bool => {
            // SAFETY: `T` is the storage type of `a.kind`.
            let dst = unsafe { a.raw_slice_mut::<T>() };
            for (d, &v) in dst.iter_mut().zip(values) {
                *d = if is_bool { bool_byte::<T>(v != 0.0) } else { <T as Element>::from_f64(v) };
            }
        });
        Ok(a)
    }

    /// The values as `f64` (bools as 0/1, any non-zero byte counting as 1).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        with_kind!(self.kind, T, is_bool => {
            // SAFETY: `T` is the storage type of `self.kind`.
            let src = unsafe { self.raw_slice::<T>() };
            if is_bool {
                src.iter().map(|&b| (<T as Element>::to_f64(b) != 0.0) as u8 as f64).collect()
            } else {
                src.iter().map(|&v| <T as Element>::to_f64(v)).collect()
            }
        })
    }

    /// An array of `dtype` with values drawn uniformly from `[lo, hi)` (splitmix64), the
    /// same for the same seed on every platform. Rounding to float16/float32 may give
    /// `hi` itself. For integer and bool types each value is `floor(lo + u * (hi - lo))`
    /// converted like [`from_f64`](Self::from_f64), so `(0.0, 2.0)` gives 0s and 1s.
    pub fn random_uniform(
        dtype: DataType,
        shape: &[usize],
        seed: u64,
        lo: f64,
        hi: f64,
    ) -> Result<NDArray, RuntimeError> {
        let mut a = NDArray::zeros(dtype, shape)?;
        let mut rng = SplitMix64(seed);
        let float = dtype.is_float();
        let mut draw = || {
            let v = lo + rng.next_f64() * (hi - lo);
            if float {
                v
            } else {
                v.floor()
            }
        };
        with_kind!(a.kind, T, is_bool => {
            // SAFETY: `T` is the storage type of `a.kind`.
            let dst = unsafe { a.raw_slice_mut::<T>() };
            for d in dst.iter_mut() {
                let v = draw();
                *d = if is_bool { bool_byte::<T>(v != 0.0) } else { <T as Element>::from_f64(v) };
            }
        });
        Ok(a)
    }

    pub fn dtype(&self) -> DataType {
        self.dtype
    }
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }
    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The size of the data in bytes.
    pub fn nbytes(&self) -> usize {
        self.nbytes
    }

    /// The data pointer (64-byte aligned; dangling for an empty array).
    pub fn as_ptr(&self) -> *const c_void {
        self.data.as_ptr() as *const c_void
    }
    /// The data pointer, for writing (64-byte aligned; dangling for an empty array).
    pub fn as_mut_ptr(&mut self) -> *mut c_void {
        self.data.as_ptr() as *mut c_void
    }

    /// The raw bytes of the data.
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: `data` is valid (or dangling and aligned for 0) for `nbytes` bytes,
        // all initialized.
        unsafe { std::slice::from_raw_parts(self.data.as_ptr(), self.nbytes) }
    }
    /// The raw bytes of the data, for writing. Writing a byte other than 0/1 into a bool
    /// array makes [`as_slice::<bool>`](Self::as_slice) refuse it (nothing unsound).
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_bytes`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.data.as_ptr(), self.nbytes) }
    }

    /// The data as `[T]`; `T` must be the array's element type.
    pub fn as_slice<T: Element>(&self) -> Result<&[T], RuntimeError> {
        self.check_element::<T>()?;
        // SAFETY: `T` is the storage type (checked), and bool bytes are 0/1 (checked).
        Ok(unsafe { self.raw_slice::<T>() })
    }

    /// The data as `[T]`, for writing; `T` must be the array's element type.
    pub fn as_mut_slice<T: Element>(&mut self) -> Result<&mut [T], RuntimeError> {
        self.check_element::<T>()?;
        // SAFETY: as in `as_slice`.
        Ok(unsafe { self.raw_slice_mut::<T>() })
    }

    fn check_element<T: Element>(&self) -> Result<(), RuntimeError> {
        if T::DTYPE != self.dtype {
            return Err(RuntimeError::ElementType {
                dtype: self.dtype,
                requested: T::NAME,
            });
        }
        if self.kind == Kind::Bool {
            if let Some((index, &byte)) = self.as_bytes().iter().enumerate().find(|(_, b)| **b > 1)
            {
                return Err(RuntimeError::InvalidBool { index, byte });
            }
        }
        Ok(())
    }

    fn check_count(&self, got: usize) -> Result<(), RuntimeError> {
        if got != self.len {
            return Err(RuntimeError::ValueCount {
                shape: self.shape.clone(),
                expected: self.len,
                got,
            });
        }
        Ok(())
    }

    /// # Safety
    /// `T` must have the size and alignment of the array's elements and be valid for
    /// every stored bit pattern.
    unsafe fn raw_slice<T>(&self) -> &[T] {
        std::slice::from_raw_parts(self.data.as_ptr() as *const T, self.len)
    }
    /// # Safety
    /// As for `raw_slice`.
    unsafe fn raw_slice_mut<T>(&mut self) -> &mut [T] {
        std::slice::from_raw_parts_mut(self.data.as_ptr() as *mut T, self.len)
    }

    /// The largest finite magnitude of the elements (as `f64`; 0 for none).
    pub fn max_abs(&self) -> f64 {
        self.to_f64_vec()
            .into_iter()
            .filter(|x| x.is_finite())
            .fold(0.0, |m, x| m.max(x.abs()))
    }

    /// Checks that `self` (actual) is close to `expected` elementwise like
    /// `numpy.testing.assert_allclose`: `|a - e| <= atol + rtol * |e|`, equal infinities
    /// match, and NaN matches NaN only (its `equal_nan`, as TVM's checks compare: a
    /// task whose seeded inputs leave the domain of a `sqrt` gives NaN in the reference
    /// and in every correct schedule alike). Values are compared as `f64`.
    pub fn allclose(&self, expected: &NDArray, rtol: f64, atol: f64) -> Result<(), CompareError> {
        if self.dtype != expected.dtype {
            return Err(CompareError::Dtype {
                actual: self.dtype,
                expected: expected.dtype,
            });
        }
        if self.shape != expected.shape {
            return Err(CompareError::Shape {
                actual: self.shape.clone(),
                expected: expected.shape.clone(),
            });
        }
        let a = self.to_f64_vec();
        let e = expected.to_f64_vec();
        let mut mismatches = 0;
        let mut first = None;
        let mut max_abs_err = 0.0f64;
        for (i, (&x, &y)) in a.iter().zip(&e).enumerate() {
            // Like `numpy.isclose`: infinities only match themselves.
            let close = x == y
                || (x.is_nan() && y.is_nan())
                || (x.is_finite() && y.is_finite() && (x - y).abs() <= atol + rtol * y.abs());
            if x != y {
                let d = (x - y).abs();
                if !d.is_nan() {
                    max_abs_err = max_abs_err.max(d);
                }
            }
            if !close {
                mismatches += 1;
                first.get_or_insert((i, x, y));
            }
        }
        match first {
            None => Ok(()),
            Some((first_index, first_actual, first_expected)) => Err(CompareError::Values {
                mismatches,
                total: a.len(),
                first_index,
                first_actual,
                first_expected,
                max_abs_err,
                rtol,
                atol,
            }),
        }
    }

    /// The array as an interpreter buffer (floats exact, integers as `i64`; `u64` values
    /// above `i64::MAX` wrap negative, as the interpreter's scalars cannot hold them).
    pub fn to_host_buffer(&self) -> HostBuffer {
        let data = with_kind!(self.kind, T, is_bool => {
            // SAFETY: `T` is the storage type of `self.kind`.
            let src = unsafe { self.raw_slice::<T>() };
            if is_bool {
                src.iter().map(|&b| Scalar::I((<T as Element>::to_f64(b) != 0.0) as i64)).collect()
            } else {
                src.iter().map(|&v| <T as Element>::to_scalar(v)).collect()
            }
        });
        HostBuffer {
            dtype: self.dtype,
            shape: self.shape.clone(),
            data,
        }
    }

    /// An array holding an interpreter buffer's values, converted to its type like the
    /// interpreter's `Scalar::cast`.
    pub fn from_host_buffer(buf: &HostBuffer) -> Result<NDArray, RuntimeError> {
        let mut a = NDArray::zeros(buf.dtype, &buf.shape)?;
        if buf.data.len() != a.len {
            return Err(RuntimeError::HostBufferSize {
                shape: buf.shape.clone(),
                expected: a.len,
                got: buf.data.len(),
            });
        }
        with_kind!(a.kind, T, is_bool => {
            // SAFETY: `T` is the storage type of `a.kind`.
            let dst = unsafe { a.raw_slice_mut::<T>() };
            for (d, &s) in dst.iter_mut().zip(&buf.data) {
                *d = if is_bool { bool_byte::<T>(s.as_f64() != 0.0) } else { <T as Element>::from_scalar(s) };
            }
        });
        Ok(a)
    }

    /// The array in the NumPy `.npy` format (version 1.0, little-endian, C order).
    pub fn to_npy_bytes(&self) -> Vec<u8> {
        crate::npy::encode(self)
    }

    /// Reads an array from `.npy` bytes (versions 1.0–3.0, either byte order, C order).
    pub fn from_npy_bytes(bytes: &[u8]) -> Result<NDArray, NpyError> {
        crate::npy::decode(bytes)
    }

    /// Writes the array to `path` as a `.npy` file.
    pub fn save_npy(&self, path: impl AsRef<Path>) -> Result<(), RuntimeError> {
        let path = path.as_ref();
        std::fs::write(path, self.to_npy_bytes()).map_err(|e| RuntimeError::Npy {
            path: path.to_path_buf(),
            source: NpyError::Io(e),
        })
    }

    /// Writes `arrays` to `path` as a `.npz` file (NumPy's `np.savez`: a zip archive of
    /// one `NAME.npy` per array, stored uncompressed). Written under a temporary name
    /// and renamed, so that an interrupted write leaves no half file.
    pub fn save_npz(
        path: impl AsRef<Path>,
        arrays: &[(&str, &NDArray)],
    ) -> Result<(), RuntimeError> {
        use std::io::Write;
        let path = path.as_ref();
        let err = |e: std::io::Error| RuntimeError::Npy {
            path: path.to_path_buf(),
            source: NpyError::Io(e),
        };
        let zip_err = |e: zip::result::ZipError| err(std::io::Error::other(e));
        let tmp = path.with_extension(format!("npz.tmp{}", std::process::id()));
        let file = std::fs::File::create(&tmp).map_err(err)?;
        let mut zip = zip::ZipWriter::new(file);
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            .large_file(true);
        let written = (|| {
            for (name, a) in arrays {
                zip.start_file(format!("{name}.npy"), options)
                    .map_err(zip_err)?;
                zip.write_all(&a.to_npy_bytes()).map_err(err)?;
            }
            zip.finish().map_err(zip_err)?.sync_all().map_err(err)
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        std::fs::rename(&tmp, path).map_err(err)
    }

    /// Reads a `.npz` file (NumPy's `np.savez` or `np.savez_compressed`): its arrays by
    /// name (each member's name without `.npy`), in the archive's order.
    pub fn load_npz(path: impl AsRef<Path>) -> Result<Vec<(String, NDArray)>, RuntimeError> {
        use std::io::Read;
        let path = path.as_ref();
        let err = |source| RuntimeError::Npy {
            path: path.to_path_buf(),
            source,
        };
        let io = |e: std::io::Error| err(NpyError::Io(e));
        let zip_err = |e: zip::result::ZipError| io(std::io::Error::other(e));
        let file = std::fs::File::open(path).map_err(io)?;
        let mut zip = zip::ZipArchive::new(file).map_err(zip_err)?;
        let mut out = Vec::with_capacity(zip.len());
        for k in 0..zip.len() {
            let mut member = zip.by_index(k).map_err(zip_err)?;
            let name = member.name().map_err(zip_err)?;
            let name = name.trim_end_matches(".npy").to_string();
            let mut bytes = Vec::new();
            member.read_to_end(&mut bytes).map_err(io)?;
            out.push((name, NDArray::from_npy_bytes(&bytes).map_err(err)?));
        }
        Ok(out)
    }

    /// Reads a `.npy` file.
    pub fn load_npy(path: impl AsRef<Path>) -> Result<NDArray, RuntimeError> {
        let path = path.as_ref();
        let err = |source| RuntimeError::Npy {
            path: path.to_path_buf(),
            source,
        };
        let bytes = std::fs::read(path).map_err(|e| err(NpyError::Io(e)))?;
        NDArray::from_npy_bytes(&bytes).map_err(err)
    }

    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }
}

/// A bool stored as its byte (`T` is `u8` wherever this is called).
fn bool_byte<T: Element>(b: bool) -> T {
    T::from_f64(b as u8 as f64)
}

impl Drop for NDArray {
    fn drop(&mut self) {
        if self.nbytes != 0 {
            let layout = allocation(self.nbytes).expect("the layout `zeros` allocated");
            // SAFETY: allocated in `zeros` with this layout, `offset` bytes before `data`.
            unsafe { alloc::dealloc(self.data.as_ptr().sub(self.offset), layout) };
        }
    }
}

impl Clone for NDArray {
    fn clone(&self) -> Self {
        let mut a = NDArray::zeros(self.dtype, &self.shape)
            .expect("an existing array's dtype and shape are valid");
        a.as_bytes_mut().copy_from_slice(self.as_bytes());
        a
    }
}

impl PartialEq for NDArray {
    fn eq(&self, other: &Self) -> bool {
        self.dtype == other.dtype
            && self.shape == other.shape
            && self.as_bytes() == other.as_bytes()
    }
}

impl fmt::Debug for NDArray {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 16;
        let values = self.to_f64_vec();
        let mut s = f.debug_struct("NDArray");
        s.field("dtype", &format_args!("{}", self.dtype))
            .field("shape", &self.shape);
        if values.len() <= SHOWN {
            s.field("data", &values);
        } else {
            s.field(
                "data",
                &format_args!("{:?} .. ({} values)", &values[..SHOWN], values.len()),
            );
        }
        s.finish()
    }
}

impl From<&NDArray> for HostBuffer {
    fn from(a: &NDArray) -> HostBuffer {
        a.to_host_buffer()
    }
}

impl TryFrom<&HostBuffer> for NDArray {
    type Error = RuntimeError;
    fn try_from(b: &HostBuffer) -> Result<NDArray, RuntimeError> {
        NDArray::from_host_buffer(b)
    }
}

/// Sebastiano Vigna's splitmix64: tiny, seedable with any value, good enough for test data.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[0, 1)` with 53 random bits.
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}
