//! CUDA C to PTX with NVRTC, which needs no GPU and no driver.
//!
//! NVRTC is opened here by its file, not by name through cudarc: a loader that asks for
//! `libnvrtc.so.12` misses CUDA 13's `libnvrtc.so.13`, and a library opened by path
//! cannot answer a later open of another name. [`ensure_loaded`] looks, in order, at
//! `$TESSERA_NVRTC`, the loader's path (`libnvrtc.so`, `.so.13`, `.so.12`, `.so.11`),
//! then every `libnvrtc.so.N` in a toolkit's library folders and in NVIDIA's wheels
//! ([`crate::locate`]), newest first — except that with a driver present, a version the
//! driver cannot load PTX of (newer than the driver's CUDA) comes after the others.
//! The first that opens and has NVRTC's entry points is kept for the process. Not found
//! anywhere is [`CudaError::NvrtcMissing`], naming what to install.
//!
//! The binding is the C functions a compile needs (program, compile, PTX, CUBIN, log,
//! version, supported architectures).

use crate::error::CudaError;
use crate::locate;
use crate::target::Arch;
use libloading::Library;
use std::ffi::{c_char, c_int, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

type Program = *mut std::ffi::c_void;
type Status = c_int;
/// `NVRTC_ERROR_COMPILATION`: the source did not compile; the log says why.
const ERROR_COMPILATION: Status = 6;

/// NVRTC's entry points, from the library they were read from (kept loaded).
struct Nvrtc {
    path: PathBuf,
    _lib: Library,
    version: unsafe extern "C" fn(*mut c_int, *mut c_int) -> Status,
    error_string: unsafe extern "C" fn(Status) -> *const c_char,
    create: unsafe extern "C" fn(
        *mut Program,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> Status,
    destroy: unsafe extern "C" fn(*mut Program) -> Status,
    compile: unsafe extern "C" fn(Program, c_int, *const *const c_char) -> Status,
    ptx_size: unsafe extern "C" fn(Program, *mut usize) -> Status,
    ptx: unsafe extern "C" fn(Program, *mut c_char) -> Status,
    log_size: unsafe extern "C" fn(Program, *mut usize) -> Status,
    log: unsafe extern "C" fn(Program, *mut c_char) -> Status,
    num_archs: Option<unsafe extern "C" fn(*mut c_int) -> Status>,
    archs: Option<unsafe extern "C" fn(*mut c_int) -> Status>,
    cubin_size: Option<unsafe extern "C" fn(Program, *mut usize) -> Status>,
    cubin: Option<unsafe extern "C" fn(Program, *mut c_char) -> Status>,
}

// SAFETY: NVRTC's functions may be called from any thread on distinct programs; the
// struct holds only function pointers and the library that keeps them valid.
unsafe impl Send for Nvrtc {}
unsafe impl Sync for Nvrtc {}

impl Nvrtc {
    /// Opens `path` (a file path, or a name for the loader) and reads the entry points.
    fn open(path: &Path) -> Result<Nvrtc, OpenError> {
        // SAFETY: NVRTC is a plain C library without initializers that need care.
        let lib = unsafe { Library::new(path) }.map_err(OpenError::Library)?;
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the symbol's C signature is the field's type (NVRTC's header).
                *unsafe { lib.get(concat!($name, "\0").as_bytes()) }.map_err(|source| {
                    OpenError::Symbol {
                        name: $name,
                        source,
                    }
                })?
            };
        }
        macro_rules! optional {
            ($name:literal) => {
                // SAFETY: as above; absent before CUDA 11.2.
                unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                    .ok()
                    .map(|s| *s)
            };
        }
        Ok(Nvrtc {
            path: path.to_path_buf(),
            version: sym!("nvrtcVersion"),
            error_string: sym!("nvrtcGetErrorString"),
            create: sym!("nvrtcCreateProgram"),
            destroy: sym!("nvrtcDestroyProgram"),
            compile: sym!("nvrtcCompileProgram"),
            ptx_size: sym!("nvrtcGetPTXSize"),
            ptx: sym!("nvrtcGetPTX"),
            log_size: sym!("nvrtcGetProgramLogSize"),
            log: sym!("nvrtcGetProgramLog"),
            num_archs: optional!("nvrtcGetNumSupportedArchs"),
            archs: optional!("nvrtcGetSupportedArchs"),
            cubin_size: optional!("nvrtcGetCUBINSize"),
            cubin: optional!("nvrtcGetCUBIN"),
            _lib: lib,
        })
    }

    fn check(&self, what: &str, status: Status) -> Result<(), CudaError> {
        if status == 0 {
            return Ok(());
        }
        // SAFETY: NVRTC returns a static string for any status.
        let text = unsafe { CStr::from_ptr((self.error_string)(status)) };
        Err(CudaError::driver(what, text.to_string_lossy()))
    }

    fn version(&self) -> Result<(i32, i32), CudaError> {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: two valid out-pointers.
        self.check("nvrtcVersion", unsafe {
            (self.version)(&mut major, &mut minor)
        })?;
        Ok((major, minor))
    }

    /// The architectures this NVRTC compiles for (`[75, 80, 86, …]`); empty where it
    /// cannot say.
    fn supported_archs(&self) -> Vec<i32> {
        let (Some(num), Some(list)) = (self.num_archs, self.archs) else {
            return Vec::new();
        };
        let mut n: c_int = 0;
        // SAFETY: one out-pointer, then a buffer of the size NVRTC gave.
        if unsafe { num(&mut n) } != 0 || n <= 0 {
            return Vec::new();
        }
        let mut v = vec![0 as c_int; n as usize];
        if unsafe { list(v.as_mut_ptr()) } != 0 {
            return Vec::new();
        }
        v
    }

    /// A compiled program's CUBIN: none when it was compiled for a virtual architecture
    /// (NVRTC reports size 0) or this NVRTC is older than 11.1.
    fn cubin_of(&self, prog: Program) -> Result<Option<Vec<u8>>, CudaError> {
        let (Some(size), Some(get)) = (self.cubin_size, self.cubin) else {
            return Ok(None);
        };
        let mut n = 0usize;
        // SAFETY: a live program; a buffer of the size NVRTC reported.
        self.check("nvrtcGetCUBINSize", unsafe { size(prog, &mut n) })?;
        if n == 0 {
            return Ok(None);
        }
        let mut buf = vec![0u8; n];
        self.check("nvrtcGetCUBIN", unsafe {
            get(prog, buf.as_mut_ptr() as *mut c_char)
        })?;
        Ok(Some(buf))
    }

    /// A program's log, or its PTX: a size query, then a buffer of that size.
    fn text(
        &self,
        prog: Program,
        size: unsafe extern "C" fn(Program, *mut usize) -> Status,
        get: unsafe extern "C" fn(Program, *mut c_char) -> Status,
        what: &str,
    ) -> Result<String, CudaError> {
        let mut n = 0usize;
        // SAFETY: a live program; a buffer of the size NVRTC reported.
        self.check(what, unsafe { size(prog, &mut n) })?;
        let mut buf = vec![0u8; n.max(1)];
        self.check(what, unsafe { get(prog, buf.as_mut_ptr() as *mut c_char) })?;
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
    }

    fn compile(
        &self,
        source: &CStr,
        name: &CStr,
        options: &[CString],
    ) -> Result<Compiled, Failure> {
        let mut prog: Program = std::ptr::null_mut();
        // SAFETY: NUL-terminated source and name; no headers.
        let created = unsafe {
            (self.create)(
                &mut prog,
                source.as_ptr(),
                name.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        self.check("nvrtcCreateProgram", created)
            .map_err(Failure::Call)?;
        let opts: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
        // SAFETY: a live program; `opts` points at NUL-terminated options that outlive it.
        let status = unsafe { (self.compile)(prog, opts.len() as c_int, opts.as_ptr()) };
        let result = if status == ERROR_COMPILATION {
            let log = self.text(prog, self.log_size, self.log, "nvrtcGetProgramLog");
            Err(Failure::Refused(log.unwrap_or_else(|e| e.to_string())))
        } else {
            self.check("nvrtcCompileProgram", status)
                .and_then(|_| {
                    Ok(Compiled {
                        ptx: self.text(prog, self.ptx_size, self.ptx, "nvrtcGetPTX")?,
                        cubin: self.cubin_of(prog)?,
                    })
                })
                .map_err(Failure::Call)
        };
        // SAFETY: the program made above, destroyed once.
        unsafe { (self.destroy)(&mut prog) };
        result
    }
}

/// What a compile made: the PTX, and the GPU code (CUBIN) when it was asked for.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub ptx: String,
    pub cubin: Option<Vec<u8>>,
}

/// Why a compile failed: NVRTC refused the source (its log), or a call failed.
enum Failure {
    Refused(String),
    Call(CudaError),
}

/// The names the loader is asked for, before any folder is searched.
const LOADER_NAMES: [&str; 4] = [
    "libnvrtc.so",
    "libnvrtc.so.13",
    "libnvrtc.so.12",
    "libnvrtc.so.11",
];

/// Every place NVRTC is looked for, in order (see the module's header).
fn candidates() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::env::var_os("TESSERA_NVRTC")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    v.extend(LOADER_NAMES.iter().map(PathBuf::from));
    let mut found = Vec::new();
    for root in locate::toolkit_roots() {
        for dir in locate::toolkit_lib_dirs(&root) {
            found.extend(locate::versioned_libs(&dir, "nvrtc"));
        }
    }
    for package in ["cuda_nvrtc", "cu13", "cu12"] {
        if let Some(w) = locate::wheel_dir(package) {
            found.extend(locate::versioned_libs(&w.join("lib"), "nvrtc"));
        }
    }
    if let Some(driver) = crate::device::driver_cuda_major() {
        // Stable: the driver's own version and older keep their order, first.
        found.sort_by_key(|p| major_of(p).is_some_and(|m| m > driver));
    }
    v.extend(found);
    v
}

/// The major version in a library file's name (`libnvrtc.so.13.0` → 13).
fn major_of(p: &Path) -> Option<u32> {
    let name = p.file_name()?.to_str()?;
    locate::lib_version(name, "nvrtc")?.first().copied()
}

/// Why a library file is not a usable NVRTC.
#[derive(Debug, thiserror::Error)]
enum OpenError {
    /// The loader refused the file.
    #[error("{0}")]
    Library(#[source] libloading::Error),
    /// An entry point NVRTC has is missing.
    #[error("{name}: {source}")]
    Symbol {
        name: &'static str,
        #[source]
        source: libloading::Error,
    },
}

/// A candidate NVRTC that did not load.
#[derive(Debug)]
enum Tried {
    /// A file path that is no file.
    Absent(PathBuf),
    /// A library name the loader did not find.
    NotOnLoaderPath(PathBuf),
    /// A file that opened but is no usable NVRTC.
    Unusable { path: PathBuf, source: OpenError },
}

impl std::fmt::Display for Tried {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tried::Absent(path) => write!(f, "{}", path.display()),
            Tried::NotOnLoaderPath(path) => write!(f, "{} on the loader's path", path.display()),
            Tried::Unusable { path, source } => write!(f, "{} ({source})", path.display()),
        }
    }
}

/// No candidate NVRTC loaded: what was tried, in order (the message is the list that
/// [`CudaError::NvrtcMissing`] quotes).
#[derive(Debug, thiserror::Error)]
#[error("{}", tried.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
struct NotFound {
    tried: Vec<Tried>,
}

fn nvrtc() -> Result<&'static Nvrtc, CudaError> {
    static LOADED: OnceLock<Result<Nvrtc, NotFound>> = OnceLock::new();
    LOADED
        .get_or_init(load)
        .as_ref()
        .map_err(|e| CudaError::NvrtcMissing {
            searched: e.to_string(),
        })
}

fn load() -> Result<Nvrtc, NotFound> {
    let candidates = candidates();
    let mut tried = Vec::new();
    for path in candidates {
        let by_name = path.components().count() == 1;
        if !by_name && !path.is_file() {
            tried.push(Tried::Absent(path));
            continue;
        }
        match Nvrtc::open(&path) {
            Ok(n) => return Ok(n),
            Err(_) if by_name => tried.push(Tried::NotOnLoaderPath(path)),
            Err(source) => tried.push(Tried::Unusable { path, source }),
        }
    }
    Err(NotFound { tried })
}

/// Makes NVRTC usable, once per process.
pub fn ensure_loaded() -> Result<(), CudaError> {
    nvrtc().map(drop)
}

/// The file NVRTC was loaded from.
pub fn library_path() -> Result<PathBuf, CudaError> {
    Ok(nvrtc()?.path.clone())
}

/// Compiles the CUDA C `source` (of function `entry`, for the messages) to PTX for
/// `arch`'s virtual architecture.
pub fn compile(source: &str, entry: &str, arch: &Arch) -> Result<String, CudaError> {
    compile_for(source, entry, arch, false).map(|c| c.ptx)
}

/// [`compile`], and with `cubin` also the GPU code for `arch`'s real architecture
/// (`--gpu-architecture=sm_XX`: NVRTC then runs the assembler itself, and still gives
/// the PTX). A module with GPU code loads without the driver's PTX assembly, which on
/// a GPU otherwise runs in the measuring process, one candidate after another, where
/// NVRTC runs on every host core while the GPU measures.
pub fn compile_for(
    source: &str,
    entry: &str,
    arch: &Arch,
    cubin: bool,
) -> Result<Compiled, CudaError> {
    let n = nvrtc()?;
    let refused = |log: String| CudaError::Compile {
        entry: entry.to_string(),
        arch: arch.compute(),
        log,
    };
    let (Ok(src), Ok(name)) = (CString::new(source), CString::new(format!("{entry}.cu"))) else {
        return Err(refused("the source holds a NUL character".into()));
    };
    let gpu_arch = if cubin { arch.sm() } else { arch.compute() };
    let opts = [CString::new(format!("--gpu-architecture={gpu_arch}"))
        .expect("no NUL in an architecture's name")];
    match n.compile(&src, &name, &opts) {
        Ok(compiled) => Ok(compiled),
        Err(Failure::Refused(log)) => Err(refused(log)),
        Err(Failure::Call(e)) => Err(e),
    }
}

/// NVRTC's version, `(major, minor)`.
pub fn version() -> Result<(i32, i32), CudaError> {
    nvrtc()?.version()
}

/// The oldest architecture the loaded NVRTC compiles for, at least `sm_52`: what a
/// `cuda` target without a GPU compiles for (CUDA 13 dropped everything before
/// `sm_75`). `sm_52` where NVRTC cannot say or is not loaded.
pub fn oldest_arch() -> Arch {
    let oldest = nvrtc()
        .ok()
        .map(|n| n.supported_archs())
        .and_then(|v| v.into_iter().filter(|&a| a >= 52).min());
    match oldest {
        Some(a) => Arch {
            major: (a / 10) as u32,
            minor: (a % 10) as u32,
            suffix: String::new(),
        },
        None => crate::target::PORTABLE_ARCH,
    }
}
