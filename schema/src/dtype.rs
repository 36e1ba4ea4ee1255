//! Framework-neutral element types. Adapters report dtypes by these names ("float32",
//! "bfloat16", ...); the codec maps them onto safetensors dtypes.

use serde::{Deserialize, Serialize};

/// An element type. `Other` keeps a framework dtype the core has no name for, so nothing a
/// framework reports is lost; such payloads cannot be stored in a `.tlspec`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Dtype {
    Bool,
    UInt8,
    Int8,
    Int16,
    UInt16,
    Int32,
    UInt32,
    Int64,
    UInt64,
    Float8E4M3,
    Float8E5M2,
    Float16,
    BFloat16,
    Float32,
    Float64,
    Complex64,
    Complex128,
    Other(String),
}

impl Dtype {
    /// Every named dtype, in a fixed order (used by tests and docs).
    pub const NAMED: [Dtype; 17] = [
        Dtype::Bool,
        Dtype::UInt8,
        Dtype::Int8,
        Dtype::Int16,
        Dtype::UInt16,
        Dtype::Int32,
        Dtype::UInt32,
        Dtype::Int64,
        Dtype::UInt64,
        Dtype::Float8E4M3,
        Dtype::Float8E5M2,
        Dtype::Float16,
        Dtype::BFloat16,
        Dtype::Float32,
        Dtype::Float64,
        Dtype::Complex64,
        Dtype::Complex128,
    ];

    /// Parses a framework-neutral name. Unknown names become `Other`, never an error: an adapter
    /// must be able to report whatever its framework produced.
    pub fn from_name(name: &str) -> Dtype {
        match name {
            "bool" => Dtype::Bool,
            "uint8" => Dtype::UInt8,
            "int8" => Dtype::Int8,
            "int16" => Dtype::Int16,
            "uint16" => Dtype::UInt16,
            "int32" => Dtype::Int32,
            "uint32" => Dtype::UInt32,
            "int64" => Dtype::Int64,
            "uint64" => Dtype::UInt64,
            "float8_e4m3" => Dtype::Float8E4M3,
            "float8_e5m2" => Dtype::Float8E5M2,
            "float16" => Dtype::Float16,
            "bfloat16" => Dtype::BFloat16,
            "float32" => Dtype::Float32,
            "float64" => Dtype::Float64,
            "complex64" => Dtype::Complex64,
            "complex128" => Dtype::Complex128,
            other => Dtype::Other(other.to_string()),
        }
    }

    /// The framework-neutral name.
    pub fn name(&self) -> &str {
        match self {
            Dtype::Bool => "bool",
            Dtype::UInt8 => "uint8",
            Dtype::Int8 => "int8",
            Dtype::Int16 => "int16",
            Dtype::UInt16 => "uint16",
            Dtype::Int32 => "int32",
            Dtype::UInt32 => "uint32",
            Dtype::Int64 => "int64",
            Dtype::UInt64 => "uint64",
            Dtype::Float8E4M3 => "float8_e4m3",
            Dtype::Float8E5M2 => "float8_e5m2",
            Dtype::Float16 => "float16",
            Dtype::BFloat16 => "bfloat16",
            Dtype::Float32 => "float32",
            Dtype::Float64 => "float64",
            Dtype::Complex64 => "complex64",
            Dtype::Complex128 => "complex128",
            Dtype::Other(name) => name,
        }
    }

    /// Bytes per element, or `None` for a dtype the core cannot size.
    pub fn item_size(&self) -> Option<u64> {
        Some(match self {
            Dtype::Bool | Dtype::UInt8 | Dtype::Int8 | Dtype::Float8E4M3 | Dtype::Float8E5M2 => 1,
            Dtype::Int16 | Dtype::UInt16 | Dtype::Float16 | Dtype::BFloat16 => 2,
            Dtype::Int32 | Dtype::UInt32 | Dtype::Float32 => 4,
            Dtype::Int64 | Dtype::UInt64 | Dtype::Float64 | Dtype::Complex64 => 8,
            Dtype::Complex128 => 16,
            Dtype::Other(_) => return None,
        })
    }
}

impl std::fmt::Display for Dtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
