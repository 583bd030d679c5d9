//! Scalar and vector data types.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The kind of a scalar value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum TypeCode {
    Bool,
    Int,
    UInt,
    Float,
}

/// A data type: a scalar kind, its width in bits and a number of vector lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DataType {
    pub code: TypeCode,
    pub bits: u8,
    pub lanes: u16,
}

impl DataType {
    pub const fn new(code: TypeCode, bits: u8, lanes: u16) -> Self {
        DataType { code, bits, lanes }
    }
    pub const fn bool() -> Self {
        Self::new(TypeCode::Bool, 1, 1)
    }
    pub const fn int(bits: u8) -> Self {
        Self::new(TypeCode::Int, bits, 1)
    }
    pub const fn uint(bits: u8) -> Self {
        Self::new(TypeCode::UInt, bits, 1)
    }
    pub const fn float(bits: u8) -> Self {
        Self::new(TypeCode::Float, bits, 1)
    }
    pub const fn int32() -> Self {
        Self::int(32)
    }
    pub const fn int64() -> Self {
        Self::int(64)
    }
    pub const fn float32() -> Self {
        Self::float(32)
    }
    pub const fn float16() -> Self {
        Self::float(16)
    }
    pub const fn float64() -> Self {
        Self::float(64)
    }
    /// The same scalar kind with `lanes` lanes.
    pub const fn with_lanes(self, lanes: u16) -> Self {
        Self::new(self.code, self.bits, lanes)
    }
    /// The scalar type of one lane.
    pub const fn element_of(self) -> Self {
        self.with_lanes(1)
    }
    pub fn is_scalar(self) -> bool {
        self.lanes == 1
    }
    pub fn is_vector(self) -> bool {
        self.lanes > 1
    }
    pub fn is_bool(self) -> bool {
        self.code == TypeCode::Bool
    }
    pub fn is_int(self) -> bool {
        self.code == TypeCode::Int
    }
    pub fn is_uint(self) -> bool {
        self.code == TypeCode::UInt
    }
    /// Signed or unsigned integer.
    pub fn is_integer(self) -> bool {
        matches!(self.code, TypeCode::Int | TypeCode::UInt)
    }
    pub fn is_float(self) -> bool {
        self.code == TypeCode::Float
    }
    /// Size of one lane in bytes (bool takes one byte).
    pub fn bytes(self) -> usize {
        (self.bits as usize).div_ceil(8)
    }
    /// The smallest and largest integer value this integer type holds.
    pub fn int_range(self) -> (i64, i64) {
        match (self.code, self.bits) {
            (TypeCode::Bool, _) => (0, 1),
            (TypeCode::Int, b) if b >= 64 => (i64::MIN, i64::MAX),
            (TypeCode::Int, b) => (-(1i64 << (b - 1)), (1i64 << (b - 1)) - 1),
            (TypeCode::UInt, b) if b >= 63 => (0, i64::MAX),
            (TypeCode::UInt, b) => (0, (1i64 << b) - 1),
            (TypeCode::Float, _) => (i64::MIN, i64::MAX),
        }
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.code {
            TypeCode::Bool => write!(f, "bool")?,
            TypeCode::Int => write!(f, "int{}", self.bits)?,
            TypeCode::UInt => write!(f, "uint{}", self.bits)?,
            TypeCode::Float => write!(f, "float{}", self.bits)?,
        }
        if self.lanes > 1 {
            write!(f, "x{}", self.lanes)?;
        }
        Ok(())
    }
}

/// Error of parsing a data type name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown data type `{0}` (known: bool, int8/16/32/64, uint8/16/32/64, float16/32/64, each with an optional `xN` lane suffix)")]
pub struct ParseDataTypeError(pub String);

impl FromStr for DataType {
    type Err = ParseDataTypeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseDataTypeError(s.to_string());
        let (base, lanes) = match s.split_once('x') {
            Some((b, l)) => (b, l.parse::<u16>().map_err(|_| err())?),
            None => (s, 1),
        };
        if lanes == 0 {
            return Err(err());
        }
        let t = match base {
            "bool" => DataType::bool(),
            "int8" => DataType::int(8),
            "int16" => DataType::int(16),
            "int32" => DataType::int(32),
            "int64" => DataType::int(64),
            "uint8" => DataType::uint(8),
            "uint16" => DataType::uint(16),
            "uint32" => DataType::uint(32),
            "uint64" => DataType::uint(64),
            "float16" => DataType::float(16),
            "float32" => DataType::float(32),
            "float64" => DataType::float(64),
            _ => return Err(err()),
        };
        Ok(t.with_lanes(lanes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_parse_round_trip() {
        for name in ["bool", "int8", "uint64", "float16", "float32x8", "int32x4"] {
            let t: DataType = name.parse().unwrap();
            assert_eq!(t.to_string(), name);
        }
        assert!("float13".parse::<DataType>().is_err());
        assert!("int32x0".parse::<DataType>().is_err());
    }

    #[test]
    fn ranges() {
        assert_eq!(DataType::int(8).int_range(), (-128, 127));
        assert_eq!(DataType::uint(8).int_range(), (0, 255));
        assert_eq!(DataType::float32().bytes(), 4);
        assert_eq!(DataType::bool().bytes(), 1);
    }
}
