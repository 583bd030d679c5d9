//! Winograd conv2d F(m×m, 3×3), m = 2 or 4, data NHWC, stride 1: the transform
//! matrices, the weight transform, TVM's form (`conv2d_winograd_nhwc`, the stages and
//! names of TOPI, constant matrices read through `const_matrix`) and the CPU's form
//! ([`conv2d_winograd_nhwc_blocked`]: each transform written out as its nonzero terms,
//! one matrix side per stage, the weights blocked by output channels).

use super::attr_err;
use super::conv::{shape_err, Conv2dAttrs};
use super::injective::pad;
use crate::error::TeError;
use crate::tensor::{compute, compute_tagged, compute_with_attrs, reduce_axis, sum, Tensor};
use tessera_ir::{DataType, Expr};

/// The compute attribute naming the axes that index constant matrices (TVM's
/// `auto_scheduler_simplify_const_tensor_indices`): the auto-scheduler unrolls them so
/// that the matrix entries fold to constants, and does not tile such a stage as a
/// reduction.
pub const SIMPLIFY_CONST_TENSOR_INDICES: &str = "auto_scheduler_simplify_const_tensor_indices";

// ----- Winograd -----

/// A small dense matrix, row-major.
pub type Matrix = Vec<Vec<f64>>;

/// The Winograd transform matrices `(A, B, G)` of F(m×m, 3×3) for m = 2 or 4, as row-major
/// nested vectors: `A` is α×m, `B` is α×α, `G` is α×3 (α = m + 2), such that
/// `Y = Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A`.
pub fn winograd_matrices(m: i64) -> Option<(Matrix, Matrix, Matrix)> {
    let t = |rows: &[&[f64]]| -> Vec<Vec<f64>> {
        let (r, c) = (rows.len(), rows[0].len());
        (0..c)
            .map(|j| (0..r).map(|i| rows[i][j]).collect())
            .collect()
    };
    match m {
        2 => {
            let at: &[&[f64]] = &[&[1.0, 1.0, 1.0, 0.0], &[0.0, 1.0, -1.0, -1.0]];
            let bt: &[&[f64]] = &[
                &[1.0, 0.0, -1.0, 0.0],
                &[0.0, 1.0, 1.0, 0.0],
                &[0.0, -1.0, 1.0, 0.0],
                &[0.0, 1.0, 0.0, -1.0],
            ];
            let g = vec![
                vec![1.0, 0.0, 0.0],
                vec![0.5, 0.5, 0.5],
                vec![0.5, -0.5, 0.5],
                vec![0.0, 0.0, 1.0],
            ];
            Some((t(at), t(bt), g))
        }
        4 => {
            let at: &[&[f64]] = &[
                &[1.0, 1.0, 1.0, 1.0, 1.0, 0.0],
                &[0.0, 1.0, -1.0, 2.0, -2.0, 0.0],
                &[0.0, 1.0, 1.0, 4.0, 4.0, 0.0],
                &[0.0, 1.0, -1.0, 8.0, -8.0, 1.0],
            ];
            let bt: &[&[f64]] = &[
                &[4.0, 0.0, -5.0, 0.0, 1.0, 0.0],
                &[0.0, -4.0, -4.0, 1.0, 1.0, 0.0],
                &[0.0, 4.0, -4.0, -1.0, 1.0, 0.0],
                &[0.0, -2.0, -1.0, 2.0, 1.0, 0.0],
                &[0.0, 2.0, -1.0, -2.0, 1.0, 0.0],
                &[0.0, 4.0, 0.0, -5.0, 0.0, 1.0],
            ];
            let g = vec![
                vec![0.25, 0.0, 0.0],
                vec![-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0],
                vec![-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0],
                vec![1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0],
                vec![1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0],
                vec![0.0, 0.0, 1.0],
            ];
            Some((t(at), t(bt), g))
        }
        _ => None,
    }
}

/// A constant matrix as a compute, the way TVM's `const_matrix` builds it: nested selects
/// on `(i % rows == ii) && (j % cols == jj)`, the last entry outermost.
fn const_matrix(matrix: &[Vec<f64>], name: &str, dtype: DataType) -> Result<Tensor, TeError> {
    let (rows, cols) = (matrix.len() as i64, matrix[0].len() as i64);
    compute(&[rows, cols], name, &["i", "j"], |ix| {
        let mut now = Expr::constant(dtype, 0.0);
        for (ii, row) in matrix.iter().enumerate() {
            for (jj, v) in row.iter().enumerate() {
                let cond = Expr::and(
                    Expr::floormod(ix[0].clone(), Expr::int(rows)).eq(ii as i64),
                    Expr::floormod(ix[1].clone(), Expr::int(cols)).eq(jj as i64),
                );
                now = Expr::select(cond, Expr::constant(dtype, *v), now);
            }
        }
        now
    })
}

/// The Winograd weight transform of an HWIO 3×3 kernel: `kernel_pack[α, α, CO, CI] = G g Gᵀ`
/// (TVM computes it ahead of time; the conv takes the transformed weight).
pub fn winograd_weight_transform_nhwc(kernel: &Tensor, tile: i64) -> Result<Tensor, TeError> {
    let op = "winograd_weight_transform";
    let k = kernel.shape().to_vec();
    if k.len() != 4 || k[0] != 3 || k[1] != 3 {
        return Err(attr_err(
            op,
            "kernel_size",
            format!("Winograd needs a 3x3 HWIO kernel, got {k:?}"),
        ));
    }
    let (_, _, g) = winograd_matrices(tile)
        .ok_or_else(|| attr_err(op, "tile_size", format!("{tile} (supported: 2, 4)")))?;
    let alpha = tile + 2;
    let gm = const_matrix(&g, "G", kernel.dtype())?;
    let (r_kh, r_kw) = (reduce_axis(3, "r_kh"), reduce_axis(3, "r_kw"));
    compute(
        &[alpha, alpha, k[3], k[2]],
        "kernel_pack",
        &["eps", "nu", "co", "ci"],
        |ix| {
            let v = kernel.at(&[r_kh.expr(), r_kw.expr(), ix[3].clone(), ix[2].clone()])
                * gm.at(&[ix[0].clone(), r_kh.expr()])
                * gm.at(&[ix[1].clone(), r_kw.expr()]);
            sum(v, &[r_kh.clone(), r_kw.clone()])
        },
    )
}

/// Winograd conv2d F(m×m, 3×3), data NHWC, stride 1, with the transformed weight
/// `kernel_pack` [α, α, CO, CI] — TVM's `conv2d_winograd_nhwc` stages: data_pad,
/// input_tile, B, data_pack, bgemm, A, inverse, conv2d_winograd.
pub fn conv2d_winograd_nhwc(
    data: &Tensor,
    kernel_pack: &Tensor,
    padding: [i64; 4],
    tile: i64,
) -> Result<Tensor, TeError> {
    let op = "conv2d_winograd_nhwc";
    let (a_m, b_m) = checked_operands(op, data, kernel_pack, tile, (4, "COxCI"))?;
    let alpha = tile + 2;
    let (d, k) = (data.shape().to_vec(), kernel_pack.shape().to_vec());
    let Tiling {
        h,
        w,
        nh,
        nw,
        p,
        data_pad,
    } = tiling(op, data, padding, tile)?;
    let input_tile = compute(
        &[alpha, alpha, p, d[3]],
        "input_tile",
        &["eps", "nu", "p", "ci"],
        |ix| {
            let (n, th, tw) = tile_origin(&ix[2], nh, nw, tile);
            data_pad.at(&[n, th + ix[0].clone(), tw + ix[1].clone(), ix[3].clone()])
        },
    )?;
    let bm = const_matrix(&b_m, "B", data.dtype())?;
    let (r_a, r_b) = (reduce_axis(alpha, "r_a"), reduce_axis(alpha, "r_b"));
    let data_pack = compute_with_attrs(
        &[alpha, alpha, p, d[3]],
        "data_pack",
        "",
        &["eps", "nu", "p", "ci"],
        &[(SIMPLIFY_CONST_TENSOR_INDICES, &["eps", "nu", "r_a", "r_b"])],
        |ix| {
            let v = input_tile.at(&[r_a.expr(), r_b.expr(), ix[2].clone(), ix[3].clone()])
                * bm.at(&[r_a.expr(), ix[0].clone()])
                * bm.at(&[r_b.expr(), ix[1].clone()]);
            sum(v, &[r_a.clone(), r_b.clone()])
        },
    )?;
    let ci = reduce_axis(d[3], "ci");
    let bgemm = compute_tagged(
        &[alpha, alpha, p, k[2]],
        "bgemm",
        "bgemm",
        &["eps", "nu", "p", "co"],
        |ix| {
            let v = data_pack.at(&[ix[0].clone(), ix[1].clone(), ix[2].clone(), ci.expr()])
                * kernel_pack.at(&[ix[0].clone(), ix[1].clone(), ix[3].clone(), ci.expr()]);
            sum(v, &[ci.clone()])
        },
    )?;
    let am = const_matrix(&a_m, "A", data.dtype())?;
    let (r_a2, r_b2) = (reduce_axis(alpha, "r_a"), reduce_axis(alpha, "r_b"));
    let inverse = compute_with_attrs(
        &[tile, tile, p, k[2]],
        "inverse",
        "",
        &["vh", "vw", "p", "co"],
        &[(SIMPLIFY_CONST_TENSOR_INDICES, &["vh", "vw", "r_a", "r_b"])],
        |ix| {
            let v = bgemm.at(&[r_a2.expr(), r_b2.expr(), ix[2].clone(), ix[3].clone()])
                * am.at(&[r_a2.expr(), ix[0].clone()])
                * am.at(&[r_b2.expr(), ix[1].clone()]);
            sum(v, &[r_a2.clone(), r_b2.clone()])
        },
    )?;
    compute_tagged(
        &[d[0], h, w, k[2]],
        "conv2d_winograd",
        TAG_WINOGRAD,
        &["n", "h", "w", "co"],
        |ix| {
            let pidx = tile_of(&ix[0], &ix[1], &ix[2], nh, nw, tile);
            let t = Expr::int(tile);
            inverse.at(&[
                Expr::floormod(ix[1].clone(), t.clone()),
                Expr::floormod(ix[2].clone(), t),
                pidx,
                ix[3].clone(),
            ])
        },
    )
}

/// The matrices `(A, B)` of F(`tile`×`tile`, 3×3), once `data` (NHWC) and
/// `kernel_pack` fit each other and the tile size: `kernel_pack` of rank `form.0`,
/// `[α, α, …]` with the remaining axes `form.1` names (e.g. `COxCI`), the input channels
/// at index 3.
fn checked_operands(
    op: &str,
    data: &Tensor,
    kernel_pack: &Tensor,
    tile: i64,
    (rank, rest): (usize, &str),
) -> Result<(Matrix, Matrix), TeError> {
    let (a_m, b_m, _) = winograd_matrices(tile)
        .ok_or_else(|| attr_err(op, "tile_size", format!("{tile} (supported: 2, 4)")))?;
    let alpha = tile + 2;
    let (d, k) = (data.shape(), kernel_pack.shape());
    if d.len() != 4 || k.len() != rank {
        let why = format!("data {d:?} must be 4-D and kernel_pack {k:?} {rank}-D");
        return Err(shape_err(op, d, why));
    }
    if k[0] != alpha || k[1] != alpha {
        let why = format!(
            "kernel_pack {k:?} is not transformed for tile size {tile} \
             (expected {alpha}x{alpha}x{rest})"
        );
        return Err(attr_err(op, "tile_size", why));
    }
    if k[3] != d[3] {
        let why = format!("kernel_pack has {} input channels, the data {}", k[3], d[3]);
        return Err(shape_err(op, d, why));
    }
    Ok((a_m, b_m))
}

/// How an NHWC image is cut into Winograd tiles: the output size, the tiles per column
/// and per row, the tile count `p` (over the batch), and the input padded so that every
/// tile reads inside it.
struct Tiling {
    h: i64,
    w: i64,
    nh: i64,
    nw: i64,
    p: i64,
    data_pad: Tensor,
}

fn tiling(op: &str, data: &Tensor, padding: [i64; 4], tile: i64) -> Result<Tiling, TeError> {
    let d = data.shape();
    let attrs = Conv2dAttrs {
        padding,
        ..Default::default()
    };
    let (h, w) = attrs.output_hw(op, d[1], d[2], 3, 3)?;
    let alpha = tile + 2;
    let (nh, nw) = ((h + tile - 1) / tile, (w + tile - 1) / tile);
    let (need_h, need_w) = ((nh - 1) * tile + alpha, (nw - 1) * tile + alpha);
    let extra_h = (need_h - (d[1] + padding[0] + padding[2])).max(0);
    let extra_w = (need_w - (d[2] + padding[1] + padding[3])).max(0);
    let data_pad = pad(
        data,
        &[0, padding[0], padding[1], 0],
        &[0, padding[2] + extra_h, padding[3] + extra_w, 0],
        "data_pad",
    )?;
    Ok(Tiling {
        h,
        w,
        nh,
        nw,
        p: d[0] * nh * nw,
        data_pad,
    })
}

/// The image, first row and first column (in the padded input) of tile `pv`.
fn tile_origin(pv: &Expr, nh: i64, nw: i64, tile: i64) -> (Expr, Expr, Expr) {
    let n = Expr::floordiv(pv.clone(), Expr::int(nh * nw));
    let th = Expr::floormod(Expr::floordiv(pv.clone(), Expr::int(nw)), Expr::int(nh)) * tile;
    let tw = Expr::floormod(pv.clone(), Expr::int(nw)) * tile;
    (n, th, tw)
}

/// The tile holding output pixel `(n, h, w)`.
fn tile_of(n: &Expr, h: &Expr, w: &Expr, nh: i64, nw: i64, tile: i64) -> Expr {
    let t = Expr::int(tile);
    n.clone() * nh * nw + Expr::floordiv(h.clone(), t.clone()) * nw + Expr::floordiv(w.clone(), t)
}

/// The tag of [`conv2d_winograd_nhwc`]'s output (TVM's).
pub const TAG_WINOGRAD: &str = "conv2d_winograd_nhwc";

/// The tag of [`conv2d_winograd_nhwc_blocked`]'s output: the CPU's default schedule
/// takes the whole chain of stages from it.
pub const TAG_WINOGRAD_BLOCKED: &str = "conv2d_winograd_nhwc_blocked";

/// `Σ coefs[i] · term(i)` over the nonzero coefficients only, written out (±1 without
/// a product); 0 when every coefficient is 0.
fn nonzero_terms(coefs: &[f64], dtype: DataType, term: impl Fn(i64) -> Expr) -> Expr {
    let mut acc: Option<Expr> = None;
    for (i, &c) in coefs.iter().enumerate() {
        if c == 0.0 {
            continue;
        }
        let t = term(i as i64);
        acc = Some(match acc {
            None if c == 1.0 => t,
            None if c == -1.0 => -t,
            None => t * c,
            Some(a) if c == 1.0 => a + t,
            Some(a) if c == -1.0 => a - t,
            Some(a) => a + t * c,
        });
    }
    acc.unwrap_or_else(|| Expr::constant(dtype, 0.0))
}

/// `rows[idx]` for `idx` in `[0, rows.len())`: a chain of selects, each decided (and
/// folded away) once `idx` is a constant, as in an unrolled loop.
fn select_by(idx: &Expr, rows: Vec<Expr>) -> Expr {
    let mut it = rows.into_iter().enumerate().rev();
    let (_, mut e) = it.next().expect("a transform has rows");
    for (i, r) in it {
        e = Expr::select(idx.clone().eq(i as i64), r, e);
    }
    e
}

/// Column `j` of a row-major matrix.
fn column(m: &Matrix, j: usize) -> Vec<f64> {
    m.iter().map(|row| row[j]).collect()
}

/// Winograd conv2d F(m×m, 3×3), data NHWC, stride 1, as the CPU builds it: the weight
/// transformed and blocked ahead of time, `kernel_pack [α, α, C_OUT/b, C_IN, b]`
/// (`kernel_pack[ε, ν, o / b, i, o % b] = (G g Gᵀ)[ε, ν]` of the HWIO kernel `g[.., i, o]`).
///
/// Each transform is two stages, one side of the matrix product each, written as the
/// sum of its nonzero terms selected by the row index (decided once the row loops are
/// unrolled), so a schedule that unrolls them computes `Bᵀ d B` and `Aᵀ M A` with only
/// the additions and multiplications the matrices need (no constant tables, no
/// products by 0 or ±1): `data_pack_t` = `Bᵀ d`, `data_pack` = `(Bᵀ d) B`, the batched
/// GEMM `bgemm` over the input channels (the weights contiguous along a block of output
/// channels), `inverse_t` = `Aᵀ M`, and the output `(Aᵀ M) A` read back into NHWC.
pub fn conv2d_winograd_nhwc_blocked(
    data: &Tensor,
    kernel_pack: &Tensor,
    padding: [i64; 4],
    tile: i64,
) -> Result<Tensor, TeError> {
    let op = "conv2d_winograd_nhwc_blocked";
    let (a_m, b_m) = checked_operands(op, data, kernel_pack, tile, (5, "C_OUT/bxC_INxb"))?;
    let alpha = tile + 2;
    let (d, k) = (data.shape().to_vec(), kernel_pack.shape().to_vec());
    let (block, co) = (k[4], k[2] * k[4]);
    let dt = data.dtype();
    let Tiling {
        h,
        w,
        nh,
        nw,
        p,
        data_pad,
    } = tiling(op, data, padding, tile)?;
    let a = alpha as usize;
    let data_pack_t = compute_with_attrs(
        &[alpha, alpha, p, d[3]],
        "data_pack_t",
        "",
        &["eps", "r_b", "p", "ci"],
        &[(SIMPLIFY_CONST_TENSOR_INDICES, &["eps", "r_b"])],
        |ix| {
            let (n, th, tw) = tile_origin(&ix[2], nh, nw, tile);
            let rows = (0..a)
                .map(|eps| {
                    nonzero_terms(&column(&b_m, eps), dt, |r| {
                        let (y, x) = (th.clone() + r, tw.clone() + ix[1].clone());
                        data_pad.at(&[n.clone(), y, x, ix[3].clone()])
                    })
                })
                .collect();
            select_by(&ix[0], rows)
        },
    )?;
    let data_pack = compute_with_attrs(
        &[alpha, alpha, p, d[3]],
        "data_pack",
        "",
        &["eps", "nu", "p", "ci"],
        &[(SIMPLIFY_CONST_TENSOR_INDICES, &["eps", "nu"])],
        |ix| {
            let rows = (0..a)
                .map(|nu| {
                    nonzero_terms(&column(&b_m, nu), dt, |r| {
                        data_pack_t.at(&[ix[0].clone(), Expr::int(r), ix[2].clone(), ix[3].clone()])
                    })
                })
                .collect();
            select_by(&ix[1], rows)
        },
    )?;
    let ci = reduce_axis(d[3], "ci");
    let bgemm = compute_tagged(
        &[alpha, alpha, p, co],
        "bgemm",
        "winograd_bgemm",
        &["eps", "nu", "p", "co"],
        |ix| {
            let (o, b) = (
                Expr::floordiv(ix[3].clone(), Expr::int(block)),
                Expr::floormod(ix[3].clone(), Expr::int(block)),
            );
            let v = data_pack.at(&[ix[0].clone(), ix[1].clone(), ix[2].clone(), ci.expr()])
                * kernel_pack.at(&[ix[0].clone(), ix[1].clone(), o, ci.expr(), b]);
            sum(v, &[ci.clone()])
        },
    )?;
    let inverse_t = compute_with_attrs(
        &[tile, alpha, p, co],
        "inverse_t",
        "",
        &["vh", "r_b", "p", "co"],
        &[(SIMPLIFY_CONST_TENSOR_INDICES, &["vh", "r_b"])],
        |ix| {
            let rows = (0..tile as usize)
                .map(|vh| {
                    nonzero_terms(&column(&a_m, vh), dt, |r| {
                        bgemm.at(&[Expr::int(r), ix[1].clone(), ix[2].clone(), ix[3].clone()])
                    })
                })
                .collect();
            select_by(&ix[0], rows)
        },
    )?;
    compute_tagged(
        &[d[0], h, w, co],
        "conv2d_winograd",
        TAG_WINOGRAD_BLOCKED,
        &["n", "h", "w", "co"],
        |ix| {
            let pidx = tile_of(&ix[0], &ix[1], &ix[2], nh, nw, tile);
            let t = Expr::int(tile);
            let (vh, vw) = (
                Expr::floormod(ix[1].clone(), t.clone()),
                Expr::floormod(ix[2].clone(), t),
            );
            let rows = (0..tile as usize)
                .map(|j| {
                    nonzero_terms(&column(&a_m, j), dt, |r| {
                        inverse_t.at(&[vh.clone(), Expr::int(r), pidx.clone(), ix[3].clone()])
                    })
                })
                .collect();
            select_by(&vw, rows)
        },
    )
}
