//! A backend that cannot stop its own build (a plugin's compiler in this process): the
//! measurer stops waiting for it at the build timeout and a grace period, so the
//! candidate is a BUILD_TIMEOUT and the other candidates of the batch are measured.

use std::path::Path;
use std::time::{Duration, Instant};
use tessera_backends::{Artifact, Backend, BackendError, CpuBackend, HardwareParams, Target};
use tessera_ir::{DataType, PrimFunc};
use tessera_search::measure::{Candidate, MeasureOptions, Measurer};
use tessera_search::MeasureErrorNo;
use tessera_te::{lower, ops, placeholder, Schedule};

/// The CPU backend, except that a function named `stuck` never finishes building.
struct Stuck(CpuBackend);

impl Backend for Stuck {
    fn target(&self) -> &Target {
        self.0.target()
    }
    fn hardware_params(&self) -> &HardwareParams {
        self.0.hardware_params()
    }
    fn codegen(&self, func: &PrimFunc) -> Result<String, BackendError> {
        self.0.codegen(func)
    }
    fn build(&self, func: &PrimFunc, out_dir: &Path) -> Result<Artifact, BackendError> {
        if func.name == "stuck" {
            // as good as never (the test process ends long before)
            std::thread::sleep(Duration::from_secs(3600));
        }
        self.0.build(func, out_dir)
    }
    // no set_build_timeout: this backend cannot stop itself
}

fn matmul(name: &str) -> PrimFunc {
    let a = placeholder(&[8, 8], DataType::float32(), "A").unwrap();
    let b = placeholder(&[8, 8], DataType::float32(), "B").unwrap();
    let c = ops::matmul(&a, &b).unwrap();
    lower(&Schedule::create(&[c.clone()]).unwrap(), &[a, b, c], name).unwrap()
}

#[test]
fn a_build_that_never_ends_costs_its_candidate_only() {
    // long enough that the fine candidate's real C compile ends within it on a fully
    // loaded machine; the stuck build never does
    let opts = MeasureOptions {
        build_timeout: Duration::from_secs(10),
        n_parallel: 2,
        ..MeasureOptions::default()
    };
    let mut m = Measurer::new(Stuck(CpuBackend::new(Target::cpu())), opts).unwrap();
    let start = Instant::now();
    let rs = m.measure(
        &[
            Candidate {
                func: Ok(matmul("stuck")),
            },
            Candidate {
                func: Ok(matmul("fine")),
            },
        ],
        1,
        None,
    );
    assert_eq!(rs[0].error_no, MeasureErrorNo::BuildTimeout, "{rs:?}");
    assert!(
        rs[0].error_msg.as_deref().unwrap().contains("within 10 s"),
        "{rs:?}"
    );
    assert_eq!(rs[1].error_no, MeasureErrorNo::NoError, "{rs:?}");
    // the measurer stopped waiting for the stuck build (10 s and the grace period, with
    // a wide margin for a loaded machine), not at its end an hour away
    assert!(
        start.elapsed() < Duration::from_secs(300),
        "{:?}",
        start.elapsed()
    );
}
