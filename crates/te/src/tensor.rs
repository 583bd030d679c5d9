//! Tensors, iteration variables, and the operations that produce tensors:
//! placeholders (inputs) and computes (an expression per output element, possibly a
//! reduction).

use crate::error::TeError;
use std::collections::BTreeMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Weak};
use tessera_ir::visit::post_order_visit;
use tessera_ir::{BinOp, Buffer, DataType, Expr, ExprNode, StorageScope, Var};

/// Whether an iteration variable walks a data-parallel (spatial) axis or a reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IterKind {
    DataPar,
    Reduce,
}

/// An iteration variable: a variable with the extent of the axis it walks. Identity is
/// the variable's.
#[derive(Clone, Debug)]
pub struct IterVar(Arc<IterVarNode>);

#[derive(Debug)]
pub struct IterVarNode {
    pub var: Var,
    /// The extent of the axis; `None` for variables made by schedule relations, whose
    /// extents bound inference derives.
    pub extent: Option<i64>,
    pub kind: IterKind,
    /// A runtime extent, at most `extent`: an int32 expression of what a kernel reads
    /// when it starts (a load of a one-element extent tensor). Only the indices below it
    /// are computed (a data-parallel axis) or reduced (a reduce axis); storage keeps the
    /// static extent. `None`: the whole static extent.
    pub bound: Option<Expr>,
    /// Valid indices in blocks (a batch and a length merged into one axis): see
    /// [`Block`]. `None`: the valid indices (below `bound`) are all valid.
    pub block: Option<Block>,
}

/// An axis whose indices are blocks of `radix` (the largest length of a batch and a
/// length merged into one axis, as a product's rows), of which only the first `valid`
/// of each block are valid (the run's length, an int32 expression of what a kernel reads
/// when it starts); the blocks past `bound / radix` are padding too. What a stage
/// computes at the other indices of a block is never read, so lowering may skip them:
/// a loop over whole tiles of such an axis runs over the tiles that hold valid indices
/// only (`lower/runtime.rs`).
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub radix: i64,
    pub valid: Expr,
}

impl IterVar {
    pub fn new(name: impl Into<String>, extent: Option<i64>, kind: IterKind) -> Self {
        IterVar(Arc::new(IterVarNode {
            var: Var::int(name),
            extent,
            kind,
            bound: None,
            block: None,
        }))
    }
    /// The iteration variable of an existing variable (a DAG read back from data keeps
    /// its variables' identities).
    pub fn from_var(var: Var, extent: Option<i64>, kind: IterKind) -> Self {
        IterVar(Arc::new(IterVarNode {
            var,
            extent,
            kind,
            bound: None,
            block: None,
        }))
    }
    /// `self` (same variable) with a runtime extent `bound` (see [`IterVarNode::bound`]).
    pub fn with_bound(&self, bound: Option<Expr>) -> Self {
        IterVar(Arc::new(IterVarNode {
            var: self.0.var.clone(),
            extent: self.0.extent,
            kind: self.0.kind,
            bound,
            block: self.0.block.clone(),
        }))
    }
    /// The runtime extent, where the axis has one.
    pub fn bound(&self) -> Option<&Expr> {
        self.0.bound.as_ref()
    }
    /// `self` (same variable) whose valid indices are in blocks (see [`Block`]).
    pub fn with_block(&self, block: Option<Block>) -> Self {
        IterVar(Arc::new(IterVarNode {
            var: self.0.var.clone(),
            extent: self.0.extent,
            kind: self.0.kind,
            bound: self.0.bound.clone(),
            block,
        }))
    }
    /// How the valid indices lie in blocks, where they do.
    pub fn block(&self) -> Option<&Block> {
        self.0.block.as_ref()
    }
    pub fn var(&self) -> &Var {
        &self.0.var
    }
    pub fn name(&self) -> &str {
        self.0.var.name()
    }
    pub fn extent(&self) -> Option<i64> {
        self.0.extent
    }
    pub fn kind(&self) -> IterKind {
        self.0.kind
    }
    pub fn is_reduce(&self) -> bool {
        self.0.kind == IterKind::Reduce
    }
    pub fn expr(&self) -> Expr {
        self.0.var.to_expr()
    }
    /// A new iteration variable with the same extent, kind and runtime extent and
    /// another name.
    pub fn copy_with_name(&self, name: impl Into<String>) -> IterVar {
        IterVar::new(name, self.extent(), self.kind())
            .with_bound(self.0.bound.clone())
            .with_block(self.0.block.clone())
    }
}

impl PartialEq for IterVar {
    fn eq(&self, o: &Self) -> bool {
        self.0.var == o.0.var
    }
}
impl Eq for IterVar {}
impl Hash for IterVar {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.0.var.hash(h)
    }
}
impl fmt::Display for IterVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A reduction axis over `[0, extent)`.
pub fn reduce_axis(extent: i64, name: &str) -> IterVar {
    IterVar::new(name, Some(extent), IterKind::Reduce)
}

/// A reduction axis over `[0, bound)`, `bound` known when the kernel runs and at most
/// `extent` (see [`IterVarNode::bound`]).
pub fn reduce_axis_bounded(extent: i64, bound: Expr, name: &str) -> IterVar {
    reduce_axis(extent, name).with_bound(Some(bound))
}

/// The combiner of a reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Prod,
    Max,
    Min,
}

impl ReduceOp {
    /// `combine(acc, value)`.
    pub fn combine(self, acc: Expr, value: Expr) -> Expr {
        match self {
            ReduceOp::Sum => Expr::binary(BinOp::Add, acc, value),
            ReduceOp::Prod => Expr::binary(BinOp::Mul, acc, value),
            ReduceOp::Max => Expr::max(acc, value),
            ReduceOp::Min => Expr::min(acc, value),
        }
    }
    /// The identity element: 0, 1, the lowest or the highest value of `dtype`.
    pub fn identity(self, dtype: DataType) -> Expr {
        let (lo, hi) = if dtype.is_float() {
            let m = match dtype.bits {
                16 => 65504.0,
                32 => f32::MAX as f64,
                _ => f64::MAX,
            };
            (-m, m)
        } else {
            let (a, b) = dtype.int_range();
            (a as f64, b as f64)
        };
        let v = match self {
            ReduceOp::Sum => 0.0,
            ReduceOp::Prod => 1.0,
            ReduceOp::Max => lo,
            ReduceOp::Min => hi,
        };
        if dtype.is_float() {
            Expr::float_of(dtype, v)
        } else {
            let (a, b) = dtype.int_range();
            Expr::int_of(
                dtype,
                match self {
                    ReduceOp::Max => a,
                    ReduceOp::Min => b,
                    _ => v as i64,
                },
            )
        }
    }
    /// How TVM's compute DAG print writes the update (`+=`, `max=`, …).
    pub fn update_symbol(self) -> &'static str {
        match self {
            ReduceOp::Sum => "+=",
            ReduceOp::Prod => "*=",
            ReduceOp::Max => "max=",
            ReduceOp::Min => "min=",
        }
    }
}

/// A reduction of `source` over `axis` with a combiner, an optional initial value (the
/// identity when absent) and an optional condition on the reduced elements.
#[derive(Clone, Debug, PartialEq)]
pub struct Reduce {
    pub op: ReduceOp,
    pub source: Expr,
    pub axis: Vec<IterVar>,
    pub init: Option<Expr>,
    pub condition: Option<Expr>,
}

impl Reduce {
    pub fn with_init(mut self, init: Expr) -> Self {
        self.init = Some(init);
        self
    }
    pub fn with_condition(mut self, cond: Expr) -> Self {
        self.condition = Some(cond);
        self
    }
}

fn reduce(op: ReduceOp, source: Expr, axis: &[IterVar]) -> Reduce {
    Reduce {
        op,
        source,
        axis: axis.to_vec(),
        init: None,
        condition: None,
    }
}
/// `Σ source` over `axis`.
pub fn sum(source: Expr, axis: &[IterVar]) -> Reduce {
    reduce(ReduceOp::Sum, source, axis)
}
/// `max source` over `axis`.
pub fn max(source: Expr, axis: &[IterVar]) -> Reduce {
    reduce(ReduceOp::Max, source, axis)
}
/// `min source` over `axis`.
pub fn min(source: Expr, axis: &[IterVar]) -> Reduce {
    reduce(ReduceOp::Min, source, axis)
}
/// `Π source` over `axis`.
pub fn prod(source: Expr, axis: &[IterVar]) -> Reduce {
    reduce(ReduceOp::Prod, source, axis)
}

/// What a compute produces per output element.
#[derive(Clone, Debug, PartialEq)]
pub enum ComputeBody {
    Expr(Expr),
    Reduce(Reduce),
}

impl ComputeBody {
    pub fn dtype(&self) -> DataType {
        match self {
            ComputeBody::Expr(e) => e.dtype(),
            ComputeBody::Reduce(r) => r
                .init
                .as_ref()
                .map(|i| i.dtype())
                .unwrap_or_else(|| r.source.dtype()),
        }
    }
    /// Every expression in the body (source, init and condition of a reduction).
    pub fn exprs(&self) -> Vec<&Expr> {
        match self {
            ComputeBody::Expr(e) => vec![e],
            ComputeBody::Reduce(r) => {
                let mut v = vec![&r.source];
                v.extend(r.init.iter());
                v.extend(r.condition.iter());
                v
            }
        }
    }
    /// The body with every expression rewritten by `f`.
    pub fn map(&self, mut f: impl FnMut(&Expr) -> Expr) -> ComputeBody {
        match self {
            ComputeBody::Expr(e) => ComputeBody::Expr(f(e)),
            ComputeBody::Reduce(r) => ComputeBody::Reduce(Reduce {
                op: r.op,
                source: f(&r.source),
                axis: r.axis.clone(),
                init: r.init.as_ref().map(&mut f),
                condition: r.condition.as_ref().map(&mut f),
            }),
        }
    }
    pub fn as_reduce(&self) -> Option<&Reduce> {
        match self {
            ComputeBody::Reduce(r) => Some(r),
            ComputeBody::Expr(_) => None,
        }
    }
}

impl From<Expr> for ComputeBody {
    fn from(e: Expr) -> Self {
        ComputeBody::Expr(e)
    }
}
impl From<Reduce> for ComputeBody {
    fn from(r: Reduce) -> Self {
        ComputeBody::Reduce(r)
    }
}

/// The kind of operation that produces a tensor.
#[derive(Clone, Debug, PartialEq)]
pub enum OpKind {
    Placeholder,
    Compute {
        axis: Vec<IterVar>,
        body: ComputeBody,
    },
}

/// A tensor: the single output of an operation. Identity is the tensor's buffer, so a
/// schedule can rewrite an operation's body and keep the tensor it produces.
#[derive(Clone, Debug)]
pub struct Tensor(Arc<TensorNode>);

#[derive(Debug)]
pub struct TensorNode {
    pub name: String,
    pub tag: String,
    pub shape: Vec<i64>,
    pub dtype: DataType,
    pub buffer: Buffer,
    pub kind: OpKind,
    /// The tensors the body reads, in order of first appearance.
    pub inputs: Vec<Tensor>,
    /// Hints for schedule search, TVM's `attrs` of a compute (e.g.
    /// `auto_scheduler_simplify_const_tensor_indices`: the axes that index constant
    /// matrices). Schedule rewrites of the body keep them.
    pub attrs: BTreeMap<String, Vec<String>>,
}

impl PartialEq for Tensor {
    fn eq(&self, o: &Self) -> bool {
        self.0.buffer == o.0.buffer
    }
}
impl Eq for Tensor {}
impl Hash for Tensor {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.0.buffer.hash(h)
    }
}

/// Records `t` as a producer of its buffer, so that `compute` finds the tensors its body
/// reads from the buffers it loads ([`lookup`]). The buffer keeps a weak reference.
fn register(t: &Tensor) {
    let weak: Weak<TensorNode> = Arc::downgrade(&t.0);
    t.0.buffer.add_producer(weak);
}

/// The tensor that computes `buffer`. A buffer can belong to several live tensors: a
/// schedule rewrite (rfactor, a cache stage) makes a new tensor for a stage that keeps
/// the stage's buffer, while the original lives on in the DAG. The newest one alive is
/// taken, so that when a rewritten schedule is dropped, its DAG's tensors are found
/// again.
fn lookup(buffer: &Buffer) -> Option<Tensor> {
    buffer
        .producers()
        .into_iter()
        .rev()
        .find_map(|p| p.downcast::<TensorNode>().ok())
        .map(Tensor)
}

fn check_shape(op: &str, shape: &[i64]) -> Result<(), TeError> {
    if let Some(d) = shape.iter().find(|d| **d <= 0) {
        return Err(TeError::BadShape {
            op: op.to_string(),
            shape: shape.to_vec(),
            reason: format!("dimension {d} is not positive"),
        });
    }
    Ok(())
}

impl Tensor {
    pub(crate) fn from_node(node: TensorNode) -> Tensor {
        let t = Tensor(Arc::new(node));
        register(&t);
        t
    }
    pub fn node(&self) -> &TensorNode {
        &self.0
    }
    pub fn name(&self) -> &str {
        &self.0.name
    }
    pub fn tag(&self) -> &str {
        &self.0.tag
    }
    /// The compute's schedule-search hints (empty for most operations).
    pub fn attrs(&self) -> &BTreeMap<String, Vec<String>> {
        &self.0.attrs
    }
    pub fn shape(&self) -> &[i64] {
        &self.0.shape
    }
    pub fn ndim(&self) -> usize {
        self.0.shape.len()
    }
    pub fn dtype(&self) -> DataType {
        self.0.dtype
    }
    pub fn buffer(&self) -> &Buffer {
        &self.0.buffer
    }
    pub fn kind(&self) -> &OpKind {
        &self.0.kind
    }
    pub fn inputs(&self) -> &[Tensor] {
        &self.0.inputs
    }
    pub fn is_placeholder(&self) -> bool {
        matches!(self.0.kind, OpKind::Placeholder)
    }
    /// The data-parallel axes of a compute (empty for a placeholder).
    pub fn axis(&self) -> &[IterVar] {
        match &self.0.kind {
            OpKind::Compute { axis, .. } => axis,
            OpKind::Placeholder => &[],
        }
    }
    /// The reduction axes of a compute (empty when it does not reduce).
    pub fn reduce_axis(&self) -> &[IterVar] {
        match &self.0.kind {
            OpKind::Compute {
                body: ComputeBody::Reduce(r),
                ..
            } => &r.axis,
            _ => &[],
        }
    }
    pub fn body(&self) -> Option<&ComputeBody> {
        match &self.0.kind {
            OpKind::Compute { body, .. } => Some(body),
            OpKind::Placeholder => None,
        }
    }
    /// The element at `indices`, as an expression.
    pub fn at(&self, indices: &[Expr]) -> Expr {
        Expr::load(&self.0.buffer, indices.to_vec())
    }
    /// The element at integer-variable `indices`.
    pub fn at_vars(&self, indices: &[&Var]) -> Expr {
        self.at(&indices.iter().map(|v| v.to_expr()).collect::<Vec<_>>())
    }
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Tensor({}, {:?}, {})",
            self.name(),
            self.shape(),
            self.dtype()
        )
    }
}

/// An input tensor.
pub fn placeholder(shape: &[i64], dtype: DataType, name: &str) -> Result<Tensor, TeError> {
    check_shape(name, shape)?;
    let buffer = Buffer::global(name, dtype, shape);
    Ok(Tensor::from_node(TensorNode {
        name: name.to_string(),
        tag: String::new(),
        shape: shape.to_vec(),
        dtype,
        buffer,
        kind: OpKind::Placeholder,
        inputs: Vec::new(),
        attrs: BTreeMap::new(),
    }))
}

/// The tensors a body reads, in order of first appearance.
pub(crate) fn collect_inputs(
    op: &str,
    axis: &[IterVar],
    body: &ComputeBody,
) -> Result<Vec<Tensor>, TeError> {
    let mut bufs: Vec<Buffer> = Vec::new();
    let reduce_axes = match body {
        ComputeBody::Reduce(r) => &r.axis[..],
        ComputeBody::Expr(_) => &[],
    };
    let bounds = axis.iter().chain(reduce_axes).filter_map(|a| a.bound());
    let blocks = axis.iter().filter_map(|a| a.block().map(|b| &b.valid));
    for e in body.exprs().into_iter().chain(bounds).chain(blocks) {
        post_order_visit(e, &mut |x| {
            if let ExprNode::Load { buffer, .. } = x.node() {
                if !bufs.contains(buffer) {
                    bufs.push(buffer.clone());
                }
            }
        });
    }
    bufs.iter()
        .map(|b| {
            lookup(b).ok_or_else(|| TeError::UnknownTensor {
                op: op.to_string(),
                buffer: b.name().to_string(),
            })
        })
        .collect()
}

/// Builds a compute tensor from its parts (used by `compute` and by schedule rewrites).
pub(crate) fn make_compute(
    name: &str,
    tag: &str,
    shape: Vec<i64>,
    axis: Vec<IterVar>,
    body: ComputeBody,
    buffer: Option<Buffer>,
    attrs: BTreeMap<String, Vec<String>>,
) -> Result<Tensor, TeError> {
    check_shape(name, &shape)?;
    let dtype = body.dtype();
    if let ComputeBody::Reduce(r) = &body {
        if r.axis.is_empty() {
            return Err(TeError::BadReduce {
                op: name.to_string(),
                reason: "a reduction needs at least one reduce axis".into(),
            });
        }
        if let Some(a) = r.axis.iter().find(|a| !a.is_reduce()) {
            return Err(TeError::BadReduce {
                op: name.to_string(),
                reason: format!("axis `{a}` is not a reduce axis"),
            });
        }
        if let Some(init) = &r.init {
            if init.dtype() != r.source.dtype() {
                return Err(TeError::BadReduce {
                    op: name.to_string(),
                    reason: format!(
                        "init is {} but the source is {}",
                        init.dtype(),
                        r.source.dtype()
                    ),
                });
            }
        }
    }
    let inputs = collect_inputs(name, &axis, &body)?;
    let buffer = buffer.unwrap_or_else(|| {
        Buffer::new(
            name,
            dtype,
            shape.iter().map(|d| Expr::int(*d)).collect(),
            StorageScope::Global,
        )
    });
    Ok(Tensor::from_node(TensorNode {
        name: name.to_string(),
        tag: tag.to_string(),
        shape,
        dtype,
        buffer,
        kind: OpKind::Compute { axis, body },
        inputs,
        attrs,
    }))
}

/// A tensor of `shape` whose element at index `(i0, i1, …)` is `f(&[i0, i1, …])`. The axes
/// are named `axis_names` (or `i0, i1, …` when empty).
pub fn compute<B: Into<ComputeBody>>(
    shape: &[i64],
    name: &str,
    axis_names: &[&str],
    f: impl FnOnce(&[Expr]) -> B,
) -> Result<Tensor, TeError> {
    compute_tagged(shape, name, "", axis_names, f)
}

/// [`compute`] with an operator tag (e.g. `injective`, `conv2d_nhwc`).
pub fn compute_tagged<B: Into<ComputeBody>>(
    shape: &[i64],
    name: &str,
    tag: &str,
    axis_names: &[&str],
    f: impl FnOnce(&[Expr]) -> B,
) -> Result<Tensor, TeError> {
    compute_with_attrs(shape, name, tag, axis_names, &[], f)
}

/// [`compute_tagged`] with schedule-search hints (TVM's compute `attrs`): each a key and
/// a list of names, e.g. `("auto_scheduler_simplify_const_tensor_indices", &["eps", "nu"])`.
pub fn compute_with_attrs<B: Into<ComputeBody>>(
    shape: &[i64],
    name: &str,
    tag: &str,
    axis_names: &[&str],
    attrs: &[(&str, &[&str])],
    f: impl FnOnce(&[Expr]) -> B,
) -> Result<Tensor, TeError> {
    compute_impl(shape, &[], name, tag, axis_names, attrs, f)
}

/// [`compute_tagged`] whose axes may have runtime extents: `bounds[d]`, where given, is
/// an int32 expression (a load of a one-element extent tensor) at most `shape[d]`, and
/// only the indices below it are computed when the kernel runs (see
/// [`IterVarNode::bound`]). The other elements of the output keep what they held.
pub fn compute_bounded<B: Into<ComputeBody>>(
    shape: &[i64],
    bounds: &[Option<Expr>],
    name: &str,
    tag: &str,
    axis_names: &[&str],
    f: impl FnOnce(&[Expr]) -> B,
) -> Result<Tensor, TeError> {
    if bounds.len() > shape.len() {
        return Err(TeError::BadShape {
            op: name.to_string(),
            shape: shape.to_vec(),
            reason: format!(
                "{} runtime extents for {} dimensions",
                bounds.len(),
                shape.len()
            ),
        });
    }
    compute_impl(shape, bounds, name, tag, axis_names, &[], f)
}

fn compute_impl<B: Into<ComputeBody>>(
    shape: &[i64],
    bounds: &[Option<Expr>],
    name: &str,
    tag: &str,
    axis_names: &[&str],
    attrs: &[(&str, &[&str])],
    f: impl FnOnce(&[Expr]) -> B,
) -> Result<Tensor, TeError> {
    check_shape(name, shape)?;
    if !axis_names.is_empty() && axis_names.len() != shape.len() {
        return Err(TeError::BadShape {
            op: name.to_string(),
            shape: shape.to_vec(),
            reason: format!(
                "{} axis names for {} dimensions",
                axis_names.len(),
                shape.len()
            ),
        });
    }
    let axis: Vec<IterVar> = shape
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let n = axis_names
                .get(i)
                .map(|s| s.to_string())
                .unwrap_or_else(|| format!("i{i}"));
            IterVar::new(n, Some(*d), IterKind::DataPar)
                .with_bound(bounds.get(i).cloned().flatten())
        })
        .collect();
    let idx: Vec<Expr> = axis.iter().map(|a| a.expr()).collect();
    let body = f(&idx).into();
    let attrs = attrs
        .iter()
        .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
        .collect();
    make_compute(name, tag, shape.to_vec(), axis, body, None, attrs)
}
