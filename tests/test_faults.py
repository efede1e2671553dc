"""A world that loses a rank or a node, tested as PyTorch tests its elastic agent: real torchrun
agents over loopback, real faults (tests/fault_workload.py: each happens once, on the last rank),
and the study's own loop. Each fault ends its cell within a bound, as a row naming the rank or
node and what happened, the next cell runs, and a resume completes the study with exactly one
row per cell. Bounds are generous ("ends, does not hang"); `benchmarks/loopback_exits.py faults`
times them.

The default suite runs a lost node, an abort at exit and a rank that never joins (the stall
watchdog's floor shortened in this process); `STBENCH_SLOW=1` adds a rank that exits mid-step,
one stuck in a collective, and the default watchdog's own floor through the CLI.
"""

import csv
import json
import sys
import time

import pytest

from stbench.plan.planner import Request, plan_new, plan_resume
from stbench.runner import envinfo, study
from stbench.runner.launchers import local
from stbench.store import progress
from stbench.store.files import read_runs
from tests.helpers import stbench

BOUND_S = 120.0  # a cell that ends at all ends far sooner; a hang would not end


def _run(plan, **options) -> tuple[list[dict], dict[str, float]]:
    """Run a plan in this process: its rows, and each cell's seconds from start to row."""
    began, took = {}, {}
    rows = study.run_study(
        plan,
        envinfo.collect(),
        interval=0.5,
        on_start=lambda spec: began.update({spec.run_id: time.monotonic()}),
        on_done=lambda spec, row: took.update({spec.run_id: time.monotonic() - began[spec.run_id]}),
        **options,
    )
    return rows, took


def _faults(tmp_path, *faults) -> tuple:
    env = envinfo.collect()
    plan = plan_new(
        Request(
            "faulty",
            strategies=("ddp",),
            nnodes=(2,),
            smoke=True,
            out=tmp_path,
            sets=(f"fault={','.join(faults)}",),
        ),
        env,
    )
    return plan, _run(plan)


def _by_fault(rows: list) -> dict:
    return {r.params["fault"]: r for r in rows}


def _resume_completes(plan) -> None:
    rows, _ = _run(plan_resume("faulty", plan.folder, envinfo.collect()))
    assert [r["status"] for r in rows] == ["ok"] * len(plan.cells), [r["reason"] for r in rows]
    with open(plan.folder / "runs.csv") as f:
        ids = [r["run_id"] for r in csv.DictReader(f)]
    assert sorted(ids) == sorted(c.run_id for c in plan.cells)  # one row per cell, none twice
    with open(plan.folder / "ranks.csv") as f:
        ranks = [r["run_id"] for r in csv.DictReader(f)]
    assert sorted(ranks) == sorted(c.run_id for c in plan.cells for _ in range(2))


@pytest.mark.slow
def test_a_lost_node_and_an_abort_at_exit_end_their_worlds_and_a_resume_completes(tmp_path):
    plan, (rows, took) = _faults(tmp_path, "lost", "abort", "none")
    assert max(took.values()) < BOUND_S, took
    by = _by_fault(rows)
    lost, abort = by["lost"], by["abort"]
    assert lost["status"] == "failed"
    agent = "node 1 lost: its torchrun agent was killed by signal 9 (SIGKILL)"
    assert lost["reason"].startswith(agent), lost["reason"]
    assert "rank 1 in a step's" in lost["reason"]  # the orphan was still training when it was ended
    # the abort came after the measurements: the row keeps them, and says what happened
    assert abort["status"] == "failed" and abort["wall_s"] is not None
    assert abort["reason"].startswith(
        "rank 1 (node 1) killed by signal 6 (SIGABRT) after it left the world"
    ), abort["reason"]
    assert abort["reason"].endswith("(rank 0's figures kept)")
    assert by["none"]["status"] == "ok"  # the next cell ran
    _resume_completes(plan)


@pytest.mark.slow
def test_a_world_whose_rank_never_joins_is_a_hung_row_by_the_watchdog(tmp_path, monkeypatch):
    """No --timeout, no --stall-limit: node 1's agent never joins, so no rank starts. The default
    watchdog's floor (minutes) is shortened here only; a slow test below waits for the real one."""
    monkeypatch.setattr(progress, "STALL_FLOOR_S", 20.0)
    real = local.commands

    def node_1_never_joins(spec, cell, *args, **kwargs):
        started = real(spec, cell, *args, **kwargs)
        sleeper = [sys.executable, "-c", "import time; time.sleep(600)", *cell]  # names the spec
        return [started[0], (sleeper, started[1][1])]

    monkeypatch.setattr(local, "commands", node_1_never_joins)
    env = envinfo.collect()
    request = Request("faulty", strategies=("ddp",), nnodes=(2,), smoke=True, out=tmp_path)
    plan = plan_new(request, env)
    (row,), took = _run(plan)
    assert max(took.values()) < BOUND_S, took
    assert row["status"] == "hung", row["reason"]
    assert row["reason"].startswith("no progress for "), row["reason"]
    assert "(limit 20 s: at least 20 s while a rank is in a phase new to it)" in row["reason"]
    assert row["reason"].endswith(
        "no rank started: a node's torchrun agent never joined the rendezvous"
    )
    manifest = json.loads((plan.folder / "manifest.json").read_text())
    assert manifest["timeout_s"] is None and manifest["stall_limit_s"] is None


@pytest.mark.slow
def test_a_rank_that_exits_mid_step_and_one_stuck_in_a_collective(tmp_path):
    plan, (rows, took) = _faults(tmp_path, "exit", "stuck", "none")
    assert max(took.values()) < BOUND_S, took
    by = _by_fault(rows)
    assert by["exit"]["status"] == "failed"
    assert by["exit"]["reason"].startswith("rank 1 (node 1) exited with code 1 in a step's")
    stuck = by["stuck"]
    assert stuck["status"] == "hung" and "limit 30 s" in stuck["reason"], stuck["reason"]
    blocked = "rank 0 (node 0) in a step's forward and backward (DDP's gradient all-reduce)"
    assert blocked in stuck["reason"]
    assert by["none"]["status"] == "ok"
    _resume_completes(plan)


@pytest.mark.slow
def test_no_study_hangs_without_a_row_the_default_watchdog_through_the_cli(tmp_path):
    """Both ranks of a world hang in their workload's build (before any step, a phase new to
    them): no option given, the default floor ends the cell as hung, and the study goes on."""
    out = tmp_path / "out"
    proc = stbench(
        "run",
        "faulty",
        "--strategy",
        "ddp",
        "--nnodes",
        "2",
        "--set",
        "fault=hang,none",
        "--out",
        out,
        timeout=progress.STALL_FLOOR_S + 300,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    (folder,) = out.iterdir()
    hang, ok = _by_fault(read_runs(folder)).values()
    assert (hang["status"], ok["status"]) == ("hung", "ok")
    floor = f"at least {progress.STALL_FLOOR_S:g} s while a rank is in a phase new to it"
    assert floor in hang["reason"], hang["reason"]
    assert "in building the workload's task" in hang["reason"]
