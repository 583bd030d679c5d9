//! TVM's default storage scopes on a GPU: a stage left in the global scope and computed
//! inside a thread-bound loop is stored per thread (local) under `threadIdx`, per block
//! (shared) under `blockIdx` only; the region it computes is then one thread's or one
//! block's, not the whole tensor.

use tessera_ir::{DataType, Expr, ThreadAxis};
use tessera_te::{compute, lower, ops, placeholder, Schedule, Tensor};

fn matmul_relu() -> (Tensor, Tensor, Tensor, Tensor) {
    let a = placeholder(&[8, 8], DataType::float32(), "A").unwrap();
    let b = placeholder(&[8, 8], DataType::float32(), "B").unwrap();
    let c = ops::matmul(&a, &b).unwrap();
    let d = compute(&[8, 8], "D", &[], |ix| {
        Expr::max(c.at(ix), Expr::float(0.0))
    })
    .unwrap();
    (a, b, c, d)
}

/// `C` computed at loop `at` (0: the block loop, 1: the thread loop) of `D`, whose rows
/// are split over 2 blocks of 4 threads; the printed function.
fn lowered(at: usize) -> String {
    let (a, b, c, d) = matmul_relu();
    let mut s = Schedule::create(&[d.clone()]).unwrap();
    let i = s.axis(&d).unwrap()[0].clone();
    let (io, ii) = s.split(&d, &i, 4).unwrap();
    s.bind(&d, &io, ThreadAxis::BlockIdxX).unwrap();
    s.bind(&d, &ii, ThreadAxis::ThreadIdxX).unwrap();
    s.compute_at(&c, &d, if at == 0 { &io } else { &ii })
        .unwrap();
    lower(&s, &[a, b, d], "f").unwrap().to_string()
}

#[test]
fn under_thread_idx_a_stage_is_local_and_one_row() {
    let f = lowered(1);
    assert!(f.contains("allocate C: float32[1, 8], local"), "{f}");
}

#[test]
fn under_block_idx_a_stage_is_shared_and_one_block() {
    let f = lowered(0);
    assert!(f.contains("allocate C: float32[4, 8], shared"), "{f}");
}
