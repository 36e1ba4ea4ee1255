//! Tries files, the network and the environment through std, as any Rust code in a WASI
//! component would. In the TorchLens sandbox every one of these must fail.

wit_bindgen::generate!({ path: "wit", world: "probe" });

struct Probe;

impl Guest for Probe {
    fn read_file(path: String) -> String {
        match std::fs::read(&path) {
            Ok(bytes) => format!("read {} bytes", bytes.len()),
            Err(error) => format!("error: {error}"),
        }
    }

    fn list_folder(path: String) -> String {
        match std::fs::read_dir(&path) {
            Ok(entries) => format!("listed {} entries", entries.count()),
            Err(error) => format!("error: {error}"),
        }
    }

    fn connect(address: String) -> String {
        match std::net::TcpStream::connect(address.as_str()) {
            Ok(_) => "connected".to_owned(),
            Err(error) => format!("error: {error}"),
        }
    }

    fn environment() -> String {
        let variables: Vec<String> = std::env::vars().map(|(key, _)| key).collect();
        let arguments: Vec<String> = std::env::args().collect();
        format!("{} variables, {} arguments", variables.len(), arguments.len())
    }

    fn add(a: u32, b: u32) -> u32 {
        a.wrapping_add(b)
    }
}

export!(Probe);
