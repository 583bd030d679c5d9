//! The step history: replay onto a te schedule gives the same program as the same
//! primitives called by hand, the record form round-trips, the printed loop nest is
//! snapshotted, and every malformed history is a typed error that leaves a state as it
//! was.

use serde_json::json;
use tessera_ir::{DataType, StorageScope};
use tessera_search::state::{
    AnnotationStep, CacheReadStep, CacheWriteStep, ComputeAtStep, ComputeInlineStep,
    ComputeRootStep, FollowFusedSplitStep, FollowSplitStep, FuseStep, IterAnnotation, PragmaStep,
    ReorderStep, RfactorStep, SplitStep, State, StateError, Step, StorageAlignStep,
};
use tessera_te::{lower, ops, placeholder, ComputeDag, Schedule, Tensor};

/// `C = A·B` (m×k · k×n): stages 0 A, 1 B, 2 C.
fn matmul(m: i64, n: i64, k: i64) -> (ComputeDag, Vec<Tensor>) {
    let f32 = DataType::float32();
    let a = placeholder(&[m, k], f32, "A").unwrap();
    let b = placeholder(&[k, n], f32, "B").unwrap();
    let c = ops::matmul(&a, &b).unwrap();
    (
        ComputeDag::new(std::slice::from_ref(&c)).unwrap(),
        vec![a, b, c],
    )
}

fn sp(stage: usize, iter: usize, extent: i64, lengths: &[i64]) -> Step {
    Step::Split(SplitStep {
        stage,
        iter,
        extent: Some(extent),
        lengths: lengths.iter().map(|&l| Some(l)).collect(),
        inner_to_outer: true,
    })
}

/// Ansor's CPU sketch of a matmul, filled in: C's local cache tiled "SSRSRS", C tiled
/// by following the cache's splits, the cache computed at C's second tile level, the
/// outer tiles fused and parallel, the innermost vectorized, an unroll pragma.
fn tiled_matmul_steps() -> Vec<Step> {
    vec![
        // stage 2 becomes C.local, C moves to 3
        Step::CacheWrite(CacheWriteStep {
            stage: 2,
            scope: "local".into(),
        }),
        // C.local: i, j, k
        sp(2, 0, 64, &[2, 1, 4]),  // 1: i -> i.0 i.1 i.2 i.3
        sp(2, 4, 64, &[1, 4, 16]), // 2: j -> j.0 j.1 j.2 j.3   (loops: i×4, j×4, k)
        sp(2, 8, 32, &[8]),        // 3: k -> k.0 k.1
        Step::Reorder(ReorderStep {
            stage: 2,
            // i.0 j.0 i.1 j.1 k.0 i.2 j.2 k.1 i.3 j.3
            order: vec![0, 4, 1, 5, 8, 2, 6, 9, 3, 7],
        }),
        // C follows the first two levels of the cache's splits
        Step::FollowSplit(FollowSplitStep {
            stage: 3,
            iter: 0,
            src_step: 1,
            n_split: 2,
        }),
        Step::FollowSplit(FollowSplitStep {
            stage: 3,
            iter: 3,
            src_step: 2,
            n_split: 2,
        }),
        Step::Reorder(ReorderStep {
            stage: 3,
            order: vec![0, 3, 1, 4, 2, 5],
        }),
        Step::ComputeAt(ComputeAtStep {
            stage: 2,
            target_stage: 3,
            target_iter: 3,
        }),
        Step::Fuse(FuseStep {
            stage: 3,
            iters: vec![0, 1],
        }),
        Step::Annotation(AnnotationStep {
            stage: 3,
            iter: 0,
            ann: IterAnnotation::Parallel,
        }),
        Step::Annotation(AnnotationStep {
            stage: 2,
            iter: 9,
            ann: IterAnnotation::Vectorize,
        }),
        Step::Pragma(PragmaStep {
            stage: 3,
            iter: 0,
            pragma: "auto_unroll_max_step$16".into(),
        }),
    ]
}

#[test]
fn replay_gives_the_program_of_the_same_primitives_called_by_hand() {
    let (dag, args) = matmul(64, 64, 32);
    let state = State::with_steps(&dag, tiled_matmul_steps()).unwrap();
    let replayed = state.replay().unwrap();
    let from_steps = lower(&replayed.schedule, &replayed.args, "f").unwrap();

    let c = &args[2];
    // A split with lengths [2, 1, 4] inner to outer is split(4), split(1), split(2)
    // from the inside out; following it at n_split 2 is lengths [2, 1·4].
    let mut s = Schedule::create(std::slice::from_ref(c)).unwrap();
    let cc = s.cache_write(c, StorageScope::Local).unwrap();
    let ax = s.axis(&cc).unwrap();
    let k = s.reduce_axis(&cc).unwrap();
    let i = {
        let (x, i3) = s.split(&cc, &ax[0], 4).unwrap();
        let (x, i2) = s.split(&cc, &x, 1).unwrap();
        let (i0, i1) = s.split(&cc, &x, 2).unwrap();
        [i0, i1, i2, i3]
    };
    let j = {
        let (x, j3) = s.split(&cc, &ax[1], 16).unwrap();
        let (x, j2) = s.split(&cc, &x, 4).unwrap();
        let (j0, j1) = s.split(&cc, &x, 1).unwrap();
        [j0, j1, j2, j3]
    };
    let (k0, k1) = s.split(&cc, &k[0], 8).unwrap();
    s.reorder(
        &cc,
        &[
            i[0].clone(),
            j[0].clone(),
            i[1].clone(),
            j[1].clone(),
            k0,
            i[2].clone(),
            j[2].clone(),
            k1,
            i[3].clone(),
            j[3].clone(),
        ],
    )
    .unwrap();
    let cax = s.axis(c).unwrap();
    let (x, ci2) = s.split(c, &cax[0], 4).unwrap();
    let (ci0, ci1) = s.split(c, &x, 2).unwrap();
    let (x, cj2) = s.split(c, &cax[1], 64).unwrap();
    let (cj0, cj1) = s.split(c, &x, 1).unwrap();
    s.reorder(
        c,
        &[ci0.clone(), cj0.clone(), ci1.clone(), cj1.clone(), ci2, cj2],
    )
    .unwrap();
    s.compute_at(&cc, c, &cj1).unwrap();
    let fused = s.fuse(c, &ci0, &cj0).unwrap();
    s.parallel(c, &fused).unwrap();
    s.vectorize(&cc, &j[3]).unwrap();
    s.pragma(c, &fused, "auto_unroll_max_step", tessera_ir::Expr::int(16))
        .unwrap();
    let by_hand = lower(&s, &args, "f").unwrap();
    assert_eq!(from_steps.to_string(), by_hand.to_string());
}

#[test]
fn the_printed_loop_nest() {
    let (dag, _) = matmul(64, 64, 32);
    let state = State::with_steps(&dag, tiled_matmul_steps()).unwrap();
    insta::assert_snapshot!(state.print().unwrap());
    let initial = State::new(&dag);
    insta::assert_snapshot!("initial", initial.print().unwrap());
}

#[test]
fn equal_histories_print_equally_and_different_ones_do_not() {
    let (dag, _) = matmul(64, 64, 32);
    let a = State::with_steps(&dag, tiled_matmul_steps()).unwrap();
    let b = State::with_steps(&dag, tiled_matmul_steps()).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.print().unwrap(), b.print().unwrap());
    let mut other = tiled_matmul_steps();
    other[3] = sp(2, 8, 32, &[4]);
    let c = State::with_steps(&dag, other).unwrap();
    assert_ne!(a, c);
    assert_ne!(a.print().unwrap(), c.print().unwrap());
}

#[test]
fn the_record_form_round_trips_in_tvm_layout() {
    let (dag, _) = matmul(64, 64, 32);
    let state = State::with_steps(&dag, tiled_matmul_steps()).unwrap();
    let v = state.steps_json();
    assert_eq!(v[0], json!(["CHW", 2, "local"]));
    assert_eq!(v[1], json!(["SP", 2, 0, 64, [2, 1, 4], 1]));
    assert_eq!(v[5], json!(["FSP", 3, 0, 1, 2]));
    assert_eq!(v[10], json!(["AN", 3, 0, 3]));
    assert_eq!(v[12], json!(["PR", 3, 0, "auto_unroll_max_step$16"]));
    let back = State::from_json(&dag, &v).unwrap();
    assert_eq!(back, state);
    // every kind of step, including ones this DAG cannot replay
    let all = vec![
        Step::Annotation(AnnotationStep {
            stage: 1,
            iter: 2,
            ann: IterAnnotation::Thread(tessera_ir::ThreadAxis::ThreadIdxY),
        }),
        Step::Fuse(FuseStep {
            stage: 1,
            iters: vec![0, 1, 2],
        }),
        Step::Split(SplitStep {
            stage: 1,
            iter: 0,
            extent: None,
            lengths: vec![None, Some(4)],
            inner_to_outer: false,
        }),
        Step::FollowFusedSplit(FollowFusedSplitStep {
            stage: 4,
            iter: 0,
            src_steps: vec![1, 2],
            level: 1,
            factor_or_nparts: true,
        }),
        Step::StorageAlign(StorageAlignStep {
            stage: 3,
            iter: 0,
            factor: 32,
            offset: 1,
        }),
        Step::ComputeInline(ComputeInlineStep { stage: 1 }),
        Step::ComputeRoot(ComputeRootStep { stage: 1 }),
        Step::CacheRead(CacheReadStep {
            stage: 0,
            scope: "shared".into(),
            readers: vec![3],
        }),
        Step::Rfactor(RfactorStep {
            stage: 2,
            iter: 1,
            factor_iter: 0,
        }),
    ];
    for s in all {
        let v = s.to_json();
        assert_eq!(Step::from_json(&v).unwrap(), s, "{v}");
        let text = serde_json::to_string(&v).unwrap();
        let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(Step::from_json(&parsed).unwrap(), s);
    }
}

#[test]
fn malformed_records_are_typed_errors() {
    for bad in [
        json!("SP"),
        json!([]),
        json!([3, 1]),
        json!(["XX", 1]),
        json!(["CI"]),
        json!(["CI", -1]),
        json!(["CI", 1, 2]),
        json!(["SP", 2, 0, 64, "four", 1]),
        json!(["SP", 2, 0, 64, [2.5], 1]),
        json!(["AN", 2, 0, 99]),
        json!(["RE", 2, [0, "a"]]),
        json!(["SP", 2, 0, 64, [2], 7]),
    ] {
        match Step::from_json(&bad) {
            Err(StateError::Json(msg)) => assert!(!msg.is_empty()),
            other => panic!("{bad}: {other:?}"),
        }
    }
    let (dag, _) = matmul(8, 8, 8);
    assert!(matches!(
        State::from_json(&dag, &json!({"steps": []})),
        Err(StateError::Json(_))
    ));
}

#[test]
fn an_invalid_step_is_refused_and_the_state_is_unchanged() {
    let (dag, _) = matmul(64, 64, 32);
    let mut state = State::new(&dag);
    state.push(sp(2, 0, 64, &[8])).unwrap();
    let before = state.print().unwrap();
    let cases: Vec<(Step, &str)> = vec![
        (
            Step::ComputeInline(ComputeInlineStep { stage: 9 }),
            "stage 9 does not exist",
        ),
        (sp(2, 7, 64, &[2]), "has 4 loops, not 8"),
        (
            Step::Reorder(ReorderStep {
                stage: 2,
                order: vec![0, 0, 1, 2],
            }),
            "not a permutation",
        ),
        (
            Step::FollowSplit(FollowSplitStep {
                stage: 2,
                iter: 2,
                src_step: 5,
                n_split: 1,
            }),
            "not before it",
        ),
        (
            Step::FollowSplit(FollowSplitStep {
                stage: 2,
                iter: 2,
                src_step: 0,
                n_split: 3,
            }),
            "n_split 3",
        ),
        (
            Step::Fuse(FuseStep {
                stage: 2,
                iters: vec![0, 2],
            }),
            "not consecutive",
        ),
        (
            Step::CacheWrite(CacheWriteStep {
                stage: 2,
                scope: "texture".into(),
            }),
            "unknown storage scope",
        ),
        (
            Step::Pragma(PragmaStep {
                stage: 2,
                iter: 0,
                pragma: "auto_unroll_max_step$many".into(),
            }),
            "not an integer",
        ),
        // the schedule's own refusals come through with the step's number
        (
            Step::Fuse(FuseStep {
                stage: 2,
                iters: vec![2, 3],
            }),
            "reduction",
        ),
        (
            Step::ComputeInline(ComputeInlineStep { stage: 0 }),
            "placeholder",
        ),
    ];
    for (step, want) in cases {
        let err = state.push(step.clone()).unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("step 1: "), "{step:?}: {msg}");
        assert!(msg.contains(want), "{step:?}: `{msg}` lacks `{want}`");
        assert_eq!(state.steps().len(), 1);
        assert_eq!(state.print().unwrap(), before);
    }
}

#[test]
fn a_sketch_replays_with_unfilled_lengths_as_one_and_is_not_complete() {
    let (dag, _) = matmul(64, 64, 32);
    let mut state = State::new(&dag);
    assert!(state.is_complete());
    state
        .push(Step::Split(SplitStep {
            stage: 2,
            iter: 0,
            extent: Some(64),
            lengths: vec![None, None],
            inner_to_outer: true,
        }))
        .unwrap();
    assert!(!state.is_complete());
    // i -> i.0 i.1 i.2, then j and k
    assert_eq!(
        state.replay().unwrap().schedule.stages()[2]
            .leaf_iter_vars
            .len(),
        5
    );
    let mut filled = state.steps().to_vec();
    filled[0] = sp(2, 0, 64, &[4, 2]);
    state.set_steps(filled).unwrap();
    assert!(state.is_complete());
    // a history that does not replay is refused and the state kept
    let kept = state.steps().to_vec();
    assert!(state
        .set_steps(vec![Step::ComputeInline(ComputeInlineStep { stage: 9 })])
        .is_err());
    assert_eq!(state.steps(), &kept[..]);
}

#[test]
fn a_fuse_of_three_loops_takes_them_by_their_positions_before_fusing() {
    let (dag, _) = matmul(64, 64, 32);
    let mut state = State::new(&dag);
    state.push(sp(2, 0, 64, &[4, 2])).unwrap(); // i.0 i.1 i.2 j k
    state
        .push(Step::Fuse(FuseStep {
            stage: 2,
            iters: vec![0, 1, 2],
        }))
        .unwrap();
    let r = state.replay().unwrap();
    let names: Vec<String> = r.schedule.stages()[2]
        .leaf_iter_vars
        .iter()
        .map(|iv| iv.name().to_string())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names[0].ends_with(".fused") && names[1] == "j" && names[2] == "k");
}
