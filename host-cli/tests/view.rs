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

/// One HTTP/1.0 GET with the `Host` header a browser sends for the printed address.
fn get(port: u16, path: &str) -> (u16, Vec<u8>) {
    get_as(port, path, &format!("127.0.0.1:{port}"))
}

/// One HTTP/1.0 GET with the given `Host` header: the status code and the body.
fn get_as(port: u16, path: &str, host: &str) -> (u16, Vec<u8>) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connects");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").expect("sends");
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
    let rest = url.trim_start_matches("http://127.0.0.1:");
    let mut parts = rest.split('/');
    let port: u16 = parts
        .next()
        .and_then(|port| port.parse().ok())
        .expect("a port");
    // Everything is served under a random path token printed in the address.
    let token = parts.next().expect("a token").to_owned();
    assert_eq!(token.len(), 32, "{url}");
    assert!(token.bytes().all(|byte| byte.is_ascii_hexdigit()), "{url}");
    assert!(
        url.ends_with(&format!("/{token}/?file=/{token}/trace.tlspec")),
        "{url}"
    );
    let page_path = format!("/{token}/?file=/{token}/trace.tlspec");
    let trace_path = format!("/{token}/trace.tlspec");

    let (status, page) = get(port, &page_path);
    assert_eq!(status, 200);
    assert_eq!(
        page,
        std::fs::read(web_root.join("index.html")).expect("page")
    );
    let (status, script) = get(port, &format!("/{token}/js/main.js"));
    assert_eq!(status, 200);
    assert_eq!(
        script,
        std::fs::read(web_root.join("js/main.js")).expect("script")
    );
    let (status, served) = get(port, &trace_path);
    assert_eq!(status, 200);
    assert_eq!(served, bytes);
    // `localhost` names this server too.
    assert_eq!(
        get_as(port, &trace_path, &format!("localhost:{port}")).0,
        200
    );
    for outside in [
        "/../Cargo.toml".to_owned(),
        format!("/{token}/../Cargo.toml"),
        format!("/{token}/%2e%2e/Cargo.toml"),
        format!("/{token}/js/../../Cargo.toml"),
        format!("/{token}/nothing.js"),
        // Without the token, nothing is served: not the page, not the file.
        "/".to_owned(),
        "/trace.tlspec".to_owned(),
        "/js/main.js".to_owned(),
        format!("/{}/trace.tlspec", "0".repeat(32)),
    ] {
        assert_eq!(get(port, &outside).0, 404, "{outside}");
    }
    // A foreign Host (a DNS-rebinding name, another port, none at all) gets nothing, even with
    // the token.
    for host in [
        "evil.example:1234".to_owned(),
        format!("evil.example:{port}"),
        format!("127.0.0.1:{}", port.wrapping_add(1)),
        "127.0.0.1".to_owned(),
        "localhost".to_owned(),
    ] {
        let (status, body) = get_as(port, &trace_path, &host);
        assert_eq!(status, 403, "{host}");
        assert!(body.is_empty(), "{host}");
    }
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connects");
    write!(stream, "GET {trace_path} HTTP/1.0\r\n\r\n").expect("sends");
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    assert!(
        response.starts_with("HTTP/1.0 403") || response.starts_with("HTTP/1.1 403"),
        "{response}"
    );
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
    assert_eq!(output.status.code(), Some(3));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["error"]["code"], "tlspec_not_a_tlspec");
}
