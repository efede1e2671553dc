"""The results store: typed rows, atomic append-only files, the manifest (torch-free)."""
