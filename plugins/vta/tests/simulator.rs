//! The simulator against plain int8/int32 references: LOAD (with padding and strides),
//! GEMM, ALU and STORE on random data and random loop nests; its counters; the cycle
//! model on a small program; and the checks TVM's simulator does not make — an access not
//! ordered by tokens is a hazard, a wait nobody will answer a deadlock.

use proptest::prelude::*;
use tessera_vta::*;

const BLOCK: usize = 16;

fn cfg() -> VtaConfig {
    VtaConfig::default()
}

fn load(mem: MemType, sram_base: u32, dram_base: u32, y: u32, x: u32, stride: u32) -> MemInsn {
    MemInsn {
        op: MemOp::Load,
        deps: Deps::default(),
        mem,
        sram_base,
        dram_base,
        y_size: y,
        x_size: x,
        x_stride: stride,
        y_pad: [0, 0],
        x_pad: [0, 0],
    }
}

fn push_next(mut m: MemInsn) -> Insn {
    m.deps.push_next = true;
    Insn::Mem(m)
}

fn pop_prev() -> Deps {
    Deps {
        pop_prev: true,
        ..Deps::default()
    }
}

/// `bytes` in a fresh allocation; its address in units of `elem` bytes.
fn put(dram: &mut Dram, bytes: &[u8], elem: usize) -> u32 {
    let a = dram.alloc(bytes.len()).unwrap();
    dram.write(a, bytes).unwrap();
    (a / elem as u64) as u32
}

fn uops(dram: &mut Dram, l: &Layout, u: &[Uop]) -> u32 {
    let words: Vec<u8> = u
        .iter()
        .flat_map(|u| l.encode_uop(u).unwrap().to_le_bytes())
        .collect();
    put(dram, &words, 4)
}

fn acc_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// LOAD INP copies a strided window and zero-fills the padding around it.
    #[test]
    fn load_pads_and_strides_as_the_reference(
        rows in 1usize..6, cols in 1usize..6, seed in any::<u64>(),
        sub in (0usize..6, 0usize..6, 1usize..6, 1usize..6),
        pads in [0u32..3, 0u32..3, 0u32..3, 0u32..3], sram_base in 0u32..64,
    ) {
        let (y0, x0) = (sub.0 % rows, sub.1 % cols);
        let (ys, xs) = (sub.2.min(rows - y0), sub.3.min(cols - x0));
        let data: Vec<u8> = (0..rows * cols * BLOCK)
            .map(|i| (seed.wrapping_mul(i as u64 + 1) >> 13) as u8)
            .collect();
        let mut dram = Dram::new(1 << 24);
        let base = put(&mut dram, &data, BLOCK);
        let mut m = load(MemType::Inp, sram_base, base + (y0 * cols + x0) as u32, ys as u32, xs as u32, cols as u32);
        m.y_pad = [pads[0], pads[1]];
        m.x_pad = [pads[2], pads[3]];
        let mut sim = Simulator::new(cfg()).unwrap();
        let c = sim.run(&mut dram, &[Insn::Mem(m)]).unwrap();
        prop_assert_eq!(c.inp_load_nbytes, (ys * xs * BLOCK) as u64);
        let (xt, yt) = (xs + (pads[2] + pads[3]) as usize, ys + (pads[0] + pads[1]) as usize);
        let inp = &sim.sram().inp;
        for y in 0..yt {
            for x in 0..xt {
                let e = sram_base as usize + y * xt + x;
                let (r, q) = (y as i64 - pads[0] as i64, x as i64 - pads[2] as i64);
                for k in 0..BLOCK {
                    let want = if r >= 0 && q >= 0 && (r as usize) < ys && (q as usize) < xs {
                        data[((y0 + r as usize) * cols + x0 + q as usize) * BLOCK + k] as i8
                    } else {
                        0
                    };
                    prop_assert_eq!(inp[e * BLOCK + k], want, "element {} lane {}", e, k);
                }
            }
        }
    }

    /// GEMM over a random micro-op kernel and two loop levels accumulates
    /// Σ inp[s]·wgt[w]ᵀ into acc[d] exactly as the plain int8/int32 loops do.
    #[test]
    fn gemm_matches_the_reference(
        seed in any::<u64>(),
        kernel in proptest::collection::vec((0u32..4, 0u32..4, 0u32..3), 1..5),
        iters in (1u32..3, 1u32..3),
        factors in [0u32..3, 0u32..3, 0u32..3, 0u32..3, 0u32..3, 0u32..3],
    ) {
        let (n_acc, n_inp, n_wgt) = (16usize, 16usize, 12usize);
        let byte = |i: usize| (seed.wrapping_mul(i as u64 * 2 + 1) >> 17) as u8;
        let inp: Vec<u8> = (0..n_inp * BLOCK).map(byte).collect();
        let wgt: Vec<u8> = (0..n_wgt * BLOCK * BLOCK).map(|i| byte(i + 7777)).collect();
        let acc0: Vec<i32> = (0..n_acc * BLOCK).map(|i| (seed.wrapping_mul(i as u64 + 3) >> 40) as i32 - 8_000_000).collect();
        let mut dram = Dram::new(1 << 24);
        let sim_cfg = cfg();
        let l = Layout::of(&sim_cfg).unwrap();
        let ui: Vec<Uop> = kernel.iter().map(|&(d, s, w)| Uop { dst: d, src: s, wgt: w }).collect();
        let ua = uops(&mut dram, &l, &ui);
        let ia = put(&mut dram, &inp, BLOCK);
        let wa = put(&mut dram, &wgt, BLOCK * BLOCK);
        let aa = put(&mut dram, &acc_bytes(&acc0), BLOCK * 4);
        let lp = UopLoop {
            reset: false, uop_bgn: 0, uop_end: ui.len() as u32,
            iter_out: iters.0, iter_in: iters.1,
            dst_factor: [factors[0], factors[1]], src_factor: [factors[2], factors[3]],
        };
        let program = [
            Insn::Mem(load(MemType::Inp, 0, ia, 1, n_inp as u32, n_inp as u32)),
            push_next(load(MemType::Wgt, 0, wa, 1, n_wgt as u32, n_wgt as u32)),
            Insn::Mem(load(MemType::Uop, 0, ua, 1, ui.len() as u32, ui.len() as u32)),
            Insn::Mem(load(MemType::Acc, 0, aa, 1, n_acc as u32, n_acc as u32)),
            Insn::Gemm(GemmInsn { deps: pop_prev(), lp, wgt_factor: [factors[4], factors[5]] }),
        ];
        let mut sim = Simulator::new(sim_cfg).unwrap();
        let c = sim.run(&mut dram, &program).unwrap();
        let mut want = acc0.clone();
        for o in 0..iters.0 {
            for i in 0..iters.1 {
                for u in &ui {
                    let d = (u.dst + o * factors[0] + i * factors[1]) as usize;
                    let s = (u.src + o * factors[2] + i * factors[3]) as usize;
                    let w = (u.wgt + o * factors[4] + i * factors[5]) as usize;
                    for n in 0..BLOCK {
                        let mut sum = 0i32;
                        for k in 0..BLOCK {
                            sum += inp[s * BLOCK + k] as i8 as i32 * wgt[(w * BLOCK + n) * BLOCK + k] as i8 as i32;
                        }
                        want[d * BLOCK + n] = want[d * BLOCK + n].wrapping_add(sum);
                    }
                }
            }
        }
        prop_assert_eq!(&sim.sram().acc[..n_acc * BLOCK], &want[..]);
        prop_assert_eq!(c.gemm_counter, (iters.0 * iters.1) as u64 * ui.len() as u64);
        prop_assert_eq!(c.wgt_load_nbytes, (n_wgt * BLOCK * BLOCK) as u64);
        prop_assert_eq!(c.acc_load_nbytes, (n_acc * BLOCK * 4) as u64);
        prop_assert_eq!(c.uop_load_nbytes, ui.len() as u64 * 4);
    }

    /// ALU with an immediate or a second accumulator operand, every operation, wrapping
    /// and shifting both ways, in program order.
    #[test]
    fn alu_matches_the_reference(
        seed in any::<u64>(), op in 0u8..5, imm in proptest::option::of(-40i16..40),
        kernel in proptest::collection::vec((0u32..6, 0u32..6), 1..4),
        iters in (1u32..3, 1u32..3), factors in [0u32..2, 0u32..2, 0u32..2, 0u32..2],
    ) {
        let op = [AluOp::Min, AluOp::Max, AluOp::Add, AluOp::Shr, AluOp::Mul][op as usize];
        let n_acc = 12usize;
        let acc0: Vec<i32> = (0..n_acc * BLOCK).map(|i| {
            let v = seed.wrapping_mul(i as u64 * 2 + 1) >> 20;
            if op == AluOp::Shr { (v % 81) as i32 - 40 } else { v as i32 }
        }).collect();
        let mut dram = Dram::new(1 << 24);
        let l = Layout::of(&cfg()).unwrap();
        let ui: Vec<Uop> = kernel.iter().map(|&(d, s)| Uop { dst: d, src: s, wgt: 0 }).collect();
        let ua = uops(&mut dram, &l, &ui);
        let aa = put(&mut dram, &acc_bytes(&acc0), BLOCK * 4);
        let lp = UopLoop {
            reset: false, uop_bgn: 0, uop_end: ui.len() as u32,
            iter_out: iters.0, iter_in: iters.1,
            dst_factor: [factors[0], factors[1]], src_factor: [factors[2], factors[3]],
        };
        let program = [
            Insn::Mem(load(MemType::Uop, 0, ua, 1, ui.len() as u32, ui.len() as u32)),
            Insn::Mem(load(MemType::Acc, 0, aa, 1, n_acc as u32, n_acc as u32)),
            Insn::Alu(AluInsn { deps: Deps::default(), lp, op, imm }),
        ];
        let mut sim = Simulator::new(cfg()).unwrap();
        let c = sim.run(&mut dram, &program).unwrap();
        let mut want = acc0.clone();
        for o in 0..iters.0 {
            for i in 0..iters.1 {
                for u in &ui {
                    let d = (u.dst + o * factors[0] + i * factors[1]) as usize;
                    let s = (u.src + o * factors[2] + i * factors[3]) as usize;
                    for n in 0..BLOCK {
                        let x = want[d * BLOCK + n];
                        let y = match imm { Some(v) => v as i32, None => want[s * BLOCK + n] };
                        want[d * BLOCK + n] = match op {
                            AluOp::Min => x.min(y),
                            AluOp::Max => x.max(y),
                            AluOp::Add => x.wrapping_add(y),
                            AluOp::Mul => x.wrapping_mul(y),
                            AluOp::Shr => {
                                let shifted = if y >= 0 { (x as i64) >> y.min(63) } else { (x as i64) << y.unsigned_abs().min(40) };
                                shifted as i32
                            }
                        };
                    }
                }
            }
        }
        prop_assert_eq!(&sim.sram().acc[..n_acc * BLOCK], &want[..]);
        prop_assert_eq!(c.alu_counter, (iters.0 * iters.1) as u64 * ui.len() as u64);
    }

    /// STORE writes each accumulator's low 8 bits, row by row with the DRAM stride;
    /// ACC8 loads sign-extend.
    #[test]
    fn store_truncates_and_acc8_sign_extends(
        seed in any::<u64>(), ys in 1u32..4, xs in 1u32..5, extra in 0u32..3, sram_base in 0u32..8,
    ) {
        let n = (sram_base + ys * xs) as usize;
        let acc0: Vec<i32> = (0..n * BLOCK).map(|i| (seed.wrapping_mul(i as u64 + 5) >> 20) as i32).collect();
        let stride = xs + extra;
        let mut dram = Dram::new(1 << 24);
        let aa = put(&mut dram, &acc_bytes(&acc0), BLOCK * 4);
        let out = put(&mut dram, &vec![0u8; (ys * stride) as usize * BLOCK], BLOCK);
        let mut store = load(MemType::Out, sram_base, out, ys, xs, stride);
        store.op = MemOp::Store;
        store.deps = pop_prev();
        let program = [
            push_next(load(MemType::Acc, 0, aa, 1, n as u32, n as u32)),
            Insn::Mem(store),
        ];
        let mut sim = Simulator::new(cfg()).unwrap();
        let c = sim.run(&mut dram, &program).unwrap();
        prop_assert_eq!(c.out_store_nbytes, (ys * xs) as u64 * BLOCK as u64);
        let bytes = dram.read(out as u64 * BLOCK as u64, (ys * stride) as usize * BLOCK).unwrap().to_vec();
        for y in 0..ys as usize {
            for x in 0..stride as usize {
                for k in 0..BLOCK {
                    let got = bytes[(y * stride as usize + x) * BLOCK + k];
                    let want = if x < xs as usize {
                        acc0[(sram_base as usize + y * xs as usize + x) * BLOCK + k] as u8
                    } else {
                        0
                    };
                    prop_assert_eq!(got, want);
                }
            }
        }
        // the stored int8 loaded back with ACC8 is sign-extended
        let back = load(MemType::Acc8, 100, out, 1, xs, stride);
        sim.run(&mut dram, &[Insn::Mem(back)]).unwrap();
        for x in 0..xs as usize {
            for k in 0..BLOCK {
                let want = acc0[(sram_base as usize + x) * BLOCK + k] as u8 as i8 as i32;
                prop_assert_eq!(sim.sram().acc[(100 + x) * BLOCK + k], want);
            }
        }
    }
}

/// A small program's cycles by the model. The load module's weight load (256 bytes:
/// 32 bus cycles, then 150) takes the bus first; compute's micro-op load, started at the
/// same time, waits for the bus; the input load (64 bytes) follows the weights on the
/// load module; the GEMM of 10 steps (80 + 10) starts when the input's token arrives.
#[test]
fn cycles_follow_the_model_with_a_shared_bus() {
    let mut dram = Dram::new(1 << 24);
    let l = Layout::of(&cfg()).unwrap();
    let ua = uops(&mut dram, &l, &[Uop::default()]);
    let ia = put(&mut dram, &[1u8; 4 * BLOCK], BLOCK);
    let wa = put(&mut dram, &[1u8; BLOCK * BLOCK], BLOCK * BLOCK);
    let lp = UopLoop {
        reset: false,
        uop_bgn: 0,
        uop_end: 1,
        iter_out: 2,
        iter_in: 5,
        dst_factor: [0, 1],
        src_factor: [0, 0],
    };
    let program = [
        Insn::Mem(load(MemType::Wgt, 0, wa, 1, 1, 1)),
        push_next(load(MemType::Inp, 0, ia, 1, 4, 4)),
        Insn::Mem(load(MemType::Uop, 0, ua, 1, 1, 1)),
        Insn::Gemm(GemmInsn {
            deps: pop_prev(),
            lp,
            wgt_factor: [0, 0],
        }),
    ];
    let mut sim = Simulator::new(cfg()).unwrap();
    let c = sim.run(&mut dram, &program).unwrap();
    let wgt_done = 32 + 150;
    let uop_done = 32 + 1 + 150;
    let inp_done = wgt_done + 8 + 150;
    let gemm = 80 + 10;
    assert_eq!(c.busy, [inp_done, uop_done + gemm, 0]);
    assert_eq!(c.cycles, inp_done + gemm);
    assert_eq!(c.acc_raw_steps, 0);
    assert_eq!(sim.sram().acc[0], 2 * 16, "two steps of 16 ones · 16 ones");
    assert_eq!(sim.total().cycles, c.cycles);
    // the same steps on one accumulator: each after the first waits for the one before
    let one = [Insn::Gemm(GemmInsn {
        deps: Deps::default(),
        lp: UopLoop {
            dst_factor: [0, 0],
            ..lp
        },
        wgt_factor: [0, 0],
    })];
    let c = sim.run(&mut dram, &one).unwrap();
    assert_eq!(c.acc_raw_steps, 9);
    assert_eq!(c.cycles, 80 + 10 + 9 * tessera_vta::sim::ACC_RAW_STALL);
}

#[test]
fn a_read_not_ordered_by_a_token_is_a_hazard() {
    let mut dram = Dram::new(1 << 24);
    let l = Layout::of(&cfg()).unwrap();
    let ua = uops(&mut dram, &l, &[Uop::default()]);
    let ia = put(&mut dram, &[1u8; BLOCK], BLOCK);
    let lp = UopLoop {
        reset: false,
        uop_bgn: 0,
        uop_end: 1,
        iter_out: 1,
        iter_in: 1,
        dst_factor: [0, 0],
        src_factor: [0, 0],
    };
    let gemm = |deps| {
        Insn::Gemm(GemmInsn {
            deps,
            lp,
            wgt_factor: [0, 0],
        })
    };
    // the GEMM reads INP 0 that the load module writes, with no token between them
    let racy = [
        Insn::Mem(load(MemType::Inp, 0, ia, 1, 1, 1)),
        Insn::Mem(load(MemType::Uop, 0, ua, 1, 1, 1)),
        gemm(Deps::default()),
    ];
    let mut sim = Simulator::new(cfg()).unwrap();
    let err = sim.run(&mut dram, &racy).unwrap_err().to_string();
    assert_eq!(
        err,
        "instruction 2 (GEMM uop [0, 1) out 1 in 1 dst 0/0 src 0/0 wgt 0/0 []): hazard: \
         read-after-write on INP element 0: instruction 2 (compute) is not ordered after \
         instruction 0 by any token"
    );
    // with the token it runs
    let ordered = [
        push_next(load(MemType::Inp, 0, ia, 1, 1, 1)),
        Insn::Mem(load(MemType::Uop, 0, ua, 1, 1, 1)),
        gemm(pop_prev()),
    ];
    let mut sim = Simulator::new(cfg()).unwrap();
    sim.run(&mut dram, &ordered).unwrap();
    // a later load overwriting INP 0 while the GEMM may still read it is a race (here
    // the load starts first, so the GEMM's read is the access found unordered)
    let war = [
        push_next(load(MemType::Inp, 0, ia, 1, 1, 1)),
        Insn::Mem(load(MemType::Uop, 0, ua, 1, 1, 1)),
        gemm(pop_prev()),
        Insn::Mem(load(MemType::Inp, 0, ia, 1, 1, 1)),
    ];
    let mut sim = Simulator::new(cfg()).unwrap();
    let err = sim.run(&mut dram, &war).unwrap_err().to_string();
    assert!(
        err.contains("hazard: read-after-write on INP element 0")
            && err.contains("not ordered after instruction 3"),
        "{err}"
    );
}

#[test]
fn waiting_on_a_token_nobody_pushes_is_a_deadlock() {
    let mut dram = Dram::new(1 << 24);
    let program = [
        Insn::Finish(pop_prev()),
        Insn::Mem(MemInsn {
            op: MemOp::Store,
            deps: pop_prev(),
            ..load(MemType::Out, 0, 0, 0, 0, 0)
        }),
    ];
    let mut sim = Simulator::new(cfg()).unwrap();
    let err = sim.run(&mut dram, &program).unwrap_err().to_string();
    assert_eq!(
        err,
        "deadlock: the compute module's instruction 0 (FINISH [pop_prev]) waits on the empty \
         load→compute queue; the store module's instruction 1 (STORE OUT  sram 0 dram 0 y 0 x \
         0 stride 0 pad y 0/0 x 0/0 [pop_prev]) waits on the empty compute→store queue"
    );
}

#[test]
fn a_flag_for_a_queue_the_module_lacks_and_an_overflow_are_errors() {
    let mut dram = Dram::new(1 << 24);
    let mut sim = Simulator::new(cfg()).unwrap();
    let mut m = load(MemType::Inp, 0, 0, 1, 1, 1);
    m.deps.pop_prev = true;
    let err = sim.run(&mut dram, &[Insn::Mem(m)]).unwrap_err().to_string();
    assert!(
        err.contains("the load module has no `pop_prev` queue"),
        "{err}"
    );
    let a = put(&mut dram, &[0u8; BLOCK * 4], BLOCK);
    let over = load(MemType::Inp, 2046, a, 1, 4, 4);
    let err = sim
        .run(&mut dram, &[Insn::Mem(over)])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("INP buffer overflow: 1×4 elements from 2046 pass its depth 2048"),
        "{err}"
    );
    let past = load(MemType::Inp, 0, a, 1, 5, 5);
    let err = sim
        .run(&mut dram, &[Insn::Mem(past)])
        .unwrap_err()
        .to_string();
    assert!(err.contains("outside every allocation"), "{err}");
}

/// A queue holds 8 tokens: the load module's ninth push waits until the compute module
/// has popped one, which delays the load behind it; with nobody popping it is a
/// deadlock naming the full queue.
#[test]
fn a_full_token_queue_stalls_its_pusher() {
    let nop_push = push_next(load(MemType::Inp, 0, 0, 0, 0, 0));
    let nop_pop = Insn::Mem(MemInsn {
        deps: pop_prev(),
        ..load(MemType::Uop, 0, 0, 0, 0, 0)
    });
    let slow = Insn::Gemm(GemmInsn {
        deps: Deps::default(),
        lp: UopLoop {
            reset: false,
            uop_bgn: 0,
            uop_end: 1,
            iter_out: 1,
            iter_in: 1000,
            dst_factor: [0, 1],
            src_factor: [0, 0],
        },
        wgt_factor: [0, 0],
    });
    // 9 × 40-cycle pushes, then 16 KiB of weights (2048 bus cycles + 150); the compute
    // module is busy for 1080 cycles before its first pop
    let mut program = vec![nop_push; 9];
    program.push(Insn::Mem(load(MemType::Wgt, 0, 0, 1, 64, 64)));
    program.push(slow);
    program.extend(vec![nop_pop; 9]);
    let mut dram = Dram::new(1 << 24);
    let mut sim = Simulator::new(cfg()).unwrap();
    sim.set_functional(false);
    let c = sim.run(&mut dram, &program).unwrap();
    let ninth = 1080; // the first pop makes room
    assert_eq!(c.cycles, ninth + 40 + 2048 + 150);
    assert_eq!(tessera_vta::sim::QUEUE_DEPTH, 8);
    // nobody pops: the ninth push never happens
    let unpopped = vec![nop_push; 9];
    let err = sim.run(&mut dram, &unpopped).unwrap_err().to_string();
    assert!(
        err.contains("instruction 8")
            && err.contains("waits on the full load→compute queue (8 tokens)"),
        "{err}"
    );
}
