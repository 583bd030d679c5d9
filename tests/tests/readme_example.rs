//! The library example of README.md, kept compiling and running.

use tessera_backends::{Backend, CpuBackend, Target};
use tessera_ir::DataType;
use tessera_runtime::{Module, NDArray, TimeEvaluator};
use tessera_te::{lower, ops, placeholder, ComputeDag, Schedule};

#[test]
fn readme_library_example() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let a = placeholder(&[512, 512], DataType::float32(), "A")?;
    let b = placeholder(&[512, 512], DataType::float32(), "B")?;
    let c = ops::matmul(&a, &b)?;
    assert!(ComputeDag::new(&[c.clone()])?
        .to_string()
        .contains("C(i, j) += (A[i, k]*B[k, j])"));

    let mut s = Schedule::create(&[c.clone()])?;
    let ax = s.axis(&c)?;
    let (io, _jo, _ii, ji) = s.tile(&c, &ax[0], &ax[1], 32, 16)?;
    s.vectorize(&c, &ji)?;
    s.parallel(&c, &io)?;
    let f = lower(&s, &[a, b, c], "matmul")?;

    let backend = CpuBackend::new(Target::cpu());
    let module = Module::load(&backend.build(&f, dir.path())?)?;
    let f32 = DataType::float32();
    let mut x = NDArray::random_uniform(f32, &[512, 512], 0, -1.0, 1.0)?;
    let mut y = NDArray::random_uniform(f32, &[512, 512], 1, -1.0, 1.0)?;
    let mut z = NDArray::zeros(f32, &[512, 512])?;
    module.call(&mut [&mut x, &mut y, &mut z])?;
    let t = module.time_with(
        &TimeEvaluator {
            repeat: 3,
            min_repeat_ms: 100.0,
            ..Default::default()
        },
        &mut [&mut x, &mut y, &mut z],
    )?;
    assert_eq!(t.results.len(), 3);
    // Spot-check one element against a plain dot product.
    let (xs, ys, zs) = (
        x.as_slice::<f32>()?,
        y.as_slice::<f32>()?,
        z.as_slice::<f32>()?,
    );
    let want: f32 = (0..512).map(|k| xs[7 * 512 + k] * ys[k * 512 + 9]).sum();
    assert!((zs[7 * 512 + 9] - want).abs() < 1e-3);
    Ok(())
}

#[test]
fn readme_network_example() -> Result<(), Box<dyn std::error::Error>> {
    use tessera_driver::{NetworkSource, NetworkSpec, Toolchain};
    use tessera_graph::{extract_tasks, Layout};

    // the plugins found in the usual places, no pipeline extension (tuned builds add
    // the strategies' ones)
    let registry = tessera_plugin::discover(&[], &tessera_plugin::plugin_dirs());
    let toolchain = Toolchain::new(registry, Vec::new());
    let spec =
        NetworkSpec::new(NetworkSource::zoo("resnet-18"), Target::cpu()).with_layout(Layout::Nhwc);
    let net = toolchain.optimized(&spec)?;
    let (tasks, weights) = extract_tasks(&net, &Target::cpu())?;
    assert_eq!((tasks.len(), weights.iter().sum::<usize>()), (29, 31));
    let dag = tasks[1].dag.to_string();
    assert!(
        dag.contains("conv2d_nhwc") && dag.contains("T_relu"),
        "{dag}"
    );

    let (mut m, _report) = toolchain.build(&spec, None)?;
    let x = NDArray::random_uniform(DataType::float32(), &[1, 224, 224, 3], 0, -1.0, 1.0)?;
    m.set_input("data", &x)?;
    m.run()?;
    let probs = m.get_output(0)?;
    assert_eq!(probs.shape(), &[1, 1000]);
    let sum: f64 = probs.to_f64_vec().iter().sum();
    assert!((sum - 1.0).abs() < 1e-4, "{sum}");
    let t = toolchain.benchmark(&mut m, &TimeEvaluator::new(1, 2, 0.0))?;
    assert_eq!(t.results.len(), 2);
    println!("{t}");
    Ok(())
}
