"""A finding per study kind, on small hand-made rows: the exact sentences, the kind read from
what the study varies, and "no significant difference" wherever the 95% intervals overlap."""

import json

import pandas as pd

from stbench.report.labels import size_number, sort_natural
from stbench.report.view import finding_of, kind_of
from tests.helpers import study_of

SPREAD = (0.99, 1.0, 1.01)  # three tight repeats: intervals apart unless the medians are close


def row(
    repeat=0,
    device="cpu",
    sps=100.0,
    wall=10.0,
    world=1,
    strategy="single",
    batch=64,
    epochs=1,
    status="ok",
    params=None,
    **extra,
):
    params = {"lr": 0.1, **(params or {})}
    nodes = extra.pop("nodes", 1)
    return {
        "schema": "1",
        "run_id": f"{device}{world}{batch}{epochs}{json.dumps(params)}{repeat}",
        "workload": "w",
        "device": device,
        "strategy": strategy,
        "world_size": world,
        "nodes": nodes,
        "nproc_per_node": world // nodes,
        "batch_size": batch,
        "global_batch_size": batch * world,
        "epochs": epochs,
        "repeat": repeat,
        "params": json.dumps(params),
        "status": status,
        "host": "a",
        "wall_s": wall,
        "samples_per_s": sps,
        "train_s": wall,
        "sync_s": 0.0,
        "peak_rss_mb": 500.0,
        **extra,
    }


def repeats(scale=1.0, **kw):
    """Three repeats around the given figures (samples/s and wall time scaled by SPREAD)."""
    sps, wall = kw.pop("sps", 100.0), kw.pop("wall", 10.0)
    return [row(r, sps=sps * f * scale, wall=wall * f, **kw) for r, f in enumerate(SPREAD)]


def find(rows):
    return finding_of(study_of(rows))


def test_device_gpu_against_cpu_with_time_to_target_and_energy():
    rows = repeats(sps=100.0, device="cpu", cpu_energy_j=900.0) + repeats(
        sps=1000.0, device="cuda", gpu_energy_j=300.0
    )
    f = find(rows)
    assert f.kind == "device"
    # paired by round, energy as the GPU's share of the CPU's, the CPU not tuned
    assert f.text == (
        "cuda against cpu: 10.00x faster (paired over 3 rounds, 95% CI 10.00x to 10.00x; "
        "1,000 ± 24.84 vs 100.0 ± 2.48 samples/s); using 0.33x the energy (300.0 vs 900.0 J a "
        "run, its host CPU's not measured). The CPU was not tuned (one configuration ran): "
        "`stbench tune w` finds its best configuration to run the study with."
    )
    assert list(f.table.columns) == ["device", "samples/s", "energy J", "compared as"]


def test_scaling_states_speedup_efficiency_sync_and_the_50_percent_line():
    rows = []
    for world, sps, sync in ((1, 100.0, 0.0), (2, 180.0, 1.0), (4, 190.0, 4.0)):
        rows += [{**r, "sync_s": sync} for r in repeats(sps=sps, world=world, strategy="ddp")]
    f = find(rows)
    assert f.kind == "scaling"
    assert f.text == (
        "At 4 processes: 1.90x the samples/s of 1 process (95% intervals apart: 190.0 ± 4.72 vs "
        "100.0 ± 2.48 samples/s), efficiency 48%, gradient sync 40.0% of training time. "
        "Efficiency first drops below 50% at 4 processes."
    )
    assert {"speedup", "efficiency", "sync"} <= set(f.table.columns)
    assert "ms_per_sync" not in f.table.columns  # the full view's


def test_scaling_within_noise_is_no_significant_difference():
    rows = [row(r, sps=s, world=1, strategy="ddp") for r, s in enumerate((80.0, 120.0, 100.0))]
    rows += [row(r, sps=s, world=2, strategy="ddp") for r, s in enumerate((90.0, 130.0, 110.0))]
    assert find(rows).text.startswith(
        "At 2 processes: 1.10x the samples/s of 1 process (no significant "
        "difference: 110.0 ± 49.68 vs 100.0 ± 49.68 samples/s), efficiency 55%"
    )


def test_batch_sweep_finds_the_knee():
    rows = [
        r
        for b, sps in ((32, 100.0), (64, 180.0), (128, 190.0), (256, 195.0))
        for r in repeats(sps=sps, batch=b)
    ]
    f = find(rows)
    assert f.kind == "batch"
    assert f.text == (
        "Samples/s goes from 100.0 ± 2.48 at batch 32 to 195.0 ± 4.84 at batch 256 (1.95x faster "
        "(paired over 3 rounds, 95% CI 1.95x to 1.95x)). The knee is at batch 64: from there "
        "to batch 256 a doubling gains 4.1% (95% CI 4.1% to 4.1%), under 10%."
    )
    assert f.table["per doubling"].tolist() == ["", "+80.0%", "+5.6%", "+2.6%"]
    assert f.table["batch_size"].tolist() == ["32", "64", "128", "256"]


def _sweep(sps_by_batch, noise=()):
    """Three rounds a batch; noise: each round's factor on the largest batch's samples/s."""
    last = max(sps_by_batch)
    return [
        row(r, sps=sps * (noise[r] if noise and b == last else 1.0), batch=b)
        for b, sps in sps_by_batch.items()
        for r in range(3)
    ]


def test_a_knee_is_where_every_later_doubling_gains_little_and_the_rounds_can_tell_it():
    # a flat step then a rise (noise, or a second climb): the knee is after the rise
    f = find(_sweep({75: 100.0, 150: 130.0, 300: 131.0, 700: 180.0, 1024: 181.0}))
    assert "The knee is at batch 700: from there to batch 1024 a doubling gains 1.0%" in f.text
    # rounds that scatter: where it looks to be, and that they cannot tell it yet
    f = find(_sweep({64: 100.0, 128: 180.0, 256: 190.0}, noise=(0.8, 1.0, 1.3)))
    assert (
        "The knee looks to be at batch 128 (from there to batch 256 a doubling gains 5.6%), but "
        "the rounds cannot tell it from a gain of 10% or more (95% CI " in f.text
    )
    assert f.text.endswith("): more rounds (--rounds) could.")
    # one run a cell: the medians' knee, no interval to judge it by
    f = find([row(0, sps=s, batch=b) for b, s in {32: 100.0, 64: 180.0, 128: 185.0}.items()])
    assert "The knee is at batch 64: from there to batch 128 a doubling gains 2.8% (< 10%)." in (
        f.text
    )


def test_precision_and_compile_against_fp32_eager_with_payback():
    rows = []
    for prec, comp, sps, compile_s in (
        ("fp32", "none", 100.0, None),
        ("bf16", "none", 150.0, None),
        ("fp32", "default", 200.0, 6.4),
    ):
        rows += [
            {**r, "compile_s": compile_s}
            for r in repeats(sps=sps, batch=64, params={"precision": prec, "compile": comp})
        ]
    f = find(rows)
    assert f.kind == "precision"
    # fp32 eager: 0.64 s a step; compiled: 0.32 s; 6.4 s of compilation pays back in 20 steps
    assert f.text == (
        "Against fp32 eager (100.0 ± 2.48 samples/s): precision=bf16, compile=none: 1.50x faster "
        "(paired over 3 rounds, 95% CI 1.50x to 1.50x); precision=fp32, compile=default: 2.00x "
        "faster (paired over 3 rounds, 95% CI 2.00x to 2.00x), compile 6.40 s, pays back after "
        "20 steps."
    )
    assert f.table["vs fp32 eager"].tolist() == ["1.50x faster", "2.00x faster", "baseline"]
    assert f.table["compile s"].tolist() == ["-", "6.40", "-"] and "compiling" in f.title


def test_precision_against_torchs_default_where_no_cell_sets_strict_fp32():
    """`--set precision=default,bf16`: the default (fp32 matmul, what every cell runs unless one
    sets another) is the baseline, named as it is."""
    rows = []
    for prec, sps in (("default", 100.0), ("bf16", 150.0)):
        rows += repeats(sps=sps, batch=64, params={"precision": prec})
    f = find(rows)
    assert f.kind == "precision"
    assert f.text.startswith("Against torch's default precision, eager (100.0 ± 2.48 samples/s)")
    assert f.table["vs torch's default precision, eager"].tolist() == ["1.50x faster", "baseline"]
    # nothing compiled: no column of dashes for it, no words of it over the table
    assert "compile s" not in f.table.columns and "compiling" not in f.title


def test_epochs_fit_fixed_and_per_epoch_cost():
    rows = [
        row(r, epochs=e, wall=2.0 + 3.0 * e + d)
        for e in (1, 2, 3)
        for r, d in enumerate((-0.1, 0.0, 0.1))
    ]
    f = find(rows)
    assert f.kind == "epochs"
    assert f.text == (
        "Wall time = 2.00 s fixed + 3.00 s per epoch (least squares over 9 runs; "
        "95% CI 2.91 to 3.09 s per epoch; 95% CI 1.81 to 2.19 s fixed)."
    )


def test_problem_size_exponents_and_prediction():
    rows = []
    for grid, mem, sps in (
        ("30x84", 100.0, 1000.0),
        ("60x168", 400.0, 250.0),
        ("120x336", 1600.0, 62.5),
    ):
        rows += [
            {**r, "peak_rss_mb": mem, "predicted_mb": mem / 2}
            for r in repeats(sps=sps, params={"grid": grid})
        ]
    f = find(rows)
    assert f.kind == "size"
    assert f.text.startswith(
        "From grid=30x84 to 120x336 (16.0x the size), peak RSS grows as size^1.00 (95% CI "
        "1.00 to 1.00) and step time as size^1.00 (95% CI "
    )
    assert f.text.endswith("; measured 2.00x the predicted memory.")
    assert f.table["grid"].tolist() == ["30x84", "60x168", "120x336"]  # as numbers, not as text


def test_time_to_target_names_the_first_only_beyond_doubt():
    def runs(batch, times):
        return [
            row(
                r,
                batch=batch,
                params={"stop_at_target": True},
                target=0.5,
                target_reached=1,
                val_metric="mse",
                time_to_target_s=t,
                time_to_target_train_s=t,
                epochs_to_target=1.0,
                epochs_done=1.0,
            )
            for r, t in enumerate(times)
        ]

    f = find(runs(64, (10.0, 10.1, 9.9)) + runs(128, (20.0, 20.2, 19.8)))
    assert f.kind == "target"
    assert f.text == (
        "First to the target (mse ≤ 0.5): batch_size=64 (MLPerf score 10.00 s, 3/3 reached), "
        "ahead of every other cell beyond doubt; slowest: batch_size=128 at 20.00 s, 2.00x slower."
    )
    close = find(runs(64, (10.0, 12.0, 8.0)) + runs(128, (11.0, 13.0, 9.0)))
    assert close.text == (
        "Time to the target (mse ≤ 0.5): no significant difference between the lowest score, "
        "batch_size=64 (MLPerf score 10.00 s, 3/3 reached), and 1 other cell: batch_size=128."
    )
    one = find(runs(64, (10.0, 10.1, 9.9)))
    assert (
        one.text
        == "Reached the target (mse ≤ 0.5) in 3 of 3 runs: MLPerf score 10.00 s (mean of 1); "
        "median 10.00 ± 0.248 s."
    )


def test_memory_against_throughput_for_a_strategy_or_checkpointing():
    parts = {"param_mb": 10.0, "grad_mb": 10.0, "optim_state_mb": 20.0}
    rows = [
        {**r, **parts, "activation_peak_mb": act}
        for ck, act, sps in (("none", 60.0, 100.0), ("full", 10.0, 60.0))
        for r in repeats(sps=sps, params={"checkpoint": ck})
    ]
    f = find(rows)
    assert f.kind == "tradeoff"
    assert f.text == (
        "checkpoint=full holds the least memory per rank, 50.00 ± 0 MiB model state + activations: "
        "2.00x less (paired over 3 rounds, 95% CI 2.00x to 2.00x) than the fastest cell, "
        "checkpoint=none (100.0 ± 0 MiB); in samples/s it is 1.67x slower (paired over 3 rounds, "
        "95% CI 1.67x to 1.67x) (60.00 ± 1.49 vs 100.0 ± 2.48 samples/s)."
    )
    assert list(f.table.columns) == ["checkpoint", "model state + activations MiB", "samples/s"]


def test_a_setting_that_changes_neither_memory_nor_speed_beyond_noise():
    # b's repeats in another order than a's: paired by round they do not differ either
    rows = [
        row(r, sps=s, params={"loader": ld})
        for ld, spread in (("a", (90.0, 110.0, 100.0)), ("b", (115.0, 95.0, 105.0)))
        for r, s in enumerate(spread)
    ]
    assert find(rows).text == (
        "No significant difference in samples/s between the fastest, loader=b (105.0 ± "
        "24.84 samples/s), and the slowest, loader=a (100.0 ± 24.84 samples/s); peak RSS "
        "within 10% across cells."
    )


def test_a_single_cell_and_its_flags():
    f = finding_of(study_of([row(0, sps=1234.5, wall=12.0, cores=2, load_max=3.5)]))
    assert (
        f.kind == "cell"
        and f.text == "One cell, 1 run: 1,234 samples/s, 12.00 s wall, 500.0 MiB peak RSS."
    )
    assert f.flags == ("busy: the load average reached 3.5 on 2 cores while it ran",)


def test_kinds_follow_what_varies_first_match_wins():
    ddp_batch = repeats(world=1, strategy="ddp", batch=32) + repeats(
        world=2, strategy="ddp", batch=64
    )
    assert kind_of(study_of(ddp_batch)).name == "scaling"
    assert kind_of(study_of(repeats(batch=32) + repeats(batch=64, epochs=2))).name == "batch"
    budget = [
        {**r, "params": json.dumps({"time_budget": 5})}
        for r in repeats(batch=32) + repeats(batch=64)
    ]
    assert kind_of(study_of(budget)).name == "target"


def test_labels_sort_as_numbers():
    assert [size_number(x) for x in ("30x84", "2k7", "11k", "400000")] == [
        2520.0,
        2700.0,
        11000.0,
        400000.0,
    ]
    table = pd.DataFrame({"grid": ["180x360", "30x84", "60x168"], "v": [1, 2, 3]})
    assert sort_natural(table, ["grid"])["grid"].tolist() == ["30x84", "60x168", "180x360"]
