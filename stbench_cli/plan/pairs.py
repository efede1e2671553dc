"""The engine of paired comparisons, its pure half: where each pair stands, what a round and a
process cost at a size, and which rounds run next (runner/windows.py runs them).

A question is configurations, the pairs of them it judges, one measure (samples/s) and a budget.
Its rounds are windows inside warm processes (child/windows.py): every configuration once per
round, paired round by round. A pair ends in one of three ways:

- it **differs**: its paired 95% interval excludes 1;
- it **looks equal**: its interval lies within 1 -/+ MARGIN (never because an estimate of the
  rounds it would need came out large: a noisy pair is open, and said to be);
- it stays **open**, and the engine says how many rounds more would conclude it, what they
  cost at that size, and the time left.

The next rounds go only to sizes with an open pair that can close within what is left of the
budget, and only to the configurations those pairs hold; a size whose pairs have concluded gets
no more.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import median

from ..comparison import CAP, MARGIN, SPS, looks_equal
from ..comparison import judge as paired

FIRST_ROUNDS = 6  # paired rounds of every configuration at each size, before only open pairs
PROCESSES = 2  # a size's first rounds are spread over this many processes (pyperf's workers)
MIN_STEPS = 3  # a window's floor in steps, beside its floor in seconds
MORE_AT_ONCE = 8  # the most rounds one later process runs
STARTUP_S = 5.0  # a warm process's start to its first window, before one is measured
SWITCH_S = 0.03  # a window's own cost besides its steps: the switch, the rows, the clock
# A switch of configuration is re-warmed by one untimed step only where a step is shorter than
# this. The first step after a switch ran at most 0.5 ms over a steady one (medians; 3 ms at
# the 90th percentile) at cnn-strain's, stnn's and lstm-era5's default sizes, and as steady as
# any (0.99-1.05x at the median, well within the steps' own spread) at dcrnn-pems' default and
# lstm-era5's 4,096 sequences (benchmarks/rewarm.py, --scale 32 there): a cost of its own, not
# one in proportion to the step. Past this step a window of MIN_STEPS steps lasts 0.3 s or
# more, which such a cost moves by 1% at most (and the order rotates, so no configuration
# always pays it), while a re-warm step would add a third to the window's cost.
REWARM_UNDER_S = 0.1
# A compilation (torch.compile, inductor) before one is measured: a configuration that compiles
# pays it in every process that measures it, at every size (its shapes change). On the 2-vCPU
# VM (`stbench run W --set compile=none,default --budget 150`, the first process's first, then
# a later process's, inductor's cache on disk warm): cnn-strain 38.5 and 12.6 s, dcrnn-pems 56 s,
# stnn 11.8 and 6.2 s, lstm-era5 3.8 and 4.0 s.
COMPILE_S = 40.0


@dataclass(frozen=True)
class Comparison:
    """One pair of configurations at one size, and where it stands."""

    size: str
    base: str  # run id of the first round's cell held against
    other: str  # the first round's cell held against it
    ratio: float | None
    low: float | None
    high: float | None
    rounds: int  # common rounds so far
    to_differ: int = 0  # rounds at which the interval would exclude 1 (CAP: never)
    to_equal: int = CAP  # rounds at which it would lie within the margin (CAP: never)

    @property
    def differs(self) -> bool:
        return self.rounds >= 2 and self.low is not None and (self.low > 1 or self.high < 1)

    @property
    def equal(self) -> bool:
        return self.rounds >= 2 and looks_equal(self.low, self.high)

    @property
    def concluded(self) -> bool:
        return self.differs or self.equal

    @property
    def more(self) -> int:
        """Rounds more that could conclude it, were its mean and spread to stay (CAP: none)."""
        if self.concluded:
            return 0
        needed = min(self.to_differ, self.to_equal)
        return CAP if needed >= CAP else max(needed - self.rounds, 1)


def compared(
    size: str, base: str, other: str, base_values: Mapping, other_values: Mapping, measure=SPS
) -> Comparison:
    """Where one pair stands, from each side's values by round: the one rule of the questions'
    engine, tune's steps and `stbench run --budget` (plan/rounds.py)."""
    v = paired(size, measure, base_values, other_values)
    equal = v.to_equal if v.rounds else CAP
    return Comparison(size, base, other, v.ratio, v.low, v.high, v.rounds, v.needs, equal)


@dataclass(frozen=True)
class Window:
    """One window as its row tells it: what the cost model reads."""

    config: str  # the first round's run id of its configuration
    wall_s: float  # the timed window's host seconds
    untimed_s: float  # what ran before it, since the window before (switch, build, re-warm)
    step_s: float  # one step, on the device's clock


@dataclass(frozen=True)
class Cost:
    """What measuring a size costs: a round of its configurations, and a process's start."""

    size: str
    count: float  # the size's count of its unit (the FLOPs of a step grow with it)
    window_s: dict[str, float]  # each configuration's window, its switch included
    step_s: dict[str, float]  # each configuration's step
    startup_s: float  # a process's launch to its first timed window
    measured: bool = True
    # a configuration that compiles -> its build, paid once in each process that measures it
    build_s: Mapping[str, float] = field(default_factory=dict)

    def round_s(self, configs: Sequence[str] | None = None) -> float:
        return sum(v for k, v in self.window_s.items() if configs is None or k in configs)

    def process_s(self, rounds: int, configs: Sequence[str] | None = None) -> float:
        builds = sum(v for k, v in self.build_s.items() if configs is None or k in configs)
        return self.startup_s + builds + rounds * self.round_s(configs)


def cost_of_windows(
    size: str,
    count: float,
    windows: Sequence[Window],
    startup_s: float,
    compiled: Collection[str] = (),
) -> Cost:
    """A size's cost from its windows: each configuration's median window and step. What ran
    untimed before a window counts up to the window's own length: a switch re-warms a step or
    two, and anything longer was a configuration built (a loader, a compilation), paid once a
    process and not again each round (a compiled configuration's first window, 20 s untimed,
    had been counted as each round's cost, and a tune's compile step stopped after one). A
    configuration in `compiled` has its build as well: the most any of its windows ran untimed
    (its first in a process: the compilation), which every process that measures it pays."""
    by: dict[str, list[Window]] = {}
    for w in windows:
        by.setdefault(w.config, []).append(w)
    return Cost(
        size,
        count,
        {k: median(w.wall_s + min(w.untimed_s, w.wall_s) for w in ws) for k, ws in by.items()},
        {k: median(w.step_s for w in ws) for k, ws in by.items()},
        startup_s,
        build_s={k: max(w.untimed_s for w in ws) for k, ws in by.items() if k in compiled},
    )


def rewarm_steps(step_s: float | None) -> int:
    """The untimed steps a switch runs before a window whose step lasts `step_s` (None: not yet
    measured in this process, so re-warmed)."""
    return 1 if step_s is None or step_s < REWARM_UNDER_S else 0


def step_growth(steps: Sequence[tuple[float, float]], ratio: float) -> float:
    """How a step grows with the size's count, as a power: the steepest of these configurations'
    (each its step at two sizes `ratio` apart in count), and never below 1 (the FLOPs of a step
    grow with the count; a step that was launch-bound grows less, so this errs long). A working
    set that leaves the caches grows faster: cnn-strain's default step on the 2-vCPU VM grew as
    the count to the 1.17 from 600 to 4,096 curves, and as 1.13 from 4,096 to 32,768; predicted
    linearly, 32,768's round took 26 s against 14 s predicted, `--budget 72` (the budget the
    answer had named) measured it once, and nothing concluded there."""
    powers = [math.log(b / a) / math.log(ratio) for a, b in steps if a > 0 and b > 0 and ratio > 1]
    return max([1.0, *powers])


def predicted(
    known: Cost, size: str, count: float, window_s: float, configs: dict, growth: float = 1.0
) -> Cost:
    """A larger size's cost, from a measured one: each step grows as the size's count to the
    `growth` (step_growth), a window lasts its floor in seconds or in steps, and a process's
    start adds each configuration's warm-up pass and first step. `configs`: this size's
    configuration -> the known one's. Besides its floor a window runs the step that crosses it
    and, after a switch, its re-warm (`rewarm_steps`): n configurations switch n - 1 times a
    round (each round starts with the one the round before ended with: `rotated`)."""
    grow = (count / known.count) ** growth if known.count > 0 else 1.0
    steps = {k: known.step_s.get(v, max(known.step_s.values())) * grow for k, v in configs.items()}
    switched = (len(steps) - 1) / len(steps) if steps else 0.0
    windows = {
        k: max(window_s, MIN_STEPS * s) + (1 + switched * rewarm_steps(s)) * s + SWITCH_S
        for k, s in steps.items()
    }
    startup = known.startup_s + sum(2 * s for s in steps.values())
    # a compilation's cost hangs on the model's graph, not on the batch: the known size's
    builds = {k: known.build_s[v] for k, v in configs.items() if v in known.build_s}
    return Cost(size, count, windows, steps, startup, measured=False, build_s=builds)


def budget_floor(sizes: int, configs: int, window_s: float, startup_s: float = 1.0) -> float:
    """The least budget that could measure every size twice: each size's first process and two
    rounds of its configurations at the window's floor, steps taken as free. Said before
    anything runs where a budget is below it."""
    return sizes * (startup_s + 2 * configs * (window_s + SWITCH_S))


@dataclass(frozen=True)
class More:
    """A later process: `rounds` rounds of these configurations (first-round run ids) at a size."""

    size: str
    configs: tuple[str, ...]
    rounds: int


@dataclass(frozen=True)
class Decision:
    """The processes to run next (none: stop), and why, in words a person reads."""

    runs: tuple[More, ...]
    why: tuple[str, ...]


def decide(
    found: Sequence[Comparison],
    costs: Mapping[str, Cost],
    left_s: float,
    describe=str,
    budget: str = "the budget",
) -> Decision:
    """The next processes: at each size with an open pair that more rounds could close, the
    rounds the slowest of its open pairs needs (at most MORE_AT_ONCE) of the configurations its
    open pairs hold, while they fit in `left_s`; a size whose pairs all concluded gets none.
    `describe(size)`: the size in words; `budget`: what `left_s` is left of, in words (a tune
    step's share of the tune's)."""
    runs, why = [], []
    for size, pairs in _pairs_at_each_size(found).items():
        open_ = [c for c in pairs if not c.concluded]
        if not open_:
            continue
        have = max(c.rounds for c in pairs)
        hopeful = [c for c in open_ if c.more < CAP]
        if not hopeful:
            why.append(
                f"at {describe(size)} no count of rounds would conclude it at the spread seen "
                f"({have} rounds): neither apart nor within {1 - MARGIN:.2f}-{1 + MARGIN:.2f}x"
            )
            continue
        rounds = min(max(c.more for c in hopeful), MORE_AT_ONCE)
        configs = tuple(dict.fromkeys(x for c in hopeful for x in (c.base, c.other)))
        cost = costs[size].process_s(rounds, configs)
        if cost > left_s:
            need = max(c.more for c in hopeful)
            why.append(
                f"at {describe(size)} ~{need} more round(s) could conclude it (~"
                f"{costs[size].round_s(configs):.1f} s a round and {costs[size].startup_s:.1f} s "
                f"to start: ~{costs[size].process_s(need, configs):.0f} s); "
                f"{max(left_s, 0):.0f} s of {budget} left"
            )
            continue
        runs.append(More(size, configs, rounds))
        left_s -= cost
        why.append(f"at {describe(size)}: {rounds} more round(s) of {len(configs)} configurations")
    return Decision(tuple(runs), tuple(why))


def _pairs_at_each_size(found: Sequence[Comparison]) -> dict[str, list[Comparison]]:
    by_size: dict[str, list[Comparison]] = {}
    for c in found:
        by_size.setdefault(c.size, []).append(c)
    return by_size


def owed_s(
    found: Sequence[Comparison],
    costs: Mapping[str, Cost],
    left_s: float,
    coming: Mapping[str, int] | None = None,
) -> float:
    """What the open pairs more rounds could conclude need, all their rounds less those already
    `coming` at their size (a size's later first rounds, still to run), smallest size first, as
    far as they fit in `left_s`: what a larger size's first rounds must leave them. A larger
    size that took it left two sizes open where one could have concluded (`gpu-vs-cpu lstm-era5
    --budget 60`: 1,024 sequences at 10 rounds, ~12 s from concluding, 4,096 at 3, ~227 s, with
    1 s left). A pair no count of rounds would conclude, or whose rounds do not fit beside those
    before it, is owed nothing: a larger size pays more there."""
    owed = 0.0
    for size, pairs in _pairs_at_each_size(found).items():
        hopeful = [c for c in pairs if not c.concluded and c.more < CAP]
        need = max((c.more for c in hopeful), default=0) - (coming or {}).get(size, 0)
        if need <= 0 or size not in costs:
            continue
        configs = tuple(dict.fromkeys(x for c in hopeful for x in (c.base, c.other)))
        cost = costs[size].process_s(need, configs)
        if owed + cost <= left_s:
            owed += cost
    return owed


def rotated(configs: Sequence[str], round_: int) -> list[str]:
    """A round's order: A B C, then C A B, then B C A, ...: a drift of the machine, a cache the
    window before warmed, hits every configuration alike; and each round starts with the
    configuration the round before ended with, a window with no switch before it (one re-warm
    fewer a round: child/windows.py)."""
    if not configs:
        return []
    k = round_ % len(configs)
    return [*configs[len(configs) - k :], *configs[: len(configs) - k]]


def auto_window(budget_s: float, sizes: int, configs: int) -> float:
    """A window's floor in seconds where none is asked: about a third of the budget spread over
    the first rounds of every configuration at every size, between 0.1 s and 2 s."""
    share = budget_s / 3 / max(sizes * configs * FIRST_ROUNDS, 1)
    return min(max(round(share, 2), 0.1), 2.0)
