//! Fusion and task extraction on the zoo's resnet-18 and mobilenet (NHWC, batch 1): the
//! task lists with their compute DAGs are snapshots; the weights sum to the number of
//! fused groups that run a kernel, and the one group that only relabels its input (the
//! flatten after the pooling) is no task.

use tessera_backends::Target;
use tessera_graph::zoo::{network, ZooOptions};
use tessera_graph::{extract_tasks, fuse, passes, print_tasks, Layout};

fn tasks_of(name: &str) -> (String, usize, usize) {
    let opts = ZooOptions {
        layout: Layout::Nhwc,
        ..ZooOptions::default()
    };
    let mut g = network(name, &opts).unwrap();
    passes::optimize(&mut g, Some(Layout::Nhwc)).unwrap();
    let all = fuse(&g);
    let views: Vec<_> = all.iter().filter(|x| x.view_of(&g).is_some()).collect();
    assert_eq!(
        views.len(),
        1,
        "{name}: the flatten after the pooling is a view"
    );
    assert!(matches!(
        g.node(views[0].output()).op,
        tessera_graph::Op::Flatten | tessera_graph::Op::Reshape { .. }
    ));
    let groups = all.len() - views.len();
    let (tasks, weights) = extract_tasks(&g, &Target::cpu()).unwrap();
    assert_eq!(
        weights.iter().sum::<usize>(),
        groups,
        "{name}: weights vs fused groups that run a kernel"
    );
    (print_tasks(&tasks, &weights), tasks.len(), groups)
}

#[test]
fn resnet18_nhwc_tasks() {
    let (text, tasks, groups) = tasks_of("resnet-18");
    assert_eq!(text.matches("========== Task ").count(), tasks);
    insta::assert_snapshot!(format!("{tasks} tasks, {groups} fused groups\n\n{text}"));
}

#[test]
fn mobilenet_nhwc_tasks() {
    let (text, tasks, groups) = tasks_of("mobilenet");
    assert_eq!(text.matches("========== Task ").count(), tasks);
    insta::assert_snapshot!(format!("{tasks} tasks, {groups} fused groups\n\n{text}"));
}
