//! The plugin side of the device entry points: a table of the devices this library has
//! opened (handle → the plugin's `Device`), and one `extern "C"` function per `Device`
//! method that looks the device up, calls it, and turns its error (or a panic) into the
//! boundary's error string. Buffer, module and function handles are the device's own.

use crate::{guard, seal, unseal};
use abi_stable::std_types::{RResult, RSlice, RSliceMut, RStr, RString};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use tessera_runtime::{BufferId, Device, FunctionId, ModuleId, TimeEvaluator};
use tessera_target::{Artifact, LaunchDims};

type Table = Mutex<(u64, HashMap<u64, Arc<dyn Device>>)>;

fn table() -> &'static Table {
    static T: OnceLock<Table> = OnceLock::new();
    T.get_or_init(|| Mutex::new((0, HashMap::new())))
}

/// Keeps `device` for the core's later calls: its handle.
pub(crate) fn register(device: Arc<dyn Device>) -> u64 {
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    t.0 += 1;
    let id = t.0;
    t.1.insert(id, device);
    id
}

pub(crate) extern "C" fn close(id: u64) -> RResult<(), RString> {
    guard("device_close", || {
        // Taken out under the lock, dropped after it: a device's drop may take time.
        let removed = table()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .1
            .remove(&id);
        removed
            .map(drop)
            .ok_or_else(|| format!("no device with handle {id}"))
    })
}

fn device(id: u64) -> Result<Arc<dyn Device>, String> {
    let t = table().lock().unwrap_or_else(|e| e.into_inner());
    t.1.get(&id)
        .cloned()
        .ok_or_else(|| format!("no device with handle {id}"))
}

/// Calls `f` on device `id`, the plugin's error and panics becoming the boundary's.
fn with<T>(
    what: &str,
    id: u64,
    f: impl FnOnce(&dyn Device) -> Result<T, tessera_runtime::DeviceError>,
) -> RResult<T, RString> {
    guard(what, || {
        let d = device(id)?;
        f(d.as_ref()).map_err(|e| e.to_string())
    })
}

fn dims(text: RStr<'_>) -> Result<Option<LaunchDims>, String> {
    if text.is_empty() {
        Ok(None)
    } else {
        unseal(text.as_str()).map(Some).map_err(String::from)
    }
}

fn buffers(args: RSlice<'_, u64>) -> Vec<BufferId> {
    args.iter().map(|&b| BufferId(b)).collect()
}

fn size(d: &dyn Device, n: u64) -> Result<usize, tessera_runtime::DeviceError> {
    usize::try_from(n).map_err(|_| tessera_runtime::DeviceError::Failed {
        device: d.kind().to_string(),
        message: format!("{n} does not fit this machine's address space"),
    })
}

pub(crate) extern "C" fn alloc(id: u64, nbytes: u64) -> RResult<u64, RString> {
    with("device_alloc", id, |d| {
        d.alloc(size(d, nbytes)?).map(|b| b.0)
    })
}

pub(crate) extern "C" fn free(id: u64, buffer: u64) -> RResult<(), RString> {
    with("device_free", id, |d| d.free(BufferId(buffer)))
}

pub(crate) extern "C" fn copy_from_host(
    id: u64,
    buffer: u64,
    offset: u64,
    src: RSlice<'_, u8>,
) -> RResult<(), RString> {
    with("device_copy_from_host", id, |d| {
        d.copy_from_host(BufferId(buffer), size(d, offset)?, src.as_slice())
    })
}

pub(crate) extern "C" fn copy_to_host(
    id: u64,
    buffer: u64,
    offset: u64,
    mut dst: RSliceMut<'_, u8>,
) -> RResult<(), RString> {
    with("device_copy_to_host", id, |d| {
        d.copy_to_host(BufferId(buffer), size(d, offset)?, dst.as_mut_slice())
    })
}

pub(crate) extern "C" fn copy_on_device(
    id: u64,
    src: u64,
    dst: u64,
    nbytes: u64,
) -> RResult<(), RString> {
    with("device_copy_on_device", id, |d| {
        d.copy_on_device(BufferId(src), BufferId(dst), size(d, nbytes)?)
    })
}

pub(crate) extern "C" fn load_module(id: u64, artifact: RStr<'_>) -> RResult<u64, RString> {
    guard("device_load_module", || {
        let a: Artifact = unseal(artifact.as_str())?;
        let d = device(id)?;
        d.load_module(&a).map(|m| m.0).map_err(|e| e.to_string())
    })
}

pub(crate) extern "C" fn get_function(
    id: u64,
    module: u64,
    name: RStr<'_>,
) -> RResult<u64, RString> {
    with("device_get_function", id, |d| {
        d.get_function(ModuleId(module), name.as_str()).map(|f| f.0)
    })
}

pub(crate) extern "C" fn launch(
    id: u64,
    function: u64,
    args: RSlice<'_, u64>,
    launch_dims: RStr<'_>,
) -> RResult<(), RString> {
    guard("device_launch", || {
        let dims = dims(launch_dims)?;
        let d = device(id)?;
        d.launch(FunctionId(function), &buffers(args), dims.as_ref())
            .map_err(|e| e.to_string())
    })
}

pub(crate) extern "C" fn synchronize(id: u64) -> RResult<(), RString> {
    with("device_synchronize", id, |d| d.synchronize())
}

pub(crate) extern "C" fn time(
    id: u64,
    function: u64,
    args: RSlice<'_, u64>,
    launch_dims: RStr<'_>,
    config: RStr<'_>,
) -> RResult<RString, RString> {
    guard("device_time", || {
        let dims = dims(launch_dims)?;
        let evaluator: TimeEvaluator = unseal(config.as_str())?;
        let d = device(id)?;
        d.time(
            FunctionId(function),
            &buffers(args),
            dims.as_ref(),
            &evaluator,
        )
        .map(|t| RString::from(seal(&t)))
        .map_err(|e| e.to_string())
    })
}

pub(crate) extern "C" fn counters(id: u64) -> RResult<RString, RString> {
    with("device_counters", id, |d| d.counters()).map(|c| RString::from(seal(&c)))
}
