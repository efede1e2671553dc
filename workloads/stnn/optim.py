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

Two layouts of the second moment (`state`), because at the 0.25-degree globe it is as large
as the 11.6 GB of factors:
  fp32  v in fp32 and an int32 step counter per row (the step a row was last touched):
        torch's Adam to the last bit. 4 * nz + 4 bytes a row.
  bf16  u = v / beta2 ** (step - base) in bf16, one `base` for the whole tensor: every row
        decays by the same factor each step, so that factor is kept once, not per row, and no
        counter is needed. A touched row adds (1 - beta2) g^2 / beta2 ** (step - base); u is
        rescaled to a new base (one pass over it) before 1 / beta2 ** (step - base) passes 1e14,
        far from overflowing (every 32,000 steps at beta2 = 0.999). bf16 keeps 8 significant
        bits: a stored v is within 0.4%, a step within 0.2% of Adam's (tested). 2 * nz bytes a
        row.
"""

from __future__ import annotations

import math

import torch

from .sizing import STATES

_GROWTH = 1e14  # the most 1 / beta2 ** (step - base) may reach: u keeps a 1e24 headroom to 3.4e38


class RowSparseAdam(torch.optim.Optimizer):
    def __init__(
        self,
        params,
        lr: float = 3e-3,
        betas: tuple[float, float] = (0.0, 0.999),
        eps: float = 1e-8,
        state: str = "fp32",
        renorm: int = 0,
    ):
        if betas[0] != 0.0:
            raise ValueError("RowSparseAdam is exact only for beta1 = 0 (STNN's setting)")
        if state not in STATES:
            raise ValueError(f"state={state!r} is not one of {', '.join(STATES)}")
        if state == "bf16" and not 0 < betas[1] < 1:
            raise ValueError("state=bf16 divides by beta2 ** steps: it needs 0 < beta2 < 1")
        super().__init__(params, dict(lr=lr, beta2=betas[1], eps=eps))
        self.layout = state
        # steps between two rescalings of u: 1 / beta2 ** (step - base) stays under _GROWTH
        self.renorm = renorm or int(
            math.log(_GROWTH) / -math.log(betas[1] if state == "bf16" else 0.5)
        )
        # The state is made now, not at a parameter's first gradient: stnn's dynamics parameters
        # get theirs only in the first dynamics batch, which comes after every decoder batch,
        # and allocating there (a dense n x n for stnn-d) would fall inside a timed step.
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p].update(self._fresh(p))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:  # a group added after construction
                    state.update(self._fresh(p))
                state["step"] += 1
                if self.layout == "fp32":
                    _exact_step(p, state, group)
                else:
                    _compact_step(p, state, group, self.renorm)

    def _fresh(self, p: torch.Tensor) -> dict:
        if self.layout == "bf16":
            return {"step": 0, "base": 0, "u": torch.zeros_like(p, dtype=torch.bfloat16)}
        rows = p.shape[0] if p.dim() else 1
        return {
            "step": 0,
            "v": torch.zeros_like(p),
            "last": torch.zeros(rows, dtype=torch.int32, device=p.device),
        }


def _exact_step(p: torch.Tensor, state: dict, group: dict) -> None:
    lr, beta2, eps, step = group["lr"], group["beta2"], group["eps"], state["step"]
    scale = math.sqrt(1 - beta2**step)  # bias correction of the second moment
    v, last, grad = state["v"], state["last"], p.grad
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


def _compact_step(p: torch.Tensor, state: dict, group: dict, renorm: int) -> None:
    lr, beta2, eps, step = group["lr"], group["beta2"], group["eps"], state["step"]
    u = state["u"]
    if step - state["base"] > renorm:  # v = u * beta2 ** (step - base): move base to step - 1
        u.mul_(beta2 ** (step - 1 - state["base"]))
        state["base"] = step - 1
    decayed = beta2 ** (step - state["base"])  # what every row's v has decayed by since base
    scale = math.sqrt(1 - beta2**step)
    grad = p.grad
    if grad.is_sparse:
        rows, g = _row_sums(grad)
        ur = u.index_select(0, rows).float().addcmul_(g, g, value=(1 - beta2) / decayed)
        u.index_copy_(0, rows, ur.to(u.dtype))
        vr = ur.mul_(decayed)  # this step's v in fp32; only the stored u is rounded
        p.index_copy_(0, rows, p.index_select(0, rows) - lr * g / (vr.sqrt() / scale + eps))
    else:
        ur = u.float().addcmul_(grad, grad, value=(1 - beta2) / decayed)
        u.copy_(ur)
        p.addcdiv_(grad, ur.mul_(decayed).sqrt_().div_(scale).add_(eps), value=-lr)


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
