//! A network compiled for ranges of sizes (issue 61): `--shape` arguments whose
//! dimensions may be ranges (`input_ids=1,1..128`), named sizes and sums of them (a
//! decoder's `past_key_values.0.key=1,12,past:0..96,64`, `input_ids=1,seq:1..32`,
//! `attention_mask=1,past+seq`), and the build that imports the network at the largest
//! sizes and at smaller ones and compiles one module for all of them
//! ([`tessera_graph::dynamic`]).

use crate::history::holds_configurations;
use crate::{Build, BuildReport, DriverError, NetworkSource, NetworkSpec, Toolchain};
use std::collections::HashMap;
use tessera_graph::dynamic::{
    compile_prepared, counted_point, describe, prepare_dynamic, selection_points, selection_ranges,
    with_top_k_counts, RangeNetwork, SizeDim, SizeRange,
};
use tessera_graph::GraphError;
use tessera_search::record::{ApplyHistoryBest, LoadedLog};
use tessera_search::tasks::pick_algorithms;

/// One dimension of a `--shape` argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShapeDim {
    Fixed(i64),
    /// `[NAME:]MIN..MAX`: a size known only when the module runs; unnamed ranges with
    /// the same bounds are one size.
    Range {
        name: Option<String>,
        min: i64,
        max: i64,
    },
    /// `NAME[+NAME…][+K]`: named sizes (each given a range somewhere) and a constant.
    Sum {
        sizes: Vec<String>,
        offset: i64,
    },
}

/// Where a spec's runtime sizes are: their ranges and the input dimensions that follow
/// them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeSize {
    pub ranges: Vec<SizeRange>,
    /// `(input, dimension)`.
    pub at: Vec<(String, SizeDim)>,
}

impl std::fmt::Display for RuntimeSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&describe(&self.ranges))
    }
}

/// Parses `NAME=D0,D1,…`, where a dimension is a positive integer, a range
/// `[SIZE:]MIN..MAX` of them (MIN may be 0), or a sum `SIZE[+SIZE…][+K]` of named sizes.
pub fn parse_shape(arg: &str) -> Result<(String, Vec<ShapeDim>), DriverError> {
    let bad = |why: &str| DriverError::Request(format!("--shape `{arg}`: {why}"));
    let (name, dims) = arg.split_once('=').ok_or_else(|| {
        bad("expected NAME=D0,D1,… (a dimension may be a range [SIZE:]MIN..MAX or a sum SIZE+SIZE+K)")
    })?;
    let int = |d: &str, least: i64| d.trim().parse::<i64>().ok().filter(|&v| v >= least);
    let is_name = |n: &str| {
        n.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    let dim = |d: &str| -> Option<ShapeDim> {
        let d = d.trim();
        if let Some((lo, hi)) = d.split_once("..") {
            let (size, lo) = match lo.split_once(':') {
                Some((n, lo)) if is_name(n.trim()) => (Some(n.trim().to_string()), lo),
                Some(_) => return None,
                None => (None, lo),
            };
            return match (int(lo, 0), int(hi, 1)) {
                (Some(min), Some(max)) if min <= max => Some(ShapeDim::Range {
                    name: size,
                    min,
                    max,
                }),
                _ => None,
            };
        }
        if let Some(v) = int(d, 1) {
            return Some(ShapeDim::Fixed(v));
        }
        let (mut sizes, mut offset) = (Vec::new(), 0);
        for term in d.split('+').map(str::trim) {
            match int(term, 0) {
                Some(k) => offset += k,
                None if is_name(term) => sizes.push(term.to_string()),
                None => return None,
            }
        }
        (!sizes.is_empty()).then_some(ShapeDim::Sum { sizes, offset })
    };
    let dims = dims
        .split(',')
        .map(dim)
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| {
            bad(
                "dimensions must be positive integers, ranges [SIZE:]MIN..MAX with 0 ≤ MIN ≤ MAX, \
                 or sums SIZE+SIZE+K of named sizes",
            )
        })?;
    Ok((name.to_string(), dims))
}

/// What `--shape` arguments give: each input's shape (the sizes at their largest
/// values) and the runtime sizes their ranges make, if any.
#[derive(Clone, Debug, Default)]
pub struct ShapeArgs {
    pub shapes: HashMap<String, Vec<i64>>,
    pub runtime_size: Option<Box<RuntimeSize>>,
}

/// The shapes of `--shape` arguments: each named size has one range (written once or
/// the same each time), unnamed ranges with the same bounds are one size, and a sum
/// names sizes given a range.
pub fn shapes_of(args: &[String]) -> Result<ShapeArgs, DriverError> {
    let parsed = args
        .iter()
        .map(|a| parse_shape(a).map(|p| (a, p)))
        .collect::<Result<Vec<_>, _>>()?;
    // the sizes first, in the order written
    let mut ranges: Vec<SizeRange> = Vec::new();
    let mut named: HashMap<String, usize> = HashMap::new();
    let mut unnamed: HashMap<(i64, i64), usize> = HashMap::new();
    for (arg, (input, dims)) in &parsed {
        for (k, d) in dims.iter().enumerate() {
            let ShapeDim::Range { name, min, max } = d else {
                continue;
            };
            let found = match name {
                Some(n) => named.get(n).copied(),
                None => unnamed.get(&(*min, *max)).copied(),
            };
            match found {
                Some(j) if (ranges[j].min, ranges[j].max) != (*min, *max) => {
                    return Err(DriverError::Request(format!(
                        "--shape `{arg}`: {} is {}..{} where it is given before, not {min}..{max}",
                        ranges[j].name, ranges[j].min, ranges[j].max
                    )))
                }
                Some(_) => {}
                None => {
                    let label = name.clone().unwrap_or_else(|| format!("{input}[{k}]"));
                    match name {
                        Some(n) => named.insert(n.clone(), ranges.len()),
                        None => unnamed.insert((*min, *max), ranges.len()),
                    };
                    ranges.push(SizeRange::new(label, *min, *max));
                }
            }
        }
    }
    let maxes: Vec<i64> = ranges.iter().map(|r| r.max).collect();
    let mut shapes = HashMap::new();
    let mut at = Vec::new();
    for (arg, (input, dims)) in parsed {
        let mut fixed = Vec::with_capacity(dims.len());
        for (k, d) in dims.iter().enumerate() {
            let form = match d {
                ShapeDim::Fixed(v) => {
                    fixed.push(*v);
                    continue;
                }
                ShapeDim::Range { name, min, max } => {
                    let j = match name {
                        Some(n) => named[n],
                        None => unnamed[&(*min, *max)],
                    };
                    SizeDim {
                        dim: k,
                        sizes: vec![j],
                        offset: 0,
                        at_most: None,
                    }
                }
                ShapeDim::Sum { sizes, offset } => {
                    let sizes = sizes
                        .iter()
                        .map(|n| {
                            named.get(n).copied().ok_or_else(|| {
                                DriverError::Request(format!(
                                    "--shape `{arg}`: size `{n}` has no range: give one (`{n}:MIN..MAX`) in a --shape"
                                ))
                            })
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    SizeDim {
                        dim: k,
                        sizes,
                        offset: *offset,
                        at_most: None,
                    }
                }
            };
            fixed.push(form.at(&maxes));
            at.push((input.clone(), form));
        }
        shapes.insert(input, fixed);
    }
    let runtime_size = (!ranges.is_empty()).then(|| Box::new(RuntimeSize { ranges, at }));
    Ok(ShapeArgs {
        shapes,
        runtime_size,
    })
}

impl NetworkSpec {
    /// The spec with its runtime sizes' dimensions at `sizes` (one value per size), for
    /// one build of a range: broadcasts on constants left to run time
    /// ([`tessera_graph::Graph::keep_broadcasts`]).
    pub fn at_sizes(&self, sizes: &[i64]) -> NetworkSpec {
        self.at_points(sizes, &[])
    }

    /// [`NetworkSpec::at_sizes`], where the sizes after the spec's own are counted by
    /// the selections `counted` ([`tessera_graph::selection`]): each built at its value.
    fn at_points(&self, sizes: &[i64], counted: &[SizeRange]) -> NetworkSpec {
        let mut spec = self.clone();
        let own = self.runtime_size.as_ref().map_or(0, |rs| rs.ranges.len());
        if let NetworkSource::Onnx { options, .. } = &mut spec.source {
            options.keep_broadcasts = true;
            for (r, &v) in counted.iter().zip(&sizes[own..]) {
                options.counts.insert(r.name.clone(), v);
            }
        }
        if let (Some(rs), NetworkSource::Onnx { options, .. }) =
            (&self.runtime_size, &mut spec.source)
        {
            for (input, form) in &rs.at {
                if let Some(d) = options
                    .input_shapes
                    .get_mut(input)
                    .and_then(|s| s.get_mut(form.dim))
                {
                    *d = form.at(sizes);
                }
            }
        }
        spec.runtime_size = None;
        spec
    }
}

/// The points a range build imports the network at, for a stride: every size at its
/// largest, then each size alone `stride` and `2 · stride` below it (three values along
/// each size: two fit any line; values below 1 left out, and a size too small for one
/// step of the stride stepped by half of one less than its largest value), then (with
/// two sizes or more) all of them one step below, which tells a form that is not a sum,
/// and for a size with room for one step only, all of them half a step below.
fn probe_points(ranges: &[SizeRange], stride: i64) -> Vec<Vec<i64>> {
    let maxes: Vec<i64> = ranges.iter().map(|r| r.max).collect();
    let step = |k: usize| {
        if stride < maxes[k] {
            stride
        } else {
            ((maxes[k] - 1) / 2).max(1)
        }
    };
    let mut points = vec![maxes.clone()];
    let mut short = Vec::new();
    for k in 0..maxes.len() {
        for times in [1, 2] {
            let mut p = maxes.clone();
            p[k] -= times * step(k);
            if p[k] >= 1 {
                points.push(p);
            } else if times == 2 {
                short.push(k);
            }
        }
    }
    if maxes.len() > 1 {
        let p: Vec<i64> = (0..maxes.len()).map(|k| maxes[k] - step(k)).collect();
        if p.iter().all(|&v| v >= 1) {
            points.push(p);
        }
        // a third value for a size with room for one step only: every size half a
        // step below (a sum of two sizes then moves by a whole step, as a network
        // that pads a sum to the stride needs)
        for k in short {
            let half = (step(k) / 2).max(1);
            let p: Vec<i64> = maxes.iter().map(|&m| m - half).collect();
            if p.iter().all(|&v| v >= 1) && !points.contains(&p) {
                points.push(p);
            }
        }
    }
    points.dedup();
    points
}

impl Toolchain {
    /// Stages 1–7 for a spec with runtime sizes: the network imported and planned at
    /// the largest sizes and at smaller ones ([`probe_points`]), compiled into one
    /// module for the ranges with default schedules — or, with `log`, each point
    /// planned with the log's algorithms and every group given its history best (a
    /// group whose loops run to the sizes has the records of a tune for the ranges).
    pub(crate) fn compile_for_range(
        &self,
        spec: &NetworkSpec,
        rs: &RuntimeSize,
        log: Option<&LoadedLog>,
    ) -> Result<Build, DriverError> {
        let net = self.prepare_range(spec, rs, log)?;
        let backend = self.registry().backend_for(&spec.target)?;
        let best = log.map(ApplyHistoryBest::from_log);
        let appliers = match (&best, log) {
            (Some(best), Some(log)) => {
                Some(self.appliers(best, &spec.target, holds_configurations(&log.records))?)
            }
            _ => None,
        };
        let hook = appliers
            .as_ref()
            .map(|a| a as &dyn tessera_graph::ScheduleHook);
        let network = compile_prepared(&net, backend.as_ref(), hook)
            .map_err(|e| DriverError::Graph(Box::new(e)))?;
        let report = match (&appliers, &best) {
            (Some(a), Some(best)) => BuildReport {
                with_log: true,
                applied: a.applied(),
                overruled: best.overruled().len(),
                warnings: a.warnings(),
                ..BuildReport::default()
            },
            _ => BuildReport::default(),
        };
        Ok(Build { network, report })
    }

    /// The network of a spec with runtime sizes prepared for its ranges (the builds at
    /// the probe points checked against each other, the groups' runtime extents found):
    /// what [`compile_for_range`](Self::compile_for_range) builds and a tune for the
    /// ranges takes its tasks from. With `log`, each point is planned with the log's
    /// algorithms.
    pub(crate) fn prepare_range(
        &self,
        spec: &NetworkSpec,
        rs: &RuntimeSize,
        log: Option<&LoadedLog>,
    ) -> Result<RangeNetwork, DriverError> {
        if !matches!(spec.source, NetworkSource::Onnx { .. }) {
            return Err(DriverError::Request(
                "a runtime size (a --shape range) is for ONNX models".into(),
            ));
        }
        if let Some(r) = rs.ranges.iter().find(|r| r.max < 2) {
            return Err(DriverError::Request(format!(
                "{}: a range up to {} is a fixed shape: give {}",
                r.name, r.max, r.max
            )));
        }
        // The build at the largest sizes tells the selections, whose counts are sizes
        // too. A stride whose points give another network (an attention pads 383 keys
        // to 384, not 384) is followed by the next: 16 then 8 first where every
        // largest value is a multiple of 16, else 1; each point imported and planned
        // once.
        let mut last = None;
        let mut planned: HashMap<Vec<i64>, tessera_graph::Graph> = HashMap::new();
        let best = log.map(ApplyHistoryBest::from_log);
        let target = spec.target.to_string();
        let graph_at = |spec: &NetworkSpec| -> Result<tessera_graph::Graph, DriverError> {
            let plan = self.plan_for_log(spec, log)?;
            Ok(match &best {
                Some(best) => pick_algorithms(&plan, best, &target)?.0,
                None => plan.rule_graph().clone(),
            })
        };
        let own: Vec<i64> = rs.ranges.iter().map(|r| r.max).collect();
        let largest = graph_at(&spec.at_sizes(&own))?;
        let counted = selection_ranges(&largest);
        let ranges: Vec<SizeRange> = rs.ranges.iter().chain(&counted).cloned().collect();
        let maxes: Vec<i64> = ranges.iter().map(|r| r.max).collect();
        planned.insert(maxes, largest);
        let strides: [i64; 4] = if ranges.iter().all(|r| r.max % 16 == 0) {
            [16, 8, 1, 48]
        } else {
            [1, 16, 8, 48]
        };
        let mut probes: Vec<Vec<Vec<i64>>> = strides
            .iter()
            .map(|&stride| {
                let mut points = probe_points(&ranges, stride);
                points.extend(selection_points(&ranges));
                points
            })
            .filter(|points| points.len() > ranges.len())
            .collect();
        probes.sort_by_key(|points| std::cmp::Reverse(points.len()));
        probes.dedup();
        for points in probes {
            let mut builds: Vec<(Vec<i64>, tessera_graph::Graph)> =
                Vec::with_capacity(points.len());
            for p in &points {
                let graph = match planned.get(p) {
                    Some(g) => g.clone(),
                    None => {
                        let g = graph_at(&spec.at_points(p, &counted))?;
                        planned.insert(p.clone(), g.clone());
                        g
                    }
                };
                // at the counts the build has (a bound that follows another count keeps
                // its count within it), each point once
                let at = counted_point(&graph, &ranges, p);
                if builds.iter().all(|(q, _)| q != &at) {
                    builds.push((at, graph));
                }
            }
            let mut ranges = ranges.clone();
            with_top_k_counts(&mut builds, &mut ranges);
            match prepare_dynamic(&builds, &ranges, &spec.target) {
                Ok(net) => return Ok(net),
                Err(e @ GraphError::SizeStructure { .. }) => last = Some(e),
                Err(e) => return Err(DriverError::Graph(Box::new(e))),
            }
        }
        let e = last.unwrap_or_else(|| {
            GraphError::Invalid(format!("{rs}: the ranges are too small to compile for"))
        });
        Err(DriverError::Graph(Box::new(e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn ranges_names_and_sums_make_the_sizes_and_their_largest_shapes() {
        let given = shapes_of(&args(&[
            "input_ids=1,seq:1..32",
            "past.0=1,4,past:0..96,16",
            "attention_mask=1,past+seq",
            "position_ids=1,seq",
            "extra=2,past+seq+1",
        ]))
        .unwrap();
        let rs = given.runtime_size.unwrap();
        assert_eq!(rs.to_string(), "seq in 1..32, past in 0..96");
        assert_eq!(given.shapes["attention_mask"], vec![1, 128]);
        assert_eq!(given.shapes["extra"], vec![2, 129]);
        assert_eq!(given.shapes["past.0"], vec![1, 4, 96, 16]);
        let form = |input: &str| rs.at.iter().find(|(n, _)| n == input).unwrap().1.clone();
        assert_eq!(form("attention_mask").sizes, vec![1, 0]);
        assert_eq!(form("extra").offset, 1);
        assert_eq!(form("position_ids").sizes, vec![0]);
        // unnamed ranges with the same bounds are one size, as before names
        let given = shapes_of(&args(&["a=1,1..48", "b=1..48,3", "c=1..8"])).unwrap();
        let rs = given.runtime_size.unwrap();
        assert_eq!(rs.to_string(), "a[1] in 1..48, c[0] in 1..8");
        assert_eq!(probe_points(&rs.ranges, 16).len(), 6);
    }

    #[test]
    fn bad_shapes_are_one_line_each() {
        for (arg, what) in [
            ("x=1,0", "positive integers"),
            ("x=1,5..2", "MIN ≤ MAX"),
            ("x=1,2:1..4", "ranges"),
            ("x=1,seq-1", "sums"),
            ("x", "NAME=D0"),
        ] {
            let e = parse_shape(arg).unwrap_err().to_string();
            assert!(e.contains(what) && e.contains(arg), "{arg}: {e}");
        }
        let e = shapes_of(&args(&["x=1,past+seq", "y=seq:1..4"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("size `past` has no range"), "{e}");
    }

    #[test]
    fn probes_vary_each_size_alone_then_all_of_them() {
        let r = |name: &str, max| SizeRange::new(name, 1, max);
        assert_eq!(
            probe_points(&[r("s", 48)], 16),
            vec![vec![48], vec![32], vec![16]]
        );
        assert_eq!(
            probe_points(&[r("p", 96), r("t", 32)], 16),
            vec![
                vec![96, 32],
                vec![80, 32],
                vec![64, 32],
                vec![96, 16],
                vec![80, 16],
                vec![88, 24]
            ]
        );
        assert_eq!(
            probe_points(&[r("p", 96), r("t", 4)], 16),
            vec![
                vec![96, 4],
                vec![80, 4],
                vec![64, 4],
                vec![96, 3],
                vec![96, 2],
                vec![80, 3]
            ]
        );
    }
}
