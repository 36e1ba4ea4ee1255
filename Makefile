# The two entry points of the repo (see README.md). Each sets up what it needs first.
PYTHON := .venv/bin/python
# The core component `make component` builds. The targets of `make test` embed this file
# (TORCHLENS_COMPONENT, read by host-runtime/build.rs) instead of building the core again under
# target/component-build; every cargo command of one `make test` sees the same value, so none
# reruns build.rs for another.
COMPONENT := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)/wasm32-wasip2/release/torchlens_core.wasm

.PHONY: wheel wheel-check test-pins sdist-check setup setup-python setup-web component python-package python-package-dev rust-test-build test-setup web demo demo-core test test-rust test-python test-python-native test-python-second-host test-web lint fuzz fuzz-smoke bench bench-all bench-everything reference-venv benchmark-python benchmark-memory benchmark-core-memory benchmark-tinygrad benchmark-paddle benchmark-mlx benchmark-tf benchmark-cli sweep benchmark-record benchmark-module-calls benchmark-in-place benchmark-soak benchmark-streaming benchmark-extraction benchmark-hosts benchmark-save

setup:
	./scripts/setup-rust.sh

## setup-python: .venv with scripts/python-requirements.txt, set up again only when the
## requirements or the script change (a stamp file in .venv), so the several make runs of one
## `make test` set it up once.
setup-python: .venv/.requirements-installed

.venv/.requirements-installed: scripts/python-requirements.txt scripts/setup-python.sh scripts/setup-clang.sh
	./scripts/setup-python.sh
	touch $@

component: setup
	./scripts/build-component.sh

setup-web: setup
	./scripts/setup-web.sh

## web: builds the browser viewer (host-web/www/, with the core in host-web/www/pkg/).
web: setup-web
	./scripts/build-web.sh

## Builds and installs the torchlens wheel into .venv the way a user does: `pip install .`
## (maturin builds the pyo3 extension, which embeds the core component `make component` built:
## host-runtime/build.rs reads TORCHLENS_COMPONENT). With the committed Cargo.lock (--locked).
python-package: export TORCHLENS_COMPONENT := $(COMPONENT)
python-package: component setup-python
	MATURIN_PEP517_ARGS=--locked $(PYTHON) -m pip install --quiet .

## python-package-dev: the same install with the extension in cargo's dev profile (what
## `maturin develop` builds), for `make test`. Built after the Rust test build, it reuses that
## build's wasmtime and host runtime (dependencies are opt-level 2 in dev; host-python/Cargo.toml
## aligns the one feature set that differed) and compiles only pyo3 and the extension's own
## crates: about 20 s instead of the release build's 4-7 minutes. The component it embeds is the
## release one `make component` built. Wheels, the demo and every benchmark use python-package.
python-package-dev: export TORCHLENS_COMPONENT := $(COMPONENT)
python-package-dev: rust-test-build setup-python
	MATURIN_PEP517_ARGS="--locked --profile dev" $(PYTHON) -m pip install --quiet .

## wheel: both wheels into dist/ from one component build (scripts/build-wheels.sh): the abi3
## platform wheel with the pyo3 extension (auditwheel show must call it manylinux), and the
## py3-none-any wheel carrying the component (.wasm) and depending on the wasmtime package.
wheel: setup setup-python
	./scripts/build-wheels.sh

## wheel-check: each wheel in dist/ installed into a fresh venv from dist/ alone traces a torch
## model and a JAX function (the backends/ plugins travel inside the wheel).
wheel-check: wheel
	./scripts/wheel-check.sh

## demo: trace a small built-in torch model, print its summary, save and reload a .tlspec,
## write SVG drawings (out/demo/).
demo: python-package
	$(PYTHON) host-python/examples/demo.py out/demo

## demo-core: the same flow on the Rust side only (raw events through the component).
demo-core: component
	cargo run --quiet -p torchlens-host-runtime --example demo -- out/demo-core

## test: build everything and run every test (Rust unit and integration tests, the component
## under wasmtime, the fuzz corpus replayed, the Python package on real models under both hosts,
## the viewer in chromium, the CLI on hostile files), then the format and lint checks. The
## timed fuzz run is `make fuzz`, not part of `test`.
## The first step runs the Python setup (mostly unpacking wheels, about one core) beside the
## component and the Rust test build; everything after it runs one step after another.
test:
	$(MAKE) -j2 --output-sync=target test-setup
	$(MAKE) test-rust test-python test-web lint

## test-setup: what every later step of `make test` builds on: .venv and the compiled Rust tests.
test-setup: setup-python rust-test-build

## rust-test-build: every Rust test of the workspace compiled (dev profile), with the committed
## Cargo.lock; the component is the one `make component` built. python-package-dev reuses its
## wasmtime (scripts/checks/shared_wasmtime_build.py keeps the feature sets equal).
rust-test-build: export TORCHLENS_COMPONENT := $(COMPONENT)
rust-test-build: component
	cargo test --locked --workspace --exclude torchlens-python --no-run

## test-rust: runs them. core-wasm/tests/fuzz_corpus.rs replays every committed fuzz seed
## (fuzz/seeds/) here; some tests run .venv's Python (hence setup-python).
test-rust: export TORCHLENS_COMPONENT := $(COMPONENT)
test-rust: rust-test-build setup-python
	cargo test --locked --workspace --exclude torchlens-python

## The Python suite runs whole under the native host (the pyo3 extension) on two pytest-xdist
## workers, a test file to each (--dist loadfile: a file's module fixtures are built once;
## conftest.py imports Paddle first in every worker, as Paddle crashes when imported after
## TensorFlow). Then SECOND_HOST_TESTS run again under the wasmtime-py host (the same component
## under the wasmtime package, the py3-none-any wheel's host). Everything reaches the core
## through torchlens._core.core(), whose two hosts test_wasmtime_host.py holds equal byte for
## byte (the same events give the same trace body, queries, .tlspec bytes and typed errors); what
## else differs between the hosts is code that calls the native extension directly, and the
## wasmtime-py host's own Python. The second run is every test marked
## - torch: the torch backend, the one backend that calls the extension directly. On the native
##   host a capture records its ops with _native.HeldOpRecorder and PendingReplays, reports
##   module calls with _native.ModuleCallHooks and ModuleBracket, and reads its value tags in
##   Rust; on the wasmtime-py host the Python definitions run instead (Capture.record,
##   replay_records.py, module_brackets.py, Capture._name). Counted per test, every test whose
##   capture takes those native objects is a torch test or one below;
## - both_hosts (pyproject.toml): test_wasmtime_host.py (host equality), test_package.py (the
##   host's choice and versions), test_backend_feature_table.py (the conformance table: every
##   backend through every task on the host's sessions), test_threads.py (each host's per-thread
##   cores), and the one TensorFlow test that traces torch beside every framework.
## The rest (the other backends' own tests) takes the same path under either host.
SECOND_HOST_TESTS := torch or both_hosts
test-python: test-python-native test-python-second-host

test-python-native: python-package-dev
	# The NumPy test adapter, installed as a third party's plugin is (its own distribution and
	# entry point): the shared contract suite runs over it too.
	$(PYTHON) -m pip install --quiet ./host-python/tests/numpy_adapter_plugin
	# TORCHLENS_REQUIRE_FRAMEWORKS=1: test_frameworks_installed.py fails, naming it, when a framework
	# scripts/python-requirements.txt installs does not import (its tests would only skip);
	# -rs lists every skip that remains at the end of the run; --durations=25 the slowest tests
	# (what a faster make test would start from).
	TORCHLENS_REQUIRE_FRAMEWORKS=1 $(PYTHON) -m pytest host-python/tests -q -rs -n 2 --dist loadfile \
		--durations=25

test-python-second-host: test-python-native
	TORCHLENS_HOST=wasmtime-py $(PYTHON) -m pytest host-python/tests -q -rs -n 2 --dist loadfile \
		--durations=25 -m "$(SECOND_HOST_TESTS)"

## test-pins: the pinned leg (not part of `test`): the tinygrad tests on the spec's pin,
## tinygrad 0.13.0, the Paddle tests on paddlepaddle 3.3.1, MLX on 0.26.5 and TensorFlow on
## tensorflow-cpu 2.21.0 (Keras 3.15); then the declared minimums: tensorflow-cpu 2.16.1, jax
## 0.7.1 (equinox 0.13.0, flax 0.12.0) and torch 2.10.0 (torchvision 0.25.0). Each runs in its
## own virtual environment (.venv-pins/<framework>[-min]) with the package built into it, then
## checks its scorecard record. `make test` runs the newest releases from
## scripts/python-requirements.txt.
test-pins: setup setup-python
	./scripts/test-pins.sh

## fuzz: cargo fuzz on each untrusted-input parser, FUZZ_SECONDS each (not part of `test`,
## which replays the committed seeds as a plain test, core-wasm/tests/fuzz_corpus.rs). Longer:
## `make fuzz FUZZ_SECONDS=1800`, or scripts/fuzz.sh 1800 decode_tlspec. fuzz-smoke: 20 s each.
FUZZ_SECONDS ?= 60
fuzz: setup
	./scripts/fuzz.sh $(FUZZ_SECONDS)

fuzz-smoke: setup
	./scripts/fuzz.sh 20

## test-web: the viewer in Debian's chromium, driven by playwright-core: opens traces written
## by the core and by the Python package, and hostile files; screenshots and the 100k-op
## first-render time land in out/viewer-screenshots/.
test-web: web python-package-dev
	cd host-web && npm test

lint: export TORCHLENS_COMPONENT := $(COMPONENT)
lint: component setup-python
	cargo fmt --all -- --check
	cargo clippy --locked --workspace --all-targets -- -D warnings
	# The wasm targets' clippy in the release profile, with the same selection as their builds
	# (build-component.sh, build-web.sh): the proc macros it runs (wit-bindgen's, wasm-bindgen's)
	# are then the ones those builds compiled, not compiled again in the dev profile.
	cargo clippy --locked --release -p torchlens-core --lib --target wasm32-wasip2 -- -D warnings
	# The Python extension reaches the core only through the component: it builds events from
	# torchlens-schema and must never link torchlens-core natively.
	! cargo tree -p torchlens-python -e normal | grep -q torchlens-core
	# The browser viewer builds the same core with wasm-bindgen: this also checks the core
	# compiles for that target.
	cargo clippy --locked --release -p torchlens-web --lib --target wasm32-unknown-unknown -- -D warnings
	$(PYTHON) -m ruff check host-python backends benchmarks host-web/browser-tests conformance scripts/checks scripts/build_pure_wheel.py tests
	$(PYTHON) -m ruff format --check host-python backends benchmarks host-web/browser-tests conformance scripts/checks scripts/build_pure_wheel.py tests
	# The package's types ([tool.pyright] in pyproject.toml; the extension's in _native.pyi).
	# --project: pyright would otherwise take a pyrightconfig.json from a folder above the clone.
	$(PYTHON) -m pyright --project pyproject.toml
	# The docs tables and backend pages against the registry and the shipped scorecards (the
	# conformance suite's --check runs in test-python, host-python/tests/test_backend_feature_table.py).
	$(PYTHON) scripts/checks/backend_docs_lockstep.py
	# docs/errors.md against the error codes the source raises.
	$(PYTHON) scripts/checks/error_codes.py
	# Links and path references in README.md and docs/ stay inside the repository and name files
	# that exist (scripts/checks/doc_links.py).
	$(PYTHON) scripts/checks/doc_links.py
	# make test's Rust test build and its dev-profile extension build give wasmtime's crates the
	# same features, so wasmtime compiles once (scripts/checks/shared_wasmtime_build.py).
	$(PYTHON) scripts/checks/shared_wasmtime_build.py

## sdist-check: python -m build --sdist, pip install the tarball into a fresh venv (compiling
## everything from it), trace a torch model. Minutes of compiling: its own target, not in `test`.
sdist-check: setup setup-python
	./scripts/sdist-check.sh

## bench: criterion benchmarks, native and through the component.
bench: component
	cargo bench -p torchlens-core -p torchlens-host-runtime

## benchmark-python: tl.trace against a plain forward (and the reference, if REFERENCE_PYTHON
## names a Python that has torchlens 2.36.1 installed).
benchmark-python: python-package
	$(PYTHON) benchmarks/torch_overhead.py $(if $(REFERENCE_PYTHON),--reference-python $(REFERENCE_PYTHON),)

## benchmark-memory: peak memory above a plain forward and time of a full trace against
## one-layer save= selections (resnet18 batch 8, a GPT-style transformer), each in a fresh process.
benchmark-memory: python-package
	$(PYTHON) benchmarks/selective_memory.py

## benchmark-core-memory: the core's linear memory per op of a long trace, in wasm32, without
## Python (core-wasm/examples/memory_probe.rs under the wasmtime package).
benchmark-core-memory: setup setup-python
	$(PYTHON) benchmarks/core_memory.py

## benchmark-tinygrad: tinygrad capture cost per op against a plain realized call.
benchmark-tinygrad: python-package
	$(PYTHON) benchmarks/tinygrad_overhead.py $(if $(REFERENCE_PYTHON),--reference-python $(REFERENCE_PYTHON),)

## benchmark-paddle: Paddle capture cost per op against a plain call (and the reference, if
## REFERENCE_PYTHON names a Python with torchlens 2.36.1 and Paddle).
benchmark-paddle: python-package
	$(PYTHON) benchmarks/paddle_overhead.py $(if $(REFERENCE_PYTHON),--reference-python $(REFERENCE_PYTHON),)

## benchmark-mlx: MLX capture cost per op against a plain evaluated call (and the reference, if
## REFERENCE_PYTHON names a Python with torchlens 2.36.1 and MLX).
benchmark-mlx: python-package
	$(PYTHON) benchmarks/mlx_overhead.py $(if $(REFERENCE_PYTHON),--reference-python $(REFERENCE_PYTHON),)

## benchmark-tf: TensorFlow capture cost per op against a plain call (and the reference, if
## REFERENCE_PYTHON names a Python with torchlens 2.36.1 and TensorFlow), then the cost of the
## pre-run scan (one graph-mode trace of the call) against a plain call and a whole trace.
benchmark-tf: python-package
	$(PYTHON) benchmarks/tf_overhead.py $(if $(REFERENCE_PYTHON),--reference-python $(REFERENCE_PYTHON),)
	$(PYTHON) benchmarks/tf_prescan.py

## benchmark-record: tl.record repeat calls on resnet18 (batch 1, one selected layer) against a
## plain forward and tl.trace with the same save= (and the reference's record and trace, if
## REFERENCE_PYTHON names a Python that has torchlens 2.36.1 installed).
benchmark-record: python-package
	$(PYTHON) benchmarks/torch_record.py $(if $(REFERENCE_PYTHON),--reference-python $(REFERENCE_PYTHON),)

## benchmark-module-calls: a torch trace with module calls reported by brackets on the model's
## modules (native, and the Python bracket) against global forward hooks, each against a plain
## forward, in turns (not in `test`).
benchmark-module-calls: python-package
	$(PYTHON) benchmarks/torch_module_calls.py

## benchmark-in-place: a torch trace whose in-place ops run out of place (storage swapped)
## against copying the old value first, each against a plain forward, in turns (not in `test`).
benchmark-in-place: python-package
	$(PYTHON) benchmarks/torch_in_place.py

## benchmark-soak: 10,000 traces and 1,000 save/load cycles in one process; RSS, file
## descriptors and mappings (from /proc/self) must stay flat after warm-up (minutes; not in `test`).
benchmark-soak: python-package
	$(PYTHON) benchmarks/soak.py

## benchmark-streaming: peak memory and time of a streamed resnet18 trace (streaming=) against a
## full in-memory trace, the same followed by trace.save, and a plain forward; batch 8, 32 and 64.
benchmark-streaming: python-package
	$(PYTHON) benchmarks/streaming_memory.py --batches 8 32 64

## benchmark-extraction: tl.extract_dataset (local engine) against a hand-written forward-hook
## loop, interleaved batch by batch: resnet18, 2,048 random 224x224 images, batch 64, one layer;
## rows/s of each and the ratio of their times (target: at most 1.2x). Minutes.
benchmark-extraction: python-package
	$(PYTHON) benchmarks/extraction.py

## benchmark-save: trace.save of resnet18 batch 8 (every op saved, ~268 MB) to a new path and
## over the same path, with its phases, peak memory above the trace's, tl.load and reading every
## value back (and the reference's save, if REFERENCE_PYTHON names a Python with torchlens
## 2.36.1). `--json` prints one JSON object.
benchmark-save: python-package
	$(PYTHON) benchmarks/save_load.py $(if $(REFERENCE_PYTHON),--reference-python $(REFERENCE_PYTHON),)

## benchmark-hosts: capture cost per op and save/load throughput under the native host and the
## wasmtime-py host, each in its own process, on the torch_overhead.py models.
benchmark-hosts: python-package
	$(PYTHON) benchmarks/host_comparison.py

## reference-venv: the reference implementation (torchlens 2.36.1) in .venv-reference, on the
## frameworks of .venv (scripts/setup-reference-venv.sh).
reference-venv: python-package
	./scripts/setup-reference-venv.sh

## bench-all: every backend's capture cost, saves and loads, and the 100,000-op scale run, ours
## beside the reference's with the ratios and the performance targets checked, in one run
## (tens of minutes; not part of `test`); writes docs/performance.md.
bench-all: reference-venv
	cargo build --release -p torchlens-cli
	$(PYTHON) benchmarks/bench_all.py --reference-python .venv-reference/bin/python \
		--tlspec target/release/tlspec --write docs/performance.md

## bench-everything: bench-all and every benchmark above, one after the other.
bench-everything: bench-all bench benchmark-save benchmark-python benchmark-memory benchmark-core-memory benchmark-tinygrad benchmark-paddle benchmark-mlx benchmark-tf benchmark-cli benchmark-record benchmark-module-calls benchmark-in-place benchmark-soak benchmark-streaming benchmark-extraction benchmark-hosts

## benchmark-cli: tlspec inspect on a 1 GB .tlspec written by the Python package, and check's
## throughput.
benchmark-cli: python-package
	cargo build --release -p torchlens-cli
	$(PYTHON) benchmarks/tlspec_cli.py --tlspec target/release/tlspec

## sweep: replay validation over every torchvision classification model (not part of `test`;
## five representative models run in test-python): outputs equal the model's, no false failure.
sweep: python-package
	$(PYTHON) benchmarks/validation_sweep.py
