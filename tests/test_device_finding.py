"""The device finding on hand-made rows: every sentence against the table beside it (each
number in a sentence computed here from the rows, each amount read in the table), the CPU tuned
or not, energy and money at the prices given, the flags, the crossover, the declines, and
comparisons paired by round."""

import json
import math
import statistics

from scipy import stats as sps

from stbench.plan.levers import BATCH, NAMES
from stbench.report.cells import Cell, contrast, differs
from stbench.report.labels import format_number
from stbench.report.model import CPU_LEVERS, study
from stbench.report.read import Context
from stbench.report.view import finding_of
from stbench.stats import rounds_needed, significant
from stbench.store.rows import run_of

XEON, H100 = "Xeon 8480+ (2 cores)", "H100 80GB HBM3"
PRICES = {"cpu": 0.68, "cuda": 2.99}  # USD per device-hour
LEVERS = {  # TrainerParams' defaults, as every row since schema 3 writes them out
    "threads": 0,
    "interop_threads": 0,
    "bind": "none",
    "precision": "default",
    "compile": "none",
    "allocator": "keep",
    "workers": 0,
}
AUTO = "auto: 2 physical cores, none busy (other processes used 0.02 cores over 0.5 s before)"


def row(device, repeat, sps, batch=64, used=2, why=AUTO, epochs=1, wall=10.0, **params):
    """A run's row: `used` threads (the row's `threads`: what auto or a given count came to),
    the parameters every row carries (the CPU's levers at their defaults unless given), and
    any energy or contention column named."""
    extra = {k: params.pop(k) for k in list(params) if k.endswith(("_j", "_method", "_short"))}
    extra |= {k: params.pop(k) for k in ("contended", "contention") if k in params}
    knobs = {"lr": 0.1, **LEVERS, **params}
    return {
        "schema": "3",
        "run_id": f"{device}{batch}{epochs}{json.dumps(knobs)}{repeat}",
        "workload": "w",
        "device": device,
        "device_name": "NVIDIA H100 80GB HBM3" if device == "cuda" else "cpu",
        "cpu_model": "Intel(R) Xeon(R) Platinum 8480+",
        "cores": 2,
        "strategy": "single",
        "world_size": 1,
        "nodes": 1,
        "nproc_per_node": 1,
        "batch_size": batch,
        "global_batch_size": batch,
        "epochs": epochs,
        "repeat": repeat,
        "params": json.dumps(knobs),
        "status": "ok",
        "host": "a",
        "wall_s": wall,
        "train_s": wall,
        "samples_per_s": sps,
        "sync_s": 0.0,
        "peak_rss_mb": 500.0,
        "threads": used,
        "threads_why": why,
        **extra,
    }


def find(rows, prices=None):
    runs = [run_of(r) for r in rows]
    f = finding_of(study(runs, context=Context(prices=prices or {})))
    lines = f.table.to_dict("records")
    return f, {line.get("compared as"): line for line in lines}


def median(amount: str) -> str:
    """A table's 'median ± half-width' as a sentence states it: the median."""
    return amount.split(" ± ")[0]


def paired(base, other):
    """(ratio, low, high) of `other` over `base`, round by round, computed here."""
    logs = [math.log(o / b) for b, o in zip(base, other)]
    mean = statistics.fmean(logs)
    half = sps.t.ppf(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def versus(base, other, table_base, table_other, what):
    r, lo, hi = paired(base, other)
    return (
        f"{r:.2f}x faster than {what} (paired over {len(base)} rounds, 95% CI {lo:.2f}x to "
        f"{hi:.2f}x; {table_other} vs {table_base} samples/s)"
    )


# samples/s of each round: the rounds drift together (paired), each cell a little on its own
DEFAULT_CPU, TUNED_CPU, GPU = (100.0, 90.0, 110.0), (300.0, 275.0, 320.0), (2400.0, 2250.0, 2600.0)


def tuned_study():
    """A default CPU, a tuned one (bf16, 1 thread, its own batch) and a GPU, with energy."""
    rapl = {"cpu_energy_method": "rapl (1 package)"}
    rows = [row("cpu", r, v, cpu_energy_j=900.0, **rapl) for r, v in enumerate(DEFAULT_CPU)]
    tuned = {"threads": 1, "precision": "bf16", "used": 1, "why": "threads=1 given"}
    rows += [
        row("cpu", r, v, batch=32, cpu_energy_j=400.0, **tuned, **rapl)
        for r, v in enumerate(TUNED_CPU)
    ]
    gpu = {"gpu_energy_j": 150.0, "cpu_energy_j": 50.0, "energy_short": True, **rapl}
    return rows + [row("cuda", r, v, **gpu) for r, v in enumerate(GPU)]


def test_two_ratios_energy_and_money_against_the_table():
    f, table = find(tuned_study(), PRICES)
    gpu, tuned = table[f"fastest {H100}"], table[f"the tuned CPU vs {H100}"]
    default = table[f"the CPU at its defaults vs {H100}"]
    assert f.kind == "device"
    assert [default["device"], tuned["device"], gpu["device"]] == [XEON, XEON, H100]
    assert [tuned["batch_size"], tuned["precision"], tuned["threads"]] == ["32", "bf16", "1"]
    settings = "batch_size=32, precision=bf16, threads=1"
    money = (2.99 / statistics.median(GPU)) / (0.68 / statistics.median(TUNED_CPU))
    assert f.text == (
        f"{H100} against {XEON}: "
        + versus(
            TUNED_CPU, GPU, tuned["samples/s"], gpu["samples/s"], f"the tuned CPU ({settings})"
        )
        + " and "
        + versus(
            DEFAULT_CPU, GPU, default["samples/s"], gpu["samples/s"], "the CPU at its defaults"
        )
        + f"; using {200 / 400:.2f}x the energy ({median(gpu['energy J'])} vs "
        f"{median(tuned['energy J'])} J a run) and {money:.2f}x the money per million samples "
        f"({median(gpu['USD per million samples'])} vs {median(tuned['USD per million samples'])} "
        "USD) at the prices given."
    )
    assert gpu["energy J"] == "200.0 ± 0" and tuned["energy J"] == "400.0 ± 0"
    usd = 2.99 / 3600 * 1e6 / statistics.median(GPU)
    assert gpu["USD per million samples"].startswith(format_number(usd))
    assert f.flags[-3:] == (
        f"{XEON}, {settings}: 1 thread on 2 cores (threads=1 given), not chosen for the "
        "machine's load: the CPU may be measured below its best",
        f"{XEON}, {settings}: batch_size=32 against 64 on {H100}, the cell it is compared with: "
        "not the same work",
        "energy: 3 of 9 runs compared were metered under 60 s (energy_short), too short for the "
        "meters (NVML's counter updates every 20-100 ms; MLPerf asks for 60 samples at 1 Hz)",
    )


def test_one_cpu_configuration_says_it_was_not_tuned_and_why_its_energy_is_missing():
    none = "none: no /sys/class/powercap (no RAPL powercap exposed here; a VM usually has none)"
    rows = [row("cpu", r, v, cpu_energy_method=none) for r, v in enumerate(DEFAULT_CPU)]
    rows += [
        row("cuda", r, v, gpu_energy_j=150.0, cpu_energy_method=none) for r, v in enumerate(GPU)
    ]
    f, table = find(rows)
    gpu, cpu = table[f"fastest {H100}"], table[f"the CPU vs {H100}"]
    r, lo, hi = paired(DEFAULT_CPU, GPU)
    assert f.text == (
        f"{H100} against {XEON}: {r:.2f}x faster (paired over 3 rounds, 95% CI {lo:.2f}x to "
        f"{hi:.2f}x; {gpu['samples/s']} vs {cpu['samples/s']} samples/s); the CPU's energy was "
        f"not measured ({none}). The CPU was not tuned (one configuration ran): `stbench tune w` "
        "finds its best configuration to run the study with."
    )
    assert not any("thread" in flag or "batch" in flag for flag in f.flags)  # auto, one batch


def test_the_crossover_names_the_size_from_which_the_gpu_wins():
    sizes = {
        "30x84": (400.0, 100.0),
        "60x168": (200.0, 210.0),
        "120x336": (50.0, 400.0),
        "240x672": (12.0, 300.0),
    }
    steady, noisy = (0.99, 1.0, 1.01), (0.9, 1.1, 1.0)  # at 60x168 the GPU varies by round
    rows = [
        row(device, r, v * f, grid=grid)
        for grid, pair in sizes.items()
        for device, v in zip(("cpu", "cuda"), pair)
        for r, f in enumerate(noisy if (grid, device) == ("60x168", "cuda") else steady)
    ]
    f, _ = find(rows)
    shown = {(x["device"], x["grid"]): x["samples/s"] for x in f.table.to_dict("records")}
    cpu, gpu = ([v * x for x in steady] for v in sizes["120x336"])
    r, lo, hi = paired(cpu, gpu)
    before = paired([200 * x for x in steady], [210 * x for x in noisy])[0]
    assert (
        f" {H100} starts to win over {XEON} at grid=120x336: {r:.2f}x faster (paired over 3 "
        f"rounds, 95% CI {lo:.2f}x to {hi:.2f}x; {shown[(H100, '120x336')]} vs "
        f"{shown[(XEON, '120x336')]} samples/s), and at every larger grid up to 240x672; at "
        f"grid=60x168: no significant difference ({before:.2f}x faster, paired over 3 rounds, "
    ) in f.text


def test_a_gpu_that_never_wins_says_so():
    rows = [
        row(device, r, v, grid=grid)
        for grid in ("30x84", "60x168")
        for device, v in (("cpu", 200.0), ("cuda", 100.0))
        for r in range(2)
    ]
    assert f" {H100} never wins over {XEON} significantly for grid from 30x84 to 60x168" in (
        find(rows)[0].text
    )


def test_a_contended_study_declines_and_keeps_its_table():
    why = "contended: other processes used 1.80 of 2 cores on average while the cell ran"
    rows = [
        row("cpu", r, v, contended=r < 2, contention=why if r < 2 else None)
        for r, v in enumerate(DEFAULT_CPU)
    ]
    rows += [row("cuda", r, v) for r, v in enumerate(GPU)]
    f, _ = find(rows)
    assert f.text == (
        f"Cannot conclude: 2 of 6 runs ran contended ({XEON}: {why}). To conclude: run it alone "
        "on the machine; or with fewer threads (--set threads=1)."
    )
    assert f.kind == "device" and len(f.table) == 2
    assert any(flag.startswith(f"{XEON}: contended") for flag in f.flags)


def test_a_decline_never_advises_what_the_cell_already_did():
    """A finding advised --set threads=1 for a cell that ran one thread."""
    why = "contended: other processes used 1.80 of 2 cores on average while the cell ran"
    rows = [
        row("cpu", r, v, used=1, threads=1, contended=r < 2, contention=why if r < 2 else None)
        for r, v in enumerate(DEFAULT_CPU)
    ]
    rows += [row("cuda", r, v) for r, v in enumerate(GPU)]
    text = find(rows)[0].text
    assert (
        text.endswith("To conclude: run it alone on the machine.") and "--set threads" not in text
    )


def test_a_negative_epochs_fit_declines():
    points = [(e, w + d) for e, w in ((1, 60.0), (2, 50.0), (3, 40.0)) for d in (-0.5, 0.0, 0.5)]
    rows = [row("cpu", i % 3, 100.0, epochs=e, wall=w) for i, (e, w) in enumerate(points)]
    f, _ = find(rows)
    fit = sps.linregress(*zip(*points))  # the line the finding fitted, fitted here
    half = sps.t.ppf(0.975, len(points) - 2) * fit.stderr
    lo, hi = format_number(fit.slope - half), format_number(fit.slope + half)
    assert f.kind == "epochs"
    assert f.text == (
        f"Cannot conclude: 1 per-epoch cost fitted negative (the study: "
        f"{format_number(fit.slope)} s per epoch, 95% CI {lo} to {hi}). To conclude: run it "
        "alone on the machine; more rounds (--rounds N)."
    )


def test_two_repeats_wider_than_their_mean_decline_with_the_repeats_to_run():
    rows = [
        row("cpu", r, v, precision=p)
        for p, vs in (("default", (100.0, 102.0)), ("bf16", (50.0, 150.0)))
        for r, v in enumerate(vs)
    ]
    f, _ = find(rows)
    assert f.text.startswith(
        "Cannot conclude: 1 cell of two repeats with a 95% interval wider than the mean "
        "(precision=bf16: 100.0 ± 635.3). To conclude: more rounds (--rounds "
    )


def test_paired_rounds_conclude_where_unpaired_intervals_overlap():
    # the machine drifts round by round; b is 5% faster in every round
    a = Cell(values=(90.0, 110.0, 100.0), rounds=(("s", 0), ("s", 1), ("s", 2)))
    b = Cell(values=(94.5, 115.5, 105.0), rounds=a.rounds)
    assert not significant(list(a.values), list(b.values)) and differs(a, b)
    assert contrast(a, b, unit="samples/s").startswith(
        "1.05x faster (paired over 3 rounds, 95% CI 1.05x to 1.05x; "
    )
    # another folder's rounds are not the same machine's: unpaired again
    elsewhere = Cell(values=b.values, rounds=(("t", 0), ("t", 1), ("t", 2)))
    assert not differs(a, elsewhere)
    noisy = Cell(values=(95.0, 120.0, 99.0), rounds=a.rounds)
    needs = rounds_needed(dict(zip(a.rounds, a.values)), dict(zip(a.rounds, noisy.values)), False)
    assert contrast(a, noisy).startswith("no significant difference (1.04x faster, paired over 3")
    assert f"a conclusion needs ≥ {needs} rounds" in contrast(a, noisy) and needs > 3


def test_the_cpu_levers_are_tunes_levers():
    assert set(CPU_LEVERS) | {BATCH} == set(NAMES)
