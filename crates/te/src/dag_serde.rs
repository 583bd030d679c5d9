//! A compute DAG as data: every tensor in the DAG's order with its definition (its
//! buffer, axes and body as IR, which serializes with its variables' ids) and its
//! inputs as indices. It is how a tuning task crosses the plugin boundary: a search
//! strategy in another library rebuilds the same tensors, the same workload key and
//! the same programs from it.

use crate::dag::ComputeDag;
use crate::tensor::{ComputeBody, IterKind, IterVar, OpKind, Reduce, ReduceOp, Tensor, TensorNode};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use tessera_ir::visit::ExprMutator;
use tessera_ir::{Buffer, DataType, Expr, Var};

#[derive(Serialize, Deserialize)]
struct SerialIterVar {
    var: Var,
    extent: Option<i64>,
    reduce: bool,
    /// The runtime extent; absent where there is none (so that a DAG without one
    /// serializes, and keys its workload, as before runtime extents existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bound: Option<Expr>,
    /// Valid indices in blocks: the radix and the valid indices of each (absent where
    /// there are none, as `bound`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    block: Option<(i64, Expr)>,
}

#[derive(Serialize, Deserialize)]
enum SerialReduceOp {
    Sum,
    Prod,
    Max,
    Min,
}

#[derive(Serialize, Deserialize)]
enum SerialBody {
    Expr(Expr),
    Reduce {
        op: SerialReduceOp,
        source: Expr,
        axis: Vec<SerialIterVar>,
        init: Option<Expr>,
        condition: Option<Expr>,
    },
}

#[derive(Serialize, Deserialize)]
struct SerialTensor {
    name: String,
    tag: String,
    shape: Vec<i64>,
    dtype: DataType,
    buffer: Buffer,
    /// `None`: a placeholder.
    compute: Option<(Vec<SerialIterVar>, SerialBody)>,
    inputs: Vec<usize>,
    attrs: BTreeMap<String, Vec<String>>,
}

#[derive(Serialize, Deserialize)]
struct SerialDag {
    ops: Vec<SerialTensor>,
    outputs: Vec<usize>,
}

fn iter_var_out(iv: &IterVar) -> SerialIterVar {
    SerialIterVar {
        var: iv.var().clone(),
        extent: iv.extent(),
        reduce: iv.is_reduce(),
        bound: iv.bound().cloned(),
        block: iv.block().map(|b| (b.radix, b.valid.clone())),
    }
}

fn iter_var_in(s: SerialIterVar, relink: &mut Relink) -> IterVar {
    let kind = if s.reduce {
        IterKind::Reduce
    } else {
        IterKind::DataPar
    };
    let bound = s.bound.map(|e| relink.mutate_expr(&e));
    let block = s.block.map(|(radix, e)| crate::Block {
        radix,
        valid: relink.mutate_expr(&e),
    });
    IterVar::from_var(s.var, s.extent, kind)
        .with_bound(bound)
        .with_block(block)
}

fn body_out(b: &ComputeBody) -> SerialBody {
    match b {
        ComputeBody::Expr(e) => SerialBody::Expr(e.clone()),
        ComputeBody::Reduce(r) => SerialBody::Reduce {
            op: match r.op {
                ReduceOp::Sum => SerialReduceOp::Sum,
                ReduceOp::Prod => SerialReduceOp::Prod,
                ReduceOp::Max => SerialReduceOp::Max,
                ReduceOp::Min => SerialReduceOp::Min,
            },
            source: r.source.clone(),
            axis: r.axis.iter().map(iter_var_out).collect(),
            init: r.init.clone(),
            condition: r.condition.clone(),
        },
    }
}

fn body_in(b: SerialBody, relink: &mut Relink) -> ComputeBody {
    match b {
        SerialBody::Expr(e) => ComputeBody::Expr(e),
        SerialBody::Reduce {
            op,
            source,
            axis,
            init,
            condition,
        } => ComputeBody::Reduce(Reduce {
            op: match op {
                SerialReduceOp::Sum => ReduceOp::Sum,
                SerialReduceOp::Prod => ReduceOp::Prod,
                SerialReduceOp::Max => ReduceOp::Max,
                SerialReduceOp::Min => ReduceOp::Min,
            },
            source,
            axis: axis.into_iter().map(|a| iter_var_in(a, relink)).collect(),
            init,
            condition,
        }),
    }
}

impl Serialize for ComputeDag {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let index: HashMap<&Tensor, usize> =
            self.ops.iter().enumerate().map(|(i, t)| (t, i)).collect();
        let ops = self
            .ops
            .iter()
            .map(|t| SerialTensor {
                name: t.name().to_string(),
                tag: t.tag().to_string(),
                shape: t.shape().to_vec(),
                dtype: t.dtype(),
                buffer: t.buffer().clone(),
                compute: match t.kind() {
                    OpKind::Placeholder => None,
                    OpKind::Compute { axis, body } => {
                        Some((axis.iter().map(iter_var_out).collect(), body_out(body)))
                    }
                },
                inputs: t.inputs().iter().map(|i| index[i]).collect(),
                attrs: t.attrs().clone(),
            })
            .collect();
        let outputs = self.outputs.iter().map(|t| index[t]).collect();
        SerialDag { ops, outputs }.serialize(s)
    }
}

/// Replaces each buffer a body loads by the equal buffer of the tensor that computes it.
struct Relink(HashMap<Buffer, Buffer>);

impl ExprMutator for Relink {
    fn mutate_buffer(&mut self, b: &Buffer) -> Buffer {
        self.0.get(b).cloned().unwrap_or_else(|| b.clone())
    }
}

impl<'de> Deserialize<'de> for ComputeDag {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let sd = SerialDag::deserialize(d)?;
        let mut built: Vec<Tensor> = Vec::with_capacity(sd.ops.len());
        for (i, st) in sd.ops.into_iter().enumerate() {
            let inputs = st
                .inputs
                .iter()
                .map(|&k| {
                    built.get(k).cloned().ok_or_else(|| {
                        D::Error::custom(format!(
                            "compute DAG: tensor {i} `{}` reads tensor {k}, which is not before it",
                            st.name
                        ))
                    })
                })
                .collect::<Result<Vec<Tensor>, D::Error>>()?;
            // the body's loads read the inputs' own buffers (equal, but deserialized
            // apart), so that each finds its tensor ([`Buffer::producers`])
            let mut relink = Relink(
                inputs
                    .iter()
                    .map(|t| (t.buffer().clone(), t.buffer().clone()))
                    .collect(),
            );
            let kind = match st.compute {
                None => OpKind::Placeholder,
                Some((axis, body)) => OpKind::Compute {
                    axis: axis
                        .into_iter()
                        .map(|a| iter_var_in(a, &mut relink))
                        .collect(),
                    body: body_in(body, &mut relink).map(|e| relink.mutate_expr(e)),
                },
            };
            built.push(Tensor::from_node(TensorNode {
                name: st.name,
                tag: st.tag,
                shape: st.shape,
                dtype: st.dtype,
                buffer: st.buffer,
                kind,
                inputs,
                attrs: st.attrs,
            }));
        }
        let outputs = sd
            .outputs
            .iter()
            .map(|&k| {
                built.get(k).cloned().ok_or_else(|| {
                    D::Error::custom(format!("compute DAG: output {k} is no tensor of it"))
                })
            })
            .collect::<Result<Vec<Tensor>, D::Error>>()?;
        ComputeDag::new(&outputs).map_err(D::Error::custom)
    }
}
