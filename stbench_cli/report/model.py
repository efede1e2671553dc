"""The model of a study (pure): its runs as one typed frame, the keys that tell its cells apart,
what it varies (one function: `axes`), and the studies of a set of result folders.

A study is the folders that ran one matrix (store.results.study_key), on one machine or several;
the hardware is then one of its keys. Rows of two studies are never pooled. Every finding, table,
figure and flag reads a Study: one frame row per run, with the hardware's `label`
(report.machines) and each parameter that varies as a `p.<name>` column; a `Key` pairs such a
column with the name a user types and reads (`device`, `grid`), so nothing else spells that out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import PurePath

import pandas as pd

from ..comparison import number
from ..contract.params import TrainerParams, setting
from ..errors import StbenchError
from ..store.rows import BOOL_COLUMNS, Run
from .labels import labels, show, size_number
from .read import Context, Folder

CELL_KEYS = ("strategy", "world_size", "nodes", "batch_size", "epochs")
PARAM = "p."  # a parameter's column: p.<name>


@dataclass(frozen=True)
class Key:
    """A key of a study's cells: the frame's column, and the name a user types and reads."""

    column: str  # "label", "batch_size", "p.grid"
    name: str  # "device", "batch_size", "grid"


HARDWARE = Key("label", "device")


def keys_of(df: pd.DataFrame) -> list[Key]:
    """Every key a frame has: the hardware, the matrix's axes, then the parameters by name."""
    params = sorted(c for c in df.columns if c.startswith(PARAM))
    return [HARDWARE, *(Key(c, c) for c in CELL_KEYS), *(Key(c, c[len(PARAM) :]) for c in params)]


def varies(values: pd.Series) -> bool:
    """Whether values differ between rows (a missing value differs from a present one): the
    one test of what varies, for every key, table, finding and figure."""
    return values.astype(str).nunique(dropna=False) > 1


def axes(df: pd.DataFrame, keys: Sequence[Key] | None = None) -> list[Key]:
    """What these rows vary: the keys whose value differs between them (`varies`)."""
    keys = keys_of(df) if keys is None else keys
    return [k for k in keys if k.column in df.columns and varies(df[k.column])]


SIZE_PARAMS = ("grid", "size", "n_samples", "n_nodes")  # parameters that set the problem's size


def size_axis(s: pd.DataFrame) -> Key | None:
    """The parameter that sets the problem's size, where it varies and every value reads as one."""
    varied = {k.column: k for k in axes(s)}
    for name in SIZE_PARAMS:
        k = varied.get(f"{PARAM}{name}")
        if k is not None and all(math.isfinite(size_number(v)) for v in s[k.column].dropna()):
            return k
    return None


# what a cell computes rather than how it runs: a device study compares cells only where these
# are the same, and a hardware's configurations are its cells over every other key
SIZES = tuple(f"{PARAM}{name}" for name in SIZE_PARAMS)
PROBLEM = ("strategy", "world_size", "nodes", "epochs", *SIZES)
# the CPU's levers (plan.levers, the batch aside) and TrainerParams' defaults of them: a cell that
# ran every one so is "the CPU at its defaults" (rows carry every parameter since schema 3)
CPU_LEVERS = ("threads", "interop_threads", "bind", "precision", "compile", "allocator", "workers")
DEFAULTS = {f.name: f.default for f in fields(TrainerParams) if f.name in CPU_LEVERS}


def at_defaults(params: Mapping) -> bool:
    """Whether a row's parameters hold every CPU lever at its default."""
    return all(params.get(name, value) == value for name, value in DEFAULTS.items())


def first_axes(s: pd.DataFrame, *names: str) -> list[Key]:
    """The study's axes, those named first."""
    found = axes(s)
    named = [k for n in names for k in found if k.name == n]
    return named + [k for k in found if k.name not in names]


def columns(keys: Sequence[Key]) -> list[str]:
    return [k.column for k in keys]


def find(name: str, keys: Sequence[Key]) -> Key:
    """The key a user named (`device`, `batch_size`, a parameter's name)."""
    for k in keys:
        if name in (k.name, k.column):
            return k
    raise StbenchError(f"cannot pivot on {name!r}; valid: {', '.join(k.name for k in keys)}")


def name_of(keys: Sequence[Key], values: Sequence) -> str:
    """A cell's name from its key values: 'batch_size=75, lr_scaling=none', the hardware by its
    label alone."""
    return ", ".join(
        show(v) if k == HARDWARE else setting(k.name, show(v)) for k, v in zip(keys, values)
    )


@dataclass(frozen=True)
class Study:
    """One study: its name (its result folders), the command that made it, and its rows."""

    name: str
    question: str
    runs: pd.DataFrame  # one row per run (frame())
    epochs: pd.DataFrame = field(default_factory=pd.DataFrame)  # epochs.csv, with `study`
    system: pd.DataFrame = field(default_factory=pd.DataFrame)  # system.csv, with `study`
    # each of its folders that has fewer rows than cells, and how to finish it (read.Folder)
    incomplete: tuple[str, ...] = ()
    # a GPU's step predicted from the CPU's (predicted.csv): never pooled with the rows
    predicted: pd.DataFrame = field(default_factory=pd.DataFrame)
    unread: tuple[str, ...] = ()  # each folder's predicted.csv that could not be read, and why
    # each folder's manifest around its rows (its prices, its question), by the folder as the
    # table's `study` column names it: joined where a view needs it (`with_context`), never a column
    contexts: Mapping[str, Context] = field(default_factory=dict)

    @property
    def workload(self) -> str:
        return str(self.runs["workload"].iloc[0])

    @property
    def sized(self) -> bool:
        """Whether a question the engine answered at sizes made it (gpu-vs-cpu, a tune's step):
        its answer is report/gpu_vs_cpu.py's."""
        return any(c.sized for c in self.contexts.values())

    @property
    def windows(self) -> bool:
        """Whether its rows are windows of the questions' engine (any question's: gpu-vs-cpu, a
        tune's step, `run --budget`'s windows), each a short timed window of a warm process."""
        return any(c.kind is not None for c in self.contexts.values())

    @property
    def priced(self) -> bool:
        return any(c.prices for c in self.contexts.values())


def with_context(study: Study, question: bool = False, prices: bool = False) -> pd.DataFrame:
    """The study's table with what its folders' manifests say beside each row, where a view
    needs it: `question` the engine's question (read.question_columns: `q_size`, `q_count`,
    `q_unit`, `q_default`, `q_note`, `q_kind`), `prices` the costs at the prices given
    (read.price_columns: `usd_*`). The one place a context meets the rows."""
    s = study.runs
    extra = [
        study.contexts.get(folder, Context()).columns(row, question, prices)
        for folder, row in zip(s["study"], s.to_dict("records"))
    ]
    added = pd.DataFrame(extra, index=s.index)
    return pd.concat([s, added], axis=1) if len(added.columns) else s


def frame(runs: Sequence[Run]) -> pd.DataFrame:
    """Runs as one row each: their columns (true and false as 1 and 0, so that they count), the
    hardware's `label`, the folder as `study`, the parameters as a dict (`params`) and, for each
    that differs between the runs, a `p.<name>` column. The one place the study's table is
    built from its rows."""
    if not runs:
        raise StbenchError("no result rows to compare")
    rows = [{**r.columns, "study": r.folder, "params": dict(r.params)} for r in runs]
    df = pd.DataFrame(rows)
    for col in BOOL_COLUMNS & set(df.columns):
        df[col] = df[col].map({True: 1.0, False: 0.0})
    df["label"] = labels(df)
    return with_params(df)


def with_params(df: pd.DataFrame) -> pd.DataFrame:
    """The frame with a `p.<name>` column for each parameter that differs between its rows."""
    params = list(df["params"])
    varied = {}
    for name in dict.fromkeys(k for p in params for k in p):
        values = _param_column([p.get(name) for p in params], df.index)
        if varies(values):
            varied[f"{PARAM}{name}"] = values
    # joined at once: columns added one at a time leave pandas a fragmented frame (and a warning)
    old = [c for c in df.columns if c.startswith(PARAM)]
    return pd.concat([df.drop(columns=old), pd.DataFrame(varied, index=df.index)], axis=1)


def _param_column(values: list, index) -> pd.Series:
    """One parameter over the rows: integers as a nullable integer column (so 400000 never
    prints as 400000.0 where a row lacks the parameter), paths by their file name."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return pd.Series(pd.array(values, dtype="Int64"), index=index)
    if present and all(isinstance(v, str) for v in present):
        return pd.Series(_names_of_paths(values), index=index, dtype=object)
    return pd.Series(
        [v if not isinstance(v, (list, dict)) else str(v) for v in values],
        index=index,
        dtype=object,
    )


def _names_of_paths(values: list) -> list:
    """Data paths by file name (a machine's folders are not part of what ran), unless two
    different paths share a name."""
    paths = {v for v in values if isinstance(v, str) and ("/" in v or "\\" in v)}
    names = {PurePath(v).name for v in paths}
    if len(names) < len(paths):
        return values
    return [PurePath(v).name if v in paths else v for v in values]


def study(
    runs: Sequence[Run],
    name: str = "",
    question: str = "",
    epochs: Sequence[dict] = (),
    system: Sequence[dict] = (),
    context: Context = Context(),
) -> Study:
    """The study of these runs (hand-made rows, or one study's folders), in `context`."""
    df = frame(runs)
    found = _study(df, name or str(df["workload"].iloc[0]), question, epochs, system)
    return replace(found, contexts={folder: context for folder in set(df["study"])})


def _study(
    df: pd.DataFrame, name: str, question: str, epochs: Sequence[dict], system: Sequence[dict]
) -> Study:
    ep, sy = pd.DataFrame(list(epochs)), pd.DataFrame(list(system))
    runs = with_params(df.reset_index(drop=True))
    runs["sync_ms"] = _sync_ms(runs, ep)
    return Study(name, question, runs, ep, sy)


def _sync_ms(runs: pd.DataFrame, epochs: pd.DataFrame) -> pd.Series:
    """Milliseconds of exposed gradient sync per training step, from epochs.csv."""
    if epochs.empty:
        return pd.Series(float("nan"), index=runs.index)
    per_run = epochs.groupby(["study", "run_id"])[["sync_s", "steps"]].sum()
    ms = 1000 * per_run["sync_s"] / per_run["steps"].where(per_run["steps"] > 0)
    return pd.Series(
        [ms.get((s, r), float("nan")) for s, r in zip(runs["study"], runs["run_id"])],
        index=runs.index,
        dtype=float,
    )


def studies(folders: Sequence[Folder]) -> list[Study]:
    """The studies of these folders, by workload and then command (a tune's steps by their
    number: `Folder.order`); the hardware labelled over them all, so one machine has one label
    in every study."""
    df = frame([r for f in folders for r in f.runs])
    by_key: dict[str, list[Folder]] = {}
    for f in folders:
        by_key.setdefault(f.study, []).append(f)
    out = []
    for group in sorted(by_key.values(), key=lambda g: min(f.order for f in g)):
        paths = {str(f.path) for f in group}
        epochs = [{**asdict(e), "study": str(f.path)} for f in group for e in f.epochs]
        system = [{**asdict(s), "study": str(f.path)} for f in group for s in f.system]
        name = " + ".join(sorted(dict.fromkeys(f.name for f in group)))
        found = _study(df[df["study"].isin(paths)], name, group[0].question, epochs, system)
        found = replace(found, contexts={str(f.path): f.context for f in group})
        unfinished = tuple(f.incomplete for f in group if f.incomplete)
        found = replace(found, incomplete=unfinished) if unfinished else found
        found = replace(found, unread=tuple(f.unread for f in group if f.unread))
        predicted = [p for f in group for p in f.predicted]
        out.append(replace(found, predicted=pd.DataFrame(predicted)) if predicted else found)
    return sorted(out, key=lambda s: s.workload)  # stable: in each workload, by `order`


def few_threads(rows: pd.DataFrame, where: str) -> list[str]:
    """The flag of a CPU cell whose threads (all its ranks') were fewer than the machine's
    cores (its physical cores, where auto named them) and not chosen for the load."""
    for r in rows[rows["device"].astype(str) == "cpu"].to_dict("records"):
        threads, cores = number(r.get("threads")), number(r.get("cores"))
        why = str(r.get("threads_why") or "")
        if not (threads and cores) or number(r.get("threads_for_load")):
            continue
        physical = int(number(r.get("threads_physical")) or cores)
        used = int(threads) * int(number(r.get("nproc_per_node")) or 1)
        if used < physical:
            return [
                f"{where}: {used} thread{'s' * (used > 1)} on {physical} cores "
                f"({why or 'no reason recorded'}), not chosen for the machine's load: the CPU "
                "may be measured below its best"
            ]
    return []
