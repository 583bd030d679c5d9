//! Shared helpers of the cross-crate tests (in `tests/tests/`): build a scheduled program
//! for the CPU, run it natively, and compare with the reference interpreter running the
//! unscheduled program on the same inputs.

use std::path::Path;
use tessera_backends::{Backend, CpuBackend, Target};
use tessera_ir::interp::{self, HostBuffer};
use tessera_ir::PrimFunc;
use tessera_runtime::{Module, NDArray};
use tessera_search::rng::Rng;
use tessera_search::state::State;
use tessera_sketch::annotate::{annotate, AnnotateParams, Factorizations};
use tessera_sketch::sketch::{generate_sketches, SketchTarget};
use tessera_te::{lower, ComputeDag, Schedule, Tensor};

/// Random inputs (seeded) and zero outputs for `args`, the first `n_inputs` being inputs.
pub fn make_args(args: &[Tensor], n_inputs: usize, seed: u64) -> Vec<NDArray> {
    args.iter()
        .enumerate()
        .map(|(i, t)| {
            let shape: Vec<usize> = t.shape().iter().map(|d| *d as usize).collect();
            if i < n_inputs {
                NDArray::random_uniform(t.dtype(), &shape, seed + i as u64, -1.0, 1.0)
                    .expect("random input")
            } else {
                NDArray::zeros(t.dtype(), &shape).expect("output")
            }
        })
        .collect()
}

/// Compiles `sch` for the host CPU into `dir`, runs it and checks its outputs against
/// the interpreter running the unscheduled program. Returns a description of the first
/// difference.
pub fn check_native_against_interpreter(
    sch: &Schedule,
    outputs: &[Tensor],
    args: &[Tensor],
    n_inputs: usize,
    dir: &Path,
) -> Result<(), String> {
    let reference = lower(
        &Schedule::create(outputs).map_err(|e| e.to_string())?,
        args,
        "reference",
    )
    .map_err(|e| e.to_string())?;
    let func = lower(sch, args, "kernel").map_err(|e| e.to_string())?;
    let backend = CpuBackend::new(Target::cpu());
    let artifact = backend
        .build(&func, dir)
        .map_err(|e| format!("{e}\n{func}"))?;
    let module = Module::load(&artifact).map_err(|e| e.to_string())?;
    let mut native = make_args(args, n_inputs, 11);
    let mut host: Vec<HostBuffer> = native.iter().map(|a| a.to_host_buffer()).collect();
    interp::run(&reference, &mut host).map_err(|e| e.to_string())?;
    {
        let mut refs: Vec<&mut NDArray> = native.iter_mut().collect();
        module.call(&mut refs).map_err(|e| e.to_string())?;
    }
    for (i, (got, want)) in native.iter().zip(&host).enumerate().skip(n_inputs) {
        let want = NDArray::from_host_buffer(want).map_err(|e| e.to_string())?;
        got.allclose(&want, 1e-4, 1e-4).map_err(|e| {
            format!(
                "output {i}: {e}\n{func}\n{}",
                std::fs::read_to_string(&artifact.source_path).unwrap_or_default()
            )
        })?;
    }
    Ok(())
}

/// The first state of GPU sketch `sketch` of `dag` for `target` that the annotation
/// accepts (seeds from 0), lowered as `name`; with the unscheduled reference and the
/// number of inputs.
pub fn first_gpu_state(
    dag: &ComputeDag,
    target: &SketchTarget,
    sketch: usize,
    name: &str,
) -> (PrimFunc, PrimFunc, usize) {
    let sketches = generate_sketches(dag, target).unwrap();
    let p = AnnotateParams::gpu(target);
    let mut memo = Factorizations::default();
    let args = State::new(dag).args();
    let n_in = args.len() - dag.outputs.len();
    let reference = lower(
        &State::new(dag).replay().unwrap().schedule,
        &args,
        "reference",
    )
    .unwrap();
    for seed in 0..64 {
        let mut rng = Rng::new(seed);
        match annotate(&sketches[sketch], &p, &mut rng, &mut memo) {
            Ok(s) => {
                let f = lower(&s.replay().unwrap().schedule, &args, name).unwrap();
                return (f, reference, n_in);
            }
            Err(e) if seed < 3 && std::env::var_os("SHOW_REFUSED").is_some() => {
                eprintln!("{name}: seed {seed}: {e}")
            }
            Err(_) => {}
        }
    }
    panic!("no valid state of sketch {sketch} in 64 seeds");
}

#[path = "gpu_support.rs"]
pub mod gpu;
