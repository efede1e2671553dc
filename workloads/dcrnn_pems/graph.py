"""Sensor graphs: DCRNN's adjacency pickles (read safely), generated graphs, diffusion supports."""

from __future__ import annotations

import io
import pickle
from pathlib import Path

import numpy as np

# Exactly what DCRNN's adj_mx*.pkl holds: a list [ids (str), id->index (dict), adjacency (float32
# ndarray)]. numpy rebuilds arrays through these callables; anything else is refused.
_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
}


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickles builtins containers and numpy arrays only: a pickle that names any other
    global (os.system, subprocess.Popen, …) is refused before it can run."""

    def find_class(self, module: str, name: str):
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"refused global {module}.{name}: not part of a sensor-graph pickle"
        )


def load_adj_pickle(path: str | Path) -> tuple[list[str], np.ndarray]:
    """(sensor ids, adjacency) from a DCRNN adj_mx*.pkl (Python 2 pickle, latin1)."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"graph file {p} does not exist; give a DCRNN adj_mx*.pkl")
    try:
        obj = RestrictedUnpickler(io.BytesIO(p.read_bytes()), encoding="latin1").load()
    except pickle.UnpicklingError as exc:
        raise ValueError(f"graph file {p} is not a safe sensor-graph pickle ({exc})") from None
    except Exception as exc:  # truncated or foreign files fail in many ways
        raise ValueError(f"graph file {p} is corrupt ({type(exc).__name__}: {exc})") from None
    if not (isinstance(obj, list) and len(obj) == 3 and isinstance(obj[2], np.ndarray)):
        raise ValueError(f"graph file {p} is not DCRNN's [ids, id->index, adjacency] layout")
    ids, _, adj = obj
    if adj.shape != (len(ids), len(ids)):
        raise ValueError(
            f"graph file {p}: adjacency {adj.shape} does not match {len(ids)} sensor ids"
        )
    return [str(i) for i in ids], adj.astype(np.float32)


def generated_graph(n: int, seed: int, neighbours: int = 8) -> np.ndarray:
    """A road-like graph: sensors scattered on a plane, directed Gaussian-kernel edges to the
    nearest neighbours (DCRNN thresholds its kernel the same way), about 8 edges a sensor."""
    rng = np.random.default_rng(seed)
    pos = rng.uniform(0, np.sqrt(n), size=(n, 2))
    adj = np.zeros((n, n), np.float32)
    for lo in range(0, n, 1024):  # blocks keep the distance matrix small for 11 k sensors
        d = np.linalg.norm(pos[lo : lo + 1024, None] - pos[None], axis=-1)
        nearest = np.argsort(d, axis=1)[:, 1 : neighbours + 1]
        rows = np.arange(lo, lo + len(d))[:, None]
        w = np.exp(
            -(np.take_along_axis(d, nearest, 1) ** 2) / np.median(d[:, 1 : neighbours + 1]) ** 2
        )
        adj[rows, nearest] = w.astype(np.float32)
    np.fill_diagonal(adj, 1.0)
    return adj


def random_walk_supports(adj: np.ndarray):
    """DCRNN's dual random walk: D_O^-1 A (forward) and D_I^-1 A^T (backward), as sparse
    matrices laid out for left-multiplying (nodes, features) blocks."""
    import torch

    def walk(a: np.ndarray):
        deg = a.sum(axis=1)
        inv = np.where(deg > 0, 1.0 / np.where(deg > 0, deg, 1), 0.0)
        p = (a * inv[:, None]).astype(np.float32)
        return torch.from_numpy(p.T.copy()).to_sparse().coalesce()  # DCRNN diffuses with P^T

    return [walk(adj), walk(adj.T)]
