//! The CPU device through the `Device` trait: memory that only moves when asked, a
//! kernel loaded, looked up, launched and timed on device buffers, and every misuse a
//! typed error that names the device (never a crash).

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use tessera_ir::DataType;
use tessera_runtime::runner::{execute, RunJob, RunReply, TimerConfig};
use tessera_runtime::{
    BufferId, CpuDevice, Device, DeviceArray, DeviceError, NDArray, TimeEvaluator,
};
use tessera_target::{Artifact, LaunchDims, ParamSpec, TargetKind};

fn cpu() -> Arc<dyn Device> {
    Arc::new(CpuDevice::new())
}

/// `C = A + B` over 2x3 float32, compiled by the C compiler into a kernel of the CPU ABI.
fn add_kernel(dir: &std::path::Path) -> Artifact {
    let src = dir.join("add.c");
    std::fs::write(
        &src,
        "#include <stdint.h>\n\
         int32_t add(void** args, int32_t n) {\n\
           if (n != 3) return 1;\n\
           const float* a = args[0]; const float* b = args[1]; float* c = args[2];\n\
           for (int i = 0; i < 6; ++i) c[i] = a[i] + b[i];\n\
           return 0;\n\
         }\n",
    )
    .unwrap();
    let so = dir.join("add.so");
    let st = Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&so)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());
    let p = |name: &str| ParamSpec {
        name: name.into(),
        dtype: DataType::float32(),
        shape: vec![2, 3],
        written: name == "C",
    };
    Artifact {
        device: TargetKind::CPU,
        path: so,
        source_path: src,
        entry: "add".into(),
        params: vec![p("A"), p("B"), p("C")],
        launch: None,
    }
}

fn f32s(values: &[f32]) -> NDArray {
    NDArray::from_slice_f32(&[2, 3], values).unwrap()
}

#[test]
fn a_kernel_runs_on_device_buffers_and_data_moves_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let dev = cpu();
    let a = DeviceArray::from_host(&dev, &f32s(&[1., 2., 3., 4., 5., 6.])).unwrap();
    let b = DeviceArray::from_host(&dev, &f32s(&[10.; 6])).unwrap();
    let c = DeviceArray::empty(&dev, DataType::float32(), &[2, 3]).unwrap();
    let m = dev.load_module(&add_kernel(dir.path())).unwrap();
    let f = dev.get_function(m, "add").unwrap();
    let args = [a.buffer(), b.buffer(), c.buffer()];
    dev.launch(f, &args, None).unwrap();
    dev.synchronize().unwrap();
    let out = c.to_host().unwrap();
    assert_eq!(
        out.as_slice::<f32>().unwrap(),
        &[11., 12., 13., 14., 15., 16.]
    );
    // The device keeps its copy: a host array changed afterwards changes nothing there.
    let mut host = f32s(&[0.; 6]);
    host.as_mut_slice::<f32>().unwrap()[0] = 99.;
    assert_eq!(a.to_host().unwrap().as_slice::<f32>().unwrap()[0], 1.);
    // A copy on the device, then a partial copy back.
    dev.copy_on_device(c.buffer(), a.buffer(), 24).unwrap();
    let mut two = [0u8; 8];
    dev.copy_to_host(a.buffer(), 4, &mut two).unwrap();
    assert_eq!(two[..4], 12f32.to_ne_bytes());
    assert_eq!(two[4..], 13f32.to_ne_bytes());
    // Timing with the evaluator's semantics: `repeat` results, `number` grown.
    let t = dev
        .time(f, &args, None, &TimeEvaluator::new(1, 3, 1.0))
        .unwrap();
    assert_eq!(t.results.len(), 3);
    assert!(t.number > 1, "{t:?}");
    assert!(t.results.iter().all(|&s| s > 0.0 && s < 1e-2), "{t:?}");
}

#[test]
fn misuse_is_a_typed_error_naming_the_device() {
    let dir = tempfile::tempdir().unwrap();
    let dev = cpu();
    let buf = dev.alloc(16).unwrap();
    // out of bounds, both ways and on the device
    assert!(matches!(
        dev.copy_from_host(buf, 8, &[0; 9]),
        Err(DeviceError::OutOfBounds {
            offset: 8,
            len: 9,
            size: 16,
            ..
        })
    ));
    assert!(matches!(
        dev.copy_to_host(buf, usize::MAX, &mut [0; 2]),
        Err(DeviceError::OutOfBounds { .. })
    ));
    let small = dev.alloc(4).unwrap();
    assert!(matches!(
        dev.copy_on_device(buf, small, 16),
        Err(DeviceError::OutOfBounds { .. })
    ));
    // unknown and freed handles
    dev.free(small).unwrap();
    let e = dev.free(small).unwrap_err();
    assert!(
        matches!(e, DeviceError::UnknownHandle { what: "buffer", .. }),
        "{e}"
    );
    assert!(e.to_string().starts_with("cpu: no buffer"), "{e}");
    assert!(matches!(
        dev.copy_to_host(BufferId(12345), 0, &mut [0; 1]),
        Err(DeviceError::UnknownHandle { .. })
    ));
    // an artifact of another kind, a missing function
    let mut art = add_kernel(dir.path());
    let m = dev.load_module(&art).unwrap();
    assert!(matches!(
        dev.get_function(m, "sub"),
        Err(DeviceError::Failed { .. })
    ));
    art.device = TargetKind::new("testdev");
    let e = dev.load_module(&art).unwrap_err();
    assert!(e.to_string().contains("built for `testdev`"), "{e}");
    // launches that do not fit the parameters
    let f = dev.get_function(m, "add").unwrap();
    let e = dev.launch(f, &[buf, buf], None).unwrap_err();
    assert!(
        e.to_string().contains("takes 3 arrays, 2 were given"),
        "{e}"
    );
    let tiny: Vec<BufferId> = (0..3).map(|_| dev.alloc(8).unwrap()).collect();
    let e = dev.launch(f, &tiny, None).unwrap_err();
    assert!(e.to_string().contains("needs 24 bytes"), "{e}");
    let big: Vec<BufferId> = (0..3).map(|_| dev.alloc(24).unwrap()).collect();
    let dims = LaunchDims::default();
    assert!(matches!(
        dev.launch(f, &big, Some(&dims)),
        Err(DeviceError::BadLaunch { .. })
    ));
    dev.launch(f, &big, None).unwrap();
    // an input read twice is fine; the output sharing an input's buffer is not (the
    // kernel's parameters are `restrict`)
    dev.launch(f, &[big[0], big[0], big[2]], None).unwrap();
    let e = dev.launch(f, &[big[0], big[1], big[0]], None).unwrap_err();
    assert!(matches!(e, DeviceError::BadLaunch { .. }), "{e}");
    assert!(e.to_string().contains("are the same array"), "{e}");
}

#[test]
fn a_measurement_job_runs_and_checks_on_a_device() {
    let dir = tempfile::tempdir().unwrap();
    let art = add_kernel(dir.path());
    // The expected output on the job's seeded inputs, and a wrong one.
    let args = tessera_runtime::runner::make_args(&art.params, 5, 1).unwrap();
    let want: Vec<f32> = args[0]
        .as_slice::<f32>()
        .unwrap()
        .iter()
        .zip(args[1].as_slice::<f32>().unwrap())
        .map(|(a, b)| a + b)
        .collect();
    let good: PathBuf = dir.path().join("good.npy");
    f32s(&want).save_npy(&good).unwrap();
    let bad: PathBuf = dir.path().join("bad.npy");
    f32s(&[0.; 6]).save_npy(&bad).unwrap();
    let job = |expected: &PathBuf| RunJob {
        target: "cpu".into(),
        artifact: art.clone(),
        timer: TimerConfig {
            number: 1,
            repeat: 2,
            min_repeat_ms: 0.0,
            cache_flush: false,
        },
        seed: 5,
        num_outputs: 1,
        check: Some(tessera_runtime::runner::CheckSpec {
            expected: vec![expected.clone()],
            rtol: 1e-5,
            atol: 1e-6,
            atol_of_max: 0.0,
        }),
        slow_cutoff: None,
        prepare_only: false,
        sizes: None,
    };
    match execute(&cpu(), &job(&good)) {
        RunReply::Ok {
            costs,
            profile,
            at_points: None,
        } => {
            assert_eq!(costs.len(), 2);
            // the runner says where the job's time went, and that the CPU is the host's
            let p = profile.expect("a timed job has a profile");
            assert!(p.on_host_cores);
            assert!(p.load >= 0.0 && p.inputs >= 0.0 && p.check > 0.0 && p.timing > 0.0);
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        execute(&cpu(), &job(&bad)),
        RunReply::WrongAnswer { .. }
    ));
    let mut missing = job(&good);
    missing.artifact.path = dir.path().join("gone.so");
    match execute(&cpu(), &missing) {
        RunReply::LoadFailed { message } => assert!(message.contains("gone.so"), "{message}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn plugin_devices_check_launch_arguments_one_way() {
    use tessera_runtime::device::launch_args;
    let p = |name: &str, n: i64| ParamSpec {
        name: name.into(),
        dtype: DataType::float32(),
        shape: vec![n],
        written: false,
    };
    let params = [p("A", 4), p("B", 8)];
    // buffer k: handle 100 + k, 16 bytes each; buffer 9 was never given out
    let lookup = |b: BufferId| (b.0 != 9).then_some((100 + b.0, 16usize));
    let small = launch_args("dev", "f", &params, &[BufferId(1), BufferId(2)], lookup);
    assert!(
        matches!(&small, Err(DeviceError::BadLaunch { reason, .. })
        if reason == "parameter `B` needs 32 bytes, buffer 2 has 16"),
        "{small:?}"
    );
    let params = [p("A", 4), p("B", 2)];
    let handles = launch_args("dev", "f", &params, &[BufferId(1), BufferId(2)], lookup).unwrap();
    assert_eq!(handles, vec![101, 102]);
    let e = launch_args("dev", "f", &params, &[BufferId(1)], lookup).unwrap_err();
    assert_eq!(e.to_string(), "dev: `f`: 1 arguments for 2 parameters");
    let e = launch_args("dev", "f", &params, &[BufferId(1), BufferId(9)], lookup).unwrap_err();
    assert!(matches!(e, DeviceError::UnknownHandle { id: 9, .. }), "{e}");
}

/// Counters are the device's own (the CPU keeps none); two readings' difference is
/// what ran between them, a counter the earlier reading lacked counting from zero.
#[test]
fn counter_readings_subtract_by_name() {
    assert!(cpu().counters().unwrap().is_empty());
    let named = |pairs: &[(&str, u64)]| {
        tessera_runtime::DeviceCounters(pairs.iter().map(|(n, v)| (n.to_string(), *v)).collect())
    };
    let before = named(&[("cycles", 100), ("gemm_counter", 7)]);
    let after = named(&[("cycles", 250), ("gemm_counter", 7), ("alu_counter", 3)]);
    assert_eq!(
        after.since(&before),
        named(&[("cycles", 150), ("gemm_counter", 0), ("alu_counter", 3)])
    );
}
