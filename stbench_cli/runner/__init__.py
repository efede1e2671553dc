"""The parent side: the resumable study loop, launchers, system sampler, environment."""
