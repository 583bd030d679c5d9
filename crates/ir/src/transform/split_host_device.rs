//! Host/device split: a GPU function becomes the device kernels it launches, in order,
//! each with its launch extents (TVM's `SplitHostDevice` + `LowerDeviceKernelLaunch`).
//!
//! Lowering emits one function per scheduled DAG. Its top level is a sequence of stage
//! nests (under global allocations of intermediates computed at root and annotations);
//! each nest is one kernel. A kernel's grid and block extents are the largest extents of
//! the loops bound to `blockIdx.*` / `threadIdx.*` inside it (a loop bound to an axis
//! with a smaller extent runs guarded, see [`ThreadExtents::guarded`]); missing axes are
//! 1, so a nest with no binding runs as one thread. Global intermediates become
//! *workspaces*: buffers the launcher allocates on the device and passes to the kernels
//! that use them, after the function's parameters.
//!
//! Refused (typed, never miscompiled): a `blockIdx` loop under a loop that is not itself
//! bound to a block (the kernel boundary would cut a host loop), a thread extent that is
//! not a constant, a bound loop that does not start at 0, and a thread loop bound twice
//! to the same axis with different extents *nested* so that the guard would cut a barrier
//! (checked by the storage-sync pass).

use super::error::TransformError;
use crate::buffer::{Buffer, StorageScope};
use crate::stmt::{ForKind, PrimFunc, Stmt, StmtNode, ThreadAxis};
use crate::visit::{ExprVisitor, StmtVisitor};

/// The launch extents of one kernel: grid (`blockIdx.x/y/z`) and block
/// (`threadIdx.x/y/z`) sizes, and the shared memory its allocations take.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadExtents {
    pub grid: [i64; 3],
    pub block: [i64; 3],
    /// Bytes of `shared` allocations (all live at once, as the printers hoist them).
    pub shared_bytes: i64,
}

impl ThreadExtents {
    /// The launch extent of `axis` (1 for `vthread`, which is a serial loop in a kernel).
    pub fn extent(&self, axis: ThreadAxis) -> i64 {
        match axis {
            ThreadAxis::BlockIdxX => self.grid[0],
            ThreadAxis::BlockIdxY => self.grid[1],
            ThreadAxis::BlockIdxZ => self.grid[2],
            ThreadAxis::ThreadIdxX => self.block[0],
            ThreadAxis::ThreadIdxY => self.block[1],
            ThreadAxis::ThreadIdxZ => self.block[2],
            ThreadAxis::VThread => 1,
        }
    }

    /// Whether a loop of `extent` bound to `axis` needs a guard (`index < extent`):
    /// the axis is launched wider than this loop.
    pub fn guarded(&self, axis: ThreadAxis, extent: i64) -> bool {
        axis != ThreadAxis::VThread && extent < self.extent(axis)
    }

    /// Threads per block.
    pub fn threads_per_block(&self) -> i64 {
        self.block.iter().product()
    }

    fn widen(&mut self, axis: ThreadAxis, extent: i64) {
        let slot = match axis {
            ThreadAxis::BlockIdxX => &mut self.grid[0],
            ThreadAxis::BlockIdxY => &mut self.grid[1],
            ThreadAxis::BlockIdxZ => &mut self.grid[2],
            ThreadAxis::ThreadIdxX => &mut self.block[0],
            ThreadAxis::ThreadIdxY => &mut self.block[1],
            ThreadAxis::ThreadIdxZ => &mut self.block[2],
            ThreadAxis::VThread => return,
        };
        *slot = (*slot).max(extent);
    }
}

/// One device kernel of a split function.
#[derive(Clone, Debug)]
pub struct DeviceKernel {
    /// `<func>_kernel`, then `<func>_kernel_1`, … (TVM's names).
    pub name: String,
    /// The buffers it reads or writes, in the function's parameter order, then workspaces.
    pub params: Vec<Buffer>,
    pub body: Stmt,
    pub launch: ThreadExtents,
}

/// A function split into kernels launched one after another.
#[derive(Clone, Debug)]
pub struct SplitFunc {
    /// Global intermediates: allocated by the launcher, passed after the parameters.
    pub workspaces: Vec<Buffer>,
    pub kernels: Vec<DeviceKernel>,
}

/// Splits `func` into device kernels (see the module documentation).
pub fn split_host_device(func: &PrimFunc) -> Result<SplitFunc, TransformError> {
    let mut split = Splitter {
        workspaces: Vec::new(),
        nests: Vec::new(),
    };
    split.collect(&func.body, &mut Vec::new())?;
    let mut kernels = Vec::new();
    for (i, body) in split.nests.into_iter().enumerate() {
        let mut launch = ThreadExtents {
            grid: [1; 3],
            block: [1; 3],
            shared_bytes: 0,
        };
        check_kernel(&func.name, &body, &mut launch, false)?;
        let used = used_buffers(&body);
        let params: Vec<Buffer> = func
            .params
            .iter()
            .chain(&split.workspaces)
            .filter(|b| used.contains(b))
            .cloned()
            .collect();
        let name = if i == 0 {
            format!("{}_kernel", func.name)
        } else {
            format!("{}_kernel_{i}", func.name)
        };
        kernels.push(DeviceKernel {
            name,
            params,
            body,
            launch,
        });
    }
    Ok(SplitFunc {
        workspaces: split.workspaces,
        kernels,
    })
}

struct Splitter {
    workspaces: Vec<Buffer>,
    nests: Vec<Stmt>,
}

/// An enclosing statement that each kernel below it keeps (annotations, lets).
enum Wrap {
    Attr(String, crate::expr::Expr),
    Let(crate::Var, crate::expr::Expr),
}

impl Splitter {
    fn collect(&mut self, s: &Stmt, wraps: &mut Vec<Wrap>) -> Result<(), TransformError> {
        match s.node() {
            StmtNode::Seq(v) => {
                for x in v {
                    self.collect(x, wraps)?;
                }
            }
            StmtNode::Allocate { buffer, body } if buffer.scope() == StorageScope::Global => {
                self.workspaces.push(buffer.clone());
                self.collect(body, wraps)?;
            }
            StmtNode::Attr { key, value, body } => {
                wraps.push(Wrap::Attr(key.clone(), value.clone()));
                let r = self.collect(body, wraps);
                wraps.pop();
                r?;
            }
            StmtNode::Let { var, value, body } => {
                wraps.push(Wrap::Let(var.clone(), value.clone()));
                let r = self.collect(body, wraps);
                wraps.pop();
                r?;
            }
            _ if s.is_no_op() => {}
            _ => {
                let mut k = s.clone();
                for w in wraps.iter().rev() {
                    k = match w {
                        Wrap::Attr(key, value) => Stmt::attr(key.clone(), value.clone(), k),
                        Wrap::Let(var, value) => Stmt::let_stmt(var.clone(), value.clone(), k),
                    };
                }
                self.nests.push(k);
            }
        }
        Ok(())
    }
}

/// Records the launch extents of a kernel body and checks its bindings; `in_host_loop`:
/// some enclosing loop is not bound to a block.
fn check_kernel(
    func: &str,
    s: &Stmt,
    launch: &mut ThreadExtents,
    in_host_loop: bool,
) -> Result<(), TransformError> {
    match s.node() {
        StmtNode::For {
            var,
            min,
            extent,
            kind,
            body,
        } => {
            let mut inner_host = in_host_loop;
            match kind {
                ForKind::ThreadBinding(axis) => {
                    let bad = |reason: String| TransformError::Unsupported {
                        pass: "split_host_device",
                        func: func.to_string(),
                        reason,
                    };
                    if axis.rank() == 0 && in_host_loop {
                        return Err(bad(format!(
                            "loop `{}` is bound to {axis} inside a loop that is not bound to \
                             a block: a kernel cannot start inside a host loop",
                            var.name()
                        )));
                    }
                    let Some(n) = extent.as_int() else {
                        return Err(bad(format!(
                            "loop `{}` is bound to {axis} with an extent that is not a \
                             constant ({extent})",
                            var.name()
                        )));
                    };
                    if !min.is_const_int(0) {
                        return Err(bad(format!(
                            "loop `{}` is bound to {axis} and starts at {min}, not 0",
                            var.name()
                        )));
                    }
                    launch.widen(*axis, n);
                    if axis.rank() != 0 {
                        inner_host = true;
                    }
                }
                _ => inner_host = true,
            }
            check_kernel(func, body, launch, inner_host)
        }
        StmtNode::Allocate { buffer, body } => {
            if buffer.scope() == StorageScope::Shared {
                let n: i64 = buffer.const_shape().unwrap_or_default().iter().product();
                launch.shared_bytes += n * buffer.dtype().bytes() as i64;
            }
            check_kernel(func, body, launch, in_host_loop)
        }
        StmtNode::IfThenElse {
            then_case,
            else_case,
            ..
        } => {
            check_kernel(func, then_case, launch, true)?;
            match else_case {
                Some(e) => check_kernel(func, e, launch, true),
                None => Ok(()),
            }
        }
        StmtNode::Seq(v) => v
            .iter()
            .try_for_each(|x| check_kernel(func, x, launch, in_host_loop)),
        StmtNode::Attr { body, .. } | StmtNode::Let { body, .. } => {
            check_kernel(func, body, launch, in_host_loop)
        }
        StmtNode::Store { .. } | StmtNode::Evaluate(_) | StmtNode::StorageSync(_) => Ok(()),
    }
}

/// The buffers a statement loads from or stores to, in first-use order.
pub(crate) fn used_buffers(s: &Stmt) -> Vec<Buffer> {
    struct Used(Vec<Buffer>);
    impl ExprVisitor for Used {
        fn visit_buffer(&mut self, b: &Buffer) {
            if !self.0.contains(b) {
                self.0.push(b.clone());
            }
        }
    }
    impl StmtVisitor for Used {}
    let mut u = Used(Vec::new());
    u.visit_stmt(s);
    u.0
}
