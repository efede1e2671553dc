"""A two-rank gloo world trained in this machine's processes, instrumented: what the ranks
agree on (child/world.py) and what each rank keeps of its own."""

import json
import sys
from pathlib import Path

import pytest

from stbench.contract import TrainerParams

ROOT = Path(__file__).parent.parent
OURS = str(ROOT / "stbench_cli")
BUDGET = 0.5  # seconds of training: hundreds of the faulty workload's tiny steps


def _recording_all_reduce(log: list, now: dict):
    """torch.distributed.all_reduce as stbench's own code calls it, logged: a blocking call with
    the step it came after, an asynchronous one's launch, and its wait (launched after which
    step, waited after which)."""
    import torch.distributed as dist

    real = dist.all_reduce

    class Handle:
        def __init__(self, work, launched):
            self.work, self.launched = work, launched

        def wait(self, *args):
            log.append(["wait", self.launched, now["step"]])
            return self.work.wait(*args)

        def __getattr__(self, name):
            return getattr(self.work, name)

    def all_reduce(tensor, *args, async_op=False, **kwargs):
        work = real(tensor, *args, async_op=async_op, **kwargs)
        if not sys._getframe(1).f_code.co_filename.startswith(OURS):
            return work  # DDP's own gradient buckets
        if not async_op:
            log.append(["blocking", now["step"]])
            return work
        log.append(["launch", now["step"]])
        return Handle(work, now["step"])

    return all_reduce


def _rank(rank: int, folder: str, knobs: dict) -> None:
    import torch
    import torch.distributed as dist
    from fault_workload import build

    from stbench.child.trainer import LoopConfig, Trainer
    from stbench.contract import BuildContext

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=rank, world_size=2)
    log, now = [], {"step": 0}
    dist.all_reduce = _recording_all_reduce(log, now)
    task = build({"fault": "none"}, BuildContext(0, rank, 2))
    cfg = LoopConfig(16, 1, TrainerParams(**knobs), strategy="ddp")
    result = Trainer(
        task, cfg, torch.device("cpu"), rank, 2, step_hook=lambda s: now.update(step=s)
    ).run()
    dist.destroy_process_group()
    Path(folder, f"rank{rank}.json").write_text(
        json.dumps({"result": result.to_json(), "log": log})
    )


def gloo_world(folder: Path, **knobs) -> list[dict]:
    """Train the faulty workload's linear model with ddp on two gloo ranks: per rank, its
    CellResult and its log of all-reduces."""
    import torch.multiprocessing as mp

    from stbench.store.cell_result import CellResult

    mp.spawn(_rank, (str(folder), knobs), nprocs=2)
    out = []
    for rank in range(2):
        d = json.loads((folder / f"rank{rank}.json").read_text())
        out.append({"result": CellResult.from_json(d["result"]), "log": d["log"]})
    return out


@pytest.fixture(scope="module")
def budget_world(tmp_path_factory):
    return gloo_world(
        tmp_path_factory.mktemp("world"), time_budget=BUDGET, warmup_steps=2, max_eval_batches=1
    )


def test_a_world_under_a_time_budget_stops_together_without_a_host_read_per_step(budget_world):
    steps = {r["result"].figures.steps_done for r in budget_world}
    assert len(steps) == 1, steps  # every rank stopped at the same step
    (done,) = steps
    assert {r["result"].figures.stopped_by for r in budget_world} == {"time budget"}
    for r in budget_world:
        evaluated = {e.step for e in r["result"].epochs}
        assert done > 3 * len(evaluated), (done, evaluated)  # most steps end no interval
        launched = [e[1] for e in r["log"] if e[0] == "launch"]
        assert launched == list(range(1, done + 1))  # one asynchronous vote after every step
        waits = [e for e in r["log"] if e[0] == "wait"]
        # each read is of a vote launched a step before (or, the last, at the run's end)
        assert all(launched_at < read_at or read_at == done for _, launched_at, read_at in waits), (
            waits
        )
        assert len(waits) == done
        # blocking all-reduces only where an evaluation synchronises anyway, never per step
        blocking = {e[1] for e in r["log"] if e[0] == "blocking"}
        assert blocking <= evaluated, sorted(blocking - evaluated)


def test_a_world_of_one_agrees_with_itself_at_once():
    from stbench.child.world import Vote

    vote = Vote()
    assert vote.group is None and vote(1.5) == 1.5 and vote.close() == 0.0


def test_the_row_reports_every_phase_of_the_slowest_rank_and_keeps_each_ranks(budget_world):
    from stbench.store.cell_result import STEP_PHASES

    ranks = budget_world[0]["result"].ranks
    assert [r.rank for r in ranks] == [0, 1] and budget_world[1][
        "result"
    ].ranks == ranks  # the same on both
    (slowest,) = [r for r in ranks if r.reported]
    assert slowest.train_s == max(r.train_s for r in ranks)
    for r in budget_world:
        figures = r["result"].figures
        assert sum(getattr(figures, f"{p}_s") for p in STEP_PHASES) == pytest.approx(
            figures.train_s, rel=1e-9
        )
        assert (figures.train_s, figures.sync_s, figures.eval_s) == (
            slowest.train_s,
            slowest.sync_s,
            slowest.eval_s,
        )
        # DDP's own exposed communication is that rank's too: sync_s is held against its own rank's
        assert figures.ddp_exposed_comm_s == slowest.ddp_exposed_comm_s is not None
    for rank in ranks:  # each rank's phases sum to its own step time too
        assert sum(getattr(rank, f"{p}_s") for p in STEP_PHASES) == pytest.approx(
            rank.train_s, rel=1e-9
        )
        assert (
            rank.steps == slowest.steps and rank.sync_s > 0
        )  # DDP's gradient all-reduce waited for


def test_cpu_ranks_report_no_gpu_and_count_none(budget_world):
    assert [r.gpu_uuid for r in budget_world[0]["result"].ranks] == [None, None]
    assert {r["result"].figures.gpus_used for r in budget_world} == {None}


def test_ddps_sampled_iterations_are_warm_up(budget_world):
    from stbench.child.ddp import SAMPLED_ITERATIONS, warmup_steps

    # DDP's logger samples its first 10 iterations with a host sync: never timed as steady steps
    assert {r["result"].figures.warmup_steps for r in budget_world} == {
        SAMPLED_ITERATIONS
    }  # 2 asked
    assert warmup_steps(2, None, under_ddp=True) == warmup_steps(2, 100, under_ddp=True) == 10
    assert warmup_steps(25, 100, under_ddp=True) == 25
    assert warmup_steps(2, 100, under_ddp=False) == 2  # one process, fsdp: what was asked
    assert warmup_steps(5, 4, under_ddp=True) == 3  # a run of 4 steps times its last one
