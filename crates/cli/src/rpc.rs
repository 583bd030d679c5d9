//! `tessera rpc`: the tracker, a device server, the tracker's summary; and the remote
//! measurement options of `tessera tune`.

use anyhow::{Context, Result};
use clap::Subcommand;
use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;
use tessera_driver::tune::RemoteOptions;
use tessera_rpc::{server, text_summary, tracker, RpcError, TrackerClient, TOKEN_ENV};

#[derive(Subcommand, Debug)]
pub enum RpcCmd {
    /// Run a tracker: device servers register with it under a key (`mali`, `rk3399`),
    /// tuners ask it for a free server of a key.
    #[command(
        after_help = "Examples:\n  tessera rpc tracker --rpc-token $TOKEN\n  tessera rpc tracker --host 0.0.0.0 --port 9190   # reachable from other machines"
    )]
    Tracker {
        /// The address to listen on: loopback unless said otherwise.
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// The port (0: any free port, printed).
        #[arg(long, default_value_t = 9190)]
        port: u16,
        /// The token servers and clients must present (or TESSERA_RPC_TOKEN). Also
        /// `--token`, the old spelling.
        #[arg(long = "rpc-token", alias = "token")]
        token: Option<String>,
    },
    /// Serve this machine's device for a target to the clients of a tracker, under a key:
    /// each measurement runs in a process of its own with its time limit.
    #[command(
        after_help = "Examples:\n  tessera rpc server --rpc-tracker 127.0.0.1:9190 --key mali --target \"opencl -device=mali\"\n  tessera rpc server --rpc-tracker 10.0.0.2:9190 --key cpu --host 0.0.0.0 --custom-addr 10.0.0.7"
    )]
    Server {
        /// The tracker, HOST:PORT (the flag `tune`, `run` and `op` take too). Also
        /// `--tracker`, the old spelling.
        #[arg(
            long = "rpc-tracker",
            alias = "tracker",
            default_value = "127.0.0.1:9190"
        )]
        tracker: String,
        /// The key clients ask for (e.g. mali, rk3399).
        #[arg(long)]
        key: String,
        /// The target whose device this server runs.
        #[arg(long, default_value = "cpu")]
        target: String,
        /// The address to listen on: loopback unless said otherwise.
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// The port (0: any free port, printed).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// The host clients reach this server at, when it is not --host (e.g. with
        /// --host 0.0.0.0, or behind NAT).
        #[arg(long)]
        custom_addr: Option<String>,
        /// The tracker's token (or TESSERA_RPC_TOKEN). Also `--token`, the old
        /// spelling.
        #[arg(long = "rpc-token", alias = "token")]
        token: Option<String>,
    },
    /// One session's device (what `tessera rpc server` starts per session): answers the
    /// device calls framed on standard input.
    #[command(hide = true)]
    Worker {
        #[arg(long)]
        target: String,
    },
    /// Print the tracker's servers and, per key, `total free pending` (TVM's
    /// `query_rpc_tracker`).
    Queue {
        /// The tracker, HOST:PORT (the flag `tune`, `run` and `op` take too). Also
        /// `--tracker`, the old spelling.
        #[arg(
            long = "rpc-tracker",
            alias = "tracker",
            default_value = "127.0.0.1:9190"
        )]
        tracker: String,
        /// The tracker's token (or TESSERA_RPC_TOKEN). Also `--token`, the old
        /// spelling.
        #[arg(long = "rpc-token", alias = "token")]
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

/// The old spellings of flags given on this command line, with a warning each: the
/// `rpc` subcommands took `--tracker` and `--token` where every other command takes
/// `--rpc-tracker` and `--rpc-token`; both are still accepted.
fn warn_old_spellings() {
    for (old, new) in [("--tracker", "--rpc-tracker"), ("--token", "--rpc-token")] {
        let given = std::env::args().any(|a| a == old || a.starts_with(&format!("{old}=")));
        if given {
            eprintln!("warning: `{old}` is now spelled `{new}`, as in `tessera tune`, `run` and `op`; the old spelling will go");
        }
    }
}

pub fn run(cmd: RpcCmd) -> Result<()> {
    warn_old_spellings();
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
        RpcCmd::Server {
            tracker,
            key,
            target,
            host,
            port,
            custom_addr,
            token: t,
        } => {
            let listen: SocketAddr = format!("{host}:{port}").parse().with_context(|| {
                format!("--host {host} --port {port}: not an IP address and port")
            })?;
            let opts = server::ServerOptions {
                tracker,
                key: key.clone(),
                listen,
                token: token(t)?,
                target,
                custom_addr,
            };
            let exe = std::env::current_exe().context("finding this binary")?;
            Ok(
                crate::plugins::toolchain().serve_device(opts, exe, |bound| {
                    println!("RPC server of key `{key}` listening on {bound}");
                    let _ = std::io::stdout().flush();
                })?,
            )
        }
        RpcCmd::Worker { target } => Ok(crate::plugins::toolchain().serve_worker(&target)?),
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

/// `--rpc-tracker`, `--rpc-key`, `--rpc-token`: the flows that run on a device (`tune`,
/// `run`, `op`) take them to use a tracker's servers instead of this machine's device.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct RpcArgs {
    /// Run on a device server of an RPC tracker (HOST:PORT) instead of here; the kernels
    /// are built here. `tune` measures on every free server of --rpc-key in parallel.
    #[arg(long, requires = "rpc_key")]
    pub(crate) rpc_tracker: Option<String>,
    /// The key of the servers (e.g. mali, rk3399).
    #[arg(long, requires = "rpc_tracker")]
    pub(crate) rpc_key: Option<String>,
    /// The tracker's token (or TESSERA_RPC_TOKEN).
    #[arg(long)]
    pub(crate) rpc_token: Option<String>,
}

/// The process's toolchain with its devices (`Toolchain::device_for`) on the tracker's
/// servers when `args` names them, else this machine's.
pub(crate) fn toolchain_for(args: &RpcArgs) -> Result<tessera_driver::Toolchain> {
    Ok(crate::plugins::toolchain().with_remote(remote_options(args)?))
}

/// The remote measurement asked for, if any.
pub(crate) fn remote_options(args: &RpcArgs) -> Result<Option<RemoteOptions>> {
    let (Some(tracker), Some(key)) = (&args.rpc_tracker, &args.rpc_key) else {
        return Ok(None);
    };
    Ok(Some(RemoteOptions {
        tracker: tracker.clone(),
        key: key.clone(),
        token: token(args.rpc_token.clone())?,
        wait: Duration::from_secs(60),
    }))
}
