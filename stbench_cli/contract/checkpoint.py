"""Activation checkpointing of a workload's repeated blocks, for any workload that has them.

A model declares its repeated blocks (a CNN's conv blocks, an RNN's unrolled steps) and runs
them through `run_blocks`. With `checkpoint=full` every block is one checkpointed segment: only
its input is kept, and its activations are recomputed in backward. With `sqrt` (N blocks) a
segment is ceil(sqrt(N)) consecutive blocks: O(N/k) kept inputs + O(k) recomputed activations,
k = sqrt(N). torch is imported inside the functions: the contract stays torch-free at import.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from .params import Param

MODES = ("none", "full", "sqrt")
CHECKPOINT = Param(
    "checkpoint",
    str,
    "none",
    "activation checkpointing of the repeated blocks: full recomputes every block in backward, "
    "sqrt keeps one checkpoint every ceil(sqrt(N)) blocks",
    MODES,
)

# A block: (*state) -> (new state tuple, an output to collect or None)
Block = Callable[..., tuple]


def segment_size(n_blocks: int, mode: str) -> int:
    if mode == "full":
        return 1
    if mode == "sqrt":
        return max(1, math.ceil(math.sqrt(n_blocks)))
    return max(n_blocks, 1)


def segments(n_blocks: int, mode: str) -> int:
    """Checkpointed segments of N blocks (0: no checkpointing): the row's checkpoint_segments."""
    return (
        0 if mode == "none" or n_blocks == 0 else math.ceil(n_blocks / segment_size(n_blocks, mode))
    )


def _segment(blocks: Sequence[Block], width: int):
    def run(*state):
        outs = []
        for block in blocks:
            state, out = block(*state)
            if out is not None:
                outs.append(out)
        return (*state, *outs)

    return run


def run_blocks(blocks: Sequence[Block], state: tuple, mode: str) -> tuple[tuple, list]:
    """Run blocks in order from `state`; returns (final state, collected outputs). In training
    (autograd on) with mode full or sqrt, each segment is one non-reentrant checkpoint; the RNG
    state is preserved, so a block that draws random numbers draws the same ones again."""
    import torch
    from torch.utils.checkpoint import checkpoint

    active = mode != "none" and torch.is_grad_enabled()
    size = segment_size(len(blocks), mode if active else "none")
    outs: list = []
    for lo in range(0, len(blocks), size):
        fn = _segment(blocks[lo : lo + size], len(state))
        result = checkpoint(fn, *state, use_reentrant=False) if active else fn(*state)
        state, outs = tuple(result[: len(state)]), outs + list(result[len(state) :])
    return state, outs
