"""The tinygrad backend (planned: declared so routing, install hints and the capability matrix
cover it; its adapter is not built yet)."""
