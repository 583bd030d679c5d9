//! The core's `Device` on the simulated board: buffers are allocations of the simulated
//! DRAM, which VTA and the board's CPU share (as on the Pynq). A module is either a VTA
//! program loaded from its file (for this device's configuration only) — a launch runs
//! it functionally, and `time` reports the cycle model's time at the board's clock (the
//! cycle model alone, without a warm-up: a program's cycles do not depend on its data
//! or on earlier calls; launches compute the values) — or a shared object of the CPU backend
//! for the layers VTA does not run, called on pointers into the DRAM and timed with the
//! host's clock. The counters of the last VTA launch and their sum since creation are
//! kept for reports.

use crate::builder::Program;
use crate::config::VtaConfig;
use crate::dram::Dram;
use crate::error::VtaError;
use crate::exec::Counters;
use crate::module::VtaModule;
use crate::sim::Simulator;
use std::sync::{Arc, Mutex};
use tessera_runtime::device::copy_range;
use tessera_runtime::timer::{TimeEvaluator, TimeResult};
use tessera_runtime::{
    BufferId, Device, DeviceCounters, DeviceError, DeviceName, FunctionId, Handles, Module,
    ModuleId,
};
use tessera_target::{Artifact, LaunchDims, TargetKind};

/// Simulated DRAM of a device: 1 GiB, a Pynq's.
pub const DRAM_BYTES: usize = 1 << 30;

/// A loaded kernel: a VTA program, or code for the board's CPU.
#[derive(Clone)]
enum Kernel {
    Vta(Arc<Program>),
    Cpu(Arc<Module>),
}

struct State {
    sim: Simulator,
    dram: Dram,
    /// Buffer handle → (physical address, bytes).
    buffers: Handles<(u64, usize)>,
    /// Loaded modules, and the functions looked up in them: entry and kernel.
    modules: Handles<(String, Kernel)>,
    functions: Handles<(String, Kernel)>,
    last: Counters,
}

/// A VTA simulator behind the core's `Device`.
pub struct VtaDevice {
    name: DeviceName,
    config: VtaConfig,
    state: Mutex<State>,
}

impl VtaDevice {
    pub fn new(config: VtaConfig) -> Result<VtaDevice, VtaError> {
        let sim = Simulator::new(config.clone())?;
        Ok(VtaDevice {
            name: DeviceName::new(format!("vta ({}, simulated)", config.name())),
            config,
            state: Mutex::new(State {
                sim,
                dram: Dram::new(DRAM_BYTES),
                buffers: Handles::new("buffer"),
                modules: Handles::new("module"),
                functions: Handles::new("function"),
                last: Counters::default(),
            }),
        })
    }

    pub fn config(&self) -> &VtaConfig {
        &self.config
    }

    /// The counters of the last launch or timed call, and their sum since creation.
    pub fn launch_counters(&self) -> (Counters, Counters) {
        let s = self.lock();
        (s.last, *s.sim.total())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn failed(&self, e: impl ToString) -> DeviceError {
        self.name.failed(e.to_string())
    }

    fn buffer(&self, s: &State, id: BufferId) -> Result<(u64, usize), DeviceError> {
        s.buffers.get(&self.name, id.0).copied()
    }

    fn function<'a>(
        &self,
        s: &'a State,
        f: FunctionId,
    ) -> Result<&'a (String, Kernel), DeviceError> {
        s.functions.get(&self.name, f.0)
    }

    /// Runs function `f` on `args`; a VTA program functionally or on the cycle model
    /// alone (its counters), a CPU kernel on the shared DRAM (no counters).
    fn run(
        &self,
        f: FunctionId,
        args: &[BufferId],
        functional: bool,
    ) -> Result<Option<Counters>, DeviceError> {
        let mut guard = self.lock();
        let s = &mut *guard;
        let bufs = args
            .iter()
            .map(|a| self.buffer(s, *a))
            .collect::<Result<Vec<_>, _>>()?;
        let (entry, kernel) = self.function(s, f)?.clone();
        let bad = |reason: String| self.name.bad_launch(&entry, reason);
        match kernel {
            Kernel::Vta(program) => {
                let addrs: Vec<u64> = bufs.iter().map(|b| b.0).collect();
                s.sim.set_functional(functional);
                let r = program.run(&mut s.sim, &mut s.dram, &addrs);
                s.sim.set_functional(true);
                let c = r.map_err(|e| bad(e.to_string()))?;
                s.last = c;
                Ok(Some(c))
            }
            Kernel::Cpu(m) => {
                let mut ptrs = Vec::with_capacity(bufs.len());
                for (addr, len) in bufs {
                    let p = s.dram.host_ptr(addr, len).map_err(|e| bad(e.to_string()))?;
                    ptrs.push((p.cast::<std::ffi::c_void>(), len));
                }
                // SAFETY: each pointer is a live allocation of the simulated DRAM (page
                // aligned, never moved) of its true size; the lock keeps every buffer
                // alive and untouched by other callers during the call.
                unsafe { m.call_sized(&ptrs) }.map_err(|e| bad(e.to_string()))?;
                Ok(None)
            }
        }
    }
}

impl Device for VtaDevice {
    fn kind(&self) -> TargetKind {
        TargetKind::new("vta")
    }

    /// The simulator's counters since the device was opened, every VTA launch and
    /// timed call included (the board's CPU kernels count nothing).
    fn counters(&self) -> Result<DeviceCounters, DeviceError> {
        Ok(DeviceCounters(self.lock().sim.total().named()))
    }

    fn alloc(&self, nbytes: usize) -> Result<BufferId, DeviceError> {
        let mut s = self.lock();
        let addr = s.dram.alloc(nbytes).map_err(|e| self.failed(e))?;
        Ok(BufferId(s.buffers.insert((addr, nbytes))))
    }

    fn free(&self, buffer: BufferId) -> Result<(), DeviceError> {
        let mut s = self.lock();
        let (addr, _) = s.buffers.remove(&self.name, buffer.0)?;
        s.dram.free(addr);
        Ok(())
    }

    fn copy_from_host(&self, dst: BufferId, offset: usize, src: &[u8]) -> Result<(), DeviceError> {
        let mut s = self.lock();
        let (addr, size) = self.buffer(&s, dst)?;
        let r = copy_range(self.name.as_str(), dst, offset, src.len(), size)?;
        s.dram
            .write(addr + r.start as u64, src)
            .map_err(|e| self.failed(e))
    }

    fn copy_to_host(
        &self,
        src: BufferId,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<(), DeviceError> {
        let s = self.lock();
        let (addr, size) = self.buffer(&s, src)?;
        let r = copy_range(self.name.as_str(), src, offset, dst.len(), size)?;
        let bytes = s
            .dram
            .read(addr + r.start as u64, dst.len())
            .map_err(|e| self.failed(e))?;
        dst.copy_from_slice(bytes);
        Ok(())
    }

    fn copy_on_device(
        &self,
        src: BufferId,
        dst: BufferId,
        nbytes: usize,
    ) -> Result<(), DeviceError> {
        let mut s = self.lock();
        let (from, fsize) = self.buffer(&s, src)?;
        let (to, tsize) = self.buffer(&s, dst)?;
        copy_range(self.name.as_str(), src, 0, nbytes, fsize)?;
        copy_range(self.name.as_str(), dst, 0, nbytes, tsize)?;
        let bytes = s
            .dram
            .read(from, nbytes)
            .map_err(|e| self.failed(e))?
            .to_vec();
        s.dram.write(to, &bytes).map_err(|e| self.failed(e))
    }

    fn load_module(&self, artifact: &Artifact) -> Result<ModuleId, DeviceError> {
        self.name.check_kind(artifact, &self.kind())?;
        let mut head = [0u8; 4];
        let elf = std::fs::File::open(&artifact.path)
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
            .is_ok()
            && head == *b"\x7fELF";
        let kernel = if elf {
            // code for the board's CPU, built by the CPU backend
            let cpu = Artifact {
                device: TargetKind::CPU,
                entry: tessera_backends::cpu::entry_symbol(&artifact.entry),
                ..artifact.clone()
            };
            Kernel::Cpu(Arc::new(Module::load(&cpu).map_err(|e| self.failed(e))?))
        } else {
            let m = VtaModule::read(&artifact.path).map_err(|e| self.failed(e))?;
            if m.config != self.config {
                return Err(self.failed(format!(
                    "`{}` was built for the VTA configuration {}, this device is {}",
                    m.entry,
                    m.config.name(),
                    self.config.name()
                )));
            }
            Kernel::Vta(Arc::new(m.program().map_err(|e| self.failed(e))?))
        };
        let mut s = self.lock();
        Ok(ModuleId(s.modules.insert((artifact.entry.clone(), kernel))))
    }

    fn get_function(&self, module: ModuleId, name: &str) -> Result<FunctionId, DeviceError> {
        let mut s = self.lock();
        let (entry, kernel) = s.modules.get(&self.name, module.0)?.clone();
        if entry != name {
            return Err(self.failed(format!("module {} has `{entry}`, not `{name}`", module.0)));
        }
        Ok(FunctionId(s.functions.insert((entry, kernel))))
    }

    fn launch(
        &self,
        function: FunctionId,
        args: &[BufferId],
        _dims: Option<&LaunchDims>,
    ) -> Result<(), DeviceError> {
        self.run(function, args, true).map(|_| ())
    }

    fn synchronize(&self) -> Result<(), DeviceError> {
        Ok(())
    }

    fn time(
        &self,
        function: FunctionId,
        args: &[BufferId],
        _dims: Option<&LaunchDims>,
        evaluator: &TimeEvaluator,
    ) -> Result<TimeResult, DeviceError> {
        let on_cpu = matches!(self.function(&self.lock(), function)?.1, Kernel::Cpu(_));
        if on_cpu {
            // a kernel of the board's CPU: the host's clock, after a warm-up
            self.run(function, args, true)?;
            return evaluator.evaluate(|| self.run(function, args, true).map(|_| ()));
        }
        // VTA's: the cycle model alone, which needs no warm-up (its time is the same at
        // every call) nor the values (launches compute them)
        let hz = self.config.clock_mhz as f64 * 1e6;
        let number = evaluator.number.max(1);
        let mut results = Vec::with_capacity(evaluator.repeat.max(1));
        for _ in 0..evaluator.repeat.max(1) {
            let mut cycles = 0;
            for _ in 0..number {
                cycles += self.run(function, args, false)?.map_or(0, |c| c.cycles);
            }
            results.push(cycles as f64 / number as f64 / hz);
        }
        Ok(TimeResult { results, number })
    }
}
