"""Windows of the traffic series, either cut by index at batch time (`index`) from the one
raw copy of the series, or all materialized (`base`), as DCRNN's own preprocessing does."""

from __future__ import annotations

import torch
from torch.utils.data import Dataset
from torch.utils.weak import WeakIdKeyDictionary

# a host series' copies by device: the training and validation windows are views of one series,
# and each is moved to the device on its own (the trainer's `.to`): one copy there, not two (the
# first H100 run's gpu-index rows held the series twice)
_COPIES: WeakIdKeyDictionary = WeakIdKeyDictionary()


def _on(t: torch.Tensor, device) -> torch.Tensor:
    """`t` on `device`, the one copy there of a series already moved."""
    device = torch.device(device)
    if t.device == device:
        return t
    copies = _COPIES.setdefault(t, {})
    if str(device) not in copies:
        copies[str(device)] = t.to(device)
    return copies[str(device)]


class IndexWindows(Dataset):
    """Windows cut by index from the one raw copy of the series: window k is steps
    k..k+in_steps-1 in (z-scored speed and time of day, computed per batch) and the
    following `horizon` steps out (speed in mph, zeros = missing). The series may live on
    any device; nothing but the raw speeds (time, sensors) and the time of day is stored."""

    def __init__(
        self,
        speed: torch.Tensor,
        tod: torch.Tensor,
        mean: float,
        std: float,
        in_steps: int = 12,
        horizon: int = 12,
        first: int = 0,
        count: int | None = None,
    ):
        self.speed, self.tod, self.mean, self.std = speed, tod, mean, std
        self.in_steps, self.horizon, self.first = in_steps, horizon, first
        self.count = count if count is not None else speed.shape[0] - in_steps - horizon + 1 - first
        self.in_off = torch.arange(in_steps, device=speed.device)
        self.out_off = torch.arange(in_steps, in_steps + horizon, device=speed.device)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index):
        """index: an int, a list of ints, or a tensor of indices on the series' device (the
        engine hands device-resident data whole batches as such tensors: no copy per batch)."""
        single = isinstance(index, int)
        if not torch.is_tensor(index):  # host data: the indices are built where the series lives
            index = torch.tensor([index] if single else index)
        start = index + self.first
        rows_in = start[:, None] + self.in_off
        s_in = self.speed[rows_in]
        tod = self.tod[rows_in][..., None].expand_as(s_in)
        x = torch.stack([(s_in - self.mean) / self.std, tod], dim=-1)
        y = self.speed[start[:, None] + self.out_off].unsqueeze(-1)
        return (x[0], y[0]) if single else (x, y)

    @property
    def tensors(self) -> tuple[torch.Tensor, ...]:
        return self.speed, self.tod

    def to(self, device) -> IndexWindows:
        return IndexWindows(
            _on(self.speed, device),
            _on(self.tod, device),
            self.mean,
            self.std,
            self.in_steps,
            self.horizon,
            self.first,
            self.count,
        )


def materialize(w: IndexWindows):
    """DCRNN's own preprocessing: every overlapping window stored, inputs and targets."""
    from torch.utils.data import TensorDataset

    x, y = w[list(range(len(w)))]
    return TensorDataset(x.contiguous(), y.contiguous())
