//! The CUDA device behind the core's `Device`, on the driver API through cudarc's thin
//! `result` layer (TVM's CUDA device API does the same): the first GPU's primary
//! context, bound to whichever thread calls; buffers are `cuMemAlloc` allocations and
//! copies are synchronous; a module is its PTX loaded with `cuModuleLoadData` (the
//! driver assembles it for the GPU; modules are cached by PTX, so a network's identical
//! kernels load once); a function is its kernels' handles; a launch enqueues them in
//! order on the device's own stream with their own grid and block sizes, and copies go
//! through the same stream, waited for. [`Device::time`] brackets each repeat with CUDA
//! events, measured on the GPU's clock (with the evaluator's cache flush, a buffer of
//! twice the L2's size is written before each timed batch, so its first call starts
//! with the L2 cold as a kernel inside a network may); [`Device::time_steps`] puts an event between
//! every two steps of one run, nothing waited for in between.
//!
//! A launch sequence is a CUDA graph: the steps' launches captured from the stream
//! (`cuStreamBeginCapture` … `cuStreamEndCapture`), instantiated and uploaded once, and
//! replayed per run with one `cuGraphLaunch` (kernel arguments are copied into the
//! graph at capture; the buffers they point at live as long as the module using them).
//!
//! libcuda is opened at run time: [`device_info`] and [`CudaDevice::open`] check that it
//! is present before the first driver call (cudarc panics otherwise), and a machine
//! without a driver or a GPU gets [`CudaError::NoDriver`] / [`CudaError::NoDevice`].

use crate::error::CudaError;
use crate::module::CudaModule;
use crate::target::Arch;
use cudarc::driver::result;
use cudarc::driver::sys::{
    self, CUdevice_attribute, CUdeviceptr, CUevent, CUevent_flags, CUfunction, CUgraphExec,
    CUmodule, CUstream, CUstreamCaptureMode,
};
use cudarc::driver::CudaContext;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use tessera_runtime::device::{copy_range, launch_args};
use tessera_runtime::timer::{TimeEvaluator, TimeResult};
use tessera_runtime::{
    BufferId, Device, DeviceError, DeviceName, FunctionId, Handles, LaunchStep, ModuleId,
    SequenceId,
};
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
    /// The L2 cache's size in bytes.
    pub l2_bytes: usize,
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
        l2_bytes: attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
    })
}

/// A driver handle kept in the device's state. The driver's handles are plain pointers
/// that any thread with the context current may use.
#[derive(Clone, Copy)]
struct Handle<T>(T);
// SAFETY: CUDA driver handles are not tied to the thread that made them; every use
// happens under the state's lock with the context bound to the calling thread.
unsafe impl<T> Send for Handle<T> {}
// SAFETY: as above; the driver's calls are thread-safe, and the device's one shared
// handle outside its state (its stream) is only used with the state locked.
unsafe impl<T> Sync for Handle<T> {}

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
    /// Instantiated CUDA graphs, the recorded launch sequences.
    graphs: Handles<Handle<CUgraphExec>>,
    /// Twice the L2's bytes, written before each timed batch when the evaluator asks
    /// for a cache flush; allocated on first use.
    flush: Option<(CUdeviceptr, usize)>,
}

impl Default for State {
    fn default() -> State {
        State {
            buffers: Handles::new("buffer"),
            modules: Handles::new("module"),
            functions: Handles::new("function"),
            images: HashMap::new(),
            graphs: Handles::new("launch sequence"),
            flush: None,
        }
    }
}

/// The first CUDA GPU.
pub struct CudaDevice {
    name: DeviceName,
    arch: Arch,
    ctx: Arc<CudaContext>,
    l2_bytes: usize,
    /// The stream every launch and copy goes through (not the legacy default stream,
    /// which cannot be captured into a graph).
    stream: Handle<CUstream>,
    state: Mutex<State>,
}

impl CudaDevice {
    /// Opens the first GPU (see [`device_info`]).
    pub fn open() -> Result<CudaDevice, CudaError> {
        let info = device_info()?;
        let ctx = CudaContext::new(0).map_err(|e| CudaError::driver("creating a context", e))?;
        ctx.bind_to_thread()
            .map_err(|e| CudaError::driver("binding the context", e))?;
        let stream = result::stream::create(result::stream::StreamKind::NonBlocking)
            .map_err(|e| CudaError::driver("creating a stream", e))?;
        Ok(CudaDevice {
            name: DeviceName::new(format!("cuda:{} ({})", info.name, info.arch)),
            arch: info.arch,
            ctx,
            l2_bytes: info.l2_bytes,
            stream: Handle(stream),
            state: Mutex::new(State::default()),
        })
    }

    /// The buffer whose writing evicts the L2 (see [`State::flush`]).
    fn flush_buffer(&self, st: &mut State) -> Result<(CUdeviceptr, usize), DeviceError> {
        if let Some(f) = st.flush {
            return Ok(f);
        }
        let bytes = (2 * self.l2_bytes).max(1 << 20);
        let f = (self.malloc(bytes)?, bytes);
        st.flush = Some(f);
        Ok(f)
    }

    /// Waits for everything issued on the device's stream.
    fn wait(&self, what: &str) -> Result<(), DeviceError> {
        // SAFETY: the device's own stream, alive until the device is dropped.
        unsafe { result::stream::synchronize(self.stream.0) }
            .map_err(|e| self.name.failed(format!("{what}: {e}")))
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

    /// The driver module of `m` (its GPU code, else its PTX), loaded once.
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
        // the GPU code NVRTC assembled at build time, when it is for this GPU: no PTX
        // assembly here (a failed load of an image leaves the context usable)
        let assembled = match m.cubin() {
            Some(Ok(cubin)) => {
                // SAFETY: a complete CUBIN (an ELF image, its size in its headers); the
                // context is bound.
                unsafe { result::module::load_data(cubin.as_ptr() as *const c_void) }.ok()
            }
            _ => None,
        };
        let cu = match assembled {
            Some(cu) => cu,
            None => {
                let ptx = CString::new(m.ptx.as_str()).map_err(|_| {
                    self.name
                        .failed(format!("`{entry}`: the PTX holds a NUL character"))
                })?;
                // SAFETY: a NUL-terminated PTX image; the context is bound.
                unsafe { result::module::load_data(ptx.as_ptr() as *const c_void) }
                    .map_err(|e| self.name.failed(load_failure(entry, &m.arch, &e)))?
            }
        };
        st.images.insert(m.ptx.clone(), Handle(cu));
        Ok(cu)
    }

    /// Enqueues every kernel of `function` once on the device's stream.
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
                    self.stream.0,
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
        self.wait("synchronize")
    }

    /// Captures `steps`' launches from the stream into a graph, instantiated and
    /// uploaded; a failure ends the capture, so the stream stays usable.
    fn capture(&self, st: &State, steps: &[LaunchStep]) -> Result<CUgraphExec, DeviceError> {
        let stream = self.stream.0;
        let failed = |what: &str, e: &dyn std::fmt::Display| {
            self.name.failed(format!("{what} the launch sequence: {e}"))
        };
        let mode = CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        // SAFETY: the device's stream, not capturing (captures happen under the lock).
        unsafe { result::stream::begin_capture(stream, mode) }
            .map_err(|e| failed("capturing", &e))?;
        let enqueued = steps
            .iter()
            .try_for_each(|s| self.enqueue(st, s.function, &s.args));
        // SAFETY: ends the capture begun above, whatever the launches did.
        let graph = unsafe { result::stream::end_capture(stream) };
        let graph = match (enqueued, graph) {
            (Ok(()), Ok(g)) => g,
            (Err(e), g) => {
                if let Ok(g) = g {
                    // SAFETY: the graph just captured, destroyed once.
                    let _ = unsafe { result::graph::destroy(g) };
                }
                return Err(e);
            }
            (Ok(()), Err(e)) => return Err(failed("capturing", &e)),
        };
        // SAFETY: a graph captured above; it is not needed once instantiated.
        let exec = unsafe {
            let exec = result::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0));
            let _ = result::graph::destroy(graph);
            exec
        }
        .map_err(|e| failed("instantiating", &e))?;
        // SAFETY: an instantiated graph and the device's stream.
        if let Err(e) = unsafe { result::graph::upload(exec, stream) } {
            // SAFETY: instantiated above, destroyed once.
            let _ = unsafe { result::graph::exec_destroy(exec) };
            return Err(failed("uploading", &e));
        }
        Ok(exec)
    }
}

/// CUDA events, destroyed when dropped.
struct Events(Vec<CUevent>);

impl Events {
    fn new(n: usize, name: &DeviceName) -> Result<Events, DeviceError> {
        let mut events = Events(Vec::with_capacity(n));
        for _ in 0..n {
            let e = result::event::create(CUevent_flags::CU_EVENT_DEFAULT)
                .map_err(|e| name.failed(format!("creating an event: {e}")))?;
            events.0.push(e);
        }
        Ok(events)
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        for &e in &self.0 {
            // SAFETY: created by `new`, destroyed once; the context is current (they
            // are made and dropped under the device's state).
            let _ = unsafe { result::event::destroy(e) };
        }
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
    /// Waits for the stream, then frees in dependency order: the graphs (which name the
    /// kernels and buffers), the buffers and workspaces, the modules, the stream.
    fn drop(&mut self) {
        let Ok(mut st) = self.state() else { return };
        let _ = self.wait("closing the device");
        // SAFETY: every handle was made by this context, nothing is in flight (waited
        // for above), and each is freed once.
        unsafe {
            for g in st.graphs.values() {
                let _ = result::graph::exec_destroy(g.0);
            }
            for (ptr, _) in st.buffers.values() {
                let _ = result::free_sync(*ptr);
            }
            for m in st.modules.values() {
                for w in &m.workspaces {
                    let _ = result::free_sync(*w);
                }
            }
            if let Some((ptr, _)) = st.flush.take() {
                let _ = result::free_sync(ptr);
            }
            for h in st.images.values() {
                let _ = result::module::unload(h.0);
            }
            let _ = result::stream::destroy(self.stream.0);
        }
        st.graphs.clear();
        st.buffers.clear();
        st.modules.clear();
        st.images.clear();
    }
}

impl Device for CudaDevice {
    fn kind(&self) -> TargetKind {
        TargetKind::CUDA
    }

    fn describe(&self) -> String {
        self.name.as_str().to_string()
    }

    fn runs_on_host_cores(&self) -> bool {
        false
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
        // SAFETY: within the allocation (checked above); waited for before `src` is
        // given back.
        unsafe { result::memcpy_htod_async(ptr + offset as u64, src, self.stream.0) }
            .map_err(|e| self.name.failed(format!("copy to buffer {}: {e}", dst.0)))?;
        self.wait("copy to the device")
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
        // SAFETY: within the allocation (checked above); waited for before `dst` is
        // read.
        unsafe { result::memcpy_dtoh_async(dst, ptr + offset as u64, self.stream.0) }
            .map_err(|e| self.name.failed(format!("copy from buffer {}: {e}", src.0)))?;
        self.wait("copy to the host")
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
        unsafe { result::memcpy_dtod_async(d, s, nbytes, self.stream.0) }
            .map_err(|e| self.name.failed(format!("copy on device: {e}")))?;
        self.wait("copy on the device")
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
        let mut st = self.state()?;
        let flush = if evaluator.cache_flush {
            Some(self.flush_buffer(&mut st)?)
        } else {
            None
        };
        let (start, end) = (ev("start")?, ev("end")?);
        let timed = evaluator.evaluate_with(|n| {
            let stream = self.stream.0;
            if let Some((ptr, bytes)) = flush {
                // SAFETY: the device's own scratch allocation of `bytes`, on its stream.
                unsafe { result::memset_d8_async(ptr, (n & 0xff) as u8, bytes, stream) }
                    .map_err(|e| self.name.failed(format!("flushing the L2: {e}")))?;
            }
            // SAFETY: events of this context, recorded on the device's stream.
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

    fn record_sequence(&self, steps: &[LaunchStep]) -> Result<Option<SequenceId>, DeviceError> {
        let mut st = self.state()?;
        let exec = self.capture(&st, steps)?;
        Ok(Some(SequenceId(st.graphs.insert(Handle(exec)))))
    }

    fn run_sequence(&self, sequence: SequenceId) -> Result<(), DeviceError> {
        let st = self.state()?;
        let exec = st.graphs.get(&self.name, sequence.0)?.0;
        // SAFETY: an instantiated graph of this context, on the device's stream.
        unsafe { result::graph::launch(exec, self.stream.0) }
            .map_err(|e| self.name.failed(format!("launching the sequence: {e}")))
    }

    fn free_sequence(&self, sequence: SequenceId) -> Result<(), DeviceError> {
        let mut st = self.state()?;
        let exec = st.graphs.remove(&self.name, sequence.0)?.0;
        self.sync()?;
        // SAFETY: removed from the table above, no launch of it in flight.
        unsafe { result::graph::exec_destroy(exec) }
            .map_err(|e| self.name.failed(format!("freeing the sequence: {e}")))
    }

    /// One event before the first step and one after each; the run is waited for once,
    /// at the end.
    fn time_steps(&self, steps: &[LaunchStep]) -> Result<Vec<f64>, DeviceError> {
        let st = self.state()?;
        let events = Events::new(steps.len() + 1, &self.name)?;
        let stream = self.stream.0;
        let record = |e: CUevent| {
            // SAFETY: an event of this context, on the device's stream.
            unsafe { result::event::record(e, stream) }
                .map_err(|e| self.name.failed(format!("recording an event: {e}")))
        };
        record(events.0[0])?;
        for (s, &after) in steps.iter().zip(&events.0[1..]) {
            self.enqueue(&st, s.function, &s.args)?;
            record(after)?;
        }
        let last = *events.0.last().expect("one event at least");
        // SAFETY: recorded above; each pair is read once the last is complete.
        unsafe { result::event::synchronize(last) }
            .map_err(|e| self.name.failed(format!("waiting for the run: {e}")))?;
        events
            .0
            .windows(2)
            .map(|w| {
                // SAFETY: both recorded and complete.
                unsafe { result::event::elapsed(w[0], w[1]) }
                    .map(|ms| ms as f64 * 1e-3)
                    .map_err(|e| self.name.failed(format!("reading an event: {e}")))
            })
            .collect()
    }
}
