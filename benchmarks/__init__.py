"""Benchmarks of mgpu against torchrun (and Isaac Lab), run with ``uv run python -m benchmarks``."""
