//! Every file the CLI writes goes through [`write_output_file`]: the bytes go into a new file
//! created exclusively (`O_CREAT | O_EXCL`, which never opens an existing name and never follows
//! a symlink) under a random name in the target's folder, and that file is then renamed over
//! the target. A rename replaces the target's directory entry itself, so a symlink planted at
//! the target (or at any name the CLI might have used for its temporary file) is replaced, not
//! followed: nothing is written through a link the CLI did not create, and a failed write leaves
//! no half file. `tempfile` does the exclusive creation and the random name.

use crate::error::CliError;
use crate::exit_status::ExitStatus;
use std::io::Write;
use std::path::Path;

/// Writes `contents` to `path` as described above. The file gets the mode a plain create would
/// (0o666 less the umask), not the 0o600 of a temporary file.
pub fn write_output_file(path: &Path, contents: &[u8]) -> Result<(), CliError> {
    let name = path.file_name().ok_or_else(|| {
        CliError::new(
            ExitStatus::Usage,
            "usage_invalid_output",
            format!("{} does not name a file", path.display()),
            "give a file path to --output",
        )
    })?;
    let folder = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if path.is_dir() {
        return Err(CliError::new(
            ExitStatus::Io,
            "io_not_a_file",
            format!("{} is a folder", path.display()),
            "give --output the path of a file to write, not a folder",
        ));
    }
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(name);
    prefix.push(".");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".partial");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut temporary = builder
        .tempfile_in(folder)
        .map_err(|error| CliError::io(path, &error))?;
    temporary
        .write_all(contents)
        .and_then(|()| temporary.as_file().sync_all())
        .map_err(|error| CliError::io(path, &error))?;
    // On failure the temporary file is removed when `error.file` drops.
    temporary
        .persist(path)
        .map_err(|error| CliError::io(path, &error.error))?;
    Ok(())
}
