//! A C compiler that never finishes: the candidate's build times out (BUILD_TIMEOUT), the
//! measurement returns, and nothing the compiler started is left running or on disk. A
//! file of its own: it sets `$CC` for the whole process.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};
use tessera_backends::{CpuBackend, Target};
use tessera_ir::DataType;
use tessera_search::measure::{Candidate, MeasureOptions, Measurer};
use tessera_search::MeasureErrorNo;
use tessera_te::{lower, ops, placeholder, Schedule};

/// Whether process `pid` still runs (a zombie waiting for its reaper does not).
fn running(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

#[test]
fn a_hanging_compiler_is_a_build_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let cc = dir.path().join("slow-cc");
    let pid_file = dir.path().join("pass.pid");
    let tmp_file = dir.path().join("pass.tmpdir");
    // Like gcc: a driver that runs its passes as children, with their temporary files
    // in $TMPDIR. The pass holds the driver's stderr open.
    std::fs::write(
        &cc,
        format!(
            "#!/bin/sh\ncase \"$1\" in --version) exit 0;; esac\necho \"$TMPDIR\" > {}\necho partial > \"$TMPDIR/pass-out.s\"\nsleep 60 &\necho $! > {}\nwait\n",
            tmp_file.display(),
            pid_file.display()
        ),
    )
    .unwrap();
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
    // the measurer did not wait for the 60 s pass (a generous bound: a loaded machine
    // may be slow to start the script, never 60 s)
    assert!(start.elapsed() < Duration::from_secs(45));

    // the compiler's pass was killed with it, and its temporary file removed
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let pid = pid.trim();
    let deadline = Instant::now() + Duration::from_secs(5);
    while running(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !running(pid),
        "the compiler's pass {pid} outlived the timeout"
    );
    let tmp = std::fs::read_to_string(&tmp_file).unwrap();
    let tmp = std::path::Path::new(tmp.trim());
    assert!(
        tmp.to_string_lossy().contains(".cc-tmp"),
        "the compiler's TMPDIR was {tmp:?}, not a directory of the build's"
    );
    assert!(
        !tmp.exists(),
        "{tmp:?} (the compiler's temporary files) was left behind"
    );
}
