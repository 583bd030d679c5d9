//! Template tasks of networks: which nodes templates take, their workload keys (the
//! keys record logs carry, so a change here orphans every earlier log), and
//! apply-history-best finding each tuned configuration again for the graph's groups.

use tessera_autotvm::network::{extract_template_tasks, Configurations, NetworkTemplateTask};
use tessera_backends::{HardwareParams, Target};
use tessera_graph::executor::{BuildContext, ScheduleHook};
use tessera_graph::zoo::{self, ZooOptions};
use tessera_graph::{fuse, group_compute, passes, Graph, Layout};
use tessera_search::apply::Appliers;
use tessera_search::record::{ApplyHistoryBest, Record};
use tessera_search::{MeasureErrorNo, MeasureResult, ScheduleDesc};

fn network(name: &str, layout: Layout) -> Graph {
    let opts = ZooOptions {
        layout,
        image_size: Some(64),
        ..ZooOptions::default()
    };
    let mut g = zoo::network(name, &opts).unwrap();
    passes::optimize(&mut g, Some(layout)).unwrap();
    g
}

fn table(tasks: &[NetworkTemplateTask]) -> String {
    tasks
        .iter()
        .map(|t| {
            format!(
                "{} x{} {}\n",
                t.task.template, t.weight, t.task.workload_key
            )
        })
        .collect()
}

#[test]
fn template_tasks_of_zoo_networks_keep_their_workload_keys() {
    let mut text = String::new();
    for (name, layout) in [
        ("mobilenet", Layout::Nhwc),
        ("resnet-18", Layout::Nhwc),
        ("resnet-18", Layout::Nchw),
    ] {
        let g = network(name, layout);
        text.push_str(&format!("== {name} {layout}\n"));
        text.push_str(&table(&extract_template_tasks(&g, 8)));
    }
    insta::assert_snapshot!(text);
}

/// A log with one successful record of configuration 0 for every task.
fn log_of(tasks: &[NetworkTemplateTask], target: &str) -> Vec<Record> {
    tasks
        .iter()
        .map(|t| {
            let c = t.task.space.get(0).unwrap();
            let result = MeasureResult {
                costs: vec![1e-3],
                error_no: MeasureErrorNo::NoError,
                error_msg: None,
                all_cost: 0.0,
                timestamp: 0,
                at_points: None,
            };
            Record::new(
                &t.task.workload_key,
                target,
                &t.task.template,
                ScheduleDesc::Config {
                    template: t.task.template.clone(),
                    index: c.index,
                    entity: t.task.space.entity_json(&c),
                },
                result,
            )
        })
        .collect()
}

#[test]
fn apply_history_best_finds_a_tuned_configuration_for_every_template_group() {
    let target = Target::cpu();
    let hw = HardwareParams {
        vector_unit_bytes: 32,
        ..HardwareParams::detect_host()
    };
    let ctx = BuildContext {
        target: target.clone(),
        hardware: hw.clone(),
    };
    for (name, layout) in [("mobilenet", Layout::Nhwc), ("resnet-18", Layout::Nchw)] {
        let g = network(name, layout);
        let tasks = extract_template_tasks(&g, hw.f32_lanes());
        let records = log_of(&tasks, &target.to_string());
        let applier = Configurations {
            lanes: hw.f32_lanes(),
        };
        let hook = Appliers::new(
            vec![Box::new(applier)],
            ApplyHistoryBest::new(&records),
            &target.to_string(),
        );
        let groups = fuse(&g);
        let mut anchored = 0;
        let mut tuned = 0;
        for grp in &groups {
            let gc = group_compute(&g, grp).unwrap();
            if gc.anchor.is_none() {
                continue;
            }
            anchored += 1;
            if ScheduleHook::schedule(&hook, &g, &gc, &ctx).is_some() {
                tuned += 1;
            }
        }
        let weights: usize = tasks.iter().map(|t| t.weight).sum();
        assert!(tuned > 0, "{name}: no group got a tuned schedule");
        assert_eq!(tuned, weights, "{name}: {anchored} anchored groups");
        assert!(hook.warnings().is_empty(), "{:?}", hook.warnings());
    }
}

#[test]
fn operator_tasks_are_the_template_tasks_of_a_network() {
    use tessera_autotvm::strategy::TemplateStrategy;
    use tessera_search::policy::{PolicyOptions, StrategyFactory};
    use tessera_search::tasks::operator_tasks;
    let target = Target::cpu();
    let hw = HardwareParams {
        vector_unit_bytes: 32,
        ..HardwareParams::detect_host()
    };
    let strategy = TemplateStrategy::new("random").unwrap();
    for (name, layout) in [
        ("mobilenet", Layout::Nhwc),
        ("resnet-18", Layout::Nhwc),
        ("resnet-18", Layout::Nchw),
    ] {
        let g = network(name, layout);
        let want: Vec<(String, String, usize)> = extract_template_tasks(&g, hw.f32_lanes())
            .into_iter()
            .map(|t| (t.task.workload_key, t.task.template, t.weight))
            .collect();
        let got: Vec<(String, String, usize)> = operator_tasks(&g, &target, &hw)
            .unwrap()
            .into_iter()
            .map(|t| {
                let p = strategy
                    .create(&t.task, &PolicyOptions::default())
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                let info = p.info();
                assert!(matches!(t.default, Some(Ok(_))), "{}", t.task.name);
                (info.workload_key, info.record_name, t.weight)
            })
            .collect();
        assert_eq!(got, want, "{name} {layout}");
    }
}
