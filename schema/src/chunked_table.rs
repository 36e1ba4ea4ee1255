//! A list of records in order, stored in fixed-size chunks: what the core keeps a trace's ops and
//! layers in, and what the Python extension keeps a capture's replay facts in.
//!
//! A `Vec` doubles as it grows: its capacity ends up to twice what it needs, and each doubling
//! leaves the previous copy behind. In the core's component that copy is never given back (linear
//! memory does not shrink); in a host process it stays in the allocator's heap, resident (the
//! torch adapter keeps freed memory for reuse). Chunks of [`CHUNK_LEN`] records are allocated once
//! and never moved: a table holds at most one partly filled chunk, and growing copies nothing.
//! The first chunk still grows by doubling, so a short list does not reserve a whole chunk.
//!
//! On the wire a table is a plain sequence, exactly as a `Vec` serializes: `.tlspec` bodies are
//! unchanged.

use serde::de::{SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Index, IndexMut};

/// Records per chunk (a power of two, so a record's chunk and offset are a shift and a mask).
pub const CHUNK_LEN: usize = 1 << CHUNK_BITS;
const CHUNK_BITS: u32 = 10;
/// Capacity of the first chunk when the first record arrives.
const FIRST_CAPACITY: usize = 16;

/// Records in order, indexed from 0.
#[derive(Clone, PartialEq)]
pub struct ChunkedTable<T> {
    /// Every chunk but the last holds exactly [`CHUNK_LEN`] records.
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for ChunkedTable<T> {
    fn default() -> Self {
        Self {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T> ChunkedTable<T> {
    /// An empty table (allocates nothing).
    pub fn new() -> Self {
        Self::default()
    }

    /// How many records the table holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table holds no record.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Removes every record (and lets go of the chunks).
    pub fn clear(&mut self) {
        self.chunks = Vec::new();
        self.len = 0;
    }

    /// Appends a record (its index is `len()` before the call).
    pub fn push(&mut self, record: T) {
        match self.chunks.last_mut() {
            Some(chunk) if chunk.len() < CHUNK_LEN => {
                if chunk.len() == chunk.capacity() {
                    // Only the first chunk (or a chunk cloned to its length) gets here: grow it
                    // by doubling, never past a chunk.
                    let target = (chunk.capacity() * 2).clamp(FIRST_CAPACITY, CHUNK_LEN);
                    chunk.reserve_exact(target - chunk.len());
                }
                chunk.push(record);
            }
            _ => {
                let capacity = if self.chunks.is_empty() {
                    FIRST_CAPACITY
                } else {
                    CHUNK_LEN
                };
                let mut chunk = Vec::with_capacity(capacity);
                chunk.push(record);
                self.chunks.push(chunk);
            }
        }
        self.len += 1;
    }

    /// The record at `index`, if there is one.
    pub fn get(&self, index: usize) -> Option<&T> {
        self.chunks
            .get(index >> CHUNK_BITS)?
            .get(index & (CHUNK_LEN - 1))
    }

    /// The record at `index`, mutably, if there is one.
    pub fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        self.chunks
            .get_mut(index >> CHUNK_BITS)?
            .get_mut(index & (CHUNK_LEN - 1))
    }

    /// The last record.
    pub fn last(&self) -> Option<&T> {
        self.chunks.last()?.last()
    }

    /// The records in order.
    pub fn iter(&self) -> Iter<'_, T> {
        self.range(0, self.len)
    }

    /// The records in order, mutably.
    pub fn iter_mut(&mut self) -> IterMut<'_, T> {
        IterMut {
            inner: self.chunks.iter_mut().flatten(),
            remaining: self.len,
        }
    }

    /// The records at `start..end` (clamped to the table), in order.
    pub fn range(&self, start: usize, end: usize) -> Iter<'_, T> {
        let end = end.min(self.len);
        let start = start.min(end);
        let first_chunk = start >> CHUNK_BITS;
        let (current, rest) = match self.chunks.get(first_chunk) {
            Some(chunk) => (
                chunk[(start & (CHUNK_LEN - 1)).min(chunk.len())..].iter(),
                self.chunks[first_chunk + 1..].iter(),
            ),
            None => ([].iter(), [].iter()),
        };
        Iter {
            current,
            rest,
            remaining: end - start,
        }
    }

    /// Bytes the table holds for its records (capacity, not length; not counting heap the
    /// records own).
    pub fn allocated_bytes(&self) -> usize {
        self.chunks
            .iter()
            .map(|chunk| chunk.capacity() * std::mem::size_of::<T>())
            .sum()
    }
}

impl<T> Index<usize> for ChunkedTable<T> {
    type Output = T;
    fn index(&self, index: usize) -> &T {
        match self.get(index) {
            Some(record) => record,
            None => panic!("index {index} out of range: the table holds {}", self.len),
        }
    }
}

impl<T> IndexMut<usize> for ChunkedTable<T> {
    fn index_mut(&mut self, index: usize) -> &mut T {
        let len = self.len;
        match self.get_mut(index) {
            Some(record) => record,
            None => panic!("index {index} out of range: the table holds {len}"),
        }
    }
}

impl<T> From<Vec<T>> for ChunkedTable<T> {
    fn from(records: Vec<T>) -> Self {
        records.into_iter().collect()
    }
}

impl<T> FromIterator<T> for ChunkedTable<T> {
    fn from_iter<I: IntoIterator<Item = T>>(records: I) -> Self {
        let mut table = Self::new();
        table.extend(records);
        table
    }
}

impl<T> Extend<T> for ChunkedTable<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, records: I) {
        for record in records {
            self.push(record);
        }
    }
}

impl<'a, T> IntoIterator for &'a ChunkedTable<T> {
    type Item = &'a T;
    type IntoIter = Iter<'a, T>;
    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

impl<'a, T> IntoIterator for &'a mut ChunkedTable<T> {
    type Item = &'a mut T;
    type IntoIter = IterMut<'a, T>;
    fn into_iter(self) -> IterMut<'a, T> {
        self.iter_mut()
    }
}

impl<T: fmt::Debug> fmt::Debug for ChunkedTable<T> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_list().entries(self.iter()).finish()
    }
}

/// Iterator over a range of a [`ChunkedTable`]: the rest of the current chunk, then the chunks
/// after it (every one but the last full, so one step always reaches a record).
pub struct Iter<'a, T> {
    current: std::slice::Iter<'a, T>,
    rest: std::slice::Iter<'a, Vec<T>>,
    remaining: usize,
}

impl<T> Clone for Iter<'_, T> {
    fn clone(&self) -> Self {
        Self {
            current: self.current.clone(),
            rest: self.rest.clone(),
            remaining: self.remaining,
        }
    }
}

impl<'a, T> Iterator for Iter<'a, T> {
    type Item = &'a T;
    #[inline]
    fn next(&mut self) -> Option<&'a T> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        match self.current.next() {
            Some(record) => Some(record),
            None => {
                self.current = self.rest.next()?.iter();
                self.current.next()
            }
        }
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<T> ExactSizeIterator for Iter<'_, T> {}

/// Iterator over a [`ChunkedTable`]'s records, mutably.
pub struct IterMut<'a, T> {
    inner: std::iter::Flatten<std::slice::IterMut<'a, Vec<T>>>,
    remaining: usize,
}

impl<'a, T> Iterator for IterMut<'a, T> {
    type Item = &'a mut T;
    fn next(&mut self) -> Option<&'a mut T> {
        let record = self.inner.next()?;
        self.remaining -= 1;
        Some(record)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<T> ExactSizeIterator for IterMut<'_, T> {}

impl<T: Serialize> Serialize for ChunkedTable<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ChunkedTable<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TableVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for TableVisitor<T> {
            type Value = ChunkedTable<T>;
            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("a sequence")
            }
            // Nothing is reserved from the sequence's claimed length: a hostile file may claim
            // billions; the table grows only with records that actually decode.
            fn visit_seq<A: SeqAccess<'de>>(self, mut records: A) -> Result<Self::Value, A::Error> {
                let mut table = ChunkedTable::new();
                while let Some(record) = records.next_element()? {
                    table.push(record);
                }
                Ok(table)
            }
        }
        deserializer.deserialize_seq(TableVisitor(PhantomData))
    }
}
