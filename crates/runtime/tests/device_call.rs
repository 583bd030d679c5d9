//! The `Device` interface as data (`device_call`): a `CallClient` over a channel that
//! answers with the runtime's dispatch behaves as the device behind it — copies both
//! ways through the caller's memory, handles and their errors —, refuses an artifact of
//! another kind before sending it, and refuses timings that cannot be true; launch
//! sequences cross with their handles and errors.

use tessera_runtime::device_call::{answer, CallChannel, CallClient, DeviceAnswer, DeviceCall};
use tessera_runtime::{BufferId, CpuDevice, Device, DeviceError, DeviceName, FunctionId};
use tessera_runtime::{LaunchStep, SequenceId, TimeEvaluator, TimeResult};
use tessera_target::{Artifact, TargetKind};

/// Answers every call on a CPU device, as a plugin's table or a server's worker does;
/// `Time` answered with `timing` when set.
struct Loopback {
    device: CpuDevice,
    timing: Option<TimeResult>,
    step_times: Option<Vec<f64>>,
}

impl CallChannel for Loopback {
    fn call(
        &self,
        call: &DeviceCall,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<DeviceAnswer, DeviceError> {
        if let (DeviceCall::Time { .. }, Some(t)) = (call, &self.timing) {
            return Ok(DeviceAnswer::Time(t.clone()));
        }
        if let (DeviceCall::TimeSteps { .. }, Some(t)) = (call, &self.step_times) {
            return Ok(DeviceAnswer::Times(t.clone()));
        }
        let files = std::env::temp_dir();
        Ok(answer(&self.device, call.clone(), input, output, &files))
    }
    fn ships_files(&self) -> bool {
        false
    }
}

fn client(timing: Option<TimeResult>) -> CallClient<Loopback> {
    client_with(timing, None)
}

fn client_with(timing: Option<TimeResult>, step_times: Option<Vec<f64>>) -> CallClient<Loopback> {
    let channel = Loopback {
        device: CpuDevice::new(),
        timing,
        step_times,
    };
    CallClient::new(DeviceName::new("loopback"), TargetKind::CPU, channel)
}

#[test]
fn copies_and_handles_cross_as_on_the_device() {
    let d = client(None);
    let b = d.alloc(8).unwrap();
    d.copy_from_host(b, 0, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    let c = d.alloc(8).unwrap();
    d.copy_on_device(b, c, 8).unwrap();
    let mut out = [0u8; 4];
    d.copy_to_host(c, 4, &mut out).unwrap();
    assert_eq!(out, [5, 6, 7, 8]);
    // the device's own errors come back with the client's name
    let e = d.copy_to_host(c, 6, &mut out).unwrap_err().to_string();
    assert!(e.starts_with("loopback: ") && e.contains("overruns"), "{e}");
    d.free(b).unwrap();
    let e = d.free(b).unwrap_err().to_string();
    assert!(e.contains("no buffer with handle"), "{e}");
    let e = d.launch(FunctionId(424_242), &[c], None).unwrap_err();
    assert!(
        e.to_string().contains("no function with handle 424242"),
        "{e}"
    );
    assert_eq!(d.kind(), TargetKind::CPU);
}

#[test]
fn an_artifact_of_another_kind_is_refused_before_it_is_sent() {
    let d = client(None);
    let a = Artifact {
        device: TargetKind::new("cuda"),
        path: "k.cubin".into(),
        source_path: "k.cu".into(),
        entry: "k".into(),
        params: Vec::new(),
        launch: None,
    };
    let e = d.load_module(&a).unwrap_err();
    assert!(matches!(e, DeviceError::WrongKind { .. }), "{e:?}");
}

#[test]
fn timings_that_cannot_be_true_are_refused() {
    let ev = TimeEvaluator::new(2, 3, 0.0);
    let b = BufferId(1);
    for results in [
        vec![1e-3, 1e-3],
        vec![1e-3, f64::NAN, 1e-3],
        vec![1e-3, -1.0, 1e-3],
    ] {
        let d = client(Some(TimeResult { results, number: 2 }));
        let e = d.time(FunctionId(1), &[b], None, &ev).unwrap_err();
        assert!(e.to_string().contains("its timer returned"), "{e}");
    }
    let d = client(Some(TimeResult {
        results: vec![1e-3; 3],
        number: 1,
    }));
    assert!(d.time(FunctionId(1), &[b], None, &ev).is_err());
    let ok = TimeResult {
        results: vec![1e-3; 3],
        number: 2,
    };
    let d = client(Some(ok.clone()));
    assert_eq!(
        d.time(FunctionId(1), &[b], None, &ev).unwrap().results,
        ok.results
    );
}

#[test]
fn launch_sequences_cross_with_their_handles_and_errors() {
    let d = client(None);
    let b = d.alloc(8).unwrap();
    let bad = LaunchStep {
        function: FunctionId(99),
        args: vec![b],
        dims: None,
    };
    let e = d.record_sequence(&[bad]).unwrap_err().to_string();
    assert!(e.contains("no function with handle 99"), "{e}");
    let s = d
        .record_sequence(&[])
        .unwrap()
        .expect("the CPU keeps sequences");
    d.run_sequence(s).unwrap();
    d.free_sequence(s).unwrap();
    let e = d.run_sequence(s).unwrap_err().to_string();
    assert!(e.contains("no launch sequence with handle"), "{e}");
    let e = d.free_sequence(SequenceId(77)).unwrap_err().to_string();
    assert!(e.contains("77"), "{e}");
    assert_eq!(d.time_steps(&[]).unwrap(), Vec::<f64>::new());
}

#[test]
fn step_times_that_cannot_be_true_are_refused() {
    for times in [vec![0.001, 0.002], vec![f64::NAN], vec![-1.0]] {
        let d = client_with(None, Some(times.clone()));
        let step = LaunchStep {
            function: FunctionId(1),
            args: Vec::new(),
            dims: None,
        };
        let n = times.len().min(1);
        let steps = vec![step; n];
        let e = d.time_steps(&steps).unwrap_err().to_string();
        assert!(e.contains("step timer returned"), "{times:?}: {e}");
    }
}
