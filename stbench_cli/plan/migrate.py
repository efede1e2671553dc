"""`stbench migrate`: a result folder of an older schema rewritten, once, to the current one.

Readers take the current schema only (store.files.check_schema names this command), so what an
older folder meant is known here and nowhere else.

Schema 1 -> 2:

- every parameter written out, in the manifest's cells and matrix and in runs.csv's `params`: a
  parameter the study's stbench did not have yet ran at its default, the value its code used;
- each manifest cell stores its run id: its row's (matched by what the cell is, so the ids that
  rows, epochs, samples and logs carry are kept exactly); a cell with no row yet gets a new one;
- rows get the columns of rows written since, empty where nothing was measured, and what the
  row implies: nodes, processes per node, launcher (local) and backend; the epochs an ok run
  did (an older stbench always trained them all); the machine's cores, GPU names and
  fingerprint from the manifest's inventory; stnn's stream figures as `x.` columns, as a
  workload's own figures are;
- the matrix states seed_per_repeat (off: every repeat of such a study kept the study's seed)
  and the manifest its launcher (local).

Schema 2 -> 3 (the CPU levers): the parameters added since, interop_threads, bind and
max_eval_samples, written out at their defaults (torch's inter-op threads, no binding, every
validation sample: what such a cell ran with); rows get the columns added since (threads_why,
the energy methods, the load check, contention), empty: nothing was measured. `threads=0` now
means the physical cores not busy at the cell's start; a schema-2 cell ran torch's default
(every logical CPU), which its row's `threads` column states where it was recorded.

Schema 3 -> 4 (facts as columns, not words to parse back): rows get what their
words said as columns of their own, `threads_physical` and `threads_for_load` from
`threads_why` ("auto: 2 physical cores less 1 busy ..."), `matmul_math` and `conv_math` from
`precision` ("matmul fp32, cudnn tf32", "bf16 autocast", a CPU's "fp32"); a row without load
columns gets them from its system.csv samples (store.conditions, as a new row's are summed);
epochs.csv rows without `elapsed_s` and `epochs_done` (an older stbench wrote one per epoch)
get the running sum of their epoch times and their epoch. These words are parsed here and
nowhere else.

A migration is the same steps whatever the older schema: each only fills what a row or cell
lacks, so a schema-2 folder takes the schema-1 steps as no change.

Each file is replaced atomically (runs.csv first, the manifest last) and nothing is dropped; a
folder already current is left as it is, so migrating twice is migrating once.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import asdict, replace
from pathlib import Path

from ..errors import StbenchError
from ..store.conditions import conditions
from ..store.files import REQUIRED, check_schema, read_csv, rewrite
from ..store.machine import fingerprint, gpu_names
from ..store.manifest import load_manifest, write_manifest
from ..store.rows import EPOCH_COLUMNS, RUN_COLUMNS, SCHEMA, Conditions
from . import registry
from .launcher_config import Launch
from .spec import MatrixSpec, RunSpec, identify

# stnn's figures from before a workload's own figures were `x.` columns
RENAMED = {"stream_s": "x.stream_s", "stream_mb": "x.stream_mb"}
# with the parameters, what a cell is: a row is matched to it by these
_CELL = (
    "workload",
    "device",
    "strategy",
    "world_size",
    "nodes",
    "batch_size",
    "epochs",
    "repeat",
    "seed",
    "preset",
)


def folders(paths: list[Path]) -> list[Path]:
    """Each path a result folder (a manifest or a runs.csv in it) or a folder of them."""
    found = []
    for p in paths:
        if _is_study(p):
            found.append(p)
            continue
        inner = sorted(q for q in p.glob("*/") if _is_study(q)) if p.is_dir() else []
        if not inner:
            raise StbenchError(
                f"{p} holds no result folder (no manifest.json or runs.csv in it "
                "or its sub-folders)"
            )
        found += inner
    return found


def _is_study(p: Path) -> bool:
    return (p / "manifest.json").is_file() or (p / "runs.csv").is_file()


def migrate(folder: Path) -> str:
    """Rewrite one result folder to the current schema; one line saying what was done."""
    manifest = load_manifest(folder) if (folder / "manifest.json").exists() else None
    path = folder / "runs.csv"
    rows = read_csv(path, REQUIRED) if path.exists() else []
    found = {str(r["schema"]) for r in rows}
    if manifest:
        found.add(str(manifest.get("schema", 1)))  # a manifest without one is schema 1
    if found <= {str(SCHEMA)}:
        return f"{folder}: schema {SCHEMA} already; left as it is"
    for schema in found:
        if not schema.isdigit() or int(schema) > SCHEMA:
            check_schema(folder, schema)  # newer, or not a schema: its one line
    launcher = (manifest or {}).get("launcher") or Launch().to_dict()
    env = (manifest or {}).get("env") or {}
    system = _by_run(folder / "system.csv")
    new = [_migrated_row(r, env, launcher["kind"], system.get(r["run_id"], [])) for r in rows]
    cells = _cells(folder, manifest, new) if manifest else None
    epochs = folder / "epochs.csv"
    if epochs.exists():
        found_epochs = _epochs(read_csv(epochs, ["run_id"]))
        rewrite(epochs, found_epochs, _columns(epochs, found_epochs, EPOCH_COLUMNS))
    if path.exists():
        rewrite(path, new, _columns(path, new))
    if manifest:
        write_manifest(folder, _migrated_manifest(manifest, cells, launcher))
    old = ", ".join(sorted(found - {str(SCHEMA)}))
    return (
        f"{folder}: schema {old} -> {SCHEMA} ({len(cells or ())} cells, {len(rows)} rows; "
        "run ids kept)"
    )


def written_out(workload: str, params: dict) -> dict:
    """A cell's parameters, those its stbench did not have yet at their defaults, sorted."""
    try:
        defaults = {n: p.default for n, p in registry.get(workload).all_params.items()}
    except StbenchError as exc:
        raise StbenchError(f"cannot migrate a {workload} study: {exc}") from None
    return dict(sorted({**defaults, **params}.items()))


def _migrated_row(row: dict, env: dict, launcher: str, samples: list[dict]) -> dict:
    if row["schema"] == str(SCHEMA):
        return row
    out = {RENAMED.get(k, k): v for k, v in row.items()}
    params = written_out(row["workload"], json.loads(row["params"] or "{}"))
    nodes = int(out.get("nodes") or 1)
    spec = RunSpec(
        row["workload"],
        row["device"],
        row["strategy"],
        1,
        1,
        world_size=int(row["world_size"]),
        params=tuple(params.items()),
        nodes=nodes,
    )
    done = row["epochs"] if row["status"] == "ok" else None
    implied = {
        "nodes": nodes,
        "nproc_per_node": spec.nproc_per_node,
        "launcher": launcher,
        "backend": spec.backend,
        "epochs_done": done,
    }
    out.update({k: v for k, v in implied.items() if out.get(k) in (None, "")})
    out.update(schema=SCHEMA, params=json.dumps(params, sort_keys=True))
    return _facts(_load(_machine(out, env), samples))


PHYSICAL = re.compile(r"(\d+) physical cores")  # plan.threads' words, as schema 3 wrote them
FOR_LOAD = re.compile(r"less \d+ busy")


def _facts(row: dict) -> dict:
    """Schema 4: what a row's words said, as columns (threads' choice, each library's math)."""
    why = row.get("threads_why") or ""
    if _empty(row.get("threads_physical")) and (found := PHYSICAL.search(why)):
        row["threads_physical"] = found.group(1)
    if _empty(row.get("threads_for_load")) and why:
        row["threads_for_load"] = bool(FOR_LOAD.search(why))
    precision = row.get("precision") or ""
    if _empty(row.get("matmul_math")) and precision:
        if precision.startswith("bf16"):
            matmul = conv = "bf16"
        else:  # CUDA: one entry per library; a CPU: one math for both
            libraries = dict(part.split(" ", 1) for part in precision.split(", ") if " " in part)
            matmul = libraries.get("matmul", precision)
            conv = libraries.get("cudnn", matmul)
        row.update(matmul_math=matmul, conv_math=conv)
    return row


def _load(row: dict, samples: list[dict]) -> dict:
    """Load columns summed from the run's system.csv samples, where its row has none."""
    names = list(asdict(Conditions()))
    if samples and all(_empty(row.get(k)) for k in names):
        seen = asdict(conditions(samples, row.get("cores") or None))
        row.update({k: v for k, v in seen.items() if v is not None})
    return row


def _epochs(rows: list[dict]) -> list[dict]:
    """An older stbench's epochs.csv rows (one per epoch) with the running sum of their epoch
    times as `elapsed_s` and their epoch as `epochs_done`."""
    elapsed: dict[str, float] = {}
    for r in rows:
        elapsed[r["run_id"]] = elapsed.get(r["run_id"], 0.0) + float(r.get("epoch_s") or 0.0)
        if _empty(r.get("elapsed_s")):
            r["elapsed_s"] = elapsed[r["run_id"]]
        if _empty(r.get("epochs_done")):
            r["epochs_done"] = r.get("epoch")
    return rows


def _by_run(path: Path) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in read_csv(path, ["run_id"]) if path.exists() else []:
        out.setdefault(r["run_id"], []).append(r)
    return out


def _empty(value) -> bool:
    return value is None or value == ""


def _machine(row: dict, env: dict) -> dict:
    """The machine fields rows written before them lack, from the manifest's inventory."""
    if row.get("cores") in (None, "") and env.get("cores_logical"):
        row["cores"] = env["cores_logical"]
    if row.get("gpu_names") in (None, "") and env.get("gpus"):
        row["gpu_names"] = gpu_names(env["gpus"])
    if row.get("machine_id") in (None, ""):
        named = ("host", "cpu_model", "cores", "gpu_names", "gpu_count", "torch")
        row["machine_id"] = fingerprint(*(row.get(k) for k in named))
    return row


def _columns(path: Path, rows: list[dict], current: list[str] = RUN_COLUMNS) -> list[str]:
    """Every column of a current row, then the file's own others (a workload's `x.` figures)."""
    with open(path, newline="") as f:
        header = [RENAMED.get(c, c) for c in next(csv.reader(f), [])]
    return list(dict.fromkeys([*current, *header, *(k for r in rows for k in r)]))


def _key(values: dict, params: dict) -> str:
    """What a cell is, the same text from its manifest entry and from its row's columns."""
    return json.dumps([str(values.get(k)) for k in _CELL] + [params], sort_keys=True)


def _cells(folder: Path, manifest: dict, rows: list[dict]) -> list[RunSpec]:
    """The manifest's cells written out, each with its row's run id (a cell not run yet: a new
    one). A row that is no cell of its manifest stops the migration before anything is written."""
    ids = {_key(r, json.loads(r["params"])): r["run_id"] for r in rows}
    cells = []
    for c in manifest["cells"]:
        try:
            params = written_out(c["workload"], dict(c["params"]))
            spec = RunSpec.from_dict({**c, "params": params.items()})
        except (TypeError, ValueError, KeyError) as exc:
            raise StbenchError(f"{folder}/manifest.json is corrupt: bad cell ({exc})") from None
        run_id = spec.run_id or ids.get(_key(asdict(spec), dict(spec.params)))
        cells.append(replace(spec, run_id=run_id) if run_id else identify(spec))
    lost = {r["run_id"] for r in rows} - {c.run_id for c in cells}
    if lost:
        raise StbenchError(
            f"{folder}: rows {', '.join(sorted(lost)[:3])} match no cell of its "
            "manifest; nothing was rewritten"
        )
    return cells


def _migrated_manifest(manifest: dict, cells: list[RunSpec], launcher: dict) -> dict:
    if str(manifest.get("schema", 1)) == str(SCHEMA):
        return manifest
    workload = manifest["workload"]
    matrix = {**asdict(MatrixSpec(workload)), "seed_per_repeat": False, **manifest["matrix"]}
    matrix["base_params"] = list(written_out(workload, dict(matrix["base_params"])).items())
    rest = {k: v for k, v in manifest.items() if k != "schema"}
    return {
        "schema": SCHEMA,
        **rest,
        "matrix": matrix,
        "cells": [asdict(c) for c in cells],
        "launcher": launcher,
    }
