//! The graph executor's side of runtime sizes ([`crate::dynamic`]): an input that
//! follows the sizes laid out at the largest sizes a contiguous run at a time, the sizes
//! the inputs tell written where the kernels read them, and a run's output set as an
//! input on the device (a decoder's cache).

use crate::error::GraphError;
use crate::executor::GraphModule;
use crate::host_ops::{HostOp, HostStep};
use crate::ir::TensorType;
use tessera_runtime::NDArray;

impl GraphModule {
    /// Input `name` (type `ty` at the largest sizes, storage `s`), which follows the
    /// sizes, set to `value`: the value's own shape checked first, then its indices,
    /// then the sizes it tells taken.
    pub(crate) fn set_sized_input(
        &mut self,
        name: &str,
        value: &NDArray,
        ty: &TensorType,
        s: usize,
    ) -> Result<(), GraphError> {
        let Some(d) = self.dynamic.as_ref() else {
            return Err(GraphError::Invalid(format!("`{name}` has no runtime size")));
        };
        let sizes = d.input(name, (value.dtype(), value.shape()), ty)?;
        crate::index_bounds::check(&self.index_bounds, name, value)?;
        let max: Vec<usize> = ty.shape.iter().map(|&d| d as usize).collect();
        let (src, at) = (value.as_bytes(), self.storages[s].buffer());
        for (from, to, len) in crate::dynamic::leading_runs(value.shape(), &max, ty.dtype.bytes()) {
            self.device.copy_from_host(at, to, &src[from..from + len])?;
        }
        self.take_sizes(name, sizes)
    }

    /// Input `name` set, telling `sizes`; once every input agrees, the sizes written.
    fn take_sizes(&mut self, name: &str, sizes: crate::dynamic::Told) -> Result<(), GraphError> {
        if let Some(d) = self.dynamic.as_mut() {
            d.take(name, sizes);
        }
        if let Some(sizes) = self.dynamic.as_ref().and_then(|d| d.sizes().ok()) {
            self.write_sizes(&sizes)?;
        }
        Ok(())
    }

    /// Writes the runtime sizes the kernels read ([`crate::dynamic`]).
    pub(crate) fn write_sizes(&self, sizes: &[i64]) -> Result<(), GraphError> {
        if let Some(d) = &self.dynamic {
            let at = self.storages[d.io.sizes_storage].buffer();
            let bytes: Vec<u8> = sizes
                .iter()
                .flat_map(|&s| (s as i32).to_ne_bytes())
                .collect();
            self.device.copy_from_host(at, 0, &bytes)?;
        }
        Ok(())
    }

    /// Runs host step `h` (named `name`) on its buffers: waits for the device, reads its
    /// inputs (their leading blocks at the run's sizes, where they follow them),
    /// computes, writes its outputs back in the largest layout, and the size it counts.
    pub(crate) fn run_host_step(
        &self,
        name: &str,
        h: &HostStep,
        buffers: &[tessera_runtime::BufferId],
    ) -> Result<(), GraphError> {
        self.device.synchronize()?;
        let sizes = match h.dims.is_empty() {
            true => None,
            false => Some(self.read_sizes()?),
        };
        // a value's shape at this run's sizes (the largest where none follow)
        let shape_of = |j: usize, ty: &TensorType| -> Vec<usize> {
            let mut shape: Vec<usize> = ty.shape.iter().map(|&d| d as usize).collect();
            if let (Some(s), Some(dims)) = (&sizes, h.dims.get(j)) {
                for f in dims {
                    shape[f.dim] = f.at(s).max(0) as usize;
                }
            }
            shape
        };
        let mut inputs = Vec::with_capacity(h.inputs.len());
        for (j, (ty, &buffer)) in h.inputs.iter().zip(buffers).enumerate() {
            let max: Vec<usize> = ty.shape.iter().map(|&d| d as usize).collect();
            let mut a = NDArray::zeros(ty.dtype, &max)?;
            self.device.copy_to_host(buffer, 0, a.as_bytes_mut())?;
            inputs.push(crate::selection::cropped(&a, &shape_of(j, ty))?);
        }
        let ni = h.inputs.len();
        let outs: Vec<TensorType> = match h.op {
            // a selection's output: room for its bound
            HostOp::Select { .. } => h.outputs.clone(),
            // the values and the positions of one selection: one shape, the first's
            // (which a TopK that writes its k has from the other sizes)
            HostOp::TopK { .. } => {
                let first = h.outputs.first().map_or(Vec::new(), |ty| shape_of(ni, ty));
                let s: Vec<i64> = first.iter().map(|&d| d as i64).collect();
                (h.outputs.iter())
                    .map(|ty| TensorType::new(&s, ty.dtype))
                    .collect()
            }
        };
        let done = h.op.run_step(&inputs, &outs)?;
        for ((out, ty), &buffer) in done.outputs.iter().zip(&h.outputs).zip(&buffers[ni..]) {
            let max: Vec<usize> = ty.shape.iter().map(|&d| d as usize).collect();
            let whole = crate::selection::placed(out, &max)?;
            self.device.copy_from_host(buffer, 0, whole.as_bytes())?;
        }
        if let Some((k, count)) = done.size {
            self.write_produced_size(name, k, count)?;
        }
        if let (Some(k), HostOp::TopK { axis, .. }) = (h.count, &h.op) {
            let kept = outs
                .first()
                .and_then(|o| o.shape.get(*axis).copied())
                .unwrap_or(0);
            self.write_produced_size(name, k, kept)?;
        }
        Ok(())
    }

    /// The sizes the kernels read, as they are on the device now.
    fn read_sizes(&self) -> Result<Vec<i64>, GraphError> {
        let d = self.dynamic.as_ref().ok_or_else(|| {
            GraphError::Invalid("a host step follows sizes the module does not have".into())
        })?;
        let mut bytes = vec![0u8; 4 * d.io.ranges.len()];
        let at = self.storages[d.io.sizes_storage].buffer();
        self.device.copy_to_host(at, 0, &mut bytes)?;
        Ok(bytes
            .chunks_exact(4)
            .map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]) as i64)
            .collect())
    }

    /// Size `k`, which a host step's selection has just counted (`count`), written where
    /// the kernels after it read it ([`crate::selection`]).
    pub(crate) fn write_produced_size(
        &self,
        step: &str,
        k: usize,
        count: i64,
    ) -> Result<(), GraphError> {
        let d = self.dynamic.as_ref().ok_or_else(|| {
            GraphError::Invalid(format!(
                "step `{step}` counts a size the module does not have"
            ))
        })?;
        let at = self.storages[d.io.sizes_storage].buffer();
        let bytes = (count as i32).to_ne_bytes();
        self.device.copy_from_host(at, 4 * k, &bytes)?;
        Ok(())
    }

    /// After a run: the sizes its selections counted, read back from where they were
    /// written, are its outputs' from now on.
    pub(crate) fn read_produced_sizes(&mut self) -> Result<(), GraphError> {
        let Some(d) = self.dynamic.as_ref() else {
            return Ok(());
        };
        if !d.io.ranges.iter().any(|r| r.produced) {
            return Ok(());
        }
        let values = self.read_sizes()?;
        if let Some(d) = self.dynamic.as_mut() {
            d.ran_with_produced(&values);
        }
        Ok(())
    }

    /// The ranges of the sizes the module runs, one per symbolic size; empty where it
    /// runs one shape ([`crate::dynamic`]).
    pub fn size_ranges(&self) -> &[crate::dynamic::SizeRange] {
        self.dynamic.as_ref().map_or(&[], |d| &d.io.ranges)
    }

    /// Sets input `name` to output `index` of the last run, on the device (a decoder's
    /// cache: the keys and values a step returned are the next step's): the output in
    /// the sizes' layout, copied a contiguous run at a time from its storage into the
    /// input's, never through the host where the device can copy itself. For a module
    /// with runtime sizes, whose inputs and outputs are laid out at the largest sizes.
    pub fn set_input_from_output(&mut self, name: &str, index: usize) -> Result<(), GraphError> {
        let bad = |reason: String| GraphError::Input {
            name: name.to_string(),
            reason,
        };
        let (ty, s) = self
            .inputs
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, t, s)| (t.clone(), *s))
            .ok_or_else(|| bad("the network has no such input".into()))?;
        let (out_ty, o) = self
            .outputs
            .get(index)
            .cloned()
            .ok_or_else(|| bad(format!("output {index} does not exist")))?;
        let d = self
            .dynamic
            .as_ref()
            .filter(|d| d.has_input(name))
            .ok_or_else(|| bad("it has no runtime size: set it from the host".into()))?;
        if self.index_bounds.iter().any(|b| b.input == name) {
            return Err(bad(
                "its indices are checked on the host: set it from the host".into(),
            ));
        }
        let shape = d.output_shape(index, &out_ty)?;
        let sizes = d.input(name, (out_ty.dtype, &shape), &ty)?;
        let width = ty.dtype.bytes();
        let out_max: Vec<usize> = out_ty.shape.iter().map(|&d| d as usize).collect();
        let in_max: Vec<usize> = ty.shape.iter().map(|&d| d as usize).collect();
        let (from, to) = (self.storages[o].buffer(), self.storages[s].buffer());
        let runs = crate::dynamic::leading_runs(&shape, &out_max, width)
            .zip(crate::dynamic::leading_runs(&shape, &in_max, width));
        for ((_, at_out, len), (_, at_in, _)) in runs {
            self.device.copy_between(from, at_out, to, at_in, len)?;
        }
        self.take_sizes(name, sizes)
    }

    /// Sets every input to its [`GraphModule::default_input`] at the sizes `values`
    /// (one per range of [`GraphModule::size_ranges`]): each input that follows them
    /// the leading block of its random values at those sizes.
    pub fn set_random_inputs_at(&mut self, values: &[i64]) -> Result<(), GraphError> {
        let ranges = self.size_ranges();
        if values.len() != ranges.len() {
            return Err(GraphError::Invalid(format!(
                "{} sizes given for a module of {} ({})",
                values.len(),
                ranges.len(),
                crate::dynamic::describe(ranges)
            )));
        }
        for k in 0..self.inputs.len() {
            let whole = self.default_input(k)?;
            let name = self.inputs[k].0.clone();
            let mut shape = whole.shape().to_vec();
            for d in self.input_size_dims(&name) {
                shape[d.dim] = d.at(values).max(0) as usize;
            }
            let value = crate::selection::cropped(&whole, &shape)?;
            self.set_input(&name, &value)?;
        }
        Ok(())
    }

    /// The dimensions of input `name` that follow the sizes (none where it has a fixed
    /// shape).
    pub fn input_size_dims(&self, name: &str) -> &[crate::dynamic::SizeDim] {
        self.dynamic
            .as_ref()
            .and_then(|d| d.io.inputs.iter().find(|(n, _)| n == name))
            .map_or(&[], |(_, d)| &d[..])
    }
}
