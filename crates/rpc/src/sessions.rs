//! The server side of sessions: each `Open` starts a worker process (`WorkerSpawner`)
//! that hosts the device; each `Call` is one frame to it and one frame back; `Close`, or
//! the session's time limit, stops it. A worker that dies (a kernel that crashed the
//! device) fails its session's calls with how it ended; the server goes on.

use crate::proto::device_session_server::DeviceSession;
use crate::proto::{CallReply, CallRequest, CloseReply, CloseRequest, OpenReply, OpenRequest};
use crate::session::{read_frame, write_frame, DeviceAnswer, DeviceCall};
use crate::MAX_MESSAGE_BYTES;
use std::collections::HashMap;
use std::process::{Child, ChildStdin, ChildStdout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::{Request, Response, Status};

/// Starts a worker process with piped standard input and output.
pub type WorkerSpawner = Arc<dyn Fn() -> std::io::Result<Child> + Send + Sync>;

/// The longest session.
pub const MAX_SESSION: Duration = Duration::from_secs(3600);

struct Worker {
    child: Mutex<Child>,
    io: Mutex<(ChildStdin, ChildStdout)>,
}

impl Worker {
    fn stop(&self) {
        let mut c = self.child.lock().unwrap_or_else(|e| e.into_inner());
        let _ = c.kill();
        let _ = c.wait();
    }

    /// How the worker ended, if it did.
    fn ended(&self) -> String {
        let mut c = self.child.lock().unwrap_or_else(|e| e.into_inner());
        match c.try_wait() {
            Ok(Some(s)) => format!("the session's worker process ended ({s})"),
            _ => "the session's worker process stopped answering".into(),
        }
    }
}

pub(crate) struct Sessions {
    pub(crate) token: String,
    pub(crate) spawn: WorkerSpawner,
    pub(crate) busy: Arc<AtomicBool>,
    open: Mutex<HashMap<u64, Arc<Worker>>>,
    next: Mutex<u64>,
}

impl Sessions {
    pub(crate) fn new(token: String, spawn: WorkerSpawner, busy: Arc<AtomicBool>) -> Sessions {
        Sessions {
            token,
            spawn,
            busy,
            open: Mutex::default(),
            next: Mutex::new(0),
        }
    }

    fn check(&self, token: &str) -> Result<(), Status> {
        (token == self.token)
            .then_some(())
            .ok_or_else(|| Status::unauthenticated("wrong token"))
    }

    fn worker(&self, session: u64) -> Result<Arc<Worker>, Status> {
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&session)
            .cloned()
            .ok_or_else(|| {
                Status::not_found(format!("no session {session} (closed or past its limit)"))
            })
    }

    fn end(&self, session: u64) {
        let w = self
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&session);
        if let Some(w) = w {
            w.stop();
        }
        let empty = self
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty();
        if empty {
            self.busy.store(false, Ordering::SeqCst);
        }
    }
}

/// One call to a worker: a frame out, a frame back.
fn exchange(
    w: &Worker,
    call: &DeviceCall,
    payload: &[u8],
) -> Result<(DeviceAnswer, Vec<u8>), String> {
    let mut io = w.io.lock().unwrap_or_else(|e| e.into_inner());
    let (stdin, stdout) = &mut *io;
    write_frame(stdin, call, payload).map_err(|_| w.ended())?;
    match read_frame::<DeviceAnswer>(stdout, MAX_MESSAGE_BYTES) {
        Ok(Some(a)) => Ok(a),
        _ => Err(w.ended()),
    }
}

#[tonic::async_trait]
impl DeviceSession for Arc<Sessions> {
    async fn open(&self, req: Request<OpenRequest>) -> Result<Response<OpenReply>, Status> {
        let r = req.into_inner();
        self.check(&r.token)?;
        let mut child =
            (self.spawn)().map_err(|e| Status::internal(format!("starting a worker: {e}")))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            return Err(Status::internal("the worker has no pipes"));
        };
        let w = Arc::new(Worker {
            child: Mutex::new(child),
            io: Mutex::new((stdin, stdout)),
        });
        let session = {
            let mut n = self.next.lock().unwrap_or_else(|e| e.into_inner());
            *n += 1;
            *n
        };
        self.busy.store(true, Ordering::SeqCst);
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(session, w.clone());
        // The session's time limit.
        let limit = Duration::from_millis(r.limit_ms.max(1)).min(MAX_SESSION);
        let me = self.clone();
        std::thread::spawn(move || {
            std::thread::sleep(limit);
            me.end(session);
        });
        let kind = tokio::task::spawn_blocking(move || exchange(&w, &DeviceCall::Kind, &[]))
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        match kind {
            Ok((DeviceAnswer::Kind(kind), _)) => Ok(Response::new(OpenReply { session, kind })),
            Ok((DeviceAnswer::Failed(m), _)) | Err(m) => {
                self.end(session);
                Err(Status::unavailable(m))
            }
            Ok(_) => {
                self.end(session);
                Err(Status::internal(
                    "the worker answered Kind with something else",
                ))
            }
        }
    }

    async fn call(&self, req: Request<CallRequest>) -> Result<Response<CallReply>, Status> {
        let r = req.into_inner();
        self.check(&r.token)?;
        let call: DeviceCall = serde_json::from_str(&r.call_json)
            .map_err(|e| Status::invalid_argument(format!("not a device call: {e}")))?;
        let w = self.worker(r.session)?;
        let payload = r.payload;
        let out = tokio::task::spawn_blocking(move || exchange(&w, &call, &payload))
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        match out {
            Ok((answer, payload)) => Ok(Response::new(CallReply {
                answer_json: serde_json::to_string(&answer)
                    .map_err(|e| Status::internal(e.to_string()))?,
                payload,
            })),
            Err(m) => {
                self.end(r.session);
                Err(Status::aborted(m))
            }
        }
    }

    async fn close(&self, req: Request<CloseRequest>) -> Result<Response<CloseReply>, Status> {
        let r = req.into_inner();
        self.check(&r.token)?;
        self.end(r.session);
        Ok(Response::new(CloseReply {}))
    }
}
