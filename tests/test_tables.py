"""Compare's table building on hand-made rows: exact Markdown, no torch."""

import json

import pytest

from stbench.errors import StbenchError
from stbench.report.labels import format_ratio
from stbench.stats import significant
from tests.helpers import compare_text


def row(
    device,
    epochs,
    wall,
    repeat=0,
    status="ok",
    host="a",
    strategy="single",
    world=1,
    sps=100.0,
    sync=0.0,
):
    return {
        "schema": "1",
        "run_id": f"{device}{epochs}{repeat}{world}",
        "workload": "w",
        "device": device,
        "strategy": strategy,
        "world_size": world,
        "nodes": 1,
        "nproc_per_node": world,
        "batch_size": 64,
        "global_batch_size": 64 * world,
        "epochs": epochs,
        "repeat": repeat,
        "params": json.dumps({"lr": 0.1}),
        "status": status,
        "host": host,
        "machine_id": host,
        "wall_s": wall,
        "samples_per_s": sps,
        "data_s": 1.0,
        "h2d_s": 0.0,
        "compute_s": 3.0,
        "sync_s": sync,
        "eval_s": 0.0,
        "train_s": 4.0 + sync,
    }


def test_format_ratio():
    assert format_ratio(1.0) == "same"
    assert format_ratio(2.5) == "2.50x faster"
    assert format_ratio(0.5) == "2.00x slower"


def test_significance_needs_repeats_and_separation():
    assert not significant([1.0], [2.0])
    assert not significant([1.0, 2.0, 3.0], [2.0, 3.0, 4.0])
    assert significant([1.0, 1.1, 0.9], [5.0, 5.1, 4.9])


def test_epochs_by_device_with_baseline():
    rows = [row("cpu", e, w + 0.1 * r, r) for e, w in ((5, 40.0), (10, 80.0)) for r in range(3)]
    rows += [row("cuda", e, w + 0.1 * r, r) for e, w in ((5, 4.0), (10, 80.0)) for r in range(3)]
    text = compare_text(rows, metric="wall_s", rows="epochs", cols="label", baseline="device=cpu")
    finding = (  # one CPU configuration, so the CPU was not tuned
        "Finding: cuda against cpu: 1.00x the samples/s over 2 cells (significant in 0 of 2). "
        "The CPU was not tuned (one configuration ran): `stbench tune w` finds its best "
        "configuration to run the study with."
    )
    assert (
        text
        == f"## w\n\n{finding}\n"
        + """\

### wall time (s) (median ± 95% CI half-width over repeats)

| epochs   | cpu           | cuda          | cuda vs cpu            |
|:---------|:--------------|:--------------|:-----------------------|
| 5        | 40.10 ± 0.248 | 4.10 ± 0.248  | 9.78x faster           |
| 10       | 80.10 ± 0.248 | 80.10 ± 0.248 | same (not significant) |

### where the time went: median share of train + eval time

| device   | epochs   | data   | h2d   | compute   | sync   | eval   | samples_per_s   |
|:---------|:---------|:-------|:------|:----------|:-------|:-------|:----------------|
| cpu      | 5        | 25.0%  | 0.0%  | 75.0%     | 0.0%   | 0.0%   | 100.0           |
| cpu      | 10       | 25.0%  | 0.0%  | 75.0%     | 0.0%   | 0.0%   | 100.0           |
| cuda     | 5        | 25.0%  | 0.0%  | 75.0%     | 0.0%   | 0.0%   | 100.0           |
| cuda     | 10       | 25.0%  | 0.0%  | 75.0%     | 0.0%   | 0.0%   | 100.0           |
"""
    )


def test_statuses_hosts_and_scaling():
    rows = [
        row("cpu", 1, 10.0, host="a"),
        row("cpu", 1, 20.0, host="b"),
        row("cpu", 1, 0.0, repeat=1, host="b", status="oom"),
    ]
    rows += [
        row(
            "cpu",
            1,
            9.0,
            strategy="ddp",
            world=n,
            sps=100.0 * n * 0.8 ** (n > 1),
            sync=n - 1.0,
            host="a",
        )
        for n in (1, 2)
    ]
    text = compare_text(rows, cols="label")
    # the same device on two hosts is told apart; a failed repeat shows in the cell
    assert (
        """\
| strategy   | world_size   | epochs   | cpu@a   | cpu@b          |
|:-----------|:-------------|:---------|:--------|:---------------|
| ddp        | 1            | 1        | 9.00    | -              |
| ddp        | 2            | 1        | 9.00    | -              |
| single     | 1            | 1        | 10.00   | 20.00 (1/2 ok) |"""
        in text
    )
    # one repeat per side: a speedup is printed but never called significant
    # (rows without epoch_s or sync_count, as an older stbench wrote them, show "-" there)
    assert (
        "| device   | nodes   | nproc   | world   | epoch_s   | samples_per_s   "
        "| speedup                 | efficiency   | sync_share   | ms_per_sync   "
        "| syncs_per_epoch   |\n"
        "|:---------|:--------|:--------|:--------|:----------|:----------------"
        "|:------------------------|:-------------|:-------------|:--------------"
        "|:------------------|\n"
        "| cpu@a    | 1       | 1       | 1       | -         | 100.0           "
        "| 1.00x                   | 100%         | 0.0%         | -             "
        "| -                 |\n"
        "| cpu@a    | 1       | 2       | 2       | -         | 160.0           "
        "| 1.60x (not significant) | 80%          | 20.0%        | -             "
        "| -                 |" in text
    )


def test_bad_pivot_and_baseline_are_named():
    rows = [row("cpu", 1, 1.0)]
    with pytest.raises(StbenchError, match="cannot pivot on 'colour'"):
        compare_text(rows, rows="colour")
    with pytest.raises(StbenchError, match="matches no result; present: cpu"):
        compare_text(rows, baseline="device=tpu")
    with pytest.raises(StbenchError, match="unknown metric"):
        compare_text(rows, metric="speed")


def test_a_long_heading_folds_between_pairs_never_inside_a_value():
    from stbench.report.text import fold_pairs

    heading = (
        "device=EPYC (2 cores), epochs=1, p.bucket_cap_mb=25.0, p.n_samples=100000, "
        "nodes=1, nproc=2"
    )
    folded = fold_pairs(heading, 40)
    assert (
        max(map(len, folded.splitlines())) <= 40
        and "device=EPYC (2 cores)" in folded.splitlines()[0]
    )
    assert folded.replace(",\n", ", ") == heading and fold_pairs(heading, 200) == heading
