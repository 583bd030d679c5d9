//! The runtime's typed errors.

use std::path::PathBuf;
use tessera_ir::DataType;

/// Why a runtime operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    // ---- arrays ----
    /// The data type is a vector type or has a width the runtime does not store.
    #[error("data type {0} is not supported by NDArray (scalar bool, int/uint 8-64, float 16/32/64 only)")]
    UnsupportedDtype(DataType),
    /// The array would need more than `isize::MAX` bytes.
    #[error("an array of shape {shape:?} and type {dtype} is too large")]
    TooLarge { dtype: DataType, shape: Vec<usize> },
    /// The machine cannot hold the array: larger than its physical memory, or refused by
    /// the allocator.
    #[error(
        "cannot allocate {bytes} bytes for an array of shape {shape:?} and type {dtype}: {reason}"
    )]
    OutOfMemory {
        dtype: DataType,
        shape: Vec<usize>,
        bytes: usize,
        reason: String,
    },
    /// A constructor got a number of values that does not fill the shape.
    #[error("{got} values given for shape {shape:?}, which holds {expected}")]
    ValueCount {
        shape: Vec<usize>,
        expected: usize,
        got: usize,
    },
    /// A typed view was asked for with an element type that is not the array's.
    #[error("the array holds {dtype}, not {requested}")]
    ElementType {
        dtype: DataType,
        requested: &'static str,
    },
    /// A bool array holds a byte other than 0 or 1 (written through a raw pointer),
    /// so it cannot be viewed as `[bool]`.
    #[error("bool array holds byte {byte:#04x} at index {index}, not 0 or 1")]
    InvalidBool { index: usize, byte: u8 },
    /// A `HostBuffer` whose data does not fill its shape.
    #[error("host buffer of shape {shape:?} holds {got} values, not {expected}")]
    HostBufferSize {
        shape: Vec<usize>,
        expected: usize,
        got: usize,
    },
    /// Reading or writing a `.npy` file failed.
    #[error("{}: {source}", path.display())]
    Npy {
        path: PathBuf,
        #[source]
        source: NpyError,
    },

    // ---- modules ----
    /// The artifact is for a device this runtime cannot run.
    #[error("artifact `{entry}` is for `{device}`; a host Module loads CPU artifacts only (load it on its device)")]
    UnsupportedDevice {
        entry: String,
        device: tessera_target::TargetKind,
    },
    /// The shared object could not be loaded.
    #[error("cannot load shared object {}: {source}", path.display())]
    Load {
        path: PathBuf,
        #[source]
        source: libloading::Error,
    },
    /// The shared object does not export the entry symbol.
    #[error("shared object {} has no symbol `{entry}`: {source}", path.display())]
    MissingSymbol {
        path: PathBuf,
        entry: String,
        #[source]
        source: libloading::Error,
    },
    /// A call got the wrong number of arrays.
    #[error("`{entry}` takes {expected} arrays, {got} were given")]
    ArgCount {
        entry: String,
        expected: usize,
        got: usize,
    },
    /// An array's data type is not its parameter's.
    #[error("argument {index} (`{name}`): expected dtype {expected}, got {got}")]
    ArgDtype {
        index: usize,
        name: String,
        expected: DataType,
        got: DataType,
    },
    /// An array's shape is not its parameter's.
    #[error("argument {index} (`{name}`): expected shape {expected:?}, got {got:?}")]
    ArgShape {
        index: usize,
        name: String,
        expected: Vec<i64>,
        got: Vec<usize>,
    },
    /// The same array (or two arrays sharing memory) passed for two parameters.
    #[error(
        "arguments {first} (`{first_name}`) and {second} (`{second_name}`) are the same array"
    )]
    Aliased {
        first: usize,
        first_name: String,
        second: usize,
        second_name: String,
    },
    /// A buffer smaller than its parameter's data.
    #[error("argument {index} (`{name}`) needs {need} bytes, its buffer has {size}")]
    BufferTooSmall {
        index: usize,
        name: String,
        need: usize,
        size: usize,
    },
    /// The kernel returned a non-zero status.
    #[error("`{entry}` failed with status {code}")]
    CallFailed { entry: String, code: i32 },
    /// A job's points of runtime sizes do not fit its kernel (`runner::SizePoints`).
    #[error("the points of runtime sizes: {0}")]
    SizePoints(String),
}

/// Why a `.npy` byte string could not be read (or a file not written).
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("not a .npy file (bad magic string)")]
    BadMagic,
    #[error("unsupported .npy format version {major}.{minor}")]
    UnsupportedVersion { major: u8, minor: u8 },
    #[error("file ends inside the header")]
    TruncatedHeader,
    #[error("malformed header: {0}")]
    BadHeader(String),
    #[error("unsupported dtype descriptor `{0}`")]
    UnsupportedDescr(String),
    #[error("Fortran-order arrays are not supported")]
    FortranOrder,
    #[error("shape {0:?} is too large")]
    TooLarge(Vec<u64>),
    #[error("data is {got} bytes, the header says {expected}")]
    DataSize { expected: usize, got: usize },
    #[error("bool data holds byte {byte:#04x} at index {index}, not 0 or 1")]
    InvalidBool { index: usize, byte: u8 },
    #[error("data type {0} has no .npy descriptor")]
    UnsupportedDtype(DataType),
}

/// Why two arrays are not close (see [`NDArray::allclose`](crate::NDArray::allclose)).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompareError {
    #[error("dtype mismatch: {actual} vs {expected}")]
    Dtype {
        actual: DataType,
        expected: DataType,
    },
    #[error("shape mismatch: {actual:?} vs {expected:?}")]
    Shape {
        actual: Vec<usize>,
        expected: Vec<usize>,
    },
    #[error(
        "{mismatches} of {total} elements differ (rtol {rtol}, atol {atol}); first at flat \
         index {first_index}: actual {first_actual}, expected {first_expected}; max abs error {max_abs_err}"
    )]
    Values {
        mismatches: usize,
        total: usize,
        first_index: usize,
        first_actual: f64,
        first_expected: f64,
        /// The largest `|actual - expected|` over all elements (NaNs ignored).
        max_abs_err: f64,
        rtol: f64,
        atol: f64,
    },
}
