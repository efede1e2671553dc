"""LSTM on ERA5 2 m temperature: windows of 24 hours -> the next hour."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import Dataset

from stbench.contract import (
    BuildContext,
    Data,
    Metric,
    Model,
    Supervised,
    Task,
    run_blocks,
    segments,
    tensor_mb,
)

from .split import load_split


class LSTMRegressor(nn.Module):
    """The study's LSTM. With activation checkpointing its repeated blocks are the time steps
    of the window: the (multi-layer) LSTM runs over segments of steps carrying its (h, c), so
    only each segment's incoming state is kept (the same parameters, the same recurrence)."""

    def __init__(self, hidden: int = 64, layers: int = 2, checkpoint: str = "none"):
        super().__init__()
        self.lstm = nn.LSTM(1, hidden, layers, batch_first=True)
        self.head = nn.Linear(hidden, 1)
        self.checkpoint = checkpoint

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.checkpoint == "none":
            out, _ = self.lstm(x)
            return self.head(out[:, -1])
        layers, hidden = self.lstm.num_layers, self.lstm.hidden_size
        zeros = x.new_zeros(layers, x.shape[0], hidden)
        steps = [
            lambda h, c, t=t: (self.lstm(x[:, t : t + 1], (h, c))[1], None)
            for t in range(x.shape[1])
        ]
        (h, _), _ = run_blocks(steps, (zeros, zeros), self.checkpoint)
        return self.head(h[-1])


class Windows(Dataset):
    """Windows cut from one (time, series) tensor; no window crosses from one series into another.

    Index k is series k // per_series, start k % per_series. An int index builds the two
    tensors of one item in Python (the study's per-item Dataset); a list of indices gathers
    a whole batch with one indexed read (the vectorized path). Both give the same numbers.
    """

    def __init__(self, series: torch.Tensor, window: int, horizon: int = 1):
        self.series, self.window, self.horizon = series, window, horizon
        self.per_series = series.shape[0] - window - horizon + 1
        if self.per_series < 1:
            raise ValueError(f"{series.shape[0]} time steps are too few for a {window}-step window")
        self.offsets = torch.arange(window)

    def __len__(self) -> int:
        return self.per_series * self.series.shape[1]

    def __getitem__(self, index):
        if isinstance(index, int):
            s, t = divmod(index, self.per_series)
            x = torch.tensor([[float(v)] for v in self.series[t : t + self.window, s]])
            y = torch.tensor([float(self.series[t + self.window + self.horizon - 1, s])])
            return x, y
        idx = torch.as_tensor(index)
        s, t = idx // self.per_series, idx % self.per_series
        x = self.series[t[:, None] + self.offsets, s[:, None]].unsqueeze(-1)
        y = self.series[t + self.window + self.horizon - 1, s].unsqueeze(-1)
        return x, y


def lstm_flops(window: int, hidden: int, layers: int) -> float:
    """Forward + backward FLOPs of one window: 4 gates x (inputs + hidden) x hidden
    multiply-adds per step and layer, the head once; backward taken as twice forward."""
    forward = (
        sum(4 * ((1 if i == 0 else hidden) + hidden) * hidden * 2 for i in range(layers)) * window
    )
    return 3.0 * (forward + 2 * hidden)


def make_task(params: dict, ctx: BuildContext) -> Task:
    if params["read"] == "stream":
        from .stream import stream_split

        train, test_k, mean, std, selected, read = stream_split(params, ctx)
        test = Windows(torch.from_numpy((test_k - mean) / std), params["window"])
        mb = tensor_mb(test.series)  # the training windows stay in the store
    else:
        train_k, test_k, coords, selected, cost = load_split(params, ctx)
        # z-score with training statistics only
        mean, std = float(train_k.mean()), float(train_k.std())
        train = Windows(torch.from_numpy((train_k - mean) / std), params["window"])
        test = Windows(torch.from_numpy((test_k - mean) / std), params["window"])
        mb, read = tensor_mb(train.series, test.series), (lambda: cost) if cost else None
    x_last, y = test[list(range(len(test)))]
    persistence = float(((x_last[:, -1] - y) ** 2).mean().sqrt()) * std  # the last hour, repeated
    torch.manual_seed(ctx.seed)
    return Task(
        data=Data(train, test, source=selected, mb=mb, read=read),
        model=Model(
            LSTMRegressor(params["hidden"], params["layers"], params["checkpoint"]),
            Supervised(nn.functional.mse_loss),
        ),
        metric=Metric(
            "test_rmse_k",
            sum=lambda pred, target: ((pred - target) ** 2).sum(),
            naive=persistence,
            finish=lambda total, count: (total / max(count, 1)) ** 0.5 * std,
        ),
        flops_per_sample=lstm_flops(params["window"], params["hidden"], params["layers"]),
        extras=lambda: {"checkpoint_segments": segments(params["window"], params["checkpoint"])},
    )
