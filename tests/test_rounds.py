"""`stbench run --budget`: which studies run as windows of warm processes (plan.rounds,
`windows_refused`, `run_as_windows`) and a real one that does; for the others, the decision
after each round of whole cells (on hand-made rows), the round it plans
(plan.planner.plan_round) and a real study that adds rounds until its comparison concludes."""

from dataclasses import replace

import pytest

from stbench.errors import StbenchError
from stbench.plan import planner
from stbench.plan.gpu_vs_cpu import against_first
from stbench.plan.pairs import CAP
from stbench.plan.rounds import another_round, open_comparisons, run_as_windows, windows_refused
from stbench.runner import envinfo
from stbench.store.files import read_runs
from stbench.store.manifest import RUN_KIND, read_manifest
from stbench.store.progress import TIMELINE
from stbench.store.rows import run_of
from tests.helpers import in_process, one_study, stbench


@pytest.fixture(scope="module")
def env():
    return envinfo.collect()


def study(env, values: dict[int, list[float]]):
    """Cells of threads=1 and 2 over as many rounds as values given, and a row of samples/s
    for each (round r of threads t: values[t][r]), typed as every reader has it."""
    rounds = len(next(iter(values.values())))
    base = planner.Request("cnn-strain", smoke=True, sets=("threads=1,2",), repeat=rounds)
    cells = planner.plan_new(base, env).cells  # plans a folder's name, writes nothing
    rows = [
        run_of(
            {
                "run_id": c.run_id,
                "repeat": c.repeat,
                "status": "ok",
                "samples_per_s": str(values[c.param_dict["threads"]][c.repeat]),
            }
        )
        for c in cells
    ]
    return cells, rows


def test_one_round_is_open_and_asks_for_another_within_the_budget(env):
    cells, rows = study(env, {1: [100.0], 2: [150.0]})
    (o,) = open_comparisons(cells, rows)
    assert (o.base, o.other, o.rounds) == ("threads=1", "threads=2", 2)
    d = another_round(cells, rows, left_s=60, round_s=10)
    assert d.more and "threads=2 against threads=1 needs ≥ 2 rounds, 1 ran" in d.why


def test_paired_rounds_that_leave_one_conclude_and_stop(env):
    # the machine drifts 20% between rounds; the ratio stays 1.5
    cells, rows = study(env, {1: [100.0, 120.0, 90.0], 2: [150.0, 180.0, 135.0]})
    assert open_comparisons(cells, rows) == []
    d = another_round(cells, rows, left_s=60, round_s=10)
    assert not d.more and "concluded in 3 rounds" in d.why


def test_a_round_that_does_not_fit_the_budget_stops_with_what_is_needed(env):
    cells, rows = study(env, {1: [100.0, 120.0], 2: [150.0, 110.0]})
    (o,) = open_comparisons(cells, rows)
    assert 2 < o.rounds < CAP
    d = another_round(cells, rows, left_s=5, round_s=10)
    assert not d.more and f"needs ≥ {o.rounds} rounds, 2 ran" in d.why
    assert "5 s left and a round takes 10 s" in d.why


def test_cells_equal_within_the_margin_conclude_and_noisy_ones_near_1_get_more_rounds(env):
    # per-round ratios 1.01, 1/1.01 and 1: their interval lies within 0.95-1.05x: they look equal
    cells, rows = study(env, {1: [100.0, 120.0, 90.0], 2: [101.0, 120.0 / 1.01, 90.0]})
    assert open_comparisons(cells, rows) == []
    d = another_round(cells, rows, left_s=600, round_s=1)
    assert not d.more and "concluded in 3 rounds" in d.why
    # every run of threads=2 failed: one cell ran, nothing to compare it with
    failed = [replace(r, status="failed") if r.samples_per_s != 100.0 else r for r in rows]
    assert open_comparisons(cells, failed) == []
    # ratios 1.3, 1/1.3 and 1 also average 1, but their interval is wide: not "equal", and not
    # given up on either; the rounds that could fit the interval within the margin are asked for
    cells, rows = study(env, {1: [100.0, 130.0, 90.0], 2: [130.0, 100.0, 90.0]})
    (o,) = open_comparisons(cells, rows)
    assert 3 < o.rounds < CAP
    assert another_round(cells, rows, left_s=600, round_s=1).more


def test_a_round_repeats_the_first_rounds_cells_with_the_next_seed_and_new_ids(env, tmp_path):
    req = planner.Request(
        "cnn-strain", smoke=True, sets=("threads=1,2",), repeat=2, out=tmp_path, seed=7
    )
    plan = planner.plan_new(req, env)
    more = planner.plan_round(plan, env)
    new = more.cells[len(plan.cells) :]
    assert [c.repeat for c in new] == [2, 2] and {c.seed for c in new} == {9}
    assert [c.param_dict["threads"] for c in new] == [1, 2]
    assert len({c.run_id for c in more.cells}) == 6  # no id reused
    assert more.manifest["matrix"]["repeats"] == 3
    assert [c["run_id"] for c in more.manifest["cells"]] == [c.run_id for c in more.cells]


@pytest.mark.slow
def test_a_study_adds_rounds_until_its_comparison_concludes_and_resumes_as_any(tmp_path):
    """cnn-strain's smoke at batch 16 and 256 with inter-op threads set (whole cells: a warm
    process cannot change them): samples/s differ several times over, so the
    paired rounds conclude within the budget, which a first round alone cannot (one round has
    no interval). The rounds, however many, are whole and in the manifest."""
    folder = one_study(
        tmp_path / "out",
        "cnn-strain",
        "--smoke",
        "--set",
        "threads=1",
        "--batch-size",
        "16",
        "256",
        "--set",
        "interop_threads=1",  # a process of its own: whole cells a round, not windows
        "--budget",
        "90",
    )
    runs = read_runs(folder)
    repeats = sorted({int(r["repeat"]) for r in runs})
    assert repeats == list(range(len(repeats))) and len(repeats) >= 2  # at least one round added
    assert len(runs) == 2 * len(repeats)  # every round has both cells, one row each
    # each cell's log ends with where its seconds outside training went (heartbeat.timeline)
    for log in (folder / "logs").glob("*.log"):
        assert f"{TIMELINE} starting " in log.read_text()  # its seconds vary with the load
        assert "building the workload's task" in log.read_text()
    manifest = read_manifest(folder)
    assert manifest["matrix"]["repeats"] == len(repeats) and len(manifest["cells"]) == len(runs)
    # a resume finds nothing left to run: the rounds added are the study's own
    again = stbench("run", "--resume", folder, check=True)
    assert len(read_runs(folder)) == len(runs) and "--budget" not in again.stderr


@pytest.mark.parametrize("budget", ["0", "-5"])
def test_a_budget_that_is_not_positive_is_one_line_and_exit_2(tmp_path, budget):
    out = tmp_path / "out"
    proc = stbench("run", "cnn-strain", "--smoke", "--budget", budget, "--out", out)
    assert proc.returncode == 2 and f"--budget {budget} must be a positive number" in proc.stderr
    assert proc.stderr.count("\n") == 1 and not out.exists()


def plan_of(env, **asked):
    return planner.plan_new(planner.Request("cnn-strain", smoke=True, **asked), env)


def refusal(plan):
    return windows_refused(plan.cells, plan.launch.kind)


def test_cells_a_warm_process_can_switch_or_build_are_windows_the_others_a_process_each(env):
    assert refusal(plan_of(env, sets=("threads=1,2", "precision=default,bf16"))) is None
    assert refusal(plan_of(env, batch_sizes=(16, 256), devices=("cpu", "cuda"))) is None
    refused = {
        "a torchrun world (--strategy) is a process per cell": {"strategies": ("single", "ddp")},
        "--epochs compares whole trainings": {"epochs": (1, 2)},
        "interop_threads=1 needs a process of its own": {"sets": ("interop_threads=0,1",)},
        "allocator=system needs a process of its own": {"sets": ("allocator=system",)},
        "a time to target needs whole trainings": {"sets": ("time_budget=5", "threads=1,2")},
    }
    for why, asked in refused.items():
        assert refusal(plan_of(env, **asked)) == why


def test_a_windowed_run_is_a_question_of_every_cell_against_the_first(env):
    plan = plan_of(env, sets=("threads=1,2",), repeat=8)
    q = run_as_windows(plan, 60, rounds=8).manifest["question"]
    assert q["kind"] == RUN_KIND and q["rounds"] == 8 and q["budget_s"] == 60
    assert run_as_windows(plan, 60).manifest["question"]["rounds"] == 6  # FIRST_ROUNDS at least
    assert run_as_windows(plan, 60).manifest["matrix"]["seed_per_repeat"] is False
    with pytest.raises(StbenchError, match=r"--budget 3: too small .* give at least --budget 6"):
        run_as_windows(plan, 3)
    # the pairs: every other cell against the first, paired by round; none before it has a row
    cells, rows = study(env, {1: [100.0, 120.0, 90.0], 2: [150.0, 180.0, 135.0]})
    (c,) = against_first(cells, rows)
    assert (c.base, c.other) == (cells[0].run_id, cells[1].run_id) and c.concluded
    ones = {x.run_id for x in cells if x.param_dict["threads"] == 1}
    assert against_first(cells, [r for r in rows if r["run_id"] not in ones]) == []


def test_run_with_a_budget_measures_its_cells_as_paired_windows_and_resumes(tmp_path, capsys):
    """cnn-strain's smoke at batch 16 and 256 (samples/s ~3x apart) as windows: six paired
    rounds over two warm processes, each window a row, the comparison concluded. The budget
    counts the command's start (~5 s here): it ended 13 s in at --budget 15, too close for CI."""
    proc = stbench(
        "run", "cnn-strain", "--smoke", "--batch-size", "16", "256", "--budget", "20",
        "--out", tmp_path / "out", check=True,
    )  # fmt: skip
    (folder,) = (tmp_path / "out").iterdir()
    # it ends with its answer as compare prints it, a line a cell: a row a window was 12
    assert "### samples/s" in proc.stdout and "paired over 6 rounds" in " ".join(
        proc.stdout.split()
    )
    runs = read_runs(folder)
    manifest = read_manifest(folder)
    assert manifest["question"]["kind"] == RUN_KIND
    assert manifest["question"]["stopped"] == ["every size concluded"]
    repeats = sorted({int(r["repeat"]) for r in runs})
    assert repeats == list(range(6)) and len(runs) == 12  # both cells in every round, once each
    assert {r["job_id"] for r in runs} == {r["job_id"] for r in runs[:1]} | {runs[-1]["job_id"]}
    assert len({r["job_id"] for r in runs}) == 2  # two warm processes (pyperf's workers)
    assert sorted(p.name for p in (folder / "logs").glob("windows-*.log")) == [
        "windows-1.log",
        "windows-2.log",
    ]
    # compare, and a resume with nothing left to run, by the console script's entry point here
    for argv in (["compare", folder], ["run", "--resume", folder]):
        code, out, err = in_process(capsys, *argv)
        assert code == 0, err[-2000:]
        if argv[0] == "compare":
            assert "paired over 6 rounds" in " ".join(out.split())
    assert len(read_runs(folder)) == len(runs)


def test_a_windowed_run_with_one_configuration_left_says_it_has_nothing_to_pair(tmp_path):
    """--device cpu cuda on a machine without a GPU: the cuda cell is a skipped row, the CPU's
    windows run, and the engine says no pair was judged (not that every pair concluded)."""
    proc = stbench(
        "run", "cnn-strain", "--smoke", "--device", "cpu", "cuda", "--budget", "20",
        "--out", tmp_path / "out", "--expect", "skipped",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = "run: no pair to judge: fewer than two configurations have ok windows"
    assert said in proc.stdout + proc.stderr
    (folder,) = (tmp_path / "out").iterdir()
    runs = read_runs(folder)
    assert [r["status"] for r in runs].count("skipped") == 1
    assert sum(r["status"] == "ok" for r in runs) == 6


def test_a_windowed_runs_budget_counts_from_the_commands_start(env, monkeypatch):
    """`run --budget 30` ended 33 s after it was typed: its deadline was set after the inventory
    and planning (~4.5 s here). The engine's deadline is the command's start plus the budget
    for the first study, and a later study's own start plus it."""
    import time

    from stbench.cli import running
    from stbench.runner import engine

    plan = run_as_windows(plan_of(env, sets=("threads=1,2",)), 30)
    deadlines = []
    monkeypatch.setattr(envinfo, "inventory", lambda: env)
    monkeypatch.setattr(
        engine, "answer", lambda plan, env, deadline, *a: deadlines.append(deadline) or []
    )
    asked = running.RunRequest(planner.Request("cnn-strain"), budget=30.0, started=1000.0)
    before = time.time()
    running.run_studies([plan, plan], asked)
    assert deadlines[0] == 1030.0  # the command's start, not the engine's
    assert before + 30.0 <= deadlines[1] <= time.time() + 30.0  # the second study's own start


@pytest.mark.slow
def test_a_windowed_run_interrupted_resumes_with_no_row_lost_or_doubled(tmp_path):
    """Ctrl-C inside a process of windows: exit 130 and the resume line; `run --resume` finishes
    the study as the engine's (the manifest's question), every planned window a row once. Slow
    (17 s): the engine's interrupt and resume are test_windows.py's for gpu-vs-cpu in the
    default suite, and `run --resume` of a windowed study is the budget test's above."""
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "out"
    started = subprocess.Popen(
        [sys.executable, "-m", "stbench", "run", "cnn-strain", "--smoke"]
        + ["--set", "threads=1,2", "--budget", "15", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a terminal's
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(out.glob("*/runs.csv")):
            time.sleep(0.1)
        time.sleep(0.5)  # inside the first process of windows
        started.send_signal(signal.SIGINT)
        said = started.communicate(timeout=60)[0]
    finally:
        started.kill()
    (folder,) = out.iterdir()
    assert started.returncode == 130, said[-2000:]
    assert f"finish it: stbench run --resume {folder}" in " ".join(said.split())
    have = len(read_runs(folder))
    stbench("run", "--resume", folder, "--budget", 6, check=True)  # the rest of its rounds
    ids = [r["run_id"] for r in read_runs(folder)]
    assert len(ids) == len(set(ids)) == len(read_manifest(folder)["cells"]) > have
    assert read_manifest(folder)["question"]["stopped"]  # the engine ended it, and said why
