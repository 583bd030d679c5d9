//! The RPC errors: each names the address and what to do.

use thiserror::Error;

/// An error of the tracker or of a client of it.
#[derive(Debug, Error)]
pub enum RpcError {
    /// No shared token was given.
    #[error("no RPC token: give --token or set TESSERA_RPC_TOKEN (servers, clients and the tracker share it)")]
    NoToken,
    /// The address could not be bound or parsed.
    #[error("{addr}: {reason}")]
    Address { addr: String, reason: String },
    /// The tracker could not be reached within the deadline.
    #[error("cannot reach the RPC tracker at {addr}: {reason}")]
    Unreachable { addr: String, reason: String },
    /// The tracker refused the token.
    #[error("the RPC tracker at {addr} refused the token (give the tracker's --token or TESSERA_RPC_TOKEN)")]
    WrongToken { addr: String },
    /// No server of the key became free in time.
    #[error("the RPC tracker at {addr}: {message}")]
    NoServer { addr: String, message: String },
    /// Any other failure of a call.
    #[error("the RPC tracker at {addr}: {message}")]
    Call { addr: String, message: String },
    /// A device server failed or went away during a call.
    #[error("the RPC server at {addr}: {message}")]
    Server { addr: String, message: String },
    /// The tokio runtime could not start.
    #[error("starting the RPC runtime: {0}")]
    Runtime(String),
}
