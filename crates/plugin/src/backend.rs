//! [`PluginBackend`]: a loaded plugin's compiler, seen by the core as a `Backend`. The
//! plugin returns the artifact's bytes; they are written to a file of their own under
//! the build directory, which the plugin's device loads.

use crate::{LoadedPlugin, PluginError};
use std::path::Path;
use tessera_backends::{Backend, BackendError};
use tessera_ir::PrimFunc;
use tessera_target::{Artifact, HardwareParams, ParamSpec, Target};

/// A backend provided by a plugin.
pub struct PluginBackend {
    plugin: LoadedPlugin,
    target: Target,
    params: HardwareParams,
}

impl PluginBackend {
    /// The backend of `target` in `plugin` (asks it for the hardware parameters once).
    pub fn new(plugin: &LoadedPlugin, target: &Target) -> Result<PluginBackend, PluginError> {
        let params = plugin.hardware_params(target)?;
        Ok(PluginBackend {
            plugin: plugin.clone(),
            target: target.clone(),
            params,
        })
    }

    fn name(&self) -> String {
        format!("{} (plugin `{}`)", self.target.kind, self.plugin.name)
    }

    fn unsupported(&self, func: &PrimFunc, e: PluginError) -> BackendError {
        BackendError::Unsupported {
            backend: self.name(),
            func: func.name.clone(),
            reason: plugin_words(e),
        }
    }
}

/// What the plugin said, without the `plugin `<name>`:` prefix its error carries (the
/// backend's name already says which plugin).
fn plugin_words(e: PluginError) -> String {
    match e {
        PluginError::Call { message, .. } => message,
        PluginError::Entry { source, .. } => source.to_string(),
        other => other.to_string(),
    }
}

/// A short content hash, so each distinct artifact gets a file of its own (FNV-1a).
fn content_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl Backend for PluginBackend {
    fn target(&self) -> &Target {
        &self.target
    }
    fn hardware_params(&self) -> &HardwareParams {
        &self.params
    }
    fn codegen(&self, func: &PrimFunc) -> Result<String, BackendError> {
        self.plugin
            .codegen(&self.target, func)
            .map_err(|e| self.unsupported(func, e))
    }
    fn build(&self, func: &PrimFunc, out_dir: &Path) -> Result<Artifact, BackendError> {
        let built =
            self.plugin
                .build(&self.target, func)
                .map_err(|e| BackendError::PluginBuild {
                    backend: self.name(),
                    func: func.name.clone(),
                    message: plugin_words(e),
                })?;
        let bytes = &built.bytes;
        let io = |path: &Path, e: std::io::Error| BackendError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        std::fs::create_dir_all(out_dir).map_err(|e| io(out_dir, e))?;
        let path = out_dir.join(format!(
            "{}-{:016x}.{}",
            func.name,
            content_hash(bytes),
            self.target.kind
        ));
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = path.with_extension(format!("tmp{}-{n}", std::process::id()));
        std::fs::write(&tmp, bytes).map_err(|e| io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| io(&path, e))?;
        // The source beside it, when the plugin gave one (else the artifact stands in).
        let source_path = if built.source.is_empty() {
            path.clone()
        } else {
            let src = path.with_extension(format!("{}.src", self.target.kind));
            std::fs::write(&src, &built.source).map_err(|e| io(&src, e))?;
            src
        };
        Ok(Artifact {
            device: self.target.kind.clone(),
            source_path,
            path,
            entry: func.name.clone(),
            params: ParamSpec::of(func),
            launch: built.launch,
        })
    }
}
