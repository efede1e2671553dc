"""Relations between the cells of a lat/lon grid, as an edge list (no torch, no n x n).

Relation 0 is the identity (a cell's own past). The others link ocean cells to their
ocean neighbours: `4` (one relation, N/S/E/W) and `8` (one relation, with the diagonals)
are row-normalized like the original's adjacency; `dir4` gives one unnormalized relation
per direction (r = 5), the "per-direction" variant.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_OFFSETS = {
    "4": [[(-1, 0), (1, 0), (0, -1), (0, 1)]],
    "8": [[(-1, 0), (1, 0), (0, -1), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]],
    "dir4": [[(-1, 0)], [(1, 0)], [(0, -1)], [(0, 1)]],
}
NEIGHBOURHOODS = tuple(_OFFSETS)


@dataclass(frozen=True)
class Edges:
    """All relations' edges, sorted by (row, relation, column): the row-major order of a dense
    (n, r, n) relation tensor, which is also the order the original's masked_scatter fills
    learned weights in. value is the fixed weight (identity 1, normalized adjacency)."""

    n: int
    r: int
    row: np.ndarray  # int64 (E,)
    rel: np.ndarray
    col: np.ndarray
    value: np.ndarray  # float32 (E,)

    @property
    def learned(self) -> np.ndarray:
        """Mask of the edges whose weight `stnn-r` learns (every relation but the identity)."""
        return self.rel > 0

    def rowptr(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(np.bincount(self.row, minlength=self.n))]).astype(
            np.int64
        )

    def dense(self) -> np.ndarray:
        """The (n, r, n) tensor; only for small grids (tests and the dense mode)."""
        w = np.zeros((self.n, self.r, self.n), np.float32)
        w[self.row, self.rel, self.col] = self.value
        return w


def relation_count(neighbourhood: str) -> int:
    return 1 + len(_OFFSETS[neighbourhood])


def grid_edges(ocean: np.ndarray, neighbourhood: str = "4", wrap_lon: bool = False) -> Edges:
    """Edges among the ocean cells of a (lat, lon) mask; cells are numbered row-major."""
    nlat, nlon = ocean.shape
    ids = -np.ones(ocean.shape, np.int64)
    ids[ocean] = np.arange(int(ocean.sum()))
    n = int(ocean.sum())
    lat, lon = np.nonzero(ocean)
    rows, rels, cols, vals = (
        [np.arange(n)],
        [np.zeros(n, np.int64)],
        [np.arange(n)],
        [np.ones(n, np.float32)],
    )
    for r, offsets in enumerate(_OFFSETS[neighbourhood], start=1):
        src, dst = [], []
        for dlat, dlon in offsets:
            la, lo = lat + dlat, lon + dlon
            if wrap_lon:
                lo = lo % nlon
            inside = (la >= 0) & (la < nlat) & (lo >= 0) & (lo < nlon)
            target = np.full(n, -1, np.int64)
            target[inside] = ids[la[inside], lo[inside]]
            keep = target >= 0
            src.append(np.nonzero(keep)[0])
            dst.append(target[keep])
        src, dst = np.concatenate(src), np.concatenate(dst)
        w = np.ones(len(src), np.float32)
        if neighbourhood != "dir4":  # row-normalized: a cell averages its neighbours
            deg = np.bincount(src, minlength=n).astype(np.float32)
            w = 1.0 / deg[src]
        (
            rows.append(src),
            rels.append(np.full(len(src), r, np.int64)),
            cols.append(dst),
            vals.append(w),
        )
    row, rel, col, value = (np.concatenate(a) for a in (rows, rels, cols, vals))
    order = np.lexsort((col, rel, row))
    return Edges(
        n,
        1 + len(_OFFSETS[neighbourhood]),
        row[order],
        rel[order],
        col[order],
        value[order].astype(np.float32),
    )
