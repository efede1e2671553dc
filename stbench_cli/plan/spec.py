"""Run specifications and matrix expansion. Pure: no torch, no I/O.

A `MatrixSpec` is what the user asked for; `expand` turns it into the ordered list of
`RunSpec` cells the engine runs. Each cell travels to its child process as JSON.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import asdict, dataclass, replace

from ..device import parse
from ..errors import StbenchError

STRATEGIES = ("single", "ddp", "zero1", "fsdp")
DISTRIBUTED = STRATEGIES[1:]  # each cell a torchrun world of nproc processes per node


@dataclass(frozen=True)
class RunSpec:
    """One cell of the matrix × one repeat."""

    workload: str
    device: str  # "cpu", "cuda" or "cuda:N"
    strategy: str  # "single" or "ddp"
    batch_size: int  # per process; the global batch is batch_size * world_size
    epochs: int
    world_size: int = 1
    repeat: int = 0
    seed: int = 0
    preset: str = "default"
    params: tuple[tuple[str, object], ...] = ()  # fully resolved workload parameters, sorted
    nodes: int = 1  # torchrun agents (machines); world_size = nproc per node x nodes
    # Set once, when the cell is planned (`identify`), and stored with it in the manifest:
    # resume, the child and the rows read it, nothing computes it again.
    run_id: str = ""

    @property
    def distributed(self) -> bool:
        """Every strategy but `single` runs as a torchrun world (even a world of one)."""
        return self.strategy != "single"

    @property
    def nproc_per_node(self) -> int:
        return self.world_size // self.nodes

    @property
    def backend(self) -> str | None:
        """The torch.distributed backend of a multi-process cell (`auto` resolved), None for
        `single`."""
        if not self.distributed:
            return None
        chosen = self.param_dict["backend"]
        if chosen == "auto":
            return parse(self.device).backend
        return str(chosen)

    @property
    def param_dict(self) -> dict[str, object]:
        return dict(self.params)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_dict(cls, d: dict) -> RunSpec:
        d = dict(d)
        d["params"] = tuple((str(k), v) for k, v in d.get("params", ()))
        return cls(**d)

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        return cls.from_dict(json.loads(text))


@dataclass(frozen=True)
class MatrixSpec:
    """The axes of a study. Every tuple is an axis; `axes` holds the `--set` ones."""

    workload: str
    devices: tuple[str, ...] = ("cpu",)
    strategies: tuple[str, ...] = ("single",)
    nprocs: tuple[int, ...] = (1,)  # processes per node
    batch_sizes: tuple[int, ...] = (64,)
    epochs: tuple[int, ...] = (1,)
    base_params: tuple[tuple[str, object], ...] = ()  # defaults with the preset applied
    axes: tuple[tuple[str, tuple[object, ...]], ...] = ()  # from --set key=v1,v2
    repeats: int = 1
    seed: int = 0
    preset: str = "default"
    nnodes: tuple[int, ...] = (1,)
    # Repeat r trains with seed + r (MLPerf's runs each have their own seed), so the repeats'
    # spread holds the training's randomness (initial weights, data order, a generated data set)
    # and not only the machine's; off (`--same-seed`), every repeat trains with `seed`.
    seed_per_repeat: bool = True


def expand(m: MatrixSpec) -> list[RunSpec]:
    """All cells in a deterministic order.

    Repeats are the outermost loop: a whole round of cells runs before the next repeat,
    so slow drift of the machine (thermal, other load) spreads over every cell instead of
    biasing the one that happened to run last. `nproc` (per node) and `nnodes` only apply to
    multi-process strategies; a `single` cell is one process whatever they list, and
    duplicates are dropped.
    """
    axis_names = [name for name, _ in m.axes]
    axis_values = [values for _, values in m.axes]
    cells: list[RunSpec] = []
    seen: set[RunSpec] = set()
    for repeat in range(m.repeats):
        for device, strategy, nproc, nodes, batch, epochs, *combo in itertools.product(
            m.devices, m.strategies, m.nprocs, m.nnodes, m.batch_sizes, m.epochs, *axis_values
        ):
            params = dict(m.base_params)
            params.update(zip(axis_names, combo))
            multi = strategy != "single"
            cell = RunSpec(
                workload=m.workload,
                device=device,
                strategy=strategy,
                batch_size=batch,
                epochs=epochs,
                world_size=nproc * nodes if multi else 1,
                repeat=repeat,
                seed=m.seed + repeat if m.seed_per_repeat else m.seed,
                preset=m.preset,
                params=tuple(sorted(params.items())),
                nodes=nodes if multi else 1,
            )
            if cell not in seen:
                seen.add(cell)
                cells.append(identify(cell))
    return cells


def identify(cell: RunSpec) -> RunSpec:
    """The cell with its id: a hash of everything that defines it (every field and every
    parameter, written out). The one place an id is computed, once, when the cell is planned;
    the manifest stores it with the cell, so a resumed study, the child and the rows read it
    and an id never depends on which stbench or workload version reads it back."""
    defined = {k: v for k, v in asdict(cell).items() if k != "run_id"}
    blob = json.dumps(defined, sort_keys=True, default=str)
    return replace(cell, run_id=hashlib.sha1(blob.encode()).hexdigest()[:12])


def varied_params(cells: list[RunSpec]) -> tuple[str, ...]:
    """The parameters whose value differs between a study's cells: what tells two cells of one
    device, batch and epochs apart in a progress line or a printed script."""
    values: dict[str, set] = {}
    for c in cells:
        for k, v in c.params:
            values.setdefault(k, set()).add(str(v))
    return tuple(k for k, seen in values.items() if len(seen) > 1)


def cell_label(spec: RunSpec, varied: tuple[str, ...] = ()) -> str:
    """'cpu single batch=64 epochs=3 threads=1 round 2': the cell's engine settings and each
    parameter of `varied` (those that differ between the study's cells), then its round."""
    world = ""
    if spec.distributed:
        world = (
            f" x{spec.world_size}" if spec.nodes == 1 else f" {spec.nodes}x{spec.nproc_per_node}"
        )
    params = spec.param_dict
    said = "".join(f" {k}={params.get(k)}" for k in varied)
    return (
        f"{spec.device} {spec.strategy}{world} batch={spec.batch_size} epochs={spec.epochs}"
        f"{said} round {spec.repeat + 1}"
    )


def check_device(text: str) -> str:
    """Validate one --device value (device.parse's forms)."""
    try:
        parse(text)
    except ValueError:
        raise StbenchError(
            f"--device {text!r} is not a device; valid: cpu, cuda, cuda:N (e.g. cuda:1)"
        ) from None
    return text


def check_strategy(text: str) -> str:
    if text not in STRATEGIES:
        raise StbenchError(f"--strategy {text!r} is unknown; valid: {', '.join(STRATEGIES)}")
    return text


def check_positive(name: str, values: list[int]) -> tuple[int, ...]:
    for v in values:
        if v < 1:
            raise StbenchError(f"{name} {v} must be a positive integer")
    return once(name, values)


def once(option: str, values) -> tuple:
    """An axis's values, each named once: one named twice is a line of its own (75 75 for 75
    750 is a typo more often than a wish: merged, a study had a cell or a size fewer than
    typed, and said nothing)."""
    values = tuple(values)
    twice = [v for i, v in enumerate(values) if v in values[:i]]
    if twice:
        raise StbenchError(f"{option}: {twice[0]} is named twice; name each value once")
    return values


def parse_set(texts: list[str]) -> list[tuple[str, list[str]]]:
    """Split each `--set key=v1,v2` into (key, raw values); values are typed later."""
    out = []
    for text in texts:
        key, sep, raw = text.partition("=")
        key = key.strip()
        if not sep or not key or not raw.strip():
            raise StbenchError(f"--set {text!r} is malformed; expected key=value or key=v1,v2")
        out.append((key, [v.strip() for v in raw.split(",") if v.strip()]))
    return out


# Parameters a window applies to a running process (never a reason for a new task and trainer):
# threads and fp32 math are switches, loader workers a DataLoader of their own over the same data.
# What else a configuration changes (an allocator, binding, inter-op threads, compile) needs a
# process, or a trainer, of its own.
LIVE_LEVERS = ("threads", "workers", "precision")
# What one warm process of windows can hold side by side: the live levers, switched before a
# window, and compilation, a trainer of its own built and compiled (untimed) in the same process
# at its first window (child/windows.py's build key)
WINDOWED_LEVERS = (*LIVE_LEVERS, "compile")


@dataclass(frozen=True)
class WindowsJob:
    """What the parent asks of one warm process of windows (child/windows.py): the windows in
    the order they run, each a RunSpec of one configuration and round."""

    windows: tuple[RunSpec, ...]
    window_s: float  # a timed window's floor in seconds ...
    min_steps: int  # ... and in steps (a steady step at any size)
    deadline: float  # time.time() after which no window starts
    # a compiled configuration's first window in the process: what it runs untimed (its
    # compilation), as far as the parent knows, for whether it ends before the deadline
    build_s: float = 0.0

    def to_json(self) -> str:
        return json.dumps(
            {
                "windows": [asdict(w) for w in self.windows],
                "window_s": self.window_s,
                "min_steps": self.min_steps,
                "deadline": self.deadline,
                "build_s": self.build_s,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> WindowsJob:
        d = json.loads(text)
        windows = tuple(RunSpec.from_dict(w) for w in d["windows"])
        return cls(
            windows,
            float(d["window_s"]),
            int(d["min_steps"]),
            float(d["deadline"]),
            float(d.get("build_s", 0.0)),
        )
