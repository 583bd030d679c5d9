//! [`Module`]: a loaded CPU artifact, called with [`NDArray`]s.

use crate::error::RuntimeError;
use crate::ndarray::NDArray;
use crate::timer::{TimeEvaluator, TimeResult};
use std::ffi::c_void;
use tessera_target::{Artifact, ParamSpec};

/// The entry point's C signature: `int32_t entry(void** args, int32_t num_args)`.
pub type EntryFn = unsafe extern "C" fn(*mut *mut c_void, i32) -> i32;

/// A kernel loaded from a CPU [`Artifact`]'s shared object.
///
/// The library stays loaded as long as the module lives. Note that the dynamic loader
/// shares a library between loads of the same path: rebuilding a shared object in place
/// while a module of it is alive and loading it again gives the old code, so builds
/// should write each artifact to a fresh path.
pub struct Module {
    artifact: Artifact,
    entry: EntryFn,
    // Declared last so it is dropped last; `entry` points into it.
    _library: libloading::Library,
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module")
            .field("path", &self.artifact.path)
            .field("entry", &self.artifact.entry)
            .field("params", &self.artifact.params)
            .finish()
    }
}

/// Opens a shared object that is never unmapped, even when the module is dropped.
///
/// Kernels with parallel loops link the OpenMP runtime, whose worker threads outlive a
/// call; unloading the kernel's object could unload that runtime under them (a crash
/// at a later, unrelated moment). The handle is still closed on drop; the mapping stays.
#[cfg(unix)]
unsafe fn open_never_unloaded(
    path: &std::path::Path,
) -> Result<libloading::Library, libloading::Error> {
    use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
    const RTLD_NODELETE: std::os::raw::c_int = 0x1000;
    unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE) }.map(Into::into)
}

#[cfg(not(unix))]
unsafe fn open_never_unloaded(
    path: &std::path::Path,
) -> Result<libloading::Library, libloading::Error> {
    unsafe { libloading::Library::new(path) }
}

/// Keeps memory that kernels free for their next call: with glibc, raises the
/// allocator's mmap threshold (to its 32 MiB maximum) and trim threshold (to 1 GiB),
/// once per process.
///
/// A kernel allocates its intermediates (a padded input, Winograd's transformed tiles)
/// with `aligned_alloc` on every call and frees them before returning. glibc serves
/// allocations above its mmap threshold (128 KiB at first) with fresh `mmap`s, and
/// gives freed heap tops back to the system: either way the next call touches new
/// pages, one page fault per 4 KiB. Measured: the four stages of a Winograd conv
/// (56×56×64, 5.4 MB of intermediates) took 2.9 ms with the faults and 1.0 ms without.
/// TVM's CPU runtime avoids them with a workspace pool; raising the thresholds makes
/// glibc's heap that pool.
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            const M_TRIM_THRESHOLD: std::os::raw::c_int = -1;
            const M_MMAP_THRESHOLD: std::os::raw::c_int = -3;
            extern "C" {
                fn mallopt(
                    param: std::os::raw::c_int,
                    value: std::os::raw::c_int,
                ) -> std::os::raw::c_int;
            }
            // SAFETY: `mallopt` only changes the allocator's tuning parameters; both
            // values are within glibc's documented limits.
            unsafe {
                mallopt(M_MMAP_THRESHOLD, 32 << 20);
                mallopt(M_TRIM_THRESHOLD, 1 << 30);
            }
        });
    }
}

impl Module {
    /// Loads the artifact's shared object and looks up its entry symbol.
    pub fn load(artifact: &Artifact) -> Result<Module, RuntimeError> {
        if !artifact.device.is_cpu() {
            return Err(RuntimeError::UnsupportedDevice {
                entry: artifact.entry.clone(),
                device: artifact.device.clone(),
            });
        }
        keep_freed_memory();
        // SAFETY: loading runs the library's initializers; artifacts are shared objects
        // built by a Tessera backend (or by the caller, who vouches for them).
        let library = unsafe { open_never_unloaded(&artifact.path) }.map_err(|source| {
            RuntimeError::Load {
                path: artifact.path.clone(),
                source,
            }
        })?;
        // SAFETY: the artifact contract says the entry has the `EntryFn` signature. The
        // function pointer is copied out of the symbol and stays valid while `library`
        // is loaded, which the module guarantees by owning it.
        let entry: EntryFn = unsafe {
            *library
                .get::<EntryFn>(artifact.entry.as_bytes())
                .map_err(|source| RuntimeError::MissingSymbol {
                    path: artifact.path.clone(),
                    entry: artifact.entry.clone(),
                    source,
                })?
        };
        Ok(Module {
            artifact: artifact.clone(),
            entry,
            _library: library,
        })
    }

    /// The parameters, in call order.
    pub fn params(&self) -> &[ParamSpec] {
        &self.artifact.params
    }

    /// The name of the entry symbol.
    pub fn entry(&self) -> &str {
        &self.artifact.entry
    }

    /// The artifact the module was loaded from.
    pub fn artifact(&self) -> &Artifact {
        &self.artifact
    }

    /// Checks that `args` fit the parameters: their count, each array's dtype and shape,
    /// and that no array (nor memory) is passed for two parameters. [`call`](Self::call)
    /// and [`time_with`](Self::time_with) check this first; it is public so that callers
    /// can validate arguments they hold by shared reference (where passing the same array
    /// twice can happen).
    pub fn check_args(&self, args: &[&NDArray]) -> Result<(), RuntimeError> {
        let params = &self.artifact.params;
        if args.len() != params.len() {
            return Err(RuntimeError::ArgCount {
                entry: self.artifact.entry.clone(),
                expected: params.len(),
                got: args.len(),
            });
        }
        for (index, (a, p)) in args.iter().zip(params).enumerate() {
            if a.dtype() != p.dtype {
                return Err(RuntimeError::ArgDtype {
                    index,
                    name: p.name.clone(),
                    expected: p.dtype,
                    got: a.dtype(),
                });
            }
            let same_shape = a.shape().len() == p.shape.len()
                && a.shape()
                    .iter()
                    .zip(&p.shape)
                    .all(|(&g, &e)| i64::try_from(g) == Ok(e));
            if !same_shape {
                return Err(RuntimeError::ArgShape {
                    index,
                    name: p.name.clone(),
                    expected: p.shape.clone(),
                    got: a.shape().to_vec(),
                });
            }
        }
        for j in 0..args.len() {
            for i in 0..j {
                if aliases(args[i], args[j]) {
                    return Err(RuntimeError::Aliased {
                        first: i,
                        first_name: params[i].name.clone(),
                        second: j,
                        second_name: params[j].name.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Calls the kernel with one array per parameter, in order, after
    /// [`check_args`](Self::check_args). A non-zero status is
    /// [`RuntimeError::CallFailed`].
    pub fn call(&self, args: &mut [&mut NDArray]) -> Result<(), RuntimeError> {
        let mut ptrs = self.prepare(args)?;
        self.call_ptrs(&mut ptrs)
    }

    /// Times the kernel on `args` with `evaluator` (arguments checked once, up front;
    /// a non-zero status during timing stops it with [`RuntimeError::CallFailed`]).
    pub fn time_with(
        &self,
        evaluator: &TimeEvaluator,
        args: &mut [&mut NDArray],
    ) -> Result<TimeResult, RuntimeError> {
        let mut ptrs = self.prepare(args)?;
        evaluator.evaluate(|| self.call_ptrs(&mut ptrs))
    }

    /// Calls the kernel on raw data pointers, one per parameter, without checking them:
    /// for executors that validated their argument plan once, when it was built, and
    /// that pass slices of larger, reused buffers.
    ///
    /// # Safety
    /// `ptrs` must hold exactly one pointer per parameter, each to live, writable memory
    /// of at least the parameter's size in bytes, aligned for its dtype, and no two of
    /// them may overlap; nothing else may access that memory during the call.
    pub unsafe fn call_raw(&self, ptrs: &mut [*mut c_void]) -> Result<(), RuntimeError> {
        if ptrs.len() != self.artifact.params.len() {
            return Err(RuntimeError::ArgCount {
                entry: self.artifact.entry.clone(),
                expected: self.artifact.params.len(),
                got: ptrs.len(),
            });
        }
        self.call_ptrs(ptrs)
    }

    /// Calls the kernel on raw buffers given with their sizes in bytes, after checking
    /// their count, that each is large enough for its parameter
    /// ([`RuntimeError::BufferTooSmall`]) and that no parameter the kernel writes shares
    /// its buffer with another argument ([`RuntimeError::Aliased`]; inputs may share
    /// one, e.g. a value read twice): for devices that keep host kernels' arguments in
    /// buffers of their own (the CPU device, a plugin device computing on the host).
    ///
    /// # Safety
    /// Each pointer must be the start of a distinct allocation (or the same pointer
    /// again) of live, writable memory of at least its given size, aligned for its
    /// parameter's dtype, untouched by anyone else during the call.
    pub unsafe fn call_sized(&self, args: &[(*mut c_void, usize)]) -> Result<(), RuntimeError> {
        let params = &self.artifact.params;
        if args.len() != params.len() {
            return Err(RuntimeError::ArgCount {
                entry: self.artifact.entry.clone(),
                expected: params.len(),
                got: args.len(),
            });
        }
        for (index, ((_, size), p)) in args.iter().zip(params).enumerate() {
            let need = p.nbytes().unwrap_or(usize::MAX);
            if *size < need {
                return Err(RuntimeError::BufferTooSmall {
                    index,
                    name: p.name.clone(),
                    need,
                    size: *size,
                });
            }
        }
        for (j, (pj, _)) in args.iter().enumerate() {
            for (i, (pi, _)) in args[..j].iter().enumerate() {
                if pi == pj && (params[i].written || params[j].written) {
                    return Err(RuntimeError::Aliased {
                        first: i,
                        first_name: params[i].name.clone(),
                        second: j,
                        second_name: params[j].name.clone(),
                    });
                }
            }
        }
        let mut ptrs: Vec<*mut c_void> = args.iter().map(|(p, _)| *p).collect();
        self.call_ptrs(&mut ptrs)
    }

    fn prepare(&self, args: &mut [&mut NDArray]) -> Result<Vec<*mut c_void>, RuntimeError> {
        let shared: Vec<&NDArray> = args.iter().map(|a| &**a).collect();
        self.check_args(&shared)?;
        Ok(args.iter_mut().map(|a| a.as_mut_ptr()).collect())
    }

    /// `ptrs` come from `prepare` on arrays still exclusively borrowed by the caller.
    fn call_ptrs(&self, ptrs: &mut [*mut c_void]) -> Result<(), RuntimeError> {
        // `prepare` checked the count against the params, which came from the artifact;
        // a count beyond i32 cannot pass that check for a real kernel.
        let n = i32::try_from(ptrs.len()).expect("parameter count fits in i32");
        // SAFETY: each pointer is the data of a distinct, live array of the parameter's
        // dtype and shape, exclusively borrowed for the duration of the call.
        let code = unsafe { (self.entry)(ptrs.as_mut_ptr(), n) };
        if code != 0 {
            return Err(RuntimeError::CallFailed {
                entry: self.artifact.entry.clone(),
                code,
            });
        }
        Ok(())
    }
}

/// Whether two arrays are the same object or their (non-empty) data overlap.
fn aliases(a: &NDArray, b: &NDArray) -> bool {
    if std::ptr::eq(a, b) {
        return true;
    }
    if a.nbytes() == 0 || b.nbytes() == 0 {
        return false;
    }
    let (a0, b0) = (a.as_ptr() as usize, b.as_ptr() as usize);
    a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes()
}
