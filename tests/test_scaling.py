"""The thesis' scaling study in compare: per world size and node count, on hand-made rows."""

import json

from tests.helpers import compare_text, frame


def row(nodes, nproc, sps, sync_s, repeat=0, **kw):
    world = nodes * nproc
    return {
        "schema": "1",
        "run_id": f"{nodes}x{nproc}.{repeat}",
        "workload": "w",
        "device": "cpu",
        "strategy": "ddp",
        "world_size": world,
        "nodes": nodes,
        "nproc_per_node": nproc,
        "batch_size": 75,
        "epochs": 2,
        "repeat": repeat,
        "params": json.dumps({"lr": 0.1}),
        "status": "ok",
        "host": "a",
        "wall_s": 1.0,
        "samples_per_s": sps,
        "epoch_s": 100.0 / world,
        "train_s": 10.0,
        "data_s": 1.0,
        "h2d_s": 0.0,
        "compute_s": 9.0 - sync_s,
        "sync_s": sync_s,
        "eval_s": 0.0,
        "sync_count": None if world == 1 else 2 * 500 // world,
        **kw,
    }  # one process: no sync, none counted


def test_speedup_efficiency_sync_cost_and_the_node_boundary():
    # 1, 2, 4 processes on one node, then 4 and 8 across two: the sync cost jumps there
    layout = [
        (1, 1, 100.0, 0.0),
        (1, 2, 190.0, 0.5),
        (1, 4, 360.0, 1.0),
        (2, 2, 300.0, 2.5),
        (2, 4, 560.0, 2.0),
    ]
    rows = [row(n, p, sps + r, sync) for n, p, sps, sync in layout for r in range(3)]
    text = compare_text(rows, rows="epochs", cols="label")
    assert (
        "### data-parallel scaling against the smallest world\n\n"
        "| device   | nodes   | nproc   | world   | epoch_s   | samples_per_s   | speedup   "
        "| efficiency   | sync_share   | ms_per_sync   | syncs_per_epoch   | node_boundary   |\n"
        "|:---------|:--------|:--------|:--------|:----------|:----------------|:----------"
        "|:-------------|:-------------|:--------------|:------------------|:----------------|\n"
        "| cpu      | 1       | 1       | 1       | 100.0     | 101.0           | 1.00x     "
        "| 100%         | 0.0%         | -             | -                 |                 |\n"
        "| cpu      | 1       | 2       | 2       | 50.00     | 191.0           | 1.89x     "
        "| 95%          | 5.0%         | 1.00          | 250.0             |                 |\n"
        "| cpu      | 1       | 4       | 4       | 25.00     | 361.0           | 3.57x     "
        "| 89%          | 10.0%        | 4.00          | 125.0             |                 |\n"
        "| cpu      | 2       | 2       | 4       | 25.00     | 301.0           | 2.98x     "
        "| 75%          | 25.0%        | 10.00         | 125.0             | <- node 2 joins |\n"
        "| cpu      | 2       | 4       | 8       | 12.50     | 561.0           | 5.55x     "
        "| 69%          | 20.0%        | 16.00         | 62.50             |                 |\n"
        in text
    )
    # two layouts of one world size stay apart in the main table too
    assert "| world_size   | nodes   | epochs   | cpu      |" in text


def test_the_smallest_world_is_the_baseline_when_there_is_no_single_process():
    rows = [row(1, 2, 200.0, 0.5), row(2, 2, 300.0, 2.0)]
    text = compare_text(rows, cols="label")
    assert (
        "| cpu      | 1       | 2       | 2       | 50.00     | 200.0           "
        "| 1.00x                   | 100%         | 5.0%         | 1.00          "
        "| 250.0             |                 |\n"
        "| cpu      | 2       | 2       | 4       | 25.00     | 300.0           "
        "| 1.50x (not significant) | 75%          | 20.0%        | 8.00          "
        "| 125.0             | <- node 2 joins |" in text
    )


def test_the_scaling_figure_baselines_a_two_node_line_on_the_one_node_world_of_one():
    from stbench.report import figures
    from stbench.report.plotting import panels

    rows = [
        row(n, p, sps + r, sync, strategy=s)
        for s in ("ddp", "fsdp")
        for r in range(3)
        for n, p, sps, sync in [
            (1, 1, 100.0, 0.0),
            (1, 2, 190.0, 0.5),
            (2, 1, 150.0, 1.5),
            (2, 2, 280.0, 2.0),
        ]
    ]
    df = frame(rows)
    df["sync_ms"] = 1000 * df["sync_s"] / 10
    pic = figures.scaling(df, "w")  # every distributed strategy, not only ddp
    assert (
        pic.name == "w-scaling"
        and pic.png.startswith(b"\x89PNG")
        and "smallest world" in pic.caption
    )
    (panel,) = panels(df[df["strategy"] == "ddp"], "world_size")
    two_nodes = next(ln for ln in panel.lines if (ln.rows["nodes"] == 2).all())
    assert (
        figures._smallest_world_sps(two_nodes, panel) == 101.0
    )  # the median of the 1-node, 1-process repeats
    assert (
        figures.scaling(frame([row(1, 2, 190.0, 0.5)]), "w") is None
    )  # one world: nothing to show
