//! The model zoo: every network in both layouts (squeezenet: NCHW only, as TVM's) and
//! batch sizes 1 and 2 — output shape, parameter count, operator counts; option errors;
//! weights determined by the seed alone; resnet-18 and mobilenet compiled and run in
//! NCHW and NHWC with the same seed give the same probabilities; 3-D convolution and
//! pooling through the executor against the reference evaluator.
//!
//! Parameter counts are TVM's: every `relay.var` of the network but `data` — convolution
//! weights (no conv biases except squeezenet's), four per batch-norm channel (γ, β,
//! moving mean, moving variance; `bn_data`'s γ included although `scale=False` leaves
//! it unused), the classifier's weight and bias. They are derived by hand below, and
//! checked against the published counts of the architectures where those count the
//! same things.

use std::collections::BTreeMap;
use tessera_backends::Target;
use tessera_graph::ir::Layout3d;
use tessera_graph::passes;
use tessera_graph::reference::{interpret, permute};
use tessera_graph::zoo::{self, ZooOptions, NETWORKS};
use tessera_graph::{build, Graph, GraphError, Layout, Op, TensorType, Unary};
use tessera_runtime::NDArray;
use tessera_te::ops::{Conv3dAttrs, Pool3dAttrs, PoolType};

fn opts(layout: Layout, batch: i64) -> ZooOptions {
    ZooOptions {
        batch,
        layout,
        ..ZooOptions::default()
    }
}

fn counts(pairs: &[(&'static str, usize)]) -> BTreeMap<&'static str, usize> {
    pairs.iter().copied().collect()
}

/// `dense`, `bias_add` (on the dense), `batch_flatten` and `softmax`: every classifier
/// but squeezenet's ends with them.
const HEAD: [(&str, usize); 4] = [
    ("batch_flatten", 1),
    ("dense", 1),
    ("bias_add", 1),
    ("softmax", 1),
];

/// Builds `name` in both layouts (where allowed) at batch 1 and 2 and checks the input
/// and output shapes, the parameter count and the operator counts.
fn check(name: &str, params: usize, ops: &[(&'static str, usize)], head: bool) {
    let mut want = counts(ops);
    if head {
        want.extend(HEAD);
    }
    let layouts: &[Layout] = if name.starts_with("squeezenet") {
        &[Layout::Nchw]
    } else {
        &[Layout::Nchw, Layout::Nhwc]
    };
    let size = zoo::default_image_size(name).unwrap();
    for &layout in layouts {
        for batch in [1, 2] {
            let g = zoo::network(name, &opts(layout, batch)).unwrap();
            let what = format!("{name} {layout} batch {batch}");
            assert_eq!(g.name, name);
            assert_eq!(g.inputs().len(), 1, "{what}");
            let input = g.node(g.inputs()[0]);
            assert_eq!(input.name, "data");
            let spatial: Vec<i64> = if name.starts_with("resnet3d") {
                vec![16, size, size]
            } else {
                vec![size, size]
            };
            let mut shape = vec![batch];
            match layout {
                Layout::Nchw => {
                    shape.push(3);
                    shape.extend(&spatial);
                }
                Layout::Nhwc => {
                    shape.extend(&spatial);
                    shape.push(3);
                }
            }
            assert_eq!(input.ty, TensorType::f32(&shape), "{what}");
            assert_eq!(g.outputs().len(), 1, "{what}");
            let out = g.node(g.outputs()[0]);
            assert_eq!(out.ty, TensorType::f32(&[batch, 1000]), "{what}");
            assert!(matches!(out.op, Op::Softmax { .. }), "{what}");
            assert_eq!(g.num_params(), params, "{what}: parameters");
            assert_eq!(g.op_counts(), want, "{what}: operators");
        }
    }
}

// ResNet (TVM's resnet.py, pre-activation v2, 224×224). Per residual unit: 4·C_in for
// its bn1, then the convolutions and the other batch norms; the first unit of every
// stage (stage 1 included: TVM passes dim_match=False there) adds a 1×1 shortcut
// convolution f·C_in. Stem: bn_data 4·3 = 12, conv0 64·3·7·7 = 9408, bn0 4·64 = 256:
// 9676. Head: bn1 4·C + fc C·1000 + 1000.
//
// Basic units (18, 34; f = 64, 64, 128, 256, 512):
//   stage 1: first 4·64 + 64·64·9 + 4·64 + 64·64·9 + 64·64 = 78_336, others 74_240
//   stage 2: first 4·64 + 128·64·9 + 4·128 + 128·128·9 + 128·64 = 230_144, others 295_936
//   stage 3: first 919_040, others 1_181_696;  stage 4: first 3_673_088, others 4_722_688
// Bottleneck units (50, 101, 152; f = 256, 512, 1024, 2048, m = f/4):
//   4·C_in + m·C_in + 4·m + m·m·9 + 4·m + f·m (+ f·C_in in the first)
//   stage 1: first 74_496, others 71_168;      stage 2: first 378_880, others 281_600
//   stage 3: first 1_511_424, others 1_120_256; stage 4: first 6_037_504, others 4_468_736

#[test]
fn resnet_18() {
    // 9676 + (78_336 + 74_240) + (230_144 + 295_936) + (919_040 + 1_181_696)
    //      + (3_673_088 + 4_722_688) + 2048 + 513_000 = 11_699_892
    // (torchvision's resnet18 has 11_689_512: no bn_data, two parameters per BN channel,
    // no stage-1 shortcut, BN after every convolution.)
    // 1 + 2·8 + 4 shortcut = 21 conv2d; bn_data, bn0, 2·8, bn1 = 19 batch norms;
    // relu0, 2·8, relu1 = 18 relus; 8 residual adds.
    check(
        "resnet-18",
        11_699_892,
        &[
            ("conv2d", 21),
            ("batch_norm", 19),
            ("relu", 18),
            ("add", 8),
            ("max_pool2d", 1),
            ("global_avg_pool2d", 1),
        ],
        true,
    );
}

/// Gluon's resnet18_v1 (TVM's VTA tutorial's network): conv0 64·3·49 + bn0, stage 1
/// 2·(2·36_864 + 2·256), stages 2–4 a projection shortcut (1×1 conv + bn) in their first
/// unit: 9_664 + 148_480 + 526_848 + 2_102_272 + 8_398_848 + 513_000 = 11_699_112,
/// torchvision's 11_689_512 plus the 4_800 batch-norm channels' mean and variance.
/// 20 conv2d and batch norms, relu0 + 2 per unit, 8 residual adds.
#[test]
fn resnet18_v1() {
    check(
        "resnet18_v1",
        11_699_112,
        &[
            ("conv2d", 20),
            ("batch_norm", 20),
            ("relu", 17),
            ("add", 8),
            ("max_pool2d", 1),
            ("global_avg_pool2d", 1),
        ],
        true,
    );
}

#[test]
fn resnet_34() {
    // units 3, 4, 6, 3: 9676 + (78_336 + 2·74_240) + (230_144 + 3·295_936)
    //   + (919_040 + 5·1_181_696) + (3_673_088 + 2·4_722_688) + 2048 + 513_000 = 21_815_476
    check(
        "resnet-34",
        21_815_476,
        &[
            ("conv2d", 1 + 2 * 16 + 4),
            ("batch_norm", 2 + 2 * 16 + 1),
            ("relu", 1 + 2 * 16 + 1),
            ("add", 16),
            ("max_pool2d", 1),
            ("global_avg_pool2d", 1),
        ],
        true,
    );
}

#[test]
fn resnet_50() {
    // units 3, 4, 6, 3: 9676 + (74_496 + 2·71_168) + (378_880 + 3·281_600)
    //   + (1_511_424 + 5·1_120_256) + (6_037_504 + 2·4_468_736) + 4·2048 + 2_049_000
    //   = 25_595_060 (torchvision's resnet50, v1: 25_557_032)
    // 1 + 3·16 + 4 = 53 conv2d, 2 + 3·16 + 1 = 51 batch norms, 1 + 3·16 + 1 = 50 relus.
    check(
        "resnet-50",
        25_595_060,
        &[
            ("conv2d", 53),
            ("batch_norm", 51),
            ("relu", 50),
            ("add", 16),
            ("max_pool2d", 1),
            ("global_avg_pool2d", 1),
        ],
        true,
    );
}

#[test]
fn resnet_101() {
    // units 3, 4, 23, 3: resnet-50 + 17·1_120_256 = 44_639_412
    check(
        "resnet-101",
        44_639_412,
        &[
            ("conv2d", 1 + 3 * 33 + 4),
            ("batch_norm", 2 + 3 * 33 + 1),
            ("relu", 1 + 3 * 33 + 1),
            ("add", 33),
            ("max_pool2d", 1),
            ("global_avg_pool2d", 1),
        ],
        true,
    );
}

#[test]
fn resnet_152() {
    // units 3, 8, 36, 3: resnet-101 + 4·281_600 + 13·1_120_256 = 60_329_140
    check(
        "resnet-152",
        60_329_140,
        &[
            ("conv2d", 1 + 3 * 50 + 4),
            ("batch_norm", 2 + 3 * 50 + 1),
            ("relu", 1 + 3 * 50 + 1),
            ("add", 50),
            ("max_pool2d", 1),
            ("global_avg_pool2d", 1),
        ],
        true,
    );
}

#[test]
fn resnet3d_18() {
    // resnet_3d.py, 3×16×112×112: kernels 3×3×3 (27) instead of 3×3, conv0 3×7×7 with
    // stride (1, 2, 2) and no max pool.
    // stem: 12 + 64·3·3·7·7 + 4·64 = 28_492
    // stage 1: first 4·64 + 64·64·27·2 + 4·64 + 64·64 = 225_792, second 221_696
    // stage 2: first 4·64 + 128·64·27 + 4·128 + 128·128·27 + 128·64 = 672_512, second 885_760
    // stage 3: first 2_688_512, second 3_540_992; stage 4: first 10_750_976, second 14_159_872
    // head: 4·512 + 512·1000 + 1000 = 515_048.  Total 33_689_652.
    check(
        "resnet3d-18",
        33_689_652,
        &[
            ("conv3d", 21),
            ("batch_norm", 19),
            ("relu", 18),
            ("add", 8),
            ("global_avg_pool3d", 1),
        ],
        true,
    );
    // the temporal and spatial strides: 16×112×112 -> 16×56×56 (conv0) -> stage 4 at 2×7×7
    let g = zoo::network("resnet3d-18", &ZooOptions::default()).unwrap();
    let shape = |name: &str| {
        let n = g
            .petgraph()
            .node_indices()
            .find(|&n| g.node(n).name == name)
            .unwrap_or_else(|| panic!("no node {name}"));
        g.node(n).ty.shape.clone()
    };
    assert_eq!(shape("conv0"), [1, 64, 16, 56, 56]);
    assert_eq!(shape("stage4_unit2_plus"), [1, 512, 2, 7, 7]);
    assert_eq!(shape("pool1"), [1, 512, 1, 1, 1]);
}

#[test]
fn mobilenet() {
    // conv_block_1: 32·3·3·3 + 4·32 = 992. Each separable block (dw → pw channels):
    // dw·9 + 4·dw + pw·dw + 4·pw:
    //   (32→64) 2_816, (64→128) 9_536, (128→128) 18_560, (128→256) 35_456,
    //   (256→256) 69_888, (256→512) 135_936, 5 × (512→512) 5 × 269_824,
    //   (512→1024) 533_248, (1024→1024) 1_064_448
    // fc: 1024·1000 + 1000.  Total 4_253_864 — Keras' MobileNet (α = 1, 224) count, which
    // also has bias-free convolutions and four parameters per batch-norm channel.
    // 1 + 13·2 = 27 conv2d (13 of them depthwise), 27 batch norms, 27 relus.
    check(
        "mobilenet",
        4_253_864,
        &[
            ("conv2d", 27),
            ("batch_norm", 27),
            ("relu", 27),
            ("global_avg_pool2d", 1),
        ],
        true,
    );
    let g = zoo::network("mobilenet", &ZooOptions::default()).unwrap();
    let depthwise = g
        .petgraph()
        .node_indices()
        .filter(|&n| g.node(n).name.ends_with("_depthwise_conv1"))
        .filter(|&n| {
            let a = g.args(n);
            g.node(n)
                .op
                .is_depthwise(&g.node(a[0]).ty.shape, &g.node(a[1]).ty.shape)
        })
        .count();
    assert_eq!(depthwise, 13);
}

#[test]
fn squeezenet_v1_1() {
    // conv1 64·3·3·3 + 64 = 1_792; fire(C_in, s, e): s·C_in + s + e·s + e + e·s·9 + e:
    //   fire1 (64, 16, 64) 11_408, fire2 (128, 16, 64) 12_432, fire3 (128, 32, 128) 45_344,
    //   fire4 (256, 32, 128) 49_440, fire5 (256, 48, 192) 104_880, fire6 (384, 48, 192)
    //   111_024, fire7 (384, 64, 256) 188_992, fire8 (512, 64, 256) 197_184
    // conv_final 1000·512 + 1000 = 513_000.  Total 1_235_496 = torchvision's squeezenet1_1.
    // 1 + 8·3 + 1 = 26 conv2d, each with a bias_add and a relu; 8 concatenations; three
    // max pools; no dense (the classifier is conv_final + global pooling).
    check(
        "squeezenet_v1.1",
        1_235_496,
        &[
            ("conv2d", 26),
            ("bias_add", 26),
            ("relu", 26),
            ("concatenate", 8),
            ("max_pool2d", 3),
            ("global_avg_pool2d", 1),
            ("batch_flatten", 1),
            ("softmax", 1),
        ],
        false,
    );
    // relay's max_pool2d defaults (floor mode, no padding): 112 -> 55 -> 27 -> 13
    let g = zoo::network("squeezenet_v1.1", &ZooOptions::default()).unwrap();
    let shapes: Vec<Vec<i64>> = ["pool1", "pool2", "pool3"]
        .iter()
        .map(|p| {
            let n = g
                .petgraph()
                .node_indices()
                .find(|&n| g.node(n).name == *p)
                .unwrap();
            g.node(n).ty.shape.clone()
        })
        .collect();
    assert_eq!(
        shapes,
        [[1, 64, 55, 55], [1, 128, 27, 27], [1, 256, 13, 13]]
    );
}

#[test]
fn inception_v3() {
    // 94 convolutions, each followed by a batch norm (4 parameters per channel) and a
    // relu. Keras' InceptionV3 (299, with top) has 23_851_784 parameters with the same
    // convolutions, 3 parameters per batch-norm channel (no γ) and the same 2048 → 1000
    // classifier; its batch norms have 17_216 channels (its 34_432 non-trainable
    // parameters are their means and variances). TVM's count: 23_851_784 + 17_216 =
    // 23_869_000.
    // Pools: max — stem 2, mixed_3 1, mixed_8 1, mixed_10's branch 1 = 5; average —
    // mixed, _1, _2, _4.._7, _9 (count_include_pad) and the final 8×8 = 9.
    // Concatenations: 3 A + 1 B + 4 C + 1 D + 2 E = 11.
    check(
        "inception_v3",
        23_869_000,
        &[
            ("conv2d", 94),
            ("batch_norm", 94),
            ("relu", 94),
            ("max_pool2d", 5),
            ("avg_pool2d", 9),
            ("concatenate", 11),
        ],
        true,
    );
}

#[test]
fn networks_lists_every_network_once() {
    assert_eq!(
        NETWORKS,
        [
            "resnet-18",
            "resnet-34",
            "resnet-50",
            "resnet-101",
            "resnet-152",
            "resnet3d-18",
            "resnet18_v1",
            "mobilenet",
            "squeezenet_v1.1",
            "inception_v3"
        ]
    );
}

fn zoo_error(name: &str, o: &ZooOptions) -> String {
    match zoo::network(name, o) {
        Err(GraphError::Zoo(m)) => m,
        Err(e) => panic!("{name}: expected a zoo error, got {e}"),
        Ok(_) => panic!("{name}: expected a zoo error"),
    }
}

#[test]
fn bad_names_and_options_are_zoo_errors() {
    let e = zoo_error("resnet-19", &ZooOptions::default());
    assert!(e.contains("unknown network `resnet-19`"), "{e}");
    for n in NETWORKS {
        assert!(e.contains(n), "{e}");
    }
    let e = zoo_error("mobilenet", &opts(Layout::Nchw, 0));
    assert!(e.contains("batch size must be positive"), "{e}");
    let e = zoo_error(
        "mobilenet",
        &ZooOptions {
            num_classes: 0,
            ..ZooOptions::default()
        },
    );
    assert!(e.contains("number of classes"), "{e}");
    let e = zoo_error("squeezenet_v1.1", &opts(Layout::Nhwc, 1));
    assert!(e.contains("NCHW only"), "{e}");
    let small = |size| ZooOptions {
        image_size: Some(size),
        ..ZooOptions::default()
    };
    let e = zoo_error("resnet-18", &small(-3));
    assert!(e.contains("image size must be positive"), "{e}");
    // 28 pixels or less: TVM's CIFAR ResNets, 6n+2 layers; 18 is not one
    let e = zoo_error("resnet-18", &small(28));
    assert!(e.contains("no 18-layer configuration"), "{e}");
    // too small for the strides and windows
    let e = zoo_error("inception_v3", &small(64));
    assert!(e.contains("cannot build it for 64x64 images"), "{e}");
}

#[test]
fn small_images_follow_tvms_cifar_paths() {
    let with_size = |size, layout| ZooOptions {
        image_size: Some(size),
        layout,
        num_classes: 10,
        ..ZooOptions::default()
    };
    // 29..32 pixels: the ImageNet stages behind a 3×3 conv0, no bn0/relu0/max pool:
    // resnet-18's 11_699_892 − (64·3·49 + 256) + 64·3·9 − (513_000 − 5_130) = 11_184_086
    let g = zoo::network("resnet-18", &with_size(32, Layout::Nchw)).unwrap();
    assert_eq!(g.num_params(), 11_184_086);
    assert!(!g.op_counts().contains_key("max_pool2d"));
    assert_eq!(g.node(g.outputs()[0]).ty.shape, [1, 10]);
    // 28 pixels or less: resnet-50 is TVM's CIFAR ResNet of 3 stages × 8 basic units
    // with 16, 32, 64 filters
    let g = zoo::network("resnet-50", &with_size(28, Layout::Nhwc)).unwrap();
    assert_eq!(g.op_counts()["conv2d"], 1 + 2 * 24 + 3);
    assert_eq!(g.node(g.outputs()[0]).ty.shape, [1, 10]);
}

/// A weight's values in logical (OIHW) order.
fn weight_oihw(g: &Graph, name: &str, nhwc: bool) -> Vec<f32> {
    let n = g
        .petgraph()
        .node_indices()
        .find(|&n| g.node(n).name == name)
        .unwrap_or_else(|| panic!("no constant {name}"));
    let v = g.constant_value(n).unwrap();
    let v = if nhwc {
        permute(v, &[3, 2, 0, 1]).unwrap()
    } else {
        (**v).clone()
    };
    v.as_slice::<f32>().unwrap().to_vec()
}

#[test]
fn weights_depend_on_the_seed_only() {
    let mk = |seed, layout| {
        zoo::network(
            "mobilenet",
            &ZooOptions {
                seed,
                layout,
                ..ZooOptions::default()
            },
        )
        .unwrap()
    };
    let (a, b, c) = (
        mk(7, Layout::Nchw),
        mk(7, Layout::Nhwc),
        mk(8, Layout::Nchw),
    );
    for w in [
        "conv_block_1_conv_weight",
        "separable_conv_block_3_weight",
        "separable_conv_block_3_conv2_weight",
    ] {
        let (wa, wb, wc) = (
            weight_oihw(&a, w, false),
            weight_oihw(&b, w, true),
            weight_oihw(&c, w, false),
        );
        assert_eq!(wa, wb, "{w}: NCHW and NHWC");
        assert_ne!(wa, wc, "{w}: seeds 7 and 8");
        // He-uniform: within ±sqrt(6 / fan_in), and spread over it
        let fan_in = match w {
            "conv_block_1_conv_weight" => 27.0,
            "separable_conv_block_3_weight" => 9.0,
            _ => 128.0,
        };
        let bound = (6.0f32 / fan_in).sqrt();
        let max = wa.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        assert!(
            max <= bound && max > 0.9 * bound,
            "{w}: max {max}, bound {bound}"
        );
    }
    let g = weight_oihw(&a, "separable_conv_block_3_bn1_gamma", false);
    assert!(g.iter().all(|v| (0.8..=1.2).contains(v)), "{g:?}");
    let var = weight_oihw(&a, "separable_conv_block_3_bn1_moving_var", false);
    assert!(var.iter().all(|v| (0.5..=1.5).contains(v)), "{var:?}");
    // the same seed twice: the same network
    let a2 = mk(7, Layout::Nchw);
    assert_eq!(a.to_string(), a2.to_string());
    assert_eq!(
        weight_oihw(&a, "fc_weight", false),
        weight_oihw(&a2, "fc_weight", false)
    );
}

#[test]
fn names_follow_tvm() {
    let g = zoo::network("resnet-50", &ZooOptions::default()).unwrap();
    let names: std::collections::HashSet<&str> = g
        .petgraph()
        .node_indices()
        .map(|n| g.node(n).name.as_str())
        .collect();
    for n in [
        "data",
        "bn_data",
        "bn_data_gamma",
        "conv0",
        "conv0_weight",
        "bn0_moving_mean",
        "stage1_unit1_bn1",
        "stage1_unit1_conv1",
        "stage1_unit1_sc",
        "stage1_unit1_sc_weight",
        "stage3_unit6_conv3_weight",
        "stage4_unit3_plus",
        "bn1",
        "relu1",
        "pool1",
        "fc1",
        "fc1_weight",
        "fc1_bias",
        "softmax",
    ] {
        assert!(names.contains(n), "resnet-50 has no node `{n}`");
    }
    let g = zoo::network("inception_v3", &ZooOptions::default()).unwrap();
    let find = |name: &str| {
        g.petgraph()
            .node_indices()
            .find(|&n| g.node(n).name == name)
            .unwrap_or_else(|| panic!("inception_v3 has no node `{name}`"))
    };
    assert_eq!(
        g.node(find("ch_concat_mixed_2_chconcat")).ty.shape,
        [1, 288, 35, 35]
    );
    assert_eq!(
        g.node(find("ch_concat_mixed_7_chconcat")).ty.shape,
        [1, 768, 17, 17]
    );
    assert_eq!(
        g.node(find("ch_concat_mixed_10_chconcat")).ty.shape,
        [1, 2048, 8, 8]
    );
    assert_eq!(
        g.node(find("mixed_9_tower_1_mixed_conv_1_conv1")).ty.shape,
        [1, 384, 8, 8]
    );
    let _ = find("fc2_bias");
    match &g.node(find("avg_pool_mixed_4_pool")).op {
        Op::Pool2d { kind, attrs } => {
            assert_eq!(*kind, PoolType::Avg);
            assert!(attrs.count_include_pad);
            assert_eq!(attrs.padding, [1, 1, 1, 1]);
        }
        op => panic!("{op:?}"),
    }
}

// ----- compiled networks: NCHW and NHWC agree -----

fn random_input(shape: &[usize], seed: u64) -> NDArray {
    NDArray::random_uniform(tessera_ir::DataType::float32(), shape, seed, -1.0, 1.0).unwrap()
}

/// Builds `name` at `size`×`size` in both layouts with the same seed, folds the batch
/// norms, compiles and runs both on the same image (batch 2), and checks that the
/// probabilities agree and sum to 1.
fn nchw_and_nhwc_agree(name: &str, size: i64) {
    let x = random_input(&[2, 3, size as usize, size as usize], 5);
    let mut outs = Vec::new();
    for layout in [Layout::Nchw, Layout::Nhwc] {
        let o = ZooOptions {
            batch: 2,
            layout,
            seed: 42,
            image_size: Some(size),
            ..ZooOptions::default()
        };
        let mut g = zoo::network(name, &o).unwrap();
        passes::optimize(&mut g, None).unwrap();
        assert!(!g.op_counts().contains_key("batch_norm"), "{name} {layout}");
        let mut m = build(&g, &Target::cpu()).unwrap();
        let input = match layout {
            Layout::Nchw => x.clone(),
            Layout::Nhwc => permute(&x, &[0, 2, 3, 1]).unwrap(),
        };
        m.set_input("data", &input).unwrap();
        m.run().unwrap();
        outs.push(m.get_output(0).unwrap());
    }
    let (a, b) = (&outs[0], &outs[1]);
    assert_eq!(a.shape(), &[2, 1000]);
    a.allclose(b, 1e-4, 1e-6).unwrap();
    let p = a.as_slice::<f32>().unwrap();
    for row in p.chunks(1000) {
        let s: f32 = row.iter().sum();
        assert!((s - 1.0).abs() < 1e-4, "{name}: a row sums to {s}");
        // activations stay O(1): no class takes all the probability
        let max = row.iter().fold(0.0f32, |m, v| m.max(*v));
        assert!(max < 0.5, "{name}: a class has probability {max}");
    }
    // the two images differ, so do their probabilities
    assert!(p[..1000]
        .iter()
        .zip(&p[1000..])
        .any(|(u, v)| (u - v).abs() > 1e-6));
}

#[test]
fn resnet_18_runs_alike_in_nchw_and_nhwc() {
    // 32×32: TVM's small-image stem (a 3×3 conv0, no max pool) before the four stages
    nchw_and_nhwc_agree("resnet-18", 32);
}

#[test]
fn mobilenet_runs_alike_in_nchw_and_nhwc() {
    nchw_and_nhwc_agree("mobilenet", 32);
}

// ----- 3-D operators through the executor -----

/// conv3d + batch norm + relu, a max pool3d, a strided 1×1×1 conv3d with a residual
/// average pool, global average pooling, flatten, softmax.
fn small_3d(layout: Layout3d) -> Graph {
    let mut g = Graph::new("small3d");
    let cl = layout == Layout3d::Ndhwc;
    let (shape, wshape1, wshape2): (Vec<i64>, Vec<usize>, Vec<usize>) = if cl {
        (
            vec![2, 4, 6, 6, 3],
            vec![3, 3, 3, 3, 8],
            vec![1, 1, 1, 8, 8],
        )
    } else {
        (
            vec![2, 3, 4, 6, 6],
            vec![8, 3, 3, 3, 3],
            vec![8, 8, 1, 1, 1],
        )
    };
    let x = g.input("data", TensorType::f32(&shape));
    let w1 = g.constant("w1", random_input(&wshape1, 1));
    let c1 = g
        .op(
            "conv1",
            Op::Conv3d {
                attrs: Conv3dAttrs::new((1, 1, 1), (1, 1, 1), (1, 1, 1)),
                layout,
            },
            &[x, w1],
        )
        .unwrap();
    let ax = layout.channel_axis();
    let bn: Vec<_> = (0..4)
        .map(|k| {
            let mut v = random_input(&[8], 10 + k);
            if k == 3 {
                for e in v.as_mut_slice::<f32>().unwrap() {
                    *e = 1.5 + *e * 0.5;
                }
            }
            g.constant(&format!("bn{k}"), v)
        })
        .collect();
    let b1 = g
        .op(
            "bn1",
            Op::BatchNorm {
                epsilon: 1e-5,
                axis: ax,
            },
            &[c1, bn[0], bn[1], bn[2], bn[3]],
        )
        .unwrap();
    let r1 = g.op("relu1", Op::Unary(Unary::Relu), &[b1]).unwrap();
    let p = Pool3dAttrs::new((2, 2, 2), (2, 2, 2), (0, 0, 0)).with_layout(layout.as_str());
    let p1 = g
        .op(
            "pool1",
            Op::Pool3d {
                kind: PoolType::Max,
                attrs: p,
            },
            &[r1],
        )
        .unwrap();
    let w2 = g.constant("w2", random_input(&wshape2, 2));
    let c2 = g
        .op(
            "conv2",
            Op::Conv3d {
                attrs: Conv3dAttrs::new((1, 1, 1), (0, 0, 0), (1, 1, 1)),
                layout,
            },
            &[p1, w2],
        )
        .unwrap();
    let pa = Pool3dAttrs::new((3, 3, 3), (1, 1, 1), (1, 1, 1))
        .with_layout(layout.as_str())
        .with_count_include_pad(true);
    let avg = g
        .op(
            "avg",
            Op::Pool3d {
                kind: PoolType::Avg,
                attrs: pa,
            },
            &[p1],
        )
        .unwrap();
    let sum = g
        .op("plus", Op::Binary(tessera_graph::Binary::Add), &[c2, avg])
        .unwrap();
    let gp = g
        .op(
            "gap",
            Op::GlobalPool3d {
                kind: PoolType::Avg,
                layout,
            },
            &[sum],
        )
        .unwrap();
    let f = g.op("flatten", Op::Flatten, &[gp]).unwrap();
    let s = g.op("softmax", Op::Softmax { axis: -1 }, &[f]).unwrap();
    g.mark_output(s);
    g
}

#[test]
fn conv3d_and_pool3d_run_like_the_reference() {
    for layout in [Layout3d::Ncdhw, Layout3d::Ndhwc] {
        let mut g = small_3d(layout);
        let shape: Vec<usize> = g
            .node(g.inputs()[0])
            .ty
            .shape
            .iter()
            .map(|&d| d as usize)
            .collect();
        let x = random_input(&shape, 3);
        let want = interpret(&g, &[("data", &x)]).unwrap().remove(0);
        assert_eq!(want.shape(), &[2, 8]);
        passes::optimize(&mut g, None).unwrap();
        let mut m = build(&g, &Target::cpu()).unwrap();
        m.set_input("data", &x).unwrap();
        m.run().unwrap();
        let got = m.get_output(0).unwrap();
        got.allclose(&want, 1e-4, 1e-6).unwrap();
    }
}
