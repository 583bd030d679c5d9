//! Every template computes what its operator computes: random configurations of each
//! template, on small shapes with odd sizes, padding and strides, compiled and run against
//! the unscheduled operator (the measurer's correctness check).

use std::sync::Arc;
use std::time::Duration;
use tessera_autotvm::templates::conv::ConvShape;
use tessera_autotvm::templates::{
    BatchMatmul, Conv2dNchw, Conv2dNchwc, Conv2dNhwc, Dense, DepthwiseNhwc, Matmul, Template,
    TemplateTask,
};
use tessera_autotvm::tuners::{RandomTuner, Tuner};
use tessera_backends::{CpuBackend, Target};
use tessera_runtime::runner::TimerConfig;
use tessera_search::measure::{Candidate, MeasureOptions, Measurer, ProgramError, Reference};
use tessera_search::MeasureErrorNo;
use tessera_te::ops::Conv2dAttrs;

fn conv(n: i64, h: i64, w: i64, ci: i64, co: i64, attrs: Conv2dAttrs) -> ConvShape {
    ConvShape {
        n,
        h,
        w,
        ci,
        co,
        kh: 3,
        kw: 3,
        attrs,
    }
}

fn kinds() -> Vec<Arc<dyn Template>> {
    let pad1 = Conv2dAttrs::new((1, 1), (1, 1), (1, 1));
    let s2 = Conv2dAttrs::new((2, 2), (1, 1), (1, 1)).with_padding(1, 0, 2, 1);
    vec![
        Arc::new(Matmul { m: 12, n: 20, k: 9 }),
        Arc::new(Dense { m: 3, n: 24, k: 40 }),
        Arc::new(Dense { m: 1, n: 17, k: 64 }),
        Arc::new(BatchMatmul {
            b: 3,
            m: 5,
            n: 8,
            k: 16,
        }),
        Arc::new(Conv2dNhwc(conv(1, 9, 7, 6, 8, pad1))),
        Arc::new(Conv2dNchw(conv(2, 9, 11, 4, 6, s2))),
        Arc::new(Conv2dNchwc {
            shape: conv(1, 8, 9, 8, 16, pad1),
            ib: 4,
            ob: 8,
        }),
        Arc::new(DepthwiseNhwc {
            n: 1,
            h: 10,
            w: 9,
            c: 24,
            kh: 3,
            kw: 3,
            attrs: s2,
        }),
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
        let task = TemplateTask::new(kind, 8).unwrap();
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
    let e = TemplateTask::of(Conv2dNchw(conv(1, 8, 8, 4, 4, grouped)), 8).unwrap_err();
    assert!(e.to_string().contains("one group"), "{e}");
    let nchwc = Conv2dNchwc {
        shape: conv(1, 8, 8, 6, 16, Conv2dAttrs::default()),
        ib: 4,
        ob: 8,
    };
    let e = TemplateTask::of(nchwc, 8).unwrap_err();
    assert!(e.to_string().contains("must divide"), "{e}");
    assert_eq!(Conv2dNchwc::blocks(64, 96, 8), (8, 8));
    assert_eq!(Conv2dNchwc::blocks(3, 64, 16), (1, 16));
}
