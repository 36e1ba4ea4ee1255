//! A trace's op and layer tables: [`ChunkedTable`]s (`torchlens_schema::chunked_table`), so a
//! long trace's tables grow without copying and hold at most one partly filled chunk each.

use super::{Layer, Op};
pub use torchlens_schema::chunked_table::{ChunkedTable, Iter, IterMut};

/// A trace's ops, indexed by [`super::OpId`] (as `usize`).
pub type OpTable = ChunkedTable<Op>;
/// A trace's layers, indexed by `Op::layer`.
pub type LayerTable = ChunkedTable<Layer>;

#[cfg(test)]
mod tests {
    use super::*;
    use torchlens_schema::chunked_table::CHUNK_LEN;

    /// An op of a real (one-op) trace, with `pass` set to tell ops apart.
    fn op(pass: u32) -> Op {
        let mut recorder = crate::recorder::EventRecorder::default();
        let x = recorder.input("x", &[4]);
        let y = recorder.op("relu", &[x], &[4]);
        recorder.output("y", y);
        let mut builder = crate::TraceBuilder::new(super::super::TraceOptions::default());
        builder.ingest(recorder.events).expect("valid events");
        let trace = builder.finish().expect("finishes");
        let mut op = trace.ops[1].clone();
        op.pass = pass;
        // Runtime-only, never on the wire: left out so a decoded op compares equal.
        op.clear_value();
        op
    }

    #[test]
    fn ops_keep_their_ids_across_chunks() {
        let table: OpTable = (0..3 * CHUNK_LEN as u32 + 5).map(op).collect();
        assert_eq!(table.len(), 3 * CHUNK_LEN + 5);
        for id in [
            0,
            1,
            CHUNK_LEN - 1,
            CHUNK_LEN,
            2 * CHUNK_LEN + 7,
            3 * CHUNK_LEN + 4,
        ] {
            assert_eq!(table[id].pass, id as u32);
        }
        assert!(table.get(3 * CHUNK_LEN + 5).is_none());
        assert_eq!(
            table.last().map(|op| op.pass),
            Some(3 * CHUNK_LEN as u32 + 4)
        );
        let passes: Vec<u32> = table.iter().map(|op| op.pass).collect();
        assert_eq!(passes, (0..3 * CHUNK_LEN as u32 + 5).collect::<Vec<_>>());
    }

    #[test]
    fn a_range_starts_and_ends_anywhere() {
        let table: OpTable = (0..2 * CHUNK_LEN as u32 + 3).map(op).collect();
        for (start, end) in [
            (0, 0),
            (0, 5),
            (3, CHUNK_LEN + 2),
            (CHUNK_LEN, CHUNK_LEN + 1),
            (CHUNK_LEN - 1, 2 * CHUNK_LEN + 3),
            (2 * CHUNK_LEN + 1, 10 * CHUNK_LEN),
            (10 * CHUNK_LEN, 20 * CHUNK_LEN),
        ] {
            let passes: Vec<u32> = table.range(start, end).map(|op| op.pass).collect();
            let end = end.min(table.len());
            let start = start.min(end);
            assert_eq!(passes, (start as u32..end as u32).collect::<Vec<_>>());
            assert_eq!(table.range(start, end).len(), end - start);
        }
    }

    #[test]
    fn growing_moves_no_full_chunk_and_reserves_at_most_one_chunk_ahead() {
        let mut table = OpTable::new();
        for pass in 0..5 * CHUNK_LEN as u32 + 1 {
            table.push(op(pass));
        }
        let needed = table.len() * std::mem::size_of::<Op>();
        assert!(table.allocated_bytes() <= needed + CHUNK_LEN * std::mem::size_of::<Op>());
        let small: OpTable = (0..20).map(op).collect();
        assert!(small.allocated_bytes() <= 32 * std::mem::size_of::<Op>());
    }

    #[test]
    fn a_clone_grows_like_the_original() {
        let table: OpTable = (0..CHUNK_LEN as u32 + 3).map(op).collect();
        let mut copy = table.clone();
        assert_eq!(copy, table);
        copy.push(op(9));
        assert_eq!(copy.len(), table.len() + 1);
        assert_eq!(copy[CHUNK_LEN + 3].pass, 9);
    }

    #[test]
    fn the_wire_form_is_a_plain_sequence() {
        let ops: Vec<Op> = (0..CHUNK_LEN as u32 + 2).map(op).collect();
        let table = OpTable::from(ops.clone());
        let bytes = postcard::to_allocvec(&table).expect("encodes");
        assert_eq!(bytes, postcard::to_allocvec(&ops).expect("encodes"));
        let back: OpTable = postcard::from_bytes(&bytes).expect("decodes");
        assert_eq!(back, table);
    }
}
