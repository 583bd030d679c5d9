//! The instruction encodings: every instruction whose fields fit encodes and decodes to
//! itself; fields sit where TVM's `hw_spec.h` puts them for the default configuration; a
//! value too wide for its field is an error naming the field; the decoded one-line form.

use proptest::prelude::*;
use tessera_vta::*;

fn layout() -> Layout {
    Layout::of(&VtaConfig::default()).unwrap()
}

fn deps() -> impl Strategy<Value = Deps> {
    any::<[bool; 4]>().prop_map(|b| Deps {
        pop_prev: b[0],
        pop_next: b[1],
        push_prev: b[2],
        push_next: b[3],
    })
}

fn mem() -> impl Strategy<Value = Insn> {
    let mem_type = prop_oneof![
        Just(MemType::Uop),
        Just(MemType::Wgt),
        Just(MemType::Inp),
        Just(MemType::Acc),
        Just(MemType::Out),
        Just(MemType::Acc8)
    ];
    (
        any::<bool>(),
        deps(),
        mem_type,
        0u32..1 << 16,
        any::<u32>(),
        (0u32..1 << 16, 0u32..1 << 16, 0u32..1 << 16),
        [0u32..16, 0u32..16, 0u32..16, 0u32..16],
    )
        .prop_map(|(load, deps, mem, sram_base, dram_base, (y, x, s), p)| {
            Insn::Mem(MemInsn {
                op: if load { MemOp::Load } else { MemOp::Store },
                deps,
                mem,
                sram_base,
                dram_base,
                y_size: y,
                x_size: x,
                x_stride: s,
                y_pad: [p[0], p[1]],
                x_pad: [p[2], p[3]],
            })
        })
}

fn uop_loop() -> impl Strategy<Value = UopLoop> {
    (
        any::<bool>(),
        0u32..1 << 13,
        0u32..1 << 14,
        (0u32..1 << 14, 0u32..1 << 14),
        [0u32..1 << 11, 0u32..1 << 11, 0u32..1 << 11, 0u32..1 << 11],
    )
        .prop_map(
            |(reset, uop_bgn, uop_end, (iter_out, iter_in), f)| UopLoop {
                reset,
                uop_bgn,
                uop_end,
                iter_out,
                iter_in,
                dst_factor: [f[0], f[1]],
                src_factor: [f[2], f[3]],
            },
        )
}

fn insn() -> impl Strategy<Value = Insn> {
    let alu_op = prop_oneof![
        Just(AluOp::Min),
        Just(AluOp::Max),
        Just(AluOp::Add),
        Just(AluOp::Shr),
        Just(AluOp::Mul)
    ];
    prop_oneof![
        mem(),
        (deps(), uop_loop(), [0u32..1 << 10, 0u32..1 << 10]).prop_map(|(deps, lp, w)| {
            Insn::Gemm(GemmInsn {
                deps,
                lp,
                wgt_factor: w,
            })
        }),
        (
            deps(),
            uop_loop(),
            alu_op,
            proptest::option::of(any::<i16>())
        )
            .prop_map(|(deps, lp, op, imm)| Insn::Alu(AluInsn { deps, lp, op, imm })),
        deps().prop_map(Insn::Finish),
    ]
}

proptest! {
    #[test]
    fn every_instruction_round_trips(i in insn()) {
        let l = layout();
        let word = l.encode(&i).unwrap();
        prop_assert_eq!(l.decode(word).unwrap(), i);
    }

    #[test]
    fn every_micro_op_round_trips(dst in 0u32..1 << 11, src in 0u32..1 << 11, wgt in 0u32..1 << 10) {
        let l = layout();
        let u = Uop { dst, src, wgt };
        let word = l.encode_uop(&u).unwrap();
        prop_assert_eq!(word, dst | src << 11 | wgt << 22);
        prop_assert_eq!(l.decode_uop(word), u);
    }
}

fn bits(word: u128, lo: u32, hi: u32) -> u128 {
    (word >> lo) & ((1u128 << (hi - lo + 1)) - 1)
}

#[test]
fn fields_sit_where_hw_spec_puts_them() {
    let l = layout();
    let load = Insn::Mem(MemInsn {
        op: MemOp::Load,
        deps: Deps {
            pop_next: true,
            push_next: true,
            ..Deps::default()
        },
        mem: MemType::Inp,
        sram_base: 0x1234,
        dram_base: 0x89ab_cdef,
        y_size: 7,
        x_size: 9,
        x_stride: 56,
        y_pad: [1, 2],
        x_pad: [3, 4],
    });
    let w = l.encode(&load).unwrap();
    let expect = [
        (0, 2, 0),
        (3, 3, 0),
        (4, 4, 1),
        (5, 5, 0),
        (6, 6, 1),
        (7, 9, 2),
        (10, 25, 0x1234),
        (26, 57, 0x89ab_cdef),
        (64, 79, 7),
        (80, 95, 9),
        (96, 111, 56),
        (112, 115, 1),
        (116, 119, 2),
        (120, 123, 3),
        (124, 127, 4),
    ];
    for (lo, hi, v) in expect {
        assert_eq!(bits(w, lo, hi), v, "bits [{lo}:{hi}] of {w:032x}");
    }
    let gemm = Insn::Gemm(GemmInsn {
        deps: Deps::default(),
        lp: UopLoop {
            reset: true,
            uop_bgn: 5,
            uop_end: 17,
            iter_out: 3,
            iter_in: 11,
            dst_factor: [100, 101],
            src_factor: [102, 103],
        },
        wgt_factor: [104, 105],
    });
    let w = l.encode(&gemm).unwrap();
    let expect = [
        (0, 2, 2),
        (7, 7, 1),
        (8, 20, 5),
        (21, 34, 17),
        (35, 48, 3),
        (49, 62, 11),
        (64, 74, 100),
        (75, 85, 101),
        (86, 96, 102),
        (97, 107, 103),
        (108, 117, 104),
        (118, 127, 105),
    ];
    for (lo, hi, v) in expect {
        assert_eq!(bits(w, lo, hi), v, "bits [{lo}:{hi}] of {w:032x}");
    }
    let alu = Insn::Alu(AluInsn {
        deps: Deps::default(),
        lp: UopLoop {
            reset: false,
            uop_bgn: 0,
            uop_end: 1,
            iter_out: 1,
            iter_in: 1,
            dst_factor: [0, 0],
            src_factor: [0, 0],
        },
        op: AluOp::Shr,
        imm: Some(-8),
    });
    let w = l.encode(&alu).unwrap();
    assert_eq!(bits(w, 0, 2), 4);
    assert_eq!(bits(w, 108, 110), 3);
    assert_eq!(bits(w, 111, 111), 1);
    assert_eq!(bits(w, 112, 127), 0xfff8);
}

#[test]
fn a_value_too_wide_for_its_field_is_named() {
    let l = layout();
    let gemm = Insn::Gemm(GemmInsn {
        deps: Deps::default(),
        lp: UopLoop {
            reset: false,
            uop_bgn: 0,
            uop_end: 1,
            iter_out: 16384,
            iter_in: 1,
            dst_factor: [0, 0],
            src_factor: [0, 0],
        },
        wgt_factor: [0, 0],
    });
    let err = l.encode(&gemm).unwrap_err();
    assert_eq!(
        err.to_string(),
        "instruction field `iter_out` is 14 bits wide: 16384 does not fit"
    );
    assert!(l.decode(7).is_err(), "opcode 7 is no instruction");
}

#[test]
fn the_default_configuration_is_tvms() {
    let c = VtaConfig::default();
    assert_eq!(c.name(), "1x16_i8w8a32_15_15_18_17");
    assert_eq!(
        (c.uop_depth(), c.inp_depth(), c.wgt_depth(), c.acc_depth()),
        (8192, 2048, 1024, 2048)
    );
    assert_eq!(c.peak_ops(), 51.2e9);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vta_config.json");
    std::fs::write(
        &path,
        r#"{"TARGET": "pynq", "HW_VER": "0.0.2", "LOG_INP_WIDTH": 3, "LOG_WGT_WIDTH": 3,
            "LOG_ACC_WIDTH": 5, "LOG_BATCH": 0, "LOG_BLOCK": 4, "LOG_UOP_BUFF_SIZE": 15,
            "LOG_INP_BUFF_SIZE": 15, "LOG_WGT_BUFF_SIZE": 18, "LOG_ACC_BUFF_SIZE": 17}"#,
    )
    .unwrap();
    let read = VtaConfig::from_file(&path).unwrap();
    assert_eq!(read.target, "pynq");
    assert_eq!(read.name(), c.name());
    std::fs::write(&path, r#"{"LOG_INP_WIDTH": 4}"#).unwrap();
    let err = VtaConfig::from_file(&path).unwrap_err().to_string();
    assert!(err.contains("missing field"), "{err}");
    let wide = VtaConfig {
        log_acc_width: 4,
        ..VtaConfig::default()
    };
    assert!(wide
        .check()
        .unwrap_err()
        .to_string()
        .contains("int32 accumulators"));
}
