use tessera_ir::{interp, DataType, ThreadAxis, StorageScope};
use tessera_te::*;

#[test]
fn smoke() {
    let a = placeholder(&[16, 12], DataType::float32(), "A").unwrap();
    let b = placeholder(&[12, 10], DataType::float32(), "B").unwrap();
    let c = ops::matmul(&a, &b).unwrap();
    let dag = ComputeDag::new(&[c.clone()]).unwrap();
    println!("{dag}{}\n{}", dag.flop_count(), dag.workload_key());
    let mut s = Schedule::create(&[c.clone()]).unwrap();
    let f = lower(&s, &[a.clone(), b.clone(), c.clone()], "mm").unwrap();
    println!("{f}");
    let ax = s.axis(&c).unwrap();
    let k = s.reduce_axis(&c).unwrap();
    let (io, jo, ii, ji) = s.tile(&c, &ax[0], &ax[1], 4, 3).unwrap();
    let (ko, ki) = s.split(&c, &k[0], 5).unwrap();
    s.reorder(&c, &[io.clone(), jo.clone(), ko.clone(), ii.clone(), ki.clone(), ji.clone()]).unwrap();
    s.vectorize(&c, &ji).unwrap();
    s.parallel(&c, &io).unwrap();
    let f2 = lower(&s, &[a.clone(), b.clone(), c.clone()], "mm").unwrap();
    println!("{f2}");
    let mk = |seed: u64, n: usize| (0..n).map(|i| ((i as u64 * 2654435761 + seed) % 17) as f64 / 7.0 - 1.0).collect::<Vec<_>>();
    let ha = interp::HostBuffer::from_f64(DataType::float32(), &[16, 12], &mk(1, 192));
    let hb = interp::HostBuffer::from_f64(DataType::float32(), &[12, 10], &mk(2, 120));
    let mut args1 = vec![ha.clone(), hb.clone(), interp::HostBuffer::zeros(DataType::float32(), &[16, 10])];
    let mut args2 = args1.clone();
    interp::run(&f, &mut args1).unwrap();
    interp::run(&f2, &mut args2).unwrap();
    for (x, y) in args1[2].to_f64().iter().zip(args2[2].to_f64()) { assert!((x - y).abs() < 1e-4, "{x} {y}"); }

    // cache_write + compute_at
    let mut s = Schedule::create(&[c.clone()]).unwrap();
    let cl = s.cache_write(&c, StorageScope::Local).unwrap();
    let ax = s.axis(&c).unwrap();
    let (io, jo, _ii, _ji) = s.tile(&c, &ax[0], &ax[1], 4, 4).unwrap();
    let _ = io;
    s.compute_at(&cl, &c, &jo).unwrap();
    let f3 = lower(&s, &[a.clone(), b.clone(), c.clone()], "mm").unwrap();
    println!("{f3}");
    let mut args3 = args1.clone();
    args3[2] = interp::HostBuffer::zeros(DataType::float32(), &[16, 10]);
    interp::run(&f3, &mut args3).unwrap();
    for (x, y) in args1[2].to_f64().iter().zip(args3[2].to_f64()) { assert!((x - y).abs() < 1e-4, "{x} {y}"); }

    // conv
    let d = placeholder(&[1, 9, 9, 4], DataType::float32(), "placeholder").unwrap();
    let w = placeholder(&[3, 3, 4, 8], DataType::float32(), "placeholder").unwrap();
    let cv = ops::conv2d_nhwc(&d, &w, (1, 1), (1, 1), (1, 1)).unwrap();
    let dag = ComputeDag::new(&[cv.clone()]).unwrap();
    println!("{dag}");
    let mut s = Schedule::create(&[cv.clone()]).unwrap();
    let pt = dag.ops[1].clone();
    let ax = s.axis(&cv).unwrap();
    s.compute_at(&pt, &cv, &ax[2]).unwrap();
    let f4 = lower(&s, &[d.clone(), w.clone(), cv.clone()], "conv").unwrap();
    println!("{f4}");
    let _ = ThreadAxis::BlockIdxX;
}
