//! The OpenCL device behind the core's `Device`: buffers are `cl_mem` objects of the
//! device the target names ([`DeviceChoice`]: `-platform`, `-device-index`; by default
//! the first device of the first platform that has one), copies are blocking transfers on
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
use opencl3::device::{Device as ClDevice, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_CPU};
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
use tessera_target::{Artifact, LaunchDims, ParamSpec, Target, TargetKind};

/// What to install when there is no OpenCL.
pub const INSTALL_HINT: &str = "install an OpenCL ICD loader and a driver, e.g. \
    `apt-get install ocl-icd-libopencl1 pocl-opencl-icd` for the CPU's OpenCL device";

/// Which OpenCL device a target names (`opencl -platform=NVIDIA -device-index=0`):
/// `-platform`, a case-insensitive part of a platform's name or vendor (`NVIDIA`,
/// `Portable` for PoCL, `AMD`, `Intel`); `-device-index`, the device's position among
/// the devices of the platforms that match, from 0. Neither: the first device of the
/// first platform that has one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct DeviceChoice {
    pub platform: Option<String>,
    pub index: usize,
}

impl DeviceChoice {
    /// The choice of `target`'s options.
    pub fn of(target: &Target) -> Result<DeviceChoice, OpenClError> {
        let index = match target.option("device-index") {
            None => 0,
            Some(v) => v.parse::<usize>().map_err(|_| OpenClError::Target {
                target: target.to_string(),
                reason: format!("-device-index={v} is not a whole number (0 is the first)"),
            })?,
        };
        let platform = target.option("platform").map(str::to_string);
        if platform.as_deref() == Some("") {
            return Err(OpenClError::Target {
                target: target.to_string(),
                reason: "-platform= names no platform".into(),
            });
        }
        Ok(DeviceChoice { platform, index })
    }

    fn matches(&self, p: &Listed) -> bool {
        self.platform.as_ref().is_none_or(|want| {
            let want = want.to_lowercase();
            p.name.to_lowercase().contains(&want) || p.vendor.to_lowercase().contains(&want)
        })
    }
}

/// One platform as the ICD loader lists it: its name, vendor and devices (handle and
/// name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    pub name: String,
    pub vendor: String,
    pub devices: Vec<(usize, String)>,
}

/// Why [`pick`] finds no device: what the choice asked against what there is, then the
/// platforms and devices the ICD loader lists (`listing`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PickError {
    #[error("no OpenCL platform matches -platform={platform}; {listing}")]
    NoPlatform { platform: String, listing: String },
    #[error(
        "-device-index={index} but the platforms matching -platform={platform} have \
         {count} device(s); {listing}"
    )]
    PlatformIndex {
        platform: String,
        index: usize,
        count: usize,
        listing: String,
    },
    #[error("no OpenCL device on {platforms} platform(s); {listing}")]
    NoDevice { platforms: usize, listing: String },
    #[error("-device-index={index} but there are {count} device(s); {listing}")]
    Index {
        index: usize,
        count: usize,
        listing: String,
    },
}

/// The device `choice` names among `listed`: its handle and the platform's and device's
/// names; otherwise why not, with what there is.
pub fn pick(listed: &[Listed], choice: &DeviceChoice) -> Result<(usize, String), PickError> {
    let matching: Vec<&Listed> = listed.iter().filter(|p| choice.matches(p)).collect();
    let devices: Vec<(&Listed, &(usize, String))> = matching
        .iter()
        .flat_map(|p| p.devices.iter().map(move |d| (*p, d)))
        .collect();
    if let Some((p, (id, name))) = devices.get(choice.index) {
        return Ok((*id, format!("{name} ({})", p.name)));
    }
    let (index, count, listing) = (choice.index, devices.len(), describe(listed));
    Err(match &choice.platform {
        Some(want) if matching.is_empty() => PickError::NoPlatform {
            platform: want.clone(),
            listing,
        },
        Some(want) => PickError::PlatformIndex {
            platform: want.clone(),
            index,
            count,
            listing,
        },
        None if devices.is_empty() => PickError::NoDevice {
            platforms: listed.len(),
            listing,
        },
        None => PickError::Index {
            index,
            count,
            listing,
        },
    })
}

/// The platforms and devices there are, for an error message.
fn describe(listed: &[Listed]) -> String {
    if listed.is_empty() {
        return "the ICD loader lists no platform".into();
    }
    let platforms: Vec<String> = listed
        .iter()
        .map(|p| {
            let devices: Vec<&str> = p.devices.iter().map(|(_, n)| n.as_str()).collect();
            format!("`{}` ({}): [{}]", p.name, p.vendor, devices.join(", "))
        })
        .collect();
    format!(
        "the ICD loader lists {} (a platform missing here is not registered: an .icd file \
         naming its library belongs in /etc/OpenCL/vendors or a folder named by \
         OCL_ICD_VENDORS)",
        platforms.join("; ")
    )
}

/// Every platform and its devices, enumerated once per process (ICD loaders and drivers
/// do not all enumerate safely from several threads at once: PoCL answered "no device"
/// to a second thread asking while the first did).
fn listed() -> Result<&'static [Listed], OpenClError> {
    static LISTED: OnceLock<Result<Vec<Listed>, OpenClError>> = OnceLock::new();
    LISTED
        .get_or_init(enumerate)
        .as_ref()
        .map(Vec::as_slice)
        .map_err(Clone::clone)
}

fn no_device(reason: String) -> OpenClError {
    OpenClError::NoDevice {
        reason,
        hint: INSTALL_HINT,
    }
}

fn enumerate() -> Result<Vec<Listed>, OpenClError> {
    if !cl3::is_opencl_runtime_available() {
        return Err(no_device(
            "no OpenCL runtime: libOpenCL.so.1 could not be loaded".into(),
        ));
    }
    let platforms = get_platforms().map_err(|e| no_device(format!("no OpenCL platform ({e})")))?;
    Ok(platforms
        .iter()
        .map(|p| Listed {
            name: p.name().unwrap_or_else(|_| "?".into()),
            vendor: p.vendor().unwrap_or_else(|_| "?".into()),
            devices: p
                .get_devices(CL_DEVICE_TYPE_ALL)
                .unwrap_or_default()
                .into_iter()
                .map(|id| {
                    let name = ClDevice::new(id).name().unwrap_or_else(|_| "?".into());
                    (id as usize, name)
                })
                .collect(),
        })
        .collect())
}

/// The device `choice` names, and its name with its platform's.
pub fn select(choice: &DeviceChoice) -> Result<(ClDevice, String), OpenClError> {
    let listed = listed()?;
    let (id, name) = match pick(listed, choice) {
        Ok(found) => found,
        // nothing at all: what to install; a choice that names nothing: what there is
        Err(why) if *choice == DeviceChoice::default() => return Err(no_device(why.to_string())),
        Err(why) => return Err(OpenClError::NoSuchDevice(why.to_string())),
    };
    Ok((ClDevice::new(id as cl_device_id), name))
}

/// The first OpenCL device of the first platform that has one.
pub fn first_device() -> Result<ClDevice, OpenClError> {
    select(&DeviceChoice::default()).map(|(d, _)| d)
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
    /// A CPU device (PoCL's): it computes on the host's cores.
    on_host_cores: bool,
}

impl OpenClDevice {
    /// Opens the device `choice` names (see [`DeviceChoice`]) for targets of `kind`.
    pub fn open(kind: TargetKind, choice: &DeviceChoice) -> Result<OpenClDevice, OpenClError> {
        let (dev, described) = select(choice)?;
        let name = format!("opencl:{described}");
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
        // a device that cannot say its type is taken as the host's (the cautious answer)
        let on_host_cores = dev.dev_type().map_or(true, |t| t & CL_DEVICE_TYPE_CPU != 0);
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
            on_host_cores,
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

    fn describe(&self) -> String {
        self.name.as_str().to_string()
    }

    fn runs_on_host_cores(&self) -> bool {
        self.on_host_cores
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

#[cfg(test)]
mod tests {
    use super::*;

    fn listed() -> Vec<Listed> {
        let p = |name: &str, vendor: &str, devices: &[(usize, &str)]| Listed {
            name: name.into(),
            vendor: vendor.into(),
            devices: devices.iter().map(|&(i, n)| (i, n.to_string())).collect(),
        };
        vec![
            p(
                "Portable Computing Language",
                "The pocl project",
                &[(1, "cpu-x86-64")],
            ),
            p(
                "NVIDIA CUDA",
                "NVIDIA Corporation",
                &[(2, "H200"), (3, "H100")],
            ),
            p("Empty", "Nobody", &[]),
        ]
    }

    fn choice(platform: Option<&str>, index: usize) -> DeviceChoice {
        DeviceChoice {
            platform: platform.map(str::to_string),
            index,
        }
    }

    #[test]
    fn a_device_is_chosen_by_platform_and_index() {
        let l = listed();
        assert_eq!(pick(&l, &choice(None, 0)).unwrap().0, 1);
        assert_eq!(pick(&l, &choice(None, 2)).unwrap().0, 3);
        let (id, name) = pick(&l, &choice(Some("nvidia"), 0)).unwrap();
        assert_eq!((id, name.as_str()), (2, "H200 (NVIDIA CUDA)"));
        assert_eq!(pick(&l, &choice(Some("NVIDIA"), 1)).unwrap().0, 3);
        // by vendor too
        assert_eq!(pick(&l, &choice(Some("pocl"), 0)).unwrap().0, 1);
    }

    #[test]
    fn a_choice_that_names_nothing_lists_what_there_is() {
        let l = listed();
        let e = pick(&l, &choice(Some("AMD"), 0)).unwrap_err().to_string();
        assert!(
            e.contains("no OpenCL platform matches -platform=AMD"),
            "{e}"
        );
        assert!(
            e.contains("`NVIDIA CUDA` (NVIDIA Corporation): [H200, H100]"),
            "{e}"
        );
        assert!(e.contains("OCL_ICD_VENDORS"), "{e}");
        let e = pick(&l, &choice(Some("nvidia"), 2))
            .unwrap_err()
            .to_string();
        assert!(e.contains("have 2 device(s)"), "{e}");
        let e = pick(&l, &choice(None, 9)).unwrap_err().to_string();
        assert!(e.contains("there are 3 device(s)"), "{e}");
        let e = pick(&[], &choice(None, 0)).unwrap_err().to_string();
        assert!(e.contains("lists no platform"), "{e}");
    }

    #[test]
    fn target_options_are_read_or_refused() {
        let t = |s: &str| DeviceChoice::of(&Target::parse_any(s).unwrap());
        assert_eq!(t("opencl").unwrap(), DeviceChoice::default());
        assert_eq!(
            t("opencl -platform=NVIDIA -device-index=1").unwrap(),
            choice(Some("NVIDIA"), 1)
        );
        let e = t("opencl -device-index=first").unwrap_err().to_string();
        assert!(e.contains("-device-index=first"), "{e}");
    }
}
