//! A network compiled for a range of one size (issue 61): `--shape` arguments whose
//! dimensions may be ranges (`input_ids=1,1..128`), and the build that imports the
//! network at the largest size and at smaller ones and compiles one module for all of
//! them ([`tessera_graph::dynamic`]).

use crate::{Build, BuildReport, DriverError, NetworkSource, NetworkSpec, Toolchain};
use std::collections::HashMap;
use tessera_graph::dynamic::{compile_dynamic, SizeRange};
use tessera_graph::GraphError;

/// One dimension of a `--shape` argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShapeDim {
    Fixed(i64),
    /// `MIN..MAX`: known only when the module runs.
    Range {
        min: i64,
        max: i64,
    },
}

/// Where a spec's runtime size is: its range and the input dimensions that are it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeSize {
    pub range: SizeRange,
    /// `(input, dimension)`.
    pub at: Vec<(String, usize)>,
}

/// Parses `NAME=D0,D1,…`, where a dimension is a positive integer or a range
/// `MIN..MAX` of them.
pub fn parse_shape(arg: &str) -> Result<(String, Vec<ShapeDim>), DriverError> {
    let bad = |why: &str| DriverError::Request(format!("--shape `{arg}`: {why}"));
    let (name, dims) = arg
        .split_once('=')
        .ok_or_else(|| bad("expected NAME=D0,D1,… (a dimension may be a range MIN..MAX)"))?;
    let positive = |d: &str| d.trim().parse::<i64>().ok().filter(|&v| v > 0);
    let dims = dims
        .split(',')
        .map(|d| match d.split_once("..") {
            None => positive(d).map(ShapeDim::Fixed),
            Some((lo, hi)) => match (positive(lo), positive(hi)) {
                (Some(min), Some(max)) if min <= max => Some(ShapeDim::Range { min, max }),
                _ => None,
            },
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| {
            bad("dimensions must be positive integers or ranges MIN..MAX with MIN ≤ MAX")
        })?;
    Ok((name.to_string(), dims))
}

/// What `--shape` arguments give: each input's shape (a range at its largest value)
/// and the runtime size their ranges make, if any.
#[derive(Clone, Debug, Default)]
pub struct ShapeArgs {
    pub shapes: HashMap<String, Vec<i64>>,
    pub runtime_size: Option<Box<RuntimeSize>>,
}

/// The shapes of `--shape` arguments: every range of one module is one size
/// (`MIN..MAX` the same wherever it is written).
pub fn shapes_of(args: &[String]) -> Result<ShapeArgs, DriverError> {
    let mut shapes = HashMap::new();
    let mut size: Option<RuntimeSize> = None;
    for arg in args {
        let (name, dims) = parse_shape(arg)?;
        let mut fixed = Vec::with_capacity(dims.len());
        for (k, d) in dims.iter().enumerate() {
            match *d {
                ShapeDim::Fixed(v) => fixed.push(v),
                ShapeDim::Range { min, max } => {
                    fixed.push(max);
                    let s = size.get_or_insert_with(|| RuntimeSize {
                        range: SizeRange {
                            name: format!("{name}[{k}]"),
                            min,
                            max,
                        },
                        at: Vec::new(),
                    });
                    if (s.range.min, s.range.max) != (min, max) {
                        return Err(DriverError::Request(format!(
                            "--shape `{arg}`: a module has one runtime size: {min}..{max} here and {}..{} at {}",
                            s.range.min, s.range.max, s.range.name
                        )));
                    }
                    s.at.push((name.clone(), k));
                }
            }
        }
        shapes.insert(name, fixed);
    }
    Ok(ShapeArgs {
        shapes,
        runtime_size: size.map(Box::new),
    })
}

impl NetworkSpec {
    /// The spec with its runtime size's dimensions at `size`.
    pub fn at_size(&self, size: i64) -> NetworkSpec {
        let mut spec = self.clone();
        if let (Some(rs), NetworkSource::Onnx { options, .. }) =
            (&self.runtime_size, &mut spec.source)
        {
            for (input, dim) in &rs.at {
                if let Some(d) = options
                    .input_shapes
                    .get_mut(input)
                    .and_then(|s| s.get_mut(*dim))
                {
                    *d = size;
                }
            }
        }
        spec.runtime_size = None;
        spec
    }
}

impl Toolchain {
    /// Stages 1–7 for a spec with a runtime size: the network imported and planned at
    /// the largest size and at two smaller ones, compiled into one module for the range
    /// with default schedules.
    pub(crate) fn compile_for_range(
        &self,
        spec: &NetworkSpec,
        rs: &RuntimeSize,
    ) -> Result<Build, DriverError> {
        if !matches!(spec.source, NetworkSource::Onnx { .. }) {
            return Err(DriverError::Request(
                "a runtime size (a --shape range) is for ONNX models".into(),
            ));
        }
        let max = rs.range.max;
        if max < 2 {
            return Err(DriverError::Request(format!(
                "{}: a range of one size is a fixed shape: give {max}",
                rs.range.name
            )));
        }
        // The smaller sizes are `stride` and `2 · stride` below the largest (three sizes
        // where the range allows: two cannot show how a constant follows the size). A
        // stride whose sizes give another network (an attention pads 383 keys to 384,
        // not 384) is followed by the next: 16 first where the largest is a multiple of
        // 16, else 1; each size imported and planned once.
        let backend = self.registry().backend_for(&spec.target)?;
        let mut last = None;
        let mut planned: std::collections::HashMap<i64, tessera_graph::Graph> = Default::default();
        let strides: [i64; 3] = if max % 16 == 0 {
            [16, 1, 48]
        } else {
            [1, 16, 48]
        };
        let mut probes: Vec<Vec<i64>> = strides
            .iter()
            .map(|&stride| {
                [max, max - stride, max - 2 * stride]
                    .into_iter()
                    .filter(|&s| s >= 1)
                    .collect::<Vec<i64>>()
            })
            .filter(|sizes| sizes.len() >= 2)
            .collect();
        probes.sort_by_key(|sizes| std::cmp::Reverse(sizes.len()));
        for sizes in probes {
            let mut builds = Vec::with_capacity(sizes.len());
            for &s in &sizes {
                let graph = match planned.entry(s) {
                    std::collections::hash_map::Entry::Occupied(e) => e.get().clone(),
                    std::collections::hash_map::Entry::Vacant(v) => {
                        let plan = self.plan(&spec.at_size(s))?;
                        v.insert(plan.rule_graph().clone()).clone()
                    }
                };
                builds.push((s, graph));
            }
            match compile_dynamic(&builds, &rs.range, backend.as_ref()) {
                Ok(network) => {
                    return Ok(Build {
                        network,
                        report: BuildReport::default(),
                    })
                }
                Err(e @ GraphError::SizeStructure { .. }) => last = Some(e),
                Err(e) => return Err(DriverError::Graph(Box::new(e))),
            }
        }
        let e = last.unwrap_or_else(|| {
            GraphError::Invalid(format!(
                "{}: the range is too small to compile for",
                rs.range
            ))
        });
        Err(DriverError::Graph(Box::new(e)))
    }
}
