//! The int8 dot products in the CPU's C (`cfamily::vdot`), built by the C compiler for
//! each instruction set they have a form for and run where the host can: the generic
//! form (`-march=x86-64`), the AVX2 forms (`x86-64-v3`: the exact `vpmaddwd` one, and
//! `vpmaddubsw` for 7-bit weights), the host's own (`native`, VNNI where it has it) —
//! each exactly the integer product of the bytes, and the saturating form exactly
//! `vpmaddubsw`'s int16 pair sums on every one of them. The VNNI forms are built for
//! `cascadelake` (AVX-512 VNNI) and `alderlake` (AVX-VNNI) and must hold `vpdpbusd`
//! (the saturating form must not); the first runs on a host that has AVX-512 VNNI.

mod common;

use common::{build, bytes_of, values_of};
use tessera_backends::host_cpu_features;
use tessera_ir::DataType;
use tessera_te::ops::{self, Int8Sums};
use tessera_te::schedules::{default_schedule, CpuParams};
use tessera_te::{lower, placeholder};

const M: usize = 6;
const N: usize = 32;
const K: usize = 37;

fn bytes(n: usize, seed: u64, lo: i64, hi: i64) -> Vec<i64> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            lo + (x >> 20) as i64 % (hi - lo + 1)
        })
        .collect()
}

/// The packed dense_u8i8 for `lanes`-wide vectors, its data, weight words and the
/// product `sums` defines (the reference interpreter's lane of its intrinsic).
struct Case {
    func: tessera_ir::PrimFunc,
    data: Vec<u8>,
    words: Vec<i32>,
    want: Vec<i32>,
}

fn case(lanes: i64, sums: Int8Sums) -> Case {
    let b = lanes as usize;
    let data = placeholder(&[M as i64, K as i64], DataType::uint(8), "data").unwrap();
    let kw = K.div_ceil(4);
    let weight = placeholder(
        &[(N / b) as i64, kw as i64, b as i64],
        DataType::int32(),
        "weight",
    )
    .unwrap();
    let out = ops::dense_u8i8(&data, &weight, sums).unwrap();
    let p = CpuParams {
        vector_lanes: lanes,
        num_cores: 1,
        vectorize: true,
        gpu_threads: 0,
    };
    let sch = default_schedule(&[out.clone()], p).unwrap();
    let func = lower(&sch, &[data, weight, out], "dot4").unwrap();
    let a: Vec<u8> = bytes(M * K, 5, 0, 255).iter().map(|&x| x as u8).collect();
    let (lo, hi) = match sums {
        Int8Sums::PairsFit => (-64, 64),
        _ => (-128, 127),
    };
    let w: Vec<i8> = bytes(N * K, 9, lo, hi).iter().map(|&x| x as i8).collect();
    let rows = ops::int8_words(&w, N, K);
    assert_eq!(ops::pairs_fit(&rows), sums == Int8Sums::PairsFit);
    let mut words = vec![0i32; N * kw];
    for j in 0..N {
        for q in 0..kw {
            words[((j / b) * kw + q) * b + j % b] = rows[j * kw + q];
        }
    }
    let a8: Vec<i8> = a.iter().map(|&x| x as i8).collect();
    let a_words = ops::int8_words(&a8, M, K);
    let want: Vec<i32> = (0..M * N)
        .map(|e| {
            let (i, j) = (e / N, e % N);
            (0..kw)
                .map(|q| {
                    let (x, y) = (a_words[i * kw + q], rows[j * kw + q]);
                    tessera_ir::interp::dot4(sums.intrinsic(), x.into(), y.into()) as i32
                })
                .sum()
        })
        .collect();
    let exact: Vec<i32> = (0..M * N)
        .map(|e| {
            let (i, j) = (e / N, e % N);
            (0..K)
                .map(|q| a[i * K + q] as i32 * w[j * K + q] as i32)
                .sum()
        })
        .collect();
    // the saturating form's case saturates somewhere; the others are the exact product
    assert_eq!(want == exact, sums != Int8Sums::Saturating);
    Case {
        func,
        data: a,
        words,
        want,
    }
}

/// Builds `c` for `-march=mcpu`; runs it unless `run` is false; returns the object's
/// disassembly (empty where objdump is missing).
fn build_and_run(c: &Case, mcpu: &str, run: bool) -> String {
    let built = build(&c.func, mcpu, &[]);
    if run {
        let mut args = vec![
            c.data.clone(),
            bytes_of(&c.words, i32::to_ne_bytes),
            vec![0u8; 4 * M * N],
        ];
        built.run(&mut args);
        assert_eq!(
            values_of(&args[2], i32::from_ne_bytes),
            c.want,
            "-march={mcpu}"
        );
    }
    built.disassembly()
}

#[test]
fn every_form_of_the_int8_dot_product_computes_its_definition() {
    let host = host_cpu_features();
    let avx2 = host.contains(&"avx2");
    for sums in [Int8Sums::Exact, Int8Sums::PairsFit, Int8Sums::Saturating] {
        let c8 = case(8, sums);
        build_and_run(&c8, "x86-64", true);
        let asm = build_and_run(&c8, "x86-64-v3", avx2);
        let pairs16 = sums != Int8Sums::Exact;
        if !asm.is_empty() {
            let want = if pairs16 { "vpmaddubsw" } else { "vpmaddwd" };
            assert!(asm.contains(want), "x86-64-v3, {sums:?}: no {want}");
            assert!(!pairs16 || asm.contains("vpmaddwd"));
        }
        build_and_run(&c8, "native", true);
        // AVX-512 VNNI (Cascade Lake: the fewest other extensions with it, so any VNNI
        // host runs it), and AVX-VNNI without AVX-512 (Alder Lake), built only
        let vnni = host.contains(&"avx512vnni");
        for (c, mcpu, run) in [
            (&c8, "cascadelake", vnni),
            (&case(16, sums), "cascadelake", vnni),
            (&c8, "alderlake", false),
        ] {
            let asm = build_and_run(c, mcpu, run);
            if sums == Int8Sums::Saturating {
                // VNNI's sum is exact: the saturating form keeps vpmaddubsw there
                assert!(
                    !asm.contains("vpdpbusd"),
                    "{mcpu}: vpdpbusd saturates nothing"
                );
                assert!(asm.is_empty() || asm.contains("vpmaddubsw"), "{mcpu}");
            } else {
                assert!(
                    asm.is_empty() || asm.contains("vpdpbusd"),
                    "{mcpu}: no vpdpbusd"
                );
            }
        }
    }
}

/// The int8 products read their data's words in place (`cfamily::words`): a dense layer
/// on rows of 32 bytes (its words inlined into the product, one 32-bit load each) and a
/// 3×3 convolution on 16 channels padded by one (its padding copy loads vectors of
/// words), on uint8 and int8 data, built for the host and for plain x86-64: bit for bit
/// the reference interpreter's results.
#[test]
fn int8_products_read_their_data_words_in_place() {
    use tessera_ir::interp::{self, HostBuffer};
    let host = host_cpu_features();
    let mcpus: &[&str] = if host.contains(&"avx2") {
        &["native", "x86-64"]
    } else {
        &["x86-64"]
    };
    for signed in [false, true] {
        let dt = if signed {
            DataType::int(8)
        } else {
            DataType::uint(8)
        };
        // one core: a parallel loop's OpenMP threads would outlive the library unloaded
        let p = CpuParams {
            vector_lanes: 8,
            num_cores: 1,
            vectorize: true,
            gpu_threads: 0,
        };
        // (data shape, weight shape in words, the product, the helper its source calls)
        let dense = {
            let data = placeholder(&[6, 32], dt, "data").unwrap();
            let weight = placeholder(&[2, 8, 8], DataType::int32(), "weight").unwrap();
            let out = ops::dense_u8i8(&data, &weight, Int8Sums::Saturating).unwrap();
            (vec![6, 32], vec![2, 8, 8], data, weight, out, "tsr_word(")
        };
        let conv = {
            let attrs = ops::Conv2dAttrs::new((1, 1), (1, 1), (1, 1));
            let data = placeholder(&[1, 16, 16, 16], dt, "data").unwrap();
            let weight = placeholder(&[16, 3, 3, 4], DataType::int32(), "weight").unwrap();
            let out = ops::conv2d_nhwc_u8i8(&data, &weight, &attrs, 7, Int8Sums::Exact).unwrap();
            (
                vec![1, 16, 16, 16],
                vec![16, 3, 3, 4],
                data,
                weight,
                out,
                "tsr_words_v_uint32x",
            )
        };
        for (dshape, wshape, data, weight, out, helper) in [dense, conv] {
            let sch = default_schedule(&[out.clone()], p).unwrap();
            let func = lower(&sch, &[data, weight, out.clone()], "words").unwrap();
            let n = |s: &[usize]| s.iter().product::<usize>();
            let x: Vec<u8> = bytes(n(&dshape), 17, 0, 255)
                .iter()
                .map(|&v| v as u8)
                .collect();
            let w: Vec<i32> = bytes(n(&wshape), 3, i32::MIN as i64, i32::MAX as i64)
                .iter()
                .map(|&v| v as i32)
                .collect();
            let oshape: Vec<usize> = out.shape().iter().map(|&d| d as usize).collect();
            let mut bufs = vec![
                HostBuffer::from_f64(
                    dt,
                    &dshape,
                    &x.iter()
                        .map(|&b| if signed { b as i8 as f64 } else { b as f64 })
                        .collect::<Vec<_>>(),
                ),
                HostBuffer::from_f64(
                    DataType::int32(),
                    &wshape,
                    &w.iter().map(|&v| v as f64).collect::<Vec<_>>(),
                ),
                HostBuffer::zeros(DataType::int32(), &oshape),
            ];
            interp::run(&func, &mut bufs).unwrap();
            let want: Vec<i32> = bufs[2].to_f64().iter().map(|&v| v as i32).collect();
            for mcpu in mcpus {
                let mut args = vec![
                    x.clone(),
                    bytes_of(&w, i32::to_ne_bytes),
                    vec![0u8; 4 * n(&oshape)],
                ];
                build(&func, mcpu, &[helper]).run(&mut args);
                let got = values_of(&args[2], i32::from_ne_bytes);
                assert_eq!(got, want, "{dshape:?}, {dt}, -march={mcpu}");
            }
        }
    }
}
