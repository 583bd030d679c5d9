//! The operator catalog: every entry builds at a small shape, its default schedule lowers
//! and computes what its unscheduled program computes (reference interpreter); random
//! small shapes of the conv2d, matmul and pooling families do too or are refused with a
//! typed error; bad names, sizes and attributes are typed errors, never panics; the
//! table is a snapshot.

mod common;

use proptest::prelude::*;
use tessera_ir::interp::{self, HostBuffer};
use tessera_ir::{DataType, PrimFunc};
use tessera_te::catalog::{self, CatalogError, OpAttrs, OpSpec};
use tessera_te::ops;
use tessera_te::schedules::CpuParams;
use tessera_te::{placeholder, ComputeDag, TeError};

const P: CpuParams = CpuParams {
    vector_lanes: 16,
    num_cores: 2,
    vectorize: true,
    gpu_threads: 0,
};

/// A small shape for each operator of the catalog.
fn small_shape(name: &str) -> Option<&'static [i64]> {
    Some(match name {
        "matmul" => &[5, 7, 3],
        "dense" => &[4, 6, 5],
        "dense_packed" => &[3, 24, 5],
        "batch_matmul" => &[2, 3, 5, 4],
        "attention" => &[2, 9, 8, 16, 8],
        "conv2d" | "conv2d_nchw" | "conv2d_transpose" => &[1, 6, 5, 3, 4, 3, 3],
        "conv2d_nchwc" => &[1, 5, 5, 4, 8, 3, 3],
        "conv2d_nhwc_packed" => &[1, 6, 5, 3, 16, 3, 3],
        "conv2d_packed" => &[1, 4, 4, 16, 32, 3, 3],
        "depthwise_conv2d" | "depthwise_conv2d_nchw" => &[2, 6, 5, 3, 3, 3],
        "conv2d_winograd" => &[1, 8, 8, 3, 4, 3, 3],
        "conv2d_winograd_blocked" => &[1, 8, 8, 3, 16, 3, 3],
        "conv3d" | "conv3d_ndhwc" => &[1, 4, 3, 4, 2, 3, 3, 2, 3],
        "max_pool2d" | "max_pool2d_nchw" | "avg_pool2d" | "avg_pool2d_nchw" => &[1, 6, 5, 3, 3, 2],
        "global_avg_pool2d" | "global_max_pool2d" => &[2, 5, 4, 3],
        "adaptive_avg_pool2d" | "adaptive_max_pool2d" => &[1, 7, 5, 3, 3, 2],
        "max_pool3d" | "avg_pool3d" => &[1, 4, 4, 3, 2, 2, 3, 2],
        "global_avg_pool3d" => &[1, 3, 4, 5, 2],
        "softmax" | "layer_norm" => &[3, 9],
        "log_softmax" | "batch_norm" => &[2, 3, 5],
        "bias_add" | "pad" => &[4, 6],
        "transpose" | "add" | "subtract" | "multiply" | "maximum" | "minimum" => &[2, 3, 4],
        "relu" | "sigmoid" | "tanh" | "exp" | "sqrt" | "erf" | "gelu" => &[3, 17],
        _ => return None,
    })
}

/// Random inputs of `spec` (in its input ranges) and zero outputs, as the arguments of
/// its functions.
fn buffers(spec: &OpSpec, seed: u64) -> (Vec<HostBuffer>, usize) {
    let (ins, outs) = spec.tensors().unwrap();
    let dims =
        |t: &tessera_te::Tensor| -> Vec<usize> { t.shape().iter().map(|d| *d as usize).collect() };
    let mut bufs = Vec::new();
    for (i, t) in ins.iter().enumerate() {
        let (lo, hi) = spec.input_range(i);
        let n: i64 = t.shape().iter().product();
        let vals: Vec<f64> = common::rand_vals(n as usize, seed + i as u64)
            .into_iter()
            .map(|v| lo + (v + 1.0) / 2.0 * (hi - lo))
            .collect();
        bufs.push(HostBuffer::from_f64(t.dtype(), &dims(t), &vals));
    }
    for t in &outs {
        bufs.push(HostBuffer::zeros(t.dtype(), &dims(t)));
    }
    (bufs, ins.len())
}

fn run(f: &PrimFunc, bufs: &[HostBuffer]) -> Vec<HostBuffer> {
    let mut bufs = bufs.to_vec();
    interp::run(f, &mut bufs).unwrap_or_else(|e| panic!("interpreter: {e}\n{f}"));
    bufs
}

/// The default schedule of `spec` computes what its unscheduled program computes.
fn assert_default_matches_naive(spec: &OpSpec) {
    let what = format!("{} {:?} {:?}", spec.name, spec.shape, spec.attrs);
    let default = spec
        .default_func(P, "default")
        .unwrap_or_else(|e| panic!("{what}: default_func: {e:?}"));
    let naive = spec
        .naive_func("naive")
        .unwrap_or_else(|e| panic!("{what}: naive_func: {e:?}"));
    let (bufs, n_in) = buffers(spec, 11);
    let (want, got) = (run(&naive, &bufs), run(&default, &bufs));
    for (w, g) in want[n_in..].iter().zip(&got[n_in..]) {
        let (w, g) = (w.to_f64(), g.to_f64());
        assert!(
            w.iter().all(|v| v.is_finite()),
            "{what}: non-finite reference"
        );
        common::assert_close(&what, &g, &w, 1e-4);
    }
}

#[test]
fn every_entry_builds_and_its_default_schedule_matches_the_naive_program() {
    for e in catalog::entries() {
        let shape = small_shape(e.name).unwrap_or_else(|| panic!("no test shape for {}", e.name));
        let spec = OpSpec::new(e.name, shape, OpAttrs::default()).unwrap();
        let (ins, outs) = spec.tensors().unwrap();
        assert!(!ins.is_empty() && outs.len() == 1, "{}", e.name);
        spec.dag().unwrap();
        assert_default_matches_naive(&spec);
    }
}

#[test]
fn attributes_reach_the_operators() {
    let cases: &[(&str, &[i64], OpAttrs)] = &[
        ("conv2d", &[2, 9, 9, 3, 5, 3, 3], attrs(2, Some(1), 2)),
        ("conv2d_nchw", &[1, 7, 8, 2, 3, 3, 2], attrs(2, Some(0), 1)),
        ("depthwise_conv2d", &[1, 7, 7, 4, 3, 3], attrs(2, None, 2)),
        (
            "conv2d_transpose",
            &[1, 4, 3, 2, 3, 3, 3],
            attrs(2, Some(1), 1),
        ),
        (
            "conv2d_winograd",
            &[1, 6, 7, 2, 3, 3, 3],
            attrs(1, Some(0), 1),
        ),
        (
            "conv2d_winograd_blocked",
            &[1, 6, 7, 2, 8, 3, 3],
            attrs(1, Some(0), 1),
        ),
        (
            "conv3d_ndhwc",
            &[1, 5, 4, 4, 2, 2, 3, 3, 3],
            attrs(2, Some(1), 1),
        ),
        ("avg_pool2d_nchw", &[1, 7, 6, 2, 3, 3], attrs(2, Some(1), 1)),
        (
            "avg_pool3d",
            &[1, 5, 4, 4, 2, 3, 2, 2],
            attrs(2, Some(0), 1),
        ),
        ("pad", &[2, 3], attrs(1, Some(2), 1)),
    ];
    for (name, shape, a) in cases {
        assert_default_matches_naive(&OpSpec::new(name, shape, *a).unwrap());
    }
    let ceil = OpAttrs {
        stride: 2,
        ceil_mode: true,
        ..attrs(2, Some(0), 1)
    };
    let floor = OpSpec::new("max_pool2d", &[1, 6, 6, 1, 3, 3], attrs(2, Some(0), 1)).unwrap();
    let ceiled = OpSpec::new("max_pool2d", &[1, 6, 6, 1, 3, 3], ceil).unwrap();
    assert_default_matches_naive(&ceiled);
    let out_hw = |s: &OpSpec| s.tensors().unwrap().1[0].shape()[1..3].to_vec();
    assert_eq!((out_hw(&floor), out_hw(&ceiled)), (vec![2, 2], vec![3, 3]));

    let blocked = OpAttrs {
        block: Some((2, 4)),
        ..OpAttrs::default()
    };
    let s = OpSpec::new("conv2d_nchwc", &[1, 5, 5, 4, 8, 3, 3], blocked).unwrap();
    let (ins, _) = s.tensors().unwrap();
    assert_eq!(ins[0].shape(), &[1, 2, 5, 5, 2]);
    assert_eq!(ins[1].shape(), &[2, 2, 3, 3, 2, 4]);
    assert_default_matches_naive(&s);

    // The packed NHWC conv: the output block of `block`, else the largest power of two
    // up to 16, else (as tuned) the target's lanes; a block that does not divide the
    // output channels is refused.
    let packed = |shape: &[i64], block| {
        let a = OpAttrs {
            block,
            ..attrs(2, Some(1), 1)
        };
        OpSpec::new("conv2d_nhwc_packed", shape, a).unwrap()
    };
    let kernel_shape = |s: &OpSpec| s.tensors().unwrap().0[1].shape().to_vec();
    let s = packed(&[1, 7, 6, 3, 24, 3, 3], Some((1, 4)));
    assert_eq!(kernel_shape(&s), [6, 3, 3, 3, 4]);
    assert_default_matches_naive(&s);
    let s = packed(&[1, 7, 6, 3, 24, 3, 3], None);
    assert_eq!(kernel_shape(&s), [3, 3, 3, 3, 8]);
    assert_eq!(kernel_shape(&s.for_vector_lanes(4)), [6, 3, 3, 3, 4]);
    let err = packed(&[1, 7, 6, 3, 24, 3, 3], Some((1, 16)))
        .tensors()
        .unwrap_err();
    let why = std::error::Error::source(&err).map(|e| e.to_string());
    assert!(
        why.as_deref()
            .unwrap_or("")
            .contains("must divide the output channels 24"),
        "{err}: {why:?}"
    );

    // The packed dense, as network builds lay out a constant weight: [N/b, K, b]
    let dense = |shape: &[i64], block| {
        let a = OpAttrs {
            block,
            ..OpAttrs::default()
        };
        OpSpec::new("dense_packed", shape, a).unwrap()
    };
    let s = dense(&[3, 24, 5], Some((1, 4)));
    assert_eq!(kernel_shape(&s), [6, 5, 4]);
    assert_default_matches_naive(&s);
    let s = dense(&[1, 48, 7], None);
    assert_eq!(kernel_shape(&s), [3, 7, 16]);
    assert_default_matches_naive(&s);
    assert_eq!(kernel_shape(&s.for_vector_lanes(8)), [6, 7, 8]);
    let err = dense(&[3, 24, 5], Some((1, 16))).tensors().unwrap_err();
    let why = std::error::Error::source(&err).map(|e| e.to_string());
    assert!(
        why.as_deref()
            .unwrap_or("")
            .contains("must divide the output features 24"),
        "{err}: {why:?}"
    );

    // The CPU's Winograd conv: the tile from `block`'s first entry, else 4 where 4
    // divides the output (8×8 here), else 2 (6×6); the weight [α, α, C_OUT/b, C_IN, b]
    let winograd = |shape: &[i64], block| {
        let a = OpAttrs {
            block,
            ..attrs(1, Some(1), 1)
        };
        OpSpec::new("conv2d_winograd_blocked", shape, a).unwrap()
    };
    let s = winograd(&[1, 8, 8, 3, 16, 3, 3], None);
    assert_eq!(kernel_shape(&s), [6, 6, 1, 3, 16]);
    assert_eq!(kernel_shape(&s.for_vector_lanes(8)), [6, 6, 2, 3, 8]);
    assert_eq!(
        kernel_shape(&winograd(&[1, 6, 6, 3, 16, 3, 3], None)),
        [4, 4, 1, 3, 16]
    );
    let s = winograd(&[1, 8, 8, 3, 16, 3, 3], Some((2, 4)));
    assert_eq!(kernel_shape(&s), [4, 4, 4, 3, 4]);
    assert_default_matches_naive(&s);
    for (block, what) in [
        (Some((3, 4)), "tile size 3"),
        (Some((2, 5)), "output block 5"),
    ] {
        let err = winograd(&[1, 8, 8, 3, 16, 3, 3], block)
            .tensors()
            .unwrap_err();
        let why = std::error::Error::source(&err).map(|e| e.to_string());
        assert!(
            why.as_deref().unwrap_or("").contains(what),
            "{err}: {why:?}"
        );
    }
}

fn attrs(stride: i64, pad: Option<i64>, dilation: i64) -> OpAttrs {
    OpAttrs {
        stride,
        pad,
        dilation,
        ..OpAttrs::default()
    }
}

#[test]
fn grouped_convolutions_are_catalog_operators() {
    let grouped = |groups| OpAttrs {
        groups,
        ..attrs(1, Some(1), 1)
    };
    // ResNeXt's 4 channels per group and RegNet-like 8, in both layouts
    for (name, shape, groups) in [
        ("conv2d", [1, 5, 6, 8, 8, 3, 3], 2),
        ("conv2d", [1, 4, 5, 16, 32, 3, 3], 2),
        ("conv2d_nchw", [1, 5, 4, 8, 12, 3, 3], 4),
        // the weights packed as network builds pack them: [C_OUT/B, KH, KW, C_IN/G, B]
        ("conv2d_nhwc_packed", [1, 5, 6, 16, 32, 3, 3], 4),
    ] {
        let spec = OpSpec::new(name, &shape, grouped(groups)).unwrap();
        let (ins, out) = spec.tensors().unwrap();
        let per_group = shape[3] / groups;
        let kernel_cin = match name {
            "conv2d" => 2,
            "conv2d_nhwc_packed" => 3,
            _ => 1,
        };
        assert_eq!(ins[1].shape()[kernel_cin], per_group, "{name} {shape:?}");
        assert!(out[0].tag().starts_with("group_conv2d"), "{}", out[0].tag());
        assert_default_matches_naive(&spec);
        // written only when not 1, read back the same
        let text = serde_json::to_string(&spec).unwrap();
        assert!(text.contains(&format!("\"groups\":{groups}")), "{text}");
        assert_eq!(serde_json::from_str::<OpSpec>(&text).unwrap(), spec);
    }
    let plain = OpSpec::new("conv2d", &[1, 5, 5, 4, 4, 3, 3], attrs(1, Some(1), 1)).unwrap();
    assert!(!serde_json::to_string(&plain).unwrap().contains("groups"));
    // groups that divide neither channel count, zero groups, groups on a matmul
    let spec = OpSpec::new("conv2d", &[1, 5, 5, 6, 8, 3, 3], grouped(4)).unwrap();
    assert!(spec.tensors().is_err());
    for (name, shape, groups) in [
        ("conv2d", &[1, 5, 5, 4, 4, 3, 3][..], 0),
        ("matmul", &[2, 3, 4][..], 2),
        ("depthwise_conv2d", &[1, 5, 5, 4, 3, 3][..], 2),
    ] {
        let e = OpSpec::new(name, shape, grouped(groups)).unwrap_err();
        assert!(
            matches!(&e, CatalogError::BadAttr { attr, .. } if *attr == "groups"),
            "{e:?}"
        );
    }
}

#[test]
fn same_padding_conv2d_is_the_tuners_workload() {
    // `tessera tune --op conv2d` has always built conv2d NHWC with stride 1 and padding
    // kernel / 2: the catalog's default attributes give the same workload key, so logs
    // written before it still apply.
    let f32 = DataType::float32();
    let d = placeholder(&[1, 14, 14, 8], f32, "d").unwrap();
    let k = placeholder(&[3, 5, 8, 16], f32, "k").unwrap();
    let old = ops::conv2d_nhwc(&d, &k, (1, 1), (1, 2), (1, 1)).unwrap();
    let old = ComputeDag::new(&[old]).unwrap().workload_key();
    let spec = OpSpec::new("conv2d", &[1, 14, 14, 8, 16, 3, 5], OpAttrs::default()).unwrap();
    assert_eq!(spec.dag().unwrap().workload_key(), old);
}

#[test]
fn aliases_resolve_to_the_catalog_name() {
    for (alias, name) in [
        ("conv2d_nhwc", "conv2d"),
        ("depthwise_conv2d_nhwc", "depthwise_conv2d"),
        ("max_pool2d_nhwc", "max_pool2d"),
    ] {
        let shape = small_shape(name).unwrap();
        let spec = OpSpec::new(alias, shape, OpAttrs::default()).unwrap();
        assert_eq!(spec.name, name);
        assert_eq!(catalog::entry(alias).unwrap().name, name);
    }
}

#[test]
fn names_are_unique_and_documented() {
    let mut seen = std::collections::HashSet::new();
    for e in catalog::entries() {
        for n in std::iter::once(&e.name).chain(e.aliases) {
            assert!(seen.insert(*n), "`{n}` named twice");
        }
        assert!(!e.doc.is_empty() && !e.shape.is_empty(), "{}", e.name);
        let (n, _) = e.arity();
        assert!(n >= 1, "{}", e.name);
    }
}

#[test]
fn specs_round_trip_through_json_and_attrs_default() {
    let spec = OpSpec::new("conv2d", &[1, 8, 8, 3, 4, 3, 3], attrs(2, Some(1), 1)).unwrap();
    let text = serde_json::to_string(&spec).unwrap();
    assert_eq!(serde_json::from_str::<OpSpec>(&text).unwrap(), spec);
    let bare: OpSpec = serde_json::from_str(r#"{"name":"matmul","shape":[2,3,4]}"#).unwrap();
    assert_eq!(bare.attrs, OpAttrs::default());
    assert_eq!(
        OpAttrs::default(),
        OpAttrs {
            stride: 1,
            pad: None,
            dilation: 1,
            ceil_mode: false,
            block: None,
            groups: 1,
        }
    );
}

#[test]
fn bad_requests_are_typed_errors() {
    let d = OpAttrs::default();
    match OpSpec::new("convolution", &[1, 2, 3], d).unwrap_err() {
        CatalogError::UnknownOp { name, known } => {
            assert_eq!(name, "convolution");
            assert!(
                known.contains("matmul") && known.contains("conv2d_winograd"),
                "{known}"
            );
        }
        e => panic!("{e:?}"),
    }
    let e = OpSpec::new("matmul", &[8, 8], d).unwrap_err();
    assert!(
        matches!(&e, CatalogError::ShapeArity { op, got: 2, .. } if op == "matmul"),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "operator `matmul` takes --shape M,N,K (3 numbers), got 2 number(s)"
    );
    let e = OpSpec::new("relu", &[], d).unwrap_err();
    assert!(
        e.to_string().contains("D0,… (at least 1 number), got 0"),
        "{e}"
    );
    let e = OpSpec::new("conv2d_nhwc", &[1, 8, 0, 3, 4, 3, 3], d).unwrap_err();
    assert_eq!(
        e,
        CatalogError::NotPositive {
            op: "conv2d".into(),
            shape: vec![1, 8, 0, 3, 4, 3, 3],
            value: 0
        }
    );
    assert!(e.to_string().contains("every size must be positive, got 0"));
    let e = OpSpec::new("matmul", &[1 << 40, 1 << 40, 2], d).unwrap_err();
    assert!(matches!(e, CatalogError::TooLarge { .. }), "{e:?}");
    let e = OpSpec::new("max_pool2d", &[1, 8, 8, 3, 2, 2], attrs(0, None, 1)).unwrap_err();
    assert!(
        matches!(e, CatalogError::BadAttr { attr: "stride", .. }),
        "{e:?}"
    );
    let e = OpSpec::new("conv2d", &[1, 8, 8, 3, 4, 3, 3], attrs(1, Some(-1), 1)).unwrap_err();
    assert!(
        matches!(e, CatalogError::BadAttr { attr: "pad", .. }),
        "{e:?}"
    );
}

#[test]
fn operator_library_refusals_keep_their_cause() {
    use std::error::Error;
    let te_attr = |e: &CatalogError| match e {
        CatalogError::Te { source, .. } => match &**source {
            TeError::BadAttr { attr, .. } => attr.clone(),
            e => panic!("{e:?}"),
        },
        e => panic!("{e:?}"),
    };
    let d = OpAttrs::default();
    let spec = OpSpec::new("conv2d_winograd", &[1, 8, 8, 3, 4, 5, 5], d).unwrap();
    assert_eq!(te_attr(&spec.tensors().unwrap_err()), "kernel");
    let spec = OpSpec::new("conv2d_winograd", &[1, 8, 8, 3, 4, 3, 3], attrs(2, None, 1)).unwrap();
    assert_eq!(te_attr(&spec.default_func(P, "f").unwrap_err()), "stride");
    let spec = OpSpec::new("conv2d", &[1, 4, 4, 3, 8, 7, 7], attrs(1, Some(0), 1)).unwrap();
    let e = spec.dag().unwrap_err();
    assert_eq!(
        e.to_string(),
        "cannot build operator `conv2d` --shape 1,4,4,3,8,7,7"
    );
    let cause = e.source().unwrap().to_string();
    assert!(cause.contains("larger than the padded input"), "{cause}");
    let blocked = OpAttrs {
        block: Some((3, 8)),
        ..d
    };
    let spec = OpSpec::new("conv2d_nchwc", &[1, 5, 5, 4, 8, 3, 3], blocked).unwrap();
    assert_eq!(te_attr(&spec.naive_func("f").unwrap_err()), "block");
    // A spec written by hand is checked again.
    let bad = OpSpec {
        name: "matmul".into(),
        shape: vec![2, -3, 4],
        attrs: d,
    };
    assert!(matches!(
        bad.tensors().unwrap_err(),
        CatalogError::NotPositive { value: -3, .. }
    ));
}

#[test]
fn the_table_lists_every_operator() {
    let table = catalog::table();
    for e in catalog::entries() {
        assert!(
            table.contains(e.name) && table.contains(e.doc),
            "{}",
            e.name
        );
    }
    insta::assert_snapshot!(table);
}

fn any_attrs() -> impl Strategy<Value = OpAttrs> {
    (1i64..3, prop::option::of(0i64..3), 1i64..3, any::<bool>()).prop_map(
        |(stride, pad, dilation, ceil_mode)| OpAttrs {
            stride,
            pad,
            dilation,
            ceil_mode,
            block: None,
            groups: 1,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random small matmuls, conv2ds (all layouts) and pools: the default schedule
    /// computes what the naive program computes, or the operator is refused with a
    /// typed error naming it (a kernel larger than the padded input…).
    #[test]
    fn random_small_shapes_build_or_are_refused(
        family in 0usize..9,
        dims in prop::collection::vec(1i64..7, 9),
        a in any_attrs(),
    ) {
        let (name, shape): (&str, Vec<i64>) = match family {
            0 => ("matmul", dims[..3].to_vec()),
            1 => ("conv2d", conv_dims(&dims)),
            2 => ("conv2d_nchw", conv_dims(&dims)),
            3 => ("depthwise_conv2d", [&conv_dims(&dims)[..4], &dims[5..7]].concat()),
            4 => ("max_pool2d", pool_dims(&dims)),
            5 => ("avg_pool2d_nchw", pool_dims(&dims)),
            6 => ("adaptive_avg_pool2d", pool_dims(&dims)),
            7 => ("max_pool3d", vec![1, dims[1], dims[2], dims[3], 2, dims[5].min(3), dims[6].min(3), dims[7].min(3)]),
            _ => ("batch_matmul", dims[..4].to_vec()),
        };
        let spec = OpSpec::new(name, &shape, a).unwrap();
        match spec.tensors() {
            Ok(_) => assert_default_matches_naive(&spec),
            Err(CatalogError::Te { op, .. }) => prop_assert_eq!(op, name),
            Err(e) => prop_assert!(false, "{:?}", e),
        }
    }

    /// Any name and any sizes: a spec or a typed error, never a panic.
    #[test]
    fn any_request_is_a_spec_or_an_error(
        which in 0usize..60,
        shape in prop::collection::vec(-2i64..6, 0..10),
        a in any_attrs(),
    ) {
        let entries = catalog::entries();
        let name = entries.get(which).map_or("no_such_op", |e| e.name);
        if let Ok(spec) = OpSpec::new(name, &shape, a) {
            prop_assert!(shape.iter().all(|d| *d > 0));
            let _ = spec.tensors();
        }
    }
}

/// `N,H,W,C_IN,C_OUT,KH,KW` with a small batch and kernel.
fn conv_dims(d: &[i64]) -> Vec<i64> {
    vec![
        d[0].min(2),
        d[1],
        d[2],
        d[3].min(4),
        d[4].min(4),
        d[5].min(4),
        d[6].min(4),
    ]
}

/// `N,H,W,C` and a window or output size.
fn pool_dims(d: &[i64]) -> Vec<i64> {
    vec![
        d[0].min(2),
        d[1],
        d[2],
        d[3].min(3),
        d[5].min(4),
        d[6].min(4),
    ]
}

/// The printed text of every entry's default and naive functions reads back
/// (`tessera_ir::parser`) into a function that prints the same, passes the verifier and
/// computes the same on the reference interpreter (up to the six significant digits
/// the printer gives a float constant, as TVM's does).
#[test]
fn every_entrys_functions_read_back_from_their_text() {
    for e in catalog::entries() {
        let shape = small_shape(e.name).unwrap_or_else(|| panic!("no test shape for {}", e.name));
        let spec = OpSpec::new(e.name, shape, OpAttrs::default()).unwrap();
        let (bufs, n_in) = buffers(&spec, 5);
        for f in [
            spec.default_func(P, "default").unwrap(),
            spec.naive_func("naive").unwrap(),
        ] {
            let text = f.to_string();
            let back: PrimFunc = text
                .parse()
                .unwrap_or_else(|err| panic!("{}: {err}\n{text}", e.name));
            assert_eq!(back.to_string(), text, "{}", e.name);
            tessera_ir::verify::verify(&back).unwrap_or_else(|err| panic!("{}: {err}", e.name));
            let (want, got) = (run(&f, &bufs), run(&back, &bufs));
            for (w, g) in want[n_in..].iter().zip(&got[n_in..]) {
                let what = format!("{}: read back", e.name);
                common::assert_close(&what, &g.to_f64(), &w.to_f64(), 1e-4);
            }
        }
    }
}
