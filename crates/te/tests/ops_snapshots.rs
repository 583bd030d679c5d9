//! Compute DAG prints of the operator library, in TVM's format (snapshots, read and
//! accepted).

use tessera_ir::DataType;
use tessera_te::ops::{self, Conv2dAttrs};
use tessera_te::{placeholder, ComputeDag, Tensor};

const F32: DataType = DataType::float32();

fn dag(t: &Tensor) -> String {
    ComputeDag::new(&[t.clone()]).unwrap().to_string()
}

#[test]
fn dag_depthwise_conv2d_nhwc() {
    let d = placeholder(&[1, 112, 112, 32], F32, "placeholder").unwrap();
    let k = placeholder(&[3, 3, 32, 1], F32, "placeholder").unwrap();
    let out =
        ops::depthwise_conv2d_nhwc(&d, &k, &Conv2dAttrs::new((1, 1), (1, 1), (1, 1))).unwrap();
    insta::assert_snapshot!(dag(&out));
}

#[test]
fn dag_conv2d_winograd_nhwc() {
    let d = placeholder(&[1, 7, 7, 512], F32, "placeholder").unwrap();
    let k = placeholder(&[4, 4, 512, 512], F32, "placeholder").unwrap();
    let out = ops::conv2d_winograd_nhwc(&d, &k, [1, 1, 1, 1], 2).unwrap();
    insta::assert_snapshot!(dag(&out));
}

#[test]
fn dag_softmax() {
    let x = placeholder(&[1, 1000], F32, "placeholder").unwrap();
    insta::assert_snapshot!(dag(&ops::softmax(&x).unwrap()));
}

#[test]
fn dag_conv2d_packed_int8() {
    let d = placeholder(&[1, 4, 14, 14, 1, 16], DataType::int(8), "placeholder").unwrap();
    let k = placeholder(&[4, 4, 3, 3, 16, 16], DataType::int(8), "placeholder").unwrap();
    let out = ops::conv2d_packed_int8(&d, &k, (1, 1), (1, 1)).unwrap();
    insta::assert_snapshot!(dag(&out));
}

#[test]
fn dag_conv2d_nhwc_bias_relu_fused() {
    let d = placeholder(&[1, 56, 56, 64], F32, "placeholder").unwrap();
    let k = placeholder(&[3, 3, 64, 64], F32, "placeholder").unwrap();
    let b = placeholder(&[1, 1, 1, 64], F32, "placeholder").unwrap();
    let conv = ops::conv2d_nhwc(&d, &k, (1, 1), (1, 1), (1, 1)).unwrap();
    let out = ops::relu(&ops::add(&conv, &b).unwrap()).unwrap();
    insta::assert_snapshot!(dag(&out));
}
