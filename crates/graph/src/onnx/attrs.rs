//! One ONNX node as its converter sees it: its attributes by name, its inputs (an
//! omitted optional input is `None`), its outputs and the names the graph gives it; and
//! the errors that name the node.

use super::{err, proto};
use crate::error::GraphError;
use petgraph::stable_graph::NodeIndex;
use std::collections::HashMap;

/// A node being converted.
pub(super) struct NodeCtx<'a> {
    attrs: HashMap<&'a str, &'a proto::AttributeProto>,
    /// How errors name the node: its name, or `#<position> (<op>)`.
    pub label: &'a str,
    /// The operator type.
    pub op: &'a str,
    /// The inputs, `None` where an optional input is omitted.
    pub ins: Vec<Option<NodeIndex>>,
    /// The output value names.
    pub outputs: &'a [String],
    /// The name of the (first) graph node made for it.
    pub name: String,
}

impl<'a> NodeCtx<'a> {
    pub fn new(
        node: &'a proto::NodeProto,
        label: &'a str,
        ins: Vec<Option<NodeIndex>>,
    ) -> NodeCtx<'a> {
        // (a recurrent layer may leave its first output unnamed)
        let out = node
            .output
            .iter()
            .find(|o| !o.is_empty())
            .cloned()
            .unwrap_or_default();
        NodeCtx {
            attrs: node.attribute.iter().map(|a| (a.name(), a)).collect(),
            label,
            op: node.op_type(),
            ins,
            outputs: &node.output,
            name: if node.name().is_empty() {
                out
            } else {
                node.name().to_string()
            },
        }
    }

    /// Input `k`, which must be present.
    pub fn input(&self, k: usize) -> Result<NodeIndex, GraphError> {
        self.opt(k)
            .ok_or_else(|| self.bad(format!("input {k} is missing")))
    }

    /// Input `k`, if present.
    pub fn opt(&self, k: usize) -> Option<NodeIndex> {
        self.ins.get(k).copied().flatten()
    }

    /// Every present input, in order.
    pub fn all_inputs(&self) -> Vec<NodeIndex> {
        self.ins.iter().flatten().copied().collect()
    }

    /// The name of output `k` (empty when the node does not produce it).
    pub fn out_name(&self, k: usize) -> &str {
        self.outputs.get(k).map(String::as_str).unwrap_or("")
    }

    /// A name for a helper node of this node.
    pub fn sub(&self, suffix: &str) -> String {
        format!("{}_{suffix}", self.name)
    }

    pub fn has(&self, name: &str) -> bool {
        self.attrs.contains_key(name)
    }
    pub fn int(&self, name: &str, default: i64) -> i64 {
        self.attrs.get(name).and_then(|a| a.i).unwrap_or(default)
    }
    pub fn float(&self, name: &str, default: f32) -> f32 {
        self.attrs.get(name).and_then(|a| a.f).unwrap_or(default)
    }
    pub fn ints(&self, name: &str) -> Option<Vec<i64>> {
        self.attrs.get(name).map(|a| a.ints.clone())
    }
    pub fn floats(&self, name: &str) -> Option<Vec<f32>> {
        self.attrs.get(name).map(|a| a.floats.clone())
    }
    pub fn string(&self, name: &str) -> Option<String> {
        self.attrs
            .get(name)
            .and_then(|a| a.s.as_ref())
            .map(|s| String::from_utf8_lossy(s).into_owned())
    }
    pub fn strings(&self, name: &str) -> Option<Vec<String>> {
        self.attrs.get(name).map(|a| {
            a.strings
                .iter()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
    }
    pub fn tensor(&self, name: &str) -> Option<&'a proto::TensorProto> {
        self.attrs.get(name).and_then(|a| a.t.as_ref())
    }

    /// An error about this node.
    pub fn bad(&self, what: impl std::fmt::Display) -> GraphError {
        err(format!("node `{}` ({}): {what}", self.label, self.op))
    }
}
