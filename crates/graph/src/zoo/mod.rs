//! The model zoo: the networks of TVM's `tvm.relay.testing`, built op for op as its
//! Python definitions build them, float32, any batch size, NCHW or NHWC, with seeded
//! random weights.
//!
//! | name | TVM's definition | default input |
//! | --- | --- | --- |
//! | `resnet-18`, `-34`, `-50`, `-101`, `-152` | `resnet.py` (pre-activation ResNet v2) | 3×224×224 |
//! | `resnet3d-18` | `resnet_3d.py` | 3×16×112×112 |
//! | `resnet18_v1` | Gluon's `resnet18_v1` (post-activation ResNet v1; TVM's VTA tutorial's network) | 3×224×224 |
//! | `mobilenet` | `mobilenet.py` (v1, α = 1) | 3×224×224 |
//! | `squeezenet_v1.1` | `squeezenet.py`, version 1.1 (NCHW only) | 3×224×224 |
//! | `inception_v3` | `inception_v3.py` | 3×299×299 |
//!
//! The input is `data` (`[batch, 3, H, W]` / `[batch, H, W, 3]`; resnet3d `[batch, 3, 16,
//! H, W]` / `[batch, 16, H, W, 3]`), the one output the softmax probabilities `[batch,
//! num_classes]`. Convolution weights are OIHW for NCHW data and HWIO for NHWC data
//! (OIDHW / DHWIO in 3-D); a depthwise weight is a grouped convolution's: `[C, 1, KH, KW]`
//! / `[KH, KW, 1, C]`. Batch norms are [`Op::BatchNorm`] nodes, as in TVM (the
//! [`passes::optimize`](crate::passes::optimize) pipeline folds them). Operator nodes
//! are named after TVM's layers (`stage1_unit1_conv1`, `stage1_unit1_bn1`,
//! `stage1_unit1_relu1`…) and the weights after TVM's parameters
//! (`stage1_unit1_conv1_weight`, `bn0_gamma`, `bn0_moving_var`, `fc1_bias`…).
//!
//! Weights are a deterministic function of the seed, the parameter's name and the
//! element's index in the canonical (NCHW-side) layout — a splitmix64 stream — so a
//! network has the same weights in both layouts and the same seed gives the same
//! outputs. Convolutions and dense layers are He-uniform, `±sqrt(6 / fan_in)` (fan_in =
//! input channels per group × kernel size, so a depthwise kernel's is `KH·KW`); the last
//! convolution of each residual branch is further scaled by `1/sqrt(units)` (units =
//! the network's residual units, Fixup's idea) so that the identity shortcuts do not
//! double the activations' variance at every unit: activations stay O(1) through
//! resnet-152. Batch norms: γ in [0.8, 1.2] (1 where TVM disables the scale), β and the
//! moving mean in [-0.1, 0.1], the moving variance in [0.5, 1.5]; biases in
//! [-0.05, 0.05].
//!
//! Where TVM's definitions are inconsistent with their own `layout` argument, the zoo
//! follows the layout: TVM's mobilenet `conv_block` and every batch norm of
//! `resnet_3d.py` normalize axis 1 whatever the layout (in NHWC / NDHWC that is the
//! height / depth axis); here batch norms always normalize the channel axis.
//! `resnet_3d.py` has its `max_pool3d` commented out; so has this zoo.

use crate::error::GraphError;
use crate::ir::{Graph, Layout, Layout3d, Op, TensorType, Unary};
use petgraph::stable_graph::NodeIndex;
use tessera_ir::DataType;
use tessera_runtime::NDArray;
use tessera_te::ops::{Conv2dAttrs, Conv3dAttrs, Pool2dAttrs, PoolType};

mod resnet;

/// How to build a zoo network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZooOptions {
    /// The batch size (positive).
    pub batch: i64,
    /// The data layout: NCHW or NHWC (for `resnet3d-*`: NCDHW or NDHWC).
    pub layout: Layout,
    /// The seed of the random weights.
    pub seed: u64,
    /// The number of classes of the classifier (positive).
    pub num_classes: i64,
    /// The image height and width; `None`: the network's default (224, 299 for
    /// inception_v3, 112 for resnet3d).
    pub image_size: Option<i64>,
}

impl Default for ZooOptions {
    fn default() -> Self {
        ZooOptions {
            batch: 1,
            layout: Layout::Nchw,
            seed: 0,
            num_classes: 1000,
            image_size: None,
        }
    }
}

/// The networks of the zoo.
pub const NETWORKS: &[&str] = &[
    "resnet-18",
    "resnet-34",
    "resnet-50",
    "resnet-101",
    "resnet-152",
    "resnet3d-18",
    "resnet18_v1",
    "mobilenet",
    "squeezenet_v1.1",
    "inception_v3",
];

/// The default image size (height = width) of a zoo network.
pub fn default_image_size(name: &str) -> Option<i64> {
    match name {
        "inception_v3" => Some(299),
        "resnet3d-18" => Some(112),
        _ if NETWORKS.contains(&name) => Some(224),
        _ => None,
    }
}

fn zoo_err(msg: impl Into<String>) -> GraphError {
    GraphError::Zoo(msg.into())
}

/// Whether the network is defined in NCHW only (squeezenet, as in TVM): build it in NCHW
/// and convert it with `passes::optimize` for NHWC.
pub fn nchw_only(name: &str) -> bool {
    name.starts_with("squeezenet")
}

/// Builds the zoo network `name` (one of [`NETWORKS`]).
///
/// Errors ([`GraphError::Zoo`]): an unknown name (the message lists the known ones), a
/// non-positive batch size, class count or image size, NHWC for squeezenet (TVM's is
/// NCHW only), a ResNet depth TVM's definition has no configuration for at that image
/// size (28 pixels or less selects its CIFAR networks), or an image too small for the
/// network's strides and windows.
pub fn network(name: &str, opts: &ZooOptions) -> Result<Graph, GraphError> {
    let Some(default_size) = default_image_size(name) else {
        return Err(zoo_err(format!(
            "unknown network `{name}`; the zoo has {}",
            NETWORKS.join(", ")
        )));
    };
    if opts.batch <= 0 {
        return Err(zoo_err(format!(
            "{name}: the batch size must be positive, not {}",
            opts.batch
        )));
    }
    if opts.num_classes <= 0 {
        return Err(zoo_err(format!(
            "{name}: the number of classes must be positive, not {}",
            opts.num_classes
        )));
    }
    let size = opts.image_size.unwrap_or(default_size);
    if size <= 0 {
        return Err(zoo_err(format!(
            "{name}: the image size must be positive, not {size}"
        )));
    }
    if nchw_only(name) && opts.layout == Layout::Nhwc {
        return Err(zoo_err(format!(
            "{name} is NCHW only (TVM's squeezenet assumes NCHW); build it in NCHW and \
             convert the layout with passes::optimize"
        )));
    }
    let nd = if name.starts_with("resnet3d") { 3 } else { 2 };
    let mut net = Net::new(name, opts, nd);
    let built = match name {
        "mobilenet" => mobilenet(&mut net, size),
        "squeezenet_v1.1" => squeezenet_v1_1(&mut net, size),
        "inception_v3" => inception_v3(&mut net, size),
        "resnet18_v1" => resnet::resnet18_v1(&mut net, size),
        _ => {
            let layers: usize = name
                .rsplit('-')
                .next()
                .and_then(|d| d.parse().ok())
                .expect("a resnet name ends with its depth");
            resnet::resnet(&mut net, layers, size)
        }
    };
    let out = built.map_err(|e| match e {
        GraphError::Infer { .. } => zoo_err(format!(
            "{name}: cannot build it for {size}x{size} images: {e}"
        )),
        e => e,
    })?;
    net.g.mark_output(out);
    net.g.validate()?;
    Ok(net.g)
}

// ----- deterministic weights -----

const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// splitmix64's output function.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The stream key of a parameter: its name (FNV-1a) mixed with the seed.
fn param_key(seed: u64, name: &str) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for b in name.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    mix(h ^ mix(seed.wrapping_add(GAMMA)))
}

/// Element `i` of the splitmix64 stream `key`, uniform in [0, 1).
fn unit(key: u64, i: usize) -> f32 {
    let z = mix(key.wrapping_add((i as u64 + 1).wrapping_mul(GAMMA)));
    (z >> 40) as f32 / (1u64 << 24) as f32
}

/// Row-major strides.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// How a parameter's values are drawn.
#[derive(Clone, Copy, Debug)]
enum Init {
    Uniform(f32, f32),
    Ones,
}

// ----- the builder -----

/// A network under construction: the graph, the weights' seed and the layout.
struct Net {
    g: Graph,
    seed: u64,
    batch: i64,
    num_classes: i64,
    /// Spatial dimensions: 2 (images) or 3 (videos).
    nd: usize,
    channels_last: bool,
}

type R = Result<NodeIndex, GraphError>;

impl Net {
    fn new(name: &str, opts: &ZooOptions, nd: usize) -> Net {
        Net {
            g: Graph::new(name),
            seed: opts.seed,
            batch: opts.batch,
            num_classes: opts.num_classes,
            nd,
            channels_last: opts.layout == Layout::Nhwc,
        }
    }

    fn layout(&self) -> Layout {
        if self.channels_last {
            Layout::Nhwc
        } else {
            Layout::Nchw
        }
    }

    fn layout3d(&self) -> Layout3d {
        if self.channels_last {
            Layout3d::Ndhwc
        } else {
            Layout3d::Ncdhw
        }
    }

    fn caxis(&self) -> i64 {
        if self.channels_last {
            self.nd as i64 + 1
        } else {
            1
        }
    }

    fn channels(&self, x: NodeIndex) -> i64 {
        self.g.node(x).ty.shape[self.caxis() as usize]
    }

    /// The input `data`: 3 channels, `spatial` = (depth,) height, width.
    fn input(&mut self, spatial: &[i64]) -> NodeIndex {
        let mut shape = vec![self.batch];
        if !self.channels_last {
            shape.push(3);
        }
        shape.extend_from_slice(spatial);
        if self.channels_last {
            shape.push(3);
        }
        self.g.input("data", TensorType::f32(&shape))
    }

    /// A weight of canonical (`logical`) shape stored with its axes permuted by `perm`
    /// (stored axis `d` is logical axis `perm[d]`); element values depend on the seed,
    /// the name and the logical index only.
    fn param(&mut self, name: &str, logical: &[usize], perm: &[usize], init: Init) -> R {
        let pshape: Vec<usize> = perm.iter().map(|&a| logical[a]).collect();
        let mut arr = NDArray::zeros(DataType::float32(), &pshape)?;
        let key = param_key(self.seed, name);
        let ls = strides(logical);
        let step: Vec<usize> = perm.iter().map(|&a| ls[a]).collect();
        let data = arr.as_mut_slice::<f32>()?;
        let mut idx = vec![0usize; pshape.len()];
        let mut off = 0usize;
        for v in data.iter_mut() {
            *v = match init {
                Init::Uniform(lo, hi) => lo + (hi - lo) * unit(key, off),
                Init::Ones => 1.0,
            };
            for d in (0..idx.len()).rev() {
                idx[d] += 1;
                off += step[d];
                if idx[d] < pshape[d] {
                    break;
                }
                off -= step[d] * pshape[d];
                idx[d] = 0;
            }
        }
        Ok(self.g.constant(name, arr))
    }

    fn vector(&mut self, name: &str, n: i64, init: Init) -> R {
        self.param(name, &[n as usize], &[0], init)
    }

    fn op(&mut self, name: &str, op: Op, inputs: &[NodeIndex]) -> R {
        self.g.op(name, op, inputs)
    }

    /// A convolution without bias (TVM's `layers.conv2d` / `conv3d`), its weight
    /// `weight` (He-uniform times `gain`). `kernel`, `stride` and `pad` have one entry
    /// per spatial dimension (symmetric padding).
    #[allow(clippy::too_many_arguments)]
    fn conv_w(
        &mut self,
        name: &str,
        weight: &str,
        x: NodeIndex,
        channels: i64,
        kernel: &[i64],
        stride: &[i64],
        pad: &[i64],
        groups: i64,
        gain: f32,
    ) -> R {
        let cin = self.channels(x);
        let mut logical = vec![channels as usize, (cin / groups) as usize];
        logical.extend(kernel.iter().map(|&k| k as usize));
        let fan_in: usize = logical[1..].iter().product();
        let bound = gain * (6.0 / fan_in as f32).sqrt();
        // OI(D)HW -> (D)HWIO
        let perm: Vec<usize> = if self.channels_last {
            let mut p: Vec<usize> = (2..2 + self.nd).collect();
            p.extend([1, 0]);
            p
        } else {
            (0..2 + self.nd).collect()
        };
        let w = self.param(weight, &logical, &perm, Init::Uniform(-bound, bound))?;
        let op = if self.nd == 2 {
            Op::Conv2d {
                attrs: Conv2dAttrs::new((stride[0], stride[1]), (pad[0], pad[1]), (1, 1))
                    .with_groups(groups),
                layout: self.layout(),
            }
        } else {
            Op::Conv3d {
                attrs: Conv3dAttrs::new(
                    (stride[0], stride[1], stride[2]),
                    (pad[0], pad[1], pad[2]),
                    (1, 1, 1),
                )
                .with_groups(groups),
                layout: self.layout3d(),
            }
        };
        self.op(name, op, &[x, w])
    }

    /// [`conv_w`](Self::conv_w) with the weight `{name}_weight`, one group, gain 1.
    fn conv(
        &mut self,
        name: &str,
        x: NodeIndex,
        channels: i64,
        kernel: &[i64],
        stride: &[i64],
        pad: &[i64],
    ) -> R {
        let w = format!("{name}_weight");
        self.conv_w(name, &w, x, channels, kernel, stride, pad, 1, 1.0)
    }

    /// Inference batch norm along the channels, parameters `{name}_gamma`, `_beta`,
    /// `_moving_mean`, `_moving_var`; `scale: false` is TVM's `scale=False` (γ unused:
    /// here all ones).
    fn bn(&mut self, name: &str, x: NodeIndex, epsilon: f64, scale: bool) -> R {
        let c = self.channels(x);
        let gamma = if scale {
            Init::Uniform(0.8, 1.2)
        } else {
            Init::Ones
        };
        let g = self.vector(&format!("{name}_gamma"), c, gamma)?;
        let b = self.vector(&format!("{name}_beta"), c, Init::Uniform(-0.1, 0.1))?;
        let m = self.vector(&format!("{name}_moving_mean"), c, Init::Uniform(-0.1, 0.1))?;
        let v = self.vector(&format!("{name}_moving_var"), c, Init::Uniform(0.5, 1.5))?;
        let op = Op::BatchNorm {
            epsilon,
            axis: self.caxis(),
        };
        self.op(name, op, &[x, g, b, m, v])
    }

    fn relu(&mut self, name: &str, x: NodeIndex) -> R {
        self.op(name, Op::Unary(Unary::Relu), &[x])
    }

    /// A bias `bias` along the channels (`nn.bias_add` on a convolution).
    fn bias_add(&mut self, name: &str, x: NodeIndex, bias: &str) -> R {
        let c = self.channels(x);
        let b = self.vector(bias, c, Init::Uniform(-0.05, 0.05))?;
        let op = Op::BiasAdd { axis: self.caxis() };
        self.op(name, op, &[x, b])
    }

    /// A 2-D pooling (`count_include_pad` matters for averages only).
    #[allow(clippy::too_many_arguments)]
    fn pool(
        &mut self,
        name: &str,
        x: NodeIndex,
        kind: PoolType,
        k: i64,
        s: i64,
        p: i64,
        count_include_pad: bool,
    ) -> R {
        let attrs = Pool2dAttrs::new((k, k), (s, s), (p, p))
            .with_layout(self.layout().as_str())
            .with_count_include_pad(count_include_pad);
        self.op(name, Op::Pool2d { kind, attrs }, &[x])
    }

    fn global_avg_pool(&mut self, name: &str, x: NodeIndex) -> R {
        let op = if self.nd == 2 {
            Op::GlobalPool2d {
                kind: PoolType::Avg,
                layout: self.layout(),
            }
        } else {
            Op::GlobalPool3d {
                kind: PoolType::Avg,
                layout: self.layout3d(),
            }
        };
        self.op(name, op, &[x])
    }

    fn concat(&mut self, name: &str, xs: &[NodeIndex]) -> R {
        let op = Op::Concat { axis: self.caxis() };
        self.op(name, op, xs)
    }

    /// `batch_flatten`, `dense` (weight `weight`, He-uniform) and `bias_add` (bias
    /// `bias`) to the classes, then `softmax`.
    fn classifier(&mut self, x: NodeIndex, dense: &str, weight: &str, bias: &str) -> R {
        let flat = self.op("flatten", Op::Flatten, &[x])?;
        let k = self.g.node(flat).ty.shape[1];
        let bound = (6.0 / k as f32).sqrt();
        let n = self.num_classes as usize;
        let w = self.param(
            weight,
            &[n, k as usize],
            &[0, 1],
            Init::Uniform(-bound, bound),
        )?;
        let fc = self.op(dense, Op::Dense, &[flat, w])?;
        let b = self.vector(bias, self.num_classes, Init::Uniform(-0.05, 0.05))?;
        let fcb = self.op(
            &format!("{dense}_bias_add"),
            Op::BiasAdd { axis: -1 },
            &[fc, b],
        )?;
        self.op("softmax", Op::Softmax { axis: -1 }, &[fcb])
    }
}

// ----- MobileNet (mobilenet.py) -----

fn mobilenet(net: &mut Net, size: i64) -> R {
    let eps = 1e-5;
    let data = net.input(&[size, size]);
    let c = net.conv("conv_block_1_conv", data, 32, &[3, 3], &[2, 2], &[1, 1])?;
    let b = net.bn("conv_block_1_bn", c, eps, true)?;
    let mut body = net.relu("conv_block_1_relu", b)?;
    // (depthwise channels, pointwise channels, downsample)
    let blocks: [(i64, i64, bool); 13] = [
        (32, 64, false),
        (64, 128, true),
        (128, 128, false),
        (128, 256, true),
        (256, 256, false),
        (256, 512, true),
        (512, 512, false),
        (512, 512, false),
        (512, 512, false),
        (512, 512, false),
        (512, 512, false),
        (512, 1024, true),
        (1024, 1024, false),
    ];
    for (i, &(dw, pw, down)) in blocks.iter().enumerate() {
        let name = format!("separable_conv_block_{}", i + 1);
        let s = if down { 2 } else { 1 };
        let c1 = net.conv_w(
            &format!("{name}_depthwise_conv1"),
            &format!("{name}_weight"),
            body,
            dw,
            &[3, 3],
            &[s, s],
            &[1, 1],
            dw,
            1.0,
        )?;
        let b1 = net.bn(&format!("{name}_bn1"), c1, eps, true)?;
        let a1 = net.relu(&format!("{name}_relu1"), b1)?;
        let c2 = net.conv(&format!("{name}_conv2"), a1, pw, &[1, 1], &[1, 1], &[0, 0])?;
        let b2 = net.bn(&format!("{name}_bn2"), c2, eps, true)?;
        body = net.relu(&format!("{name}_relu2"), b2)?;
    }
    let pool = net.global_avg_pool("global_avg_pool", body)?;
    net.classifier(pool, "fc", "fc_weight", "fc_bias")
}

// ----- SqueezeNet 1.1 (squeezenet.py) -----

/// `_make_fire_conv`: convolution, bias, relu.
fn fire_conv(net: &mut Net, x: NodeIndex, channels: i64, k: i64, p: i64, prefix: &str) -> R {
    let conv = format!("{prefix}_conv");
    let c = net.conv(&conv, x, channels, &[k, k], &[1, 1], &[p, p])?;
    let b = net.bias_add(&format!("{conv}_bias_add"), c, &format!("{conv}_bias"))?;
    net.relu(&format!("{conv}_relu"), b)
}

/// `_make_fire`: squeeze 1×1, then 1×1 and 3×3 expansions concatenated.
fn fire(net: &mut Net, x: NodeIndex, s: i64, e1: i64, e3: i64, prefix: &str) -> R {
    let sq = fire_conv(net, x, s, 1, 0, &format!("{prefix}_input"))?;
    let left = fire_conv(net, sq, e1, 1, 0, &format!("{prefix}_left"))?;
    let right = fire_conv(net, sq, e3, 3, 1, &format!("{prefix}_right"))?;
    net.concat(&format!("{prefix}_concat"), &[left, right])
}

fn squeezenet_v1_1(net: &mut Net, size: i64) -> R {
    let data = net.input(&[size, size]);
    let c = net.conv("conv1", data, 64, &[3, 3], &[2, 2], &[1, 1])?;
    let b = net.bias_add("conv1_bias_add", c, "conv1_bias")?;
    let mut x = net.relu("conv1_relu", b)?;
    // relay's max_pool2d defaults: no padding, floor mode
    x = net.pool("pool1", x, PoolType::Max, 3, 2, 0, false)?;
    x = fire(net, x, 16, 64, 64, "fire1")?;
    x = fire(net, x, 16, 64, 64, "fire2")?;
    x = net.pool("pool2", x, PoolType::Max, 3, 2, 0, false)?;
    x = fire(net, x, 32, 128, 128, "fire3")?;
    x = fire(net, x, 32, 128, 128, "fire4")?;
    x = net.pool("pool3", x, PoolType::Max, 3, 2, 0, false)?;
    x = fire(net, x, 48, 192, 192, "fire5")?;
    x = fire(net, x, 48, 192, 192, "fire6")?;
    x = fire(net, x, 64, 256, 256, "fire7")?;
    x = fire(net, x, 64, 256, 256, "fire8")?;
    // dropout is the identity at inference
    let n = net.num_classes;
    let c = net.conv("conv_final", x, n, &[1, 1], &[1, 1], &[0, 0])?;
    let b = net.bias_add("conv_final_bias_add", c, "conv_final_bias")?;
    let r = net.relu("conv_final_relu", b)?;
    let p = net.global_avg_pool("global_avg_pool", r)?;
    let f = net.op("flatten", Op::Flatten, &[p])?;
    net.op("softmax", Op::Softmax { axis: -1 }, &[f])
}

// ----- Inception v3 (inception_v3.py) -----

/// TVM's `Conv`: convolution (`{name}{suffix}_conv1`), batch norm, relu.
#[allow(clippy::too_many_arguments)]
fn iconv(
    net: &mut Net,
    x: NodeIndex,
    num_filter: i64,
    kernel: (i64, i64),
    stride: (i64, i64),
    pad: (i64, i64),
    name: &str,
    suffix: &str,
) -> R {
    let c = net.conv(
        &format!("{name}{suffix}_conv1"),
        x,
        num_filter,
        &[kernel.0, kernel.1],
        &[stride.0, stride.1],
        &[pad.0, pad.1],
    )?;
    let b = net.bn(&format!("{name}{suffix}_bn"), c, 2e-5, true)?;
    net.relu(&format!("{name}{suffix}_relu"), b)
}

/// A 1×1 `Conv`.
fn iconv1(net: &mut Net, x: NodeIndex, n: i64, name: &str, suffix: &str) -> R {
    iconv(net, x, n, (1, 1), (1, 1), (0, 0), name, suffix)
}

/// TVM's `Pooling`: max, or average counting the padding.
fn ipool(net: &mut Net, x: NodeIndex, k: i64, s: i64, p: i64, kind: PoolType, name: &str) -> R {
    net.pool(name, x, kind, k, s, p, true)
}

/// The last branch of an inception block (a 3×3 stride-1 pool of `data`, then a 1×1
/// projection to `proj` channels) and the channel concatenation of all branches.
fn pool_proj_concat(
    net: &mut Net,
    data: NodeIndex,
    pool: &str,
    proj: i64,
    name: &str,
    towers: &[NodeIndex],
) -> R {
    let pname = format!("{pool}_pool_{name}_pool");
    let p = ipool(net, data, 3, 1, 1, pool_kind(pool), &pname)?;
    let cproj = iconv1(net, p, proj, &format!("{name}_tower_2"), "_conv")?;
    let mut all = towers.to_vec();
    all.push(cproj);
    net.concat(&format!("ch_concat_{name}_chconcat"), &all)
}

fn pool_kind(pool: &str) -> PoolType {
    if pool == "max" {
        PoolType::Max
    } else {
        PoolType::Avg
    }
}

#[allow(clippy::too_many_arguments)]
fn inception_a(
    net: &mut Net,
    data: NodeIndex,
    num_1x1: i64,
    num_3x3_red: i64,
    num_3x3_1: i64,
    num_3x3_2: i64,
    num_5x5_red: i64,
    num_5x5: i64,
    pool: &str,
    proj: i64,
    name: &str,
) -> R {
    let t1 = iconv1(net, data, num_1x1, &format!("{name}_conv"), "")?;
    let tower = format!("{name}_tower");
    let t5 = iconv1(net, data, num_5x5_red, &tower, "_conv")?;
    let t5 = iconv(net, t5, num_5x5, (5, 5), (1, 1), (2, 2), &tower, "_conv_1")?;
    let tower1 = format!("{name}_tower_1");
    let t3 = iconv1(net, data, num_3x3_red, &tower1, "_conv")?;
    let t3 = iconv(
        net,
        t3,
        num_3x3_1,
        (3, 3),
        (1, 1),
        (1, 1),
        &tower1,
        "_conv_1",
    )?;
    let t3 = iconv(
        net,
        t3,
        num_3x3_2,
        (3, 3),
        (1, 1),
        (1, 1),
        &tower1,
        "_conv_2",
    )?;
    pool_proj_concat(net, data, pool, proj, name, &[t1, t5, t3])
}

#[allow(clippy::too_many_arguments)]
fn inception_b(
    net: &mut Net,
    data: NodeIndex,
    num_3x3: i64,
    num_d3x3_red: i64,
    num_d3x3_1: i64,
    num_d3x3_2: i64,
    name: &str,
) -> R {
    let t3 = iconv(
        net,
        data,
        num_3x3,
        (3, 3),
        (2, 2),
        (0, 0),
        &format!("{name}_conv"),
        "",
    )?;
    let tower = format!("{name}_tower");
    let td = iconv1(net, data, num_d3x3_red, &tower, "_conv")?;
    let td = iconv(
        net,
        td,
        num_d3x3_1,
        (3, 3),
        (1, 1),
        (1, 1),
        &tower,
        "_conv_1",
    )?;
    let td = iconv(
        net,
        td,
        num_d3x3_2,
        (3, 3),
        (2, 2),
        (0, 0),
        &tower,
        "_conv_2",
    )?;
    let pname = format!("max_pool_{name}_pool");
    let p = ipool(net, data, 3, 2, 0, PoolType::Max, &pname)?;
    net.concat(&format!("ch_concat_{name}_chconcat"), &[t3, td, p])
}

#[allow(clippy::too_many_arguments)]
fn inception_c(
    net: &mut Net,
    data: NodeIndex,
    num_1x1: i64,
    num_d7_red: i64,
    num_d7_1: i64,
    num_d7_2: i64,
    num_q7: [i64; 5],
    pool: &str,
    proj: i64,
    name: &str,
) -> R {
    let t1 = iconv1(net, data, num_1x1, &format!("{name}_conv"), "")?;
    let tower = format!("{name}_tower");
    let d7 = iconv1(net, data, num_d7_red, &tower, "_conv")?;
    let d7 = iconv(net, d7, num_d7_1, (1, 7), (1, 1), (0, 3), &tower, "_conv_1")?;
    let d7 = iconv(net, d7, num_d7_2, (7, 1), (1, 1), (3, 0), &tower, "_conv_2")?;
    let tower1 = format!("{name}_tower_1");
    let q7 = iconv1(net, data, num_q7[0], &tower1, "_conv")?;
    let q7 = iconv(
        net,
        q7,
        num_q7[1],
        (7, 1),
        (1, 1),
        (3, 0),
        &tower1,
        "_conv_1",
    )?;
    let q7 = iconv(
        net,
        q7,
        num_q7[2],
        (1, 7),
        (1, 1),
        (0, 3),
        &tower1,
        "_conv_2",
    )?;
    let q7 = iconv(
        net,
        q7,
        num_q7[3],
        (7, 1),
        (1, 1),
        (3, 0),
        &tower1,
        "_conv_3",
    )?;
    let q7 = iconv(
        net,
        q7,
        num_q7[4],
        (1, 7),
        (1, 1),
        (0, 3),
        &tower1,
        "_conv_4",
    )?;
    pool_proj_concat(net, data, pool, proj, name, &[t1, d7, q7])
}

#[allow(clippy::too_many_arguments)]
fn inception_d(
    net: &mut Net,
    data: NodeIndex,
    num_3x3_red: i64,
    num_3x3: i64,
    num_d7_3x3_red: i64,
    num_d7_1: i64,
    num_d7_2: i64,
    num_d7_3x3: i64,
    pool: &str,
    name: &str,
) -> R {
    let tower = format!("{name}_tower");
    let t3 = iconv1(net, data, num_3x3_red, &tower, "_conv")?;
    let t3 = iconv(net, t3, num_3x3, (3, 3), (2, 2), (0, 0), &tower, "_conv_1")?;
    let tower1 = format!("{name}_tower_1");
    let d7 = iconv1(net, data, num_d7_3x3_red, &tower1, "_conv")?;
    let d7 = iconv(
        net,
        d7,
        num_d7_1,
        (1, 7),
        (1, 1),
        (0, 3),
        &tower1,
        "_conv_1",
    )?;
    let d7 = iconv(
        net,
        d7,
        num_d7_2,
        (7, 1),
        (1, 1),
        (3, 0),
        &tower1,
        "_conv_2",
    )?;
    let d7 = iconv(
        net,
        d7,
        num_d7_3x3,
        (3, 3),
        (2, 2),
        (0, 0),
        &tower1,
        "_conv_3",
    )?;
    let pname = format!("{pool}_pool_{name}_pool");
    let p = ipool(net, data, 3, 2, 0, pool_kind(pool), &pname)?;
    net.concat(&format!("ch_concat_{name}_chconcat"), &[t3, d7, p])
}

#[allow(clippy::too_many_arguments)]
fn inception_e(
    net: &mut Net,
    data: NodeIndex,
    num_1x1: i64,
    num_d3_red: i64,
    num_d3_1: i64,
    num_d3_2: i64,
    num_3x3_d3: [i64; 4],
    pool: &str,
    proj: i64,
    name: &str,
) -> R {
    let t1 = iconv1(net, data, num_1x1, &format!("{name}_conv"), "")?;
    let tower = format!("{name}_tower");
    let d3 = iconv1(net, data, num_d3_red, &tower, "_conv")?;
    let d3a = iconv(
        net,
        d3,
        num_d3_1,
        (1, 3),
        (1, 1),
        (0, 1),
        &tower,
        "_mixed_conv",
    )?;
    let d3b = iconv(
        net,
        d3,
        num_d3_2,
        (3, 1),
        (1, 1),
        (1, 0),
        &tower,
        "_mixed_conv_1",
    )?;
    let tower1 = format!("{name}_tower_1");
    let t = iconv1(net, data, num_3x3_d3[0], &tower1, "_conv")?;
    let t = iconv(
        net,
        t,
        num_3x3_d3[1],
        (3, 3),
        (1, 1),
        (1, 1),
        &tower1,
        "_conv_1",
    )?;
    let ta = iconv(
        net,
        t,
        num_3x3_d3[2],
        (1, 3),
        (1, 1),
        (0, 1),
        &tower1,
        "_mixed_conv",
    )?;
    let tb = iconv(
        net,
        t,
        num_3x3_d3[3],
        (3, 1),
        (1, 1),
        (1, 0),
        &tower1,
        "_mixed_conv_1",
    )?;
    pool_proj_concat(net, data, pool, proj, name, &[t1, d3a, d3b, ta, tb])
}

fn inception_v3(net: &mut Net, size: i64) -> R {
    let data = net.input(&[size, size]);
    // stage 1
    let x = iconv(net, data, 32, (3, 3), (2, 2), (0, 0), "conv", "")?;
    let x = iconv(net, x, 32, (3, 3), (1, 1), (0, 0), "conv_1", "")?;
    let x = iconv(net, x, 64, (3, 3), (1, 1), (1, 1), "conv_2", "")?;
    let x = ipool(net, x, 3, 2, 0, PoolType::Max, "pool")?;
    // stage 2
    let x = iconv1(net, x, 80, "conv_3", "")?;
    let x = iconv(net, x, 192, (3, 3), (1, 1), (0, 0), "conv_4", "")?;
    let x = ipool(net, x, 3, 2, 0, PoolType::Max, "pool1")?;
    // stage 3
    let x = inception_a(net, x, 64, 64, 96, 96, 48, 64, "avg", 32, "mixed")?;
    let x = inception_a(net, x, 64, 64, 96, 96, 48, 64, "avg", 64, "mixed_1")?;
    let x = inception_a(net, x, 64, 64, 96, 96, 48, 64, "avg", 64, "mixed_2")?;
    let x = inception_b(net, x, 384, 64, 96, 96, "mixed_3")?;
    // stage 4
    let q = |a, b| [a, b, b, b, 192];
    let x = inception_c(
        net,
        x,
        192,
        128,
        128,
        192,
        q(128, 128),
        "avg",
        192,
        "mixed_4",
    )?;
    let x = inception_c(
        net,
        x,
        192,
        160,
        160,
        192,
        q(160, 160),
        "avg",
        192,
        "mixed_5",
    )?;
    let x = inception_c(
        net,
        x,
        192,
        160,
        160,
        192,
        q(160, 160),
        "avg",
        192,
        "mixed_6",
    )?;
    let x = inception_c(
        net,
        x,
        192,
        192,
        192,
        192,
        q(192, 192),
        "avg",
        192,
        "mixed_7",
    )?;
    let x = inception_d(net, x, 192, 320, 192, 192, 192, 192, "max", "mixed_8")?;
    // stage 5
    let e = [448, 384, 384, 384];
    let x = inception_e(net, x, 320, 384, 384, 384, e, "avg", 192, "mixed_9")?;
    let x = inception_e(net, x, 320, 384, 384, 384, e, "max", 192, "mixed_10")?;
    // an 8×8 average pooling (the global pooling at 299×299), then the classifier
    let pool = ipool(net, x, 8, 1, 0, PoolType::Avg, "global_pool")?;
    net.classifier(pool, "fc1", "fc1_weight", "fc2_bias")
}
