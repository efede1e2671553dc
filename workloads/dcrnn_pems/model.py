"""Seq2seq DCRNN (Li et al., ICLR 2018): diffusion-convolution GRU encoder and decoder.

The diffusion step multiplies one sparse support by the whole batch at once: states are
kept as (nodes, batch, features), so there is no Python loop over nodes or batch items.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from stbench.contract import run_blocks, segments


class _SupportMM(torch.autograd.Function):
    """S @ X for a constant sparse S whose transpose is kept: torch's own backward would
    transpose and re-coalesce S on every call, which costs more than the product."""

    @staticmethod
    def forward(ctx, s, s_t, x):
        ctx.s_t = s_t
        return torch.sparse.mm(s, x)

    @staticmethod
    def backward(ctx, grad):
        return None, None, torch.sparse.mm(ctx.s_t, grad)


class DiffusionConv(nn.Module):
    """sum_k sum_s theta_{s,k} T_k(S_s) X, with DCRNN's Chebyshev-like recurrence per support.

    Works node-major: x is (nodes, batch, features), so the sparse product sees a free
    (nodes, batch x features) view, and the diffusion terms stacked last reshape straight
    into (nodes x batch, terms x features) for one dense matmul; no permute copies.
    """

    def __init__(self, supports, in_features: int, out_features: int, k: int, bias: float = 0.0):
        super().__init__()
        self.supports, self.k = supports, k
        self.n_mats = len(supports) * k + 1
        self.weight = nn.Parameter(torch.empty(in_features * self.n_mats, out_features))
        self.bias = nn.Parameter(torch.full((out_features,), bias))
        nn.init.xavier_normal_(self.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, b, f = x.shape
        x0 = x.reshape(n, b * f)
        mats = [x0]
        for s, s_t in self.supports:
            x1 = _SupportMM.apply(s, s_t, x0)
            mats.append(x1)
            prev, cur = x0, x1
            for _ in range(2, self.k + 1):
                nxt = 2 * _SupportMM.apply(s, s_t, cur) - prev
                mats.append(nxt)
                prev, cur = cur, nxt
        # (nodes, batch, terms, features): each copied run is a whole feature row, not one float
        stacked = torch.stack([m.view(n, b, f) for m in mats], dim=2).reshape(n * b, self.n_mats * f)
        return torch.addmm(self.bias, stacked, self.weight).reshape(n, b, -1)


class DCGRUCell(nn.Module):
    def __init__(self, supports, in_features: int, units: int, k: int):
        super().__init__()
        self.units = units
        self.gates = DiffusionConv(supports, in_features + units, 2 * units, k, bias=1.0)
        self.candidate = DiffusionConv(supports, in_features + units, units, k)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        r, u = torch.sigmoid(self.gates(torch.cat([x, h], dim=-1))).split(self.units, dim=-1)
        c = torch.tanh(self.candidate(torch.cat([x, r * h], dim=-1)))
        return u * h + (1 - u) * c


class DCRNN(nn.Module):
    """Encoder of `layers` DCGRU cells over the input steps, decoder of the same depth that
    starts from a GO symbol of zeros and feeds back its own predictions (or, in training, the
    truth with the scheduled-sampling probability k / (k + exp(step / k))).

    The unrolled steps are the repeated blocks of activation checkpointing (`checkpoint`):
    encoder and decoder steps each run through the contract's run_blocks."""

    def __init__(self, supports, in_features: int = 2, units: int = 64, layers: int = 2, k: int = 2,
                 horizon: int = 12, cl_decay_steps: int = 2000, checkpoint: str = "none"):
        super().__init__()
        self.horizon, self.cl_decay_steps, self.units, self.checkpoint = horizon, cl_decay_steps, units, checkpoint
        _register_supports(self, supports)
        sup = _SupportView(self)
        self.encoder = nn.ModuleList(DCGRUCell(sup, in_features if i == 0 else units, units, k) for i in range(layers))
        self.decoder = nn.ModuleList(DCGRUCell(sup, 1 if i == 0 else units, units, k) for i in range(layers))
        self.project = nn.Linear(units, 1)

    def _encode(self, xt: torch.Tensor):
        def step(*h):
            inp, out = xt, []
            for cell, hi in zip(self.encoder, h):
                inp = cell(inp, hi)
                out.append(inp)
            return tuple(out), None
        return step

    def _decode(self, truth_t: torch.Tensor | None, p_truth: float):
        def step(inp, *h):
            out_h, x = [], inp
            for cell, hi in zip(self.decoder, h):
                x = cell(x, hi)
                out_h.append(x)
            out = self.project(x)
            nxt = truth_t if truth_t is not None and torch.rand(()) < p_truth else out
            return (nxt, *out_h), out
        return step

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None, step: int = 0) -> torch.Tensor:
        """x (batch, steps, nodes, features) -> (batch, horizon, nodes, 1)."""
        b, steps, n, _ = x.shape
        x = x.permute(1, 2, 0, 3).contiguous()  # node-major once: (steps, nodes, batch, features)
        h = tuple(x.new_zeros(n, b, self.units) for _ in self.encoder)
        h, _ = run_blocks([self._encode(x[t]) for t in range(steps)], h, self.checkpoint)
        teacher = self.training and y is not None
        p_truth = self.cl_decay_steps / (self.cl_decay_steps + math.exp(step / self.cl_decay_steps)) if teacher else 0.0
        truth = y.permute(1, 2, 0, 3) if teacher else None
        blocks = [self._decode(truth[t] if teacher else None, p_truth) for t in range(self.horizon)]
        _, outputs = run_blocks(blocks, (x.new_zeros(n, b, 1), *h), self.checkpoint)
        return torch.stack(outputs).permute(2, 0, 1, 3)

    def checkpoint_segments(self, steps: int) -> int:
        return segments(steps, self.checkpoint) + segments(self.horizon, self.checkpoint)


def _register_supports(model: nn.Module, supports) -> None:
    """The graph's supports (and their transposes) as buffers, so they follow `.to(device)`.
    They are constants, identical on every rank: DDP is told not to broadcast them (it
    cannot broadcast sparse tensors, and there is nothing to synchronise)."""
    names = []
    for i, s in enumerate(supports):
        model.register_buffer(f"support{i}", s, persistent=False)
        model.register_buffer(f"support{i}_t", s.t().coalesce(), persistent=False)
        names += [f"support{i}", f"support{i}_t"]
    model._n_supports = len(supports)
    model._ddp_params_and_buffers_to_ignore = names


class _SupportView:
    """The model's support buffers as a list that follows the model across `.to(device)`."""

    def __init__(self, model: DCRNN):
        self.model = model

    def __iter__(self):
        return ((getattr(self.model, f"support{i}"), getattr(self.model, f"support{i}_t"))
                for i in range(self.model._n_supports))

    def __len__(self) -> int:
        return self.model._n_supports


class TinyDCRNN(nn.Module):
    """The index-batching study's benchmark model: one DCGRU layer over the input steps and a
    linear map from its hidden state to every horizon step. Its input steps are the repeated
    blocks of activation checkpointing."""

    def __init__(self, supports, in_features: int = 2, units: int = 2, k: int = 3, horizon: int = 12,
                 checkpoint: str = "none"):
        super().__init__()
        _register_supports(self, supports)
        self.cell = DCGRUCell(_SupportView(self), in_features, units, k)
        self.head = nn.Linear(units, horizon)
        self.units, self.checkpoint = units, checkpoint

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None, step: int = 0) -> torch.Tensor:
        b, steps, n, _ = x.shape
        x = x.permute(1, 2, 0, 3).contiguous()  # (steps, nodes, batch, features)
        blocks = [lambda h, xt=x[t]: ((self.cell(xt, h),), None) for t in range(steps)]
        (h,), _ = run_blocks(blocks, (x.new_zeros(n, b, self.units),), self.checkpoint)
        return self.head(h).permute(1, 2, 0).unsqueeze(-1)  # (batch, horizon, nodes, 1)

    def checkpoint_segments(self, steps: int) -> int:
        return segments(steps, self.checkpoint)
