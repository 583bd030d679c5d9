//! Decoding ONNX tensors: raw, typed or external data, checked against the shape before
//! anything is allocated for it.

use super::{err, proto, Importer};
use crate::error::GraphError;
use proto::tensor_proto::DataType as OnnxType;
use std::path::Path;
use tessera_ir::DataType;
use tessera_runtime::NDArray;

/// The element type of an ONNX type code, if supported.
pub(super) fn dtype_of(t: i32) -> Option<DataType> {
    Some(match OnnxType::try_from(t).ok()? {
        OnnxType::Float => DataType::float32(),
        OnnxType::Double => DataType::float64(),
        OnnxType::Int64 => DataType::int64(),
        OnnxType::Int32 => DataType::int32(),
        OnnxType::Int16 => DataType::int(16),
        OnnxType::Int8 => DataType::int(8),
        OnnxType::Uint8 => DataType::uint(8),
        OnnxType::Uint16 => DataType::uint(16),
        OnnxType::Uint32 => DataType::uint(32),
        OnnxType::Uint64 => DataType::uint(64),
        OnnxType::Float16 => DataType::float(16),
        OnnxType::Bool => DataType::bool(),
        _ => return None,
    })
}

/// The ONNX type code of a type name (`FLOAT`, `INT64`…), as `Cast` named types before
/// opset 6.
pub(super) fn code_of_name(name: &str) -> Option<i32> {
    OnnxType::from_str_name(&name.to_ascii_uppercase()).map(|t| t as i32)
}

impl Importer {
    /// Decodes a tensor (raw, typed or external data).
    pub(super) fn tensor(&self, t: &proto::TensorProto) -> Result<NDArray, GraphError> {
        let name = t.name();
        let dtype = dtype_of(t.data_type()).ok_or_else(|| {
            err(format!(
                "tensor `{name}`: unsupported data type {}",
                t.data_type()
            ))
        })?;
        if t.dims.iter().any(|&d| d < 0) {
            return Err(err(format!(
                "tensor `{name}`: negative dimension in {:?}",
                t.dims
            )));
        }
        let shape: Vec<usize> = t.dims.iter().map(|&d| d as usize).collect();
        let numel = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        let numel = numel.ok_or_else(|| err(format!("tensor `{name}`: too large")))?;
        let size = if dtype.is_bool() { 1 } else { dtype.bytes() };
        let external = t.data_location() == proto::tensor_proto::DataLocation::External;
        let raw: Option<Vec<u8>> = if external {
            Some(self.external(t)?)
        } else {
            t.raw_data.clone()
        };
        // The data must fit the shape before anything is allocated for it: a malformed
        // shape must not become a huge allocation.
        if let Some(raw) = raw {
            if Some(raw.len()) != numel.checked_mul(size) {
                return Err(err(format!(
                    "tensor `{name}`: {} bytes of data for {numel} elements of {dtype}",
                    raw.len()
                )));
            }
            let mut out = NDArray::zeros(dtype, &shape)?;
            out.as_bytes_mut().copy_from_slice(&raw);
            return Ok(out);
        }
        // where ONNX keeps each type's values: 8- and 16-bit types (float16 as its bits)
        // and int32 in `int32_data`, uint32 and uint64 in `uint64_data`
        let wide_unsigned = dtype.is_uint() && dtype.bits >= 32;
        let typed_len = match dtype {
            d if d == DataType::float32() => t.float_data.len(),
            d if d == DataType::float64() => t.double_data.len(),
            d if d == DataType::int64() => t.int64_data.len(),
            _ if wide_unsigned => t.uint64_data.len(),
            _ => t.int32_data.len(),
        };
        if typed_len != numel {
            return Err(err(format!(
                "tensor `{name}`: {typed_len} values for shape {:?}",
                t.dims
            )));
        }
        let mut out = NDArray::zeros(dtype, &shape)?;
        let bytes = out.as_bytes_mut();
        match dtype {
            d if d == DataType::float32() => {
                for (i, v) in t.float_data.iter().enumerate() {
                    bytes[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
                }
            }
            d if d == DataType::float64() => {
                for (i, v) in t.double_data.iter().enumerate() {
                    bytes[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
                }
            }
            d if d == DataType::int64() => {
                for (i, v) in t.int64_data.iter().enumerate() {
                    bytes[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
                }
            }
            _ if wide_unsigned => {
                for (i, &v) in t.uint64_data.iter().enumerate() {
                    let le = v.to_le_bytes();
                    bytes[i * size..(i + 1) * size].copy_from_slice(&le[..size]);
                }
            }
            _ => {
                for (i, &v) in t.int32_data.iter().enumerate() {
                    let le = v.to_le_bytes();
                    bytes[i * size..(i + 1) * size].copy_from_slice(&le[..size]);
                }
            }
        }
        Ok(out)
    }

    /// Reads the external data of a tensor: `location` relative to the model's folder,
    /// optional `offset` and `length`.
    fn external(&self, t: &proto::TensorProto) -> Result<Vec<u8>, GraphError> {
        let name = t.name();
        let get = |k: &str| {
            t.external_data
                .iter()
                .find(|e| e.key() == k)
                .map(|e| e.value().to_string())
        };
        let location = get("location")
            .ok_or_else(|| err(format!("tensor `{name}`: external data without a location")))?;
        let rel = Path::new(&location);
        if rel.is_absolute()
            || rel
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(err(format!(
                "tensor `{name}`: external data location `{location}` must stay inside the model's folder"
            )));
        }
        let path = self.base_dir.join(rel);
        let data = std::fs::read(&path).map_err(|source| GraphError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let parse = |k: &str| -> Result<Option<usize>, GraphError> {
            get(k)
                .map(|v| {
                    v.parse::<usize>()
                        .map_err(|_| err(format!("tensor `{name}`: bad external data {k} `{v}`")))
                })
                .transpose()
        };
        let offset = parse("offset")?.unwrap_or(0);
        let length = parse("length")?.unwrap_or(data.len().saturating_sub(offset));
        let end = offset.checked_add(length).filter(|&e| e <= data.len()).ok_or_else(|| {
            err(format!(
                "tensor `{name}`: external data [{offset}, +{length}) is beyond the end of {} ({} bytes)",
                path.display(),
                data.len()
            ))
        })?;
        Ok(data[offset..end].to_vec())
    }
}
