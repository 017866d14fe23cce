"""Benchmarks of hf-stable-attn against its peers (run as ``python -m benchmarks.<script>``)."""
