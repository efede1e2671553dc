"""Red noise on a lat/lon grid for the generated SST field (numpy and scipy only, no torch).

A term is white noise smoothed by a Gaussian, AR(1) in time. Wide Gaussians are cheap only on
a coarse grid: each smoothing is drawn on nodes spaced so that its width is at least two of
them, and interpolated linearly onto the grid's cells (a field smooth over that width barely
changes between nodes: at two nodes per sigma the variance midway is 3% lower). A 1-degree
global grid thereby costs about what the 2-degree Pacific does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# scipy is imported where it is used: the parent imports this module (through data.py) for
# every command, and only a generated field's cells need it
_TRUNCATE = 4.0  # gaussian_filter's default reach, in sigmas


@dataclass(frozen=True)
class RedNoise:
    """A field AR(1) in time (lag-1 `rho`, stationary std `std`) and, in space, white noise
    smoothed by Gaussians of the given widths in degrees, mixed by variance share."""

    rho: float
    std: float
    widths: tuple[tuple[float, float, float], ...]  # (sigma lat, sigma lon, variance share)


@dataclass(frozen=True)
class Smoothing:
    """One smoothed white-noise term: drawn on `shape` coarse nodes (with a margin of the
    kernel's reach beyond the grid on every side that does not wrap, so that cells near an
    edge keep the variance and correlations of the rest), then mapped onto the grid."""

    shape: tuple[int, int]
    sigma: tuple[float, float]  # in coarse nodes
    weight: float  # scales the smoothed noise to its share of the AR(1) innovation
    rows: object  # scipy.sparse.csr_matrix (grid lat, coarse lat): linear interpolation
    cols: object  # scipy.sparse.csr_matrix (grid lon, coarse lon)
    wrap: bool

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        from scipy.ndimage import gaussian_filter

        mode = ("constant", "wrap" if self.wrap else "constant")
        smooth = gaussian_filter(
            rng.standard_normal(self.shape), self.sigma, mode=mode, truncate=_TRUNCATE
        )
        return self.weight * (self.cols @ (self.rows @ smooth).T).T


def _axis(n: int, spacing: float, sigma_deg: float, wrap: bool):
    """The interpolation matrix of one axis (grid cells x nodes), its node count and the width
    in nodes."""
    from scipy import sparse

    step = max(1, int(sigma_deg / spacing / 2))  # grid cells per node: two nodes per sigma
    if wrap:  # a periodic axis needs a whole number of nodes around it
        step = max(d for d in range(1, step + 1) if n % d == 0)
    sigma = sigma_deg / spacing / step
    margin = 0 if wrap else int(_TRUNCATE * sigma + 0.5) + 1
    nodes = n // step if wrap else (n - 1) // step + 2 + 2 * margin
    x = np.arange(n) / step + margin
    left = np.floor(x).astype(np.int64)
    frac = x - left
    cols = np.stack([left, left + 1], 1) % nodes
    matrix = sparse.csr_matrix(
        (np.stack([1 - frac, frac], 1).ravel(), (np.repeat(np.arange(n), 2), cols.ravel())),
        shape=(n, nodes),
    )
    return matrix, nodes, sigma


def _gain(sigma: tuple[float, float]) -> float:
    """Standard deviation of unit white noise after the Gaussian filter."""
    from scipy.ndimage import gaussian_filter

    impulse = np.zeros([2 * int(_TRUNCATE * s + 0.5) + 1 for s in sigma])
    impulse[tuple(n // 2 for n in impulse.shape)] = 1.0
    return float(
        np.sqrt((gaussian_filter(impulse, sigma, mode="constant", truncate=_TRUNCATE) ** 2).sum())
    )


def smoothings(
    noise: RedNoise, shape: tuple[int, int], spacing: tuple[float, float], wrap: bool
) -> list[Smoothing]:
    """The terms whose sum is one month's innovation of `noise` on a grid of `shape` cells
    `spacing` degrees apart (longitude periodic if `wrap`)."""
    innovation = noise.std * np.sqrt(1 - noise.rho**2)
    out = []
    for s_lat, s_lon, share in noise.widths:
        rows, n_lat, sig_lat = _axis(shape[0], spacing[0], s_lat, False)
        cols, n_lon, sig_lon = _axis(shape[1], spacing[1], s_lon, wrap)
        weight = innovation * np.sqrt(share) / _gain((sig_lat, sig_lon))
        out.append(Smoothing((n_lat, n_lon), (sig_lat, sig_lon), weight, rows, cols, wrap))
    return out


def ar2_std(a1: float, a2: float) -> float:
    """Standard deviation of a stationary AR(2) process with unit innovations."""
    return float(np.sqrt((1 - a2) / ((1 + a2) * ((1 - a2) ** 2 - a1**2))))
