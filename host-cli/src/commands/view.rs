//! `tlspec view FILE`: serves the browser viewer (`host-web/www/`) and the file on a localhost
//! port and prints the address that opens it. The server has no logic beyond static files: the
//! page's own copy of the core reads the file inside the browser. It runs until interrupted.
//!
//! Other web pages the user has open must not read the trace. So the server answers only
//! requests whose `Host` header names this server (`127.0.0.1:<port>` or `localhost:<port>`),
//! which a DNS-rebinding name never does, and serves everything under a random path token
//! (128 bits from the operating system) printed in the address: a page that cannot see the
//! address cannot guess where the file is.

use crate::error::CliError;
use crate::exit_status::ExitStatus;
use crate::output::shown;
use crate::tlspec_file::OpenedTrace;
use std::io::Write;
use std::path::{Component, Path, PathBuf};
use tiny_http::{Header, Response, Server};

/// The path the file is served under, below the token.
const TRACE_NAME: &str = "trace.tlspec";

/// A random path token: 16 bytes from the operating system's random source, as hex.
fn path_token() -> Result<String, CliError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|error| {
        CliError::new(
            ExitStatus::Internal,
            "view_no_randomness",
            format!("the operating system gave no random bytes for the address: {error}"),
            "report this as a bug",
        )
    })?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// Whether a request's `Host` header names this server: `127.0.0.1:<port>` or
/// `localhost:<port>` (any case), and nothing else.
fn host_allowed(request: &tiny_http::Request, port: u16) -> bool {
    let mut hosts = request
        .headers()
        .iter()
        .filter(|header| header.field.equiv("Host"));
    let (Some(host), None) = (hosts.next(), hosts.next()) else {
        return false;
    };
    let host = host.value.as_str().to_ascii_lowercase();
    host == format!("127.0.0.1:{port}") || host == format!("localhost:{port}")
}

/// Where the page lives when `--web-root` and `TORCHLENS_WEB_ROOT` say nothing: the source
/// tree this binary was built from (`make web` builds the page there).
fn default_web_root() -> PathBuf {
    std::env::var_os("TORCHLENS_WEB_ROOT").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../host-web/www"),
        PathBuf::from,
    )
}

/// Serves until the process is stopped; returns only when it cannot start.
pub fn run(
    file: &OpenedTrace,
    web_root: Option<&Path>,
    port: u16,
    json: bool,
) -> Result<(), CliError> {
    let root = web_root.map_or_else(default_web_root, Path::to_path_buf);
    let missing_page = || {
        CliError::new(
            ExitStatus::Io,
            "view_page_missing",
            format!("no viewer page at {}", root.display()),
            "build it with `make web`, or point --web-root at a built host-web/www",
        )
    };
    let root = root.canonicalize().map_err(|_| missing_page())?;
    if !root.join("index.html").is_file() {
        return Err(missing_page());
    }
    let server = Server::http(("127.0.0.1", port)).map_err(|error| {
        CliError::new(
            ExitStatus::Io,
            "view_port_unavailable",
            format!("cannot listen on 127.0.0.1:{port}: {error}"),
            "choose another --port (0 picks a free one)",
        )
    })?;
    let address = server
        .server_addr()
        .to_ip()
        .map_or(port, |address| address.port());
    let token = path_token()?;
    let prefix = format!("/{token}/");
    let trace_path = format!("{prefix}{TRACE_NAME}");
    let url = format!("http://127.0.0.1:{address}{prefix}?file={trace_path}");
    let mut stdout = std::io::stdout();
    let announced = if json {
        writeln!(stdout, "{}", serde_json::json!({ "url": url }))
    } else {
        writeln!(
            stdout,
            "serving {} on {url}\n(open it in a browser; Ctrl-C stops)",
            shown(&file.path.display().to_string())
        )
    };
    announced
        .and_then(|()| stdout.flush())
        .map_err(|error| CliError::io(Path::new("<stdout>"), &error))?;
    if !root.join("pkg").is_dir() {
        eprintln!(
            "tlspec view: {} has no pkg/ (run `make web`); the page will not load the core",
            shown(&root.display().to_string())
        );
    }
    for request in server.incoming_requests() {
        if !host_allowed(&request, address) {
            let _ = request.respond(Response::empty(403));
            continue;
        }
        let path = request
            .url()
            .split(['?', '#'])
            .next()
            .unwrap_or("/")
            .to_owned();
        let target = if path == trace_path {
            Some(file.path.clone())
        } else {
            path.strip_prefix(&prefix)
                .and_then(|inside| static_file(&root, inside))
        };
        let opened = target.and_then(|target| {
            std::fs::File::open(&target)
                .ok()
                .map(|handle| (content_type(&target), handle))
        });
        // A client that went away is not the server's problem.
        let _ = match opened {
            Some((kind, handle)) => {
                let mut response = Response::from_file(handle);
                if let Ok(header) = Header::from_bytes(&b"Content-Type"[..], kind.as_bytes()) {
                    response = response.with_header(header);
                }
                request.respond(response)
            }
            None => request.respond(Response::empty(404)),
        };
    }
    Ok(())
}

/// The file under `root` a URL path names, if it stays inside `root` and exists.
fn static_file(root: &Path, path: &str) -> Option<PathBuf> {
    let relative = path.trim_start_matches('/');
    let relative = if relative.is_empty() {
        "index.html"
    } else {
        relative
    };
    let relative = Path::new(relative);
    // Only plain names: no `..`, no root, no prefix.
    if !relative
        .components()
        .all(|component| matches!(component, Component::Normal(_)))
    {
        return None;
    }
    let candidate = root.join(relative).canonicalize().ok()?;
    (candidate.starts_with(root) && candidate.is_file()).then_some(candidate)
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|extension| extension.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("wasm") => "application/wasm",
        Some("json") => "application/json",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        _ => "application/octet-stream",
    }
}
