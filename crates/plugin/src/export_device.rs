//! The plugin side of the device entry points: a table of the devices this library has
//! opened (handle → the plugin's `Device`), and `device_call`, which looks the device up
//! and answers one sealed `DeviceCall` with the runtime's dispatch (a panic becoming the
//! boundary's error string). Buffer, module and function handles are the device's own.

use crate::{guard, seal, unseal, EntryError};
use abi_stable::std_types::{RResult, RSlice, RSliceMut, RStr, RString};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use tessera_runtime::device_call::{answer, DeviceCall};
use tessera_runtime::Device;

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
        removed.map(drop).ok_or(EntryError::NoDevice(id))
    })
}

fn device(id: u64) -> Result<Arc<dyn Device>, EntryError> {
    let t = table().lock().unwrap_or_else(|e| e.into_inner());
    t.1.get(&id).cloned().ok_or(EntryError::NoDevice(id))
}

/// Answers one sealed `DeviceCall` on device `id` (`tessera_runtime::device_call::answer`),
/// a panic becoming the boundary's error; the answer sealed.
pub(crate) extern "C" fn call(
    id: u64,
    call: RStr<'_>,
    input: RSlice<'_, u8>,
    mut output: RSliceMut<'_, u8>,
) -> RResult<RString, RString> {
    guard("device_call", || {
        let call: DeviceCall = unseal(call.as_str())?;
        let d = device(id)?;
        // the core's artifacts are files on this machine: nothing is shipped to write
        let files = std::env::temp_dir();
        let a = answer(
            d.as_ref(),
            call,
            input.as_slice(),
            output.as_mut_slice(),
            &files,
        );
        Ok(RString::from(seal(&a)))
    })
}
