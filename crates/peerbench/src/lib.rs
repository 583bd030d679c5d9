//! The peer benchmark behind `tessera bench`: Tessera's default CPU schedules against the
//! `gemm` crate, timed in one run, single-threaded and with two threads, every kernel's
//! output checked against the peer's ([`kernel_rows`]):
//!
//! - float32 matmul 1024×1024×1024: our default schedule vs `gemm::gemm` (sgemm, AVX-512
//!   kernels via the crate's `x86-v4` feature);
//! - the same loop nest without vectorization, to show what vectorization brings;
//! - float32 dense 1024×1024×1024 (weight `[N, K]`): our default schedule vs the same
//!   sgemm reading the weight transposed;
//! - ResNet conv2d NHWC 1×56×56×64 ⊛ 3×3×64×64, stride 1, pad 1: our default schedule vs
//!   im2col + the same sgemm (the im2col copy is part of the peer's time).
//!
//! And a log's best step history for one operator against its default schedule and the
//! peer ([`compare_tuned`]).
//!
//! Everything here is behind the cargo feature `peer` (the CLI's `bench`), so that the
//! workspace's build and tests compile neither this nor the `gemm` crate.

#![cfg(feature = "peer")]

use gemm::Parallelism;
use tessera_backends::{Backend, CpuBackend, Target};
use tessera_runtime::{Module, NDArray, TimeEvaluator};
use tessera_search::record::Record;
use tessera_te::catalog::{OpAttrs, OpSpec};
use tessera_te::schedules::CpuParams;

/// What failed, with its cause.
#[derive(Debug, thiserror::Error)]
pub enum PeerBenchError {
    #[error(transparent)]
    Catalog(#[from] tessera_te::catalog::CatalogError),
    #[error(transparent)]
    Backend(#[from] tessera_backends::BackendError),
    #[error(transparent)]
    Runtime(#[from] tessera_runtime::RuntimeError),
    #[error(transparent)]
    Target(#[from] tessera_backends::TargetError),
    #[error("applying the log's best step history: {0}")]
    Apply(#[from] tessera_search::apply::ApplyError),
    #[error("a build directory: {0}")]
    Io(#[from] std::io::Error),
    /// One of our kernels computes otherwise than the peer.
    #[error("our kernel differs from the gemm crate: {0}")]
    Mismatch(String),
    /// An operator the peer has no counterpart of.
    #[error("the peer benchmark takes {0}")]
    Unsupported(String),
    #[error("the log holds no successful step history for {0}")]
    NoRecord(String),
}

/// How each side is timed (TVM's conventions, one call per repeat).
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Repeats per measurement (the median is kept).
    pub repeat: usize,
    /// The least duration of one repeat, in milliseconds.
    pub min_repeat_ms: f64,
}

impl Timing {
    fn evaluator(&self) -> TimeEvaluator {
        TimeEvaluator {
            number: 1,
            repeat: self.repeat.max(1),
            min_repeat_ms: self.min_repeat_ms,
            cache_flush: false,
            slow_cutoff: None,
        }
    }
}

fn cpu_target(threads: usize) -> Result<Target, PeerBenchError> {
    Ok(format!("cpu -num-cores={threads}").parse()?)
}

/// The kernel table: matmul and dense 1024³ against sgemm (matmul also against its own
/// loop nest unvectorized), and ResNet's 56×56×64 3×3 conv2d against im2col + sgemm,
/// each with one and two threads.
pub fn kernel_rows(timing: &Timing) -> Result<Vec<Row>, PeerBenchError> {
    let ev = timing.evaluator();
    let dir = tempfile::tempdir()?;
    let mut rows = gemm_rows(&ev, dir.path())?;
    rows.extend(conv2d_rows(&ev, dir.path())?);
    Ok(rows)
}

/// Which build of our schedule to time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    /// The default schedule.
    Vectorized,
    /// The same loop nest without the vectorize annotations; the C compiler may
    /// still auto-vectorize it.
    Scalar,
    /// The same, with the C compiler's auto-vectorization turned off.
    ScalarNoAutoVec,
}

/// Median milliseconds of `f`, timed with TVM's conventions.
fn time(
    ev: &TimeEvaluator,
    mut f: impl FnMut() -> Result<(), PeerBenchError>,
) -> Result<f64, PeerBenchError> {
    Ok(ev.evaluate(&mut f)?.median_ms())
}

/// One workload: the catalog operator, its input values and the peer's output.
struct Case<'a> {
    spec: &'a OpSpec,
    inputs: &'a [NDArray],
    want: &'a NDArray,
}

/// Builds the case's operator with our default schedule for `threads` threads and
/// returns its median time, checking it against the peer's output.
fn ours(
    ev: &TimeEvaluator,
    case: &Case,
    threads: usize,
    variant: Variant,
    dir: &std::path::Path,
) -> Result<f64, PeerBenchError> {
    let target = cpu_target(threads)?;
    let backend = match variant {
        Variant::ScalarNoAutoVec => CpuBackend::new(target)
            .with_extra_cflags(&["-fno-tree-vectorize", "-fno-tree-slp-vectorize"]),
        _ => CpuBackend::new(target),
    };
    let vectorize = variant == Variant::Vectorized;
    let hw = backend.hardware_params();
    let p = CpuParams {
        vector_lanes: hw.f32_lanes(),
        num_cores: threads,
        vectorize,
        gpu_threads: 0,
    };
    let name = format!("{}_{threads}t_{variant:?}", case.spec.name);
    let func = case.spec.default_func(p, &name)?;
    time_func(ev, case, &backend, &func, dir)
}

/// Builds `func` (arguments: the case's inputs, then its output), checks its output
/// against the peer's and returns its median time.
fn time_func(
    ev: &TimeEvaluator,
    case: &Case,
    backend: &CpuBackend,
    func: &tessera_ir::PrimFunc,
    dir: &std::path::Path,
) -> Result<f64, PeerBenchError> {
    let module = Module::load(&backend.build(func, dir)?)?;
    let mut arrays: Vec<NDArray> = case.inputs.to_vec();
    arrays.push(NDArray::zeros(case.want.dtype(), case.want.shape())?);
    let mut refs: Vec<&mut NDArray> = arrays.iter_mut().collect();
    module.call(&mut refs)?;
    let out = refs.last().expect("the output was pushed last");
    out.allclose(case.want, 1e-3, 1e-3)
        .map_err(|e| PeerBenchError::Mismatch(format!("{}: {e}", func.name)))?;
    Ok(module.time_with(ev, &mut refs)?.median_ms())
}

/// How the right-hand operand of [`sgemm`] is stored.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rhs {
    /// `b[k×n]`, row-major.
    KxN,
    /// `w[n×k]`, row-major: the product is `a · wᵀ` (dense).
    NxK,
}

/// `c[m×n] = a[m×k] · b` for `(m, n, k)`, row-major, with the gemm crate.
fn sgemm(
    (m, n, k): (usize, usize, usize),
    a: &[f32],
    b: &[f32],
    rhs: Rhs,
    c: &mut [f32],
    threads: usize,
) {
    let par = if threads > 1 {
        Parallelism::Rayon(threads)
    } else {
        Parallelism::None
    };
    assert!(
        a.len() >= m * k && b.len() >= k * n && c.len() >= m * n,
        "sgemm operand sizes"
    );
    // (column stride, row stride) of b read as a k×n matrix.
    let (b_cs, b_rs) = match rhs {
        Rhs::KxN => (1, n as isize),
        Rhs::NxK => (k as isize, 1),
    };
    // SAFETY: the slices hold m×k, k×n and m×n elements (checked above), read with the
    // strides of their layouts, and `c` does not alias `a` or `b` (distinct borrows).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            1,
            k as isize,
            b.as_ptr(),
            b_cs,
            b_rs,
            0.0f32,
            1.0f32,
            false,
            false,
            false,
            par,
        );
    }
}

/// A stride-1 convolution of one NHWC image: input h×w×c, kernel kh×kw, zero padding.
#[derive(Clone, Copy)]
struct ConvShape {
    h: usize,
    w: usize,
    c: usize,
    kh: usize,
    kw: usize,
    pad: usize,
}

fn im2col(x: &[f32], cs: ConvShape, cols: &mut [f32]) {
    let ConvShape {
        h,
        w,
        c,
        kh,
        kw,
        pad,
    } = cs;
    let (oh, ow) = (h + 2 * pad - kh + 1, w + 2 * pad - kw + 1);
    let kdim = kh * kw * c;
    for y in 0..oh {
        for xx in 0..ow {
            let row = &mut cols[(y * ow + xx) * kdim..(y * ow + xx + 1) * kdim];
            for ry in 0..kh {
                for rx in 0..kw {
                    let (iy, ix) = (
                        (y + ry) as isize - pad as isize,
                        (xx + rx) as isize - pad as isize,
                    );
                    let dst = &mut row[(ry * kw + rx) * c..(ry * kw + rx + 1) * c];
                    if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                        dst.fill(0.0);
                    } else {
                        let src = (iy as usize * w + ix as usize) * c;
                        dst.copy_from_slice(&x[src..src + c]);
                    }
                }
            }
        }
    }
}

/// The peer's computation, writing the output.
type Peer = Box<dyn FnMut(&mut [f32])>;

/// The peer of a tuned operator: `gemm` for matmul, im2col + `gemm` for a conv2d of
/// one image with an odd square kernel and "same" padding; `vals` are its inputs.
fn peer_for(
    spec: &OpSpec,
    vals: &[Vec<f32>],
    threads: usize,
) -> Result<(&'static str, Peer), PeerBenchError> {
    let (av, bv) = match vals {
        [a, b] => (a.clone(), b.clone()),
        _ => {
            return Err(PeerBenchError::Unsupported(
                "an operator of two inputs".into(),
            ))
        }
    };
    Ok(match (spec.name.as_str(), &spec.shape[..]) {
        ("matmul", &[m, n, k]) => {
            let (m, n, k) = (m as usize, n as usize, k as usize);
            (
                "gemm sgemm",
                Box::new(move |o| sgemm((m, n, k), &av, &bv, Rhs::KxN, o, threads)),
            )
        }
        ("conv2d", &[1, h, w, ci, co, kh, kw]) if kh == kw && kh % 2 == 1 => {
            let cs = ConvShape {
                h: h as usize,
                w: w as usize,
                c: ci as usize,
                kh: kh as usize,
                kw: kw as usize,
                pad: (kh / 2) as usize,
            };
            let mut cols = vec![0f32; cs.h * cs.w * cs.kh * cs.kw * cs.c];
            let kdim = cs.kh * cs.kw * cs.c;
            (
                "im2col + gemm sgemm",
                Box::new(move |o| {
                    im2col(&av, cs, &mut cols);
                    let mnk = (cs.h * cs.w, co as usize, kdim);
                    sgemm(mnk, &cols, &bv, Rhs::KxN, o, threads)
                }),
            )
        }
        _ => {
            return Err(PeerBenchError::Unsupported(
                "matmul M,N,K or conv2d 1,H,W,C_IN,C_OUT,K,K (odd K)".into(),
            ))
        }
    })
}

/// A log's best step history for one operator against its default schedule and the peer,
/// timed in one run.
#[derive(Clone, Debug)]
pub struct TunedComparison {
    /// The peer's name (`gemm sgemm`, `im2col + gemm sgemm`).
    pub peer: &'static str,
    /// What the log recorded for the best step history, in milliseconds.
    pub record_ms: f64,
    pub flop: f64,
    pub tuned_ms: f64,
    pub default_ms: f64,
    pub peer_ms: f64,
}

/// The program of `spec` from the best of `records`' step histories for the CPU (the
/// other kinds set aside), applied as every build applies them, and that record.
fn best_step_history(
    spec: &OpSpec,
    records: &[Record],
) -> Result<Option<(tessera_ir::PrimFunc, Record)>, PeerBenchError> {
    use tessera_search::apply::{Appliers, StepHistories, Subject};
    let steps: Vec<Record> = records
        .iter()
        .filter(|r| matches!(r.schedule, tessera_search::ScheduleDesc::Steps { .. }))
        .cloned()
        .collect();
    let best = tessera_search::record::ApplyHistoryBest::new(&steps);
    let target = Target::cpu();
    let appliers = Appliers::new(vec![Box::new(StepHistories)], best, &target.to_string());
    let ctx = tessera_graph::BuildContext {
        hardware: tessera_backends::HardwareParams::detect_host(),
        target,
    };
    let built = appliers.program(&Subject::Operator { spec, ctx: &ctx }, "tuned")?;
    Ok(built.and_then(|(func, record)| Some((func, record?))))
}

/// Times the best step history of `records` for operator `spec` (the median of each
/// one's measurements, as `tessera run --log` chooses) against its default schedule and
/// the peer — `gemm` for matmul `M,N,K`, im2col + `gemm` for a conv2d `1,H,W,C_IN,C_OUT,K,K`
/// with an odd `K` and "same" padding — with `threads` threads on both sides; every
/// kernel's output is checked against the peer's.
pub fn compare_tuned(
    spec: &OpSpec,
    records: &[Record],
    threads: usize,
    timing: &Timing,
) -> Result<TunedComparison, PeerBenchError> {
    let ev = timing.evaluator();
    let threads = threads.max(1);
    let (func, best) = best_step_history(spec, records)?
        .ok_or_else(|| PeerBenchError::NoRecord(format!("{} {:?}", spec.name, spec.shape)))?;
    let (ins, outs) = spec.tensors()?;
    let out = outs.first().ok_or(PeerBenchError::Unsupported(
        "the operator has no output".into(),
    ))?;
    let inputs: Vec<NDArray> = ins
        .iter()
        .enumerate()
        .map(|(i, t)| random_like(t, 11 + i as u64))
        .collect::<Result<_, _>>()?;
    let vals: Vec<Vec<f32>> = inputs
        .iter()
        .map(|x| Ok(x.as_slice::<f32>()?.to_vec()))
        .collect::<Result<_, PeerBenchError>>()?;
    let (peer_name, mut peer) = peer_for(spec, &vals, threads)?;
    let mut ov = vec![0f32; shape_of(out).iter().product()];
    peer(&mut ov);
    let want = NDArray::from_slice_f32(&shape_of(out), &ov)?;
    let case = Case {
        spec,
        inputs: &inputs,
        want: &want,
    };
    let dir = tempfile::tempdir()?;
    let backend = CpuBackend::new(cpu_target(threads)?);
    let peer_ms = time(&ev, || {
        peer(&mut ov);
        Ok(())
    })?;
    let tuned_ms = time_func(&ev, &case, &backend, &func, dir.path())?;
    let default_ms = ours(&ev, &case, threads, Variant::Vectorized, dir.path())?;
    Ok(TunedComparison {
        peer: peer_name,
        record_ms: best.result.mean_cost() * 1e3,
        flop: spec.dag()?.flop_count(),
        tuned_ms,
        default_ms,
        peer_ms,
    })
}

fn shape_of(t: &tessera_te::Tensor) -> Vec<usize> {
    t.shape().iter().map(|&d| d as usize).collect()
}

/// Seeded random values in [-1, 1) of the tensor's type and shape.
fn random_like(t: &tessera_te::Tensor, seed: u64) -> Result<NDArray, PeerBenchError> {
    Ok(NDArray::random_uniform(
        t.dtype(),
        &shape_of(t),
        seed,
        -1.0,
        1.0,
    )?)
}

/// One comparison of the kernel table.
#[derive(Clone, Debug)]
pub struct Row {
    pub what: String,
    pub threads: usize,
    pub ours_ms: f64,
    pub peer: String,
    pub peer_ms: f64,
    pub flops: f64,
}

/// matmul and dense 1024³ (dense's weight stored [N, K]) against sgemm; matmul also
/// against its own loop nest unvectorized.
fn gemm_rows(ev: &TimeEvaluator, dir: &std::path::Path) -> Result<Vec<Row>, PeerBenchError> {
    let n = 1024usize;
    let nn = n as i64;
    let mm_spec = OpSpec::new("matmul", &[nn, nn, nn], OpAttrs::default())?;
    let dense_spec = OpSpec::new("dense", &[nn, nn, nn], OpAttrs::default())?;
    let (ins, _) = mm_spec.tensors()?;
    let inputs = [random_like(&ins[0], 1)?, random_like(&ins[1], 2)?];
    let (av, bv) = (
        inputs[0].as_slice::<f32>()?.to_vec(),
        inputs[1].as_slice::<f32>()?.to_vec(),
    );
    let mut rows = Vec::new();
    for (spec, rhs, peer) in [
        (&mm_spec, Rhs::KxN, "gemm sgemm"),
        (&dense_spec, Rhs::NxK, "gemm sgemm (B transposed)"),
    ] {
        let flops = spec.dag()?.flop_count();
        let mut cv = vec![0f32; n * n];
        sgemm((n, n, n), &av, &bv, rhs, &mut cv, 1);
        let want = NDArray::from_slice_f32(&[n, n], &cv)?;
        let case = Case {
            spec,
            inputs: &inputs,
            want: &want,
        };
        for threads in [1, 2] {
            let peer_ms = time(ev, || {
                sgemm((n, n, n), &av, &bv, rhs, &mut cv, threads);
                Ok(())
            })?;
            let mm = |v: Variant| ours(ev, &case, threads, v, dir);
            let ours_ms = mm(Variant::Vectorized)?;
            let row = |what: &str, peer: &str, peer_ms: f64| Row {
                what: what.into(),
                threads,
                ours_ms,
                peer: peer.into(),
                peer_ms,
                flops,
            };
            rows.push(row(&format!("{} {n}x{n}x{n}", spec.name), peer, peer_ms));
            if spec.name == "matmul" {
                let what = "matmul, same loop nest";
                let on = "unvectorized (C auto-vectorization on)";
                rows.push(row(what, on, mm(Variant::Scalar)?));
                let off = "unvectorized (C auto-vectorization off)";
                rows.push(row(what, off, mm(Variant::ScalarNoAutoVec)?));
            }
        }
    }
    Ok(rows)
}

/// ResNet's conv2d NHWC 1×56×56×64 ⊛ 3×3×64×64, pad 1, against im2col + sgemm.
fn conv2d_rows(ev: &TimeEvaluator, dir: &std::path::Path) -> Result<Vec<Row>, PeerBenchError> {
    let (h, w, ci, co, k, pad) = (56usize, 56usize, 64usize, 64usize, 3usize, 1usize);
    let conv_spec = OpSpec::new(
        "conv2d",
        &[1, h, w, ci, co, k, k].map(|d| d as i64),
        OpAttrs {
            pad: Some(pad as i64),
            ..OpAttrs::default()
        },
    )?;
    let cs = ConvShape {
        h,
        w,
        c: ci,
        kh: k,
        kw: k,
        pad,
    };
    let flops = conv_spec.dag()?.flop_count();
    let (ins, _) = conv_spec.tensors()?;
    let inputs = [random_like(&ins[0], 3)?, random_like(&ins[1], 4)?];
    let (dv, kv) = (
        inputs[0].as_slice::<f32>()?.to_vec(),
        inputs[1].as_slice::<f32>()?.to_vec(),
    );
    let mut cols = vec![0f32; h * w * k * k * ci];
    let mut ov = vec![0f32; h * w * co];
    let mnk = (h * w, co, k * k * ci);
    im2col(&dv, cs, &mut cols);
    sgemm(mnk, &cols, &kv, Rhs::KxN, &mut ov, 1);
    let want = NDArray::from_slice_f32(&[1, h, w, co], &ov)?;
    let case = Case {
        spec: &conv_spec,
        inputs: &inputs,
        want: &want,
    };
    let mut rows = Vec::new();
    for threads in [1, 2] {
        let peer_ms = time(ev, || {
            im2col(&dv, cs, &mut cols);
            sgemm(mnk, &cols, &kv, Rhs::KxN, &mut ov, threads);
            Ok(())
        })?;
        rows.push(Row {
            what: "conv2d NHWC 1x56x56x64, 3x3x64x64, pad 1".into(),
            threads,
            ours_ms: ours(ev, &case, threads, Variant::Vectorized, dir)?,
            peer: "im2col + gemm sgemm".into(),
            peer_ms,
            flops,
        });
    }
    Ok(rows)
}
