"""What ends a cell, in its row (runner/verdict.py), the stall limit (store/progress.py) and the
watcher that sees a world's processes together (runner/watch.py): pure, on torchrun's and
Slurm's own words and on fake processes."""

import time

import pytest

from stbench.plan.spec import RunSpec
from stbench.runner import verdict, watch
from stbench.store import progress
from stbench.store.cell_result import CellResult, Figures
from stbench.store.progress import TIMELINE, Beat

WORLD = RunSpec("faulty", "cpu", "ddp", 16, 1, world_size=2, nodes=2)
SUMMARY = """\
terminate called without an active exception
Fatal Python error: Aborted
W1126 08:21:50.123000 4640 torch/distributed/elastic/api.py:900] Sending process 4641 SIGTERM
E1126 08:21:50.200000 4640 torch/distributed/elastic/api.py:1002] failed (exitcode: -6) rank: 0
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
Root Cause (first observed failure):
[0]:
  time      : 2026-11-26_08:21:50
  host      : vm
  rank      : 1 (local_rank: 0)
  exitcode  : -6 (pid: 4642) (SIGABRT)
  error_file: <N/A>
"""
OK = CellResult("ok", figures=Figures(wall_s=1.5))


def beat(
    rank, phase="a step's forward and backward", steps=3, done=False, familiar=True, slowest=0.1
):
    return Beat(rank, rank, 100 + rank, "vm", phase, steps, steps + 7, slowest, done, familiar)


def test_torchruns_and_sruns_words_are_read():
    assert verdict.rank_exits(SUMMARY) == {1: -6}
    srun = "x\nsrun: error: vm-node2: task 1: Killed\n"
    assert verdict.srun_tasks(srun) == [("vm-node2", 1, "Killed")]
    assert verdict.how(-6) == "killed by signal 6 (SIGABRT)"
    assert verdict.how(1) == "exited with code 1"
    assert verdict.how(-9).endswith("(SIGKILL: the kernel's OOM killer sends this)")
    assert verdict.how(-9, rank=False) == "killed by signal 9 (SIGKILL)"
    assert "SIGKILL" in verdict.how(137)
    assert verdict.fatal_line(SUMMARY) == "terminate called without an active exception"
    agents = SUMMARY[SUMMARY.index("W1126") :]  # torchrun's own lines: never a rank's last words
    assert verdict.last_words("RuntimeError: boom\n" + agents) == "RuntimeError: boom"
    # rank 0's set-up timeline (a finished rank's last line) is never another rank's last words
    dying = "[default1]:terminate called without an active exception\n"
    timeline = f"[default0]:{TIMELINE} starting 0.0, end 7.9\n"
    assert verdict.last_words(dying + timeline) == dying.strip()


def test_a_rank_that_aborts_after_its_world_ended_keeps_the_figures_and_says_so():
    beats = {0: beat(0, "left the world", done=True), 1: beat(1, "left the world", done=True)}
    r = verdict.cell_outcome(WORLD, (1, 1, "agent"), SUMMARY, {0: OK}, beats)
    assert (r.status, r.figures.wall_s) == ("failed", 1.5)
    assert r.reason == (
        "rank 1 (node 1) killed by signal 6 (SIGABRT) after it left the world, "
        "its training over; its last words: terminate called without an active "
        "exception (rank 0's figures kept)"
    )


def test_the_rank_that_died_is_named_before_the_one_that_saw_its_peer_go():
    log = SUMMARY.replace("-6 (pid: 4642) (SIGABRT)", "1 (pid: 4642)")
    log = log.replace("terminate called", "x").replace("Fatal Python error: Aborted", "")
    lost = CellResult("failed", "RuntimeError: [pair.cc:553] Connection closed by peer [::1]:1")
    r = verdict.cell_outcome(WORLD, (0, 1, "agent"), log, {0: lost}, {0: beat(0), 1: beat(1)})
    assert r == CellResult(
        "failed",
        "rank 1 (node 1) exited with code 1 in a step's forward and backward, after 3 steps",
    )


def test_a_lost_node_a_failing_rank_and_a_clean_world():
    r = verdict.cell_outcome(WORLD, (1, -9, "agent"), "", {}, {1: beat(1)})
    assert r.reason == (
        "node 1 lost: its torchrun agent was killed by signal 9 (SIGKILL) (rank 1 "
        "in a step's forward and backward, after 3 steps)"
    )
    oom = CellResult("oom", "OutOfMemoryError: CUDA out of memory")
    r = verdict.cell_outcome(WORLD, (1, 1, "agent"), SUMMARY.replace("-6", "1"), {1: oom}, {})
    assert r == CellResult("oom", "rank 1 (node 1): OutOfMemoryError: CUDA out of memory")
    assert verdict.cell_outcome(WORLD, None, "", {0: OK}, {}) is OK
    empty = verdict.cell_outcome(WORLD, None, "", {}, {})
    assert empty.reason == "every process exited 0, but rank 0 wrote no result"
    single = RunSpec("faulty", "cpu", "single", 16, 1)
    assert verdict.cell_outcome(single, (0, -9, "cell"), "x\n", {}, {0: beat(0)}).reason == (
        "killed by signal 9 (SIGKILL: the kernel's OOM killer sends this) in a step's forward and "
        "backward, after 3 steps; last log line: x"
    )


def test_a_stalled_world_names_where_each_rank_stopped():
    r = verdict.hung(WORLD, 31.0, 30.0, None, {0: beat(0), 1: beat(1, "a step's data")})
    assert r.status == "hung"
    assert r.reason == (
        "no progress for 31 s (limit 30 s: 10 x the slowest step (0.1 s), at least "
        "30 s in phases the ranks were in before); killed; rank 0 (node 0) in a "
        "step's forward and backward, after 3 steps; rank 1 (node 1) in a step's "
        "data, after 3 steps"
    )
    joining = {0: beat(0, "joining the world", 0, familiar=False)}
    alone = verdict.hung(WORLD, 301.0, 300.0, 300.0, joining)
    assert alone.reason.endswith(
        "rank 0 (node 0) in joining the world, after 0 steps; rank 1 "
        "(node 1) never reported: it never started or joined"
    )
    assert "(limit 300 s: --stall-limit 300 s)" in alone.reason


def test_the_stall_limit_follows_the_cells_own_progress():
    familiar = {0: beat(0), 1: beat(1)}
    assert progress.stall_limit(None, familiar, 2) == progress.STALL_RUN_S
    assert progress.stall_limit(None, {0: beat(0, slowest=9.0), 1: beat(1)}, 2) == 90.0
    assert progress.stall_limit(None, {0: beat(0)}, 2) == progress.STALL_FLOOR_S  # rank 1 not yet
    new = {**familiar, 1: beat(1, familiar=False)}
    assert progress.stall_limit(None, new, 2) == progress.STALL_FLOOR_S
    assert progress.stall_limit(12.0, familiar, 2) == 12.0
    assert progress.pg_timeout(None) == progress.STALL_FLOOR_S + progress.PG_MARGIN_S


def test_beats_round_trip_and_stalls_are_seen(tmp_path, monkeypatch):
    progress.write_beat(tmp_path, beat(0))
    assert progress.read_beats(tmp_path) == {0: beat(0)} and not list(tmp_path.glob(".*tmp"))
    stalls = watch.Stalls(tmp_path, 5.0, 1)
    now = time.monotonic()
    assert stalls.look(now) is None and stalls.look(now + 4) is None
    stall = stalls.look(now + 6)
    assert stall is not None and stall.limit_s == 5.0 and stall.beats == {0: beat(0)}
    progress.write_beat(tmp_path, beat(0, steps=4))  # progress: the clock starts again
    assert stalls.look(now + 7) is None


class Proc:
    """A process that ends with `code` after `after` seconds (None: never)."""

    def __init__(self, code, after):
        self.code, self.end = code, None if after is None else time.monotonic() + after

    def poll(self):
        return self.code if self.end is not None and time.monotonic() >= self.end else None


@pytest.fixture
def quick(monkeypatch):
    monkeypatch.setattr(watch, "POLL_S", 0.01)
    monkeypatch.setattr(watch, "GRACE_S", 0.3)


def test_the_first_process_to_fail_ends_the_world_after_a_grace(quick):
    t0 = time.monotonic()
    ending = watch.watch([Proc(0, None), Proc(1, 0.1)], None, None)
    assert ending.first == (1, 1) and not ending.clean
    assert 0.35 < time.monotonic() - t0 < 3  # the others had the grace, no more
    assert watch.watch([Proc(0, 0.05), Proc(0, 0.1)], None, None).clean
    assert watch.watch([Proc(0, None)], 0.2, None).timed_out


def test_a_rank_torchrun_ended_because_another_failed_is_not_named_as_the_cause():
    """torchrun's agent ends a failed rank's peers with SIGTERM: the failure on record is the
    cause (the CUDA doctor's 2-rank world on a build without CUDA: rank 0's AssertionError)."""
    one_node = RunSpec("faulty", "cpu", "ddp", 16, 1, world_size=2, nodes=1)
    log = SUMMARY.replace("exitcode  : -6 (pid: 4642) (SIGABRT)", "exitcode  : -15 (pid: 4642)")
    own = CellResult("failed", "AssertionError: Torch not compiled with CUDA enabled")
    r = verdict.cell_outcome(one_node, (0, 1, "agent"), log, {0: own}, {})
    assert (r.status, r.reason) == ("failed", own.reason)
