//! The configuration space: knob definitions, the mixed-radix index, random walks,
//! entities, and the spaces of the CPU templates.

use std::sync::Arc;
use tessera_autotvm::space::{AnnotatePolicy, ConfigSpace, SplitOptions, SplitPolicy};
use tessera_autotvm::templates::conv::ConvShape;
use tessera_autotvm::templates::{
    BatchMatmul, Conv2dNchw, Conv2dNchwc, Conv2dNhwc, Dense, DepthwiseNhwc, Matmul, Template,
    TemplateTask,
};

#[test]
fn split_policies() {
    let mut s = ConfigSpace::new();
    s.define_split("f", 16, SplitOptions::factors(2)).unwrap();
    s.define_split("f3", 8, SplitOptions::factors(3).with_max_factor(2))
        .unwrap();
    s.define_split(
        "p2",
        12,
        SplitOptions::factors(2).with_policy(SplitPolicy::Power2),
    )
    .unwrap();
    s.define_split(
        "p2nt",
        12,
        SplitOptions::factors(2)
            .with_policy(SplitPolicy::Power2)
            .with_no_tail(),
    )
    .unwrap();
    s.define_split(
        "v",
        6,
        SplitOptions::factors(2).with_policy(SplitPolicy::Verbose),
    )
    .unwrap();
    s.define_split(
        "c",
        10,
        SplitOptions::factors(2).with_policy(SplitPolicy::Candidate(vec![vec![5, 2], vec![3, 4]])),
    )
    .unwrap();
    let choices = |n: &str| -> Vec<Vec<i64>> {
        let k = s.knob(n).unwrap();
        (0..k.len()).map(|i| k.value_numbers(i)).collect()
    };
    assert_eq!(
        choices("f"),
        vec![vec![1, 16], vec![2, 8], vec![4, 4], vec![8, 2], vec![16, 1]]
    );
    assert_eq!(
        choices("f3"),
        vec![vec![2, 2, 2], vec![4, 1, 2], vec![4, 2, 1], vec![8, 1, 1]]
    );
    assert_eq!(
        choices("p2"),
        vec![vec![12, 1], vec![6, 2], vec![3, 4], vec![2, 8]]
    );
    assert_eq!(choices("p2nt"), vec![vec![12, 1], vec![6, 2], vec![3, 4]]);
    assert_eq!(
        choices("v"),
        vec![vec![1, 6], vec![2, 3], vec![3, 2], vec![6, 1], vec![2, 4]]
    );
    assert_eq!(choices("c"), vec![vec![5, 2], vec![3, 4]]);
    let e = s
        .define_split("f", 4, SplitOptions::factors(2))
        .unwrap_err()
        .to_string();
    assert!(e.contains("defined twice"), "{e}");
    let e = s
        .define_split(
            "bad",
            10,
            SplitOptions::factors(2).with_policy(SplitPolicy::Candidate(vec![vec![2, 2]])),
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not cover"), "{e}");
}

#[test]
fn mixed_radix_index_walk_and_entity() {
    let mut s = ConfigSpace::new();
    s.define_split("tile", 8, SplitOptions::factors(2)).unwrap(); // 4 choices
    s.define_reorder("re", 3, None).unwrap(); // 6
    s.define_annotate("an", 2, AnnotatePolicy::TryUnrollVec)
        .unwrap(); // 4
    s.define_knob("unroll", &[0, 16, 64]).unwrap(); // 3
    assert_eq!(s.len(), 4 * 6 * 4 * 3);
    for i in 0..s.len() {
        let c = s.get(i).unwrap();
        assert_eq!(s.index_of(&c.choices).unwrap(), i);
        let e = s.entity_json(&c);
        assert_eq!(s.from_entity(&e).unwrap(), c);
    }
    // knob 0 is the least significant digit
    assert_eq!(s.get(1).unwrap().choices, vec![1, 0, 0, 0]);
    assert_eq!(s.get(4).unwrap().choices, vec![0, 1, 0, 0]);
    assert!(s.get(s.len()).is_err());
    let mut x = 7u64;
    let mut rng = || {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        x >> 33
    };
    for i in [0, 17, 200, 287] {
        let j = s.random_walk(i, &mut rng).unwrap();
        let (a, b) = (s.get(i).unwrap().choices, s.get(j).unwrap().choices);
        assert_eq!(
            a.iter().zip(&b).filter(|(p, q)| p != q).count(),
            1,
            "{a:?} -> {b:?}"
        );
    }
    insta::assert_snapshot!(s.entity_json(&s.get(123).unwrap()).to_string(), @r#"[["tile","sp",[8,1]],["re","re",[0,1,2]],["an","an",["unroll","unroll"]],["unroll","ot",16]]"#);
}

fn conv3x3(h: i64, ci: i64, co: i64) -> ConvShape {
    ConvShape {
        n: 1,
        h,
        w: h,
        ci,
        co,
        kh: 3,
        kw: 3,
        attrs: tessera_te::ops::Conv2dAttrs::new((1, 1), (1, 1), (1, 1)),
    }
}

#[test]
fn template_spaces() {
    let mm = TemplateTask::of(
        Matmul {
            m: 1024,
            n: 1024,
            k: 1024,
        },
        16,
    )
    .unwrap();
    let conv = TemplateTask::of(Conv2dNhwc(conv3x3(56, 64, 64)), 16).unwrap();
    let dense = TemplateTask::of(
        Dense {
            m: 1,
            n: 1000,
            k: 512,
        },
        16,
    )
    .unwrap();
    let a = tessera_te::ops::Conv2dAttrs::new((1, 1), (1, 1), (1, 1));
    let more: [Arc<dyn Template>; 4] = [
        Arc::new(BatchMatmul {
            b: 12,
            m: 128,
            n: 128,
            k: 64,
        }),
        Arc::new(Conv2dNchw(conv3x3(56, 64, 64))),
        Arc::new(Conv2dNchwc {
            shape: conv3x3(56, 64, 64),
            ib: 16,
            ob: 16,
        }),
        Arc::new(DepthwiseNhwc {
            n: 1,
            h: 112,
            w: 112,
            c: 32,
            kh: 3,
            kw: 3,
            attrs: a,
        }),
    ];
    let mut text = format!("{}\n{}\n{}", mm.space, conv.space, dense.space);
    for k in more {
        let t = TemplateTask::new(k, 16).unwrap();
        text.push_str(&format!("\n{}:\n{}", t.template, t.space));
    }
    insta::assert_snapshot!(text);
    assert!(mm.workload_key.starts_with("matmul.x86:[\""));
    assert_eq!(mm.flop, 2.0 * 1024f64.powi(3));
}

/// TVM's `FallbackConfigEntity`: each split's inner factors 1, every other knob its first
/// choice (VTA's template's: `plugins/vta/tests/template.rs`).
#[test]
fn the_fallback_configuration_is_tvms() {
    let mut s = ConfigSpace::new();
    s.define_split("f", 12, SplitOptions::factors(3)).unwrap();
    s.define_knob("k", &[4, 8]).unwrap();
    let c = s.fallback().unwrap();
    assert_eq!(s.knob_numbers(&c), vec![12, 1, 1, 4]);
    assert_eq!(s.get(c.index).unwrap(), c);
}
