//! The VTA backend. A fused group that a template scheduled for VTA carries pragmas on
//! its loops (the protocol below, written by the `conv2d_packed.vta` template); it is
//! built into a VTA module: the workload from the function's parameters and the
//! pragmas, the instruction stream from the template's knobs ([`crate::conv2d`]).
//! Every other function is built by the CPU backend for the board's CPU, which shares
//! the DRAM with VTA (as on the Pynq): layers VTA cannot run fall back to it.
//!
//! The pragma protocol (`Stmt::Attr` keys `pragma_vta_*`, integer values):
//! `vta_conv2d` (1) marks the kernel; `vta_stride_h/w`, `vta_pad_h/w` complete the
//! workload; `vta_bias` (0/1), `vta_shift`, `vta_round` (0/1), `vta_clip_lo/hi` give the
//! epilogue; `vta_tile_b/h/w/ci/co`, `vta_oc_nthread`, `vta_h_nthread` the knobs. The
//! parameters are data `[N, CI, H, W, 1, 16]` int8, kernel `[CO, CI, KH, KW, 16, 16]`
//! int8, the bias `[1, CO, 1, 1, 1, 16]` int32 when added, and the int8 output.

use crate::config::VtaConfig;
use crate::conv2d::{generate, Conv2dPacked, Epilogue, Knobs};
use crate::error::VtaError;
use crate::module::VtaModule;
use std::collections::HashMap;
use tessera_ir::{DataType, PrimFunc, Stmt, StmtNode};

/// The `pragma_vta_*` values of `func`, by key without the prefix.
pub fn pragmas(func: &PrimFunc) -> HashMap<String, i64> {
    fn walk(s: &Stmt, out: &mut HashMap<String, i64>) {
        match s.node() {
            StmtNode::Attr { key, value, body } => {
                if let (Some(k), Some(v)) = (key.strip_prefix("pragma_vta_"), value.as_int()) {
                    out.insert(k.to_string(), v);
                }
                walk(body, out);
            }
            StmtNode::For { body, .. }
            | StmtNode::Allocate { body, .. }
            | StmtNode::Let { body, .. } => walk(body, out),
            StmtNode::IfThenElse {
                then_case,
                else_case,
                ..
            } => {
                walk(then_case, out);
                if let Some(e) = else_case {
                    walk(e, out);
                }
            }
            StmtNode::Seq(v) => v.iter().for_each(|s| walk(s, out)),
            _ => {}
        }
    }
    let mut out = HashMap::new();
    walk(&func.body, &mut out);
    out
}

/// The workload and knobs `func` asks VTA for, if it is a VTA kernel.
pub fn vta_kernel(func: &PrimFunc) -> Option<Result<(Conv2dPacked, Knobs), VtaError>> {
    let p = pragmas(func);
    if p.get("conv2d") != Some(&1) {
        return None;
    }
    Some(workload(func, &p))
}

fn workload(func: &PrimFunc, p: &HashMap<String, i64>) -> Result<(Conv2dPacked, Knobs), VtaError> {
    let bad = |reason: String| VtaError::Launch(format!("`{}`: {reason}", func.name));
    let get = |k: &str| -> Result<usize, VtaError> {
        p.get(k)
            .and_then(|v| usize::try_from(*v).ok())
            .ok_or_else(|| bad(format!("pragma `vta_{k}` is missing or negative")))
    };
    let bias = get("bias")? == 1;
    let want = if bias { 4 } else { 3 };
    if func.params.len() != want {
        return Err(bad(format!(
            "{} parameters, the kernel takes {want}",
            func.params.len()
        )));
    }
    let shape = |i: usize| -> Vec<usize> {
        func.params[i]
            .const_shape()
            .unwrap_or_default()
            .into_iter()
            .map(|d| d as usize)
            .collect()
    };
    let (d, k) = (shape(0), shape(1));
    let int8 = DataType::int(8);
    let dt = |i: usize| func.params[i].dtype();
    if d.len() != 6 || k.len() != 6 || dt(0) != int8 || dt(1) != int8 {
        return Err(bad(
            "data and kernel must be 6-D int8 (NCHW1n16c, OIHW16o16i)".into(),
        ));
    }
    let clip = |k: &str| -> Result<i16, VtaError> {
        p.get(k)
            .and_then(|v| i16::try_from(*v).ok())
            .ok_or_else(|| bad(format!("pragma `vta_{k}` is missing")))
    };
    let w = Conv2dPacked {
        n: d[0],
        ci: d[1],
        h: d[2],
        w: d[3],
        co: k[0],
        kh: k[2],
        kw: k[3],
        stride: (get("stride_h")?, get("stride_w")?),
        pad: (get("pad_h")?, get("pad_w")?),
        epilogue: Epilogue {
            bias,
            shift: get("shift")? as u32,
            round: get("round")? == 1,
            clip: (clip("clip_lo")?, clip("clip_hi")?),
        },
    };
    let knobs = Knobs {
        tile_b: get("tile_b")?,
        tile_h: get("tile_h")?,
        tile_w: get("tile_w")?,
        tile_ci: get("tile_ci")?,
        tile_co: get("tile_co")?,
        oc_nthread: get("oc_nthread")?,
        h_nthread: get("h_nthread")?,
    };
    Ok((w, knobs))
}

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
