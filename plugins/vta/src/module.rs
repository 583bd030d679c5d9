//! The VTA module file (`tessera-vta/1`, JSON): the configuration it was built for, the
//! entry, the instruction words (hex, 32 digits each), what each DRAM address is
//! relative to, and the micro-op kernels. A device loads only a module of its own
//! format and configuration.

use crate::builder::{Arg, Program};
use crate::config::VtaConfig;
use crate::error::VtaError;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The format tag of a module file.
pub const FORMAT: &str = "tessera-vta/1";

/// A built VTA kernel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VtaModule {
    pub format: String,
    pub config: VtaConfig,
    pub entry: String,
    /// The instructions, 128-bit words as 32 hex digits.
    pub words: Vec<String>,
    pub relocs: Vec<Option<Arg>>,
    pub uops: Vec<u32>,
}

impl VtaModule {
    pub fn new(config: &VtaConfig, entry: &str, p: &Program) -> VtaModule {
        VtaModule {
            format: FORMAT.into(),
            config: config.clone(),
            entry: entry.into(),
            words: p.words.iter().map(|w| format!("{w:032x}")).collect(),
            relocs: p.relocs.clone(),
            uops: p.uops.clone(),
        }
    }

    /// The program it holds.
    pub fn program(&self) -> Result<Program, VtaError> {
        let words = self
            .words
            .iter()
            .map(|w| {
                u128::from_str_radix(w, 16)
                    .map_err(|e| VtaError::Decode(format!("word `{w}`: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if words.len() != self.relocs.len() {
            return Err(VtaError::Decode(format!(
                "{} words but {} relocations",
                words.len(),
                self.relocs.len()
            )));
        }
        Ok(Program {
            words,
            relocs: self.relocs.clone(),
            uops: self.uops.clone(),
        })
    }

    pub fn write(&self, path: &Path) -> Result<(), VtaError> {
        let text = serde_json::to_string(self).map_err(|e| VtaError::Decode(e.to_string()))?;
        std::fs::write(path, text).map_err(|e| VtaError::Module {
            path: path.display().to_string(),
            reason: e.to_string(),
        })
    }

    /// Reads a module file; another format is refused by name.
    pub fn read(path: &Path) -> Result<VtaModule, VtaError> {
        let bad = |reason: String| VtaError::Module {
            path: path.display().to_string(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| bad(format!("not a VTA module: {e}")))?;
        match v.get("format").and_then(|f| f.as_str()) {
            Some(FORMAT) => {}
            Some(other) => {
                return Err(bad(format!(
                    "format `{other}`, this build reads `{FORMAT}`"
                )))
            }
            None => return Err(bad("not a VTA module (no format)".into())),
        }
        serde_json::from_value(v).map_err(|e| bad(format!("not a VTA module: {e}")))
    }
}
