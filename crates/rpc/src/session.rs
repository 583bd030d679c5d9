//! A client's session on a device server: the core's `Device` calls as messages (the
//! runtime's `DeviceCall`, which a plugin's boundary carries too), and the worker process
//! that answers them with the runtime's dispatch. Each session gets a worker of its own (`tessera rpc
//! worker`), so a kernel that crashes the device kills that worker and fails that
//! session only; the server stops a worker at its session's time limit.
//!
//! Between server and worker, a message is a frame: a little-endian `u32` length and that
//! much JSON, then a `u64` length and that many bytes of payload (the data of a copy to
//! or from the device, an artifact's file).

use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::sync::Arc;
use tessera_runtime::device_call::answer;
use tessera_runtime::Device;

/// The largest JSON part of a frame.
const MAX_JSON: usize = 16 << 20;

pub use tessera_runtime::device_call::{DeviceAnswer, DeviceCall};

/// Writes one frame.
pub fn write_frame<T: Serialize>(
    w: &mut impl Write,
    msg: &T,
    payload: &[u8],
) -> std::io::Result<()> {
    let json = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
    w.write_all(&(json.len() as u32).to_le_bytes())?;
    w.write_all(&json)?;
    w.write_all(&(payload.len() as u64).to_le_bytes())?;
    w.write_all(payload)?;
    w.flush()
}

/// Reads one frame; `None` at the end of the stream.
pub fn read_frame<T: for<'de> Deserialize<'de>>(
    r: &mut impl Read,
    max_payload: usize,
) -> std::io::Result<Option<(T, Vec<u8>)>> {
    let mut n4 = [0u8; 4];
    match r.read_exact(&mut n4) {
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        other => other?,
    }
    let n = u32::from_le_bytes(n4) as usize;
    if n > MAX_JSON {
        return Err(std::io::Error::other(format!("a message of {n} bytes")));
    }
    let mut json = vec![0u8; n];
    r.read_exact(&mut json)?;
    let mut n8 = [0u8; 8];
    r.read_exact(&mut n8)?;
    let m = u64::from_le_bytes(n8) as usize;
    if m > max_payload {
        return Err(std::io::Error::other(format!("a payload of {m} bytes")));
    }
    let mut payload = vec![0u8; m];
    r.read_exact(&mut payload)?;
    let msg = serde_json::from_slice(&json).map_err(std::io::Error::other)?;
    Ok(Some((msg, payload)))
}

/// The worker's loop: answers the calls read from `input` on `device` until the input
/// ends. Artifacts are written into a temporary folder of its own.
pub fn serve_worker(
    device: Arc<dyn Device>,
    mut input: impl Read,
    mut output: impl Write,
) -> std::io::Result<()> {
    let dir = tempfile::tempdir()?;
    while let Some((call, payload)) =
        read_frame::<DeviceCall>(&mut input, crate::MAX_MESSAGE_BYTES)?
    {
        let mut out = vec![0u8; call.output_len()];
        let a = answer(device.as_ref(), call, &payload, &mut out, dir.path());
        if matches!(a, DeviceAnswer::Failed(_)) {
            out.clear();
        }
        write_frame(&mut output, &a, &out)?;
    }
    Ok(())
}
