//! The `.npy` format: NumPy's exact bytes, round trips, and malformed input.

use tessera_ir::DataType;
use tessera_runtime::{NDArray, NpyError, RuntimeError};

fn all_dtypes() -> Vec<DataType> {
    [
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float16", "float32", "float64",
    ]
    .iter()
    .map(|s| s.parse().unwrap())
    .collect()
}

/// A version 1.0 file the way NumPy writes it: the dict, spaces, a newline, the data at
/// byte 128 (for short headers).
fn numpy_v1(dict: &str, data: &[u8]) -> Vec<u8> {
    // NumPy's padding: 64 - (prefix + header + newline) % 64 spaces (so 64, not 0, when
    // already aligned).
    let mut header = dict.to_string();
    header.push_str(&" ".repeat(64 - (10 + header.len() + 1) % 64));
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn writes_exactly_what_numpy_writes() {
    // Bytes of `np.save(f, np.arange(6, dtype='<f4').reshape(2, 3))` (NumPy 2.x): the
    // header carries spare space for the first axis to grow to 21 digits.
    let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    let expected = numpy_v1(dict, &f32_bytes(&[0., 1., 2., 3., 4., 5.]));
    assert_eq!(expected.len(), 152);
    assert_eq!(&expected[8..10], &[0x76, 0x00]); // header length 118
    let a = NDArray::from_slice_f32(&[2, 3], &[0., 1., 2., 3., 4., 5.]).unwrap();
    assert_eq!(a.to_npy_bytes(), expected);
    assert_eq!(NDArray::from_npy_bytes(&expected).unwrap(), a);

    // One-byte types use '|', 0-d shapes are `()`, 1-d ones `(n,)`.
    let b = NDArray::from_slice(&[2], &[true, false]).unwrap();
    let bytes = b.to_npy_bytes();
    assert_eq!(
        bytes,
        numpy_v1(
            "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }",
            &[1, 0]
        )
    );
    let s = NDArray::from_slice::<i8>(&[], &[5]).unwrap();
    assert_eq!(
        s.to_npy_bytes(),
        numpy_v1(
            "{'descr': '|i1', 'fortran_order': False, 'shape': (), }",
            &[5]
        )
    );
    // Every file's data starts at a multiple of 64 bytes.
    for dtype in all_dtypes() {
        for shape in [
            vec![],
            vec![0],
            vec![3],
            vec![12_345_678_901, 0],
            vec![2, 3, 4, 5, 6],
        ] {
            let a = NDArray::zeros(dtype, &shape).unwrap();
            let bytes = a.to_npy_bytes();
            let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
            assert_eq!((10 + hlen) % 64, 0);
            assert_eq!(bytes[10 + hlen - 1], b'\n');
            assert_eq!(bytes.len(), 10 + hlen + a.nbytes());
        }
    }
}

#[test]
fn descriptors_of_every_dtype() {
    let expected = [
        "|b1", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "<f2", "<f4", "<f8",
    ];
    for (dtype, descr) in all_dtypes().into_iter().zip(expected) {
        let bytes = NDArray::zeros(dtype, &[1]).unwrap().to_npy_bytes();
        let header = String::from_utf8_lossy(&bytes[10..]);
        assert!(
            header.starts_with(&format!("{{'descr': '{descr}', ")),
            "{dtype}: {header}"
        );
    }
}

#[test]
fn round_trip_every_dtype_through_files() {
    let dir = tempfile::tempdir().unwrap();
    for (i, dtype) in all_dtypes().into_iter().enumerate() {
        for (j, shape) in [vec![2, 3], vec![], vec![0], vec![7], vec![1, 2, 3, 4]]
            .into_iter()
            .enumerate()
        {
            let a =
                NDArray::random_uniform(dtype, &shape, (i * 10 + j) as u64, -100.0, 100.0).unwrap();
            let path = dir.path().join(format!("{dtype}_{j}.npy"));
            a.save_npy(&path).unwrap();
            let b = NDArray::load_npy(&path).unwrap();
            assert_eq!(b.dtype(), dtype);
            assert_eq!(b.shape(), shape.as_slice());
            assert_eq!(a, b, "{dtype} {shape:?}");
        }
    }
    // Special float values survive bit-exactly.
    let specials = [f64::NAN, f64::INFINITY, -0.0, f64::MIN_POSITIVE, -1e300];
    let a = NDArray::from_f64(DataType::float64(), &[5], &specials).unwrap();
    let b = NDArray::from_npy_bytes(&a.to_npy_bytes()).unwrap();
    assert_eq!(a.as_bytes(), b.as_bytes());
}

#[test]
fn reads_other_forms_numpy_writes() {
    // Big-endian int32 [1, -2, 3].
    let be = numpy_v1(
        "{'descr': '>i4', 'fortran_order': False, 'shape': (3,), }",
        &[0, 0, 0, 1, 0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 3],
    );
    let a = NDArray::from_npy_bytes(&be).unwrap();
    assert_eq!(a.as_slice::<i32>().unwrap(), &[1, -2, 3]);
    // Version 2.0 (4-byte header length), float64 [1.5, 2.5].
    let dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }";
    let mut header = dict.to_string();
    header.push_str(&" ".repeat(64 - (12 + header.len() + 1) % 64));
    header.push('\n');
    let mut v2 = b"\x93NUMPY\x02\x00".to_vec();
    v2.extend_from_slice(&(header.len() as u32).to_le_bytes());
    v2.extend_from_slice(header.as_bytes());
    v2.extend(1.5f64.to_le_bytes());
    v2.extend(2.5f64.to_le_bytes());
    let a = NDArray::from_npy_bytes(&v2).unwrap();
    assert_eq!(a.as_slice::<f64>().unwrap(), &[1.5, 2.5]);
    // Version 3.0 is the same with a UTF-8 header.
    v2[6] = 3;
    assert_eq!(NDArray::from_npy_bytes(&v2).unwrap(), a);
    // Keys in another order, double quotes, no trailing comma, Python 2 longs, '<' on
    // one-byte types.
    let odd = numpy_v1(
        "{\"shape\": (2L, 1L), 'fortran_order': False, 'descr': '<u1'}",
        &[7, 9],
    );
    let a = NDArray::from_npy_bytes(&odd).unwrap();
    assert_eq!(a.shape(), &[2, 1]);
    assert_eq!(a.as_slice::<u8>().unwrap(), &[7, 9]);
}

fn decode_err(bytes: &[u8]) -> NpyError {
    match NDArray::from_npy_bytes(bytes) {
        Ok(a) => panic!("decoded {a:?}"),
        Err(e) => e,
    }
}

#[test]
fn malformed_files_are_errors() {
    let good = NDArray::from_slice_f32(&[2, 3], &[0.; 6])
        .unwrap()
        .to_npy_bytes();
    let with_dict = |d: &str| numpy_v1(d, &f32_bytes(&[0.; 6]));

    assert!(matches!(decode_err(b""), NpyError::BadMagic));
    assert!(matches!(
        decode_err(b"\x93NUMPX\x01\x00"),
        NpyError::BadMagic
    ));
    assert!(matches!(
        decode_err(b"PK\x03\x04 not a npy"),
        NpyError::BadMagic
    ));
    let mut v = good.clone();
    v[6] = 4;
    assert!(matches!(
        decode_err(&v),
        NpyError::UnsupportedVersion { major: 4, minor: 0 }
    ));
    v[6] = 1;
    v[7] = 1;
    assert!(matches!(
        decode_err(&v),
        NpyError::UnsupportedVersion { .. }
    ));
    // Cut inside the length, inside the header, inside the data; data too long.
    for cut in [9, 20, 127] {
        assert!(
            matches!(decode_err(&good[..cut]), NpyError::TruncatedHeader),
            "{cut}"
        );
    }
    assert!(matches!(
        decode_err(&good[..good.len() - 1]),
        NpyError::DataSize {
            expected: 24,
            got: 23
        }
    ));
    let mut long = good.clone();
    long.push(0);
    assert!(matches!(decode_err(&long), NpyError::DataSize { .. }));
    // Header contents.
    let fortran = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }";
    assert!(matches!(
        decode_err(&with_dict(fortran)),
        NpyError::FortranOrder
    ));
    for descr in ["<c8", "<f16", "O", "<U4", "|f4", "", "<M8[ns]"] {
        let d = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (2, 3), }}");
        assert!(
            matches!(decode_err(&with_dict(&d)), NpyError::UnsupportedDescr(_)),
            "{descr}"
        );
    }
    let structured =
        "{'descr': [('x', '<i4'), ('y', '<f4')], 'fortran_order': False, 'shape': (3,), }";
    assert!(matches!(
        decode_err(&with_dict(structured)),
        NpyError::UnsupportedDescr(_)
    ));
    for dict in [
        "",
        "{",
        "not a dict",
        "{'descr': '<f4', 'fortran_order': False}",
        "{'descr': '<f4', 'shape': (2, 3)}",
        "{'fortran_order': False, 'shape': (2, 3)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3.0), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': 6, }",
        "{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3), }",
        "{'descr': 4, 'fortran_order': False, 'shape': (2, 3), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } trailing",
        "{'descr': '<f4 'fortran_order': False, 'shape': (2, 3), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999, 3)}",
        "{'descr': [('x', '<i4'), 'fortran_order': False, 'shape': (2, 3)}",
    ] {
        assert!(
            matches!(decode_err(&with_dict(dict)), NpyError::BadHeader(_)),
            "{dict}"
        );
    }
    // A shape whose size overflows is refused before anything is allocated.
    let huge = "{'descr': '<f8', 'fortran_order': False, 'shape': (18446744073709551615, 2), }";
    assert!(matches!(
        decode_err(&with_dict(huge)),
        NpyError::TooLarge(_)
    ));
    let big = "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000, ), }";
    assert!(matches!(
        decode_err(&with_dict(big)),
        NpyError::DataSize { .. }
    ));
    // Bool data must be 0/1.
    let bools = numpy_v1(
        "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
        &[1, 2, 0],
    );
    assert!(matches!(
        decode_err(&bools),
        NpyError::InvalidBool { index: 1, byte: 2 }
    ));
    // A header that is not UTF-8 in version 3.0.
    let v3 = b"\x93NUMPY\x03\x00\x04\x00\x00\x00\xff\xfe{}";
    assert!(matches!(decode_err(v3), NpyError::BadHeader(_)));
}

#[test]
fn random_bytes_never_panic() {
    // A deterministic fuzz over mutations of a valid file.
    let good = NDArray::from_f64(DataType::int(16), &[3, 2], &[1., 2., 3., 4., 5., 6.])
        .unwrap()
        .to_npy_bytes();
    let mut state = 0x1234_5678_9abc_def0u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..5000 {
        let mut v = good.clone();
        for _ in 0..(next() % 4 + 1) {
            let i = (next() as usize) % v.len();
            v[i] = next() as u8;
        }
        let cut = (next() as usize) % (v.len() + 1);
        let _ = NDArray::from_npy_bytes(&v);
        let _ = NDArray::from_npy_bytes(&v[..cut]);
    }
}

#[test]
fn file_errors_name_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.npy");
    match NDArray::load_npy(&missing) {
        Err(RuntimeError::Npy {
            path,
            source: NpyError::Io(_),
        }) => assert_eq!(path, missing),
        other => panic!("{other:?}"),
    }
    let junk = dir.path().join("junk.npy");
    std::fs::write(&junk, b"hello").unwrap();
    let err = NDArray::load_npy(&junk).unwrap_err();
    assert!(matches!(
        err,
        RuntimeError::Npy {
            source: NpyError::BadMagic,
            ..
        }
    ));
    assert!(err.to_string().contains("junk.npy"), "{err}");
    let a = NDArray::zeros(DataType::float32(), &[1]).unwrap();
    assert!(matches!(
        a.save_npy(dir.path().join("no/such/dir/a.npy")),
        Err(RuntimeError::Npy {
            source: NpyError::Io(_),
            ..
        })
    ));
}

#[test]
fn very_long_headers_use_version_2() {
    // 40000 axes of length 1: the header outgrows version 1.0's 16-bit length.
    let shape = vec![1usize; 40_000];
    let a = NDArray::from_f64(DataType::float32(), &shape, &[2.5]).unwrap();
    let bytes = a.to_npy_bytes();
    assert_eq!(&bytes[6..8], &[2, 0]);
    let hlen = u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize;
    assert_eq!((12 + hlen) % 64, 0);
    assert_eq!(NDArray::from_npy_bytes(&bytes).unwrap(), a);
}
