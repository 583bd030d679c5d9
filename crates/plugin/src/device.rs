//! [`PluginDevice`]: a loaded plugin's device, seen by the core as a runtime `Device`.
//! Every call crosses the boundary with handles; only the explicit copies carry data.

use crate::{seal, unseal, LoadedPlugin};
use abi_stable::std_types::{RResult, RSlice, RSliceMut, RStr, RString};
use tessera_runtime::{
    BufferId, Device, DeviceCounters, DeviceError, FunctionId, ModuleId, TimeEvaluator, TimeResult,
};
use tessera_target::{Artifact, LaunchDims, Target, TargetKind};

/// A device opened through a plugin.
pub struct PluginDevice {
    plugin: LoadedPlugin,
    kind: TargetKind,
    handle: u64,
}

impl std::fmt::Debug for PluginDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginDevice")
            .field("plugin", &self.plugin.name)
            .field("kind", &self.kind)
            .field("handle", &self.handle)
            .finish()
    }
}

impl PluginDevice {
    /// Opens `target`'s device through `plugin`.
    pub fn open(
        plugin: &LoadedPlugin,
        target: &Target,
    ) -> Result<PluginDevice, crate::PluginError> {
        let handle = (plugin.root.device_open())(RStr::from_str(&target.to_string()))
            .into_result()
            .map_err(|e| plugin.entry_err(e))?;
        Ok(PluginDevice {
            plugin: plugin.clone(),
            kind: target.kind.clone(),
            handle,
        })
    }

    fn err(&self, e: RString) -> DeviceError {
        DeviceError::Failed {
            device: format!("{} (plugin `{}`)", self.kind, self.plugin.name),
            message: e.into_string(),
        }
    }

    fn done<T>(&self, r: RResult<T, RString>) -> Result<T, DeviceError> {
        r.into_result().map_err(|e| self.err(e))
    }
}

impl Drop for PluginDevice {
    fn drop(&mut self) {
        // A failed close (the plugin lost the handle) leaks the device, nothing worse.
        let _ = (self.plugin.root.device_close())(self.handle);
    }
}

fn sealed_dims(dims: Option<&LaunchDims>) -> String {
    dims.map(seal).unwrap_or_default()
}

fn handles(args: &[BufferId]) -> Vec<u64> {
    args.iter().map(|b| b.0).collect()
}

impl Device for PluginDevice {
    fn kind(&self) -> TargetKind {
        self.kind.clone()
    }

    fn alloc(&self, nbytes: usize) -> Result<BufferId, DeviceError> {
        let r = (self.plugin.root.device_alloc())(self.handle, nbytes as u64);
        self.done(r).map(BufferId)
    }

    fn free(&self, buffer: BufferId) -> Result<(), DeviceError> {
        let r = (self.plugin.root.device_free())(self.handle, buffer.0);
        self.done(r)
    }

    fn copy_from_host(&self, dst: BufferId, offset: usize, src: &[u8]) -> Result<(), DeviceError> {
        let r = (self.plugin.root.device_copy_from_host())(
            self.handle,
            dst.0,
            offset as u64,
            RSlice::from_slice(src),
        );
        self.done(r)
    }

    fn copy_to_host(
        &self,
        src: BufferId,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<(), DeviceError> {
        let r = (self.plugin.root.device_copy_to_host())(
            self.handle,
            src.0,
            offset as u64,
            RSliceMut::from_mut_slice(dst),
        );
        self.done(r)
    }

    fn copy_on_device(
        &self,
        src: BufferId,
        dst: BufferId,
        nbytes: usize,
    ) -> Result<(), DeviceError> {
        let r =
            (self.plugin.root.device_copy_on_device())(self.handle, src.0, dst.0, nbytes as u64);
        self.done(r)
    }

    fn load_module(&self, artifact: &Artifact) -> Result<ModuleId, DeviceError> {
        if artifact.device != self.kind {
            return Err(DeviceError::WrongKind {
                device: self.kind.to_string(),
                entry: artifact.entry.clone(),
                artifact_kind: artifact.device.clone(),
            });
        }
        let a = seal(artifact);
        let r = (self.plugin.root.device_load_module())(self.handle, RStr::from_str(&a));
        self.done(r).map(ModuleId)
    }

    fn get_function(&self, module: ModuleId, name: &str) -> Result<FunctionId, DeviceError> {
        let r =
            (self.plugin.root.device_get_function())(self.handle, module.0, RStr::from_str(name));
        self.done(r).map(FunctionId)
    }

    fn launch(
        &self,
        function: FunctionId,
        args: &[BufferId],
        dims: Option<&LaunchDims>,
    ) -> Result<(), DeviceError> {
        let (a, d) = (handles(args), sealed_dims(dims));
        let r = (self.plugin.root.device_launch())(
            self.handle,
            function.0,
            RSlice::from_slice(&a),
            RStr::from_str(&d),
        );
        self.done(r)
    }

    fn synchronize(&self) -> Result<(), DeviceError> {
        let r = (self.plugin.root.device_synchronize())(self.handle);
        self.done(r)
    }

    fn counters(&self) -> Result<DeviceCounters, DeviceError> {
        let r = (self.plugin.root.device_counters())(self.handle);
        unseal(self.done(r)?.as_str()).map_err(|message| DeviceError::Failed {
            device: self.kind.to_string(),
            message: message.to_string(),
        })
    }

    /// Timed on the plugin's side, with the device's own timer if it has one.
    fn time(
        &self,
        function: FunctionId,
        args: &[BufferId],
        dims: Option<&LaunchDims>,
        evaluator: &TimeEvaluator,
    ) -> Result<TimeResult, DeviceError> {
        let (a, d) = (handles(args), sealed_dims(dims));
        let c = seal(evaluator);
        let r = (self.plugin.root.device_time())(
            self.handle,
            function.0,
            RSlice::from_slice(&a),
            RStr::from_str(&d),
            RStr::from_str(&c),
        );
        let timing: TimeResult =
            unseal(self.done(r)?.as_str()).map_err(|message| DeviceError::Failed {
                device: self.kind.to_string(),
                message: message.to_string(),
            })?;
        // A plugin's timings are checked like any input: one finite, non-negative time
        // per repeat, and at least the calls per repeat that were asked for.
        let repeats = evaluator.repeat;
        let sane = timing.results.len() == repeats
            && timing.results.iter().all(|t| t.is_finite() && *t >= 0.0)
            && timing.number >= evaluator.number.max(1);
        if !sane {
            return Err(DeviceError::Failed {
                device: self.kind.to_string(),
                message: format!(
                    "the plugin's timer returned {:?} with {} calls per repeat for {repeats} repeats of at least {} calls",
                    timing.results,
                    timing.number,
                    evaluator.number.max(1)
                ),
            });
        }
        Ok(timing)
    }
}
