//! The GPU default schedules: blocks sized so a small output still spreads over every
//! SM, and a convolution's or pooling's padding read through guarded loads rather than
//! copied by a kernel of its own.

use tessera_ir::DataType;
use tessera_te::ops::{conv2d_nhwc, relu};
use tessera_te::schedules::{default_schedule_inlined, gpu_block_threads, CpuParams};
use tessera_te::{lower, placeholder, Attach};

/// An H100's parameters as the default schedules see them.
const H100: CpuParams = CpuParams {
    vector_lanes: 4,
    num_cores: 132,
    vectorize: true,
    gpu_threads: 1024,
};

#[test]
fn small_outputs_get_smaller_blocks_to_fill_the_sms() {
    // 7×7×512: 98 blocks of 256 would leave a quarter of 132 SMs idle
    assert_eq!(gpu_block_threads(7 * 7 * 512, 1024, 132), 64);
    // 56×56×64 fills them at 256
    assert_eq!(gpu_block_threads(56 * 56 * 64, 1024, 132), 256);
    // never below two warps, never above the device's limit or the output
    assert_eq!(gpu_block_threads(1000, 1024, 132), 64);
    assert_eq!(gpu_block_threads(100, 1024, 132), 100);
    assert_eq!(gpu_block_threads(1 << 20, 128, 132), 128);
    assert_eq!(gpu_block_threads(10, 32, 132), 10);
    // a device of few compute units keeps the largest blocks
    assert_eq!(gpu_block_threads(7 * 7 * 512, 256, 2), 256);
}

#[test]
fn a_convs_padding_is_read_in_place_on_a_gpu() {
    let f32 = DataType::float32();
    let data = placeholder(&[1, 7, 7, 64], f32, "data").unwrap();
    let kernel = placeholder(&[3, 3, 64, 64], f32, "kernel").unwrap();
    let conv = conv2d_nhwc(&data, &kernel, (1, 1), (1, 1), (1, 1)).unwrap();
    let out = relu(&conv).unwrap();
    let pad = conv.inputs()[0].clone();
    assert!(pad.tag().contains("pad"), "{}", pad.tag());

    let gpu = default_schedule_inlined(&[out.clone()], &[], H100).unwrap();
    assert!(matches!(gpu.stage(&pad).unwrap().attach, Attach::Inline));
    let text = lower(&gpu, &[data.clone(), kernel.clone(), out.clone()], "f")
        .unwrap()
        .to_string();
    assert!(!text.contains(&format!("{}[", pad.name())), "{text}");
    assert!(text.contains("threadIdx.x"), "{text}");

    // the CPU keeps a dense conv's padded copy, which every channel tile reads
    let cpu = CpuParams {
        gpu_threads: 0,
        ..H100
    };
    let s = default_schedule_inlined(&[out.clone()], &[], cpu).unwrap();
    assert!(!matches!(s.stage(&pad).unwrap().attach, Attach::Inline));
}

#[test]
fn row_reductions_spread_each_row_over_a_warp() {
    use tessera_te::ops::{dense, softmax};
    let f32 = DataType::float32();
    // softmax over 1,000 classes: its maximum and sum
    let x = placeholder(&[1, 1000], f32, "x").unwrap();
    let sm = softmax(&x).unwrap();
    let s = default_schedule_inlined(&[sm.clone()], &[], H100).unwrap();
    let text = lower(&s, &[x, sm], "softmax").unwrap().to_string();
    assert!(text.matches("thread_allreduce").count() >= 2, "{text}");
    // a batch-1 dense: one block per output, the warp along the shared axis
    let data = placeholder(&[1, 512], f32, "data").unwrap();
    let weight = placeholder(&[1000, 512], f32, "weight").unwrap();
    let d = dense(&data, &weight, None).unwrap();
    let s = default_schedule_inlined(&[d.clone()], &[], H100).unwrap();
    let text = lower(&s, &[data, weight, d], "dense").unwrap().to_string();
    assert!(text.contains("thread_allreduce"), "{text}");
    // a short row keeps one thread per output
    let y = placeholder(&[64, 16], f32, "y").unwrap();
    let sm = softmax(&y).unwrap();
    let s = default_schedule_inlined(&[sm.clone()], &[], H100).unwrap();
    let text = lower(&s, &[y, sm], "short").unwrap().to_string();
    assert!(!text.contains("thread_allreduce"), "{text}");
}
