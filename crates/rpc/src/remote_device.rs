//! The core's `Device` on a server of a tracker's key: a server is leased from the
//! tracker, a session opened on it (a worker process of its own), and every `Device`
//! call — the runtime's `DeviceCall`, the description a plugin's boundary uses too —
//! becomes one gRPC `Call` with a deadline ([`RemoteSession`], the runtime's
//! `CallClient` over it is the device). Dropping the device closes the session and gives
//! the server back. Data crosses only in the copies and an artifact's file.

use crate::client::{Lease, TrackerClient};
use crate::error::RpcError;
use crate::proto::device_session_client::DeviceSessionClient;
use crate::proto::{CallRequest, CloseRequest, OpenRequest};
use crate::MAX_MESSAGE_BYTES;
use std::sync::Mutex;
use std::time::Duration;
use tessera_runtime::device_call::{CallChannel, CallClient, DeviceAnswer, DeviceCall};
use tessera_runtime::{DeviceError, DeviceName};
use tessera_target::TargetKind;
use tonic::transport::{Channel, Endpoint};

/// A device on a remote server.
pub type RemoteDevice = CallClient<RemoteSession>;

/// A session on a remote server: what the device's calls go through.
pub struct RemoteSession {
    name: DeviceName,
    token: String,
    session: u64,
    timeout: Duration,
    rt: tokio::runtime::Runtime,
    grpc: Mutex<DeviceSessionClient<Channel>>,
    tracker: Mutex<TrackerClient>,
    lease: Lease,
}

impl RemoteSession {
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
            Ok((rt, grpc, session, kind)) => {
                let name = DeviceName::new(format!("rpc:{key}@{}", lease.addr));
                let remote = RemoteSession {
                    name: name.clone(),
                    token: token.to_string(),
                    session,
                    timeout: limit,
                    rt,
                    grpc: Mutex::new(grpc),
                    tracker: Mutex::new(tracker),
                    lease,
                };
                Ok(CallClient::new(name, TargetKind::new(&kind), remote))
            }
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
}

impl CallChannel for RemoteSession {
    /// One gRPC call; the device's own error comes back as `Failed` with its text.
    fn call(
        &self,
        call: &DeviceCall,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<DeviceAnswer, DeviceError> {
        let req = CallRequest {
            token: self.token.clone(),
            session: self.session,
            call_json: serde_json::to_string(call).map_err(|e| self.failed(e.to_string()))?,
            payload: input.to_vec(),
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
        if matches!(answer, DeviceAnswer::Failed(_)) {
            return Ok(answer);
        }
        if reply.payload.len() != output.len() {
            let (n, want) = (reply.payload.len(), output.len());
            return Err(self.failed(format!("{n} bytes back for {want}")));
        }
        output.copy_from_slice(&reply.payload);
        Ok(answer)
    }

    /// The server is another machine: an artifact's file travels with the call.
    fn ships_files(&self) -> bool {
        true
    }
}

impl Drop for RemoteSession {
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
