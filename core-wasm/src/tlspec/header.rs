//! The safetensors JSON header, read and written with `u64` sizes.
//!
//! The codec does its own header (de)serialization instead of going through
//! `safetensors::tensor::Metadata` because that type sizes everything in `usize`: on the wasm32
//! component a file over 4 GiB would overflow, and its validation errors arrive wrapped in JSON
//! errors, losing the typed codes hostile-input handling needs. The checks mirror its
//! validation (offsets contiguous from 0, each size equal to elements × item size).

use super::limits::MAX_RANK;
use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// The key of the safetensors metadata map.
pub(crate) const METADATA_KEY: &str = "__metadata__";

/// A header as parsed, before any validation.
#[derive(Debug, Default)]
pub(crate) struct RawHeader {
    pub metadata: Option<BTreeMap<String, String>>,
    /// Tensors in header order (not yet sorted by offset).
    pub tensors: Vec<(String, RawTensor)>,
    /// A name that appeared twice (JSON objects may repeat keys; a reader must not pick one).
    pub duplicate: Option<String>,
}

/// One tensor entry as parsed.
#[derive(Debug, Deserialize)]
pub(crate) struct RawTensor {
    pub dtype: String,
    pub shape: RawShape,
    pub data_offsets: (u64, u64),
}

/// A shape that stops storing dimensions past [`MAX_RANK`] but keeps counting them, so a rank
/// of a million costs no memory and still yields a typed `tlspec_rank_too_large`.
#[derive(Debug)]
pub(crate) struct RawShape {
    pub dims: Vec<u64>,
    pub rank: u64,
}

impl<'de> Deserialize<'de> for RawShape {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ShapeVisitor;
        impl<'de> Visitor<'de> for ShapeVisitor {
            type Value = RawShape;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of dimensions")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawShape, A::Error> {
                let mut shape = RawShape {
                    dims: Vec::new(),
                    rank: 0,
                };
                while let Some(dim) = seq.next_element::<u64>()? {
                    if shape.dims.len() <= MAX_RANK {
                        shape.dims.push(dim);
                    }
                    shape.rank += 1;
                }
                Ok(shape)
            }
        }
        deserializer.deserialize_seq(ShapeVisitor)
    }
}

impl<'de> Deserialize<'de> for RawHeader {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct HeaderVisitor;
        impl<'de> Visitor<'de> for HeaderVisitor {
            type Value = RawHeader;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a safetensors header object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawHeader, A::Error> {
                let mut header = RawHeader::default();
                let mut seen = std::collections::HashSet::new();
                while let Some(key) = map.next_key::<String>()? {
                    if !seen.insert(key.clone()) && header.duplicate.is_none() {
                        header.duplicate = Some(key.clone());
                    }
                    if key == METADATA_KEY {
                        header.metadata = Some(map.next_value()?);
                    } else {
                        let tensor: RawTensor = map.next_value()?;
                        header.tensors.push((key, tensor));
                    }
                }
                Ok(header)
            }
        }
        deserializer.deserialize_map(HeaderVisitor)
    }
}

/// Parses header JSON; the caller maps the error's category onto a code.
pub(crate) fn parse(json: &str) -> Result<RawHeader, serde_json::Error> {
    // serde_json's default recursion limit (128) bounds nesting, so a deeply nested header is an
    // error and never a stack overflow.
    serde_json::from_str(json)
}

/// One tensor entry to write.
pub(crate) struct TensorOut<'a> {
    pub name: &'a str,
    pub dtype: &'static str,
    pub shape: &'a [u64],
    pub data_offsets: (u64, u64),
}

/// The header to write: `__metadata__` first, then tensors in file order.
pub(crate) struct HeaderOut<'a> {
    pub metadata: &'a BTreeMap<String, String>,
    pub tensors: &'a [TensorOut<'a>],
}

impl Serialize for HeaderOut<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Entry<'a> {
            dtype: &'static str,
            shape: &'a [u64],
            data_offsets: [u64; 2],
        }
        let mut map = serializer.serialize_map(Some(self.tensors.len() + 1))?;
        map.serialize_entry(METADATA_KEY, self.metadata)?;
        for tensor in self.tensors {
            map.serialize_entry(
                tensor.name,
                &Entry {
                    dtype: tensor.dtype,
                    shape: tensor.shape,
                    data_offsets: [tensor.data_offsets.0, tensor.data_offsets.1],
                },
            )?;
        }
        map.end()
    }
}
