//! A client's session on a device server: the core's `Device` calls as messages, and the
//! worker process that answers them. Each session gets a worker of its own (`tessera rpc
//! worker`), so a kernel that crashes the device kills that worker and fails that
//! session only; the server stops a worker at its session's time limit.
//!
//! Between server and worker, a message is a frame: a little-endian `u32` length and that
//! much JSON, then a `u64` length and that many bytes of payload (the data of a copy to
//! or from the device, an artifact's file).

use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::sync::Arc;
use tessera_runtime::timer::{TimeEvaluator, TimeResult};
use tessera_runtime::{BufferId, Device, DeviceCounters, DeviceError, FunctionId, ModuleId};
use tessera_target::{Artifact, LaunchDims};

/// The largest JSON part of a frame.
const MAX_JSON: usize = 16 << 20;

/// One call of the `Device` interface.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum DeviceCall {
    Kind,
    Alloc {
        nbytes: usize,
    },
    Free {
        buffer: u64,
    },
    /// Payload: the bytes.
    CopyFromHost {
        dst: u64,
        offset: usize,
    },
    CopyToHost {
        src: u64,
        offset: usize,
        len: usize,
    },
    CopyOnDevice {
        src: u64,
        dst: u64,
        nbytes: usize,
    },
    /// Payload: the artifact's file; its paths are the worker's to choose.
    LoadModule {
        artifact: Artifact,
    },
    GetFunction {
        module: u64,
        name: String,
    },
    Launch {
        function: u64,
        args: Vec<u64>,
        dims: Option<LaunchDims>,
    },
    Synchronize,
    Time {
        function: u64,
        args: Vec<u64>,
        dims: Option<LaunchDims>,
        evaluator: TimeEvaluator,
    },
    Counters,
}

/// The answer to a call.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum DeviceAnswer {
    /// A handle, or the kind's name for `Kind`.
    Id(u64),
    Kind(String),
    /// Done; a copy to the host has its bytes as the payload.
    Done,
    Time(TimeResult),
    Counters(DeviceCounters),
    /// The device's error, as its text.
    Failed(String),
}

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

/// Answers one call on `device`; an artifact is written into `dir`.
fn answer(
    device: &Arc<dyn Device>,
    call: DeviceCall,
    payload: Vec<u8>,
    dir: &std::path::Path,
) -> (DeviceAnswer, Vec<u8>) {
    let done = |r: Result<(), DeviceError>| match r {
        Ok(()) => DeviceAnswer::Done,
        Err(e) => DeviceAnswer::Failed(e.to_string()),
    };
    let id = |r: Result<u64, DeviceError>| match r {
        Ok(v) => DeviceAnswer::Id(v),
        Err(e) => DeviceAnswer::Failed(e.to_string()),
    };
    let bufs = |v: &[u64]| v.iter().map(|&b| BufferId(b)).collect::<Vec<_>>();
    let a = match call {
        DeviceCall::Kind => DeviceAnswer::Kind(device.kind().name().to_string()),
        DeviceCall::Alloc { nbytes } => id(device.alloc(nbytes).map(|b| b.0)),
        DeviceCall::Free { buffer } => done(device.free(BufferId(buffer))),
        DeviceCall::CopyFromHost { dst, offset } => {
            done(device.copy_from_host(BufferId(dst), offset, &payload))
        }
        DeviceCall::CopyToHost { src, offset, len } => {
            let mut out = vec![0u8; len];
            return match device.copy_to_host(BufferId(src), offset, &mut out) {
                Ok(()) => (DeviceAnswer::Done, out),
                Err(e) => (DeviceAnswer::Failed(e.to_string()), Vec::new()),
            };
        }
        DeviceCall::CopyOnDevice { src, dst, nbytes } => {
            done(device.copy_on_device(BufferId(src), BufferId(dst), nbytes))
        }
        DeviceCall::LoadModule { mut artifact } => {
            let name = artifact
                .path
                .file_name()
                .map(|n| n.to_os_string())
                .unwrap_or_else(|| "artifact".into());
            let path = dir.join(name);
            match std::fs::write(&path, &payload) {
                Ok(()) => {
                    artifact.source_path = path.clone();
                    artifact.path = path;
                    id(device.load_module(&artifact).map(|m| m.0))
                }
                Err(e) => DeviceAnswer::Failed(format!("{}: {e}", path.display())),
            }
        }
        DeviceCall::GetFunction { module, name } => {
            id(device.get_function(ModuleId(module), &name).map(|f| f.0))
        }
        DeviceCall::Launch {
            function,
            args,
            dims,
        } => done(device.launch(FunctionId(function), &bufs(&args), dims.as_ref())),
        DeviceCall::Synchronize => done(device.synchronize()),
        DeviceCall::Time {
            function,
            args,
            dims,
            evaluator,
        } => {
            match device.time(
                FunctionId(function),
                &bufs(&args),
                dims.as_ref(),
                &evaluator,
            ) {
                Ok(t) => DeviceAnswer::Time(t),
                Err(e) => DeviceAnswer::Failed(e.to_string()),
            }
        }
        DeviceCall::Counters => match device.counters() {
            Ok(c) => DeviceAnswer::Counters(c),
            Err(e) => DeviceAnswer::Failed(e.to_string()),
        },
    };
    (a, Vec::new())
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
        let (a, out) = answer(&device, call, payload, dir.path());
        write_frame(&mut output, &a, &out)?;
    }
    Ok(())
}
