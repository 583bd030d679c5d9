//! The sizes a network's selections count (issue 61; [`crate::selection`]): one range
//! per NonZero, NonMaxSuppression and Compress, the builds that show what follows each
//! (at counts below its bound, at the counts the import kept), and a size per TopK whose
//! k a count decides, so that what follows a selection is a sum of sizes
//! ([`crate::dynamic`] compiles them).

use crate::dynamic::SizeRange;
use crate::ir::{Graph, Op};
use petgraph::stable_graph::NodeIndex;
use std::collections::HashMap;

/// A size per selection of `graph` ([`crate::selection`]): counted when the module
/// runs, from 0 to the count the graph was built at (its bound, where the import was
/// not told a smaller one), named after the selection.
pub fn selection_ranges(graph: &Graph) -> Vec<SizeRange> {
    graph
        .topo_order()
        .into_iter()
        .filter_map(|n| match graph.node(n).op {
            Op::Select { count, .. } => Some(SizeRange {
                name: graph.node(n).name.clone(),
                min: 0,
                max: count,
                produced: true,
            }),
            _ => None,
        })
        .collect()
}

/// `point` (one value per range) with each counted size at the count `graph` (built
/// for that point) has: a selection's bound may follow another count (a NonMaxSuppression
/// of the boxes a NonZero kept), and the import keeps each count within its bound.
pub fn counted_point(graph: &Graph, ranges: &[SizeRange], point: &[i64]) -> Vec<i64> {
    let mut actual = point.to_vec();
    for n in graph.topo_order() {
        if let Op::Select { count, .. } = graph.node(n).op {
            let name = &graph.node(n).name;
            if let Some(k) = ranges.iter().position(|r| r.produced && &r.name == name) {
                actual[k] = count;
            }
        }
    }
    actual
}

/// Points a build for `ranges` adds to those that vary each size near its largest
/// value: each counted size alone at 3, 2 and 1, where its range is longer, so that a
/// form that holds near the bound only (a slice of the first 20: `min(20, count)`) is
/// refused rather than taken for a constant.
pub fn selection_points(ranges: &[SizeRange]) -> Vec<Vec<i64>> {
    let maxes: Vec<i64> = ranges.iter().map(|r| r.max).collect();
    let mut points = Vec::new();
    for (k, r) in ranges.iter().enumerate().filter(|(_, r)| r.produced) {
        for v in [3, 2, 1].into_iter().filter(|&v| v < r.max) {
            let mut p = maxes.clone();
            p[k] = v;
            points.push(p);
        }
    }
    points
}

/// Builds `builds` (their points one value per range of `ranges`) with a size more per
/// TopK whose k differs between them (a k computed from a count: `min(1000, count)`),
/// named after the first TopK of its input, its value at each point the build's k: what
/// follows such a TopK (a concatenation of several levels' best boxes) is then a sum of
/// sizes. Its host step writes its k there when it runs.
pub fn with_top_k_counts(builds: &mut [(Vec<i64>, Graph)], ranges: &mut Vec<SizeRange>) {
    let Some((_, first)) = builds.first() else {
        return;
    };
    // per input, the first TopK's name and its k at every build
    let mut seen: Vec<NodeIndex> = Vec::new();
    let mut added: Vec<(String, Vec<i64>)> = Vec::new();
    for n in first.topo_order() {
        let Op::TopK { k, .. } = first.node(n).op else {
            continue;
        };
        let Some(&input) = first.args(n).first() else {
            continue;
        };
        if seen.contains(&input) {
            continue;
        }
        seen.push(input);
        let name = first.node(n).name.clone();
        let ks: Vec<i64> = builds
            .iter()
            .map(|(_, g)| {
                g.topo_order()
                    .into_iter()
                    .find(|&m| g.node(m).name == name)
                    .and_then(|m| match g.node(m).op {
                        Op::TopK { k, .. } => Some(k),
                        _ => None,
                    })
                    .unwrap_or(k)
            })
            .collect();
        if ks.iter().any(|&v| v != k) {
            added.push((name, ks));
        }
    }
    for (name, ks) in added {
        ranges.push(SizeRange {
            name,
            min: 0,
            max: ks[0],
            produced: true,
        });
        for ((point, _), v) in builds.iter_mut().zip(ks) {
            point.push(v);
        }
    }
}

/// The builds of `largest` (a network built at its selections' bounds, with no other
/// runtime size) that [`crate::dynamic::compile_dynamic`] needs, and their ranges: each
/// count alone one and two below its bound and at [`selection_points`], built by
/// `import` (the counts asked for, by selection) and placed at the counts it kept, each
/// point once; then a size per TopK whose k follows them ([`with_top_k_counts`]).
#[allow(clippy::type_complexity)]
pub fn counted_builds<E>(
    largest: Graph,
    mut import: impl FnMut(&HashMap<String, i64>) -> Result<Graph, E>,
) -> Result<(Vec<(Vec<i64>, Graph)>, Vec<SizeRange>), E> {
    let mut ranges = selection_ranges(&largest);
    let maxes: Vec<i64> = ranges.iter().map(|r| r.max).collect();
    let mut points: Vec<Vec<i64>> = Vec::new();
    for k in 0..maxes.len() {
        for step in [1, 2] {
            let mut p = maxes.clone();
            p[k] -= step;
            points.push(p);
        }
    }
    points.extend(selection_points(&ranges));
    points.retain(|p| p.iter().all(|&v| v >= 1));
    let mut builds = vec![(maxes, largest)];
    for p in points {
        let counts: HashMap<String, i64> = ranges
            .iter()
            .zip(&p)
            .map(|(r, &v)| (r.name.clone(), v))
            .collect();
        let g = import(&counts)?;
        let at = counted_point(&g, &ranges, &p);
        if builds.iter().all(|(q, _)| q != &at) {
            builds.push((at, g));
        }
    }
    with_top_k_counts(&mut builds, &mut ranges);
    Ok((builds, ranges))
}

/// Each selection of `graph` told the index of the size it counts: the range of its
/// name, which must be a counted one; every counted range has its selection.
pub(crate) fn tell_selections(graph: &mut Graph, ranges: &[SizeRange]) -> Result<(), String> {
    let mut told = vec![false; ranges.len()];
    for n in graph.topo_order() {
        let name = graph.node(n).name.clone();
        if let crate::ir::Op::Select { size, .. } = &mut graph.node_mut(n).op {
            let k = ranges
                .iter()
                .position(|r| r.produced && r.name == name)
                .ok_or_else(|| format!("`{name}`'s count has no range"))?;
            *size = Some(k);
            told[k] = true;
        }
    }
    // a TopK's k (with_top_k_counts) is told by its host step, on every target; so
    // is the TopK of the other output of the same selection
    let counted_inputs: Vec<NodeIndex> = graph
        .topo_order()
        .into_iter()
        .filter(|&n| {
            let name = &graph.node(n).name;
            matches!(graph.node(n).op, crate::ir::Op::TopK { .. })
                && ranges.iter().any(|r| r.produced && &r.name == name)
        })
        .filter_map(|n| graph.args(n).first().copied())
        .collect();
    for n in graph.topo_order() {
        let name = graph.node(n).name.clone();
        let input = graph.args(n).first().copied();
        if let crate::ir::Op::TopK { on_host, .. } = &mut graph.node_mut(n).op {
            if let Some(k) = ranges.iter().position(|r| r.produced && r.name == name) {
                told[k] = true;
            }
            if input.is_some_and(|i| counted_inputs.contains(&i)) {
                *on_host = true;
            }
        }
    }
    match ranges.iter().zip(&told).find(|(r, t)| r.produced && !**t) {
        Some((r, _)) => Err(format!("no selection counts {}", r.name)),
        None => Ok(()),
    }
}
