"""stbench: honest GPU-vs-CPU and multi-device scaling benchmarks for spatio-temporal training."""

__version__ = "0.1.0"
