//! How each framework-neutral [`Dtype`] is stored as a safetensors dtype.

use crate::dtype::Dtype;
use crate::error::{CoreError, CoreResult, ErrorKind};

/// How a payload of some logical dtype sits in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageDtype {
    /// As the safetensors dtype of this name, with the op's shape.
    Native(&'static str),
    /// As raw bits: safetensors `U8` with shape `[nbytes]` (no safetensors equivalent exists).
    Bits,
}

impl StorageDtype {
    /// The safetensors dtype name written in the header.
    pub fn name(self) -> &'static str {
        match self {
            StorageDtype::Native(name) => name,
            StorageDtype::Bits => "U8",
        }
    }
}

/// The storage of a logical dtype; `Other` dtypes cannot be stored because the core cannot size
/// them, and guessing a size would corrupt the file.
pub fn storage_dtype(dtype: &Dtype) -> CoreResult<StorageDtype> {
    Ok(StorageDtype::Native(match dtype {
        Dtype::Bool => "BOOL",
        Dtype::UInt8 => "U8",
        Dtype::Int8 => "I8",
        Dtype::Int16 => "I16",
        Dtype::UInt16 => "U16",
        Dtype::Int32 => "I32",
        Dtype::UInt32 => "U32",
        Dtype::Int64 => "I64",
        Dtype::UInt64 => "U64",
        Dtype::Float8E4M3 => "F8_E4M3",
        Dtype::Float8E5M2 => "F8_E5M2",
        Dtype::Float16 => "F16",
        Dtype::BFloat16 => "BF16",
        Dtype::Float32 => "F32",
        Dtype::Float64 => "F64",
        Dtype::Complex64 => "C64",
        // safetensors has no 128-bit complex; it travels as bits, its dtype in the manifest.
        Dtype::Complex128 => return Ok(StorageDtype::Bits),
        Dtype::Other(name) => {
            return Err(CoreError::new(
                ErrorKind::Unsupported,
                "tlspec_payload_dtype_unsupported",
                format!("payloads of dtype `{name}` cannot be stored in a .tlspec"),
                "convert the payload to a named dtype before saving, or save without it",
            ))
        }
    }))
}

/// Bytes per element of a safetensors dtype this codec reads, or `None` for any other name
/// (sub-byte and exotic float8 dtypes are never written by the codec).
pub(crate) fn storage_item_size(name: &str) -> Option<u64> {
    Some(match name {
        "BOOL" | "U8" | "I8" | "F8_E4M3" | "F8_E5M2" => 1,
        "I16" | "U16" | "F16" | "BF16" => 2,
        "I32" | "U32" | "F32" => 4,
        "I64" | "U64" | "F64" | "C64" => 8,
        _ => return None,
    })
}

/// Number of elements of a shape, or `None` on overflow.
pub(crate) fn element_count(shape: &[u64]) -> Option<u64> {
    shape
        .iter()
        .try_fold(1u64, |count, &dim| count.checked_mul(dim))
}
