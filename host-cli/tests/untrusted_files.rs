//! Files from anyone stay harmless around the sandbox: no string from a file reaches the
//! terminal with its control characters (JSON keeps them exact), and no output is written
//! through a symlink someone planted.

mod cli_support;
#[path = "../../core-wasm/tests/hostile_corpus.rs"]
mod hostile_corpus;

use cli_support::{scratch, tlspec};
use hostile_corpus::{
    has_terminal_control, raw_file, terminal_attack_file, v2_header_with, TERMINAL_ATTACK,
};
use std::path::Path;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

fn text(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// Whether raw bytes (not only decoded characters) hold a terminal control: ESC, BEL, the C1
/// CSI in its UTF-8 form, or the right-to-left override's UTF-8 form.
fn has_raw_control_bytes(bytes: &str) -> bool {
    has_terminal_control(bytes)
        || bytes.as_bytes().windows(2).any(|pair| pair == [0xc2, 0x9b])
        || bytes.contains('\u{202e}')
}

#[test]
fn text_output_escapes_every_string_from_the_file_and_json_keeps_it_exact() {
    let folder = scratch("terminal-attack");
    let path = folder.join("attack.tlspec");
    std::fs::write(&path, terminal_attack_file()).expect("write");
    let svg = folder.join("attack.svg");
    for args in [
        vec!["summary", text(&path)],
        vec!["ops", text(&path)],
        vec!["ops", text(&path), "func:sigmoid"],
        vec!["inspect", text(&path)],
        vec!["check", text(&path)],
        vec!["draw", "--svg", text(&path)],
        vec!["draw", "--svg", "--full", text(&path)],
        vec!["draw", "--svg", text(&path), "-o", text(&svg)],
        vec!["diff", text(&path), text(&path)],
    ] {
        let run = tlspec(&args, LIMIT);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        assert!(
            !has_raw_control_bytes(&run.stdout),
            "{args:?}: {:?}",
            run.stdout
        );
        assert!(
            !has_raw_control_bytes(&run.stderr),
            "{args:?}: {:?}",
            run.stderr
        );
    }
    // The attack is shown, visibly escaped, where a person reads it.
    let summary = tlspec(&["summary", text(&path)], LIMIT);
    assert!(
        summary.stdout.contains("\\x1b]0;pwned\\x07"),
        "{}",
        summary.stdout
    );
    let inspect = tlspec(&["inspect", text(&path)], LIMIT);
    assert!(
        inspect.stdout.contains("2.5\\x1b]0;pwned\\x07"),
        "{}",
        inspect.stdout
    );
    assert!(inspect.stdout.contains("\\u{202e}"), "{}", inspect.stdout);

    // JSON stays exact: the strings come back as the file holds them.
    let json = tlspec(&["--json", "inspect", text(&path)], LIMIT).json();
    assert_eq!(
        json["manifest"]["backend_version"],
        format!("2.5{TERMINAL_ATTACK}")
    );
    let ops = tlspec(&["--json", "ops", text(&path)], LIMIT).json();
    assert!(ops.as_array().expect("rows").iter().any(|row| row["module"]
        .as_str()
        .is_some_and(|module| module.contains(TERMINAL_ATTACK))));
}

#[test]
fn error_messages_escape_the_file_strings_they_quote() {
    let folder = scratch("terminal-attack-error");
    // A header tensor whose name is the attack, spanning fewer bytes than its shape needs: the
    // core's error quotes the name.
    let name = serde_json::to_string(&format!("w{TERMINAL_ATTACK}")).expect("JSON string");
    let header = v2_header_with(
        &[],
        &format!(r#",{name}:{{"dtype":"U8","shape":[5],"data_offsets":[8,12]}}"#),
    );
    let path = folder.join("bad-name.tlspec");
    std::fs::write(&path, raw_file(&header, &[0; 12])).expect("write");
    let run = tlspec(&["inspect", text(&path)], LIMIT);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(run.stderr.contains("w\\x1b]0;pwned"), "{}", run.stderr);
    assert!(!has_raw_control_bytes(&run.stderr), "{:?}", run.stderr);
    assert!(run.stdout.is_empty());
    // --json reports the name exactly (JSON's own escaping makes it inert).
    let run = tlspec(&["--json", "inspect", text(&path)], LIMIT);
    assert!(run.json()["error"]["message"]
        .as_str()
        .is_some_and(|message| message.contains(&format!("w{TERMINAL_ATTACK}"))));
    assert!(!has_raw_control_bytes(&run.stdout), "{:?}", run.stdout);
}

#[test]
fn draw_never_writes_through_a_planted_symlink() {
    let folder = scratch("symlink");
    let trace = folder.join("model.tlspec");
    std::fs::write(&trace, hostile_corpus::valid_file()).expect("write");
    let out = folder.join("out");
    std::fs::create_dir_all(&out).expect("out folder");
    let victim = folder.join("victim.txt");
    std::fs::write(&victim, b"precious").expect("victim");
    // Links at the names an earlier version used for its temporary file, at guessable ones,
    // and at the target itself.
    let target = out.join("graph.svg");
    for planted in [
        ".graph.svg.partial",
        ".graph.svg.tmp",
        "graph.svg.partial",
        "graph.svg.tmp",
        ".graph.svg.partial.svg",
    ] {
        std::os::unix::fs::symlink(&victim, out.join(planted)).expect("plant");
    }
    let run = tlspec(&["draw", "--svg", text(&trace), "-o", text(&target)], LIMIT);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(std::fs::read(&victim).expect("victim"), b"precious");
    let written = std::fs::symlink_metadata(&target).expect("written");
    assert!(written.file_type().is_file(), "the output is a plain file");
    assert!(std::fs::read_to_string(&target)
        .expect("svg")
        .starts_with("<svg"));

    // A link at the target itself is replaced, never followed.
    std::fs::remove_file(&target).expect("remove");
    std::os::unix::fs::symlink(&victim, &target).expect("plant at target");
    let run = tlspec(&["draw", "--svg", text(&trace), "-o", text(&target)], LIMIT);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(std::fs::read(&victim).expect("victim"), b"precious");
    assert!(std::fs::symlink_metadata(&target)
        .expect("written")
        .file_type()
        .is_file());
    // No temporary file is left behind, and the planted links are as they were.
    let left: Vec<String> = std::fs::read_dir(&out)
        .expect("list")
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".partial") && !name.starts_with(".graph.svg.partial"))
        .filter(|name| !["graph.svg.partial"].contains(&name.as_str()))
        .collect();
    assert!(left.is_empty(), "{left:?}");

    // The output is created with the usual mode (0o666 less the umask), not a temp file's 0o600.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&target)
        .expect("meta")
        .permissions()
        .mode()
        & 0o777;
    assert_ne!(mode, 0o600, "mode {mode:o}");
}

#[test]
fn draw_onto_a_folder_or_into_a_missing_folder_is_a_typed_io_error() {
    let folder = scratch("draw-io");
    let trace = folder.join("model.tlspec");
    std::fs::write(&trace, hostile_corpus::valid_file()).expect("write");
    let run = tlspec(
        &["--json", "draw", "--svg", text(&trace), "-o", text(&folder)],
        LIMIT,
    );
    assert_eq!(run.code, 6, "{}", run.stdout);
    assert_eq!(run.json()["error"]["code"], "io_not_a_file");
    let missing = folder.join("missing").join("graph.svg");
    let run = tlspec(
        &[
            "--json",
            "draw",
            "--svg",
            text(&trace),
            "-o",
            text(&missing),
        ],
        LIMIT,
    );
    assert_eq!(run.code, 6, "{}", run.stdout);
    assert_eq!(run.json()["error"]["code"], "io_error");
}

#[test]
fn files_that_are_no_tlspec_at_all_are_not_a_tlspec_with_exit_3() {
    let folder = scratch("not-a-tlspec");
    // A text file, and what torch.save writes (a zip archive).
    let mut zip = b"PK\x03\x04\x14\x00\x00\x00\x08\x00".to_vec();
    zip.extend_from_slice(&[0; 200]);
    for (name, bytes) in [
        ("notes.txt", b"just some notes, not a trace\n".to_vec()),
        ("model.pt", zip),
    ] {
        let path = folder.join(name);
        std::fs::write(&path, bytes).expect("write");
        let run = tlspec(&["--json", "inspect", text(&path)], LIMIT);
        assert_eq!(run.code, 3, "{name}: {}", run.stdout);
        assert_eq!(run.json()["error"]["code"], "tlspec_not_a_tlspec", "{name}");
        let human = tlspec(&["summary", text(&path)], LIMIT);
        assert_eq!(human.code, 3);
        assert!(human.stderr.contains("not a .tlspec"), "{}", human.stderr);
        assert!(!human.stderr.contains("hostile"), "{}", human.stderr);
    }
}

#[test]
fn numeric_options_are_checked_and_remedies_speak_the_cli() {
    let folder = scratch("options");
    let path = folder.join("model.tlspec");
    std::fs::write(&path, hostile_corpus::valid_file()).expect("write");
    for tolerance in ["nan", "-1", "-0.5", "inf"] {
        let run = tlspec(
            &[
                "--json",
                "diff",
                text(&path),
                text(&path),
                &format!("--tolerance={tolerance}"),
            ],
            LIMIT,
        );
        assert_eq!(run.code, 2, "{tolerance}: {}", run.stdout);
        assert_eq!(run.json()["error"]["code"], "usage_invalid_tolerance");
    }
    let run = tlspec(
        &["diff", text(&path), text(&path), "--tolerance", "1e-6"],
        LIMIT,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    // A selector the core refuses after parsing: the remedy names the CLI's grammar, not
    // Python's tl.func.
    let run = tlspec(
        &[
            "--json",
            "ops",
            text(&path),
            "followed_by(func:relu, func:sigmoid, 0)",
        ],
        LIMIT,
    );
    assert_eq!(run.code, 2, "{}", run.stdout);
    let remedy = run.json()["error"]["remedy"]
        .as_str()
        .expect("a remedy")
        .to_owned();
    assert!(!remedy.contains("tl."), "{remedy}");
    assert!(remedy.contains("func:relu"), "{remedy}");
}
