//! The VTA backend. A fused group that the `conv2d_packed.vta` template scheduled for
//! VTA carries its annotation ([`crate::annotation`]: the workload's strides and
//! padding, the knobs, the epilogue); it is built into a VTA module, the instruction
//! stream from the template's knobs ([`crate::conv2d`]). Every other function is built
//! by the CPU backend for the board's CPU, which shares the DRAM with VTA (as on the
//! Pynq): layers VTA cannot run fall back to it.

use crate::config::VtaConfig;
use crate::conv2d::{generate, Conv2dPacked, Knobs};
use crate::error::VtaError;
use crate::module::VtaModule;
use tessera_ir::PrimFunc;

/// The VTA module of a VTA kernel, as the bytes of its file and a listing of its
/// instructions (the "source").
pub fn build_vta(
    cfg: &VtaConfig,
    func: &PrimFunc,
    w: &Conv2dPacked,
    k: &Knobs,
) -> Result<(Vec<u8>, String), VtaError> {
    let program = generate(cfg, w, k)?;
    let layout = crate::isa::Layout::of(cfg).map_err(|reason| VtaError::Config {
        path: "(given)".into(),
        reason: reason.to_string(),
    })?;
    let mut listing = format!("// {} on VTA {}: {w:?}\n// {k}\n", func.name, cfg.name());
    for (i, word) in program.words.iter().enumerate() {
        listing += &format!("{i:5} {}\n", layout.decode(*word)?);
    }
    let m = VtaModule::new(cfg, &func.name, &program);
    let bytes = serde_json::to_vec(&m).map_err(|e| VtaError::Decode(e.to_string()))?;
    Ok((bytes, listing))
}
