//! The core's `Device` on a server of a tracker's key: a server is leased from the
//! tracker, a session opened on it (a worker process of its own), and every `Device`
//! call becomes one `Call` with a deadline. Dropping the device closes the session and
//! gives the server back. Data crosses only in the copies, as with a local device.

use crate::client::{Lease, TrackerClient};
use crate::error::RpcError;
use crate::proto::device_session_client::DeviceSessionClient;
use crate::proto::{CallRequest, CloseRequest, OpenRequest};
use crate::session::{DeviceAnswer, DeviceCall};
use crate::MAX_MESSAGE_BYTES;
use std::sync::Mutex;
use std::time::Duration;
use tessera_runtime::timer::{TimeEvaluator, TimeResult};
use tessera_runtime::{
    BufferId, Device, DeviceCounters, DeviceError, DeviceName, FunctionId, ModuleId,
};
use tessera_target::{Artifact, LaunchDims, TargetKind};
use tonic::transport::{Channel, Endpoint};

/// A device on a remote server.
pub struct RemoteDevice {
    name: DeviceName,
    kind: TargetKind,
    token: String,
    session: u64,
    timeout: Duration,
    rt: tokio::runtime::Runtime,
    grpc: Mutex<DeviceSessionClient<Channel>>,
    tracker: Mutex<TrackerClient>,
    lease: Lease,
}

impl RemoteDevice {
    /// Leases a server of `key` from the tracker (waiting at most `wait`) and opens a
    /// session of at most `limit` on it; `timeout` bounds each call.
    pub fn open(
        tracker_addr: &str,
        key: &str,
        token: &str,
        wait: Duration,
        limit: Duration,
    ) -> Result<RemoteDevice, RpcError> {
        let mut tracker = TrackerClient::connect(tracker_addr, token, Duration::from_secs(5))?;
        let lease = tracker.request(key, 0, wait)?;
        let opened = Self::open_session(&lease, token, limit);
        match opened {
            Ok((rt, grpc, session, kind)) => Ok(RemoteDevice {
                name: DeviceName::new(format!("rpc:{key}@{}", lease.addr)),
                kind: TargetKind::new(&kind),
                token: token.to_string(),
                session,
                timeout: limit,
                rt,
                grpc: Mutex::new(grpc),
                tracker: Mutex::new(tracker),
                lease,
            }),
            Err(e) => {
                let _ = tracker.release(&lease);
                Err(e)
            }
        }
    }

    #[allow(clippy::type_complexity)]
    fn open_session(
        lease: &Lease,
        token: &str,
        limit: Duration,
    ) -> Result<
        (
            tokio::runtime::Runtime,
            DeviceSessionClient<Channel>,
            u64,
            String,
        ),
        RpcError,
    > {
        let server = |message: String| RpcError::Server {
            addr: lease.addr.clone(),
            message,
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| RpcError::Runtime(e.to_string()))?;
        let endpoint = Endpoint::from_shared(format!("http://{}", lease.addr))
            .map_err(|e| server(e.to_string()))?
            .connect_timeout(Duration::from_secs(5));
        let channel = rt
            .block_on(endpoint.connect())
            .map_err(|e| server(e.to_string()))?;
        let mut grpc = DeviceSessionClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        let req = OpenRequest {
            token: token.to_string(),
            limit_ms: limit.as_millis() as u64,
        };
        let reply = rt
            .block_on(async { tokio::time::timeout(Duration::from_secs(60), grpc.open(req)).await })
            .map_err(|_| server("opening a session: no answer within 60 s".into()))?
            .map_err(|s| match s.code() {
                tonic::Code::Unauthenticated => RpcError::WrongToken {
                    addr: lease.addr.clone(),
                },
                _ => server(format!("opening a session: {}", s.message())),
            })?
            .into_inner();
        Ok((rt, grpc, reply.session, reply.kind))
    }

    fn failed(&self, message: impl Into<String>) -> DeviceError {
        self.name.failed(message)
    }

    /// One call; the device's own error comes back as `Failed` with its text.
    fn call(
        &self,
        call: DeviceCall,
        payload: Vec<u8>,
    ) -> Result<(DeviceAnswer, Vec<u8>), DeviceError> {
        let req = CallRequest {
            token: self.token.clone(),
            session: self.session,
            call_json: serde_json::to_string(&call).map_err(|e| self.failed(e.to_string()))?,
            payload,
        };
        let mut g = self.grpc.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let reply = self
            .rt
            .block_on(async { tokio::time::timeout(self.timeout, g.call(req)).await })
            .map_err(|_| self.failed(format!("no answer within {} s", self.timeout.as_secs())))?
            .map_err(|s| self.failed(s.message().to_string()))?
            .into_inner();
        let answer: DeviceAnswer =
            serde_json::from_str(&reply.answer_json).map_err(|e| self.failed(e.to_string()))?;
        match answer {
            DeviceAnswer::Failed(m) => Err(self.failed(m)),
            a => Ok((a, reply.payload)),
        }
    }

    fn id(&self, call: DeviceCall, payload: Vec<u8>) -> Result<u64, DeviceError> {
        match self.call(call, payload)?.0 {
            DeviceAnswer::Id(v) => Ok(v),
            other => Err(self.failed(format!("unexpected answer {other:?}"))),
        }
    }

    fn done(&self, call: DeviceCall, payload: Vec<u8>) -> Result<(), DeviceError> {
        self.call(call, payload).map(|_| ())
    }
}

impl Drop for RemoteDevice {
    fn drop(&mut self) {
        let req = CloseRequest {
            token: self.token.clone(),
            session: self.session,
        };
        let mut g = self.grpc.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let _ = self
            .rt
            .block_on(async { tokio::time::timeout(Duration::from_secs(5), g.close(req)).await });
        let mut t = self.tracker.lock().unwrap_or_else(|e| e.into_inner());
        let _ = t.release(&self.lease);
    }
}

fn ids(v: &[BufferId]) -> Vec<u64> {
    v.iter().map(|b| b.0).collect()
}

impl Device for RemoteDevice {
    fn kind(&self) -> TargetKind {
        self.kind.clone()
    }
    fn alloc(&self, nbytes: usize) -> Result<BufferId, DeviceError> {
        self.id(DeviceCall::Alloc { nbytes }, Vec::new())
            .map(BufferId)
    }
    fn free(&self, buffer: BufferId) -> Result<(), DeviceError> {
        self.done(DeviceCall::Free { buffer: buffer.0 }, Vec::new())
    }
    fn copy_from_host(&self, dst: BufferId, offset: usize, src: &[u8]) -> Result<(), DeviceError> {
        self.done(
            DeviceCall::CopyFromHost { dst: dst.0, offset },
            src.to_vec(),
        )
    }
    fn copy_to_host(
        &self,
        src: BufferId,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<(), DeviceError> {
        let call = DeviceCall::CopyToHost {
            src: src.0,
            offset,
            len: dst.len(),
        };
        let (_, bytes) = self.call(call, Vec::new())?;
        if bytes.len() != dst.len() {
            return Err(self.failed(format!("{} bytes back for {}", bytes.len(), dst.len())));
        }
        dst.copy_from_slice(&bytes);
        Ok(())
    }
    fn copy_on_device(
        &self,
        src: BufferId,
        dst: BufferId,
        nbytes: usize,
    ) -> Result<(), DeviceError> {
        self.done(
            DeviceCall::CopyOnDevice {
                src: src.0,
                dst: dst.0,
                nbytes,
            },
            Vec::new(),
        )
    }
    fn load_module(&self, artifact: &Artifact) -> Result<ModuleId, DeviceError> {
        self.name.check_kind(artifact, &self.kind)?;
        let bytes = std::fs::read(&artifact.path)
            .map_err(|e| self.failed(format!("{}: {e}", artifact.path.display())))?;
        let call = DeviceCall::LoadModule {
            artifact: artifact.clone(),
        };
        self.id(call, bytes).map(ModuleId)
    }
    fn get_function(&self, module: ModuleId, name: &str) -> Result<FunctionId, DeviceError> {
        let call = DeviceCall::GetFunction {
            module: module.0,
            name: name.to_string(),
        };
        self.id(call, Vec::new()).map(FunctionId)
    }
    fn launch(
        &self,
        function: FunctionId,
        args: &[BufferId],
        dims: Option<&LaunchDims>,
    ) -> Result<(), DeviceError> {
        let call = DeviceCall::Launch {
            function: function.0,
            args: ids(args),
            dims: dims.copied(),
        };
        self.done(call, Vec::new())
    }
    fn synchronize(&self) -> Result<(), DeviceError> {
        self.done(DeviceCall::Synchronize, Vec::new())
    }
    fn time(
        &self,
        function: FunctionId,
        args: &[BufferId],
        dims: Option<&LaunchDims>,
        evaluator: &TimeEvaluator,
    ) -> Result<TimeResult, DeviceError> {
        let call = DeviceCall::Time {
            function: function.0,
            args: ids(args),
            dims: dims.copied(),
            evaluator: evaluator.clone(),
        };
        match self.call(call, Vec::new())?.0 {
            DeviceAnswer::Time(t) => Ok(t),
            other => Err(self.failed(format!("unexpected answer {other:?}"))),
        }
    }
    fn counters(&self) -> Result<DeviceCounters, DeviceError> {
        match self.call(DeviceCall::Counters, Vec::new())?.0 {
            DeviceAnswer::Counters(c) => Ok(c),
            other => Err(self.failed(format!("unexpected answer {other:?}"))),
        }
    }
}
