"""Strain-stress curves: a generator from a constitutive law, and a loader for user files.

Each sample has 3 channels x 201 points: strain, stress, and a padding flag (1 where the
curve has ended and the values are zero padding). Labels are the law's (G0, a).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from stbench.contract import kept_arrays, require

POINTS = 201
G0_RANGE = (10.0, 100.0)  # small-strain shear modulus, MPa
A_RANGE = (0.5, 1.5)  # curvature exponent of the hardening law
GAMMA_REF = 0.1  # reference strain, percent


def stress(strain_pct: np.ndarray, g0: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Modified hyperbolic law tau = G0*gamma / (1 + (gamma/gamma_ref)^a), in MPa x 10.

    G0 sets the initial slope and `a` how fast the curve softens, so both are recoverable
    from a curve: the inverse problem is learnable. The x10 keeps values near 1.
    """
    gamma = strain_pct / 100.0
    return 10.0 * g0 * gamma / (1.0 + (strain_pct / GAMMA_REF) ** a)


def generate(
    n: int, seed: int, noise: float = 0.01, chunk: int = 50_000
) -> tuple[np.ndarray, np.ndarray]:
    """n curves of random length (40..201 points) up to a random maximum strain.

    Built in chunks straight into float32 arrays: the paper's 1 M curves are 2.4 GB, and
    whole-array float64 temporaries would need several times that.
    """
    rng = np.random.default_rng(seed)
    x = np.empty((n, 3, POINTS), np.float32)
    y = np.empty((n, 2), np.float32)
    pos = np.arange(POINTS)[None, :]
    for lo in range(0, n, chunk):
        m = min(chunk, n - lo)
        g0 = rng.uniform(*G0_RANGE, size=(m, 1))
        a = rng.uniform(*A_RANGE, size=(m, 1))
        length = rng.integers(40, POINTS + 1, size=(m, 1))
        max_strain = rng.uniform(0.2, 2.0, size=(m, 1))  # percent
        valid = pos < length
        strain = max_strain * pos / (length - 1)
        tau = stress(strain, g0, a) * (1.0 + noise * rng.standard_normal((m, POINTS)))
        x[lo : lo + m, 0] = np.where(valid, strain, 0.0)
        x[lo : lo + m, 1] = np.where(valid, tau, 0.0)
        x[lo : lo + m, 2] = ~valid
        y[lo : lo + m] = np.concatenate([g0, a], axis=1)
    return x, y


def load(path: str) -> tuple[np.ndarray, np.ndarray]:
    """X (N,3,201) and Y (N,2) from an .npz or HDF5 file; ValueError naming what is wrong."""
    check({"data": path})
    if Path(path).suffix == ".npz":
        with np.load(path, allow_pickle=False) as f:
            return f["X"].astype(np.float32), f["Y"].astype(np.float32)
    h5py = require("h5py", f"data={path} (HDF5)", ValueError)
    with h5py.File(path, "r") as f:
        return f["X"][...].astype(np.float32), f["Y"][...].astype(np.float32)


def _shapes(path: Path) -> dict[str, tuple]:
    """Array shapes in a file without loading the arrays (npz headers / HDF5 metadata)."""
    if path.suffix == ".npz":
        import zipfile

        shapes = {}
        with zipfile.ZipFile(path) as z:
            for name in z.namelist():
                with z.open(name) as f:
                    major, _ = np.lib.format.read_magic(f)
                    read = (
                        np.lib.format.read_array_header_1_0
                        if major == 1
                        else np.lib.format.read_array_header_2_0
                    )
                    shapes[name.removesuffix(".npy")] = read(f)[0]
        return shapes
    import h5py

    with h5py.File(path, "r") as f:
        return {k: f[k].shape for k in f if isinstance(f[k], h5py.Dataset)}


def check(params: dict) -> None:
    """Parent-side check of a data file: exists, parses, holds X (N,3,201) and Y (N,2)."""
    if params["data"] == "generated":
        return
    p = Path(params["data"])
    if not p.is_file():
        raise ValueError(
            f"data file {p} does not exist; give an .npz or .h5 file with X (N,3,201) and "
            "Y (N,2), or data=generated"
        )
    if p.suffix not in (".npz", ".h5", ".hdf5"):
        raise ValueError(f"data file {p}: unknown format {p.suffix!r}; valid: .npz, .h5, .hdf5")
    if p.suffix != ".npz":
        require("h5py", f"data={p} (HDF5)", ValueError)
    try:
        shapes = _shapes(p)
    except Exception as exc:  # zip, npy-header and HDF5 errors come in many types
        raise ValueError(
            f"data file {p} is corrupt or unreadable ({type(exc).__name__}: {exc})"
        ) from None
    x, y = shapes.get("X"), shapes.get("Y")
    if x is None or y is None:
        raise ValueError(
            f"data file {p} lacks X or Y; it needs arrays X (N,3,{POINTS}) and Y (N,2)"
        )
    if len(x) != 3 or tuple(x[1:]) != (3, POINTS) or len(y) != 2 or y[1] != 2 or x[0] != y[0]:
        raise ValueError(
            f"data file {p}: X is {tuple(x)} and Y is {tuple(y)}; "
            f"expected X (N,3,{POINTS}) and Y (N,2)"
        )


def cached(cache_dir, n: int, seed: int, noise: float) -> tuple[np.ndarray, np.ndarray]:
    """`generate`'s curves, kept in `cache_dir` for the next cell of the same seed (every cell
    of one round of a study shares its seed; contract/kept.py): the default preset's 400,000
    curves (0.92 GB) took 10 s to make on the 2-vCPU VM, and 0.2-0.7 s to read back."""
    kept = kept_arrays(
        cache_dir,
        "cnn-strain",
        f"{n}-{seed}-{noise:g}",
        n * (3 * POINTS + 2) * 4,
        lambda: dict(zip(("x", "y"), generate(n, seed, noise))),
    )
    return kept["x"], kept["y"]
