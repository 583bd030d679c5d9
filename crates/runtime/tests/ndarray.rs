//! NDArray: allocation, typed views, conversions, random filling, allclose.

use proptest::prelude::*;
use tessera_ir::interp::{HostBuffer, Scalar};
use tessera_ir::DataType;
use tessera_runtime::{CompareError, NDArray, RuntimeError, ALIGNMENT};

fn all_dtypes() -> Vec<DataType> {
    [
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float16", "float32", "float64",
    ]
    .iter()
    .map(|s| s.parse().unwrap())
    .collect()
}

#[test]
fn data_is_64_byte_aligned_for_every_size() {
    for dtype in all_dtypes() {
        for n in [0usize, 1, 2, 3, 7, 63, 64, 65, 1000, 4097] {
            let mut a = NDArray::zeros(dtype, &[n]).unwrap();
            assert_eq!(a.as_ptr() as usize % ALIGNMENT, 0, "{dtype} x {n}");
            assert_eq!(a.as_mut_ptr() as usize % ALIGNMENT, 0);
            assert!(!a.as_ptr().is_null());
            assert_eq!(a.nbytes(), n * dtype.bytes());
            assert_eq!(a.len(), n);
            assert!(a.to_f64_vec().iter().all(|&v| v == 0.0));
            let c = a.clone();
            assert_eq!(c.as_ptr() as usize % ALIGNMENT, 0);
        }
    }
}

#[test]
fn zero_size_and_scalar_arrays() {
    let e = NDArray::zeros(DataType::float32(), &[3, 0, 2]).unwrap();
    assert!(e.is_empty());
    assert_eq!(e.nbytes(), 0);
    assert_eq!(e.as_slice::<f32>().unwrap(), &[] as &[f32]);
    assert_eq!(e.clone(), e);
    let s = NDArray::from_f64(DataType::int32(), &[], &[7.0]).unwrap();
    assert_eq!(s.ndim(), 0);
    assert_eq!(s.len(), 1);
    assert_eq!(s.as_slice::<i32>().unwrap(), &[7]);
}

#[test]
fn unsupported_dtypes_and_bad_counts_are_errors() {
    assert!(matches!(
        NDArray::zeros(DataType::float32().with_lanes(4), &[2]),
        Err(RuntimeError::UnsupportedDtype(_))
    ));
    assert!(matches!(
        NDArray::zeros(DataType::int(4), &[2]),
        Err(RuntimeError::UnsupportedDtype(_))
    ));
    assert!(matches!(
        NDArray::zeros(DataType::float64(), &[usize::MAX, 2]),
        Err(RuntimeError::TooLarge { .. })
    ));
    assert!(matches!(
        NDArray::zeros(DataType::float64(), &[usize::MAX / 4]),
        Err(RuntimeError::TooLarge { .. })
    ));
    // representable, but more than any machine here holds: an error, not an abort
    match NDArray::zeros(DataType::float32(), &[1 << 28, 1 << 20]) {
        Err(RuntimeError::OutOfMemory { bytes, .. }) => assert_eq!(bytes, 1 << 50),
        other => panic!("expected OutOfMemory, got {:?}", other.map(|a| a.nbytes())),
    }
    match NDArray::from_slice_f32(&[2, 2], &[1.0, 2.0, 3.0]) {
        Err(RuntimeError::ValueCount {
            expected: 4,
            got: 3,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        NDArray::from_f64(DataType::int(8), &[2], &[1.0]),
        Err(RuntimeError::ValueCount { .. })
    ));
}

#[test]
fn typed_views_check_the_element_type() {
    let mut a = NDArray::from_slice_f32(&[2], &[1.5, -2.0]).unwrap();
    assert_eq!(a.as_slice::<f32>().unwrap(), &[1.5, -2.0]);
    match a.as_slice::<f64>() {
        Err(RuntimeError::ElementType { dtype, requested }) => {
            assert_eq!(dtype, DataType::float32());
            assert_eq!(requested, "f64");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        a.as_mut_slice::<i32>(),
        Err(RuntimeError::ElementType { .. })
    ));
    a.as_mut_slice::<f32>().unwrap()[1] = 4.0;
    assert_eq!(a.to_f64_vec(), vec![1.5, 4.0]);
    let h = NDArray::from_slice(&[1], &[half::f16::from_f32(0.5)]).unwrap();
    assert_eq!(h.dtype(), DataType::float16());
    assert!(h.as_slice::<u16>().is_err());
    let u = NDArray::zeros(DataType::uint(8), &[1]).unwrap();
    assert!(u.as_slice::<i8>().is_err() && u.as_slice::<bool>().is_err());
}

#[test]
fn bool_views_refuse_bytes_other_than_0_and_1() {
    let mut b = NDArray::from_slice(&[3], &[true, false, true]).unwrap();
    assert_eq!(b.as_slice::<bool>().unwrap(), &[true, false, true]);
    b.as_bytes_mut()[1] = 7;
    assert!(matches!(
        b.as_slice::<bool>(),
        Err(RuntimeError::InvalidBool { index: 1, byte: 7 })
    ));
    assert!(b.as_mut_slice::<bool>().is_err());
    // Bytes are still readable as truth values.
    assert_eq!(b.to_f64_vec(), vec![1.0, 1.0, 1.0]);
}

#[test]
fn from_f64_converts_like_the_interpreter() {
    let v = [1.7, -1.7, 300.0, -129.0, 0.5, f64::NAN, 1e30];
    for dtype in all_dtypes() {
        let a = NDArray::from_f64(dtype, &[v.len()], &v).unwrap();
        let h = HostBuffer::from_f64(dtype, &[v.len()], &v);
        let from_interp = NDArray::from_host_buffer(&h).unwrap();
        if dtype.is_float() {
            // NaN != NaN, so compare bitwise.
            assert_eq!(a, from_interp, "{dtype}");
        } else {
            // The interpreter's u64 cannot exceed i64::MAX; elsewhere they agree.
            if dtype != DataType::uint(64) {
                assert_eq!(a, from_interp, "{dtype}");
                assert_eq!(a.to_f64_vec(), h.to_f64(), "{dtype}");
            }
        }
    }
    let i8s = NDArray::from_f64(DataType::int(8), &[4], &[1.7, -1.7, 300.0, -129.0]).unwrap();
    assert_eq!(i8s.as_slice::<i8>().unwrap(), &[1, -1, 44, 127]);
    let u8s = NDArray::from_f64(DataType::uint(8), &[2], &[-1.0, 256.0]).unwrap();
    assert_eq!(u8s.as_slice::<u8>().unwrap(), &[255, 0]);
    let u64s = NDArray::from_f64(DataType::uint(64), &[2], &[1.8e19, -1.0]).unwrap();
    assert_eq!(
        u64s.as_slice::<u64>().unwrap(),
        &[18_000_000_000_000_000_000, u64::MAX]
    );
    let f16 = NDArray::from_f64(DataType::float16(), &[2], &[1.0 / 3.0, 70000.0]).unwrap();
    assert_eq!(
        f16.to_f64_vec(),
        vec![half::f16::from_f64(1.0 / 3.0).to_f64(), f64::INFINITY]
    );
    let b = NDArray::from_f64(DataType::bool(), &[3], &[0.0, -2.0, 0.1]).unwrap();
    assert_eq!(b.as_slice::<bool>().unwrap(), &[false, true, true]);
}

#[test]
fn host_buffer_round_trip() {
    for dtype in all_dtypes() {
        let a = NDArray::random_uniform(dtype, &[3, 4], 9, -50.0, 50.0).unwrap();
        let h: HostBuffer = (&a).into();
        assert_eq!(h.dtype, dtype);
        assert_eq!(h.shape, vec![3, 4]);
        assert_eq!(h.data.len(), 12);
        if dtype.is_float() {
            assert!(h.data.iter().all(|s| matches!(s, Scalar::F(_))));
        } else {
            assert!(h.data.iter().all(|s| matches!(s, Scalar::I(_))));
        }
        let back = NDArray::try_from(&h).unwrap();
        assert_eq!(back, a, "{dtype}");
    }
    let bad = HostBuffer {
        dtype: DataType::float32(),
        shape: vec![2, 2],
        data: vec![Scalar::F(0.0); 3],
    };
    assert!(matches!(
        NDArray::from_host_buffer(&bad),
        Err(RuntimeError::HostBufferSize {
            expected: 4,
            got: 3,
            ..
        })
    ));
}

#[test]
fn random_uniform_is_deterministic_and_in_range() {
    for dtype in all_dtypes() {
        let a = NDArray::random_uniform(dtype, &[257], 42, -3.0, 5.0).unwrap();
        let b = NDArray::random_uniform(dtype, &[257], 42, -3.0, 5.0).unwrap();
        assert_eq!(a, b, "{dtype}");
        let c = NDArray::random_uniform(dtype, &[257], 43, -3.0, 5.0).unwrap();
        if !dtype.is_bool() {
            assert_ne!(a, c, "{dtype}");
        }
        let (lo, hi) = if dtype.is_bool() {
            (0.0, 1.0)
        } else if dtype.is_uint() {
            (0.0, u64::MAX as f64) // negative draws wrap
        } else {
            (-3.0, 5.0)
        };
        assert!(
            a.to_f64_vec().iter().all(|&v| v >= lo && v <= hi),
            "{dtype}"
        );
    }
    let f = NDArray::random_uniform(DataType::float64(), &[10_000], 1, 2.0, 3.0).unwrap();
    let v = f.to_f64_vec();
    assert!(v.iter().all(|&x| (2.0..3.0).contains(&x)));
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    assert!((mean - 2.5).abs() < 0.02, "{mean}");
    // Integers cover the whole range [lo, hi).
    let i = NDArray::random_uniform(DataType::int32(), &[1000], 5, 0.0, 4.0).unwrap();
    let mut seen: Vec<i32> = i.as_slice::<i32>().unwrap().to_vec();
    seen.sort();
    seen.dedup();
    assert_eq!(seen, vec![0, 1, 2, 3]);
    let b = NDArray::random_uniform(DataType::bool(), &[1000], 5, 0.0, 2.0).unwrap();
    let trues = b.as_slice::<bool>().unwrap().iter().filter(|&&x| x).count();
    assert!((400..600).contains(&trues), "{trues}");
    // A fixed seed gives fixed values on every platform.
    let pinned = NDArray::random_uniform(DataType::float64(), &[2], 0, 0.0, 1.0).unwrap();
    let again = NDArray::random_uniform(DataType::float64(), &[2], 0, 0.0, 1.0).unwrap();
    assert_eq!(pinned.to_f64_vec(), again.to_f64_vec());
}

#[test]
fn clone_is_deep() {
    let a = NDArray::from_slice_f32(&[3], &[1.0, 2.0, 3.0]).unwrap();
    let mut b = a.clone();
    assert_ne!(a.as_ptr(), b.as_ptr());
    b.as_mut_slice::<f32>().unwrap()[0] = 9.0;
    assert_eq!(a.as_slice::<f32>().unwrap()[0], 1.0);
    assert_ne!(a, b);
}

#[test]
fn allclose_follows_numpy() {
    let e = NDArray::from_f64(DataType::float64(), &[4], &[1.0, 100.0, 0.0, -5.0]).unwrap();
    let a = NDArray::from_f64(DataType::float64(), &[4], &[1.0, 100.5, 1e-9, -5.0]).unwrap();
    // |0.5| <= 1e-8 + 1e-2 * 100.
    a.allclose(&e, 1e-2, 1e-8).unwrap();
    match a.allclose(&e, 1e-3, 1e-8) {
        Err(CompareError::Values {
            mismatches: 1,
            total: 4,
            first_index: 1,
            first_actual,
            first_expected,
            max_abs_err,
            ..
        }) => {
            assert_eq!(first_actual, 100.5);
            assert_eq!(first_expected, 100.0);
            assert_eq!(max_abs_err, 0.5);
        }
        other => panic!("{other:?}"),
    }
    // Only atol for zero expected values; the count and first index are reported.
    let err = a.allclose(&e, 0.0, 0.0).unwrap_err();
    assert!(matches!(
        err,
        CompareError::Values {
            mismatches: 2,
            first_index: 1,
            ..
        }
    ));
    let msg = err.to_string();
    assert!(
        msg.contains("2 of 4") && msg.contains("index 1") && msg.contains("100.5"),
        "{msg}"
    );
    // rtol scales with the expected value, not the actual one (asymmetric like NumPy).
    let x = NDArray::from_f64(DataType::float64(), &[1], &[2.0]).unwrap();
    let y = NDArray::from_f64(DataType::float64(), &[1], &[1.0]).unwrap();
    assert!(x.allclose(&y, 0.6, 0.0).is_err());
    assert!(y.allclose(&x, 0.6, 0.0).is_ok());
}

#[test]
fn allclose_special_values_and_mismatched_arrays() {
    let f = |v: &[f64]| NDArray::from_f64(DataType::float32(), &[v.len()], v).unwrap();
    let inf = f64::INFINITY;
    f(&[inf, -inf])
        .allclose(&f(&[inf, -inf]), 0.0, 0.0)
        .unwrap();
    assert!(f(&[inf]).allclose(&f(&[-inf]), 1.0, 1.0).is_err());
    assert!(f(&[1.0]).allclose(&f(&[inf]), 1.0, 1.0).is_err());
    assert!(f(&[inf]).allclose(&f(&[1.0]), 1.0, 1.0).is_err());
    // NaN matches NaN (numpy.testing.assert_allclose's equal_nan), and nothing else
    f(&[f64::NAN, 2.0])
        .allclose(&f(&[f64::NAN, 2.0]), 0.0, 0.0)
        .unwrap();
    assert!(f(&[f64::NAN]).allclose(&f(&[1.0]), 1.0, 1.0).is_err());
    assert!(f(&[1.0]).allclose(&f(&[f64::NAN]), 1.0, 1.0).is_err());
    match f(&[f64::NAN, 1.0]).allclose(&f(&[0.0, 3.0]), 0.0, 0.0) {
        Err(CompareError::Values {
            mismatches: 2,
            first_index: 0,
            max_abs_err,
            ..
        }) => assert_eq!(max_abs_err, 2.0),
        other => panic!("{other:?}"),
    }
    let d = NDArray::zeros(DataType::float64(), &[2]).unwrap();
    assert!(matches!(
        f(&[0.0, 0.0]).allclose(&d, 1.0, 1.0),
        Err(CompareError::Dtype { .. })
    ));
    assert!(matches!(
        f(&[0.0, 0.0]).allclose(&f(&[0.0, 0.0, 0.0]), 1.0, 1.0),
        Err(CompareError::Shape { .. })
    ));
    // Integer arrays compare too.
    let i = NDArray::from_f64(DataType::int32(), &[2], &[1.0, 2.0]).unwrap();
    i.allclose(&i.clone(), 0.0, 0.0).unwrap();
}

#[test]
fn arrays_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<NDArray>();
    check::<tessera_runtime::Module>();
    let a = NDArray::from_slice_f32(&[2], &[1.0, 2.0]).unwrap();
    let s = std::thread::spawn(move || a.to_f64_vec().iter().sum::<f64>())
        .join()
        .unwrap();
    assert_eq!(s, 3.0);
}

#[test]
fn debug_shows_dtype_shape_and_values() {
    let a = NDArray::from_slice_f32(&[2], &[1.0, 2.5]).unwrap();
    let s = format!("{a:?}");
    assert!(
        s.contains("float32") && s.contains("[2]") && s.contains("2.5"),
        "{s}"
    );
    let big = NDArray::zeros(DataType::int(8), &[100]).unwrap();
    assert!(format!("{big:?}").contains("100 values"));
}

proptest! {
    #[test]
    fn f64_round_trip_of_representable_values(
        dtype_index in 0usize..12,
        values in proptest::collection::vec(-100i32..100, 0..40),
    ) {
        let dtype = all_dtypes()[dtype_index];
        let v: Vec<f64> = values
            .iter()
            .map(|&x| {
                if dtype.is_bool() { (x > 0) as u8 as f64 }
                else if dtype.is_uint() { x.unsigned_abs() as f64 }
                else { x as f64 }
            })
            .collect();
        let a = NDArray::from_f64(dtype, &[v.len()], &v).unwrap();
        prop_assert_eq!(a.to_f64_vec(), v);
        prop_assert_eq!(NDArray::from_npy_bytes(&a.to_npy_bytes()).unwrap(), a);
    }
}
