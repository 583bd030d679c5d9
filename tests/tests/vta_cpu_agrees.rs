//! The quantized CPU path and the VTA path give identical int8 results: VTA's packed
//! conv2d written as tensor expressions (`conv2d_packed` with int32 accumulation, then
//! the bias, rounding, right shift, clip and cast) and built by the CPU backend computes
//! the same bytes as the `conv2d_packed.vta` template's instruction stream on the
//! simulator, and as the interpreter.

use tessera_backends::{Backend, CpuBackend};
use tessera_ir::{interp, DataType};
use tessera_runtime::{Module, NDArray};
use tessera_target::Target;
use tessera_te::ops;
use tessera_te::{lower, placeholder, Schedule, Tensor};
use tessera_vta::conv2d::{generate, Conv2dPacked, Epilogue, Knobs};
use tessera_vta::{Dram, Simulator, VtaConfig};

const B: usize = 16;

/// The tensor expressions of `w`: the arguments (data, kernel, the bias if it is added,
/// output).
fn te_conv(w: &Conv2dPacked) -> Vec<Tensor> {
    let i = |v: usize| v as i64;
    let data = placeholder(
        &[i(w.n), i(w.ci), i(w.h), i(w.w), 1, 16],
        DataType::int(8),
        "data",
    )
    .unwrap();
    let kernel = placeholder(
        &[i(w.co), i(w.ci), i(w.kh), i(w.kw), 16, 16],
        DataType::int(8),
        "kernel",
    )
    .unwrap();
    let bias = placeholder(&[1, i(w.co), 1, 1, 1, 16], DataType::int(32), "bias").unwrap();
    let (stride, pad) = ((i(w.stride.0), i(w.stride.1)), (i(w.pad.0), i(w.pad.1)));
    let e = w.epilogue;
    let mut x = ops::conv2d_packed_int8(&data, &kernel, stride, pad).unwrap();
    if e.bias {
        x = ops::add(&x, &bias).unwrap();
    }
    if e.round && e.shift > 0 {
        x = ops::add_scalar(
            &x,
            tessera_ir::Expr::int_of(DataType::int(32), 1 << (e.shift - 1)),
        )
        .unwrap();
    }
    if e.shift > 0 {
        x = ops::right_shift(&x, e.shift as i64).unwrap();
    }
    x = ops::clip(&x, e.clip.0 as f64, e.clip.1 as f64).unwrap();
    let out = ops::cast(&x, DataType::int(8)).unwrap();
    if e.bias {
        vec![data, kernel, bias, out]
    } else {
        vec![data, kernel, out]
    }
}

/// SplitMix64 values.
fn seeded(n: usize, seed: u64) -> Vec<u64> {
    (0..n as u64)
        .map(|i| {
            let mut x = ((seed << 40) ^ i).wrapping_add(0x9e37_79b9_7f4a_7c15);
            x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            x ^ (x >> 31)
        })
        .collect()
}

fn check(w: &Conv2dPacked, k: &Knobs) {
    let data: Vec<i8> = seeded(w.n * w.ci * w.h * w.w * B, 101)
        .iter()
        .map(|v| *v as i8)
        .collect();
    let kernel: Vec<i8> = seeded(w.co * w.ci * w.kh * w.kw * B * B, 202)
        .iter()
        .map(|v| *v as i8)
        .collect();
    let bias: Vec<i32> = seeded(w.co * B, 303)
        .iter()
        .map(|v| (v % 20000) as i32 - 10000)
        .collect();
    let (oh, ow) = (w.out_h(), w.out_w());
    let out_len = w.n * w.co * oh * ow * B;

    // the CPU: the tensor expressions built by the CPU backend
    let args = te_conv(w);
    let out_t = args.last().unwrap().clone();
    let func = lower(
        &Schedule::create(&[out_t.clone()]).unwrap(),
        &args,
        "vta_conv",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let artifact = CpuBackend::new(Target::cpu())
        .build(&func, dir.path())
        .unwrap();
    let module = Module::load(&artifact).unwrap();
    let shape = |t: &Tensor| t.shape().iter().map(|d| *d as usize).collect::<Vec<_>>();
    let mut arrays = vec![
        NDArray::from_slice(&shape(&args[0]), &data).unwrap(),
        NDArray::from_slice(&shape(&args[1]), &kernel).unwrap(),
    ];
    if w.epilogue.bias {
        arrays.push(NDArray::from_slice(&shape(&args[2]), &bias).unwrap());
    }
    arrays.push(NDArray::zeros(DataType::int(8), &shape(&out_t)).unwrap());
    let last = arrays.len() - 1;
    let mut host: Vec<_> = arrays.iter().map(|a| a.to_host_buffer()).collect();
    {
        let mut refs: Vec<&mut NDArray> = arrays.iter_mut().collect();
        module.call(&mut refs).unwrap();
    }
    let cpu = arrays[last].as_slice::<i8>().unwrap().to_vec();

    // the interpreter on the same program
    interp::run(&func, &mut host).unwrap();
    let interp_out = NDArray::from_host_buffer(&host[last]).unwrap();
    assert_eq!(
        interp_out.as_slice::<i8>().unwrap(),
        &cpu[..],
        "interpreter vs CPU"
    );

    // VTA: the template's instruction stream on the simulator
    let cfg = VtaConfig::default();
    let program = generate(&cfg, w, k).unwrap();
    let mut dram = Dram::new(1 << 26);
    let mut put = |bytes: &[u8]| {
        let a = dram.alloc(bytes.len()).unwrap();
        dram.write(a, bytes).unwrap();
        a
    };
    let d = put(&data.iter().map(|v| *v as u8).collect::<Vec<_>>());
    let q = put(&kernel.iter().map(|v| *v as u8).collect::<Vec<_>>());
    let b = put(&bias
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect::<Vec<_>>());
    let o = put(&vec![0u8; out_len]);
    let mut sim = Simulator::new(cfg).unwrap();
    let args = if w.epilogue.bias {
        vec![d, q, b, o]
    } else {
        vec![d, q, o]
    };
    program.run(&mut sim, &mut dram, &args).unwrap();
    let vta: Vec<i8> = dram
        .read(o, out_len)
        .unwrap()
        .iter()
        .map(|v| *v as i8)
        .collect();
    assert_eq!(vta, cpu, "VTA vs CPU for {w:?} under {k}");
    assert!(
        cpu.iter().any(|v| *v != cpu[0]),
        "a trivial output: {:?} data {:?}",
        &cpu[..32],
        &data[..32]
    );
}

fn conv(ci: usize, hw: usize, co: usize, k: usize, s: usize, e: Epilogue) -> Conv2dPacked {
    Conv2dPacked {
        n: 1,
        ci,
        h: hw,
        w: hw,
        co,
        kh: k,
        kw: k,
        stride: (s, s),
        pad: (k / 2, k / 2),
        epilogue: e,
    }
}

const KNOBS: Knobs = Knobs {
    tile_b: 1,
    tile_h: 2,
    tile_w: 4,
    tile_ci: 1,
    tile_co: 1,
    oc_nthread: 2,
    h_nthread: 1,
};

#[test]
fn a_3x3_conv_with_bias_shift_and_relu() {
    let e = Epilogue {
        bias: true,
        shift: 8,
        round: false,
        clip: (0, 127),
    };
    check(&conv(2, 8, 2, 3, 1, e), &KNOBS);
}

#[test]
fn a_strided_3x3_conv_with_rounding() {
    let e = Epilogue {
        bias: true,
        shift: 7,
        round: true,
        clip: (-127, 127),
    };
    check(&conv(2, 8, 2, 3, 2, e), &Knobs { tile_w: 2, ..KNOBS });
}

#[test]
fn a_1x1_stride_2_conv_without_bias() {
    let e = Epilogue {
        bias: false,
        shift: 5,
        round: false,
        clip: (-128, 127),
    };
    check(
        &conv(3, 8, 4, 1, 2, e),
        &Knobs {
            tile_h: 4,
            tile_w: 2,
            tile_ci: 3,
            h_nthread: 1,
            oc_nthread: 2,
            tile_co: 2,
            tile_b: 1,
        },
    );
}
