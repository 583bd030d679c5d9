//! A C compiler that never finishes: the candidate's build times out (BUILD_TIMEOUT) and
//! the measurement returns. A file of its own: it sets `$CC` for the whole process.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};
use tessera_backends::{CpuBackend, Target};
use tessera_ir::DataType;
use tessera_search::measure::{Candidate, MeasureOptions, Measurer};
use tessera_search::MeasureErrorNo;
use tessera_te::{lower, ops, placeholder, Schedule};

#[test]
fn a_hanging_compiler_is_a_build_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let cc = dir.path().join("slow-cc");
    std::fs::write(&cc, "#!/bin/sh\nexec sleep 60\n").unwrap();
    std::fs::set_permissions(&cc, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::env::set_var("CC", &cc);

    let a = placeholder(&[8, 8], DataType::float32(), "A").unwrap();
    let b = placeholder(&[8, 8], DataType::float32(), "B").unwrap();
    let c = ops::matmul(&a, &b).unwrap();
    let f = lower(&Schedule::create(&[c.clone()]).unwrap(), &[a, b, c], "mm").unwrap();
    let opts = MeasureOptions {
        build_timeout: Duration::from_millis(500),
        ..MeasureOptions::default()
    };
    let mut m = Measurer::new(CpuBackend::new(Target::cpu()), opts).unwrap();
    let start = Instant::now();
    let rs = m.measure(&[Candidate { func: Ok(f) }], 1, None);
    assert_eq!(rs[0].error_no, MeasureErrorNo::BuildTimeout, "{rs:?}");
    assert!(
        rs[0].error_msg.as_deref().unwrap().contains("within 0.5 s"),
        "{rs:?}"
    );
    assert!(start.elapsed() < Duration::from_secs(10));
}
