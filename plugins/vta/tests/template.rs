//! The `conv2d_packed.vta` template as the template tuner sees it once registered: its
//! fallback configuration is TVM's, a configuration reaches the backend as the typed
//! annotation it was made from, and it tunes `vta` kernels only, where the CPU's
//! templates tune none.

use tessera_autotvm::templates::{register_templates, template_fits, TemplateTask, Untuned};
use tessera_backends::Target;
use tessera_te::catalog::{OpAttrs, OpSpec};
use tessera_vta::annotation;
use tessera_vta::conv2d::{Epilogue, Knobs};
use tessera_vta::network::template::TEMPLATES;

/// A 14×14 conv of 64 → 128 channels, 3×3, stride 1, pad 1, through the table.
fn task() -> TemplateTask {
    register_templates(TEMPLATES);
    let attrs = OpAttrs {
        stride: 1,
        pad: Some(1),
        ..Default::default()
    };
    let spec = OpSpec::new("conv2d_packed", &[1, 14, 14, 64, 128, 3, 3], attrs).unwrap();
    TemplateTask::from_op(&spec, 16)
        .expect("VTA's template is registered")
        .unwrap()
}

#[test]
fn the_fallback_configuration_is_every_tile_one_and_one_thread() {
    let t = task();
    assert_eq!(t.template, "conv2d_packed.vta");
    assert!(matches!(t.def.untuned(), Untuned::FallbackConfig { .. }));
    let c = t.space.fallback().unwrap();
    let (_, k) = annotation::read(&t.instantiate(&c, "k").unwrap())
        .expect("a VTA kernel")
        .unwrap();
    let one = Knobs {
        tile_b: 1,
        tile_h: 1,
        tile_w: 1,
        tile_ci: 1,
        tile_co: 1,
        oc_nthread: 1,
        h_nthread: 1,
    };
    assert_eq!(k, one);
}

#[test]
fn a_configuration_reaches_the_backend_as_its_annotation() {
    let t = task();
    for index in [0, 7, t.space.len() / 2, t.space.len() - 1] {
        let c = t.space.get(index).unwrap();
        let numbers = t.space.knob_numbers(&c);
        let func = t.instantiate(&c, "k").unwrap();
        let (w, k) = annotation::read(&func).expect("a VTA kernel").unwrap();
        // splits give (outer, inner) and the thread knobs one value, in definition order
        let inner = |i: usize| numbers[2 * i + 1] as usize;
        let want = Knobs {
            tile_b: inner(0),
            tile_h: inner(1),
            tile_w: inner(2),
            tile_ci: inner(3),
            tile_co: inner(4),
            oc_nthread: numbers[10] as usize,
            h_nthread: numbers[11] as usize,
        };
        assert_eq!(k, want, "configuration {index}");
        assert_eq!(
            (w.n, w.ci, w.h, w.w, w.co, w.kh, w.kw),
            (1, 4, 14, 14, 8, 3, 3)
        );
        assert_eq!((w.stride, w.pad), ((1, 1), (1, 1)));
        let catalog = Epilogue {
            bias: false,
            shift: 8,
            round: false,
            clip: (0, 127),
        };
        assert_eq!(w.epilogue, catalog);
    }
}

#[test]
fn vta_takes_its_own_templates_only() {
    let _ = task();
    let (vta, cpu) = (
        "vta".parse::<Target>().unwrap(),
        "cpu".parse::<Target>().unwrap(),
    );
    assert!(template_fits(&vta, "conv2d_packed.vta"));
    assert!(!template_fits(&cpu, "conv2d_packed.vta"));
    assert!(template_fits(&cpu, "conv2d_nchw.x86"));
    assert!(!template_fits(&vta, "conv2d_nchw.x86"));
    assert!(!template_fits(&cpu, "no_such.x86"));
}
