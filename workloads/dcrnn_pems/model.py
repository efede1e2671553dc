"""Seq2seq DCRNN (Li et al., ICLR 2018): diffusion-convolution GRU encoder and decoder.

The diffusion multiplies the stacked supports by the whole batch at once: states are kept as
(nodes, features, batch), so there is no Python loop over nodes or batch items.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from stbench.contract import run_blocks, segments

from .diffusion import Supports, diffuse


class DiffusionConv(nn.Module):
    """The weights of sum_k sum_s theta_{s,k} T_k(S_s) X: rows ordered (term, feature), terms
    as `diffusion.diffuse` stacks them. The products themselves are the cell's."""

    def __init__(
        self, n_supports: int, in_features: int, out_features: int, k: int, bias: float = 0.0
    ):
        super().__init__()
        self.n_mats = n_supports * k + 1
        self.weight = nn.Parameter(torch.empty(in_features * self.n_mats, out_features))
        self.bias = nn.Parameter(torch.full((out_features,), bias))
        nn.init.xavier_normal_(self.weight)

    def forward(self, split: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(the rows of features 0..split-1 of every term, those of the rest, both transposed
        to (out, terms x features), the bias). A module call, not an attribute read: FSDP
        gathers a sharded module's parameters around its forward."""
        w = self.weight.view(self.n_mats, -1, self.weight.shape[1])
        rows = [w[:, :split], w[:, split:]]
        return *(r.permute(2, 0, 1).reshape(r.shape[2], -1) for r in rows), self.bias


@dataclass(frozen=True)
class CellWeights:
    """A cell's weights split and transposed once per forward: the input's rows of gates and
    candidate stacked (with both biases), and the state's rows of each."""

    x: torch.Tensor  # (3 units, terms x in_features)
    bias: torch.Tensor  # (1, 3 units, 1)
    gates_h: torch.Tensor  # (2 units, terms x units)
    candidate_h: torch.Tensor  # (units, terms x units)


def mix(acc: torch.Tensor, w: torch.Tensor, terms: torch.Tensor) -> torch.Tensor:
    """acc + w @ terms[node] for every node: w (out, in), terms (nodes, in, batch). One batched
    product whose operands are all (in, batch) blocks; on the (nodes x batch, in) layout the same
    product has 2-14 columns, where BLAS runs several times slower."""
    return torch.baddbmm(acc, w.expand(terms.shape[0], -1, -1), terms)


class NodeLinear(nn.Linear):
    """nn.Linear on the features of node-major states h (nodes, features, batch)."""

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return mix(self.bias.view(1, -1, 1), self.weight, h)


class DCGRUCell(nn.Module):
    """DCGRU on node-major states (nodes, units, batch). Diffusion and weights are linear, so
    the input's share of the gates and of the candidate (`input_part`) is computed apart from
    the state's: for inputs known in advance (the encoder's) it is one product for every step,
    and a step diffuses only the state, never a concatenation of input and state."""

    def __init__(self, n_supports: int, in_features: int, units: int, k: int):
        super().__init__()
        self.in_features, self.units, self.k = in_features, units, k
        self.gates = DiffusionConv(n_supports, in_features + units, 2 * units, k, bias=1.0)
        self.candidate = DiffusionConv(n_supports, in_features + units, units, k)

    def forward(self) -> tuple[torch.Tensor, ...]:
        """The cell's weights as CellWeights' fields. The cell's forward, so that FSDP (whose
        unit is the cell) gathers the parameters around it; a tuple, whose tensors it hooks
        for backward."""
        f = self.in_features
        gates_x, gates_h, gates_b = self.gates(f)
        candidate_x, candidate_h, candidate_b = self.candidate(f)
        return (
            torch.cat([gates_x, candidate_x]),
            torch.cat([gates_b, candidate_b]).view(1, -1, 1),
            gates_h,
            candidate_h,
        )

    def weights(self) -> CellWeights:
        return CellWeights(*self())

    def input_part(self, x: torch.Tensor, graph: Supports, w: CellWeights) -> torch.Tensor:
        """x (nodes, in_features, m) -> (nodes, 3 units, m): gates then candidate; m is the
        batch, or steps x batch."""
        return mix(w.bias, w.x, diffuse(x, graph, self.k))

    def step(
        self, xp: torch.Tensor, h: torch.Tensor, graph: Supports, w: CellWeights
    ) -> torch.Tensor:
        """The next state from the input's part xp (nodes, 3 units, batch) and h (nodes, units,
        batch)."""
        u = self.units
        g = torch.sigmoid(mix(xp[:, : 2 * u], w.gates_h, diffuse(h, graph, self.k)))
        r, z = g[:, :u], g[:, u:]
        c = torch.tanh(mix(xp[:, 2 * u :], w.candidate_h, diffuse(r * h, graph, self.k)))
        # bf16 autocast: c is bf16, the first state fp32; lerp does not promote
        if c.dtype != h.dtype:
            return c + z * (h - c)
        return torch.lerp(c, h, z)  # z h + (1 - z) c in one op

    def run(self, x: torch.Tensor, h: torch.Tensor, graph: Supports) -> torch.Tensor:
        """One step from the input x (nodes, in_features, batch) and the state h."""
        w = self.weights()
        return self.step(self.input_part(x, graph, w), h, graph, w)


class DCRNN(nn.Module):
    """Encoder of `layers` DCGRU cells over the input steps, decoder of the same depth that
    starts from a GO symbol of zeros and feeds back its own predictions (or, in training, the
    truth with the scheduled-sampling probability k / (k + exp(step / k))).

    The unrolled steps are the repeated blocks of activation checkpointing (`checkpoint`):
    encoder and decoder steps each run through the contract's run_blocks. The first encoder
    layer's input part is computed for every step before them (its inputs are known)."""

    def __init__(
        self,
        supports,
        in_features: int = 2,
        units: int = 64,
        layers: int = 2,
        k: int = 2,
        horizon: int = 12,
        cl_decay_steps: int = 2000,
        checkpoint: str = "none",
        layout: str = "auto",
    ):
        super().__init__()
        self.horizon, self.cl_decay_steps, self.units, self.checkpoint = (
            horizon,
            cl_decay_steps,
            units,
            checkpoint,
        )
        _attach_graph(self, supports, layout)
        s = len(supports)
        self.encoder = nn.ModuleList(
            DCGRUCell(s, in_features if i == 0 else units, units, k) for i in range(layers)
        )
        self.decoder = nn.ModuleList(
            DCGRUCell(s, 1 if i == 0 else units, units, k) for i in range(layers)
        )
        self.project = NodeLinear(units, 1)

    def _encode(self, xp_t: torch.Tensor, ws: list[CellWeights]):
        def step(*h):
            out = []
            for i, (cell, hi, w) in enumerate(zip(self.encoder, h, ws)):
                xp = xp_t if i == 0 else cell.input_part(out[-1], self.graph, w)
                out.append(cell.step(xp, hi, self.graph, w))
            return tuple(out), None

        return step

    def _decode(self, truth_t: torch.Tensor | None, p_truth: float, ws: list[CellWeights]):
        def step(inp, *h):
            out_h, x = [], inp
            for cell, hi, w in zip(self.decoder, h, ws):
                x = cell.step(cell.input_part(x, self.graph, w), hi, self.graph, w)
                out_h.append(x)
            out = self.project(x)
            nxt = truth_t if truth_t is not None and torch.rand(()) < p_truth else out
            return (nxt, *out_h), out

        return step

    def forward(
        self, x: torch.Tensor, y: torch.Tensor | None = None, step: int = 0
    ) -> torch.Tensor:
        """x (batch, steps, nodes, features) -> (batch, horizon, nodes, 1)."""
        b, _, n, _ = x.shape
        enc, dec = [c.weights() for c in self.encoder], [c.weights() for c in self.decoder]
        xp = _input_parts(self.encoder[0], x, self.graph, enc[0])
        h = tuple(x.new_zeros(n, self.units, b) for _ in self.encoder)
        h, _ = run_blocks([self._encode(xt, enc) for xt in xp], h, self.checkpoint)
        teacher = self.training and y is not None
        p_truth = (
            self.cl_decay_steps / (self.cl_decay_steps + math.exp(step / self.cl_decay_steps))
            if teacher
            else 0.0
        )
        truth = y.permute(1, 2, 3, 0) if teacher else None  # (horizon, nodes, 1, batch)
        blocks = [
            self._decode(truth[t] if teacher else None, p_truth, dec) for t in range(self.horizon)
        ]
        _, outputs = run_blocks(blocks, (x.new_zeros(n, 1, b), *h), self.checkpoint)
        return torch.stack(outputs).permute(3, 0, 1, 2)

    def checkpoint_segments(self, steps: int) -> int:
        return segments(steps, self.checkpoint) + segments(self.horizon, self.checkpoint)


def _input_parts(
    cell: DCGRUCell, x: torch.Tensor, graph: Supports, w: CellWeights
) -> tuple[torch.Tensor, ...]:
    """The input's part of every step: x (batch, steps, nodes, f) -> a tuple of (nodes, 3 units,
    batch), one diffusion and one product for all steps. A tuple by `unbind`: its backward stacks
    the steps' gradients once, where indexing step by step would fill a zero tensor of every
    step's size for each of them."""
    b, steps, n, f = x.shape
    xp = cell.input_part(x.permute(2, 3, 1, 0).reshape(n, f, steps * b), graph, w)
    return xp.view(n, -1, steps, b).unbind(2)


def _attach_graph(model: nn.Module, supports, layout: str) -> None:
    """The supports as the `graph` submodule (its buffers follow `.to(device)`). They are
    constants, identical on every rank: DDP is told not to broadcast them (it cannot broadcast
    sparse tensors, and there is nothing to synchronise)."""
    model.graph = Supports(supports, layout)
    model._ddp_params_and_buffers_to_ignore = [
        f"graph.{name}" for name in model.graph.buffer_names()
    ]


class TinyDCRNN(nn.Module):
    """The index-batching study's benchmark model: one DCGRU layer over the input steps and a
    linear map from its hidden state to every horizon step. Its input steps are the repeated
    blocks of activation checkpointing."""

    def __init__(
        self,
        supports,
        in_features: int = 2,
        units: int = 2,
        k: int = 3,
        horizon: int = 12,
        checkpoint: str = "none",
        layout: str = "auto",
    ):
        super().__init__()
        _attach_graph(self, supports, layout)
        self.cell = DCGRUCell(len(supports), in_features, units, k)
        self.head = NodeLinear(units, horizon)
        self.units, self.checkpoint = units, checkpoint

    def forward(
        self, x: torch.Tensor, y: torch.Tensor | None = None, step: int = 0
    ) -> torch.Tensor:
        b, _, n, _ = x.shape
        w = self.cell.weights()
        xp = _input_parts(self.cell, x, self.graph, w)
        blocks = [lambda h, xt=xt: ((self.cell.step(xt, h, self.graph, w),), None) for xt in xp]
        (h,), _ = run_blocks(blocks, (x.new_zeros(n, self.units, b),), self.checkpoint)
        return self.head(h).permute(2, 1, 0).unsqueeze(-1)  # (batch, horizon, nodes, 1)

    def checkpoint_segments(self, steps: int) -> int:
        return segments(steps, self.checkpoint)
