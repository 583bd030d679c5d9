//! Buffers: named, typed, shaped regions of memory in a storage scope.

use crate::dtype::DataType;
use crate::expr::{Expr, Var};
use serde::{Deserialize, Serialize};
use std::any::Any;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, Weak};

/// Where a buffer lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StorageScope {
    /// Device (or host) main memory.
    Global,
    /// Memory shared by the threads of one GPU block.
    Shared,
    /// Registers / memory private to one thread.
    Local,
}

impl StorageScope {
    pub fn name(self) -> &'static str {
        match self {
            StorageScope::Global => "global",
            StorageScope::Shared => "shared",
            StorageScope::Local => "local",
        }
    }
    /// Parses `global`, `shared` or `local`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "global" => Some(StorageScope::Global),
            "shared" => Some(StorageScope::Shared),
            "local" => Some(StorageScope::Local),
            _ => None,
        }
    }
    /// 0 for global, 1 for shared, 2 for local: the thread-hierarchy level that shares it.
    pub fn rank(self) -> u8 {
        match self {
            StorageScope::Global => 0,
            StorageScope::Shared => 1,
            StorageScope::Local => 2,
        }
    }
}

impl fmt::Display for StorageScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A multi-dimensional buffer, row-major. Two buffers are the same buffer when their data
/// variables are the same variable.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Buffer(Arc<BufferNode>);

#[derive(Debug, Serialize, Deserialize)]
pub struct BufferNode {
    pub name: String,
    pub dtype: DataType,
    pub shape: Vec<Expr>,
    pub scope: StorageScope,
    /// The handle that identifies the buffer.
    pub data: Var,
    /// What computes the buffer's values, for the layer that builds programs (te's
    /// tensors, which find the tensors an expression reads through the buffers it
    /// loads): weak references, oldest first, opaque here. Not part of the buffer's
    /// identity, not serialized.
    #[serde(skip)]
    producers: Mutex<Vec<Weak<dyn Any + Send + Sync>>>,
}

/// A producer of a buffer ([`Buffer::add_producer`]).
pub type Producer = Arc<dyn Any + Send + Sync>;

impl Buffer {
    pub fn new(
        name: impl Into<String>,
        dtype: DataType,
        shape: Vec<Expr>,
        scope: StorageScope,
    ) -> Self {
        let name = name.into();
        let data = Var::new(name.clone(), DataType::uint(64));
        Buffer(Arc::new(BufferNode {
            name,
            dtype,
            shape,
            scope,
            data,
            producers: Mutex::new(Vec::new()),
        }))
    }
    /// A global buffer with a constant shape.
    pub fn global(name: impl Into<String>, dtype: DataType, shape: &[i64]) -> Self {
        Self::new(
            name,
            dtype,
            shape.iter().map(|&d| Expr::int(d)).collect(),
            StorageScope::Global,
        )
    }
    pub fn name(&self) -> &str {
        &self.0.name
    }
    pub fn dtype(&self) -> DataType {
        self.0.dtype
    }
    pub fn shape(&self) -> &[Expr] {
        &self.0.shape
    }
    pub fn scope(&self) -> StorageScope {
        self.0.scope
    }
    pub fn data(&self) -> &Var {
        &self.0.data
    }
    pub fn ndim(&self) -> usize {
        self.0.shape.len()
    }
    /// Whether `other` is this very buffer object (not only the same buffer: an equal
    /// one deserialized apart is another object, with its own producers).
    pub fn same_as(&self, other: &Buffer) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
    /// Records `producer` as computing this buffer (after those recorded before; the
    /// dead ones are dropped).
    pub fn add_producer(&self, producer: Weak<dyn Any + Send + Sync>) {
        let mut ps = self.0.producers.lock().unwrap_or_else(|e| e.into_inner());
        ps.retain(|w| w.strong_count() > 0);
        ps.push(producer);
    }
    /// The producers of this buffer still alive, oldest first.
    pub fn producers(&self) -> Vec<Producer> {
        let ps = self.0.producers.lock().unwrap_or_else(|e| e.into_inner());
        ps.iter().filter_map(Weak::upgrade).collect()
    }
    /// The shape as constants, when every dimension is a constant.
    pub fn const_shape(&self) -> Option<Vec<i64>> {
        self.0.shape.iter().map(|d| d.as_int()).collect()
    }
    /// A new buffer (a new identity) with the same name, type and scope and another shape.
    pub fn with_shape(&self, shape: Vec<Expr>) -> Buffer {
        Buffer::new(self.name(), self.dtype(), shape, self.scope())
    }
    /// A new buffer (a new identity) like this one in another scope.
    pub fn with_scope(&self, scope: StorageScope) -> Buffer {
        Buffer::new(self.name(), self.dtype(), self.0.shape.clone(), scope)
    }
}

impl PartialEq for Buffer {
    fn eq(&self, other: &Self) -> bool {
        self.0.data == other.0.data
    }
}
impl Eq for Buffer {}
impl Hash for Buffer {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.data.hash(state)
    }
}
