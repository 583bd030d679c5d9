//! Every template computes what its operator computes: random configurations of each
//! template, on small shapes with odd sizes, padding and strides, compiled and run against
//! the unscheduled operator (the measurer's correctness check).

use std::time::Duration;
use tessera_autotvm::templates::{TemplateKind, TemplateTask};
use tessera_autotvm::tuners::{RandomTuner, Tuner};
use tessera_backends::{CpuBackend, Target};
use tessera_runtime::runner::TimerConfig;
use tessera_search::measure::{Candidate, MeasureOptions, Measurer, ProgramError, Reference};
use tessera_search::MeasureErrorNo;
use tessera_te::ops::Conv2dAttrs;

fn kinds() -> Vec<TemplateKind> {
    let pad1 = Conv2dAttrs::new((1, 1), (1, 1), (1, 1));
    let s2 = Conv2dAttrs::new((2, 2), (1, 1), (1, 1)).with_padding(1, 0, 2, 1);
    vec![
        TemplateKind::Matmul { m: 12, n: 20, k: 9 },
        TemplateKind::Dense { m: 3, n: 24, k: 40 },
        TemplateKind::Dense { m: 1, n: 17, k: 64 },
        TemplateKind::BatchMatmul {
            b: 3,
            m: 5,
            n: 8,
            k: 16,
        },
        TemplateKind::Conv2dNhwc {
            n: 1,
            h: 9,
            w: 7,
            ci: 6,
            co: 8,
            kh: 3,
            kw: 3,
            attrs: pad1,
        },
        TemplateKind::Conv2dNchw {
            n: 2,
            h: 9,
            w: 11,
            ci: 4,
            co: 6,
            kh: 3,
            kw: 3,
            attrs: s2,
        },
        TemplateKind::Conv2dNchwc {
            n: 1,
            h: 8,
            w: 9,
            ci: 8,
            co: 16,
            kh: 3,
            kw: 3,
            ib: 4,
            ob: 8,
            attrs: pad1,
        },
        TemplateKind::DepthwiseNhwc {
            n: 1,
            h: 10,
            w: 9,
            c: 24,
            kh: 3,
            kw: 3,
            attrs: s2,
        },
    ]
}

#[test]
fn random_configurations_of_every_template_compute_the_operator() {
    let opts = MeasureOptions {
        run_timeout: Duration::from_secs(10),
        timer: TimerConfig {
            number: 1,
            repeat: 1,
            min_repeat_ms: 0.0,
            cache_flush: false,
        },
        ..MeasureOptions::default()
    };
    let mut m = Measurer::new(CpuBackend::new(Target::cpu()), opts).unwrap();
    for kind in kinds() {
        let task = TemplateTask::new(kind.clone(), 8).unwrap();
        let naive = task.naive("reference").unwrap();
        let reference = Reference::compute(m.backend(), &naive, 1, 5).unwrap();
        let mut tuner = RandomTuner::new(3);
        let picks = tuner.next_batch(&task.space, 6);
        let cands: Vec<Candidate> = picks
            .iter()
            .map(|&i| Candidate {
                func: task
                    .instantiate(&task.space.get(i).unwrap(), "cand")
                    .map_err(ProgramError::lowering),
            })
            .collect();
        let rs = m.measure(&cands, 1, Some(&reference));
        for (i, r) in picks.iter().zip(&rs) {
            assert_eq!(
                r.error_no,
                MeasureErrorNo::NoError,
                "{} config {i} ({:?}): {:?}",
                task.template,
                task.space.get(*i).unwrap(),
                r.error_msg
            );
        }
    }
}

#[test]
fn template_errors_are_typed() {
    let grouped = Conv2dAttrs::new((1, 1), (1, 1), (1, 1)).with_groups(2);
    let e = TemplateTask::new(
        TemplateKind::Conv2dNchw {
            n: 1,
            h: 8,
            w: 8,
            ci: 4,
            co: 4,
            kh: 3,
            kw: 3,
            attrs: grouped,
        },
        8,
    )
    .unwrap_err();
    assert!(e.to_string().contains("one group"), "{e}");
    let e = TemplateTask::new(
        TemplateKind::Conv2dNchwc {
            n: 1,
            h: 8,
            w: 8,
            ci: 6,
            co: 16,
            kh: 3,
            kw: 3,
            ib: 4,
            ob: 8,
            attrs: Conv2dAttrs::default(),
        },
        8,
    )
    .unwrap_err();
    assert!(e.to_string().contains("must divide"), "{e}");
    assert_eq!(TemplateKind::nchwc_blocks(64, 96, 8), (8, 8));
    assert_eq!(TemplateKind::nchwc_blocks(3, 64, 16), (1, 16));
}
