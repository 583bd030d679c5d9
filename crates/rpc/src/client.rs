//! Blocking clients: of the tracker, for servers (register, renew) and for the tuner and
//! `tessera rpc queue` (ask for a server, give it back, the summary); of a device server
//! ([`run_remote`], one measurement). Every call has a deadline; a peer that does not
//! answer in time is an error naming its address.

use crate::error::RpcError;
use crate::proto::device_server_client::DeviceServerClient;
use crate::proto::tracker_client::TrackerClient as Grpc;
use crate::proto::{
    MatchRequest, PutRequest, ReleaseRequest, RunRequest, SummaryReply, SummaryRequest,
};
use crate::MAX_MESSAGE_BYTES;
use std::future::Future;
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};

/// A server handed out by the tracker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub addr: String,
    pub server_id: String,
    pub session: u64,
}

/// A connection to a tracker.
pub struct TrackerClient {
    addr: String,
    token: String,
    timeout: Duration,
    rt: tokio::runtime::Runtime,
    grpc: Grpc<Channel>,
}

impl TrackerClient {
    /// Connects to the tracker at `addr` (`host:port`) within `timeout`, which is also
    /// the deadline of every later call (a request for a server waits its own time on
    /// top).
    pub fn connect(addr: &str, token: &str, timeout: Duration) -> Result<TrackerClient, RpcError> {
        if token.is_empty() {
            return Err(RpcError::NoToken);
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| RpcError::Runtime(e.to_string()))?;
        let unreachable = |reason: String| RpcError::Unreachable {
            addr: addr.to_string(),
            reason,
        };
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| RpcError::Address {
                addr: addr.to_string(),
                reason: format!("not a host:port address ({e})"),
            })?
            .connect_timeout(timeout);
        let channel = rt
            .block_on(async { tokio::time::timeout(timeout, endpoint.connect()).await })
            .map_err(|_| unreachable(format!("no answer within {} ms", timeout.as_millis())))?
            .map_err(|e| unreachable(transport_reason(&e)))?;
        let grpc = Grpc::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Ok(TrackerClient {
            addr: addr.to_string(),
            token: token.to_string(),
            timeout,
            rt,
            grpc,
        })
    }

    /// The tracker's address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    fn call<T, F>(&self, deadline: Duration, f: F) -> Result<T, RpcError>
    where
        F: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let addr = self.addr.clone();
        match self
            .rt
            .block_on(async { tokio::time::timeout(deadline, f).await })
        {
            Err(_) => Err(RpcError::Unreachable {
                addr,
                reason: format!("no answer within {} ms", deadline.as_millis()),
            }),
            Ok(Ok(r)) => Ok(r.into_inner()),
            Ok(Err(s)) => Err(match s.code() {
                tonic::Code::Unauthenticated => RpcError::WrongToken { addr },
                tonic::Code::Unavailable if !s.message().is_empty() && s.source_is_none() => {
                    RpcError::NoServer {
                        addr,
                        message: s.message().to_string(),
                    }
                }
                // A transport failure (the tracker went away) carries its cause.
                _ if !s.source_is_none() => RpcError::Unreachable {
                    addr,
                    reason: status_cause(&s),
                },
                _ => RpcError::Call {
                    addr,
                    message: format!("{}: {}", s.code(), s.message()),
                },
            }),
        }
    }

    /// Registers (or renews) server `server_id` of `key`, reachable at `server_addr`;
    /// returns how soon to renew.
    pub fn put(
        &mut self,
        key: &str,
        server_addr: &str,
        server_id: &str,
        idle: bool,
    ) -> Result<Duration, RpcError> {
        let req = PutRequest {
            token: self.token.clone(),
            key: key.to_string(),
            addr: server_addr.to_string(),
            server_id: server_id.to_string(),
            idle,
        };
        let mut g = self.grpc.clone();
        let r = self.call(self.timeout, async move { g.put(req).await })?;
        Ok(Duration::from_millis(r.lease_ms))
    }

    /// A free server of `key`, waiting at most `wait` for one.
    pub fn request(&mut self, key: &str, priority: i32, wait: Duration) -> Result<Lease, RpcError> {
        let req = MatchRequest {
            token: self.token.clone(),
            key: key.to_string(),
            priority,
            wait_ms: wait.as_millis() as u64,
        };
        let mut g = self.grpc.clone();
        let r = self.call(wait + self.timeout, async move { g.r#match(req).await })?;
        tracing::info!(
            tracker = %self.addr,
            key,
            server = %r.server_id,
            addr = %r.addr,
            "the tracker lent a server"
        );
        Ok(Lease {
            addr: r.addr,
            server_id: r.server_id,
            session: r.session,
        })
    }

    /// Gives a server back.
    pub fn release(&mut self, lease: &Lease) -> Result<(), RpcError> {
        let req = ReleaseRequest {
            token: self.token.clone(),
            server_id: lease.server_id.clone(),
            session: lease.session,
        };
        let mut g = self.grpc.clone();
        self.call(self.timeout, async move { g.release(req).await })
            .map(|_| ())
    }

    /// The servers and the queue of every key.
    pub fn summary(&mut self) -> Result<SummaryReply, RpcError> {
        let req = SummaryRequest {
            token: self.token.clone(),
        };
        let mut g = self.grpc.clone();
        self.call(self.timeout, async move { g.summary(req).await })
    }
}

/// Runs one measurement job on the device server at `addr`: `job_json` (a `RunJob`),
/// the artifact's bytes and file name, the job's time limit. Waits at most `timeout`
/// (the limit plus slack) and returns the measurement's JSON.
pub fn run_remote(
    addr: &str,
    token: &str,
    job_json: String,
    artifact: Vec<u8>,
    artifact_name: String,
    limit: Duration,
    timeout: Duration,
) -> Result<String, RpcError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| RpcError::Runtime(e.to_string()))?;
    let server = |message: String| RpcError::Server {
        addr: addr.to_string(),
        message,
    };
    let endpoint = Endpoint::from_shared(format!("http://{addr}"))
        .map_err(|e| server(format!("not a host:port address ({e})")))?
        .connect_timeout(Duration::from_secs(5));
    let req = RunRequest {
        token: token.to_string(),
        job_json,
        artifact,
        artifact_name,
        timeout_ms: limit.as_millis() as u64,
    };
    let reply = rt.block_on(async {
        tokio::time::timeout(timeout, async {
            let channel = endpoint
                .connect()
                .await
                .map_err(|e| server(transport_reason(&e)))?;
            let mut c = DeviceServerClient::new(channel)
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES);
            c.run(req).await.map_err(|s| match s.code() {
                tonic::Code::Unauthenticated => RpcError::WrongToken {
                    addr: addr.to_string(),
                },
                _ => server(format!("{}: {}", s.code(), s.message())),
            })
        })
        .await
    });
    match reply {
        Err(_) => Err(server(format!(
            "no answer within {} ms",
            timeout.as_millis()
        ))),
        Ok(r) => Ok(r?.into_inner().result_json),
    }
}

trait SourceIsNone {
    fn source_is_none(&self) -> bool;
}

impl SourceIsNone for tonic::Status {
    /// A status the tracker itself sent (not a transport failure, which carries its
    /// cause as the source).
    fn source_is_none(&self) -> bool {
        std::error::Error::source(self).is_none()
    }
}

/// The innermost cause of a failed call's status.
fn status_cause(s: &tonic::Status) -> String {
    let mut cause: &dyn std::error::Error = s;
    while let Some(c) = cause.source() {
        cause = c;
    }
    cause.to_string()
}

/// The innermost cause of a transport error ("Connection refused").
fn transport_reason(e: &tonic::transport::Error) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(c) = cause.source() {
        cause = c;
    }
    cause.to_string()
}

/// TVM's `text_summary`: the server list, then `key total free pending` per key.
pub fn text_summary(addr: &str, s: &SummaryReply) -> String {
    let rule = "-".repeat(40);
    let mut out =
        format!("Tracker address {addr}\n\nServer List\n{rule}\nserver-address\tkey\n{rule}\n");
    for srv in &s.servers {
        let state = if srv.free { "" } else { " (busy)" };
        out.push_str(&format!("{}\tserver:{}{state}\n", srv.addr, srv.key));
    }
    out.push_str(&format!("{rule}\n\nQueue Status\n{rule}\n"));
    let w = s
        .queues
        .iter()
        .map(|q| q.key.len())
        .max()
        .unwrap_or(3)
        .max(3);
    out.push_str(&format!("{:<w$}  total  free  pending\n{rule}\n", "key"));
    for q in &s.queues {
        out.push_str(&format!(
            "{:<w$}  {:<5}  {:<4}  {}\n",
            q.key, q.total, q.free, q.pending
        ));
    }
    out.push_str(&format!("{rule}\n"));
    out
}
