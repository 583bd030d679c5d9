//! The GPU passes on hand-built kernels: the host/device split's kernels and launch
//! extents (and what it refuses), where storage synchronization puts barriers (and the
//! barrier it refuses inside a condition), and the allreduce tree, run by the reference
//! interpreter for every extent up to 70.

use tessera_ir::interp::{run, HostBuffer};
use tessera_ir::transform::{split_host_device, storage_sync, thread_allreduce, AllreduceInfo};
use tessera_ir::{
    BinOp, Buffer, DataType, Expr, ForKind, PrimFunc, Stmt, StorageScope, ThreadAxis, Var,
};

fn thread_loop(v: &Var, extent: i64, body: Stmt) -> Stmt {
    Stmt::for_loop(
        v.clone(),
        Expr::int(0),
        Expr::int(extent),
        ForKind::ThreadBinding(ThreadAxis::ThreadIdxX),
        body,
    )
}

fn shared(name: &str, n: i64) -> Buffer {
    Buffer::global(name, DataType::float32(), &[n]).with_scope(StorageScope::Shared)
}

fn count(text: &str, what: &str) -> usize {
    text.matches(what).count()
}

#[test]
fn each_top_level_nest_is_a_kernel_with_its_thread_extents() {
    let a = Buffer::global("A", DataType::float32(), &[128]);
    let b = Buffer::global("B", DataType::float32(), &[128]);
    let c = Buffer::global("C", DataType::float32(), &[4]);
    let tmp = Buffer::global("T", DataType::float32(), &[128]);
    // kernel 1: T[b*32 + t] = A[...] * 2 over 4 blocks of 32 threads
    let (bx, tx) = (Var::int("bx"), Var::int("tx"));
    let idx = bx.to_expr() * 32 + tx.to_expr();
    let k1 = Stmt::for_loop(
        bx.clone(),
        Expr::int(0),
        Expr::int(4),
        ForKind::ThreadBinding(ThreadAxis::BlockIdxX),
        thread_loop(
            &tx,
            32,
            Stmt::store(&tmp, vec![idx.clone()], Expr::load(&a, vec![idx]) * 2.0),
        ),
    );
    // kernel 2: one block, a 64-float shared buffer, 16 threads: C[t] = T[t] for t < 4
    let red = shared("S", 64);
    let t2 = Var::int("t2");
    let k2 = Stmt::allocate(
        red.clone(),
        thread_loop(
            &t2,
            16,
            Stmt::seq(vec![
                Stmt::store(
                    &red,
                    vec![t2.to_expr()],
                    Expr::load(&tmp, vec![t2.to_expr()]),
                ),
                Stmt::if_then(
                    t2.to_expr().lt(4),
                    Stmt::store(&c, vec![t2.to_expr()], Expr::load(&red, vec![t2.to_expr()])),
                ),
            ]),
        ),
    );
    let body = Stmt::allocate(tmp.clone(), Stmt::seq(vec![k1, k2]));
    let f = PrimFunc::new("f", vec![a.clone(), b, c.clone()], body);
    let split = split_host_device(&f).unwrap();
    assert_eq!(split.workspaces, vec![tmp.clone()]);
    assert_eq!(split.kernels.len(), 2);
    let (first, second) = (&split.kernels[0], &split.kernels[1]);
    assert_eq!(first.name, "f_kernel");
    assert_eq!(second.name, "f_kernel_1");
    assert_eq!(first.launch.grid, [4, 1, 1]);
    assert_eq!(first.launch.block, [32, 1, 1]);
    assert_eq!(first.launch.shared_bytes, 0);
    assert_eq!(second.launch.grid, [1, 1, 1]);
    assert_eq!(second.launch.block, [16, 1, 1]);
    assert_eq!(second.launch.shared_bytes, 64 * 4);
    // parameters: the function's it uses (B is unused), then the workspace
    assert_eq!(first.params, vec![a, tmp.clone()]);
    assert_eq!(second.params, vec![c, tmp]);
}

#[test]
fn a_block_loop_under_a_host_loop_is_refused() {
    let a = Buffer::global("A", DataType::float32(), &[8, 4]);
    let (i, bx) = (Var::int("i"), Var::int("bx"));
    let inner = Stmt::for_loop(
        bx.clone(),
        Expr::int(0),
        Expr::int(4),
        ForKind::ThreadBinding(ThreadAxis::BlockIdxX),
        Stmt::store(&a, vec![i.to_expr(), bx.to_expr()], Expr::float(1.0)),
    );
    let body = Stmt::for_loop(i, Expr::int(0), Expr::int(8), ForKind::Serial, inner);
    let err = split_host_device(&PrimFunc::new("g", vec![a], body))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("split_host_device") && err.contains("`g`"),
        "{err}"
    );
}

/// `S[t] = A[t]`, then `B[t] = S[(t + 1) % n]` in a second thread loop: another
/// thread's element, so a barrier between the two loops. With `own`, one thread loop
/// does `S[t] = A[t]; B[t] = S[t]`: each thread reads back its own element, no barrier.
fn exchange(n: i64, own: bool) -> (Stmt, tessera_ir::transform::ThreadExtents) {
    let a = Buffer::global("A", DataType::float32(), &[n]);
    let b = Buffer::global("B", DataType::float32(), &[n]);
    let s = shared("S", n);
    let (t1, t2) = (Var::int("t1"), Var::int("t2"));
    let write = Stmt::store(&s, vec![t1.to_expr()], Expr::load(&a, vec![t1.to_expr()]));
    let body = if own {
        let read = Stmt::store(&b, vec![t1.to_expr()], Expr::load(&s, vec![t1.to_expr()]));
        thread_loop(&t1, n, Stmt::seq(vec![write, read]))
    } else {
        let other = Expr::floormod(t2.to_expr() + 1, Expr::int(n));
        Stmt::seq(vec![
            thread_loop(&t1, n, write),
            thread_loop(
                &t2,
                n,
                Stmt::store(&b, vec![t2.to_expr()], Expr::load(&s, vec![other])),
            ),
        ])
    };
    let f = PrimFunc::new("x", vec![a, b], Stmt::allocate(s.clone(), body));
    let split = split_host_device(&f).unwrap();
    let k = &split.kernels[0];
    (k.body.clone(), k.launch.clone())
}

#[test]
fn a_barrier_goes_between_a_shared_write_and_another_threads_read() {
    let (body, launch) = exchange(32, false);
    let synced = storage_sync("x_kernel", &body, &launch)
        .unwrap()
        .to_string();
    assert_eq!(count(&synced, "sync(shared)"), 1, "{synced}");
    let sync_at = synced.find("sync(shared)").unwrap();
    assert!(synced.find("S[t1]").unwrap() < sync_at, "{synced}");
    assert!(sync_at < synced.find("B[t2]").unwrap(), "{synced}");
    // each thread reading back its own element needs no barrier: the body is unchanged
    let (own, launch) = exchange(32, true);
    let same = storage_sync("x_kernel", &own, &launch).unwrap();
    assert!(same.same_as(&own), "{same}");
}

#[test]
fn a_barrier_needed_inside_a_condition_is_refused() {
    let (body, launch) = exchange(32, false);
    let guarded = Stmt::if_then(Var::int("flag").to_expr().lt(2), body);
    let err = storage_sync("x_kernel", &guarded, &launch)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("storage_sync") && err.contains("x_kernel"),
        "{err}"
    );
    assert!(err.contains("inside a condition"), "{err}");
    // inside a thread loop narrower than its axis's launch extent (it runs guarded):
    // each thread writes its element, then reads its neighbour's
    let a = Buffer::global("A", DataType::float32(), &[32]);
    let s = shared("S", 32);
    let t = Var::int("t");
    let other = Expr::floormod(t.to_expr() + 1, Expr::int(32));
    let body = Stmt::allocate(
        s.clone(),
        thread_loop(
            &t,
            32,
            Stmt::seq(vec![
                Stmt::store(&s, vec![t.to_expr()], Expr::load(&a, vec![t.to_expr()])),
                Stmt::store(&a, vec![t.to_expr()], Expr::load(&s, vec![other])),
            ]),
        ),
    );
    let mut wide = launch.clone();
    wide.block[0] = 64;
    let err = storage_sync("x_kernel", &body, &wide)
        .unwrap_err()
        .to_string();
    assert!(err.contains("extent 32 of 64"), "{err}");
    // launched exactly as wide, the same barrier is fine
    let synced = storage_sync("x_kernel", &body, &launch)
        .unwrap()
        .to_string();
    assert_eq!(count(&synced, "sync(shared)"), 1, "{synced}");
}

#[test]
fn two_barriers_in_a_row_are_one_even_across_nesting() {
    let s = shared("S", 8);
    let t = Var::int("t");
    let write = thread_loop(&t, 8, Stmt::store(&s, vec![t.to_expr()], Expr::float(0.0)));
    // a nested statement ending with a barrier, then a barrier of its own
    let nested = Stmt::attr(
        "k",
        Expr::int(0),
        Stmt::seq(vec![write, Stmt::storage_sync(StorageScope::Shared)]),
    );
    let body = Stmt::allocate(
        s,
        Stmt::seq(vec![nested, Stmt::storage_sync(StorageScope::Shared)]),
    );
    let launch = tessera_ir::transform::ThreadExtents {
        grid: [1; 3],
        block: [8, 1, 1],
        shared_bytes: 32,
    };
    let synced = storage_sync("k", &body, &launch).unwrap().to_string();
    assert_eq!(count(&synced, "sync(shared)"), 1, "{synced}");
}

#[test]
fn the_allreduce_tree_combines_every_extent() {
    for extent in 1..=70i64 {
        for op in [BinOp::Add, BinOp::Max] {
            let red = shared("red", extent);
            let tree = thread_allreduce(&red, op, ThreadAxis::ThreadIdxX, extent);
            // one partial result is the result: no tree, nothing for a dialect to replace
            if extent > 1 {
                let info = AllreduceInfo::of(&tree).expect("the tree announces itself");
                let want = (op, extent, ThreadAxis::ThreadIdxX);
                assert_eq!((info.op, info.extent, info.axis), want);
            }
            let f = PrimFunc::new("r", vec![red], tree);
            let vals: Vec<f64> = (0..extent).map(|i| ((i * 37) % 23) as f64 - 7.0).collect();
            let mut args = [HostBuffer::from_f64(
                DataType::float32(),
                &[extent as usize],
                &vals,
            )];
            run(&f, &mut args).unwrap();
            let want = match op {
                BinOp::Add => vals.iter().sum::<f64>(),
                _ => vals.iter().cloned().fold(f64::MIN, f64::max),
            };
            assert_eq!(args[0].to_f64()[0], want, "extent {extent} {op:?}");
        }
    }
}
