//! `tessera-rpc`: remote devices by key, as TVM's RPC tracker does for boards.
//!
//! The tracker, device servers, remote measurement and the remote `Device` that runs
//! whole networks and single operators on a server (`remote_device`).
//!
//! - [`queue`]: the tracker's state without the network — servers registered per key
//!   with a lease their heartbeats renew, requests served by priority then arrival,
//!   hand-outs a server reports unused taken back.
//! - [`tracker`]: that state served over gRPC (tonic), the shared token checked on every
//!   call, a request failing with the reason after its wait rather than waiting forever.
//! - [`server`]: a device server — registered under its key, renewed by heartbeats,
//!   re-registering after the tracker comes back — that runs each measurement job it is
//!   sent in a runner process of its own with the job's time limit.
//! - [`client`]: blocking clients with a deadline on every call (the tracker's, and
//!   [`run_remote`] for one job on a server), and TVM's text summary.
//!
//! Why gRPC: tonic gives per-call deadlines, bounded message sizes and HTTP/2
//! keep-alive, and the protocol (`proto/tessera_rpc.proto`) is open to boards whose
//! server is not written in Rust. The code is generated at build time by protox, a
//! protobuf compiler in Rust, so no `protoc` is needed.

pub mod client;
pub mod error;
pub mod queue;
pub mod remote_device;
pub mod server;
pub mod session;
pub mod sessions;
pub mod tracker;

pub use client::{run_remote, text_summary, Lease, TrackerClient};
pub use error::RpcError;
pub use remote_device::{RemoteDevice, RemoteSession};

/// The gRPC messages and services generated from `proto/tessera_rpc.proto`.
#[allow(clippy::all)]
pub mod proto {
    tonic::include_proto!("tessera.rpc");
}

/// The largest message either side accepts.
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// The environment variable holding the shared token.
pub const TOKEN_ENV: &str = "TESSERA_RPC_TOKEN";
