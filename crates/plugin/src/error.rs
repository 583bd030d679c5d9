//! [`CallError`]: why a plugin's entry point failed, as the plugin's [`crate::Plugin`]
//! methods return it. It crosses the boundary sealed (JSON), so the core reads the same
//! typed value back ([`crate::PluginError::Entry`]); a panic inside an entry point
//! becomes [`CallError::Panicked`].

use serde::{Deserialize, Serialize};
use std::fmt::Display;
use tessera_target::Target;

/// Why a plugin could not do what an entry point asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum CallError {
    /// The plugin does not provide this (a method it left at its default).
    #[error("`{plugin}` provides no {what} for `{target}`")]
    NotProvided {
        plugin: String,
        what: String,
        target: String,
    },
    /// The target string does not parse, or holds an option the plugin refuses.
    #[error("target `{target}`: {reason}")]
    BadTarget { target: String, reason: String },
    /// The work failed: a compiler's, a driver's or a file's error.
    #[error("{what}: {reason}")]
    Failed { what: String, reason: String },
    /// The entry point panicked.
    #[error("panicked in {entry}: {message}")]
    Panicked { entry: String, message: String },
}

impl CallError {
    /// `plugin` provides no `what` (a backend, a device) for `target`.
    pub fn not_provided(plugin: &str, what: &str, target: &Target) -> CallError {
        CallError::NotProvided {
            plugin: plugin.to_string(),
            what: what.to_string(),
            target: target.to_string(),
        }
    }

    /// `target` is not one the plugin takes, for `reason`.
    pub fn bad_target(target: &Target, reason: impl Display) -> CallError {
        CallError::BadTarget {
            target: target.to_string(),
            reason: reason.to_string(),
        }
    }

    /// `what` (e.g. `codegen`, `build`, `opening the device`) failed with `reason`.
    pub fn failed(what: &str, reason: impl Display) -> CallError {
        CallError::Failed {
            what: what.to_string(),
            reason: reason.to_string(),
        }
    }
}
