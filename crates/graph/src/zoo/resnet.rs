//! ResNet: TVM's `resnet.py` and `resnet_3d.py` (pre-activation ResNet v2, the zoo's
//! `resnet-N`), and the post-activation ResNet v1 of Gluon's model zoo (`resnet18_v1`,
//! the network of TVM's VTA tutorial: its ten distinct convolutions after the stem are
//! the ten tasks the tutorial tunes).

use super::{zoo_err, Net, R};
use crate::ir::{Binary, Op};
use petgraph::stable_graph::NodeIndex;
use tessera_te::ops::PoolType;

/// Uniform spatial parameters: `[v; nd]`.
fn sp(net: &Net, v: i64) -> Vec<i64> {
    vec![v; net.nd]
}

/// TVM's `residual_unit`: pre-activation (bn → relu → conv), the shortcut a 1×1
/// convolution of the first activation when the dimensions change.
#[allow(clippy::too_many_arguments)]
fn residual_unit(
    net: &mut Net,
    data: NodeIndex,
    num_filter: i64,
    stride: i64,
    dim_match: bool,
    name: &str,
    bottle_neck: bool,
    gain: f32,
) -> R {
    let eps = 2e-5;
    let (s, one, zero) = (sp(net, stride), sp(net, 1), sp(net, 0));
    let bn1 = net.bn(&format!("{name}_bn1"), data, eps, true)?;
    let act1 = net.relu(&format!("{name}_relu1"), bn1)?;
    let body = if bottle_neck {
        let mid = (num_filter as f64 * 0.25) as i64;
        let conv1 = net.conv(&format!("{name}_conv1"), act1, mid, &one, &s, &zero)?;
        let bn2 = net.bn(&format!("{name}_bn2"), conv1, eps, true)?;
        let act2 = net.relu(&format!("{name}_relu2"), bn2)?;
        let k3 = sp(net, 3);
        let conv2 = net.conv(&format!("{name}_conv2"), act2, mid, &k3, &one, &one)?;
        let bn3 = net.bn(&format!("{name}_bn3"), conv2, eps, true)?;
        let act3 = net.relu(&format!("{name}_relu3"), bn3)?;
        let c3 = format!("{name}_conv3");
        let w = format!("{c3}_weight");
        net.conv_w(&c3, &w, act3, num_filter, &one, &one, &zero, 1, gain)?
    } else {
        let k3 = sp(net, 3);
        let conv1 = net.conv(&format!("{name}_conv1"), act1, num_filter, &k3, &s, &one)?;
        let bn2 = net.bn(&format!("{name}_bn2"), conv1, eps, true)?;
        let act2 = net.relu(&format!("{name}_relu2"), bn2)?;
        let c2 = format!("{name}_conv2");
        let w = format!("{c2}_weight");
        net.conv_w(&c2, &w, act2, num_filter, &k3, &one, &one, 1, gain)?
    };
    let shortcut = if dim_match {
        data
    } else {
        net.conv(&format!("{name}_sc"), act1, num_filter, &one, &s, &zero)?
    };
    net.op(
        &format!("{name}_plus"),
        Op::Binary(Binary::Add),
        &[body, shortcut],
    )
}

/// TVM's `get_net` + `resnet` of `resnet.py` (2-D) and `resnet_3d.py` (3-D, 16 frames).
pub(super) fn resnet(net: &mut Net, num_layers: usize, height: i64) -> R {
    let name = net.g.name.clone();
    let (units, filter_list, bottle_neck): (Vec<usize>, Vec<i64>, bool) = if height <= 28 {
        // TVM's CIFAR configurations: 3 stages of (n - 2) / 9 bottleneck units from 164
        // layers, else of (n - 2) / 6 basic units
        let (by9, by6) = ((num_layers - 2) / 9, (num_layers - 2) / 6);
        if by9 * 9 == num_layers - 2 && num_layers >= 164 {
            (vec![by9; 3], vec![16, 64, 128, 256], true)
        } else if by6 * 6 == num_layers - 2 && num_layers < 164 {
            (vec![by6; 3], vec![16, 16, 32, 64], false)
        } else {
            return Err(zoo_err(format!(
                "{name}: TVM's definition has no {num_layers}-layer configuration for images \
                 of 28 pixels or less (its CIFAR networks: 6n+2 layers, or 9n+2 from 164); \
                 use an image size above 28"
            )));
        }
    } else {
        let units = match num_layers {
            18 => vec![2, 2, 2, 2],
            34 | 50 => vec![3, 4, 6, 3],
            101 => vec![3, 4, 23, 3],
            152 => vec![3, 8, 36, 3],
            _ => {
                return Err(zoo_err(format!(
                    "{name}: no {num_layers}-layer configuration"
                )))
            }
        };
        if num_layers >= 50 {
            (units, vec![64, 256, 512, 1024, 2048], true)
        } else {
            (units, vec![64, 64, 128, 256, 512], false)
        }
    };
    let spatial = if net.nd == 3 {
        vec![16, height, height]
    } else {
        vec![height, height]
    };
    let data = net.input(&spatial);
    let eps = 2e-5;
    let data = net.bn("bn_data", data, eps, false)?;
    let mut body = if height <= 32 {
        let (k3, one) = (sp(net, 3), sp(net, 1));
        net.conv("conv0", data, filter_list[0], &k3, &one, &one)?
    } else {
        let (k, s, p) = if net.nd == 3 {
            (vec![3, 7, 7], vec![1, 2, 2], vec![1, 3, 3])
        } else {
            (vec![7, 7], vec![2, 2], vec![3, 3])
        };
        let c = net.conv("conv0", data, filter_list[0], &k, &s, &p)?;
        let b = net.bn("bn0", c, eps, true)?;
        let r = net.relu("relu0", b)?;
        if net.nd == 2 {
            net.pool("pool0", r, PoolType::Max, 3, 2, 1, false)?
        } else {
            // resnet_3d.py has its max_pool3d commented out
            r
        }
    };
    let gain = 1.0 / (units.iter().sum::<usize>() as f32).sqrt();
    for (i, &n) in units.iter().enumerate() {
        let stride = if i == 0 { 1 } else { 2 };
        let f = filter_list[i + 1];
        let unit_name = format!("stage{}_unit1", i + 1);
        body = residual_unit(net, body, f, stride, false, &unit_name, bottle_neck, gain)?;
        for j in 0..n - 1 {
            let unit_name = format!("stage{}_unit{}", i + 1, j + 2);
            body = residual_unit(net, body, f, 1, true, &unit_name, bottle_neck, gain)?;
        }
    }
    let bn1 = net.bn("bn1", body, eps, true)?;
    let relu1 = net.relu("relu1", bn1)?;
    let pool1 = net.global_avg_pool("pool1", relu1)?;
    net.classifier(pool1, "fc1", "fc1_weight", "fc1_bias")
}

/// Gluon's `BasicBlockV1`: conv 3×3 (stride) → bn → relu → conv 3×3 → bn, plus the
/// shortcut (a 1×1 convolution and a batch norm when the shape changes), then relu.
fn basic_block_v1(
    net: &mut Net,
    data: NodeIndex,
    channels: i64,
    stride: i64,
    downsample: bool,
    name: &str,
    gain: f32,
) -> R {
    let eps = 1e-5;
    let (k3, s, one, zero) = (sp(net, 3), sp(net, stride), sp(net, 1), sp(net, 0));
    let conv1 = net.conv(&format!("{name}_conv1"), data, channels, &k3, &s, &one)?;
    let bn1 = net.bn(&format!("{name}_bn1"), conv1, eps, true)?;
    let act1 = net.relu(&format!("{name}_relu1"), bn1)?;
    let c2 = format!("{name}_conv2");
    let conv2 = net.conv_w(
        &c2,
        &format!("{c2}_weight"),
        act1,
        channels,
        &k3,
        &one,
        &one,
        1,
        gain,
    )?;
    let body = net.bn(&format!("{name}_bn2"), conv2, eps, true)?;
    let shortcut = if downsample {
        let sc = net.conv(&format!("{name}_sc"), data, channels, &one, &s, &zero)?;
        net.bn(&format!("{name}_sc_bn"), sc, eps, true)?
    } else {
        data
    };
    let sum = net.op(
        &format!("{name}_plus"),
        Op::Binary(Binary::Add),
        &[body, shortcut],
    )?;
    net.relu(&format!("{name}_relu2"), sum)
}

/// Gluon's `resnet18_v1`: a 7×7/2 stem with batch norm, relu and a 3×3/2 max pool, four
/// stages of two basic blocks (64, 128, 256, 512 channels; stride 2 and a projection
/// shortcut at the first block of the last three), the global average pool and the
/// classifier.
pub(super) fn resnet18_v1(net: &mut Net, height: i64) -> R {
    if net.nd != 2 {
        return Err(zoo_err("resnet18_v1 is 2-D"));
    }
    let data = net.input(&[height, height]);
    let (k7, s2, p3) = (sp(net, 7), sp(net, 2), sp(net, 3));
    let c = net.conv("conv0", data, 64, &k7, &s2, &p3)?;
    let b = net.bn("bn0", c, 1e-5, true)?;
    let r = net.relu("relu0", b)?;
    let mut body = net.pool("pool0", r, PoolType::Max, 3, 2, 1, false)?;
    let gain = 1.0 / 8f32.sqrt();
    for (i, channels) in [64, 128, 256, 512].into_iter().enumerate() {
        let stride = if i == 0 { 1 } else { 2 };
        let name = format!("stage{}_unit1", i + 1);
        body = basic_block_v1(net, body, channels, stride, i > 0, &name, gain)?;
        let name = format!("stage{}_unit2", i + 1);
        body = basic_block_v1(net, body, channels, 1, false, &name, gain)?;
    }
    let pool = net.global_avg_pool("pool1", body)?;
    net.classifier(pool, "fc1", "fc1_weight", "fc1_bias")
}
