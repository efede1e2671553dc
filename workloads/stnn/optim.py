"""Adam with beta1 = 0 that is exact under row-sparse gradients.

STNN trains with Adam(betas=(0, 0.999)). With beta1 = 0 the first moment is the gradient
itself, so a row whose gradient is zero does not move; only its second moment decays by
beta2 per step. This optimizer applies that decay lazily when the row is next touched
(v *= beta2 ** steps_missed), so a step costs O(rows in the batch), not O(all factors),
and the parameters follow torch.optim.Adam(betas=(0, beta2)) exactly (tested). It takes
sparse COO gradients (from embedding(..., sparse=True)) and dense ones alike, so the dense,
offload and sparse relation modes all run the same optimizer.

A sparse gradient is used uncoalesced: coalesce() sorts and then reads the number of distinct
rows on the host, a device synchronisation every step on a GPU. Instead, repeated rows are
summed with fixed-size tensor ops (sort, segment ids, index_add), and each repeat of a row
writes the same new value, so duplicates are harmless and nothing waits for the device.
"""

from __future__ import annotations

import math

import torch


class RowSparseAdam(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 3e-3, betas: tuple[float, float] = (0.0, 0.999), eps: float = 1e-8):
        if betas[0] != 0.0:
            raise ValueError("RowSparseAdam is exact only for beta1 = 0 (STNN's setting)")
        super().__init__(params, dict(lr=lr, beta2=betas[1], eps=eps))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            lr, beta2, eps = group["lr"], group["beta2"], group["eps"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["v"] = torch.zeros_like(p)
                    state["last"] = torch.zeros(p.shape[0] if p.dim() else 1, dtype=torch.int64, device=p.device)
                state["step"] += 1
                step = state["step"]
                scale = math.sqrt(1 - beta2 ** step)  # bias correction of the second moment
                v, last = state["v"], state["last"]
                grad = p.grad
                if grad.is_sparse:
                    rows, g = _row_sums(grad)
                    vr = v.index_select(0, rows) * _decay(beta2, step - 1 - last.index_select(0, rows), v.dim())
                    vr.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                    v.index_copy_(0, rows, vr)
                    last.index_fill_(0, rows, step)
                    p.index_copy_(0, rows, p.index_select(0, rows) - lr * g / (vr.sqrt() / scale + eps))
                else:
                    if p.dim():
                        v.mul_(_decay(beta2, step - 1 - last, v.dim()))  # rows a sparse step skipped
                    last.fill_(step)
                    v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                    # the same three operations in place: one temporary the size of p, not three
                    p.addcdiv_(grad, v.sqrt().div_(scale).add_(eps), value=-lr)


def _row_sums(grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, gradient) of an uncoalesced row-sparse gradient, with every entry of a row
    carrying that row's total: the same rows repeated, never a shape read from the device."""
    rows, values = grad._indices()[0], grad._values()
    rows, order = torch.sort(rows)
    values = values[order]
    first = torch.ones_like(rows, dtype=torch.bool)
    first[1:] = rows[1:] != rows[:-1]
    segment = torch.cumsum(first, 0) - 1  # each entry's row number among the distinct rows
    totals = torch.zeros_like(values).index_add_(0, segment, values)
    return rows, totals[segment]


def _decay(beta2: float, missed: torch.Tensor, dim: int) -> torch.Tensor:
    """beta2 ** missed, shaped to broadcast over a row's trailing dimensions."""
    factor = torch.pow(torch.full_like(missed, 0, dtype=torch.float32) + beta2, missed.float())
    return factor.view(-1, *([1] * (dim - 1)))
