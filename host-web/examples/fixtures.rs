//! Writes the viewer's test files into a folder: `demo.tlspec` (every value saved),
//! `stopped.tlspec` (capture stopped early and unverified),
//! `large.tlspec` (100k+ ops), `influence/<graph>.tlspec` (the influence search's graphs) and
//! the broken or hostile files of `hostile/`, with
//! `hostile/expected.json` naming the error code each one must produce.
//!
//! `cargo run -p torchlens-web --example fixtures -- out/web-fixtures`

use std::path::PathBuf;
use torchlens_web::fixtures::{
    demo_file, hostile_files, influence_files, large_file, stopped_file,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let folder = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "out/web-fixtures".to_string()),
    );
    let hostile = folder.join("hostile");
    std::fs::create_dir_all(&hostile)?;
    std::fs::write(folder.join("demo.tlspec"), demo_file()?)?;
    std::fs::write(folder.join("stopped.tlspec"), stopped_file()?)?;
    std::fs::write(folder.join("large.tlspec"), large_file(100_000)?)?;
    let influence = folder.join("influence");
    std::fs::create_dir_all(&influence)?;
    for (name, bytes) in influence_files()? {
        std::fs::write(influence.join(format!("{name}.tlspec")), bytes)?;
    }
    let mut expected = serde_json::Map::new();
    for (name, bytes, code) in hostile_files()? {
        std::fs::write(hostile.join(name), bytes)?;
        expected.insert(name.to_string(), code.into());
    }
    std::fs::write(
        hostile.join("expected.json"),
        serde_json::to_string_pretty(&expected)?,
    )?;
    println!("wrote {}", folder.display());
    Ok(())
}
