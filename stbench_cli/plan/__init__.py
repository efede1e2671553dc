"""Planning: specs, matrix expansion, presets and skip decisions (pure: no torch)."""
