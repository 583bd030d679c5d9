//! The packed conv2d template against a plain int8/int32 reference: every configuration
//! of its space on small shapes (3×3 and 1×1 kernels, strides 1 and 2, padding, bias,
//! rounding, clipping) computes the same bytes, and random shapes with random
//! configurations too; a configuration that overflows a buffer is an instantiation
//! error; the configuration-space sizes of TVM's tutorial tasks.

use proptest::prelude::*;
use tessera_vta::conv2d::{generate, space, Conv2dPacked, Epilogue, Knobs};
use tessera_vta::*;

mod common;
use common::{reference, tensors, Tensors, B};

fn as_bytes<T: Copy>(v: &[T], f: impl Fn(T) -> Vec<u8>) -> Vec<u8> {
    v.iter().flat_map(|x| f(*x)).collect()
}

/// Runs `w` under `k` on a fresh simulator; the output bytes and the counters.
fn simulate(w: &Conv2dPacked, k: &Knobs, t: &Tensors) -> Result<(Vec<i8>, Counters), VtaError> {
    let cfg = VtaConfig::default();
    let program = generate(&cfg, w, k)?;
    let mut dram = Dram::new(1 << 26);
    let mut put = |bytes: Vec<u8>| {
        let a = dram.alloc(bytes.len()).unwrap();
        dram.write(a, &bytes).unwrap();
        a
    };
    let d = put(as_bytes(&t.data, |x| vec![x as u8]));
    let q = put(as_bytes(&t.kernel, |x| vec![x as u8]));
    let b = put(as_bytes(&t.bias, |x| x.to_le_bytes().to_vec()));
    let out_len = w.n * w.co * w.out_h() * w.out_w() * B;
    let o = put(vec![0; out_len]);
    let mut sim = Simulator::new(cfg).unwrap();
    let args = if w.epilogue.bias {
        vec![d, q, b, o]
    } else {
        vec![d, q, o]
    };
    let c = program.run(&mut sim, &mut dram, &args)?;
    let out = dram
        .read(o, out_len)
        .unwrap()
        .iter()
        .map(|x| *x as i8)
        .collect();
    Ok((out, c))
}

fn conv(
    ci: usize,
    hw: (usize, usize),
    co: usize,
    k: usize,
    stride: usize,
    pad: usize,
    e: Epilogue,
) -> Conv2dPacked {
    Conv2dPacked {
        n: 1,
        ci,
        h: hw.0,
        w: hw.1,
        co,
        kh: k,
        kw: k,
        stride: (stride, stride),
        pad: (pad, pad),
        epilogue: e,
    }
}

const RELU: Epilogue = Epilogue {
    bias: true,
    shift: 8,
    round: false,
    clip: (0, 127),
};

#[test]
fn every_configuration_of_small_shapes_matches_the_reference() {
    let shapes = [
        conv(2, (6, 6), 4, 3, 1, 1, RELU),
        conv(
            2,
            (6, 4),
            2,
            3,
            2,
            1,
            Epilogue {
                round: true,
                shift: 6,
                ..RELU
            },
        ),
        conv(
            4,
            (4, 4),
            2,
            1,
            2,
            0,
            Epilogue {
                bias: false,
                shift: 4,
                round: false,
                clip: (-128, 127),
            },
        ),
    ];
    for w in &shapes {
        let t = tensors(w, 7);
        let want = reference(w, &t);
        assert!(
            want.iter().any(|v| *v != want[0]),
            "a constant output tests little"
        );
        let configs = space(w);
        let mut ran = 0;
        for k in &configs {
            match simulate(w, k, &t) {
                Ok((got, c)) => {
                    assert_eq!(got, want, "{w:?} under {k}");
                    let steps = (w.out_h() * w.out_w() * w.co * w.ci * w.kh * w.kw) as u64;
                    assert_eq!(c.gemm_counter, steps + reset_steps(w), "{k}");
                    ran += 1;
                }
                // small shapes fit the buffers: only thread counts that do not divide
                // the tiles are refused
                Err(VtaError::Instantiate { reason, .. }) => {
                    assert!(reason.contains("nthread"), "{w:?} under {k}: {reason}");
                    assert!(k.oc_nthread * k.h_nthread > 1, "{k}");
                }
                Err(e) => panic!("{w:?} under {k}: {e}"),
            }
        }
        assert!(ran * 4 >= configs.len(), "{ran} of {} ran", configs.len());
    }
}

/// The reset GEMM steps: one per output element block.
fn reset_steps(w: &Conv2dPacked) -> u64 {
    (w.n * w.co * w.out_h() * w.out_w()) as u64
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn random_shapes_and_configurations_match_the_reference(
        ci in 1usize..4, co in 1usize..4, h in 1usize..9, w in 1usize..9,
        k in prop_oneof![Just(1usize), Just(3)], stride in 1usize..3,
        shift in 0u32..12, round in any::<bool>(), bias in any::<bool>(), relu in any::<bool>(),
        pick in any::<u64>(), seed in any::<u64>(),
    ) {
        let pad = k / 2;
        prop_assume!(h + 2 * pad >= k && w + 2 * pad >= k);
        let e = Epilogue { bias, shift, round, clip: (if relu { 0 } else { -128 }, 127) };
        let wl = conv(ci, (h, w), co, k, stride, pad, e);
        let configs = space(&wl);
        let kn = configs[(pick % configs.len() as u64) as usize];
        let t = tensors(&wl, seed);
        match simulate(&wl, &kn, &t) {
            Ok((got, _)) => prop_assert_eq!(got, reference(&wl, &t), "{:?} under {}", wl, kn),
            Err(VtaError::Instantiate { .. }) => {}
            Err(e) => prop_assert!(false, "{:?} under {}: {}", wl, kn, e),
        }
    }
}

#[test]
fn a_tile_that_overflows_a_buffer_is_an_instantiation_error() {
    let w = conv(32, (14, 14), 32, 3, 1, 1, RELU);
    let k = Knobs {
        tile_b: 1,
        tile_h: 14,
        tile_w: 14,
        tile_ci: 32,
        tile_co: 32,
        oc_nthread: 1,
        h_nthread: 1,
    };
    let err = generate(&VtaConfig::default(), &w, &k)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "configuration tile_b 1 tile_h 14 tile_w 14 tile_ci 32 tile_co 32 oc_nthread 1 \
         h_nthread 1: the tiles need 8192 INP entries (8192 per thread × 1), the buffer has 2048"
    );
    let odd = Knobs { tile_h: 5, ..k };
    let err = generate(&VtaConfig::default(), &w, &odd)
        .unwrap_err()
        .to_string();
    assert!(
        err.ends_with("tile_h 5 does not divide its axis of 14"),
        "{err}"
    );
}

#[test]
fn the_tutorial_tasks_have_tvms_space_sizes() {
    // (H, Cin, Cout, k, stride) of ResNet-18's ten packed conv2d tasks, in blocks of 16
    let tasks = [
        (56, 64, 64, 3, 1, 2304),
        (56, 64, 128, 3, 2, 1728),
        (56, 64, 128, 1, 2, 1728),
        (28, 128, 128, 3, 1, 2304),
        (28, 128, 256, 3, 2, 1280),
        (28, 128, 256, 1, 2, 1280),
        (14, 256, 256, 3, 1, 1600),
        (14, 256, 512, 3, 2, 480),
        (14, 256, 512, 1, 2, 480),
        (7, 512, 512, 3, 1, 576),
    ];
    for (h, cin, cout, k, s, size) in tasks {
        let w = conv(cin / 16, (h, h), cout / 16, k, s, k / 2, RELU);
        assert_eq!(space(&w).len(), size, "{w:?}");
    }
}

/// The decoded instruction stream of one small conv2d (3×3, stride 1, padding 1, two
/// input and two output channel blocks, two virtual threads over the output channels).
#[test]
fn the_instruction_stream_of_a_small_conv2d() {
    let w = conv(2, (4, 4), 2, 3, 1, 1, RELU);
    let k = Knobs {
        tile_b: 1,
        tile_h: 2,
        tile_w: 4,
        tile_ci: 1,
        tile_co: 1,
        oc_nthread: 2,
        h_nthread: 1,
    };
    let cfg = VtaConfig::default();
    let p = generate(&cfg, &w, &k).unwrap();
    let layout = Layout::of(&cfg).unwrap();
    let mut text = format!("{} micro-ops\n", p.uops.len());
    for (i, (word, reloc)) in p.words.iter().zip(&p.relocs).enumerate() {
        let insn = layout.decode(*word).unwrap();
        let arg = reloc.map_or(String::new(), |a| format!("  ; dram of {a:?}"));
        text += &format!("{i:3} {insn}{arg}\n");
    }
    insta::assert_snapshot!(text);
    let t = tensors(&w, 3);
    assert_eq!(simulate(&w, &k, &t).unwrap().0, reference(&w, &t));
}
