"""The offload backend's training product as one autograd function: for each (t, i) pair of a
batch, concat_r sum_j W[i, r, j] z_t[j], with W's rows streamed from the host chunk by chunk.

Why one function and not autograd over the chunks: indexing the factors per chunk (z[t]) gives
every chunk its own IndexBackward, and each of those returns a gradient as large as all the
factors (T x n x nz: 112 MB at 60x168), zero-filled and then scattered into with a serial
index_put_; autograd then adds the chunks' gradients together. Per dynamics step that was one
zero fill, one scatter and one add of the whole factor matrix per chunk. Here backward zeroes
one gradient and adds each chunk's rows into it (index_add_ by month): the same products and
the same sums, a quarter of the zeroing at the default chunk of 250 rows and batch of 1000.
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable


def values(piece: torch.Tensor, table: torch.Tensor | None) -> torch.Tensor:
    """A streamed piece as relation weights: W's rows (stnn), or codes looked up in the
    value table (stnn-r: 0 no edge, 1 identity, 2 + k learned edge k)."""
    return piece if table is None else table[piece.long()]


class Workspace:
    """One chunk of gathered latent states (chunk x n x nz), reused by every chunk of every
    step: in forward the months' states, in backward their gradient. On CPU a fresh tensor
    this size (72 MB at 60x168) is fresh pages every time (glibc maps blocks over 32 MB anew
    and unmaps them when freed), and faulting them in cost more than the gather itself."""

    def __init__(self):
        self.buffer: torch.Tensor | None = None

    def take(self, like: torch.Tensor, rows: int, n: int) -> torch.Tensor:
        """(rows, n, nz) for like, the factors (T * n, nz): their dtype and device; grown to
        the largest chunk seen."""
        b, shape = self.buffer, (n, like.shape[1])
        if (
            b is None
            or len(b) < rows
            or b.shape[1:] != shape
            or b.device != like.device
            or b.dtype != like.dtype
        ):
            self.buffer = b = like.new_empty((rows, *shape))
        return b[:rows]


class StreamedProduct(torch.autograd.Function):
    """apply(factors, table, t, n, stream, work) -> (B, r * nz), for factors (T * n, nz).

    stream(compute) runs the double-buffered streaming of the batch's rows (chunk k holds
    pairs k*chunk ...) and returns torch.cat of compute(k, piece k). The pieces stay saved
    for backward, as bmm kept them before; the months' latent states are gathered again in
    backward (stnn-r only) instead of being kept, chunk by chunk, into the Workspace `work`."""

    @staticmethod
    def forward(ctx, factors, table, t, n, stream, work):
        z = factors.view(-1, n, factors.shape[1])
        pieces, offsets = [], [0]

        def compute(k: int, piece: torch.Tensor) -> torch.Tensor:
            pieces.append(piece)
            months = t[offsets[k] : offsets[k] + len(piece)]
            offsets.append(offsets[k] + len(piece))
            return torch.bmm(
                values(piece, table), _gather(z, months, work.take(factors, len(months), n))
            ).flatten(1)

        out = stream(compute)
        ctx.n, ctx.offsets, ctx.work = n, offsets, work
        ctx.save_for_backward(factors, table, t, *pieces)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        factors, table, t, *pieces = ctx.saved_tensors
        n, nz = ctx.n, factors.shape[1]
        # (B, r, nz); bf16 when forward ran under autocast: backward's products are in the
        # factors' dtype
        g = grad_out.to(factors.dtype).view(len(t), -1, nz)
        grad_f = torch.zeros_like(factors) if ctx.needs_input_grad[0] else None
        grad_table = torch.zeros_like(table) if ctx.needs_input_grad[1] else None
        for k, piece in enumerate(pieces):
            part = slice(ctx.offsets[k], ctx.offsets[k + 1])
            months, gk = t[part], g[part]
            if grad_f is not None:  # d z_t[j] += sum_r W[i, r, j] g[r]: the rows, transposed
                dz = torch.bmm(
                    values(piece, table).transpose(1, 2),
                    gk,
                    out=ctx.work.take(factors, len(months), n),
                )
                grad_f.view(-1, n * nz).index_add_(0, months, dz.view(len(months), -1))
            if grad_table is not None:  # d W[i, r, j] = <g[r], z_t[j]>, summed per code
                z = _gather(factors.view(-1, n, nz), months, ctx.work.take(factors, len(months), n))
                grad_table.index_add_(
                    0, piece.flatten().long(), torch.bmm(gk, z.transpose(1, 2)).flatten()
                )
        return grad_f, grad_table, None, None, None, None


def _gather(z: torch.Tensor, months: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """z[months] written into out: aten::index's out variant (index_select, the public one
    with out=, took 2-5x as long for these shapes on a 2-core CPU)."""
    return torch.ops.aten.index.Tensor_out(z, [months], out=out)
