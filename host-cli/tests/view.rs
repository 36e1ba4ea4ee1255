//! `tlspec view FILE` serves the viewer page and the file on localhost, nothing else.

#[path = "../../core-wasm/tests/hostile_corpus.rs"]
mod hostile_corpus;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Kills the server when the test ends, pass or fail.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One HTTP/1.0 GET: the status code and the body.
fn get(port: u16, path: &str) -> (u16, Vec<u8>) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connects");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").expect("sends");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).expect("reads");
    let split = response
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .expect("a header block");
    let head = String::from_utf8_lossy(&response[..split]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("a status code");
    (status, response[split + 4..].to_vec())
}

#[test]
fn view_serves_the_page_and_the_file_and_nothing_outside() {
    let folder = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tlspec-view");
    std::fs::create_dir_all(&folder).expect("folder");
    let trace = folder.join("model.tlspec");
    let bytes = hostile_corpus::valid_file();
    std::fs::write(&trace, &bytes).expect("write");
    let web_root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../host-web/www");
    let child = Command::new(env!("CARGO_BIN_EXE_tlspec"))
        .args(["--json", "view", "--port", "0", "--web-root"])
        .arg(&web_root)
        .arg(&trace)
        .env(
            "TORCHLENS_CACHE_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache"),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("tlspec view starts");
    let mut server = Server(child);
    let mut line = String::new();
    BufReader::new(server.0.stdout.as_mut().expect("stdout"))
        .read_line(&mut line)
        .expect("the address line");
    let announced: serde_json::Value = serde_json::from_str(&line).expect("JSON");
    let url = announced["url"].as_str().expect("a url");
    let port: u16 = url
        .trim_start_matches("http://127.0.0.1:")
        .split('/')
        .next()
        .and_then(|port| port.parse().ok())
        .expect("a port");
    assert!(url.ends_with("/?file=/trace.tlspec"), "{url}");

    let (status, page) = get(port, "/?file=/trace.tlspec");
    assert_eq!(status, 200);
    assert_eq!(
        page,
        std::fs::read(web_root.join("index.html")).expect("page")
    );
    let (status, script) = get(port, "/js/main.js");
    assert_eq!(status, 200);
    assert_eq!(
        script,
        std::fs::read(web_root.join("js/main.js")).expect("script")
    );
    let (status, served) = get(port, "/trace.tlspec");
    assert_eq!(status, 200);
    assert_eq!(served, bytes);
    for outside in [
        "/../Cargo.toml",
        "/%2e%2e/Cargo.toml",
        "/js/../../Cargo.toml",
        "/nothing.js",
    ] {
        assert_eq!(get(port, outside).0, 404, "{outside}");
    }
}

#[test]
fn view_refuses_a_broken_file_before_serving() {
    let folder = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tlspec-view-broken");
    std::fs::create_dir_all(&folder).expect("folder");
    let broken = folder.join("broken.tlspec");
    std::fs::write(&broken, b"not a trace at all").expect("write");
    let output = Command::new(env!("CARGO_BIN_EXE_tlspec"))
        .args(["--json", "view", "--port", "0"])
        .arg(&broken)
        .env(
            "TORCHLENS_CACHE_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache"),
        )
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(5));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["error"]["code"], "tlspec_header_too_large");
}
