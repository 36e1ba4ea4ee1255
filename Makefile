# The two entry points of the repo (see README.md). Each sets up what it needs first.
.PHONY: setup setup-python component demo test lint bench

setup:
	./scripts/setup-rust.sh

setup-python:
	./scripts/setup-python.sh

component: setup
	./scripts/build-component.sh

## demo: build the core component and run the built-in demo model through it.
demo: component
	cargo run --quiet -p torchlens-host-runtime --example demo -- out/demo

## test: build everything and run every test (Rust unit and integration tests, the component
## under wasmtime, Python interop), then the format and lint checks.
test: component setup-python
	cargo test --workspace
	$(MAKE) lint

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	cargo clippy -p torchlens-core --lib --target wasm32-wasip2 -- -D warnings
	# The browser viewer builds the same core with wasm-bindgen: keep it compiling there.
	cargo check -p torchlens-core --lib --target wasm32-unknown-unknown

## bench: criterion benchmarks, native and through the component.
bench: component
	cargo bench --workspace
