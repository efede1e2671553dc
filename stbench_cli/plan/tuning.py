"""`stbench tune`'s plan: what a tune asked for, and each step as a normal study.

A step tries one lever's values with every other lever at its best so far: one `--set` axis (or
the batch sizes), the reference value first, `repeats` rounds. Every cell trains for `cell_s`
seconds (`time_budget`), evaluates every quarter of it on at most `eval_samples` validation
samples (the same samples whatever the batch: `max_eval_samples`), so throughput, time to target
and quality come from one protocol. The last step, `confirm`, runs torch's defaults and the best
configuration side by side, round by round: the gain and its interval come from there. Pure.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ..comparison import MARGIN
from ..errors import StbenchError
from ..store.files import TUNE_FILE  # noqa: F401  (the tune's folder: runner.tune, cli.tuning)
from ..store.manifest import LEVER_KIND
from . import registry
from .levers import BATCH, NAMES
from .pairs import FIRST_ROUNDS, PROCESSES, STARTUP_S, SWITCH_S, auto_window, budget_floor
from .planner import Plan, Request, check_data, check_new, plan_new
from .spec import LIVE_LEVERS, WINDOWED_LEVERS, expand, parse_set

CONFIRM = "confirm"


@dataclass(frozen=True)
class TuneSpec:
    """What `stbench tune` was asked (stored in tune.json; --resume reads it back)."""

    workload: str
    preset: str | None = None
    sets: tuple[str, ...] = ()  # the user's --set: fixed in every cell; a lever named is not tuned
    batch_size: int | None = None  # the reference batch (None: the preset's)
    repeats: int = 3  # rounds per step: a paired interval needs at least two
    cell_s: float = 8.0  # seconds of training per cell
    budget_s: float = 600.0  # wall seconds for the whole search, the confirming step included
    eval_samples: int = 1024  # validation samples per evaluation
    seed: int = 0
    smoke: bool = False

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TuneSpec:
        return cls(**{**d, "sets": tuple(d.get("sets", ()))})

    def check(self) -> TuneSpec:
        if self.repeats < 2:
            raise StbenchError(
                f"--rounds {self.repeats}: a step's paired interval needs at least 2 rounds"
            )
        for name, value in (("--window", self.cell_s), ("--budget", self.budget_s)):
            if not value > 0:
                raise StbenchError(f"{name} {value:g} must be a positive number of seconds")
        least = least_budget_s(self)
        if self.budget_s < least:  # every step would go unsearched: said before anything runs
            raise StbenchError(
                f"--budget {self.budget_s:g}: too small to search any lever: the cheapest step "
                f"(two values in paired windows, two rounds) and the confirming step kept in "
                f"reserve need about {least:.0f} s; give at least --budget {math.ceil(least)}"
            )
        # its --set values and batch, as every step's cells take them, and their data, before
        # the machine is known (planner.check_new, check_data): once, for every step (a lever
        # never changes what a cell reads), so no step's plan opens a remote store again
        w, matrix = check_new(
            request(self, {**self.fixed, BATCH: 1 if self.batch_size is None else self.batch_size})
        )
        check_data(w, [c.params for c in expand(matrix)])
        return self

    def command(self) -> str:
        """The `stbench tune` command that asks this again, options at their defaults left out
        (as a study's command leaves out its --out): what `compare` heads the tune with."""
        words = ["stbench", "tune", self.workload]
        words += ["--preset", self.preset] if self.preset else []
        for fixed in self.sets:
            words += ["--set", fixed]
        words += ["--smoke"] if self.smoke else []
        words += ["--batch-size", str(self.batch_size)] if self.batch_size is not None else []
        default = TuneSpec(self.workload)
        for option, name in (
            ("--budget", "budget_s"),
            ("--rounds", "repeats"),
            ("--window", "cell_s"),
            ("--eval-samples", "eval_samples"),
            ("--seed", "seed"),
        ):
            if getattr(self, name) != getattr(default, name):
                words += [option, f"{getattr(self, name):g}"]
        return shlex.join(words)

    @property
    def fixed(self) -> dict[str, str]:
        """The user's --set values, one each (an axis makes no sense in a tune)."""
        out = {}
        for key, values in parse_set(list(self.sets)):
            if len(values) != 1:
                raise StbenchError(
                    f"--set {key}={','.join(values)}: a tune fixes one value per "
                    "parameter; it searches the levers itself"
                )
            out[key] = values[0]
        return out


def protocol(spec: TuneSpec) -> list[str]:
    """The --set values every tune cell measures under."""
    return [
        f"time_budget={spec.cell_s:g}",
        f"eval_every_s={spec.cell_s / 4:g}",
        f"max_eval_samples={spec.eval_samples}",
    ]


def config_sets(config: dict[str, object], fixed: dict | None = None) -> list[str]:
    """A configuration's levers as --set values (the batch is an engine option), but for those
    the user's --set fixes (given as the user gave them)."""
    return [f"{k}={v}" for k, v in config.items() if k != BATCH and k not in (fixed or {})]


def request(
    spec: TuneSpec, config: dict[str, object], lever: str | None = None, values: tuple = ()
) -> Request:
    """The study of one step: `config` with `lever` taking `values` (or one configuration)."""
    sets = [
        *spec.sets,
        *protocol(spec),
        *(s for s in config_sets(config, spec.fixed) if s.partition("=")[0] != lever),
    ]
    batches = (int(config[BATCH]),)
    if lever == BATCH:
        batches = tuple(int(v) for v in values)
    elif lever:
        sets.append(f"{lever}={','.join(map(str, values))}")
    return Request(
        spec.workload,
        sets=tuple(sets),
        batch_sizes=batches,
        epochs=(1,),
        repeat=spec.repeats,
        preset=spec.preset,
        smoke=spec.smoke,
        seed=spec.seed,
    )


def step_folder(root: Path, index: int, name: str) -> Path:
    return root / f"{index:02d}-{name}"


def plan_step(
    spec: TuneSpec,
    env,
    folder: Path,
    config: dict,
    lever: str | None,
    values: tuple,
    command: tuple[str, ...],
) -> Plan:
    """A lever's step as a normal study written into `folder`."""
    planned = plan_new(request(spec, config, lever, values), env, command, data_checked=True)
    return replace(planned, folder=folder)


def plan_confirm(
    spec: TuneSpec,
    env,
    folder: Path,
    configs: list[dict],
    command: tuple[str, ...],
    window_s: float | None = None,
) -> Plan:
    """Torch's defaults and the best configuration, round by round: each configuration is a
    one-cell matrix, and the cells of the two are interleaved by repeat so that a round's two
    cells see the same machine. The manifest keeps both matrices (`configs`). With `window_s`,
    the first round only, as windows (`windowed`: the engine adds the rounds)."""
    if window_s is not None:
        spec = replace(spec, repeats=1)
    plans = [plan_new(request(spec, c), env, command, data_checked=True) for c in configs]
    cells = tuple(c for r in range(spec.repeats) for p in plans for c in p.cells if c.repeat == r)
    skips = {k: v for p in plans for k, v in p.skips.items()}
    manifest = {
        **plans[0].manifest,
        "cells": [asdict(c) for c in cells],
        "configs": [p.manifest["matrix"] for p in plans],
    }
    plan = replace(plans[0], cells=cells, skips=skips, manifest=manifest, folder=folder)
    if window_s is None:
        return plan
    live = {k: configs[0][k] for k in LIVE_LEVERS}
    return as_windows(spec, plan, int(configs[0][BATCH]), live, live, window_s)


def windowed(configs: Sequence[Mapping[str, object]]) -> bool:
    """Whether configurations can be told apart in windows inside warm processes: they differ
    only in levers one running process can hold side by side (plan.spec.WINDOWED_LEVERS)."""
    return all(
        c[k] == configs[0][k] for c in configs for k in configs[0] if k not in WINDOWED_LEVERS
    )


def step_share_s(left_s: float, last: bool, first_rounds_s: float) -> float:
    """The seconds a windowed step may spend: at most half of what is left of the budget (less
    the confirming step's reserve) where steps are still to search after it, never less than
    its first rounds (`first_rounds_s`) where what is left pays for them; the `last` step, all
    of it.
    A step that ends sooner leaves its rest to the steps after it. An even share starved the
    levers that matter (cnn-strain's bf16 step, given 25 s, stopped a round short of its
    conclusion); no limit let one value near the margin's edge take 267 of a 300 s tune's
    seconds (stnn's threads=1, 0.95x)."""
    if last:
        return left_s
    return max(left_s / 2, min(first_rounds_s, left_s))


def first_rounds_s(configs: int, window_s: float) -> float:
    """What a windowed step's first rounds cost, as the engine runs them: each of its processes
    started, each configuration built there (a new loader or a compilation: a window's worth
    untimed), and FIRST_ROUNDS windows of each configuration."""
    per_window = window_s + SWITCH_S
    return PROCESSES * (STARTUP_S + configs * window_s) + FIRST_ROUNDS * configs * per_window


def least_budget_s(spec: TuneSpec) -> float:
    """The least budget that lets the search run a step (runner.tune): the cheapest step there
    is, a lever's two values in paired windows measured twice (pairs.budget_floor), and what
    the search keeps for the confirming step before it runs one, that step's first rounds."""
    window_s = step_window_s(spec, 2)
    return budget_floor(1, 2, window_s, STARTUP_S) + first_rounds_s(2, window_s)


def step_window_s(spec: TuneSpec, values: int) -> float:
    """A windowed step's floor in seconds: the questions' rule (pairs.auto_window) over the
    share of the budget one step of the search has."""
    return auto_window(spec.budget_s / (len(NAMES) + 1), 1, values)


def plan_window_step(
    spec: TuneSpec,
    env,
    folder: Path,
    config: dict,
    lever: str,
    values: tuple,
    command: tuple[str, ...],
    window_s: float,
) -> Plan:
    """A lever one running process can hold side by side (threads, precision, workers,
    compile), as the questions' engine measures it: the first round of each value, which the
    engine repeats in windows until each value concludes against the reference or the step's
    time is spent."""
    one = replace(spec, repeats=1)
    planned = plan_new(request(one, config, lever, values), env, command, data_checked=True)
    plan = replace(planned, folder=folder)
    live = {k: config[k] for k in LIVE_LEVERS}
    return as_windows(spec, plan, int(config[BATCH]), live, {lever: values[0]}, window_s)


def as_windows(
    spec: TuneSpec,
    plan: Plan,
    batch: int,
    defaults: Mapping[str, object],
    reference: Mapping[str, object],
    window_s: float,
) -> Plan:
    """The plan as a question of the engine's (kind "lever"): one size (the batch), every
    configuration against the one holding `reference`; every round keeps the study's seed (a
    process builds each configuration once and measures it round after round)."""
    axis = registry.get(spec.workload).size  # its batch's unit, where its size is the batch
    record = {
        "kind": LEVER_KIND,
        "size": {
            "param": BATCH,
            "unit": axis.unit if axis is not None and axis.param == BATCH else "samples a batch",
            "values": [str(batch)],
            "counts": [batch],
        },
        "defaults": dict(defaults),
        "reference": dict(reference),
        "window_s": window_s,
        "budget_s": spec.budget_s,
        "rounds": FIRST_ROUNDS,
        "margin": MARGIN,
    }
    matrix = {**plan.manifest["matrix"], "seed_per_repeat": False}
    return replace(plan, manifest={**plan.manifest, "matrix": matrix, "question": record})


def reproduce(spec: TuneSpec, config: dict[str, object]) -> str:
    """The `stbench run` options that run a configuration again as any later study's cell."""
    words = ["stbench", "run", spec.workload]
    if spec.preset:
        words += ["--preset", spec.preset]
    words += ["--device", "cpu", "--batch-size", str(config[BATCH])]
    for s in [*spec.sets, *config_sets(config, spec.fixed)]:
        words += ["--set", s]
    return shlex.join(words)


def searched(spec: TuneSpec) -> tuple[str, ...]:
    """The levers this tune searches: every one the user's --set left open."""
    fixed = spec.fixed
    return tuple(n for n in NAMES if n not in fixed)
