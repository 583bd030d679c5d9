//! `tessera rpc`: the tracker that device servers register with, and its summary.

use anyhow::{Context, Result};
use clap::Subcommand;
use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;
use tessera_rpc::{text_summary, tracker, RpcError, TrackerClient, TOKEN_ENV};

#[derive(Subcommand, Debug)]
pub enum RpcCmd {
    /// Run a tracker: device servers register with it under a key (`mali`, `rk3399`),
    /// tuners ask it for a free server of a key.
    #[command(
        after_help = "Examples:\n  tessera rpc tracker --token $TOKEN\n  tessera rpc tracker --host 0.0.0.0 --port 9190   # reachable from other machines"
    )]
    Tracker {
        /// The address to listen on: loopback unless said otherwise.
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// The port (0: any free port, printed).
        #[arg(long, default_value_t = 9190)]
        port: u16,
        /// The token servers and clients must present (or TESSERA_RPC_TOKEN).
        #[arg(long)]
        token: Option<String>,
    },
    /// Print the tracker's servers and, per key, `total free pending` (TVM's
    /// `query_rpc_tracker`).
    Queue {
        /// The tracker, HOST:PORT.
        #[arg(long, default_value = "127.0.0.1:9190")]
        tracker: String,
        /// The tracker's token (or TESSERA_RPC_TOKEN).
        #[arg(long)]
        token: Option<String>,
        /// Seconds to wait for the tracker.
        #[arg(long, default_value_t = 5.0)]
        timeout: f64,
    },
}

/// The token of a flag, else of the environment.
fn token(flag: Option<String>) -> Result<String> {
    flag.or_else(|| std::env::var(TOKEN_ENV).ok())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| RpcError::NoToken.into())
}

pub fn run(cmd: RpcCmd) -> Result<()> {
    match cmd {
        RpcCmd::Tracker {
            host,
            port,
            token: t,
        } => {
            let token = token(t)?;
            let addr: SocketAddr = format!("{host}:{port}").parse().with_context(|| {
                format!("--host {host} --port {port}: not an IP address and port")
            })?;
            Ok(tracker::serve(addr, token, |bound| {
                println!("RPC tracker listening on {bound}");
                let _ = std::io::stdout().flush();
            })?)
        }
        RpcCmd::Queue {
            tracker,
            token: t,
            timeout,
        } => {
            let timeout = Duration::try_from_secs_f64(timeout)
                .ok()
                .filter(|d| !d.is_zero())
                .context("--timeout: a positive number of seconds")?;
            let mut c = TrackerClient::connect(&tracker, &token(t)?, timeout)?;
            print!("{}", text_summary(&tracker, &c.summary()?));
            Ok(())
        }
    }
}
