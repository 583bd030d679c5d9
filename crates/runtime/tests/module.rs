//! Loading and calling a shared object built here with the system C compiler.

use std::path::{Path, PathBuf};
use std::process::Command;
use tessera_ir::DataType;
use tessera_runtime::{Module, NDArray, RuntimeError, TimeEvaluator};
use tessera_target::{Artifact, ParamSpec, TargetKind};

const SOURCE: &str = r#"
#include <stdint.h>
#include <unistd.h>

/* c = a + b, all float32[2][3]. */
int32_t add(void** args, int32_t n) {
  if (n != 3) return -1;
  const float* a = (const float*)args[0];
  const float* b = (const float*)args[1];
  float* c = (float*)args[2];
  for (int i = 0; i < 6; ++i) c[i] = a[i] + b[i];
  return 0;
}

/* Always fails with status 42. */
int32_t fail(void** args, int32_t n) {
  (void)args; (void)n;
  return 42;
}

/* Returns the number of arguments whose pointer is not 64-byte aligned. */
int32_t misaligned(void** args, int32_t n) {
  int32_t bad = 0;
  for (int32_t i = 0; i < n; ++i) bad += ((uintptr_t)args[i] % 64) != 0;
  return bad;
}

/* x[i] += 1 for int32[4], then sleeps 1 ms. */
int32_t incr_sleep(void** args, int32_t n) {
  if (n != 1) return -1;
  int32_t* x = (int32_t*)args[0];
  for (int i = 0; i < 4; ++i) x[i] += 1;
  usleep(1000);
  return 0;
}
"#;

/// A temporary directory holding `kernels.so`, built from `SOURCE`.
struct Built {
    _dir: tempfile::TempDir,
    so: PathBuf,
    src: PathBuf,
}

fn build() -> Built {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("kernels.c");
    let so = dir.path().join("kernels.so");
    std::fs::write(&src, SOURCE).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let out = Command::new(cc)
        .args(["-O2", "-shared", "-fPIC", "-o"])
        .arg(&so)
        .arg(&src)
        .output()
        .expect("running the C compiler");
    assert!(
        out.status.success(),
        "cc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Built { _dir: dir, so, src }
}

fn param(name: &str, dtype: DataType, shape: &[i64]) -> ParamSpec {
    ParamSpec {
        name: name.to_string(),
        dtype,
        shape: shape.to_vec(),
        written: false,
    }
}

fn artifact(path: &Path, src: &Path, entry: &str, params: Vec<ParamSpec>) -> Artifact {
    Artifact {
        device: TargetKind::CPU,
        path: path.to_path_buf(),
        source_path: src.to_path_buf(),
        entry: entry.to_string(),
        params,
        launch: None,
    }
}

fn add_params() -> Vec<ParamSpec> {
    let f32 = DataType::float32();
    vec![
        param("A", f32, &[2, 3]),
        param("B", f32, &[2, 3]),
        param("C", f32, &[2, 3]),
    ]
}

fn add_module(b: &Built) -> Module {
    Module::load(&artifact(&b.so, &b.src, "add", add_params())).unwrap()
}

fn f32s(shape: &[usize], v: &[f32]) -> NDArray {
    NDArray::from_slice_f32(shape, v).unwrap()
}

#[test]
fn add_computes_the_sum() {
    let b = build();
    let m = add_module(&b);
    assert_eq!(m.params(), add_params().as_slice());
    assert_eq!(m.entry(), "add");
    let mut x = f32s(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let mut y = f32s(&[2, 3], &[10., 20., 30., 40., 50., 60.]);
    let mut z = NDArray::zeros(DataType::float32(), &[2, 3]).unwrap();
    m.call(&mut [&mut x, &mut y, &mut z]).unwrap();
    assert_eq!(
        z.as_slice::<f32>().unwrap(),
        &[11., 22., 33., 44., 55., 66.]
    );
    // Inputs untouched.
    assert_eq!(x.as_slice::<f32>().unwrap(), &[1., 2., 3., 4., 5., 6.]);
    // Checked against the interpreter-style reference with allclose.
    let expected = NDArray::from_f64(
        DataType::float32(),
        &[2, 3],
        &[11., 22., 33., 44., 55., 66.],
    )
    .unwrap();
    z.allclose(&expected, 0.0, 0.0).unwrap();
}

#[test]
fn wrong_count_is_refused() {
    let b = build();
    let m = add_module(&b);
    let mut x = f32s(&[2, 3], &[0.; 6]);
    let mut y = f32s(&[2, 3], &[0.; 6]);
    match m.call(&mut [&mut x, &mut y]) {
        Err(RuntimeError::ArgCount {
            entry,
            expected: 3,
            got: 2,
        }) => assert_eq!(entry, "add"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn wrong_dtype_is_refused() {
    let b = build();
    let m = add_module(&b);
    let mut x = f32s(&[2, 3], &[0.; 6]);
    let mut y = NDArray::zeros(DataType::float64(), &[2, 3]).unwrap();
    let mut z = f32s(&[2, 3], &[0.; 6]);
    let err = m.call(&mut [&mut x, &mut y, &mut z]).unwrap_err();
    match &err {
        RuntimeError::ArgDtype {
            index: 1,
            name,
            expected,
            got,
        } => {
            assert_eq!(name, "B");
            assert_eq!(*expected, DataType::float32());
            assert_eq!(*got, DataType::float64());
        }
        other => panic!("{other:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("`B`") && msg.contains("float32") && msg.contains("float64"),
        "{msg}"
    );
}

#[test]
fn wrong_shape_is_refused() {
    let b = build();
    let m = add_module(&b);
    let mut x = f32s(&[2, 3], &[0.; 6]);
    let mut y = f32s(&[2, 3], &[0.; 6]);
    let mut z = f32s(&[3, 2], &[0.; 6]);
    match m.call(&mut [&mut x, &mut y, &mut z]) {
        Err(RuntimeError::ArgShape {
            index: 2,
            name,
            expected,
            got,
        }) => {
            assert_eq!(name, "C");
            assert_eq!(expected, vec![2, 3]);
            assert_eq!(got, vec![3, 2]);
        }
        other => panic!("{other:?}"),
    }
    // A different rank with the same element count is refused too.
    let mut z = f32s(&[6], &[0.; 6]);
    assert!(matches!(
        m.call(&mut [&mut x, &mut y, &mut z]),
        Err(RuntimeError::ArgShape { index: 2, .. })
    ));
}

#[test]
fn the_same_array_twice_is_refused() {
    let b = build();
    let m = add_module(&b);
    let x = f32s(&[2, 3], &[0.; 6]);
    let z = f32s(&[2, 3], &[0.; 6]);
    match m.check_args(&[&x, &z, &x]) {
        Err(RuntimeError::Aliased {
            first: 0,
            first_name,
            second: 2,
            second_name,
        }) => {
            assert_eq!(first_name, "A");
            assert_eq!(second_name, "C");
        }
        other => panic!("{other:?}"),
    }
    let y = x.clone();
    m.check_args(&[&x, &y, &z]).unwrap();
}

#[test]
fn the_same_empty_array_twice_is_refused() {
    let b = build();
    let f32 = DataType::float32();
    let a = artifact(
        &b.so,
        &b.src,
        "misaligned",
        vec![param("P", f32, &[0]), param("Q", f32, &[0])],
    );
    let m = Module::load(&a).unwrap();
    let p = NDArray::zeros(f32, &[0]).unwrap();
    let q = NDArray::zeros(f32, &[0]).unwrap();
    // Two distinct empty arrays are fine even though their dangling pointers coincide.
    m.check_args(&[&p, &q]).unwrap();
    assert!(matches!(
        m.check_args(&[&p, &p]),
        Err(RuntimeError::Aliased {
            first: 0,
            second: 1,
            ..
        })
    ));
}

#[test]
fn nonzero_status_is_an_error() {
    let b = build();
    let m = Module::load(&artifact(&b.so, &b.src, "fail", vec![])).unwrap();
    match m.call(&mut []) {
        Err(RuntimeError::CallFailed { entry, code: 42 }) => assert_eq!(entry, "fail"),
        other => panic!("{other:?}"),
    }
    // And during timing.
    assert!(matches!(
        m.time_with(&TimeEvaluator::default(), &mut []),
        Err(RuntimeError::CallFailed { code: 42, .. })
    ));
}

#[test]
fn kernels_see_aligned_pointers() {
    let b = build();
    let dtypes = [
        DataType::float32(),
        DataType::int(8),
        DataType::float16(),
        DataType::bool(),
        DataType::float64(),
    ];
    let shapes: [&[i64]; 5] = [&[1], &[3], &[7, 5], &[], &[0]];
    let params = dtypes
        .iter()
        .zip(shapes)
        .enumerate()
        .map(|(i, (&d, s))| param(&format!("p{i}"), d, s))
        .collect();
    let m = Module::load(&artifact(&b.so, &b.src, "misaligned", params)).unwrap();
    let mut arrays: Vec<NDArray> = dtypes
        .iter()
        .zip(shapes)
        .map(|(&d, s)| {
            let s: Vec<usize> = s.iter().map(|&x| x as usize).collect();
            NDArray::zeros(d, &s).unwrap()
        })
        .collect();
    let mut args: Vec<&mut NDArray> = arrays.iter_mut().collect();
    m.call(&mut args).unwrap();
}

#[test]
fn missing_file_symbol_and_device_are_errors() {
    let b = build();
    let missing = b.so.with_file_name("nope.so");
    assert!(matches!(
        Module::load(&artifact(&missing, &b.src, "add", add_params())),
        Err(RuntimeError::Load { .. })
    ));
    match Module::load(&artifact(&b.so, &b.src, "no_such_entry", add_params())) {
        Err(RuntimeError::MissingSymbol { entry, .. }) => assert_eq!(entry, "no_such_entry"),
        other => panic!("{other:?}"),
    }
    let mut cuda = artifact(&b.so, &b.src, "add", add_params());
    cuda.device = TargetKind::CUDA;
    match Module::load(&cuda) {
        Err(RuntimeError::UnsupportedDevice { device, .. }) => assert_eq!(device, TargetKind::CUDA),
        other => panic!("{other:?}"),
    }
}

#[test]
fn modules_keep_their_library_loaded() {
    let b = build();
    let first = add_module(&b);
    let second = add_module(&b);
    drop(first);
    // Also usable from another thread.
    let handle = std::thread::spawn(move || {
        let mut x = f32s(&[2, 3], &[1.; 6]);
        let mut y = f32s(&[2, 3], &[2.; 6]);
        let mut z = f32s(&[2, 3], &[0.; 6]);
        second.call(&mut [&mut x, &mut y, &mut z]).unwrap();
        z.as_slice::<f32>().unwrap().to_vec()
    });
    assert_eq!(handle.join().unwrap(), vec![3.0f32; 6]);
}

/// `time_with` calls the loaded kernel on the arguments: the warm-up and `number` calls
/// per repeat, one result per repeat. (How `min_repeat_ms` grows `number` is tested on
/// known clock readings in tests/timer.rs: over the wall clock, whether a call measures
/// under it is the machine's business.)
#[test]
fn time_with_runs_the_kernel_on_its_arguments() {
    let b = build();
    let m = Module::load(&artifact(
        &b.so,
        &b.src,
        "incr_sleep",
        vec![param("X", DataType::int32(), &[4])],
    ))
    .unwrap();
    let calls = |x: &NDArray| x.as_slice::<i32>().unwrap()[0] as usize;
    // a fixed number: the warm-up and 3 calls in each of 2 repeats
    let mut x = NDArray::zeros(DataType::int32(), &[4]).unwrap();
    let r = m
        .time_with(&TimeEvaluator::new(3, 2, 0.0), &mut [&mut x])
        .unwrap();
    assert_eq!((r.results.len(), r.number), (2, 3), "{r:?}");
    assert_eq!(calls(&x), 1 + 3 * 2);
    assert_eq!(x.as_slice::<i32>().unwrap(), &[7; 4]);
    // with min_repeat_ms: however `number` grew, every call ran on the array: the
    // warm-up, the last repeat's `number` calls, and at least one call of the first
    let ev = TimeEvaluator {
        repeat: 2,
        min_repeat_ms: 5.0,
        ..Default::default()
    };
    let mut x = NDArray::zeros(DataType::int32(), &[4]).unwrap();
    let r = m.time_with(&ev, &mut [&mut x]).unwrap();
    assert_eq!(r.results.len(), 2);
    assert!(r.number >= 1, "{r:?}");
    assert!(
        calls(&x) >= r.number + 2,
        "{} calls, number {}",
        calls(&x),
        r.number
    );
    // Arguments are checked before timing.
    let mut wrong = NDArray::zeros(DataType::int32(), &[5]).unwrap();
    assert!(matches!(
        m.time_with(&ev, &mut [&mut wrong]),
        Err(RuntimeError::ArgShape { .. })
    ));
}
