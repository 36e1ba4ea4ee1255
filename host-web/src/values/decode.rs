//! Payload bytes to numbers: each stored dtype's little-endian elements read as `f64`.
//!
//! Payload bytes are C-order elements, little endian, of the op's logical dtype (see
//! `docs/tlspec-format.md`, section 6). Complex values are read as their magnitude, booleans
//! as 0 and 1, and the 8- and 16-bit floats are widened by their bit layouts.

use torchlens_core::dtype::Dtype;

/// Widens one element's bytes to `f64`.
type Widen = fn(&[u8]) -> f64;

/// How to read one element: its size in bytes and the function that widens it.
#[derive(Clone, Copy)]
pub struct ElementReader {
    /// Bytes per element.
    pub size: usize,
    read: Widen,
    /// True when the number shown is a complex value's magnitude.
    pub magnitude: bool,
}

impl ElementReader {
    /// The reader for `dtype`, or `None` for a dtype the viewer cannot read (`Other`).
    pub fn for_dtype(dtype: &Dtype) -> Option<Self> {
        let (size, read, magnitude): (usize, Widen, bool) = match dtype {
            Dtype::Bool => (1, |b| f64::from(u8::from(b[0] != 0)), false),
            Dtype::UInt8 => (1, |b| f64::from(b[0]), false),
            Dtype::Int8 => (1, |b| f64::from(b[0] as i8), false),
            Dtype::Int16 => (2, |b| f64::from(i16::from_le_bytes([b[0], b[1]])), false),
            Dtype::UInt16 => (2, |b| f64::from(u16::from_le_bytes([b[0], b[1]])), false),
            Dtype::Int32 => (4, |b| f64::from(i32::from_le_bytes(word(b))), false),
            Dtype::UInt32 => (4, |b| f64::from(u32::from_le_bytes(word(b))), false),
            Dtype::Int64 => (8, |b| i64::from_le_bytes(double(b)) as f64, false),
            Dtype::UInt64 => (8, |b| u64::from_le_bytes(double(b)) as f64, false),
            Dtype::Float8E4M3 => (1, |b| float8_e4m3(b[0]), false),
            Dtype::Float8E5M2 => (1, |b| float8_e5m2(b[0]), false),
            Dtype::Float16 => (2, |b| float16(u16::from_le_bytes([b[0], b[1]])), false),
            Dtype::BFloat16 => (2, |b| bfloat16(u16::from_le_bytes([b[0], b[1]])), false),
            Dtype::Float32 => (4, |b| f64::from(f32::from_le_bytes(word(b))), false),
            Dtype::Float64 => (8, |b| f64::from_le_bytes(double(b)), false),
            Dtype::Complex64 => (8, complex64_magnitude, true),
            Dtype::Complex128 => (16, complex128_magnitude, true),
            Dtype::Other(_) => return None,
        };
        Some(Self {
            size,
            read,
            magnitude,
        })
    }

    /// Every whole element of `bytes`, widened (a trailing partial element is ignored).
    pub fn values<'a>(&self, bytes: &'a [u8]) -> impl Iterator<Item = f64> + 'a {
        let read = self.read;
        bytes.chunks_exact(self.size).map(read)
    }
}

fn word(bytes: &[u8]) -> [u8; 4] {
    [bytes[0], bytes[1], bytes[2], bytes[3]]
}

fn double(bytes: &[u8]) -> [u8; 8] {
    let mut out = [0u8; 8];
    out.copy_from_slice(&bytes[..8]);
    out
}

fn complex64_magnitude(bytes: &[u8]) -> f64 {
    let re = f64::from(f32::from_le_bytes(word(&bytes[..4])));
    let im = f64::from(f32::from_le_bytes(word(&bytes[4..8])));
    re.hypot(im)
}

fn complex128_magnitude(bytes: &[u8]) -> f64 {
    f64::from_le_bytes(double(&bytes[..8])).hypot(f64::from_le_bytes(double(&bytes[8..16])))
}

/// bfloat16 is the top half of a float32.
pub fn bfloat16(bits: u16) -> f64 {
    f64::from(f32::from_bits(u32::from(bits) << 16))
}

/// IEEE half precision: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
pub fn float16(bits: u16) -> f64 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exponent = i32::from((bits >> 10) & 0x1f);
    let mantissa = f64::from(bits & 0x3ff);
    match exponent {
        0 => sign * mantissa * 2f64.powi(-24),
        0x1f if mantissa == 0.0 => sign * f64::INFINITY,
        0x1f => f64::NAN,
        _ => sign * (1.0 + mantissa / 1024.0) * 2f64.powi(exponent - 15),
    }
}

/// float8 e4m3 (the "fn" variant torch and JAX use): bias 7, no infinities, `S.1111.111` is NaN.
pub fn float8_e4m3(bits: u8) -> f64 {
    let sign = if bits & 0x80 != 0 { -1.0 } else { 1.0 };
    let exponent = i32::from((bits >> 3) & 0x0f);
    let mantissa = f64::from(bits & 0x07);
    if bits & 0x7f == 0x7f {
        return f64::NAN;
    }
    match exponent {
        0 => sign * mantissa / 8.0 * 2f64.powi(-6),
        _ => sign * (1.0 + mantissa / 8.0) * 2f64.powi(exponent - 7),
    }
}

/// float8 e5m2: bias 15, IEEE-like infinities and NaNs.
pub fn float8_e5m2(bits: u8) -> f64 {
    float16(u16::from(bits) << 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(dtype: Dtype, bytes: &[u8]) -> Vec<f64> {
        ElementReader::for_dtype(&dtype)
            .expect("readable")
            .values(bytes)
            .collect()
    }

    #[test]
    fn integers_and_floats_read_little_endian() {
        assert_eq!(read(Dtype::Int16, &(-3i16).to_le_bytes()), [-3.0]);
        assert_eq!(read(Dtype::UInt32, &7u32.to_le_bytes()), [7.0]);
        assert_eq!(read(Dtype::Int64, &(-9i64).to_le_bytes()), [-9.0]);
        assert_eq!(read(Dtype::Float32, &1.5f32.to_le_bytes()), [1.5]);
        assert_eq!(read(Dtype::Float64, &(-0.25f64).to_le_bytes()), [-0.25]);
        assert_eq!(read(Dtype::Bool, &[0, 1, 7]), [0.0, 1.0, 1.0]);
        assert_eq!(read(Dtype::Int8, &[0xff]), [-1.0]);
    }

    #[test]
    fn half_precision_formats_widen_exactly() {
        // 1.0, -2.0, 65504 (largest half), smallest subnormal, +inf.
        assert_eq!(float16(0x3c00), 1.0);
        assert_eq!(float16(0xc000), -2.0);
        assert_eq!(float16(0x7bff), 65504.0);
        assert_eq!(float16(0x0001), 2f64.powi(-24));
        assert_eq!(float16(0x7c00), f64::INFINITY);
        assert!(float16(0x7e00).is_nan());
        // bfloat16 of 1.0 is 0x3f80; of -0.5 is 0xbf00.
        assert_eq!(bfloat16(0x3f80), 1.0);
        assert_eq!(bfloat16(0xbf00), -0.5);
        assert_eq!(read(Dtype::BFloat16, &0x4040u16.to_le_bytes()), [3.0]);
    }

    #[test]
    fn float8_formats_widen_exactly() {
        // e4m3: 0x38 = 1.0, 0x7e = 448 (largest), 0x7f is NaN, 0x01 the smallest subnormal.
        assert_eq!(float8_e4m3(0x38), 1.0);
        assert_eq!(float8_e4m3(0x7e), 448.0);
        assert_eq!(float8_e4m3(0xb8), -1.0);
        assert!(float8_e4m3(0x7f).is_nan());
        assert_eq!(float8_e4m3(0x01), 2f64.powi(-9));
        // e5m2: 0x3c = 1.0, 0x7b = 57344 (largest), 0x7c is +inf.
        assert_eq!(float8_e5m2(0x3c), 1.0);
        assert_eq!(float8_e5m2(0x7b), 57344.0);
        assert_eq!(float8_e5m2(0x7c), f64::INFINITY);
    }

    #[test]
    fn complex_values_read_as_magnitudes() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&3f32.to_le_bytes());
        bytes.extend_from_slice(&4f32.to_le_bytes());
        assert_eq!(read(Dtype::Complex64, &bytes), [5.0]);
        let mut wide = Vec::new();
        wide.extend_from_slice(&(-6f64).to_le_bytes());
        wide.extend_from_slice(&8f64.to_le_bytes());
        assert_eq!(read(Dtype::Complex128, &wide), [10.0]);
        assert!(
            ElementReader::for_dtype(&Dtype::Complex64)
                .unwrap()
                .magnitude
        );
    }

    #[test]
    fn partial_elements_and_unknown_dtypes_are_not_read() {
        assert_eq!(read(Dtype::Float32, &[0, 0, 128, 63, 1, 2]), [1.0]);
        assert!(ElementReader::for_dtype(&Dtype::Other("qint8".into())).is_none());
    }
}
