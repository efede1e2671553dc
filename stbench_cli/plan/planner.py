"""From what the user typed to a planned study: parameters resolved and checked, the matrix
expanded, every cell's skip decision taken once, a result folder and its manifest. All user
mistakes surface here, as one StbenchError line, before anything is written."""

from __future__ import annotations

import datetime as dt
import math
import socket
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from .. import __version__
from ..contract import BATCH, Workload
from ..errors import StbenchError, a_folder, a_result_folder
from ..store.files import TUNE_FILE, read_runs
from ..store.machine import EnvInfo
from ..store.manifest import GPU_VS_CPU_KIND, read_manifest
from ..store.rows import RETRIED, SCHEMA, Run
from . import gpu_vs_cpu, pairs, registry
from .launcher_config import Launch, make_launch
from .skips import cell_skip
from .spec import (
    MatrixSpec,
    RunSpec,
    check_device,
    check_positive,
    check_strategy,
    expand,
    identify,
    once,
    parse_set,
)


@dataclass(frozen=True)
class Request:
    """What the user asked for (empty: the preset's or the engine's default)."""

    workload: str
    devices: tuple[str, ...] = ()
    strategies: tuple[str, ...] = ()
    nprocs: tuple[int, ...] = ()
    batch_sizes: tuple[int, ...] = ()
    epochs: tuple[int, ...] = ()
    sets: tuple[str, ...] = ()
    repeat: int = 1
    preset: str | None = None
    smoke: bool = False
    seed: int = 0  # repeat r's seed is seed + r, unless seed_per_repeat is off (MatrixSpec)
    seed_per_repeat: bool = True
    out: Path = Path("results")
    nnodes: tuple[int, ...] = ()
    launcher: str = "local"
    slurm: tuple[str, ...] = ()  # --slurm key=value
    dask: tuple[str, ...] = ()  # --dask key=value
    timeout: float | None = None  # seconds per cell (a Slurm job's time limit)
    prices: tuple[tuple[str, float], ...] = ()  # USD per device-hour (--price)


@dataclass(frozen=True)
class Plan:
    workload: Workload
    cells: tuple[RunSpec, ...]
    folder: Path
    manifest: dict
    skips: Mapping[str, str]  # run_id -> why that cell cannot run on this machine
    done: tuple[Run, ...] = ()  # runs.csv rows already in the folder (a resumed study)
    launch: Launch = Launch()  # how the cells' processes are started
    profile: Path | None = None  # `stbench profile`: where each cell's traces go

    @property
    def finished(self) -> set[str]:
        """The run ids whose rows stand: a resume runs every other cell (a failed or hung one
        again, store.rows.RETRIED)."""
        return {r["run_id"] for r in self.done if r["status"] not in RETRIED}

    @property
    def remaining(self) -> Plan:
        """This plan without the cells whose rows stand (what a resume runs)."""
        return replace(self, cells=tuple(c for c in self.cells if c.run_id not in self.finished))


def resolve_params(w: Workload, preset: str, smoke: bool, sets) -> tuple[dict, dict, dict]:
    """(base params, --set axes, engine defaults such as batch_size/epochs from presets)."""
    layers = [preset] + (["smoke"] if smoke and preset != "smoke" else [])
    for name in layers:
        if name not in w.presets:
            raise StbenchError(
                f"unknown preset {name!r} for {w.name}; valid: {', '.join(w.presets)}"
            )
    specs = w.all_params
    base = {name: p.default for name, p in specs.items()}
    engine: dict = {}
    for name in layers:
        for key, value in w.presets[name].items():
            (engine if key in ("batch_size", "epochs") else base)[key] = value
    axes = {}
    for key, raw in parse_set(list(sets)):
        if key not in specs:
            raise StbenchError(
                f"unknown parameter {key!r} for {w.name}; valid: {', '.join(sorted(specs))}"
            )
        try:
            typed = [specs[key].parse(v) for v in raw]
        except ValueError as exc:
            raise StbenchError(f"--set {exc}") from None
        axes[key] = once(f"--set {key}", typed)
    return base, axes, engine


def preset_params(workload: str, preset: str = "smoke", **overrides) -> tuple[dict, dict]:
    """A workload's parameters with one preset applied and `overrides` on top, and the preset's
    engine values (batch_size, epochs): the one preset resolver, for cells made outside a study
    (the doctor's checks, the tests)."""
    base, _, engine = resolve_params(registry.get(workload), preset, False, ())
    return {**base, **overrides}, engine


def check_data(w: Workload, param_sets: Iterable[tuple]) -> None:
    """Check the data of every distinct parameter set (a cell's `params`), so a missing or
    corrupt file, or a selection outside the data, fails now with one line rather than as a
    failed cell. The commands check it before the inventory (a missing file is one line in
    ~1.3 s, not after torch's import: ~6 s on the 2-core VM), and their plans then leave it
    (`data_checked`)."""
    if w.check is None:
        return
    for params in dict.fromkeys(param_sets):
        try:
            w.check(dict(params))
        except ValueError as exc:
            raise StbenchError(str(exc)) from None


def new_folder(out: Path, workload: str) -> Path:
    a_folder(out)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    folder = out / f"{stamp}-{socket.gethostname()}-{workload}"
    n = 1
    while folder.exists():  # never write into an earlier study's folder
        n += 1
        folder = out / f"{stamp}-{socket.gethostname()}-{workload}-{n}"
    return folder


def git_sha() -> str | None:
    try:
        return (
            subprocess.run(
                ["git", "rev-parse", "HEAD"],
                cwd=Path(__file__).parent,
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
            or None
        )
    except (OSError, subprocess.SubprocessError):
        return None


def matrix_of(w: Workload, req: Request) -> MatrixSpec:
    base, axes, engine = resolve_params(w, req.preset or w.default_preset, req.smoke, req.sets)
    return MatrixSpec(
        workload=w.name,
        devices=once("--device", [check_device(d) for d in req.devices or ["cpu"]]),
        strategies=once("--strategy", [check_strategy(s) for s in req.strategies or ["single"]]),
        nprocs=check_positive("--nproc", req.nprocs or [1]),
        nnodes=check_positive("--nnodes", req.nnodes or [1]),
        batch_sizes=check_positive(
            "--batch-size", req.batch_sizes or [engine.get("batch_size", 64)]
        ),
        epochs=check_positive("--epochs", req.epochs or [engine.get("epochs", 1)]),
        base_params=tuple(sorted(base.items())),
        axes=tuple(axes.items()),
        repeats=check_positive("--rounds", [req.repeat])[0],
        seed=req.seed,
        preset=req.preset or w.default_preset,
        seed_per_repeat=req.seed_per_repeat,
    )


def check_new(req: Request) -> tuple[Workload, MatrixSpec]:
    """A new study's workload and matrix, every value checked: all but its --out (a_folder)
    that a request can be refused for before the machine is known. The commands check it
    before the inventory, which waits for the cells' server to import torch (~1.5 s): a bad
    input is one line at once."""
    w = registry.get(req.workload)
    return w, matrix_of(w, req)


def plan_new(
    req: Request, env: EnvInfo, command: tuple[str, ...] = (), data_checked: bool = False
) -> Plan:
    """A new study's plan. `data_checked`: the caller checked its data already (`stbench run`
    does, before the inventory: a bad data source is one line at once, not after torch's
    import), else it is checked here once the skips show something can run."""
    launch = make_launch(req.launcher, list(req.slurm), req.timeout, list(req.dask))
    w, matrix = check_new(req)
    cells = expand(matrix)
    skips = {c.run_id: r for c in cells if (r := cell_skip(c, env, w, launch.kind))}
    if len(skips) == len(cells):  # before check_data, which may open a remote store
        raise StbenchError(f"nothing to run: {skips[cells[0].run_id]}")
    if not data_checked:
        check_data(w, [c.params for c in cells])
    manifest = {
        **_new_manifest(w, matrix, cells, env, launch, command),
        **({"prices": dict(req.prices)} if req.prices else {}),
    }
    return Plan(w, tuple(cells), new_folder(req.out, w.name), manifest, skips, launch=launch)


@dataclass(frozen=True)
class CheckedQuestion:
    """A question as checking it found it: what planning builds its cells from."""

    workload: Workload
    sizes: tuple  # the size axis' values, small to large
    params: dict  # every cell's parameters but its configuration's and its size
    engine: dict  # the engine's settings (the batch, where the size is not the batch)
    configs: tuple[gpu_vs_cpu.Config, ...]  # what each size measures
    window_s: float  # a window's floor in timed seconds

    def check_data(self) -> None:
        """Its data at each size, as its cells will read it (a configuration's levers never
        change what a cell reads)."""
        param = self.workload.size.param
        sizes = [{}] if param == BATCH else [{param: size} for size in self.sizes]
        check_data(self.workload, [tuple(sorted({**self.params, **at}.items())) for at in sizes])


def check_question(q: gpu_vs_cpu.Question, physical: int, bf16: bool = False) -> CheckedQuestion:
    """A question's workload, its sizes and the user's --set values (one each, never the size
    axis), its GPU's name, its --out and its budget checked: all it can be refused for before
    the machine's inventory (as check_new). Its configurations come from this host's
    `physical` cores and whether its CPU has bf16 units (`bf16`), both known without torch,
    and its GPU's levers where `q.gpu` names one: before the inventory a GPU the machine may
    have is not yet known, and with it the floor only rises (more configurations to measure
    twice)."""
    w = registry.get(q.workload)
    sizes = gpu_vs_cpu.axis_values(w, q)
    _, given, _ = resolve_params(w, q.preset or w.default_preset, False, q.sets)
    for key, values in given.items():
        if len(values) != 1 or key == w.size.param:
            raise StbenchError(
                f"--set {key}: gpu-vs-cpu takes one value per parameter, and the sizes by "
                f"--sizes (the axis is {w.size.param})"
            )
    if q.gpu:
        check_device(q.gpu)
    a_folder(q.out)
    theirs = {key: values[0] for key, values in given.items()}
    base, _, engine = resolve_params(w, q.preset or w.default_preset, False, ())
    # the sweep's parameters over the preset's, a smoke's over both (it shrinks what they set)
    shrink = w.presets.get("smoke", {}) if q.smoke else {}
    params = {
        **base,
        **gpu_vs_cpu.window_sets(q, w),
        **{k: v for k, v in shrink.items() if k not in ("batch_size", "epochs")},
        **theirs,  # the user's --set last
    }
    engine = {**engine, **{k: v for k, v in shrink.items() if k in ("batch_size", "epochs")}}
    configs = gpu_vs_cpu.configs(q, params, physical, bf16)
    window = q.window_s or pairs.auto_window(q.budget_s, len(sizes), len(configs))
    floor = pairs.budget_floor(len(sizes), len(configs), window)
    if gpu_vs_cpu.pays_compile(q, len(sizes), len(configs), window):
        # the CPU compiled first (the side every GPU ratio divides by), then the GPU's graphs
        graphs = bool(q.gpu) and gpu_vs_cpu.pays_compile(q, len(sizes), len(configs), window, 2)
        configs = gpu_vs_cpu.configs(q, params, physical, bf16, True, graphs)
        window = q.window_s or pairs.auto_window(q.budget_s, len(sizes), len(configs))
    if q.budget_s < floor:
        raise StbenchError(
            f"--budget {q.budget_s:g}: too small to measure {len(sizes)} sizes of "
            f"{len(configs)} configurations twice in windows of {window:g} s even if their steps "
            f"took no time; give at least --budget {math.ceil(floor)} (the answer then names "
            "each size it left out with the budget that size needs), or fewer --sizes"
        )
    return CheckedQuestion(w, sizes, params, engine, tuple(configs), window)


def plan_question(
    q: gpu_vs_cpu.Question,
    env: EnvInfo,
    physical: int,
    command: tuple[str, ...] = (),
    bf16: bool = False,
    data_checked: bool = False,
) -> Plan:
    """The study of `stbench gpu-vs-cpu` (plan/gpu_vs_cpu.py): at each size, the CPU at its
    defaults, its quick levers and the GPU's, one cell each, round 0: the configurations the
    engine's windows measure round after round (plan_rounds adds each round's cells before it
    runs). Its cells are listed, not a product of axes (a size's candidates depend on the
    preset); the manifest's matrix names every value its cells take, and `question` what the
    report needs to read the study as the answer. `physical`: this machine's physical cores;
    `bf16`: whether its CPU has bf16 units. A budget that cannot measure every size twice is
    refused here, before anything is written (check_question)."""
    checked = check_question(q, physical, bf16)
    w, sizes = checked.workload, checked.sizes
    batch = int(checked.engine.get("batch_size", 64))
    cells: list[RunSpec] = []
    for size in sizes:
        for c in checked.configs:
            params = {**checked.params, **c.sets}
            if w.size.param != BATCH:
                params[w.size.param] = size
            cells.append(
                identify(
                    RunSpec(
                        workload=w.name,
                        device=check_device(c.device),
                        strategy="single",
                        batch_size=int(size) if w.size.param == BATCH else batch,
                        epochs=1,
                        repeat=0,
                        seed=q.seed,
                        preset=q.preset or w.default_preset,
                        params=tuple(sorted(params.items())),
                    )
                )
            )
    launch = make_launch("local", [], None)
    skips = {c.run_id: r for c in cells if (r := cell_skip(c, env, w, launch.kind))}
    if len(skips) == len(cells):
        raise StbenchError(f"nothing to run: {skips[cells[0].run_id]}")
    if not data_checked:
        check_data(w, [c.params for c in cells])
    varied = {
        k: tuple(dict.fromkeys(dict(c.params)[k] for c in cells))
        for k in dict(cells[0].params)
        if len({str(dict(c.params)[k]) for c in cells}) > 1
    }
    matrix = MatrixSpec(
        workload=w.name,
        devices=tuple(dict.fromkeys(c.device for c in cells)),
        batch_sizes=tuple(dict.fromkeys(c.batch_size for c in cells)),
        epochs=(1,),
        base_params=tuple(sorted((k, v) for k, v in cells[0].params if k not in varied)),
        axes=tuple(varied.items()),
        repeats=1,
        seed=q.seed,
        preset=q.preset or w.default_preset,
        # one process builds a configuration once and measures all its rounds: one seed
        seed_per_repeat=False,
    )
    manifest = {
        **_new_manifest(w, matrix, cells, env, launch, command),
        "question": gpu_vs_cpu.record(q, w, sizes, checked.params, checked.window_s),
    }
    folder = new_folder(q.out, f"{w.name}-gpu-vs-cpu")
    return Plan(w, tuple(cells), folder, manifest, skips, launch=launch)


def _new_manifest(w, matrix: MatrixSpec, cells, env: EnvInfo, launch: Launch, command) -> dict:
    return {
        "schema": SCHEMA,
        "stbench_version": __version__,
        "git_sha": git_sha(),
        "command": list(command),
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "workload": w.name,
        "matrix": asdict(matrix),
        "cells": [asdict(c) for c in cells],
        "env": env.to_dict(),
        "launcher": launch.to_dict(),
    }


def profile_request(req: Request, steps: int) -> Request:
    """`stbench profile`'s study: one epoch cut to the warm-up plus `steps` steady steps, one
    round (plan it with plan_profile)."""
    if steps < 1:
        raise StbenchError(f"--steps {steps} must be a positive integer")
    w = registry.get(req.workload)
    sets = list(req.sets)
    base, axes, _ = resolve_params(w, req.preset or w.default_preset, req.smoke, sets)
    warmup = axes.get("warmup_steps", (base["warmup_steps"],))[0]
    sets += [f"max_steps={warmup + steps}", "max_eval_batches=2"]
    return replace(
        req, sets=tuple(sets), epochs=(1,), strategies=(), nprocs=(), nnodes=(), repeat=1
    )


def plan_profile(req: Request, env: EnvInfo, command: tuple[str, ...] = ()) -> Plan:
    """The study of a profile_request, its traces in the folder's profile/."""
    plan = plan_new(req, env, command)
    return replace(plan, profile=(plan.folder / "profile").resolve())


def finished_by(folder: Path, manifest: Mapping | None = None) -> str:
    """The command that finishes what `folder` holds, by its kind: a tune's (the tune, or one
    of its steps: the tune decides what its steps run next), `gpu-vs-cpu`'s (a question), or
    `run`'s (a study of cells, or run --budget's windows). `manifest`: the folder's, where the
    caller has read it."""
    if (folder / TUNE_FILE).exists():
        return f"stbench tune --resume {folder}"
    manifest = read_manifest(folder) if manifest is None else manifest
    command = list(manifest.get("command") or ())
    tune = folder.resolve().parent  # `--resume .` from inside a step has a tune above it too
    if (tune / TUNE_FILE).exists() and command[1:2] == ["tune"]:
        shown = folder.parent if folder.name not in ("", "..") else tune
        return f"stbench tune --resume {shown}"
    question = manifest.get("question")
    if question and question.get("kind", GPU_VS_CPU_KIND) == GPU_VS_CPU_KIND:
        return f"stbench gpu-vs-cpu --resume {folder}"
    return f"stbench run --resume {folder}"


def plan_resume(
    workload: str | None, folder: Path, env: EnvInfo, command: str | None = None
) -> Plan:
    """The study stored in `folder` (stored_study), with the cells this machine cannot run."""
    return with_skips(stored_study(workload, folder, command), env)


def with_skips(plan: Plan, env: EnvInfo) -> Plan:
    """A stored study's plan with the cells this machine cannot run (cell_skip)."""
    w, kind = plan.workload, plan.launch.kind
    return replace(
        plan, skips={c.run_id: r for c in plan.cells if (r := cell_skip(c, env, w, kind))}
    )


def stored_study(workload: str | None, folder: Path, command: str | None = None) -> Plan:
    """The study stored in folder/manifest.json, its cells with the ids they were planned with;
    its runs.csv must be readable. workload: what the user named, checked against the study's
    (None: the study's own). command: the user's command (`run`, `gpu-vs-cpu`), refused with
    one line naming the right one where the study is another's (its cells would run as that
    command runs cells: a question's as whole processes, or a tune's step outside its tune).
    Read before the machine is known, as check_new: its skips are plan_resume's."""
    a_result_folder(folder)
    tune = (folder / TUNE_FILE).exists()  # a tune's folder has no manifest of its own
    manifest = read_manifest(folder) if command is None or not tune else {}
    if command is not None:
        right = finished_by(folder, manifest)
        if not right.startswith(f"stbench {command} "):
            raise StbenchError(
                f"--resume {folder}: not a `stbench {command}` study; finish it with: {right}"
            )
    if workload is not None and manifest["workload"] != workload:
        raise StbenchError(
            f"--resume {folder} holds a {manifest['workload']} study, not {workload}"
        )
    workload = manifest["workload"]
    # a corrupt runs.csv stops us here
    done = tuple(read_runs(folder)) if (folder / "runs.csv").exists() else ()
    try:
        cells = tuple(RunSpec.from_dict(c) for c in manifest["cells"])
    except (TypeError, ValueError) as exc:
        raise StbenchError(f"{folder}/manifest.json is corrupt: bad cell ({exc})") from None
    launch = Launch.from_dict(manifest["launcher"])
    return Plan(registry.get(workload), cells, folder, manifest, {}, done, launch)


def plan_round(plan: Plan, env: EnvInfo, only: frozenset[str] | None = None) -> Plan:
    """The study with one round more: its first round's cells again as the next repeat
    (plan_rounds). What `stbench run --budget` and tune run while they cannot conclude.
    plan: a resumed plan (plan_resume), whose manifest holds what the study wrote. `only`: the
    first round's run ids to repeat (None: every one)."""
    n = 1 + max(c.repeat for c in plan.cells)
    firsts = [c.run_id for c in plan.cells if c.repeat == 0 and (only is None or c.run_id in only)]
    return plan_rounds(plan, env, firsts, [n])


def plan_rounds(plan: Plan, env: EnvInfo, firsts: Sequence[str], repeats: Sequence[int]) -> Plan:
    """The study with rounds `repeats` of the configurations `firsts` (first-round run ids)
    added, each round's cell with that repeat and the seed expand() gives it (a question's
    matrix gives every round the study's seed: its process builds a configuration once and
    measures every round it runs), in the manifest's cells and matrix (the caller writes the
    manifest before the rounds run); a cell already planned is not added again."""
    matrix = plan.manifest["matrix"]
    first = {c.run_id: c for c in plan.cells if c.repeat == 0}
    have = {c.run_id for c in plan.cells}
    new = []
    for run_id in firsts:
        for r in repeats:
            seed = matrix["seed"] + r if matrix.get("seed_per_repeat", True) else matrix["seed"]
            c = identify(replace(first[run_id], repeat=r, seed=seed, run_id=""))
            if c.run_id not in have:
                new.append(c)
                have.add(c.run_id)
    skips = {c.run_id: r for c in new if (r := cell_skip(c, env, plan.workload, plan.launch.kind))}
    top = max([c.repeat for c in plan.cells] + [c.repeat for c in new])
    manifest = {
        **plan.manifest,
        "matrix": {**matrix, "repeats": top + 1},
        "cells": [*plan.manifest["cells"], *(asdict(c) for c in new)],
    }
    return replace(
        plan, cells=plan.cells + tuple(new), manifest=manifest, skips={**plan.skips, **skips}
    )
