//! A device server: it registers with the tracker under its key and renews the
//! registration (saying whether a client is using it), and serves measurements and
//! device sessions ([`crate::sessions`]) over gRPC. Each job runs in a runner process of its own with the job's time limit, so a
//! kernel that crashes or hangs the device costs that job only; jobs run one at a time,
//! as the device is one. When the tracker is lost the server keeps trying and registers
//! again once it is back (a restarted tracker learns its servers within a heartbeat).

use crate::client::TrackerClient;
use crate::error::RpcError;
use crate::proto::device_server_server::{DeviceServer, DeviceServerServer};
use crate::proto::device_session_server::DeviceSessionServer;
use crate::proto::{RunReply, RunRequest};
use crate::sessions::{Sessions, WorkerSpawner};
use crate::MAX_MESSAGE_BYTES;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tessera_runtime::runner::RunJob;
use tonic::{Request, Response, Status};

/// Runs a job file with a time limit; returns the measurement as JSON.
pub type JobRunner = Arc<dyn Fn(&Path, Duration) -> String + Send + Sync>;

/// What a server is.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// The tracker, `host:port`.
    pub tracker: String,
    pub key: String,
    /// Where to listen (port 0: any free one).
    pub listen: SocketAddr,
    pub token: String,
    /// The target whose device this server runs (`cpu`, `opencl -device=mali`).
    pub target: String,
    /// The host clients reach this server at, when it is not the address it listens on
    /// (TVM's `--custom-addr`: a server listening on all addresses, or behind NAT).
    pub custom_addr: Option<String>,
}

struct Service {
    token: String,
    target: String,
    runner: JobRunner,
    busy: Arc<AtomicBool>,
    one_at_a_time: tokio::sync::Mutex<()>,
}

fn kind(target: &str) -> &str {
    target.split_whitespace().next().unwrap_or("")
}

impl Service {
    /// Writes the artifact and the job (its artifact path now here) into `dir`.
    fn stage(&self, r: &RunRequest, dir: &Path) -> Result<std::path::PathBuf, Status> {
        let mut job: RunJob = serde_json::from_str(&r.job_json)
            .map_err(|e| Status::invalid_argument(format!("not a job: {e}")))?;
        if kind(&job.target) != kind(&self.target) {
            return Err(Status::failed_precondition(format!(
                "this server runs `{}`, the job is for `{}`",
                self.target, job.target
            )));
        }
        let name = Path::new(&r.artifact_name)
            .file_name()
            .ok_or_else(|| Status::invalid_argument("artifact_name is not a file name"))?;
        let path = dir.join(name);
        std::fs::write(&path, &r.artifact)
            .map_err(|e| Status::internal(format!("{}: {e}", path.display())))?;
        job.artifact.source_path = path.clone();
        job.artifact.path = path;
        let job_path = dir.join("job.json");
        let text = serde_json::to_vec(&job).map_err(|e| Status::internal(e.to_string()))?;
        std::fs::write(&job_path, text)
            .map_err(|e| Status::internal(format!("{}: {e}", job_path.display())))?;
        Ok(job_path)
    }
}

#[tonic::async_trait]
impl DeviceServer for Service {
    async fn run(&self, req: Request<RunRequest>) -> Result<Response<RunReply>, Status> {
        let r = req.into_inner();
        if r.token != self.token {
            return Err(Status::unauthenticated("wrong token"));
        }
        let _one = self.one_at_a_time.lock().await;
        self.busy.store(true, Ordering::SeqCst);
        let dir = tempfile::tempdir().map_err(|e| Status::internal(e.to_string()))?;
        let staged = self.stage(&r, dir.path());
        let result = match staged {
            Ok(job_path) => {
                let runner = self.runner.clone();
                let timeout = Duration::from_millis(r.timeout_ms.max(1));
                tokio::task::spawn_blocking(move || runner(&job_path, timeout))
                    .await
                    .map_err(|e| Status::internal(format!("the job's thread: {e}")))
            }
            Err(e) => Err(e),
        };
        self.busy.store(false, Ordering::SeqCst);
        Ok(Response::new(RunReply {
            result_json: result?,
        }))
    }
}

/// Registers with the tracker every third of a lease, for as long as the process runs;
/// reports losing and regaining the tracker on standard error.
fn heartbeat(opts: ServerOptions, addr: String, id: String, busy: Arc<AtomicBool>) {
    let mut client: Option<TrackerClient> = None;
    let mut lost = false;
    loop {
        if client.is_none() {
            client =
                TrackerClient::connect(&opts.tracker, &opts.token, Duration::from_secs(2)).ok();
        }
        let every = match client
            .as_mut()
            .map(|c| c.put(&opts.key, &addr, &id, !busy.load(Ordering::SeqCst)))
        {
            Some(Ok(lease)) => {
                if lost {
                    eprintln!("registered again with the tracker at {}", opts.tracker);
                    lost = false;
                }
                lease / 3
            }
            Some(Err(RpcError::WrongToken { addr })) => {
                eprintln!("error: the RPC tracker at {addr} refused the token; the server stops");
                std::process::exit(1);
            }
            other => {
                if !lost {
                    let why = match other {
                        Some(Err(e)) => e.to_string(),
                        _ => format!("cannot reach the RPC tracker at {}", opts.tracker),
                    };
                    eprintln!("{why}; retrying every second");
                    lost = true;
                }
                client = None;
                Duration::from_secs(1)
            }
        };
        std::thread::sleep(every);
    }
}

/// Serves measurements on `opts.listen` and keeps the registration with the tracker
/// alive; `on_bound` gets the address actually bound. Runs until the process ends.
pub fn serve(
    opts: ServerOptions,
    runner: JobRunner,
    spawn: WorkerSpawner,
    on_bound: impl FnOnce(SocketAddr),
) -> Result<(), RpcError> {
    if opts.token.is_empty() {
        return Err(RpcError::NoToken);
    }
    // The tracker must be there at the start (a typo in --tracker is an error, not a
    // server waiting silently); later losses are retried.
    let mut first = TrackerClient::connect(&opts.tracker, &opts.token, Duration::from_secs(5))?;
    let rt = tokio::runtime::Runtime::new().map_err(|e| RpcError::Runtime(e.to_string()))?;
    let bad = |reason: String| RpcError::Address {
        addr: opts.listen.to_string(),
        reason,
    };
    let incoming = rt
        .block_on(async { tonic::transport::server::TcpIncoming::bind(opts.listen) })
        .map_err(|e| bad(format!("cannot listen: {e}")))?;
    let bound = incoming.local_addr().map_err(|e| bad(e.to_string()))?;
    let id = format!("{}-{}-{}", opts.key, std::process::id(), bound.port());
    let advertised = match &opts.custom_addr {
        Some(host) => format!("{host}:{}", bound.port()),
        None if bound.ip().is_unspecified() => {
            return Err(bad(
                "listening on every address: give --custom-addr, the address clients reach \
                 this machine at"
                    .into(),
            ))
        }
        None => bound.to_string(),
    };
    first.put(&opts.key, &advertised, &id, true)?;
    drop(first);
    on_bound(bound);
    let busy = Arc::new(AtomicBool::new(false));
    {
        let (opts, busy, addr, id) = (opts.clone(), busy.clone(), advertised, id);
        std::thread::spawn(move || heartbeat(opts, addr, id, busy));
    }
    let sessions = Arc::new(Sessions::new(opts.token.clone(), spawn, busy.clone()));
    let service = DeviceServerServer::new(Service {
        token: opts.token.clone(),
        target: opts.target.clone(),
        runner,
        busy,
        one_at_a_time: tokio::sync::Mutex::new(()),
    })
    .max_decoding_message_size(MAX_MESSAGE_BYTES)
    .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let sessions = DeviceSessionServer::new(sessions)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    rt.block_on(
        tonic::transport::Server::builder()
            .add_service(service)
            .add_service(sessions)
            .serve_with_incoming(incoming),
    )
    .map_err(|e| bad(format!("serving: {e}")))
}
