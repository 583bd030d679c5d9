//! The packed conv2d tasks of ResNet-18 under the cycle model (the tutorial's ten and
//! this zoo's 1×1 64→64 projection): the space size, the simulated GOPS of TVM's
//! fallback configuration (every tile 1, one thread) and of the best of N random
//! configurations (a random tuner's N trials), as a markdown table.
//! `cargo run --release -p tessera-vta --example resnet18_tasks [N]`.

use tessera_vta::conv2d::{generate, space, Conv2dPacked, Epilogue, Knobs};
use tessera_vta::*;

fn gops(cfg: &VtaConfig, w: &Conv2dPacked, k: &Knobs) -> Option<(f64, Counters)> {
    let p = generate(cfg, w, k).ok()?;
    let mut sim = Simulator::new(cfg.clone()).unwrap();
    sim.set_functional(false);
    let mut dram = Dram::new(1 << 20);
    let c = p.run(&mut sim, &mut dram, &[0, 0, 0, 0]).ok()?;
    let secs = c.cycles as f64 / (cfg.clock_mhz as f64 * 1e6);
    Some((w.flops(cfg) as f64 / secs / 1e9, c))
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let cfg = VtaConfig::default();
    let e = Epilogue {
        bias: true,
        shift: 8,
        round: false,
        clip: (0, 127),
    };
    let tasks = [
        (56, 64, 64, 3, 1),
        (56, 64, 64, 1, 1),
        (56, 64, 128, 3, 2),
        (56, 64, 128, 1, 2),
        (28, 128, 128, 3, 1),
        (28, 128, 256, 3, 2),
        (28, 128, 256, 1, 2),
        (14, 256, 256, 3, 1),
        (14, 256, 512, 3, 2),
        (14, 256, 512, 1, 2),
        (7, 512, 512, 3, 1),
    ];
    let mut seed = 0x9e3779b97f4a7c15u64;
    println!("| task (H×W Cin→Cout k×k/stride) | space | valid of {n} | fallback GOPS | best GOPS | of peak | speedup | best configuration |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for (h, cin, cout, k, s) in tasks {
        let w = Conv2dPacked {
            n: 1,
            ci: cin / 16,
            h,
            w: h,
            co: cout / 16,
            kh: k,
            kw: k,
            stride: (s, s),
            pad: (k / 2, k / 2),
            epilogue: e,
        };
        let all = space(&w);
        let fallback = Knobs {
            tile_b: 1,
            tile_h: 1,
            tile_w: 1,
            tile_ci: 1,
            tile_co: 1,
            oc_nthread: 1,
            h_nthread: 1,
        };
        let (g0, _) = gops(&cfg, &w, &fallback).unwrap();
        let mut best = (0.0, fallback, Counters::default());
        let mut valid = 0;
        for _ in 0..n {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let kn = all[(seed % all.len() as u64) as usize];
            if let Some((g, c)) = gops(&cfg, &w, &kn) {
                valid += 1;
                if g > best.0 {
                    best = (g, kn, c);
                }
            }
        }
        let peak = cfg.peak_ops() / 1e9;
        println!(
            "| {h}×{h} {cin}→{cout} {k}×{k}/{s} | {} | {valid} | {g0:.2} | {:.2} | {:.0} % | {:.0}× | {} |",
            all.len(),
            best.0,
            100.0 * best.0 / peak,
            best.0 / g0,
            best.1
        );
    }
}
