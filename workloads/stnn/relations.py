"""The three ways STNN's relation tensor W (n x r x n) can take part in training.

Every backend answers the same two questions:
  pair_context(factors, t, i, i_host) -> (B, r*nz): for each (t, i) pair, concat_r sum_j W[i, r, j] z_t[j]
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
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from stbench.contract import Accelerator

from .grid import Edges
from .streamed import StreamedProduct, Workspace, values


def clip01(w: torch.Tensor) -> torch.Tensor:
    """Learned relation weights are used clipped to [0, 1] (the original's hardtanh)."""
    return F.hardtanh(w, 0.0, 1.0)


def initial_edge_weights(edges: Edges) -> nn.Parameter:
    """stnn-r starts from the fixed relations' values, kept just inside (0, 1): hardtanh passes
    no gradient at its bounds, and a cell with one neighbour (or dir4) has weight exactly 1."""
    return nn.Parameter(torch.from_numpy(edges.value[edges.learned]).clamp(max=0.99))


class DenseRelations(nn.Module):
    def __init__(self, edges: Edges, mode: str):
        super().__init__()
        self.n, self.r, self.mode = edges.n, edges.r, mode
        w = torch.zeros(edges.n, edges.r, edges.n)
        row, rel, col = (torch.from_numpy(a) for a in (edges.row, edges.rel, edges.col))
        w[row, rel, col] = torch.from_numpy(edges.value)
        if mode == "stnn":
            self.register_buffer("w", w)
        elif mode == "stnn-r":
            learned = torch.from_numpy(edges.learned)
            self.register_buffer(
                "mask", torch.zeros(edges.n, edges.r - 1, edges.n, dtype=torch.bool)
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


class OffloadRelations(nn.Module):
    """W (stnn) or the map of which learned weight sits where (stnn-r) lives on the host.

    W itself is never page-locked: rows are gathered on the host into two pinned staging
    buffers, and only those are copied to the device (pinning W would briefly hold two
    copies, and the caching host allocator rounds a pinned block up to a power of two)."""

    def __init__(self, edges: Edges, mode: str, chunk: int = 250):
        super().__init__()
        self.n, self.r, self.mode, self.chunk = edges.n, edges.r, mode, chunk
        row, rel, col = (torch.from_numpy(a) for a in (edges.row, edges.rel, edges.col))
        if mode == "stnn":
            self.host = torch.zeros((edges.n, edges.r, edges.n))
            self.host[row, rel, col] = torch.from_numpy(edges.value)
        else:  # codes: 0 no edge, 1 identity, 2 + k learned edge k (same bytes as float32 values)
            self.host = torch.zeros((edges.n, edges.r, edges.n), dtype=torch.int32)
            codes = torch.ones(len(row), dtype=torch.int32)
            learned = torch.from_numpy(edges.learned)
            codes[learned] = torch.arange(int(learned.sum()), dtype=torch.int32) + 2
            self.host[row, rel, col] = codes
            self.edge_w = initial_edge_weights(edges)
        self.staging: list[torch.Tensor] = []
        self.accel, self.copy_stream = None, None
        self.ready = [None, None]  # event after the last copy out of each staging buffer
        self.bytes_moved, self.gather_seconds, self.copy_seconds = 0, 0.0, 0.0
        self.pending: list = []  # (start, done) events of copies not yet added to copy_seconds
        self.pool: list = []
        self.work = Workspace()  # the months' states of one chunk, and their gradient

    def _attach(self, device: torch.device) -> None:
        """On the first call: learn the training device and allocate the staging buffers,
        page-locked on CUDA (what lets a copy run asynchronously on the side stream)."""
        self.accel = Accelerator(str(device))
        shape = (self.chunk, self.host[0].numel())
        self.staging = [
            torch.empty(shape, dtype=self.host.dtype, pin_memory=self.accel.pins) for _ in range(2)
        ]
        if self.accel.is_cuda:
            self.copy_stream = self.accel.stream()

    def learned(self) -> torch.Tensor | None:
        return getattr(self, "edge_w", None)

    def _value_table(self) -> torch.Tensor | None:
        """stnn-r: the weight of each code (0 no edge, 1 identity, 2 + k learned edge k)."""
        if self.mode == "stnn":
            return None
        w = clip01(self.edge_w)
        return torch.cat([w.new_zeros(1), w.new_ones(1), w])

    def _event(self):
        return self.pool.pop() if self.pool else self.accel.event()

    def _drain(self, wait: bool = False) -> None:
        """Add finished copies' times to copy_seconds and recycle their events. query() does
        not block; only `wait` (the end of the run) waits for the last copies."""
        while self.pending and (wait or self.pending[0][1].query()):
            start, done = self.pending.pop(0)
            if wait:
                done.synchronize()
            self.copy_seconds += self.accel.elapsed_s(start, done)
            self.pool += [start, done]

    def _gather(
        self, slot: int, rows_idx: torch.Tensor | None, block: slice | None
    ) -> torch.Tensor:
        """Host side: put the rows into a staging buffer (gather_s, on every device)."""
        count = len(rows_idx) if rows_idx is not None else block.stop - block.start
        t0 = time.perf_counter()
        ready = self.ready[slot]
        if ready is not None and not ready.query():
            # The copy that last read this pinned buffer still runs (the device fell behind):
            # wait for that one copy, not for the device.
            ready.synchronize()
        stage = self.staging[slot][:count]
        if rows_idx is not None:
            torch.index_select(self.host.view(self.n, -1), 0, rows_idx, out=stage)
        else:
            stage.copy_(self.host.view(self.n, -1)[block])
        self.bytes_moved += stage.numel() * stage.element_size()
        self.gather_seconds += time.perf_counter() - t0
        return stage

    def _send(
        self, slot: int, rows_idx: torch.Tensor | None, block: slice | None
    ) -> tuple[torch.Tensor, object]:
        """Gather host rows into a staging buffer and start their copy to the device (stream_s:
        the copy alone, on the copy stream's events; on CPU the clone that stands in for it)."""
        stage = self._gather(slot, rows_idx, block)
        shape = (len(stage), self.r, self.n)
        if not self.accel.is_cuda:
            t0 = time.perf_counter()
            out = stage.clone()
            self.copy_seconds += time.perf_counter() - t0
            return out.view(shape), None
        self._drain()
        start, done = self._event(), self._event()
        with self.accel.on_stream(self.copy_stream):
            start.record()
            out = stage.to(self.accel.torch, non_blocking=True)
            done.record()
        self.pending.append((start, done))
        self.ready[slot] = done
        return out.view(shape), done

    def _stream(self, device: torch.device, pieces, compute) -> torch.Tensor:
        """Double-buffered: piece k's compute is queued on the device before the host gathers
        piece k+1, so that gather and k+1's copy both run while the device computes k."""
        if self.accel is None or self.accel.torch != device:
            self._attach(device)
        outs, pending = [], self._send(0, *pieces[0])
        for k in range(len(pieces)):
            rows, done = pending
            if done is not None:
                self.accel.wait_for(done, rows)  # the device waits for the copy; the host does not
            outs.append(compute(k, rows))
            pending = self._send((k + 1) % 2, *pieces[k + 1]) if k + 1 < len(pieces) else None
        return torch.cat(outs)

    @torch.compiler.disable  # host-side streaming and its timers: no graph to compile
    def pair_context(
        self, factors: torch.Tensor, t: torch.Tensor, i: torch.Tensor, i_host=None
    ) -> torch.Tensor:
        """i_host: the batch's cells on the host (the trainer's host copy of the batch); the
        rows of W are gathered by it, never by copying i back from the device. Backward adds
        every chunk into one factor gradient (streamed.py says why)."""
        i_host = i if i_host is None else i_host
        pieces = [(i_host[s : s + self.chunk], None) for s in range(0, len(i), self.chunk)]
        return StreamedProduct.apply(
            factors,
            self._value_table(),
            t,
            self.n,
            lambda compute: self._stream(factors.device, pieces, compute),
            self.work,
        )

    @torch.compiler.disable
    def all_context(self, z: torch.Tensor) -> torch.Tensor:
        pieces = [
            (None, slice(s, min(s + self.chunk, self.n))) for s in range(0, self.n, self.chunk)
        ]
        table = self._value_table()  # once per call, not per chunk
        return self._stream(
            z.device,
            pieces,
            lambda k, rows: (values(rows, table).reshape(-1, self.n) @ z).view(len(rows), -1),
        )

    def stats(self) -> dict:
        """stream_s: seconds of copies to the device; gather_s: host seconds gathering rows."""
        if self.accel is not None and self.accel.is_cuda:
            self._drain(wait=True)
        return {
            "stream_s": self.copy_seconds,
            "gather_s": self.gather_seconds,
            "stream_mb": self.bytes_moved / 2**20,
        }


class EdgeAggregate(torch.autograd.Function):
    """out[dst[k]] += value[k] * z[k]: the sparse product as an edge-wise scatter.

    backward: d value[k] = <d out[dst[k]], z[k]> (the gathered products, SDDMM) and
    d z[k] = value[k] * d out[dst[k]] (the transposed product), both O(edges x nz).
    """

    @staticmethod
    def forward(ctx, value, z, dst, size: int):
        ctx.save_for_backward(value, z, dst)
        # under bf16 autocast z is bf16 and value fp32: the products and the sum are in the promoted type
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

    @torch.compiler.disable  # dynamo's compiled backward of the custom scatter and sparse embedding failed a stride assert
    def pair_context(
        self, factors: torch.Tensor, t: torch.Tensor, i: torch.Tensor, i_host=None
    ) -> torch.Tensor:
        b = len(i)
        e = self.ell[i]  # (B, width) edge ids
        value = self.edge_values()[e] * self.valid[i]
        src = t.unsqueeze(1) * self.n + self.col[e]
        dst = torch.arange(b, device=i.device).unsqueeze(1) * self.r + self.rel[e]
        z = F.embedding(
            src.flatten(), factors, sparse=self.sparse_grad
        )  # row-sparse unless factor_grad=dense
        return EdgeAggregate.apply(value.flatten(), z, dst.flatten(), b * self.r).view(b, -1)

    def all_context(self, z: torch.Tensor) -> torch.Tensor:
        out = EdgeAggregate.apply(
            self.edge_values(), z[self.col], self.row * self.r + self.rel, self.n * self.r
        )
        return out.view(self.n, -1)


def make(
    backend: str, edges: Edges, mode: str, chunk: int = 250, sparse_grad: bool = True
) -> nn.Module:
    from .sizing import unsupported

    reason = unsupported(backend, mode)
    if reason:
        raise ValueError(reason)
    if backend == "dense":
        return DenseRelations(edges, mode)
    if backend == "offload":
        return OffloadRelations(edges, mode, chunk)
    return SparseRelations(edges, mode, sparse_grad)
