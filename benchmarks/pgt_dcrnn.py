"""dcrnn-pems' tiny model against PyTorch Geometric Temporal's BatchedDCRNN, the model of the
index-batching study (`--preset pgt-i`): one DCRNN layer of 2 units, K = 3, a linear map to
the 12 horizon steps, Adam, on the PeMS-BAY graph and a batch of 64 windows.

    python benchmarks/pgt_dcrnn.py [--steps 20] [--blocks 5] [--batch 64] [--threads 0]

Runs only where torch-geometric-temporal is installed (never a dependency of stbench; e.g. a
throwaway venv with torch_geometric and `pip install --no-deps torch-geometric-temporal`). Its
package __init__ imports torch_sparse, a compiled extension, while BatchedDCRNN's own module
needs only torch_geometric: without torch_sparse that module is loaded from its file. Blocks of
the two models' steps alternate (ABBA), so drift of a shared machine falls on both; prints the
median step of each and their ratio. A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

import torch


def batched_dcrnn_class():
    """PGT's BatchedDCRNN, or exit with a line saying what is missing."""
    spec = importlib.util.find_spec("torch_geometric_temporal")
    if spec is None or spec.origin is None:
        sys.exit("torch-geometric-temporal is not installed: nothing to compare with")
    try:
        from torch_geometric_temporal.nn.recurrent import BatchedDCRNN

        return BatchedDCRNN
    except ImportError:  # its __init__ wants torch_sparse; the model's module does not
        path = Path(spec.origin).parent / "nn" / "recurrent" / "dcrnn.py"
        module_spec = importlib.util.spec_from_file_location("pgt_dcrnn_module", path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_spec.name] = (
            module  # torch_geometric's inspector looks the module up by name
        )
        module_spec.loader.exec_module(module)
        return module.BatchedDCRNN


class PgtModel(torch.nn.Module):
    """BatchedDCRNN over the input steps, then a linear map from its last state to the horizon."""

    def __init__(self, cls, adj, units: int, k: int, horizon: int):
        super().__init__()
        self.rnn, self.head = cls(2, units, k), torch.nn.Linear(units, horizon)
        nz = torch.from_numpy(adj).nonzero().t()
        self.edge_index, self.edge_weight = nz.contiguous(), torch.from_numpy(adj)[nz[0], nz[1]]

    def forward(self, x, y=None, step=0):
        h = self.rnn(x, self.edge_index, self.edge_weight)[:, -1]  # (batch, nodes, units)
        return self.head(h).permute(0, 2, 1).unsqueeze(-1)  # (batch, horizon, nodes, 1)


def timed_steps(task, model, x, y, steps: int) -> float:
    """Median seconds of `steps` training steps (loss, backward, Adam)."""
    opt = getattr(model, "_bench_opt", None) or torch.optim.Adam(model.parameters(), lr=1e-3)
    model._bench_opt = opt
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        opt.zero_grad()
        task.model.loss(model, x, y, 0).backward()
        opt.step()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20, help="steps per block")
    ap.add_argument("--blocks", type=int, default=5, help="ABBA block pairs")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = ap.parse_args()
    cls = batched_dcrnn_class()
    if args.threads:
        torch.set_num_threads(args.threads)
    from stbench.contract import BuildContext
    from stbench.plan.planner import preset_params
    from stbench.workloads.dcrnn_pems.source import load_graph
    from stbench.workloads.dcrnn_pems.task import make_task

    params = {
        **preset_params("dcrnn-pems", "pgt-i")[0],
        "steps": 3_000,
    }  # a short series: same shapes
    task = make_task(params, BuildContext(seed=0))
    x, y = task.data.train[list(range(args.batch))]
    torch.manual_seed(0)
    models = {
        "stbench": task.model.module,
        "pgt": PgtModel(
            cls, load_graph(params, 0)[1], params["units"], params["k"], params["horizon"]
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in models}
    for name, m in models.items():
        timed_steps(task, m, x, y, 2)  # warm-up
    for i in range(args.blocks):
        for name in (
            ("stbench", "pgt", "pgt", "stbench") if i % 2 else ("pgt", "stbench", "stbench", "pgt")
        ):
            times[name].append(timed_steps(task, models[name], x, y, args.steps))
    med = {name: statistics.median(t) for name, t in times.items()}
    for name, s in med.items():
        print(
            f"{name}: {s * 1e3:.1f} ms/step, {1 / s:.2f} steps/s "
            f"({sum(p.numel() for p in models[name].parameters())} parameters)"
        )
    print(
        f"stbench / pgt steps/s: {med['pgt'] / med['stbench']:.1f}x "
        f"(threads={torch.get_num_threads()})"
    )


if __name__ == "__main__":
    main()
