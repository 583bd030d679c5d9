//! A run's input values given as files (`--input NAME=FILE.npy`): read before anything
//! is compiled, checked against the network's inputs before the build (so that a wrong
//! file costs no compile) and again against the loaded module, then set on it — each
//! input not given from its default (the value a module was built for, or a seeded
//! random one). A file that cannot be read is said after its name is checked: a
//! misspelt name is the more useful error.

use crate::{Build, DriverError, NetworkSpec, Toolchain};
use std::path::Path;
use std::sync::Arc;
use tessera_graph::{CompiledNetwork, Graph, GraphModule, TensorType};
use tessera_runtime::{NDArray, RuntimeError};
use tessera_search::record::LoadedLog;

/// Why the given inputs do not fit the network.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("--input `{0}`: expected NAME=FILE.npy")]
    Syntax(String),
    #[error("reading input `{name}` from {file}")]
    Unreadable {
        name: String,
        file: String,
        #[source]
        source: Arc<RuntimeError>,
    },
    #[error("--input `{name}`: the network has no such input (its inputs: {inputs})")]
    NoSuchInput { name: String, inputs: String },
    #[error("--input `{name}`: the file holds {held}, the network takes {takes}{hint}")]
    Mismatch {
        name: String,
        held: String,
        takes: String,
        hint: &'static str,
    },
}

/// One `--input NAME=FILE.npy`: the name and the file's value, or why it could not be
/// read.
struct Given {
    name: String,
    file: String,
    /// The value, or why the file could not be read.
    value: Result<NDArray, Arc<RuntimeError>>,
}

impl Given {
    fn value(&self) -> Result<&NDArray, InputError> {
        self.value
            .as_ref()
            .map_err(|source| InputError::Unreadable {
                name: self.name.clone(),
                file: self.file.clone(),
                source: source.clone(),
            })
    }
}

/// The input values a run was given.
#[derive(Default)]
pub struct GivenInputs(Vec<Given>);

impl GivenInputs {
    /// Reads each `NAME=FILE.npy` (a malformed one is an error now, an unreadable file
    /// when the inputs are checked).
    pub fn read(specs: &[String]) -> Result<GivenInputs, InputError> {
        specs
            .iter()
            .map(|s| {
                let (name, file) = s
                    .split_once('=')
                    .ok_or_else(|| InputError::Syntax(s.clone()))?;
                Ok(Given {
                    name: name.to_string(),
                    file: file.to_string(),
                    value: NDArray::load_npy(file).map_err(Arc::new),
                })
            })
            .collect::<Result<_, _>>()
            .map(GivenInputs)
    }

    /// The values that could be read, by name (what an import may take as constants).
    pub fn values(&self) -> impl Iterator<Item = (&str, &NDArray)> {
        self.0
            .iter()
            .filter_map(|g| Some((g.name.as_str(), g.value.as_ref().ok()?)))
    }

    /// Each given input names one of `inputs`, was read, and has its shape and type.
    pub fn check(&self, inputs: &[(String, TensorType)]) -> Result<(), InputError> {
        self.check_names(inputs)?;
        for g in &self.0 {
            let value = g.value()?;
            let Some((_, ty)) = inputs.iter().find(|(n, _)| *n == g.name) else {
                continue;
            };
            let shape: Vec<usize> = ty.shape.iter().map(|&d| d as usize).collect();
            let same_shape = value.shape() == shape.as_slice();
            if !same_shape || value.dtype() != ty.dtype {
                return Err(InputError::Mismatch {
                    name: g.name.clone(),
                    held: format!("{:?} {}", value.shape(), value.dtype()),
                    takes: format!("{:?} {}", ty.shape, ty.dtype),
                    hint: if same_shape {
                        ""
                    } else {
                        " (an ONNX model's input shape can be set with --shape NAME=DIMS)"
                    },
                });
            }
        }
        Ok(())
    }

    /// Each given input names one of `inputs` and was read.
    fn check_names(&self, inputs: &[(String, TensorType)]) -> Result<(), InputError> {
        for g in &self.0 {
            if !inputs.iter().any(|(n, _)| *n == g.name) {
                let inputs = inputs
                    .iter()
                    .map(|(n, t)| format!("`{n}` {:?} {}", t.shape, t.dtype))
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(InputError::NoSuchInput {
                    name: g.name.clone(),
                    inputs,
                });
            }
        }
        for g in &self.0 {
            g.value()?;
        }
        Ok(())
    }

    /// [`GivenInputs::check`] against a graph's inputs.
    pub fn check_graph(&self, g: &Graph) -> Result<(), InputError> {
        let inputs: Vec<(String, TensorType)> = g
            .inputs()
            .iter()
            .map(|&n| (g.node(n).name.clone(), g.node(n).ty.clone()))
            .collect();
        self.check(&inputs)
    }

    /// Checks the inputs against `m`'s and sets every one of them: the given value,
    /// else the input's default.
    pub fn set_on(&self, m: &mut GraphModule) -> Result<(), DriverError> {
        let inputs: Vec<(String, TensorType)> = m
            .inputs()
            .map(|(n, t)| (n.to_string(), t.clone()))
            .collect();
        if m.size_ranges().is_empty() {
            self.check(&inputs)?;
        } else {
            // a module with runtime sizes checks each input's shape as it is set
            self.check_names(&inputs)?;
        }
        for (k, (name, _)) in inputs.iter().enumerate() {
            let value = match self.0.iter().find(|g| g.name == *name) {
                Some(g) => g.value()?.clone(),
                None => m.default_input(k)?,
            };
            m.set_input(name, &value)?;
        }
        Ok(())
    }
}

impl Toolchain {
    /// Plans `spec` (with the algorithms `log` measured), checks `given` against its
    /// inputs, and compiles it with the log's history best.
    pub fn compile_network(
        &self,
        spec: &NetworkSpec,
        log: Option<&LoadedLog>,
        given: &GivenInputs,
    ) -> Result<Build, DriverError> {
        if spec.runtime_size.is_some() {
            // inputs of any size of the range: the module checks each as it is set
            return self.compile(spec, log);
        }
        let plan = self.plan_for_log(spec, log)?;
        if !tessera_graph::dynamic::selection_ranges(plan.rule_graph()).is_empty() {
            // a count only the run tells: a build for its sizes
            return self.compile(spec, log);
        }
        given.check_graph(plan.base())?;
        self.compile_plan(&plan, &spec.target, log)
    }

    /// Reads a module file (`tessera compile`'s); with `target`, one compiled for
    /// another target is refused.
    pub fn read_module(
        &self,
        path: &Path,
        target: Option<&tessera_backends::Target>,
    ) -> Result<CompiledNetwork, DriverError> {
        let compiled = CompiledNetwork::read(path)?;
        if let Some(asked) = target {
            if asked != compiled.target() {
                return Err(DriverError::Request(format!(
                    "{} was compiled for `{}`, not `{asked}`: compile it again for `{asked}`",
                    path.display(),
                    compiled.target()
                )));
            }
        }
        Ok(compiled)
    }
}
