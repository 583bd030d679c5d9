//! A device server of an RPC tracker (`tessera rpc server`) and one session's device
//! worker (`tessera rpc worker`), assembled from the registry's device and this
//! binary's runner: the device must open here before the server registers (else it
//! would fail every job); measurement jobs run one after another in one runner process
//! (replaced after a fault, as the tuner's are); each client session gets a worker
//! process of this binary.

use crate::{DriverError, Toolchain};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tessera_rpc::server::{self, JobRunner, ServerOptions};
use tessera_rpc::sessions::WorkerSpawner;
use tessera_search::runner_process::RunnerProcess;

impl Toolchain {
    /// Serves the device of `opts.target` to the tracker's clients until stopped; `exe`
    /// is this binary (its `runner` and `rpc worker` commands), `on_bound` hears the
    /// address it listens on.
    pub fn serve_device(
        &self,
        opts: ServerOptions,
        exe: PathBuf,
        on_bound: impl FnOnce(SocketAddr),
    ) -> Result<(), DriverError> {
        let target = self.parse_target(&opts.target)?;
        self.registry()
            .device_for(&target)
            .map_err(|source| DriverError::NoDevice {
                purpose: "serving",
                target: opts.target.clone(),
                source: Box::new(source),
            })?;
        let process = Mutex::new(RunnerProcess::new(exe.clone()));
        let runner: JobRunner = Arc::new(move |job: &Path, limit: Duration| {
            let r = process
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .run(job, limit);
            serde_json::to_string(&r).unwrap_or_default()
        });
        let t = opts.target.clone();
        let spawn: WorkerSpawner = Arc::new(move || {
            std::process::Command::new(&exe)
                .args(["rpc", "worker", "--target", &t])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
        });
        Ok(server::serve(opts, runner, spawn, on_bound)?)
    }

    /// `tessera runner`: runs the measurement jobs whose paths come on standard input,
    /// each on its target's device (the registry's; opened once per target), each
    /// reply one marked line on standard output for the tuner
    /// (`search::runner_process`).
    pub fn serve_runner_jobs(&self) -> std::io::Result<()> {
        tessera_search::runner_process::serve_jobs(
            std::io::stdin().lock(),
            // not locked across jobs: a device library's thread may print too
            std::io::stdout(),
            |target| -> Result<_, DriverError> {
                Ok(self.registry().device_for(&self.parse_target(target)?)?)
            },
        )
    }

    /// Answers the device calls of one session framed on standard input, on the device
    /// of `target`.
    pub fn serve_worker(&self, target: &str) -> Result<(), DriverError> {
        let device = self.registry().device_for(&self.parse_target(target)?)?;
        tessera_rpc::session::serve_worker(
            device,
            std::io::stdin().lock(),
            std::io::stdout().lock(),
        )
        .map_err(|source| DriverError::Io {
            what: format!("the session worker of `{target}`"),
            source,
        })
    }
}
