//! [`PluginDevice`]: a loaded plugin's device, seen by the core as a runtime `Device` —
//! the runtime's [`CallClient`] over a [`PluginChannel`], which passes each sealed
//! `DeviceCall` to the plugin's one `device_call` entry point. Every call crosses the
//! boundary with handles; only the copies carry data, and a copy to the host writes the
//! caller's memory directly.

use crate::{seal, unseal, LoadedPlugin};
use abi_stable::std_types::{RSlice, RSliceMut, RStr};
use tessera_runtime::device_call::{CallChannel, CallClient, DeviceAnswer, DeviceCall};
use tessera_runtime::{DeviceError, DeviceName};
use tessera_target::Target;

/// A device opened through a plugin.
pub type PluginDevice = CallClient<PluginChannel>;

/// The boundary to one device of a plugin: its handle in the plugin's table.
pub struct PluginChannel {
    plugin: LoadedPlugin,
    name: DeviceName,
    handle: u64,
}

impl std::fmt::Debug for PluginChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginChannel")
            .field("plugin", &self.plugin.name)
            .field("name", &self.name)
            .field("handle", &self.handle)
            .finish()
    }
}

impl PluginChannel {
    /// Opens `target`'s device through `plugin`.
    pub fn open(
        plugin: &LoadedPlugin,
        target: &Target,
    ) -> Result<PluginDevice, crate::PluginError> {
        let handle = (plugin.root.device_open())(RStr::from_str(&target.to_string()))
            .into_result()
            .map_err(|e| plugin.entry_err(e))?;
        let name = DeviceName::new(format!("{} (plugin `{}`)", target.kind, plugin.name));
        let channel = PluginChannel {
            plugin: plugin.clone(),
            name: name.clone(),
            handle,
        };
        Ok(CallClient::new(name, target.kind.clone(), channel))
    }
}

impl Drop for PluginChannel {
    fn drop(&mut self) {
        // A failed close (the plugin lost the handle) leaks the device, nothing worse.
        let _ = (self.plugin.root.device_close())(self.handle);
    }
}

impl CallChannel for PluginChannel {
    fn call(
        &self,
        call: &DeviceCall,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<DeviceAnswer, DeviceError> {
        let sealed = seal(call);
        let r = (self.plugin.root.device_call())(
            self.handle,
            RStr::from_str(&sealed),
            RSlice::from_slice(input),
            RSliceMut::from_mut_slice(output),
        );
        let text = r
            .into_result()
            .map_err(|e| self.name.failed(e.into_string()))?;
        unseal(text.as_str()).map_err(|e| self.name.failed(e.to_string()))
    }

    /// The plugin is in this process: an artifact's path is readable by it.
    fn ships_files(&self) -> bool {
        false
    }
}
