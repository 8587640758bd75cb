"""Benchmark helpers shared by bench/ scripts and `gantt bench`."""
