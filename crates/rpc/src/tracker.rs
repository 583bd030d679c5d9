//! The tracker served over gRPC: the [`Queues`] behind a lock, a notification whenever
//! a server registers or comes back so that waiting requests look again, and the token
//! checked on every call. A request waits at most its own `wait_ms` (capped at
//! [`MAX_WAIT`]) and then fails with the reason: no server of that key at all, or all of
//! them busy — never an endless wait. A request whose client goes away is withdrawn.

use crate::error::RpcError;
use crate::proto::tracker_server::{Tracker, TrackerServer};
use crate::proto::{
    MatchReply, MatchRequest, PutReply, PutRequest, QueueInfo, ReleaseReply, ReleaseRequest,
    ServerInfo, SummaryReply, SummaryRequest,
};
use crate::queue::{Queues, Ticket, LEASE};
use crate::MAX_MESSAGE_BYTES;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use tonic::{Request, Response, Status};

/// The longest a request may wait for a server.
pub const MAX_WAIT: Duration = Duration::from_secs(600);

/// The tracker's gRPC service.
pub struct TrackerService {
    token: String,
    queues: Arc<Mutex<Queues>>,
    changed: Arc<Notify>,
}

impl TrackerService {
    pub fn new(token: String) -> TrackerService {
        TrackerService {
            token,
            queues: Arc::default(),
            changed: Arc::new(Notify::new()),
        }
    }

    fn queues(&self) -> MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn check(&self, token: &str) -> Result<(), Status> {
        if token == self.token {
            Ok(())
        } else {
            Err(Status::unauthenticated("wrong token"))
        }
    }
}

/// Withdraws a waiting request when its call ends, however it ends.
struct Waiting {
    queues: Arc<Mutex<Queues>>,
    changed: Arc<Notify>,
    key: String,
    ticket: Ticket,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut q = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        q.cancel(&self.key, self.ticket);
        drop(q);
        // The next request in line may be first now.
        self.changed.notify_waiters();
    }
}

#[tonic::async_trait]
impl Tracker for TrackerService {
    async fn put(&self, req: Request<PutRequest>) -> Result<Response<PutReply>, Status> {
        let r = req.into_inner();
        self.check(&r.token)?;
        if r.key.is_empty() || r.addr.is_empty() || r.server_id.is_empty() {
            return Err(Status::invalid_argument(
                "key, addr and server_id are required",
            ));
        }
        self.queues()
            .put(&r.key, &r.addr, &r.server_id, r.idle, Instant::now());
        self.changed.notify_waiters();
        Ok(Response::new(PutReply {
            lease_ms: LEASE.as_millis() as u64,
        }))
    }

    async fn r#match(&self, req: Request<MatchRequest>) -> Result<Response<MatchReply>, Status> {
        let r = req.into_inner();
        self.check(&r.token)?;
        let wait = Duration::from_millis(r.wait_ms).min(MAX_WAIT);
        let deadline = tokio::time::Instant::now() + wait;
        let ticket = self.queues().enqueue(&r.key, r.priority);
        let _waiting = Waiting {
            queues: self.queues.clone(),
            changed: self.changed.clone(),
            key: r.key.clone(),
            ticket,
        };
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(m) = self.queues().try_match(&r.key, ticket, Instant::now()) {
                return Ok(Response::new(MatchReply {
                    addr: m.addr,
                    server_id: m.server_id,
                    session: m.session,
                }));
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                let n = self.queues().count(&r.key);
                let ms = wait.as_millis();
                return Err(Status::unavailable(if n == 0 {
                    format!(
                        "no server of key `{}` is registered (waited {ms} ms)",
                        r.key
                    )
                } else {
                    format!("all {n} servers of key `{}` stayed busy for {ms} ms", r.key)
                }));
            }
        }
    }

    async fn release(
        &self,
        req: Request<ReleaseRequest>,
    ) -> Result<Response<ReleaseReply>, Status> {
        let r = req.into_inner();
        self.check(&r.token)?;
        if self.queues().release(&r.server_id, r.session) {
            self.changed.notify_waiters();
        }
        Ok(Response::new(ReleaseReply {}))
    }

    async fn summary(
        &self,
        req: Request<SummaryRequest>,
    ) -> Result<Response<SummaryReply>, Status> {
        self.check(&req.into_inner().token)?;
        let (servers, queues) = self.queues().summary(Instant::now());
        Ok(Response::new(SummaryReply {
            servers: servers
                .into_iter()
                .map(|s| ServerInfo {
                    key: s.key,
                    addr: s.addr,
                    server_id: s.server_id,
                    free: s.free,
                })
                .collect(),
            queues: queues
                .into_iter()
                .map(|q| QueueInfo {
                    key: q.key,
                    total: q.total,
                    free: q.free,
                    pending: q.pending,
                })
                .collect(),
        }))
    }
}

/// Serves a tracker on `addr` until the process ends; `on_bound` gets the address
/// actually bound (port 0 picks a free one) before the first request is served.
pub fn serve(
    addr: SocketAddr,
    token: String,
    on_bound: impl FnOnce(SocketAddr),
) -> Result<(), RpcError> {
    let rt = tokio::runtime::Runtime::new().map_err(|e| RpcError::Runtime(e.to_string()))?;
    rt.block_on(async move {
        let bad = |reason: String| RpcError::Address {
            addr: addr.to_string(),
            reason,
        };
        let incoming = tonic::transport::server::TcpIncoming::bind(addr)
            .map_err(|e| bad(format!("cannot listen: {e}")))?;
        on_bound(incoming.local_addr().map_err(|e| bad(e.to_string()))?);
        let service = TrackerServer::new(TrackerService::new(token))
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(incoming)
            .await
            .map_err(|e| bad(format!("serving: {e}")))
    })
}
