"""DCRNN's diffusion terms for every support and hop at once, with a hand-written backward.

For supports S_1..S_s and K hops DCRNN needs X, then T_k(S_i) X for every i and k, where
T_1 = S, T_k = 2 S T_{k-1} - T_{k-2}. The supports are stacked so that one product advances
all of them a hop: F = [S_1; ...; S_s] (s*n, n) gives every first hop, and the block diagonal
B = diag(S_1, ..., S_s) every later one, as 2 B Y_{k-1} - Y_{k-2} in a single addmm. The
whole recurrence is one autograd node whose backward runs it in reverse (Clenshaw's adjoint)
with the transposes kept beside the supports: a small model's step is mostly per-op
overhead, and this turns 6 sparse products, 8 element-wise ops and 7 autograd nodes per
convolution (2 supports, K = 3) into 3 products and one node.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

# Below this density (nonzeros / n^2) a sparse CSR product does less work than a dense one.
# Measured on CPU for n = 325 and 128 columns: CSR 65 us at 2.5% (PeMS-BAY's supports),
# 340 us at 10%, 520 us at 20%; dense 560-630 us at any density. Dense matrices also hold
# n^2 floats per support, which a large generated graph (11 k sensors: 0.5 GB each) cannot.
DENSE_FROM_DENSITY = 0.2


def choose_layout(supports: list[torch.Tensor], layout: str = "auto") -> str:
    """'dense' or 'sparse' for these supports: `layout` itself unless it is 'auto'."""
    if layout != "auto":
        return layout
    n = supports[0].shape[0]
    density = max(s._nnz() for s in supports) / (n * n)
    return "dense" if density >= DENSE_FROM_DENSITY else "sparse"


class Supports(nn.Module):
    """The stacked supports F, B and their transposes as buffers (they follow `.to(device)`).

    sparse: F, F^T, B, B^T as CSR matrices (torch would transpose and re-sort a sparse matrix
    in every backward otherwise). dense: B as (s, n, n), whose transposes and F are views."""

    def __init__(self, supports: list[torch.Tensor], layout: str = "auto"):
        super().__init__()
        self.layout, self.count, self.n = (
            choose_layout(supports, layout),
            len(supports),
            supports[0].shape[0],
        )
        if self.layout == "dense":
            self.register_buffer(
                "blocks", torch.stack([s.to_dense() for s in supports]), persistent=False
            )
            return
        # "CSR support is in beta": what it is used for here is tested
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Sparse CSR tensor support is in beta")
            for name, m in (
                ("first", _stacked(supports, False)),
                ("diag", _stacked(supports, True)),
            ):
                self.register_buffer(name, m.to_sparse_csr(), persistent=False)
                self.register_buffer(
                    f"{name}_t", m.t().coalesce().to_sparse_csr(), persistent=False
                )

    @property
    def dtype(self) -> torch.dtype:
        return next(self.buffers()).dtype

    def buffer_names(self) -> list[str]:
        return [name for name, _ in self.named_buffers()]

    def first_hop(
        self, x: torch.Tensor, acc: torch.Tensor | None = None, transpose: bool = False
    ) -> torch.Tensor:
        """F x (s*n, w) from x (n, w); transposed: acc + F^T x (n, w) from x (s*n, w)."""
        if self.layout == "dense":
            f = self.blocks.view(-1, self.n)
            m = f.t() if transpose else f
        else:
            m = self.first_t if transpose else self.first
        return torch.mm(m, x) if acc is None else torch.addmm(acc, m, x)

    def hop(
        self, x: torch.Tensor, acc: torch.Tensor, beta: float, transpose: bool = False
    ) -> torch.Tensor:
        """beta * acc + 2 B x (or 2 B^T x), all (s*n, w)."""
        if self.layout == "dense":
            b = self.blocks.transpose(1, 2) if transpose else self.blocks
            shape = (self.count, self.n, -1)
            return torch.baddbmm(acc.view(shape), b, x.view(shape), beta=beta, alpha=2).view(
                x.shape
            )
        return torch.addmm(acc, self.diag_t if transpose else self.diag, x, beta=beta, alpha=2)


def _stacked(supports: list[torch.Tensor], diagonal: bool) -> torch.Tensor:
    """[S_1; ...; S_s] or diag(S_1, ..., S_s) as a sparse COO matrix, built from the indices
    (a dense block diagonal of an 11 k-sensor graph would take 2 GB)."""
    n, rows, cols, values = supports[0].shape[0], [], [], []
    for i, s in enumerate(supports):
        s = s.coalesce()
        rows.append(s.indices()[0] + i * n)
        cols.append(s.indices()[1] + (i * n if diagonal else 0))
        values.append(s.values())
    size = (len(supports) * n, len(supports) * n if diagonal else n)
    indices = torch.stack([torch.cat(rows), torch.cat(cols)])
    return torch.sparse_coo_tensor(
        indices, torch.cat(values), size, check_invariants=True
    ).coalesce()


class _Diffuse(torch.autograd.Function):
    """x (n, f, b) -> (n, (1 + s*k) f, b): X, then T_1..T_k(S_1) X, ..., T_1..T_k(S_s) X, each
    term a contiguous (f, b) block of a node's row (terms support-major, as the weights' rows)."""

    @staticmethod
    def forward(ctx, x, supports: Supports, k: int):
        n, f, b = x.shape
        x0 = x.reshape(n, f * b)
        hops = [supports.first_hop(x0)]
        if k > 1:
            hops.append(supports.hop(hops[0], x0.repeat(supports.count, 1), beta=-1.0))
        for _ in range(3, k + 1):
            hops.append(supports.hop(hops[-1], hops[-2], beta=-1.0))
        ctx.supports, ctx.k, ctx.shape = supports, k, x.shape
        terms = [x0] + [h[i * n : (i + 1) * n] for i in range(supports.count) for h in hops]
        return torch.stack(terms, dim=1).view(n, len(terms) * f, b)

    @staticmethod
    def backward(ctx, grad):
        supports, k, (n, f, b) = ctx.supports, ctx.k, ctx.shape
        s = supports.count
        grad = grad.reshape(n, 1 + s * k, f * b)
        # per hop j, the gradient of its (s*n, f*b) block: one copy lays every hop out contiguously
        g = grad[:, 1:].reshape(n, s, k, f * b).permute(2, 1, 0, 3).reshape(k, s * n, f * b)
        adj = [None] * (k + 1)  # adj[j]: dL/dY_j, built from the last hop down
        adj[k] = g[k - 1]
        for j in range(k - 1, 0, -1):
            acc = g[j - 1] - adj[j + 2] if j + 2 <= k else g[j - 1]
            adj[j] = supports.hop(adj[j + 1], acc, beta=1.0, transpose=True)
        dx = grad[:, 0]
        if k > 1:  # Y_2 = 2 B Y_1 - [x; ...; x]: the repeated x takes -adj[2] from every support
            dx = dx - adj[2].view(s, n, f * b).sum(0)
        return supports.first_hop(adj[1], acc=dx, transpose=True).view(n, f, b), None, None


def diffuse(x: torch.Tensor, supports: Supports, k: int) -> torch.Tensor:
    """The diffusion terms of x (n, f, b), stacked as (n, (1 + s*k) f, b), in the supports'
    precision: under bf16 autocast x arrives in bf16, and CSR products have no bf16 kernel on
    CPU (autocast does not cover sparse ops); the weight products after it autocast again."""
    with torch.autocast(x.device.type, enabled=False):
        return _Diffuse.apply(x.to(supports.dtype), supports, k)
