//! The CUDA device behind the core's `Device`, on the driver API through cudarc's thin
//! `result` layer (TVM's CUDA device API does the same): the first GPU's primary
//! context, bound to whichever thread calls; buffers are `cuMemAlloc` allocations and
//! copies are synchronous; a module is its PTX loaded with `cuModuleLoadData` (the
//! driver assembles it for the GPU; modules are cached by PTX, so a network's identical
//! kernels load once); a function is its kernels' handles; a launch enqueues them in
//! order on the default stream with their own grid and block sizes. [`Device::time`]
//! brackets each repeat with CUDA events, measured on the GPU's clock.
//!
//! libcuda is opened at run time: [`device_info`] and [`CudaDevice::open`] check that it
//! is present before the first driver call (cudarc panics otherwise), and a machine
//! without a driver or a GPU gets [`CudaError::NoDriver`] / [`CudaError::NoDevice`].

use crate::error::CudaError;
use crate::module::CudaModule;
use crate::target::Arch;
use cudarc::driver::result;
use cudarc::driver::sys::{
    self, CUdevice_attribute, CUdeviceptr, CUevent_flags, CUfunction, CUmodule,
};
use cudarc::driver::CudaContext;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use tessera_runtime::device::{copy_range, launch_args};
use tessera_runtime::timer::{TimeEvaluator, TimeResult};
use tessera_runtime::{BufferId, Device, DeviceError, DeviceName, FunctionId, Handles, ModuleId};
use tessera_target::{Artifact, LaunchDims, ParamSpec, TargetKind};

/// What the driver reports about the first GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub name: String,
    pub arch: Arch,
    pub sm_count: usize,
    pub shared_memory_per_block: usize,
    pub max_threads_per_block: usize,
    pub warp_size: usize,
    pub registers_per_block: usize,
}

fn driver_present() -> bool {
    // SAFETY: only tries to open the library under its usual names.
    unsafe { sys::is_culib_present() }
}

/// The CUDA major version of the installed driver (13 for driver 580), when there is
/// one: NVRTC of a newer CUDA makes PTX this driver cannot load.
pub(crate) fn driver_cuda_major() -> Option<u32> {
    if !driver_present() {
        return None;
    }
    let mut v = 0;
    // SAFETY: one out-pointer; cuDriverGetVersion needs no cuInit.
    unsafe { sys::cuDriverGetVersion(&mut v) }.result().ok()?;
    (v > 0).then_some(v as u32 / 1000)
}

/// The first GPU's facts, queried once per process.
pub fn device_info() -> Result<DeviceInfo, CudaError> {
    static INFO: OnceLock<Result<DeviceInfo, CudaError>> = OnceLock::new();
    INFO.get_or_init(query).clone()
}

fn query() -> Result<DeviceInfo, CudaError> {
    if !driver_present() {
        return Err(CudaError::NoDriver);
    }
    result::init().map_err(|e| CudaError::NoDevice(format!("cuInit failed: {e}")))?;
    let count = result::device::get_count()
        .map_err(|e| CudaError::NoDevice(format!("cuDeviceGetCount failed: {e}")))?;
    if count < 1 {
        return Err(CudaError::NoDevice("the driver sees no GPU".into()));
    }
    let dev = result::device::get(0).map_err(|e| CudaError::driver("cuDeviceGet(0)", e))?;
    let attr = |a: CUdevice_attribute| {
        // SAFETY: `dev` came from cuDeviceGet.
        unsafe { result::device::get_attribute(dev, a) }
            .map(|v| v.max(0) as usize)
            .map_err(|e| CudaError::driver(format!("cuDeviceGetAttribute({a:?})"), e))
    };
    use CUdevice_attribute::*;
    Ok(DeviceInfo {
        name: result::device::get_name(dev).map_err(|e| CudaError::driver("cuDeviceGetName", e))?,
        arch: Arch {
            major: attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)? as u32,
            minor: attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)? as u32,
            suffix: String::new(),
        },
        sm_count: attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        shared_memory_per_block: attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
        max_threads_per_block: attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        warp_size: attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
        registers_per_block: attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)?,
    })
}

/// A driver handle kept in the device's state. The driver's handles are plain pointers
/// that any thread with the context current may use.
#[derive(Clone, Copy)]
struct Handle<T>(T);
// SAFETY: CUDA driver handles are not tied to the thread that made them; every use
// happens under the state's lock with the context bound to the calling thread.
unsafe impl<T> Send for Handle<T> {}

struct LoadedModule {
    module: CudaModule,
    params: Vec<ParamSpec>,
    entry: String,
    workspaces: Vec<CUdeviceptr>,
}

struct Function {
    module: u64,
    kernels: Vec<Handle<CUfunction>>,
}

struct State {
    buffers: Handles<(CUdeviceptr, usize)>,
    modules: Handles<LoadedModule>,
    functions: Handles<Function>,
    /// Loaded driver modules by PTX text.
    images: HashMap<String, Handle<CUmodule>>,
}

impl Default for State {
    fn default() -> State {
        State {
            buffers: Handles::new("buffer"),
            modules: Handles::new("module"),
            functions: Handles::new("function"),
            images: HashMap::new(),
        }
    }
}

/// The first CUDA GPU.
pub struct CudaDevice {
    name: DeviceName,
    arch: Arch,
    ctx: Arc<CudaContext>,
    state: Mutex<State>,
}

impl CudaDevice {
    /// Opens the first GPU (see [`device_info`]).
    pub fn open() -> Result<CudaDevice, CudaError> {
        let info = device_info()?;
        let ctx = CudaContext::new(0).map_err(|e| CudaError::driver("creating a context", e))?;
        Ok(CudaDevice {
            name: DeviceName::new(format!("cuda:{} ({})", info.name, info.arch)),
            arch: info.arch,
            ctx,
            state: Mutex::new(State::default()),
        })
    }

    fn state(&self) -> Result<MutexGuard<'_, State>, DeviceError> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| self.name.failed(format!("binding the context: {e}")))?;
        Ok(self.state.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn malloc(&self, nbytes: usize) -> Result<CUdeviceptr, DeviceError> {
        // SAFETY: the context is bound (callers hold the state).
        unsafe { result::malloc_sync(nbytes.max(1)) }.map_err(|e| {
            self.name
                .failed(format!("cannot allocate {nbytes} bytes: {e}"))
        })
    }

    /// The driver module of `m`'s PTX, loaded once.
    fn image(&self, st: &mut State, m: &CudaModule, entry: &str) -> Result<CUmodule, DeviceError> {
        if let Some(h) = st.images.get(&m.ptx) {
            return Ok(h.0);
        }
        let built = Arch::parse(&m.arch).ok_or_else(|| {
            self.name
                .failed(format!("`{entry}`: unknown architecture `{}`", m.arch))
        })?;
        if (built.major, built.minor) > (self.arch.major, self.arch.minor) {
            return Err(self.name.failed(format!(
                "`{entry}` was compiled for {built}, newer than this GPU ({}); \
                 build with `-arch={}`",
                self.arch, self.arch
            )));
        }
        let ptx = CString::new(m.ptx.as_str()).map_err(|_| {
            self.name
                .failed(format!("`{entry}`: the PTX holds a NUL character"))
        })?;
        // SAFETY: a NUL-terminated PTX image; the context is bound.
        let cu = unsafe { result::module::load_data(ptx.as_ptr() as *const c_void) }
            .map_err(|e| self.name.failed(load_failure(entry, &m.arch, &e)))?;
        st.images.insert(m.ptx.clone(), Handle(cu));
        Ok(cu)
    }

    /// Enqueues every kernel of `function` once on the default stream.
    fn enqueue(
        &self,
        st: &State,
        function: FunctionId,
        args: &[BufferId],
    ) -> Result<(), DeviceError> {
        let f = st.functions.get(&self.name, function.0)?;
        let m = st.modules.get(&self.name, f.module)?;
        let mut ptrs = launch_args(self.name.as_str(), &m.entry, &m.params, args, |b| {
            st.buffers.find(b.0).copied()
        })?;
        ptrs.extend(&m.workspaces);
        for (k, launch) in f.kernels.iter().zip(&m.module.kernels) {
            let mut values: Vec<CUdeviceptr> = launch
                .args
                .iter()
                .map(|&i| {
                    ptrs.get(i).copied().ok_or_else(|| {
                        self.name
                            .bad_launch(&m.entry, format!("kernel argument {i} does not exist"))
                    })
                })
                .collect::<Result<_, _>>()?;
            let mut params: Vec<*mut c_void> = values
                .iter_mut()
                .map(|v| v as *mut CUdeviceptr as *mut c_void)
                .collect();
            let [gx, gy, gz] = launch.grid;
            let [bx, by, bz] = launch.block;
            // SAFETY: a kernel of a loaded module, one pointer-sized argument per
            // parameter as its module describes, every pointer a live allocation of
            // this context large enough for its parameter (checked above).
            unsafe {
                result::launch_kernel(
                    k.0,
                    (gx, gy, gz),
                    (bx, by, bz),
                    0,
                    std::ptr::null_mut(),
                    &mut params,
                )
            }
            .map_err(|e| {
                self.name
                    .failed(format!("{}: launch failed: {e}", launch.name))
            })?;
        }
        Ok(())
    }

    fn sync(&self) -> Result<(), DeviceError> {
        result::ctx::synchronize().map_err(|e| self.name.failed(format!("synchronize: {e}")))
    }
}

/// Why a module's PTX did not load, with what to do when NVRTC is newer than the driver
/// (its PTX version is then unknown to the driver's JIT).
fn load_failure(entry: &str, arch: &str, e: &cudarc::driver::DriverError) -> String {
    let hint = if format!("{e:?}").contains("UNSUPPORTED_PTX_VERSION") {
        " (NVRTC is newer than the driver: use the NVRTC of the driver's CUDA version, \
         which nvidia-smi shows, e.g. `pip install nvidia-cuda-nvrtc-cu12==12.X.*`)"
    } else {
        ""
    };
    format!("loading `{entry}`'s PTX ({arch}) failed: {e}{hint}")
}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        let Ok(mut st) = self.state() else { return };
        // SAFETY: every pointer and module was made by this context and is freed once.
        unsafe {
            for (ptr, _) in st.buffers.values() {
                let _ = result::free_sync(*ptr);
            }
            for m in st.modules.values() {
                for w in &m.workspaces {
                    let _ = result::free_sync(*w);
                }
            }
            for h in st.images.values() {
                let _ = result::module::unload(h.0);
            }
        }
        st.buffers.clear();
        st.modules.clear();
        st.images.clear();
    }
}

impl Device for CudaDevice {
    fn kind(&self) -> TargetKind {
        TargetKind::CUDA
    }

    fn alloc(&self, nbytes: usize) -> Result<BufferId, DeviceError> {
        let mut st = self.state()?;
        let ptr = self.malloc(nbytes)?;
        let id = st.buffers.insert((ptr, nbytes));
        Ok(BufferId(id))
    }

    fn free(&self, buffer: BufferId) -> Result<(), DeviceError> {
        let mut st = self.state()?;
        let (ptr, _) = st.buffers.remove(&self.name, buffer.0)?;
        // SAFETY: an allocation of this context, removed from the table above.
        unsafe { result::free_sync(ptr) }.map_err(|e| self.name.failed(format!("free: {e}")))
    }

    fn copy_from_host(&self, dst: BufferId, offset: usize, src: &[u8]) -> Result<(), DeviceError> {
        let st = self.state()?;
        let (ptr, size) = *st.buffers.get(&self.name, dst.0)?;
        copy_range(self.name.as_str(), dst, offset, src.len(), size)?;
        if src.is_empty() {
            return Ok(());
        }
        // SAFETY: within the allocation (checked above).
        unsafe { result::memcpy_htod_sync(ptr + offset as u64, src) }
            .map_err(|e| self.name.failed(format!("copy to buffer {}: {e}", dst.0)))
    }

    fn copy_to_host(
        &self,
        src: BufferId,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<(), DeviceError> {
        let st = self.state()?;
        let (ptr, size) = *st.buffers.get(&self.name, src.0)?;
        copy_range(self.name.as_str(), src, offset, dst.len(), size)?;
        if dst.is_empty() {
            return Ok(());
        }
        // SAFETY: within the allocation (checked above).
        unsafe { result::memcpy_dtoh_sync(dst, ptr + offset as u64) }
            .map_err(|e| self.name.failed(format!("copy from buffer {}: {e}", src.0)))
    }

    fn copy_on_device(
        &self,
        src: BufferId,
        dst: BufferId,
        nbytes: usize,
    ) -> Result<(), DeviceError> {
        let st = self.state()?;
        let look = |b: BufferId| st.buffers.get(&self.name, b.0).copied();
        let (s, s_size) = look(src)?;
        let (d, d_size) = look(dst)?;
        copy_range(self.name.as_str(), src, 0, nbytes, s_size)?;
        copy_range(self.name.as_str(), dst, 0, nbytes, d_size)?;
        if src == dst || nbytes == 0 {
            return Ok(());
        }
        // SAFETY: both ranges are within their allocations (checked above).
        unsafe { result::memcpy_dtod_sync(d, s, nbytes) }
            .map_err(|e| self.name.failed(format!("copy on device: {e}")))
    }

    fn load_module(&self, artifact: &Artifact) -> Result<ModuleId, DeviceError> {
        self.name.check_kind(artifact, &TargetKind::CUDA)?;
        let module =
            CudaModule::read(&artifact.path).map_err(|e| self.name.failed(e.to_string()))?;
        let mut st = self.state()?;
        self.image(&mut st, &module, &artifact.entry)?;
        let mut workspaces = Vec::new();
        for w in &module.workspaces {
            match self.malloc(w.bytes as usize) {
                Ok(p) => workspaces.push(p),
                Err(e) => {
                    // SAFETY: the allocations just made, freed once.
                    for p in workspaces {
                        let _ = unsafe { result::free_sync(p) };
                    }
                    return Err(e);
                }
            }
        }
        let id = st.modules.insert(LoadedModule {
            module,
            params: artifact.params.clone(),
            entry: artifact.entry.clone(),
            workspaces,
        });
        Ok(ModuleId(id))
    }

    fn get_function(&self, module: ModuleId, name: &str) -> Result<FunctionId, DeviceError> {
        let mut st = self.state()?;
        let m = st.modules.get(&self.name, module.0)?;
        if m.entry != name {
            return Err(self.name.failed(format!(
                "module {} has no function `{name}` (it holds `{}`)",
                module.0, m.entry
            )));
        }
        let cu = st
            .images
            .get(&m.module.ptx)
            .ok_or_else(|| self.name.failed(format!("`{name}`: its PTX is not loaded")))?
            .0;
        let mut kernels = Vec::new();
        for k in &m.module.kernels {
            let cname = CString::new(k.name.as_str()).map_err(|_| {
                self.name
                    .failed(format!("kernel name `{}` holds a NUL", k.name))
            })?;
            // SAFETY: a module loaded by this context; a NUL-terminated name.
            let f = unsafe { result::module::get_function(cu, cname) }
                .map_err(|e| self.name.failed(format!("kernel `{}`: {e}", k.name)))?;
            kernels.push(Handle(f));
        }
        let id = st.functions.insert(Function {
            module: module.0,
            kernels,
        });
        Ok(FunctionId(id))
    }

    fn launch(
        &self,
        function: FunctionId,
        args: &[BufferId],
        _dims: Option<&LaunchDims>,
    ) -> Result<(), DeviceError> {
        let st = self.state()?;
        self.enqueue(&st, function, args)
    }

    fn synchronize(&self) -> Result<(), DeviceError> {
        let _st = self.state()?;
        self.sync()
    }

    fn time(
        &self,
        function: FunctionId,
        args: &[BufferId],
        _dims: Option<&LaunchDims>,
        evaluator: &TimeEvaluator,
    ) -> Result<TimeResult, DeviceError> {
        let ev = |what| {
            result::event::create(CUevent_flags::CU_EVENT_DEFAULT)
                .map_err(|e| self.name.failed(format!("creating the {what} event: {e}")))
        };
        let st = self.state()?;
        let (start, end) = (ev("start")?, ev("end")?);
        let timed = evaluator.evaluate_with(|n| {
            let stream = std::ptr::null_mut();
            // SAFETY: events of this context, recorded on its default stream.
            unsafe { result::event::record(start, stream) }
                .map_err(|e| self.name.failed(format!("recording: {e}")))?;
            for _ in 0..n {
                self.enqueue(&st, function, args)?;
            }
            // SAFETY: as above; `end` is waited for before it is read.
            let ms = unsafe {
                result::event::record(end, stream)
                    .and_then(|_| result::event::synchronize(end))
                    .and_then(|_| result::event::elapsed(start, end))
            }
            .map_err(|e| self.name.failed(format!("timing `{function:?}`: {e}")))?;
            Ok(ms as f64 * 1e-3)
        });
        // SAFETY: created above, no longer recorded.
        unsafe {
            let _ = result::event::destroy(start);
            let _ = result::event::destroy(end);
        }
        timed
    }
}
