//! Opening a `.tlspec` from an untrusted source. The host reads only what the core asks for,
//! in this order: the 8-byte length prefix, the header, the trace body; every size comes from
//! the core's checks and is bounded again here against the file and the sandbox. Payload bytes
//! are read only by the commands that need them, in bounded chunks.

use crate::error::CliError;
use crate::exit_status::ExitStatus;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use torchlens_host_runtime::{wit, CoreInstance, ResourceAny};

/// Largest trace body handed to the sandbox: it must fit in the component's memory with room
/// for the decoded trace.
pub fn max_body_bytes(memory_mib: u64) -> u64 {
    (memory_mib << 20) / 4
}

/// Chunk size for reading payloads.
pub const CHUNK_BYTES: usize = 1 << 20;

/// A decoded `.tlspec`: the open file, what its header says, and the trace inside the core.
pub struct OpenedTrace {
    pub path: PathBuf,
    file: File,
    pub file_length: u64,
    pub header: wit::HeaderInfo,
    pub trace: ResourceAny,
}

fn read_exact_at(
    file: &mut File,
    path: &Path,
    offset: u64,
    buffer: &mut [u8],
) -> Result<(), CliError> {
    file.seek(SeekFrom::Start(offset))
        .and_then(|_| file.read_exact(buffer))
        .map_err(|error| CliError::io(path, &error))
}

impl OpenedTrace {
    /// Opens and decodes `path` inside the sandbox.
    pub fn open(core: &mut CoreInstance, path: &Path, memory_mib: u64) -> Result<Self, CliError> {
        let mut file = File::open(path).map_err(|error| CliError::io(path, &error))?;
        let metadata = file
            .metadata()
            .map_err(|error| CliError::io(path, &error))?;
        if !metadata.is_file() {
            return Err(CliError::new(
                ExitStatus::Io,
                "io_not_a_file",
                format!("{} is not a regular file", path.display()),
                "give the path of a .tlspec file",
            ));
        }
        let file_length = metadata.len();

        let mut prefix = vec![0u8; file_length.min(8) as usize];
        read_exact_at(&mut file, path, 0, &mut prefix)?;
        let header_length = core.tlspec_header_length(&prefix)?;
        // The core bounds the header length; the file bounds what there is to read.
        let available = file_length.saturating_sub(8).min(header_length);
        let mut header = prefix;
        header.resize(8 + available as usize, 0);
        read_exact_at(&mut file, path, 8, &mut header[8..])?;
        let info = core.parse_tlspec_header(&header, file_length)?;

        let body_end = info.body_offset.checked_add(info.body_length);
        if body_end.is_none_or(|end| end > file_length) {
            return Err(CliError::new(
                ExitStatus::InvalidFile,
                "tlspec_truncated",
                "the trace body lies beyond the end of the file",
                "the file is damaged; save the trace again from its source",
            ));
        }
        let limit = max_body_bytes(memory_mib);
        if info.body_length > limit {
            return Err(CliError::new(
                ExitStatus::LimitExceeded,
                "tlspec_body_too_large",
                format!(
                    "the trace body takes {} bytes, more than the sandbox's {limit}",
                    info.body_length
                ),
                "if you trust the file, raise --memory-mib",
            ));
        }
        let mut body = vec![0u8; info.body_length as usize];
        read_exact_at(&mut file, path, info.body_offset, &mut body)?;
        let (header_info, trace) = core.decode_tlspec(&header, &body, file_length)?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
            file_length,
            header: header_info,
            trace,
        })
    }

    /// A reader over exactly a payload's bytes, after checking its range lies inside the file.
    pub fn payload_reader(
        &mut self,
        entry: &wit::PayloadEntry,
    ) -> Result<PayloadReader<'_>, CliError> {
        let end = entry.offset.checked_add(entry.length);
        if end.is_none_or(|end| end > self.file_length) {
            return Err(CliError::new(
                ExitStatus::InvalidFile,
                "tlspec_payload_out_of_range",
                format!("payload {} lies beyond the end of the file", entry.label),
                "the file is damaged; save the trace again from its source",
            ));
        }
        self.file
            .seek(SeekFrom::Start(entry.offset))
            .map_err(|error| CliError::io(&self.path, &error))?;
        Ok(PayloadReader {
            path: &self.path,
            bytes: (&mut self.file).take(entry.length),
            left: entry.length,
        })
    }

    /// The payload CRC-32 table, by payload label, when the file has one. The core checked
    /// that it holds one 4-byte entry per payload (so its size is bounded by the header's), in
    /// the order of `header.payloads`.
    pub fn crc_table(&mut self) -> Result<Option<BTreeMap<String, u32>>, CliError> {
        let Some(offset) = self.header.crc_table_offset else {
            return Ok(None);
        };
        let length = 4 * self.header.payloads.len() as u64;
        if offset
            .checked_add(length)
            .is_none_or(|end| end > self.file_length)
        {
            return Err(CliError::new(
                ExitStatus::InvalidFile,
                "tlspec_payload_out_of_range",
                "the payload CRC-32 table lies beyond the end of the file",
                "the file is damaged; save the trace again from its source",
            ));
        }
        let mut table = vec![0u8; length as usize];
        read_exact_at(&mut self.file, &self.path, offset, &mut table)?;
        Ok(Some(
            self.header
                .payloads
                .iter()
                .map(|entry| entry.label.clone())
                .zip(crc_table_entries(&table))
                .collect(),
        ))
    }

    /// Every op of the trace, fetched from the core in pages.
    pub fn ops(&self, core: &mut CoreInstance) -> Result<Vec<wit::OpInfo>, CliError> {
        const PAGE: u32 = 4096;
        let mut ops = Vec::new();
        loop {
            let page = core.ops(self.trace, ops.len() as u32, PAGE)?;
            let done = (page.len() as u32) < PAGE;
            ops.extend(page);
            if done {
                return Ok(ops);
            }
        }
    }
}

/// Reads one payload in chunks.
pub struct PayloadReader<'a> {
    path: &'a Path,
    bytes: std::io::Take<&'a mut File>,
    left: u64,
}

impl PayloadReader<'_> {
    /// Fills `buffer` with the next bytes (all of it unless the payload ends first) and
    /// returns how many; 0 at the end. A file that shrank underneath is an I/O error.
    pub fn next_chunk(&mut self, buffer: &mut [u8]) -> Result<usize, CliError> {
        let take = (self.left.min(buffer.len() as u64)) as usize;
        self.bytes
            .read_exact(&mut buffer[..take])
            .map_err(|error| CliError::io(self.path, &error))?;
        self.left -= take as u64;
        Ok(take)
    }
}

/// The entries of a payload CRC-32 table: little-endian `u32`s (the format's own reader lives
/// in the core, which the CLI reaches only through the sandbox).
fn crc_table_entries(table: &[u8]) -> impl Iterator<Item = u32> + '_ {
    table
        .chunks_exact(4)
        .map(|entry| u32::from_le_bytes([entry[0], entry[1], entry[2], entry[3]]))
}
