"""The offload backend of relations.py: W in host memory, its rows streamed to the device.

The rows a batch needs are gathered on the host into two pinned staging buffers and copied to
the device chunk by chunk on a side stream, overlapped with compute (double-buffered); the
product over the chunks is one autograd function (streamed.py). The same code runs on CPU,
where the "device" copy is a clone. stats() reports the copies' and the gathers' seconds.
"""

from __future__ import annotations

import time

import torch
from torch import nn

from stbench.contract import Accelerator

from .edge_weights import clip01, initial_edge_weights
from .grid import Edges
from .streamed import StreamedProduct, Workspace, values


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
        self.copy_stream = self.accel.stream()  # None on CPU: the "copy" is a clone

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
        if self.copy_stream is None:
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
        if self.copy_stream is not None:
            self._drain(wait=True)
        return {
            "stream_s": self.copy_seconds,
            "gather_s": self.gather_seconds,
            "stream_mb": self.bytes_moved / 2**20,
        }
