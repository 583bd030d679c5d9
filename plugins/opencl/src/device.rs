//! The OpenCL device behind the core's `Device`: buffers are `cl_mem` objects of the
//! first device of the first platform that has one, copies are blocking transfers on
//! one in-order queue with profiling on, a module is a program built from its source
//! when loaded (the compiler's build log in the error; programs cached by source, so a
//! network's identical kernels build once), a function is its kernels (created once
//! and kept), and a launch enqueues them in order with their own grid and block sizes.
//! [`Device::time`] uses the profiling events: each repeat is measured from the first
//! kernel's start to the last kernel's end, on the device's clock; so does
//! [`Device::time_steps`], for each step of a run. A launch sequence is a replay list
//! (`RecordedSequences`): one call from the core per run.

use crate::error::OpenClError;
use crate::module::DeviceModule;
use opencl3::command_queue::{CommandQueue, CL_QUEUE_PROFILING_ENABLE};
use opencl3::context::Context;
use opencl3::device::{Device as ClDevice, CL_DEVICE_TYPE_ALL};
use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, ClMem, CL_MEM_READ_WRITE};
use opencl3::platform::get_platforms;
use opencl3::program::Program;
use opencl3::types::{cl_device_id, cl_mem, CL_BLOCKING};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use tessera_runtime::device::{copy_range, launch_args};
use tessera_runtime::timer::{TimeEvaluator, TimeResult};
use tessera_runtime::{
    BufferId, Device, DeviceError, DeviceName, FunctionId, Handles, LaunchStep, ModuleId,
    RecordedSequences, SequenceId,
};
use tessera_target::{Artifact, LaunchDims, ParamSpec, TargetKind};

/// What to install when there is no OpenCL.
pub const INSTALL_HINT: &str = "install an OpenCL ICD loader and a driver, e.g. \
    `apt-get install ocl-icd-libopencl1 pocl-opencl-icd` for the CPU's OpenCL device";

/// The first OpenCL device of the first platform that has one, looked up once per
/// process (ICD loaders and drivers do not all enumerate safely from several threads at
/// once: PoCL answered "no device" to a second thread asking while the first did).
pub fn first_device() -> Result<ClDevice, OpenClError> {
    static FOUND: OnceLock<Result<usize, OpenClError>> = OnceLock::new();
    FOUND
        .get_or_init(|| find_device().map(|d| d.id() as usize))
        .clone()
        .map(|id| ClDevice::new(id as cl_device_id))
}

fn find_device() -> Result<ClDevice, OpenClError> {
    let none = |reason: String| OpenClError::NoDevice {
        reason,
        hint: INSTALL_HINT,
    };
    if !cl3::is_opencl_runtime_available() {
        return Err(none(
            "no OpenCL runtime: libOpenCL.so.1 could not be loaded".into(),
        ));
    }
    let platforms = get_platforms().map_err(|e| none(format!("no OpenCL platform ({e})")))?;
    for p in &platforms {
        if let Ok(ids) = p.get_devices(CL_DEVICE_TYPE_ALL) {
            if let Some(id) = ids.first() {
                return Ok(ClDevice::new(*id));
            }
        }
    }
    Err(none(format!(
        "no OpenCL device on {} platform(s)",
        platforms.len()
    )))
}

struct LoadedModule {
    module: DeviceModule,
    params: Vec<ParamSpec>,
    entry: String,
    program: Arc<Program>,
    workspaces: Vec<Buffer<u8>>,
}

struct Function {
    module: u64,
    kernels: Vec<Kernel>,
}

struct State {
    buffers: Handles<(Buffer<u8>, usize)>,
    modules: Handles<LoadedModule>,
    functions: Handles<Function>,
    programs: HashMap<String, Arc<Program>>,
}

impl Default for State {
    fn default() -> State {
        State {
            buffers: Handles::new("buffer"),
            modules: Handles::new("module"),
            functions: Handles::new("function"),
            programs: HashMap::new(),
        }
    }
}

/// An OpenCL device.
pub struct OpenClDevice {
    name: DeviceName,
    kind: TargetKind,
    context: Context,
    queue: CommandQueue,
    state: Mutex<State>,
    sequences: RecordedSequences,
}

impl OpenClDevice {
    /// Opens the first OpenCL device (see [`first_device`]) for targets of `kind`.
    pub fn open(kind: TargetKind) -> Result<OpenClDevice, OpenClError> {
        let dev = first_device()?;
        let name = format!(
            "opencl:{}",
            dev.name().unwrap_or_else(|_| "unknown device".into())
        );
        let driver = |action: &'static str, e: &dyn std::fmt::Display| OpenClError::Driver {
            device: name.clone(),
            action,
            reason: e.to_string(),
        };
        let context = Context::from_device(&dev).map_err(|e| driver("create a context", &e))?;
        let queue =
            CommandQueue::create_default_with_properties(&context, CL_QUEUE_PROFILING_ENABLE, 0)
                .map_err(|e| driver("create a command queue", &e))?;
        let platform = dev
            .platform()
            .ok()
            .and_then(|p| opencl3::platform::Platform::new(p).name().ok())
            .unwrap_or_else(|| "an unknown platform".into());
        tracing::info!(
            device = %dev.name().unwrap_or_default(),
            vendor = %dev.vendor().unwrap_or_default(),
            platform = %platform,
            "opened the OpenCL device"
        );
        Ok(OpenClDevice {
            name: DeviceName::new(name),
            kind,
            context,
            queue,
            state: Mutex::new(State::default()),
            sequences: RecordedSequences::default(),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn new_buffer(&self, nbytes: usize) -> Result<Buffer<u8>, DeviceError> {
        // SAFETY: no host pointer is passed; OpenCL owns the memory.
        unsafe {
            Buffer::<u8>::create(
                &self.context,
                CL_MEM_READ_WRITE,
                nbytes.max(1),
                std::ptr::null_mut(),
            )
        }
        .map_err(|e| {
            self.name
                .failed(format!("cannot allocate {nbytes} bytes: {e}"))
        })
    }

    /// Enqueues every kernel of `function` once; returns the first kernel's event and
    /// the last one's when there are several.
    fn enqueue(
        &self,
        st: &mut State,
        function: FunctionId,
        args: &[BufferId],
    ) -> Result<(Event, Option<Event>), DeviceError> {
        let f = st.functions.get(&self.name, function.0)?;
        let m = st.modules.get(&self.name, f.module)?;
        let mut mems: Vec<cl_mem> =
            launch_args(self.name.as_str(), &m.entry, &m.params, args, |b| {
                st.buffers.find(b.0).map(|(buf, size)| (buf.get(), *size))
            })?;
        mems.extend(m.workspaces.iter().map(|w| w.get()));
        let mut first = None;
        let mut last = None;
        for (k, launch) in f.kernels.iter().zip(&m.module.kernels) {
            for (j, &i) in launch.args.iter().enumerate() {
                let mem = mems.get(i).ok_or_else(|| {
                    self.name
                        .bad_launch(&m.entry, format!("kernel argument {i} does not exist"))
                })?;
                // SAFETY: the argument is a live cl_mem of this context, as the kernel's
                // parameter `j` expects (both come from the same module description).
                unsafe { k.set_arg(j as u32, mem) }.map_err(|e| {
                    self.name
                        .failed(format!("{}: argument {j}: {e}", launch.name))
                })?;
            }
            let local = launch.block.map(|x| x as usize);
            let global: Vec<usize> = (0..3).map(|d| launch.grid[d] as usize * local[d]).collect();
            // SAFETY: three-dimensional sizes, every argument set above.
            let ev = unsafe {
                self.queue.enqueue_nd_range_kernel(
                    k.get(),
                    3,
                    std::ptr::null(),
                    global.as_ptr(),
                    local.as_ptr(),
                    &[],
                )
            }
            .map_err(|e| {
                self.name
                    .failed(format!("{}: launch failed: {e}", launch.name))
            })?;
            if first.is_none() {
                first = Some(ev);
            } else {
                last = Some(ev);
            }
        }
        let first =
            first.ok_or_else(|| self.name.failed(format!("`{}` has no kernel", m.entry)))?;
        Ok((first, last))
    }

    /// The device's nanoseconds from `start`'s start to `end`'s end, once `end` is done.
    fn span(&self, start: &Event, end: &Event) -> Result<f64, DeviceError> {
        end.wait()
            .map_err(|e| self.name.failed(format!("waiting for the kernels: {e}")))?;
        let profiled = |r: Result<u64, _>| {
            r.map_err(|e: opencl3::error_codes::ClError| {
                self.name.failed(format!("profiling: {e}"))
            })
        };
        let t0 = profiled(start.profiling_command_start())?;
        let t1 = profiled(end.profiling_command_end())?;
        Ok(t1.saturating_sub(t0) as f64 * 1e-9)
    }
}

impl Device for OpenClDevice {
    fn kind(&self) -> TargetKind {
        self.kind.clone()
    }

    fn alloc(&self, nbytes: usize) -> Result<BufferId, DeviceError> {
        let b = self.new_buffer(nbytes)?;
        let mut st = self.state();
        Ok(BufferId(st.buffers.insert((b, nbytes))))
    }

    fn free(&self, buffer: BufferId) -> Result<(), DeviceError> {
        self.state()
            .buffers
            .remove(&self.name, buffer.0)
            .map(|_| ())
    }

    fn copy_from_host(&self, dst: BufferId, offset: usize, src: &[u8]) -> Result<(), DeviceError> {
        let mut st = self.state();
        let (b, size) = st.buffers.get_mut(&self.name, dst.0)?;
        copy_range(self.name.as_str(), dst, offset, src.len(), *size)?;
        if src.is_empty() {
            return Ok(());
        }
        // SAFETY: a blocking write of `src` within the buffer's bounds (checked above).
        unsafe {
            self.queue
                .enqueue_write_buffer(b, CL_BLOCKING, offset, src, &[])
        }
        .map(|_| ())
        .map_err(|e| self.name.failed(format!("copy to buffer {}: {e}", dst.0)))
    }

    fn copy_to_host(
        &self,
        src: BufferId,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<(), DeviceError> {
        let st = self.state();
        let (b, size) = st.buffers.get(&self.name, src.0)?;
        copy_range(self.name.as_str(), src, offset, dst.len(), *size)?;
        if dst.is_empty() {
            return Ok(());
        }
        // SAFETY: a blocking read into `dst` within the buffer's bounds (checked above).
        unsafe {
            self.queue
                .enqueue_read_buffer(b, CL_BLOCKING, offset, dst, &[])
        }
        .map(|_| ())
        .map_err(|e| self.name.failed(format!("copy from buffer {}: {e}", src.0)))
    }

    fn copy_on_device(
        &self,
        src: BufferId,
        dst: BufferId,
        nbytes: usize,
    ) -> Result<(), DeviceError> {
        let mut st = self.state();
        let src_size = st.buffers.get(&self.name, src.0)?.1;
        copy_range(self.name.as_str(), src, 0, nbytes, src_size)?;
        if src == dst || nbytes == 0 {
            return Ok(());
        }
        let (mut d, dst_size) = st.buffers.remove(&self.name, dst.0)?;
        let r = copy_range(self.name.as_str(), dst, 0, nbytes, dst_size).and_then(|_| {
            let s = &st.buffers.get(&self.name, src.0)?.0;
            // SAFETY: both ranges are within their buffers (checked above).
            unsafe { self.queue.enqueue_copy_buffer(s, &mut d, 0, 0, nbytes, &[]) }
                .and_then(|e| e.wait())
                .map_err(|e| self.name.failed(format!("copy on device: {e}")))
        });
        st.buffers.put_back(dst.0, (d, dst_size));
        r
    }

    fn load_module(&self, artifact: &Artifact) -> Result<ModuleId, DeviceError> {
        self.name.check_kind(artifact, &self.kind)?;
        let module =
            DeviceModule::read(&artifact.path).map_err(|m| self.name.failed(m.to_string()))?;
        let cached = self.state().programs.get(&module.source).cloned();
        let program = match cached {
            Some(p) => p,
            None => {
                let p = Program::create_and_build_from_source(&self.context, &module.source, "")
                    .map_err(|log| {
                        self.name.failed(format!(
                            "building `{}` failed (OpenCL build log follows):\n{log}",
                            artifact.entry
                        ))
                    })?;
                let p = Arc::new(p);
                self.state()
                    .programs
                    .insert(module.source.clone(), p.clone());
                p
            }
        };
        let workspaces = module
            .workspaces
            .iter()
            .map(|w| self.new_buffer(w.bytes as usize))
            .collect::<Result<Vec<_>, _>>()?;
        let mut st = self.state();
        let id = st.modules.insert(LoadedModule {
            module,
            params: artifact.params.clone(),
            entry: artifact.entry.clone(),
            program,
            workspaces,
        });
        Ok(ModuleId(id))
    }

    fn get_function(&self, module: ModuleId, name: &str) -> Result<FunctionId, DeviceError> {
        let mut st = self.state();
        let m = st.modules.get(&self.name, module.0)?;
        if m.entry != name {
            return Err(self.name.failed(format!(
                "module {} has no function `{name}` (it holds `{}`)",
                module.0, m.entry
            )));
        }
        let kernels = m
            .module
            .kernels
            .iter()
            .map(|k| {
                Kernel::create(&m.program, &k.name)
                    .map_err(|e| self.name.failed(format!("kernel `{}`: {e}", k.name)))
            })
            .collect::<Result<Vec<_>, _>>()?;
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
        let mut st = self.state();
        self.enqueue(&mut st, function, args).map(|_| ())
    }

    fn synchronize(&self) -> Result<(), DeviceError> {
        self.queue
            .finish()
            .map_err(|e| self.name.failed(format!("synchronize: {e}")))
    }

    fn time(
        &self,
        function: FunctionId,
        args: &[BufferId],
        _dims: Option<&LaunchDims>,
        evaluator: &TimeEvaluator,
    ) -> Result<TimeResult, DeviceError> {
        evaluator.evaluate_with(|n| {
            let mut st = self.state();
            let mut start: Option<Event> = None;
            let mut end: Option<Event> = None;
            for _ in 0..n {
                let (first, last) = self.enqueue(&mut st, function, args)?;
                match start {
                    None => {
                        start = Some(first);
                        end = last;
                    }
                    Some(_) => end = Some(last.unwrap_or(first)),
                }
            }
            drop(st);
            let Some(start) = start else {
                return Ok(0.0);
            };
            self.span(&start, end.as_ref().unwrap_or(&start))
        })
    }

    fn record_sequence(&self, steps: &[LaunchStep]) -> Result<Option<SequenceId>, DeviceError> {
        let st = self.state();
        let known = |f: FunctionId| st.functions.find(f.0).is_some();
        self.sequences.record(&self.name, steps, known).map(Some)
    }

    fn run_sequence(&self, sequence: SequenceId) -> Result<(), DeviceError> {
        self.sequences.replay(&self.name, self, sequence)
    }

    fn free_sequence(&self, sequence: SequenceId) -> Result<(), DeviceError> {
        self.sequences.free(&self.name, sequence)
    }

    /// Every step enqueued without a wait in between, then each one's span from its
    /// profiling events.
    fn time_steps(&self, steps: &[LaunchStep]) -> Result<Vec<f64>, DeviceError> {
        let mut events = Vec::with_capacity(steps.len());
        {
            let mut st = self.state();
            for s in steps {
                events.push(self.enqueue(&mut st, s.function, &s.args)?);
            }
        }
        events
            .iter()
            .map(|(first, last)| self.span(first, last.as_ref().unwrap_or(first)))
            .collect()
    }
}
