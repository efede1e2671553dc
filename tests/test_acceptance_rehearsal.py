"""The GPU acceptance's rehearsal verdicts (benchmarks.acceptance.rehearsal): a step or check that
reaches torch's own "not compiled with CUDA" error and nothing else passes; any other failure,
or none, fails."""

import json

from benchmarks.acceptance import rehearsal
from benchmarks.acceptance.verdicts import FAIL, PASS
from stbench.runner.doctor import Check
from tests.helpers import NOT_COMPILED
from tests.helpers import acceptance_folder as write_runs

TRACEBACK = 'Traceback (most recent call last):\n  File "x.py", line 1, in f\n    g()\n{}\n'


def test_a_step_that_reaches_cuda_and_nothing_else_passes(tmp_path):
    folder = write_runs(
        tmp_path / "a",
        [
            {"run_id": "a", "device": "cpu"},
            {"run_id": "b", "status": "failed", "reason": NOT_COMPILED},
        ],
    )
    assert rehearsal.judge(1, "1 of 2 cells did not end ok", folder) == (
        True,
        "reached CUDA in 1 cell(s)",
    )
    assert rehearsal.judge(1, TRACEBACK.format(NOT_COMPILED)) == (True, "reached CUDA")


def test_a_step_that_fails_another_way_or_never_reaches_cuda_fails(tmp_path):
    passed, why = rehearsal.judge(
        1, TRACEBACK.format(NOT_COMPILED) + TRACEBACK.format("KeyError: 'uuid'")
    )
    assert not passed and why == "failed before CUDA: KeyError: 'uuid'"
    folder = write_runs(
        tmp_path / "a", [{"run_id": "b", "status": "failed", "reason": "ModuleNotFoundError: zarr"}]
    )
    assert rehearsal.judge(1, NOT_COMPILED, folder) == (
        False,
        "failed before CUDA: b failed: ModuleNotFoundError: zarr",
    )
    assert rehearsal.judge(0, "PASS activation peak MiB none 3")[1].startswith("never reached CUDA")
    assert rehearsal.judge(124, NOT_COMPILED) == (False, "ran past its time limit")
    pytest_out = (
        f"FAILED tests/test_gpu.py::a - {NOT_COMPILED}\n"
        "ERROR tests/test_gpu.py - ModuleNotFoundError: x\n"
    )
    assert (
        rehearsal.judge(1, pytest_out)[1]
        == "failed before CUDA: ERROR tests/test_gpu.py - ModuleNotFoundError: x"
    )


def test_torchruns_echo_and_interleaved_ranks_are_not_another_failure():
    echo = TRACEBACK.format("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ")
    assert rehearsal.judge(1, TRACEBACK.format(NOT_COMPILED) + echo) == (True, "reached CUDA")
    # the echo alone (no rank's traceback reached CUDA in that log) is still a failure
    assert rehearsal.judge(1, NOT_COMPILED + "\n" + echo)[1].startswith(
        "failed before CUDA: torch.distributed"
    )
    header = "Traceback (most recent call last):\n"
    two_ranks = header + TRACEBACK.format(NOT_COMPILED)  # two ranks' headers interleaved
    assert rehearsal.judge(1, two_ranks) == (True, "reached CUDA")
    # two nodes' agents in one log: the other's record inside this rank's traceback
    record = "E1126 11:04:53.766000 28918 api.py:1002] failed (exitcode: 1) local_rank: 0 (pid: 2)"
    two_nodes = TRACEBACK.format(NOT_COMPILED).replace("    g()\n", f"    g()\n{record}\n")
    assert rehearsal.judge(1, two_nodes) == (True, "reached CUDA")
    # two ranks writing at once: one's caret line cut from its indent is not its exception
    carets = TRACEBACK.format(NOT_COMPILED).replace("    g()\n", "    g()\n^^^^\n")
    assert rehearsal.judge(1, carets) == (True, "reached CUDA")
    # two agents' echoes in one log: the other's header inside this one's box leaves its
    # "Failures:" line where an exception would end (seen in CI's rehearsal of two-nodes)
    ruler = "=" * 60
    echo = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: "
    cut = (
        TRACEBACK.format(NOT_COMPILED)
        + TRACEBACK.format(echo)
        + f"{ruler}\nstbench.child.cell FAILED\n{'-' * 60}\n"
        + header
        + f"Failures:\n  <NO_OTHER_FAILURES>\n{ruler}\n"
    )
    assert rehearsal.exceptions(cut)[-1].startswith("torch.distributed")
    assert rehearsal.judge(1, cut) == (True, "reached CUDA")
    # two agents' echoes written at once, their module, dot and name interleaved (CI's)
    module = "torch.distributed.elastic.multiprocessing.errors"
    mixed = TRACEBACK.format(f"{module}.{module}ChildFailedError.: ChildFailedError")
    assert rehearsal.judge(1, TRACEBACK.format(NOT_COMPILED) + mixed) == (True, "reached CUDA")
    assert not rehearsal.judge(1, NOT_COMPILED + "\n" + mixed)[0]  # alone, still a failure


def test_a_doctor_check_failing_another_way_fails_the_rehearsal(tmp_path):
    (tmp_path / "doctor.json").write_text(
        json.dumps(
            {
                "checks": [
                    {"name": "peaks", "status": "FAIL", "detail": NOT_COMPILED},
                    {"name": "clock", "status": "PASS"},
                ]
            }
        )
    )
    assert rehearsal.judge(1, "", tmp_path) == (True, "reached CUDA")
    (tmp_path / "doctor.json").write_text(
        json.dumps(
            {"checks": [{"name": "overhead", "status": "FAIL", "detail": "no module named pynvml"}]}
        )
    )
    assert rehearsal.judge(1, NOT_COMPILED, tmp_path) == (
        False,
        "failed before CUDA: doctor overhead: no module named pynvml",
    )


def test_a_rehearsed_check_passes_only_for_the_cuda_error_alone():
    reached = Check("n", "cuda", FAIL, f"cells did not end ok: a: failed {NOT_COMPILED}")
    assert rehearsal.judge_check(reached).status == PASS
    mixed = Check(
        "n", "cuda", FAIL, f"cells did not end ok: a: failed {NOT_COMPILED}; b: failed KeyError: x"
    )
    assert rehearsal.judge_check(mixed).detail.startswith(
        "failed before CUDA: b: failed KeyError: x"
    )
    assert rehearsal.judge_check(Check("n", "cuda", FAIL, "no study in x")).status == FAIL
    assert (
        rehearsal.judge_check(Check("n", "cuda", PASS, "fine")).status == FAIL
    )  # judged nothing of a GPU
    assert (
        rehearsal.judge_check(Check("n", "cpu", PASS, "fine")).status == PASS
    )  # the doctor's cpu checks
