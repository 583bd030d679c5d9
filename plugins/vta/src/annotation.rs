//! What a scheduled function tells the VTA backend, as typed values: the convolution's
//! geometry beyond its tensors' shapes and the template's knobs ([`KernelAnnotation`]),
//! and the epilogue its fused group computes ([`Epilogue`]). They cross the lowered
//! function as `Stmt::Attr` pragmas (`pragma_vta_<key>`, integer values), since a
//! function is what a backend receives; this module is the only one that names the
//! keys, writing them ([`KernelAnnotation::pragmas`], [`epilogue_pragmas`]) and reading
//! them back ([`read`]).
//!
//! The keys: `conv2d` (1) marks the kernel; `stride_h/w`, `pad_h/w` complete the
//! workload; `bias` (0/1), `shift`, `round` (0/1), `clip_lo/hi` give the epilogue;
//! `tile_b/h/w/ci/co`, `oc_nthread`, `h_nthread` the knobs. The parameters are data
//! `[N, CI, H, W, 1, 16]` int8, kernel `[CO, CI, KH, KW, 16, 16]` int8, the bias
//! `[1, CO, 1, 1, 1, 16]` int32 when added, and the int8 output.

use crate::conv2d::{Conv2dPacked, Epilogue, Knobs};
use crate::error::VtaError;
use std::collections::HashMap;
use tessera_ir::{DataType, PrimFunc, Stmt, StmtNode};

/// The prefix of every VTA pragma key, as the lowered function carries it.
const PREFIX: &str = "pragma_vta_";

/// A kernel the template scheduled for VTA: the convolution's strides and padding and
/// the configuration's knobs (the rest of the workload is in the parameters' shapes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelAnnotation {
    pub stride: (usize, usize),
    pub pad: (usize, usize),
    pub knobs: Knobs,
}

/// A pragma: its key without the `pragma_` prefix the schedule adds, and its value.
pub type Pragma = (String, i64);

fn pragma(key: &str, value: i64) -> Pragma {
    (format!("vta_{key}"), value)
}

impl KernelAnnotation {
    /// The pragmas that carry the annotation (keys as `Schedule::pragma` takes them).
    pub fn pragmas(&self) -> Vec<Pragma> {
        let k = &self.knobs;
        [
            ("conv2d", 1),
            ("stride_h", self.stride.0),
            ("stride_w", self.stride.1),
            ("pad_h", self.pad.0),
            ("pad_w", self.pad.1),
            ("tile_b", k.tile_b),
            ("tile_h", k.tile_h),
            ("tile_w", k.tile_w),
            ("tile_ci", k.tile_ci),
            ("tile_co", k.tile_co),
            ("oc_nthread", k.oc_nthread),
            ("h_nthread", k.h_nthread),
        ]
        .into_iter()
        .map(|(key, v)| pragma(key, v as i64))
        .collect()
    }
}

/// The pragmas that carry epilogue `e`.
pub fn epilogue_pragmas(e: &Epilogue) -> Vec<Pragma> {
    vec![
        pragma("bias", e.bias.into()),
        pragma("shift", e.shift.into()),
        pragma("round", e.round.into()),
        pragma("clip_lo", e.clip.0.into()),
        pragma("clip_hi", e.clip.1.into()),
    ]
}

/// The `pragma_vta_*` values of `func`, by key without the prefix.
fn pragmas_of(func: &PrimFunc) -> HashMap<String, i64> {
    fn walk(s: &Stmt, out: &mut HashMap<String, i64>) {
        match s.node() {
            StmtNode::Attr { key, value, body } => {
                if let (Some(k), Some(v)) = (key.strip_prefix(PREFIX), value.as_int()) {
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

/// The workload and knobs `func` asks VTA for, if it is a VTA kernel (`None`: a
/// function for the board's CPU).
pub fn read(func: &PrimFunc) -> Option<Result<(Conv2dPacked, Knobs), VtaError>> {
    let p = pragmas_of(func);
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
