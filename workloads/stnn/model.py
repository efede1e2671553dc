"""STNN (Ziat et al., ICDM 2017) as the original code defines it.

Latent factors Z (T_train x n x nz) are free parameters, stored flat as rows t*n + i so that
a batch of (t, i) pairs touches only its rows (row-sparse gradients). The decoder maps a
factor to the observation; the dynamics predict z_{t+1}[i] from the relation context of z_t.

The factors' gradient (`factor_grad`): a decoder batch, and a dynamics batch of sparse
relations, reach the factors only through lookups, so with `sparse` their gradient is a sparse
COO tensor of the batch's rows (a dense or offload dynamics batch also indexes all of z_t, so
its gradient is dense either way). `dense` makes every lookup's gradient a dense tensor the
size of all the factors: tools that read every tensor's storage (TORCH_CUDA_SANITIZER calls
data_ptr(), which sparse tensors lack) can then run; each step zero-fills the whole gradient.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

_ACTIVATIONS = {"tanh": torch.tanh, "identity": lambda x: x}


class STNN(nn.Module):
    def __init__(
        self,
        relations: nn.Module,
        n: int,
        t_train: int,
        nz: int,
        nd: int,
        nhid: int = 0,
        nlayers: int = 1,
        activation: str = "tanh",
        lambd: float = 0.1,
        l1: float = 0.0,
        sparse_grad: bool = True,
    ):
        super().__init__()
        self.relations, self.n, self.t_train, self.nz = relations, n, t_train, nz
        self.sparse_grad = (
            sparse_grad  # the lookups' gradient layout (factor_grad): see the module's docstring
        )
        self.lambd, self.l1, self.act = lambd, l1, _ACTIVATIONS[activation]
        self.factors = nn.Parameter(torch.empty(t_train * n, nz).uniform_(-0.1, 0.1))
        self.decoder = nn.Linear(nz, nd, bias=False)
        width = nz * relations.r
        if nlayers == 1:
            self.dynamic = nn.Linear(width, nz)
        else:  # the original's MLP: nlayers linear maps with ReLU between
            dims = [width] + [nhid] * (nlayers - 1) + [nz]
            layers = []
            for a, b in zip(dims[:-1], dims[1:]):
                layers += [nn.Linear(a, b), nn.ReLU()]
            self.dynamic = nn.Sequential(*layers[:-1])

    def step_z(self, context: torch.Tensor) -> torch.Tensor:
        return self.act(self.dynamic(context))

    def decoder_loss(self, t: torch.Tensor, i: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        z = F.embedding(t * self.n + i, self.factors, sparse=self.sparse_grad)
        return F.mse_loss(self.decoder(z), x)

    def dynamics_loss(
        self, t: torch.Tensor, i: torch.Tensor, i_host: torch.Tensor | None = None
    ) -> torch.Tensor:
        z_next = self.step_z(self.relations.pair_context(self.factors, t, i, i_host))
        target = F.embedding((t + 1) * self.n + i, self.factors, sparse=self.sparse_grad)
        loss = self.lambd * F.mse_loss(z_next, target)
        learned = self.relations.learned()
        if self.l1 > 0 and learned is not None:
            loss = loss + self.l1 * learned.abs().mean()
        return loss

    @torch.no_grad()
    def forecast(self, steps: int) -> torch.Tensor:
        """Roll the dynamics from the last training factor: (steps, n, nd)."""
        z = self.factors.view(self.t_train, self.n, self.nz)[-1]
        out = []
        for _ in range(steps):
            z = self.step_z(self.relations.all_context(z))
            out.append(self.decoder(z))
        return torch.stack(out)

    def forward(self, x, y: torch.Tensor) -> torch.Tensor:
        """Training: x holds (t, i) pairs and the loss of their pass is returned; a dynamics
        batch has no observation, so its y is (B, 0) (the pass is read from a shape, not from
        device memory: no host-device sync). Evaluation: x holds forecast steps 1..H.

        x is the batch on the device, or (on the device, its host copy) as the task's transfer
        hands it over: what the host needs (offloaded relation rows, the forecast length) is
        read from the host copy, never copied back from the device."""
        x, host = x if isinstance(x, tuple) else (x, x)
        if not self.training:
            preds = self.forecast(int(host.max()))
            return preds[x - 1]
        t, i = x[:, 0], x[:, 1]
        if y.shape[1] == 0:
            return self.dynamics_loss(t, i, host[:, 1])
        return self.decoder_loss(t, i, y)
