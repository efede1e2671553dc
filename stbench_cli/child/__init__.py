"""A cell's own process: entry point, trainer, timing, DDP, profiler (torch)."""
