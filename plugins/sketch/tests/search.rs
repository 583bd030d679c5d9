//! The search policy: proposals are complete, valid, distinct and unmeasured; every
//! mutation keeps a state valid and computing the same values; the evolutionary search
//! climbs the scorer it is given; the same seed proposes the same batch.

mod common;
use common::*;

use std::collections::HashSet;
use tessera_search::state::{SplitStep, State, Step};
use tessera_sketch::annotate::AnnotateParams;
use tessera_sketch::search::{SearchParams, SketchPolicy};
use tessera_sketch::sketch::SketchTarget;
use tessera_sketch::strategy::lower_state;
use tessera_te::ops::{bias_add, conv2d_nhwc, matmul, relu};
use tessera_te::ComputeDag;

fn matmul_dag(n: i64) -> ComputeDag {
    let c = matmul(&f32p(&[n, n], "A"), &f32p(&[n, n], "B")).unwrap();
    ComputeDag::new(&[c]).unwrap()
}

fn conv_dag() -> ComputeDag {
    let d = f32p(&[1, 6, 6, 4], "data");
    let k = f32p(&[3, 3, 4, 8], "kernel");
    let b = f32p(&[8], "bias");
    let c = conv2d_nhwc(&d, &k, (1, 1), (1, 1), (1, 1)).unwrap();
    let out = relu(&bias_add(&c, &b, 3).unwrap()).unwrap();
    ComputeDag::new(&[out]).unwrap()
}

fn policy(dag: &ComputeDag, seed: u64) -> SketchPolicy {
    policy_limited(dag, seed, SearchParams::default().max_code_size)
}

fn policy_limited(dag: &ComputeDag, seed: u64, max_code_size: u64) -> SketchPolicy {
    SketchPolicy::new(
        dag,
        &SketchTarget::cpu(2),
        AnnotateParams::cpu(2),
        SearchParams {
            population: 32,
            max_code_size,
            ..SearchParams::default()
        },
        seed,
    )
    .unwrap()
}

#[test]
fn random_batches_are_distinct_complete_and_never_measured_twice() {
    let dag = matmul_dag(32);
    let mut p = policy(&dag, 3);
    let first = p.next_batch(16, None);
    assert_eq!(first.len(), 16);
    let keys: HashSet<Vec<Step>> = first.iter().map(|s| s.steps().to_vec()).collect();
    assert_eq!(keys.len(), 16, "distinct");
    for s in &first {
        assert!(s.is_complete());
        lower_state(s, "f").unwrap();
        p.record(s, Some(1.0));
    }
    let second = p.next_batch(16, None);
    assert!(second.iter().all(|s| !keys.contains(s.steps())));
    // the same seed, the same proposals
    let again = policy(&dag, 3).next_batch(16, None);
    assert_eq!(again, first);
}

#[test]
fn every_mutation_keeps_the_state_valid_and_computing_the_same() {
    for dag in [matmul_dag(16), conv_dag()] {
        let args = State::new(&dag).args();
        let n_in = args.len() - 1;
        let want = run(&lower_state(&State::new(&dag), "ref").unwrap(), &args, n_in);
        let mut p = policy(&dag, 11);
        let pop = p.next_batch(12, None);
        let mut changed = [0usize; 4];
        for (k, s) in pop.iter().enumerate() {
            for round in 0..6 {
                let m = match round % 4 {
                    0 => p.mutate_tile_size(s),
                    1 => p.mutate_unroll(s),
                    2 => p.mutate_compute_location(s),
                    _ => p.mutate_parallel(s),
                };
                let Some(m) = m else { continue };
                changed[round % 4] += 1;
                assert_ne!(m.steps(), s.steps());
                assert!(m.is_complete());
                if (k + round) % 3 == 0 {
                    let got = run(&lower_state(&m, "m").unwrap(), &args, n_in);
                    assert!(close(&want, &got), "{:?}", m.steps());
                }
            }
        }
        eprintln!(
            "{} stages: mutations that changed something {changed:?}",
            dag.outputs.len()
        );
        assert!(
            changed[0] > 0 && changed[1] > 0 && changed[3] > 0,
            "{changed:?}"
        );
    }
}

/// A scorer over the step history: the product of every split's innermost length
/// (bigger inner tiles score higher). Evolution must beat the random population.
#[test]
fn the_evolutionary_search_climbs_its_scorer() {
    let dag = matmul_dag(64);
    let score = |s: &State| -> f32 {
        s.steps()
            .iter()
            .filter_map(|st| match st {
                Step::Split(SplitStep { lengths, .. }) => lengths.last().copied().flatten(),
                _ => None,
            })
            .map(|l| (l as f32).ln())
            .sum()
    };
    let mut scorer = |states: &[State]| states.iter().map(score).collect::<Vec<f32>>();
    let mut p = policy(&dag, 5);
    let random = p.next_batch(32, None);
    let mean = |v: &[State]| v.iter().map(score).sum::<f32>() / v.len() as f32;
    let best_random = random.iter().map(score).fold(f32::MIN, f32::max);
    let proposed = p.next_batch(16, Some(&mut scorer));
    assert_eq!(proposed.len(), 16);
    let best = proposed.iter().map(score).fold(f32::MIN, f32::max);
    eprintln!(
        "random mean {:.2} best {best_random:.2}; evolved mean {:.2} best {best:.2}",
        mean(&random),
        mean(&proposed)
    );
    assert!(mean(&proposed) > mean(&random) + 0.5);
    assert!(best >= best_random);
}

/// Two policies with the same seed, fed the same measurements and scored by the same
/// deterministic scorer, propose the same guided batch (TVM's reproducibility rule).
#[test]
fn the_same_seed_and_measurements_give_the_same_guided_batch() {
    let dag = matmul_dag(32);
    let mut scorer = |states: &[State]| {
        states
            .iter()
            .map(|s| s.steps().len() as f32 + (format!("{:?}", s.steps()).len() % 7) as f32)
            .collect::<Vec<f32>>()
    };
    let mut batches = Vec::new();
    for _ in 0..2 {
        let mut p = policy(&dag, 21);
        let first = p.next_batch(8, None);
        for (k, s) in first.iter().enumerate() {
            p.record(s, Some(10.0 + k as f64));
        }
        batches.push(p.next_batch(8, Some(&mut scorer)));
    }
    assert_eq!(batches[0].len(), 8);
    assert_eq!(batches[0], batches[1]);
}

/// Every random annotation, and every mutation of one, is traced back to the sketch it
/// came from.
#[test]
fn states_are_traced_back_to_their_sketch() {
    for dag in [matmul_dag(32), conv_dag()] {
        let mut p = policy(&dag, 17);
        let n = p.sketches().len();
        assert!(n > 1);
        for (k, sk) in p.sketches().to_vec().iter().enumerate() {
            assert_eq!(p.sketch_of(sk), Some(k));
        }
        let mut found = vec![0usize; n];
        for s in p.next_batch(48, None) {
            let k = p.sketch_of(&s).expect("an annotated state has a sketch");
            found[k] += 1;
            for _ in 0..4 {
                if let Some(m) = p.mutate(&s) {
                    assert_eq!(p.sketch_of(&m), Some(k), "{:?}", m.steps());
                }
            }
        }
        assert!(found.iter().all(|&c| c > 0), "{found:?}");
    }
}

/// A scorer that prefers one sketch by far still leaves every sketch a share of the
/// guided batch, with tilings never measured before.
#[test]
fn a_biased_model_still_explores_every_sketch() {
    let dag = conv_dag();
    let mut p = policy(&dag, 9);
    let n = p.sketches().len();
    let first = p.next_batch(24, None);
    for (i, s) in first.iter().enumerate() {
        p.record(s, Some(1.0 + i as f64));
    }
    let favourite = p.sketch_of(&first[0]).unwrap();
    // the same sketches, to tell them apart inside the scorer
    let twin = policy(&dag, 0);
    let mut scorer = |states: &[State]| -> Vec<f32> {
        states
            .iter()
            .map(|s| {
                if twin.sketch_of(s) == Some(favourite) {
                    100.0
                } else {
                    1.0
                }
            })
            .collect()
    };
    let measured: HashSet<_> = first.iter().map(|s| p.tiling_of(s)).collect();
    let batch = p.next_batch(40, Some(&mut scorer));
    let mut counts = vec![0usize; n];
    let mut new_tilings = vec![HashSet::new(); n];
    for s in &batch {
        let k = p.sketch_of(s).unwrap();
        counts[k] += 1;
        let t = p.tiling_of(s);
        if !measured.contains(&t) {
            new_tilings[k].insert(t);
        }
    }
    // 40 picks: 2 random, 38 guided, of which 25 % (3 per sketch) spread over the sketches
    for (k, &c) in counts.iter().enumerate() {
        if k != favourite {
            assert!(c >= 3, "sketch {k} got {c} of {counts:?}");
            assert!(
                new_tilings[k].len() >= 3,
                "sketch {k}: {:?}",
                new_tilings[k]
            );
        }
    }
    assert!(counts[favourite] >= 28, "{counts:?}");
}

/// The program size the limit is about: IR nodes once unrolled loops are expanded.
fn code_size(s: &State) -> u64 {
    tessera_ir::transform::expanded_size(&lower_state(s, "f").unwrap().body)
}

/// No proposal is over `max_code_size`, whether drawn at random or picked by a scorer
/// that prefers the largest programs; the batch is still full.
#[test]
fn programs_over_the_code_size_limit_are_never_proposed() {
    let dag = matmul_dag(64);
    // a limit that random annotation often exceeds: the median size
    let mut sizes: Vec<u64> = policy_limited(&dag, 7, 0)
        .next_batch(64, None)
        .iter()
        .map(code_size)
        .collect();
    sizes.sort_unstable();
    let limit = sizes[sizes.len() / 2];
    assert!(
        sizes.last().unwrap() > &(2 * limit),
        "the sizes must spread for this test to mean something: {sizes:?}"
    );
    let mut bigger_is_better = |states: &[State]| {
        states
            .iter()
            .map(|s| code_size(s) as f32)
            .collect::<Vec<f32>>()
    };
    for (max_code_size, over_allowed) in [(0, true), (limit, false)] {
        let mut p = policy_limited(&dag, 7, max_code_size);
        let first = p.next_batch(16, None);
        for s in &first {
            p.record(s, Some(1.0));
        }
        let guided = p.next_batch(16, Some(&mut bigger_is_better));
        assert_eq!(guided.len(), 16);
        let over = first
            .iter()
            .chain(&guided)
            .filter(|s| code_size(s) > limit)
            .count();
        if over_allowed {
            // without the limit, that scorer gets programs over it
            assert!(over > 8, "{over} over {limit} without a limit");
        } else {
            assert_eq!(over, 0, "{over} over the limit of {limit}");
        }
    }
}

/// A state read back from its record lowers to the same program as the state itself
/// (what a re-measurement of a logged candidate measures).
#[test]
fn a_state_read_back_from_its_record_lowers_to_the_same_program() {
    for dag in [matmul_dag(64), conv_dag()] {
        let mut p = policy(&dag, 3);
        for s in p.next_batch(16, None) {
            let back = State::from_json(&dag, &s.steps_json()).unwrap();
            assert_eq!(
                lower_state(&back, "f").unwrap().to_string(),
                lower_state(&s, "f").unwrap().to_string(),
                "{}",
                s.steps_json()
            );
        }
    }
}
