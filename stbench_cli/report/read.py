"""Result folders read for compare, report, gate, run and profile: each folder whole and
strictly, its rows as store.files reads them (each a typed `store.rows.Run`), with its study,
its question and its prices; a folder that cannot be read is named in one line (its file, line
and column, and what was expected there) and left out, and the others are read.

Nothing is ever written back. A folder of an older schema is refused by store.files.read_runs
in one line; no reader knows older rows exist.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import StbenchError
from ..store.cell_result import EpochRow
from ..store.files import TUNE_FILE, find_folders, read_predicted, read_runs, read_series
from ..store.manifest import CONCLUDED, GPU_VS_CPU_KIND, LEVER_KIND, RUN_KIND, read_manifest
from ..store.prices import cost_per_million_samples, cost_to_target, usd_per_second
from ..store.results import command_text, study_key
from ..store.rows import Conditions, PredictedLine, Run, SystemRow

SERIES = ("epochs.csv", "system.csv")
SKIPPED_EXIT = 4  # compare, report, gate: what could be read is shown, and a folder was left out


def conditions_of(run: Mapping) -> Conditions:
    """How busy the machine was while a run ran (a Run, or a study frame's row): its row's
    Conditions columns."""
    return Conditions(**{k: _none_for_nan(run.get(k)) for k in asdict(Conditions())})


def _none_for_nan(v: object) -> object:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


@dataclass(frozen=True)
class Context:
    """What a study's manifest says around its rows: its prices (`--price`) and, for a
    question the engine answered, the question. Joined beside a row only where a view needs it
    (report.model.with_context), never written into a row nor into the study's table."""

    prices: Mapping[str, float] = field(default_factory=dict)
    question: Mapping | None = None

    @property
    def kind(self) -> str | None:
        """The question's kind (gpu-vs-cpu, a tune's lever step, `run --budget`'s windows), or
        None for a study no question planned."""
        return self.question.get("kind", GPU_VS_CPU_KIND) if self.question else None

    @property
    def sized(self) -> bool:
        """Whether its question asks at sizes (gpu-vs-cpu's and a tune step's; `run --budget`'s
        windows are a run study, read as one)."""
        return self.kind not in (None, RUN_KIND)

    def columns(self, row: Mapping, question: bool = True, prices: bool = True) -> dict:
        """The columns this context sets beside one row (a Run, or a study table's record with
        its `params`) where a view asks for them: the question's, the prices'."""
        out = price_columns(row, self.prices) if prices and self.prices else {}
        if question and self.question:
            out.update(question_columns(row, self.question))
        return out


@dataclass(frozen=True)
class Folder:
    """One result folder read whole: the study it belongs to (folders that ran one matrix,
    on one machine or several) and its rows."""

    path: Path
    study: str  # the key of its study (store.results.study_key)
    question: str  # the command that made it, as a user types it
    runs: tuple[Run, ...]
    epochs: tuple[EpochRow, ...] = ()
    system: tuple[SystemRow, ...] = ()
    planned: int = 0  # its manifest's cells: fewer rows is a study not finished
    predicted: tuple[PredictedLine, ...] = ()  # predicted.csv: a GPU's step predicted, never a row
    unread: str = ""  # why its predicted.csv could not be read ('' where it was, or has none)
    context: Context = Context()  # its prices and question, beside its rows

    @property
    def in_a_tune(self) -> bool:
        """Whether it is a step of a tune (its parent folder holds the tune's file)."""
        return (self.path.parent / TUNE_FILE).exists()

    @property
    def name(self) -> str:
        """How a study names it: its folder's name; a tune's step with its tune's."""
        return f"{self.path.parent.name}/{self.path.name}" if self.in_a_tune else self.path.name

    @property
    def order(self) -> tuple[str, ...]:
        """Where its study stands among its workload's: by the command that made it; a tune's
        steps by their tune and their number (a step made by `tune --resume` has that command,
        and came before the tune's first step)."""
        if self.in_a_tune:
            return ("stbench tune", self.path.parent.name, self.path.name)
        return (self.question,)

    @property
    def incomplete(self) -> str:
        """'' for a finished study; else what it has and the line that finishes it."""
        have = len({r["run_id"] for r in self.runs})
        if not self.planned or have >= self.planned:
            return ""
        words = self.question.split()
        command = " ".join(words[:2]) if len(words) >= 2 else "stbench run"
        return (
            f"{self.name} has {have} of its {self.planned} cells' rows "
            f"(finish it: {command} --resume {self.path})"
        )


@dataclass(frozen=True)
class Skipped:
    """A folder left out, and why, in one line."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"skipped: {self.reason}"


def read_folder(path: Path, series: tuple[str, ...] = ()) -> Folder:
    """One result folder, strictly: StbenchError names the first thing that is not as stbench
    wrote it (a file, a line and a column)."""
    runs = read_runs(path)  # first: an older schema is named before its series' columns are
    kept = {name: tuple(read_series(path, name)) for name in series}
    return folder_of(path, runs, kept.get("epochs.csv", ()), kept.get("system.csv", ()))


def folder_of(path: Path, runs: list[Run], epochs: tuple = (), system: tuple = ()) -> Folder:
    """A result folder's rows (read_runs', or run_study's as it wrote them) as its study: its
    key, its question and its prices from the manifest."""
    manifest = read_manifest(path)
    try:
        key = study_key(manifest)
    except (KeyError, TypeError, AttributeError):
        raise StbenchError(
            f"{path / 'manifest.json'} is corrupt: it lacks the study's matrix"
        ) from None
    if not runs:
        raise StbenchError(f"{path / 'runs.csv'} holds no run yet (no cell has finished)")
    # a question the engine answered: gpu-vs-cpu's, or a windowed step of a tune's
    context = Context(manifest.get("prices") or {}, manifest.get("question") or None)
    question = command_text(manifest.get("command") or []) if manifest.get("command") else ""
    planned = len(manifest.get("cells") or ())
    predicted, unread = predictions(path)
    return Folder(
        path,
        key,
        question or path.name,
        tuple(runs),
        epochs,
        system,
        planned,
        predicted,
        unread,
        context,
    )


def predictions(path: Path) -> tuple[tuple[PredictedLine, ...], str]:
    """A gpu-vs-cpu study's predictions (runner/predictions.py), typed, and why none could be
    read ('' where they were, or the study has no predicted.csv): the answer stands without
    them, and says so."""
    try:
        return tuple(read_predicted(path)), ""
    except (OSError, StbenchError) as exc:
        return (), f"{exc}: the answer stands without its GPU predictions"


def question_columns(row: Mapping, question: Mapping) -> dict:
    """What the engine's question asked of a row (report/gpu_vs_cpu.py reads it): its size,
    the size's count of the axis' unit, and whether it is the configuration the others are held
    against (`q_default`): the CPU at the workload's defaults, or in a tune's step the step's
    reference, as the engine judged it (plan/gpu_vs_cpu.judged)."""
    if question.get("kind") == RUN_KIND:  # `run --budget`'s windows: a run study, read as one
        return {"q_kind": RUN_KIND, "q_note": engine_note(question)}
    size, params = question["size"], row["params"]
    value = row["batch_size"] if size["param"] == "batch_size" else None
    value = str(value if value is not None else params.get(size["param"]))
    counts = dict(zip(size["values"], size["counts"]))
    # a step's reference holds the lever it tries (compile), which its defaults do not name:
    # by the defaults alone, every value of it was "the reference"
    if question.get("kind") == LEVER_KIND:
        defaults = question.get("reference") or {}
    else:
        defaults = question.get("defaults") or {}
    return {
        "q_size": value,
        "q_count": counts.get(value),
        "q_unit": size["unit"],
        "q_default": float(all(params.get(k) == v for k, v in defaults.items())),
        "q_note": engine_note(question),
        "q_kind": question.get("kind", GPU_VS_CPU_KIND),
    }


def engine_note(question: Mapping) -> str | None:
    """What the questions' engine said of the study it stopped (its manifest's question): the
    sizes the budget could not measure twice, each with the budget that would, the CPU levers
    it stopped measuring as they fell behind or as their compilations outgrew the budget, and
    the pairs still open with what would conclude them; None where there is nothing to say."""
    size = question["size"]
    counts = dict(zip(size["values"], size["counts"]))

    def at(value) -> str:
        return f"{counts.get(value, 0):,.0f} {size['unit']}".strip()

    said = []
    left = question.get("left_out") or []
    if left:
        named = [
            f"{at(x['size'])} (--budget {x['needs_s']})" if x.get("needs_s") else at(x["size"])
            for x in left
        ]
        said.append(f"Not measured (the budget could not pay for two rounds): {', '.join(named)}.")
    for lever in question.get("outgrown") or ():
        (s1, r1, _, _), (s2, r2, _, _) = lever["seen"]
        said.append(
            f"cpu {lever['sets']} was not measured from {at(lever['from'])} on: it trained "
            f"{r1:.2f}x the samples/s of the CPU at its defaults at {at(s1)}, {r2:.2f}x at "
            f"{at(s2)}, losing more as the work grew."
        )
    for lever in question.get("unpaid") or ():
        said.append(
            f"cpu {lever['sets']} was not measured from {at(lever['from'])} on: a compilation "
            f"took ~{lever['build_s']:.0f} s in each process that measured it, more than the "
            "budget left could pay."
        )
    stopped = [w for w in question.get("stopped") or () if w != CONCLUDED]
    if stopped:
        said.append(f"Not concluded: {'; '.join(stopped)}.")
    return " ".join(said) or None


def price_columns(run: Mapping, prices: Mapping[str, float]) -> dict:
    """What a run cost at the study's prices (USD per device-hour, `--price`): the hour of the
    devices it held, a million samples, its target (None where a figure or a price is missing)."""
    rate = usd_per_second(run, prices)
    return {
        "usd_per_hour": rate * 3600 if rate is not None else None,
        "usd_per_million_samples": cost_per_million_samples(run, prices),
        "usd_to_target": cost_to_target(run, prices),
    }


def read(
    paths: list[Path], series: tuple[str, ...] = (), tune_steps: bool = True
) -> tuple[list[Folder], list[Skipped]]:
    """The result folders under `paths` (each a result folder or a folder holding them; a
    tune's step studies only with `tune_steps`), and those left out. Nothing read at all is a
    user error (one line: why), unless the paths held tunes only."""
    read_ok, skipped = [], []
    found = find_folders(paths, tune_steps)
    if not found and not tune_steps:
        return [], []
    for path in found:
        try:
            read_ok.append(read_folder(path, series))
        except StbenchError as exc:
            skipped.append(Skipped(path, str(exc)))
    if not read_ok:
        if len(skipped) == 1:
            raise StbenchError(skipped[0].reason)
        raise StbenchError(
            f"none of the {len(skipped)} result folders could be read: "
            + "; ".join(str(s) for s in skipped)
        )
    return read_ok, skipped


def newest(root: Path = Path("results")) -> Path:
    """The study a user made last under `root` (one level down: results/<stamp>-<host>-<name>;
    the committed references in results/reference/ are not among them)."""
    found = [p.parent for p in root.glob("*/runs.csv")]
    if not found:
        raise StbenchError(
            f"no study in {root}/ yet: run one (`stbench run WORKLOAD`), or name "
            "result folders (`stbench compare results/reference/`)"
        )
    return max(found, key=lambda p: os.stat(p / "runs.csv").st_mtime)  # the last written to
