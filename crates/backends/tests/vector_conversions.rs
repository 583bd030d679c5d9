//! The conversions of quantized epilogues in the CPU's C, against Rust's and the
//! interpreter's, for the generic, AVX2 and AVX-512 instruction sets:
//! - rounding halves to even (`Intrinsic::RoundEven`): the vector form (`tsr_vrint`:
//!   `vroundps` with AVX, else the 2²³ trick) bit for bit with `round_ties_even` on
//!   halves, signed zeros, the edges of 2²² and 2²³, infinities and NaN;
//! - float32 ↔ int8 / uint8 / int16 / uint16 vectors of 8 and 16 lanes (through int32,
//!   narrowed by a byte shuffle, widened by one `vpmovzx`/`vpmovsx` with AVX2 for 8
//!   lanes and AVX-512 for 16, else a byte shuffle): what the interpreter computes,
//!   wrapping and sign extension included; built for each set whether or not the host
//!   runs it, run where it does.

mod common;

use common::build_run_f32;
use tessera_backends::host_cpu_features;
use tessera_ir::DataType;
use tessera_te::ops::{self, MathFn};
use tessera_te::schedules::{default_schedule, default_schedule_inlined, CpuParams};
use tessera_te::{lower, placeholder, Tensor};

fn values() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.5,
        -1.5,
        2.5,
        -2.5,
        0.49999997,
        -0.49999997,
        3.5,
        1e30,
        -1e30,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
    ];
    for e in [22, 23, 24] {
        let p = (1u32 << e) as f32;
        for d in [-1.5f32, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5] {
            v.push(p + d);
            v.push(-(p + d));
        }
    }
    let mut x = 0x2545_F491u32;
    while v.len() % 16 != 0 || v.len() < 128 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v.push((x as i32) as f32 / 65536.0);
    }
    v
}

#[test]
fn rounding_halves_to_even_is_exact_in_every_form() {
    let v = values();
    let n = v.len() as i64;
    let x = placeholder(&[n], DataType::float32(), "x").unwrap();
    let y = ops::math(&x, MathFn::RoundEven).unwrap();
    let p = CpuParams {
        vector_lanes: 8,
        num_cores: 1,
        vectorize: true,
        gpu_threads: 0,
    };
    let sch = default_schedule(&[y.clone()], p).unwrap();
    let func = lower(&sch, &[x, y], "round_even").unwrap();
    assert!(func.to_string().contains("tir.nearbyint"), "{func}");
    let avx2 = host_cpu_features().contains(&"avx2");
    for mcpu in ["x86-64", "x86-64-v3", "native"] {
        if mcpu == "x86-64-v3" && !avx2 {
            continue;
        }
        let out = build_run_f32(&func, mcpu, &v, v.len(), &["tsr_vrint_"]);
        for (a, b) in v.iter().zip(&out) {
            let want = a.round_ties_even();
            assert!(
                want.to_bits() == b.to_bits() || (want.is_nan() && b.is_nan()),
                "-march={mcpu}: rint({a:e}) = {b:e}, want {want:e}"
            );
        }
    }
}

#[test]
fn narrow_integer_vectors_convert_as_the_interpreter_does() {
    let mut v: Vec<f32> = vec![
        0.0, -0.0, 1.9, -1.9, 127.0, 128.0, -128.0, -129.0, 255.0, 256.0, 300.7, -300.7, 65535.0,
        70000.5, -40000.0,
    ];
    while !v.len().is_multiple_of(32) {
        let i = v.len() as f32;
        v.push((i * 37.3) % 700.0 - 350.0);
    }
    let n = v.len() as i64;
    let host = host_cpu_features();
    // (vector lanes, the instruction set whose one-instruction widening they take, and
    // whether the host runs it): AVX2's 8 lanes, AVX-512's 16
    let forms = [
        (8, "x86-64-v3", host.contains(&"avx2")),
        (16, "x86-64-v4", host.contains(&"avx512bw")),
    ];
    for (lanes, wide_isa, host_has_it) in forms {
        let p = CpuParams {
            vector_lanes: lanes,
            num_cores: 1,
            vectorize: true,
            gpu_threads: 0,
        };
        for dt in [
            DataType::int(8),
            DataType::uint(8),
            DataType::int(16),
            DataType::uint(16),
        ] {
            let x = placeholder(&[n], DataType::float32(), "x").unwrap();
            let q = ops::cast(&x, dt).unwrap();
            let y: Tensor = ops::cast(&q, DataType::float32()).unwrap();
            let sch = default_schedule_inlined(&[y.clone()], &[q], p).unwrap();
            let func = lower(&sch, &[x.clone(), y.clone()], "convert").unwrap();
            let mut bufs = vec![
                tessera_ir::interp::HostBuffer::from_f64(
                    DataType::float32(),
                    &[v.len()],
                    &v.iter().map(|&a| a as f64).collect::<Vec<_>>(),
                ),
                tessera_ir::interp::HostBuffer::zeros(DataType::float32(), &[v.len()]),
            ];
            tessera_ir::interp::run(&func, &mut bufs).unwrap();
            let want: Vec<f32> = bufs[1].to_f64().iter().map(|&a| a as f32).collect();
            let helpers = ["tsr_narrow_", "tsr_widen_"];
            // the widening is one extension instruction where the set has it, never a
            // byte permutation (GCC 12's form of the shuffle, 12× slower in a depthwise
            // convolution's taps on Zen 4)
            let asm = common::build(&func, wide_isa, &helpers).disassembly();
            if !asm.is_empty() {
                let ext = if dt.is_int() { "vpmovsx" } else { "vpmovzx" };
                assert!(asm.contains(ext), "{wide_isa} {dt}: no {ext}");
                assert!(!asm.contains("vpermt2b"), "{wide_isa} {dt}: vpermt2b");
            }
            for mcpu in ["x86-64", wide_isa, "native"] {
                if mcpu == wide_isa && !host_has_it {
                    continue;
                }
                let got = build_run_f32(&func, mcpu, &v, v.len(), &helpers);
                for ((a, g), w) in v.iter().zip(&got).zip(&want) {
                    assert_eq!(
                        g.to_bits(),
                        w.to_bits(),
                        "-march={mcpu}, {lanes} lanes, {dt}: {a} became {g}, want {w}"
                    );
                }
            }
        }
    }
}
