"""The three ways STNN's relation tensor W (n x r x n) can take part in training.

Every backend answers the same two questions:
  pair_context(factors, t, i, i_host) -> (B, r*nz): for each (t, i) pair,
                                          concat_r sum_j W[i, r, j] z_t[j]
                                          (i_host: the batch's cells on the host, for offload)
  all_context(z) -> (n, r*nz): the same for every cell of one latent state (the forecast)

    dense    W on the training device, as the original code (stnn-r and stnn-d rebuild the
             full tensor from their learned weights every step, as the original does)
    offload  W stays in (pinned) host memory; the rows a batch needs are gathered on the host
             and streamed to the device in chunks, overlapped with compute on a CUDA side
             stream. The same code runs on CPU, where the "device" copy is a memcpy.
    sparse   an edge list, padded per row (ELL: a grid cell has at most r-1+1 neighbours per
             relation), with a custom autograd function: neither forward nor backward ever
             allocates n x n

`make` builds one. Dense and sparse live here, offload (host memory streamed to the device) in
offload.py; the learned weights they share start and are clipped alike (edge_weights.py).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .edge_weights import clip01, initial_edge_weights
from .grid import Edges
from .offload import OffloadRelations


class DenseRelations(nn.Module):
    def __init__(self, edges: Edges, mode: str, device: str | torch.device = "cpu"):
        """W (n x r x n) made where it trains: built in host memory and copied, the largest
        grid an H100 holds (200x400, ~46 GiB) would first fill as much host memory, page by
        page, and then cross PCIe from pageable memory, tens of seconds before its first step."""
        super().__init__()
        self.n, self.r, self.mode = edges.n, edges.r, mode
        w = torch.zeros(edges.n, edges.r, edges.n, device=device)
        row, rel, col = (torch.from_numpy(a).to(device) for a in (edges.row, edges.rel, edges.col))
        w[row, rel, col] = torch.from_numpy(edges.value).to(device)
        if mode == "stnn":
            self.register_buffer("w", w)
        elif mode == "stnn-r":
            learned = torch.from_numpy(edges.learned).to(device)
            self.register_buffer(
                "mask", torch.zeros(edges.n, edges.r - 1, edges.n, dtype=torch.bool, device=device)
            )
            self.mask[row[learned], rel[learned] - 1, col[learned]] = True
            self.edge_w = initial_edge_weights(edges)
        else:  # stnn-d: every (i, j) of every relation but the identity is a weight; non-edges
            # start just above 0 (hardtanh passes no gradient at 0), adding 1% to a row's sum
            self.dense_w = nn.Parameter(w[:, 1:].clamp(0.01 / edges.n, 0.99))
        del w

    def learned(self) -> torch.Tensor | None:
        if self.mode == "stnn":
            return None
        return self.edge_w if self.mode == "stnn-r" else self.dense_w

    def weights(self) -> torch.Tensor:
        if self.mode == "stnn":
            return self.w
        eye = torch.eye(self.n, device=self.learned().device).unsqueeze(1)
        if self.mode == "stnn-r":
            inter = torch.zeros(self.mask.shape, device=self.edge_w.device).masked_scatter(
                self.mask, clip01(self.edge_w)
            )
        else:
            inter = clip01(self.dense_w)
        return torch.cat([eye, inter], dim=1)

    def pair_context(
        self, factors: torch.Tensor, t: torch.Tensor, i: torch.Tensor, i_host=None
    ) -> torch.Tensor:
        z = factors.view(-1, self.n, factors.shape[1])[t]  # (B, n, nz), as the original gathers
        return torch.bmm(self.weights()[i], z).flatten(1)

    def all_context(self, z: torch.Tensor) -> torch.Tensor:
        return (self.weights().view(self.n * self.r, self.n) @ z).view(self.n, -1)


class EdgeAggregate(torch.autograd.Function):
    """out[dst[k]] += value[k] * z[k]: the sparse product as an edge-wise scatter.

    backward: d value[k] = <d out[dst[k]], z[k]> (the gathered products, SDDMM) and
    d z[k] = value[k] * d out[dst[k]] (the transposed product), both O(edges x nz).
    """

    @staticmethod
    def forward(ctx, value, z, dst, size: int):
        ctx.save_for_backward(value, z, dst)
        # under bf16 autocast z is bf16 and value fp32: the products and the sum are in the
        # promoted type
        products = z * value.unsqueeze(1)
        return products.new_zeros(size, z.shape[1]).index_add_(0, dst, products)

    @staticmethod
    def backward(ctx, grad_out):
        value, z, dst = ctx.saved_tensors
        g = grad_out.index_select(0, dst)
        grad_value = (g * z).sum(1).to(value.dtype) if ctx.needs_input_grad[0] else None
        grad_z = (g * value.unsqueeze(1)).to(z.dtype) if ctx.needs_input_grad[1] else None
        return grad_value, grad_z, None, None


class SparseRelations(nn.Module):
    def __init__(self, edges: Edges, mode: str, sparse_grad: bool = True):
        super().__init__()
        self.n, self.r, self.mode, self.sparse_grad = edges.n, edges.r, mode, sparse_grad
        rowptr = edges.rowptr()
        deg = np.diff(rowptr)
        self.width = int(deg.max())
        # ELL layout: row i's edges in slots 0..deg-1, padding points at edge 0 with weight 0
        slot = np.arange(self.width)[None, :]
        ell = np.where(slot < deg[:, None], rowptr[:-1, None] + slot, 0)
        self.register_buffer("ell", torch.from_numpy(ell))
        self.register_buffer("valid", torch.from_numpy(slot < deg[:, None]))
        self.register_buffer("rel", torch.from_numpy(edges.rel))
        self.register_buffer("col", torch.from_numpy(edges.col))
        self.register_buffer("row", torch.from_numpy(edges.row))
        self.register_buffer("value", torch.from_numpy(edges.value))
        lid = np.full(len(edges.row), -1, np.int64)
        lid[edges.learned] = np.arange(int(edges.learned.sum()))
        self.register_buffer("lid", torch.from_numpy(lid + 1))  # 0: fixed (identity) weight 1
        if mode == "stnn-r":
            self.edge_w = initial_edge_weights(edges)

    def learned(self) -> torch.Tensor | None:
        return getattr(self, "edge_w", None)

    def edge_values(self) -> torch.Tensor:
        if self.mode == "stnn":
            return self.value
        return torch.cat([self.value.new_ones(1), clip01(self.edge_w)])[self.lid]

    # dynamo's compiled backward of the custom scatter and sparse embedding failed a stride assert
    @torch.compiler.disable
    def pair_context(
        self, factors: torch.Tensor, t: torch.Tensor, i: torch.Tensor, i_host=None
    ) -> torch.Tensor:
        b = len(i)
        e = self.ell[i]  # (B, width) edge ids
        value = self.edge_values()[e] * self.valid[i]
        src = t.unsqueeze(1) * self.n + self.col[e]
        dst = torch.arange(b, device=i.device).unsqueeze(1) * self.r + self.rel[e]
        # row-sparse unless factor_grad=dense
        z = F.embedding(src.flatten(), factors, sparse=self.sparse_grad)
        return EdgeAggregate.apply(value.flatten(), z, dst.flatten(), b * self.r).view(b, -1)

    def all_context(self, z: torch.Tensor) -> torch.Tensor:
        out = EdgeAggregate.apply(
            self.edge_values(), z[self.col], self.row * self.r + self.rel, self.n * self.r
        )
        return out.view(self.n, -1)


def make(
    backend: str,
    edges: Edges,
    mode: str,
    chunk: int = 250,
    sparse_grad: bool = True,
    device: str | torch.device = "cpu",
) -> nn.Module:
    """One backend; `device`: where the cell trains (dense builds W there)."""
    from .sizing import unsupported

    reason = unsupported(backend, mode)
    if reason:
        raise ValueError(reason)
    if backend == "dense":
        return DenseRelations(edges, mode, device)
    if backend == "offload":
        return OffloadRelations(edges, mode, chunk)
    return SparseRelations(edges, mode, sparse_grad)
