"""The learned relation weights every backend of relations.py and offload.py shares: where
stnn-r's start, and how every learned weight is used (clipped to [0, 1])."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .grid import Edges


def clip01(w: torch.Tensor) -> torch.Tensor:
    """Learned relation weights are used clipped to [0, 1] (the original's hardtanh)."""
    return F.hardtanh(w, 0.0, 1.0)


def initial_edge_weights(edges: Edges) -> nn.Parameter:
    """stnn-r starts from the fixed relations' values, kept just inside (0, 1): hardtanh passes
    no gradient at its bounds, and a cell with one neighbour (or dir4) has weight exactly 1."""
    return nn.Parameter(torch.from_numpy(edges.value[edges.learned]).clamp(max=0.99))
