//! `Resize` (opsets 10 to 19: nearest, linear and cubic; scales or sizes; the aspect
//! ratio kept where asked) and `Upsample` (opsets 7 to 9), over the last two axes of the
//! input (the others must keep their size); `GridSample` (an image sampled at
//! coordinates from a tensor) and `AffineGrid` (the coordinates of an affine map).

use super::attrs::NodeCtx;
use super::{Importer, Outputs};
use crate::error::GraphError;
use crate::ir::{Binary, Op};
use petgraph::stable_graph::NodeIndex;
use tessera_te::ops::{
    CoordMode, GridMode, GridPadding, GridSampleAttrs, NearestMode, ResizeAttrs, ResizeMethod,
};

/// The output size and the scales (output over input) of the last two axes.
type Plan = ((i64, i64), (f64, f64));

/// Per-axis scales and sizes, either possibly absent.
type ScalesAndSizes = (Option<Vec<f64>>, Option<Vec<i64>>);

/// The output size and scales of the last two axes of `shape` from per-axis `scales`
/// or `sizes`; every other axis must be kept.
fn plan(
    c: &NodeCtx,
    shape: &[i64],
    scales: Option<Vec<f64>>,
    sizes: Option<Vec<i64>>,
) -> Result<Plan, GraphError> {
    let n = shape.len();
    if n < 2 {
        return Err(c.bad(format!("cannot resize a rank-{n} tensor")));
    }
    let (out, scale): (Vec<i64>, Vec<f64>) = match (scales, sizes) {
        // both: the sizes and scales of a kept aspect ratio ([`keep_aspect_ratio`])
        (Some(scales), Some(sizes)) if !sizes.is_empty() && scales.len() == sizes.len() => {
            (sizes, scales)
        }
        (_, Some(sizes)) if !sizes.is_empty() => {
            let sc = sizes
                .iter()
                .zip(shape)
                .map(|(&o, &i)| o as f64 / i as f64)
                .collect();
            (sizes, sc)
        }
        (Some(scales), _) if !scales.is_empty() => {
            let out = scales
                .iter()
                .zip(shape)
                .map(|(&s, &i)| (s as f32 * i as f32) as i64)
                .collect();
            (out, scales)
        }
        _ => return Err(c.bad("needs scales or sizes")),
    };
    if out.len() != n {
        return Err(c.bad(format!("{} scales or sizes for rank {n}", out.len())));
    }
    if out[..n - 2] != shape[..n - 2] {
        return Err(c.bad(format!(
            "only the last two axes can be resized ({shape:?} to {out:?})"
        )));
    }
    Ok(((out[n - 2], out[n - 1]), (scale[n - 2], scale[n - 1])))
}

/// Sizes under `keep_aspect_ratio_policy` (opset 18): `not_larger` (`not_smaller`) scales
/// every axis of `axes` (all of them without it) by the smallest (largest) of their sizes'
/// ratios to the input: their sizes become the input's times it, rounded, and it is their
/// scale (the coordinates use it, not the rounded sizes' ratios).
fn keep_aspect_ratio(
    c: &NodeCtx,
    shape: &[i64],
    scales: Option<Vec<f64>>,
    sizes: Option<Vec<i64>>,
) -> Result<ScalesAndSizes, GraphError> {
    let policy = c.string("keep_aspect_ratio_policy");
    let larger = match policy.as_deref().unwrap_or("stretch") {
        "stretch" => return Ok((scales, sizes)),
        "not_larger" => false,
        "not_smaller" => true,
        other => return Err(c.bad(format!("keep_aspect_ratio_policy `{other}` is not defined"))),
    };
    let Some(sizes) = sizes.filter(|s| !s.is_empty()) else {
        return Ok((scales, None));
    };
    if sizes.len() != shape.len() {
        return Err(c.bad(format!("{} sizes for rank {}", sizes.len(), shape.len())));
    }
    let listed: Vec<usize> = match c.ints("axes") {
        Some(axes) => axes
            .iter()
            .map(|&a| super::shape::norm_axis(c, a, shape.len()))
            .collect::<Result<_, _>>()?,
        None => (0..shape.len()).collect(),
    };
    let ratios = listed.iter().map(|&d| sizes[d] as f64 / shape[d] as f64);
    let scale = if larger {
        ratios.fold(f64::MIN, f64::max)
    } else {
        ratios.fold(f64::MAX, f64::min)
    };
    let (mut out, mut scales) = (sizes.clone(), Vec::new());
    for d in 0..shape.len() {
        if listed.contains(&d) {
            out[d] = (scale * shape[d] as f64).round() as i64;
            scales.push(scale);
        } else {
            scales.push(sizes[d] as f64 / shape[d] as f64);
        }
    }
    // the coordinates use the common scale, not the rounded sizes' ratios
    Ok((Some(scales), Some(out)))
}

fn nearest_mode(c: &NodeCtx) -> Result<NearestMode, GraphError> {
    Ok(
        match c
            .string("nearest_mode")
            .as_deref()
            .unwrap_or("round_prefer_floor")
        {
            "round_prefer_floor" => NearestMode::RoundPreferFloor,
            "round_prefer_ceil" => NearestMode::RoundPreferCeil,
            "floor" => NearestMode::Floor,
            "ceil" => NearestMode::Ceil,
            other => return Err(c.bad(format!("nearest_mode `{other}` is not supported"))),
        },
    )
}

/// `Resize`: inputs `X, scales` (opset 10) or `X, roi, scales, sizes` (11 on).
pub(super) fn resize(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let (scales, sizes) = if imp.opset < 11 {
        (imp.const_floats(c, 1, "the scales")?, None)
    } else {
        (
            imp.const_floats(c, 2, "the scales")?,
            imp.const_ints(c, 3, "the sizes")?,
        )
    };
    if c.int("antialias", 0) != 0 {
        return Err(c.bad("antialiasing is not supported"));
    }
    let shape = imp.shape(x);
    let (scales, sizes) = match c.ints("axes") {
        // opset 18: the scales or sizes of the listed axes only
        Some(axes) => {
            let axes: Vec<usize> = axes
                .iter()
                .map(|&a| super::shape::norm_axis(c, a, shape.len()))
                .collect::<Result<_, _>>()?;
            let spread = |v: &[f64], keep: &dyn Fn(usize) -> f64| -> Result<Vec<f64>, GraphError> {
                if v.len() != axes.len() {
                    return Err(c.bad(format!("{} values for the axes {axes:?}", v.len())));
                }
                Ok((0..shape.len())
                    .map(|d| axes.iter().position(|&a| a == d).map_or(keep(d), |k| v[k]))
                    .collect())
            };
            let scales = scales
                .filter(|v| !v.is_empty())
                .map(|v| spread(&v, &|_| 1.0))
                .transpose()?;
            let sizes = sizes
                .filter(|v| !v.is_empty())
                .map(|v| {
                    let f: Vec<f64> = v.iter().map(|&s| s as f64).collect();
                    spread(&f, &|d| shape[d] as f64)
                        .map(|r| r.iter().map(|&s| s as i64).collect::<Vec<i64>>())
                })
                .transpose()?;
            (scales, sizes)
        }
        None => (scales, sizes),
    };
    let (scales, sizes) = keep_aspect_ratio(c, &shape, scales, sizes)?;
    let (size, scale) = plan(c, &shape, scales, sizes)?;
    let default_coord = if imp.opset < 11 {
        "asymmetric"
    } else {
        "half_pixel"
    };
    let coord = match c
        .string("coordinate_transformation_mode")
        .as_deref()
        .unwrap_or(default_coord)
    {
        "half_pixel" => CoordMode::HalfPixel,
        "pytorch_half_pixel" => CoordMode::PytorchHalfPixel,
        "align_corners" => CoordMode::AlignCorners,
        "asymmetric" => CoordMode::Asymmetric,
        "half_pixel_symmetric" => CoordMode::HalfPixelSymmetric,
        other => {
            return Err(c.bad(format!(
                "coordinate_transformation_mode `{other}` is not supported"
            )))
        }
    };
    let method = match c.string("mode").as_deref().unwrap_or("nearest") {
        "nearest" => ResizeMethod::Nearest(if imp.opset < 11 {
            NearestMode::Floor
        } else {
            nearest_mode(c)?
        }),
        "linear" => ResizeMethod::Linear,
        "cubic" => ResizeMethod::Cubic {
            a: c.float("cubic_coeff_a", -0.75) as f64,
            exclude_outside: c.int("exclude_outside", 0) != 0,
        },
        other => return Err(c.bad(format!("mode `{other}` is not supported"))),
    };
    let attrs = ResizeAttrs {
        size,
        scale,
        coord,
        method,
    };
    Ok(vec![imp.op(&c.name, Op::Resize(attrs), &[x])?])
}

/// `Upsample`: scales as an attribute (opset 7) or an input (9); asymmetric
/// coordinates, nearest rounding down.
pub(super) fn upsample(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let scales = if imp.opset < 9 {
        c.floats("scales")
            .map(|v| v.iter().map(|&s| s as f64).collect())
    } else {
        imp.const_floats(c, 1, "the scales")?
    };
    let (size, scale) = plan(c, &imp.shape(x), scales, None)?;
    let method = match c.string("mode").as_deref().unwrap_or("nearest") {
        "nearest" => ResizeMethod::Nearest(NearestMode::Floor),
        "linear" | "bilinear" => ResizeMethod::Linear,
        other => return Err(c.bad(format!("mode `{other}` is not supported"))),
    };
    let attrs = ResizeAttrs {
        size,
        scale,
        coord: CoordMode::Asymmetric,
        method,
    };
    Ok(vec![imp.op(&c.name, Op::Resize(attrs), &[x])?])
}

/// `GridSample` (opsets 16 to 22: `bilinear`/`bicubic` the older names of `linear`/
/// `cubic`), over 2 or 3 spatial axes.
pub(super) fn grid_sample(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let (x, grid) = (c.input(0)?, c.input(1)?);
    let mode = match c.string("mode").as_deref().unwrap_or("linear") {
        "nearest" => GridMode::Nearest,
        "linear" | "bilinear" => GridMode::Linear,
        "cubic" | "bicubic" => GridMode::Cubic,
        other => return Err(c.bad(format!("mode `{other}` is not defined"))),
    };
    let padding = match c.string("padding_mode").as_deref().unwrap_or("zeros") {
        "zeros" => GridPadding::Zeros,
        "border" => GridPadding::Border,
        "reflection" => GridPadding::Reflection,
        other => return Err(c.bad(format!("padding_mode `{other}` is not defined"))),
    };
    let attrs = GridSampleAttrs {
        mode,
        padding,
        align_corners: c.int("align_corners", 0) != 0,
    };
    Ok(vec![imp.op(&c.name, Op::GridSample(attrs), &[x, grid])?])
}

/// `AffineGrid` (opset 20): the sampling grid of `theta` (`[N, 2, 3]`, or `[N, 3, 4]`)
/// over an output of `size` (`[N, C, H, W]`, or `[N, C, D, H, W]`, known at import), as
/// PyTorch's `affine_grid` makes it for `GridSample`: each position's normalized
/// coordinates `(x, y[, z], 1)` (x along the last axis; the pixel centers, or the
/// corners with `align_corners`) times `thetaᵀ`, written as one broadcast product per
/// coordinate, summed.
pub(super) fn affine_grid(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let theta = c.input(0)?;
    let size = imp
        .const_ints(c, 1, "the output size")?
        .ok_or_else(|| c.bad("the output size (input 1) is missing"))?;
    let nd = match size.len() {
        4 => 2,
        5 => 3,
        n => return Err(c.bad(format!("size has {n} entries (4 for 2-D, 5 for 3-D)"))),
    };
    let ts = imp.shape(theta);
    if ts != [size[0], nd, nd + 1] {
        return Err(c.bad(format!(
            "theta is {ts:?}, not [{}, {nd}, {}] for size {size:?}",
            size[0],
            nd + 1
        )));
    }
    // the spatial axes, outermost first (D, H, W); coordinate j runs along the last but j
    let spatial = &size[2..];
    if spatial.iter().any(|&d| d < 1) {
        return Err(c.bad(format!("size {size:?} has an empty spatial axis")));
    }
    let align = c.int("align_corners", 0) != 0;
    let coord = |i: i64, len: i64| match (align, len) {
        (true, 1) => -1.0,
        (true, _) => -1.0 + 2.0 * i as f64 / (len - 1) as f64,
        (false, _) => (2.0 * i as f64 + 1.0) / len as f64 - 1.0,
    };
    let positions: i64 = spatial.iter().product();
    let dt = imp.ty(theta).dtype;
    let n = size[0];
    // θ's column j as [N, 1, nd]
    let column = |imp: &mut Importer, j: i64| -> Result<NodeIndex, GraphError> {
        let op = Op::StridedSlice {
            begin: vec![0, 0, j],
            end: vec![n, nd, j + 1],
            strides: vec![1, 1, 1],
        };
        let s = imp.op(&c.sub(&format!("theta_col{j}")), op, &[theta])?;
        imp.reshape(&c.sub(&format!("theta_col{j}_row")), s, vec![n, 1, nd])
    };
    // the translation: the coordinate 1
    let mut grid = column(imp, nd)?;
    for j in 0..nd {
        let axis = spatial.len() - 1 - j as usize;
        let len = spatial[axis];
        let inner: i64 = spatial[axis + 1..].iter().product();
        let values: Vec<f64> = (0..positions)
            .map(|p| coord(p / inner % len, len))
            .collect();
        let dims = [1, positions as usize, 1];
        let base = imp.g.constant(
            &c.sub(&format!("coord{j}")),
            tessera_runtime::NDArray::from_f64(dt, &dims, &values)?,
        );
        let col = column(imp, j)?;
        let term = imp.binary(&c.sub(&format!("term{j}")), Binary::Mul, base, col)?;
        grid = imp.binary(&c.sub(&format!("sum{j}")), Binary::Add, grid, term)?;
    }
    let mut shape = vec![n];
    shape.extend_from_slice(spatial);
    shape.push(nd);
    Ok(vec![imp.reshape(&c.name, grid, shape)?])
}
