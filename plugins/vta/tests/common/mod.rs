//! What the VTA tests share: seeded tensors for a packed conv2d and the plain
//! int8/int32 reference it must match.
#![allow(dead_code)]

use tessera_vta::conv2d::Conv2dPacked;

pub const B: usize = 16;

pub struct Tensors {
    pub data: Vec<i8>,
    pub kernel: Vec<i8>,
    pub bias: Vec<i32>,
}

/// SplitMix64: well-mixed values from any seed, small ones too.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

pub fn tensors(w: &Conv2dPacked, seed: u64) -> Tensors {
    let v = |i: usize, salt: u64| mix(seed ^ (salt << 56) ^ i as u64);
    Tensors {
        data: (0..w.n * w.ci * w.h * w.w * B)
            .map(|i| v(i, 1) as i8)
            .collect(),
        kernel: (0..w.co * w.ci * w.kh * w.kw * B * B)
            .map(|i| v(i, 2) as i8)
            .collect(),
        bias: (0..w.co * B)
            .map(|i| (v(i, 3) % 20000) as i32 - 10000)
            .collect(),
    }
}

/// The plain int8/int32 reference.
pub fn reference(w: &Conv2dPacked, t: &Tensors) -> Vec<i8> {
    let (oh, ow) = (w.out_h(), w.out_w());
    let mut out = vec![0i8; w.n * w.co * oh * ow * B];
    let e = w.epilogue;
    for n in 0..w.n {
        for co in 0..w.co {
            for y in 0..oh {
                for x in 0..ow {
                    for c in 0..B {
                        let mut acc: i32 = 0;
                        for ci in 0..w.ci {
                            for dy in 0..w.kh {
                                for dx in 0..w.kw {
                                    let iy = (y * w.stride.0 + dy) as isize - w.pad.0 as isize;
                                    let ix = (x * w.stride.1 + dx) as isize - w.pad.1 as isize;
                                    if iy < 0 || ix < 0 || iy >= w.h as isize || ix >= w.w as isize
                                    {
                                        continue;
                                    }
                                    for k in 0..B {
                                        let d = t.data[(((n * w.ci + ci) * w.h + iy as usize)
                                            * w.w
                                            + ix as usize)
                                            * B
                                            + k];
                                        let q = t.kernel[((((co * w.ci + ci) * w.kh + dy) * w.kw
                                            + dx)
                                            * B
                                            + c)
                                            * B
                                            + k];
                                        acc = acc.wrapping_add(d as i32 * q as i32);
                                    }
                                }
                            }
                        }
                        if e.bias {
                            acc = acc.wrapping_add(t.bias[co * B + c]);
                        }
                        if e.round && e.shift > 0 {
                            acc = acc.wrapping_add(1 << (e.shift - 1));
                        }
                        acc >>= e.shift;
                        acc = acc.min(e.clip.1 as i32).max(e.clip.0 as i32);
                        out[(((n * w.co + co) * oh + y) * ow + x) * B + c] = acc as i8;
                    }
                }
            }
        }
    }
    out
}
