"""The GPU acceptance as a program (benchmarks.acceptance, benchmarks/gpu_acceptance.py) on a
machine without a GPU: its steps fit the GPU machine's command within their caps, every study it
runs plans as written, it refuses bad input in one line, and its loop keeps a global deadline,
writes every verdict as soon as its step ends and, run again, keeps what passed. The rehearsal
(the whole run with CUDA faked) runs in .ci/run; test_a_killed_rehearsal_... runs two of its
steps."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from benchmarks.acceptance import engine, execute
from benchmarks.acceptance.__main__ import DEFAULT, gpu_tag, listing
from benchmarks.acceptance.state import State
from benchmarks.acceptance.steps import CORRECTNESS, EXTRA, EXTRAS, REFERENCE, Step

ROOT = Path(__file__).parent.parent
FAKE = {
    "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "tests" / "fakecuda"), os.environ.get("PYTHONPATH", "")]
    ),
    "STBENCH_FAKE_CUDA": "1",
}


def acceptance(*args, env=None, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.acceptance", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def test_the_default_run_fits_the_lease_with_room_to_start_a_second_machine():
    """Correctness first; the install and every cap inside the first command's deadline, which
    leaves, after a cold start and the reply, the device time a second machine needs to start."""
    from benchmarks.acceptance.__main__ import (
        COLD_START_S,
        DEADLINE_S,
        FRESH_MACHINE_S,
        INSTALL_S,
        LEASE_S,
        RETURN_S,
    )

    parts = [s.part for s in DEFAULT]
    assert parts == sorted(
        parts, key=[CORRECTNESS, REFERENCE].index
    )  # correctness before reference studies
    caps = {
        part: sum(s.cap_s for s in DEFAULT if s.part == part) for part in (CORRECTNESS, REFERENCE)
    }
    assert INSTALL_S + sum(caps.values()) <= DEADLINE_S
    assert COLD_START_S + DEADLINE_S + RETURN_S + FRESH_MACHINE_S <= LEASE_S
    text = listing()
    assert (
        f"correctness (caps {caps[CORRECTNESS]} s)" in text
        and f"reference (caps {caps[REFERENCE]} s)" in text
    )
    assert (
        f"{sum(caps.values())} s  caps on one H100 or H200" in text
        and max(map(len, text.splitlines())) <= 100
    )
    assert acceptance("--list").stdout.strip() == text
    assert text in (ROOT / "docs" / "gpu-acceptance.md").read_text()  # the page shows what runs


def test_every_step_and_check_has_one_name_and_every_check_can_see_a_folder():
    steps = [*DEFAULT, *EXTRAS]
    assert len({s.name for s in steps}) == len(steps)
    for s in steps:
        assert len({p.name for p in s.checks}) == len(s.checks)
        assert bool(s.argv) != bool(s.command), s.name
    assert all(s.result for s in DEFAULT if s.part == REFERENCE)


@pytest.mark.parametrize(
    "step", [s for s in (*DEFAULT, *EXTRAS) if s.argv[:1] == ("run",)], ids=lambda s: s.name
)
def test_every_study_plans_as_written_on_one_gpu(step, tmp_path, monkeypatch, capsys):
    """A dry run of each study, as on a one-GPU machine with NCCL, and in its rehearsal form."""
    import torch

    from stbench.cli import main

    # the inventory in this process, where the patches below are (not in a warm server's fork)
    monkeypatch.setenv("STBENCH_WARM", "0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.distributed, "is_nccl_available", lambda: True)
    for argv in {step.argv, step.rehearse_argv or step.argv}:
        with pytest.raises(SystemExit) as done:
            main([*argv, "--out", str(tmp_path), "--dry-run"])
        assert done.value.code == 0, capsys.readouterr().err


def test_reference_folders_are_named_by_the_gpu():
    assert gpu_tag("NVIDIA H100 80GB HBM3") == "h100" and gpu_tag("NVIDIA H200") == "h200"
    assert gpu_tag("2x Tesla T4") == "t4" and gpu_tag("no GPU named") == "gpu"


def test_bad_input_is_one_line_and_writes_nothing(tmp_path):
    for args, words in (
        (("turbo", "--out", tmp_path / "o"), "unknown step 'turbo'; valid: smoke-cnn-strain"),
        (("smoke-stnn",), "--out OUT is needed"),
        (("smoke-stnn", "--out", tmp_path / "o"), "needs a CUDA GPU"),
    ):
        proc = acceptance(*args)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert words in proc.stderr
    assert not (tmp_path / "o").exists()
    boot = [sys.executable, str(ROOT / "benchmarks" / "gpu_acceptance.py")]
    proc = subprocess.run(
        [*boot, "--out", tmp_path / "o", "--wheels", tmp_path], capture_output=True, text=True
    )
    assert proc.returncode == 2 and proc.stderr.startswith(
        f"gpu_acceptance: no stbench wheel in {tmp_path}"
    )
    assert "pip wheel --no-deps" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    proc = subprocess.run([*boot, "--wheels", tmp_path], capture_output=True, text=True)
    assert proc.returncode == 2 and "--out OUT is needed" in proc.stderr


# --- the loop: deadline, limits, verdicts after every step, a second command ---------------------


def fake(name: str, cap_s: int, code: str = "pass") -> Step:
    return Step(name, CORRECTNESS, cap_s, "a test step", command=("python", "-c", code))


def loop(tmp_path: Path, steps: list[Step], deadline_s: float) -> tuple[int, State, str]:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    state = State.load(out)
    settings = engine.Settings(out, tmp_path / "work", time.time() + deadline_s)
    code = engine.run(steps, settings, state, [s.name for s in steps])
    return code, State.load(out), (out / "summary.md").read_text()


def test_a_step_whose_cap_does_not_fit_is_not_reached_and_the_run_stops(tmp_path):
    code, state, summary = loop(tmp_path, [fake("a", 1), fake("b", 60), fake("c", 1)], 20)
    assert code == 1 and state.records["a"].verdict == "PASS"
    assert [state.records[n].verdict for n in "bc"] == [
        "NOT REACHED"
    ] * 2  # c would fit; the run stopped at b
    assert (
        "| NOT REACHED | **b** |  | the deadline:" in summary
        and "b needs its cap of 60 s" in summary
    )


def test_a_default_step_reserves_nothing_for_the_extras_after_it():
    """The extras run in what the default run leaves: a default step may run past its cap (or
    try again) into their caps, never into a later default step's; an extra keeps the others'."""
    a, b = fake("a", 10), fake("b", 20)
    extra = Step("x", EXTRA, 30, "an extra", command=("python", "-c", "pass"))
    assert engine.reserved(a, [b, extra]) == 20 and engine.reserved(extra, [extra]) == 30


def test_a_step_past_its_limit_is_killed_and_fails(tmp_path):
    t0 = time.monotonic()
    code, state, _ = loop(tmp_path, [fake("slow", 2, "import time; time.sleep(60)")], 4)
    assert code == 1 and time.monotonic() - t0 < 30
    assert state.records["slow"].verdict == "FAIL" and state.records["slow"].detail.startswith(
        "ran past its limit"
    )


def test_the_summary_holds_each_verdict_before_the_next_step_and_a_second_command_keeps_what_passed(
    tmp_path,
):
    runs = tmp_path / "ran"
    mark = f"open({str(runs)!r}, 'a').write('a')"
    # b reads the summary while it runs: a's verdict is there already, b itself RUNNING
    look = (
        f"t = open({str(tmp_path / 'out' / 'summary.md')!r}).read(); "
        "assert '| PASS | **a** |' in t and '| RUNNING | **b** |' in t, t; raise SystemExit(3)"
    )
    code, state, summary = loop(tmp_path, [fake("a", 1, mark), fake("b", 5, look)], 120)
    assert code == 1 and state.records["b"].detail == "exit 3: " + "(no output)"
    assert "| PASS | **a** |" in summary and "| FAIL | **b** |" in summary
    code, state, summary = loop(tmp_path, [fake("a", 1, mark), fake("b", 5)], 120)  # b fixed
    assert code == 0 and runs.read_text() == "a"  # a kept, not run again
    assert [state.records[n].verdict for n in "ab"] == ["PASS", "PASS"]


def test_an_stbench_command_runs_in_this_process_and_is_stopped_at_its_limit(tmp_path):
    assert execute.stbench(("list",), 60) == 0
    assert execute.stbench(("run", "nope"), 60) == 2
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    t0 = time.monotonic()
    code = execute.stbench(("run", "cnn-strain", "--epochs", "50", "--out", str(tmp_path)), 5)
    assert code == execute.TIMED_OUT and time.monotonic() - t0 < 30
    from stbench.runner import warm

    kept = before | warm.helpers()  # the warm server serves every step: it stays
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in kept]
    assert left == []  # the cell's process group went with the command


def begun(summary: Path, step: str) -> bool:
    """Whether the summary names the step running or ended (not "not started yet")."""
    text = summary.read_text() if summary.exists() else ""
    return any(f"| {v} | **{step}** |" in text for v in ("RUNNING", "PASS", "FAIL"))


@pytest.mark.slow
def test_a_killed_rehearsal_leaves_the_verdicts_it_reached_and_a_second_command_finishes(tmp_path):
    """Two steps of the rehearsal (CUDA faked, this venv): killed once the first step's verdict is
    saved, summary.md holds it and its checks; the same command again keeps it, runs the other."""
    out = tmp_path / "out"
    args = [
        sys.executable,
        "-m",
        "benchmarks.acceptance",
        "--rehearsal",
        "--out",
        str(out),
        "smoke-stnn",
        "two-nodes",
    ]
    proc = subprocess.Popen(
        args,
        env={**os.environ, **FAKE},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 400
        # killed once the first step's verdict is saved and the second has begun: state.json is
        # written just before the summary names the next step RUNNING, and a kill between the
        # two left a summary without it (a race this test lost now and then)
        while time.monotonic() < deadline and proc.poll() is None:
            if (
                (out / "state.json").exists()
                and json.loads((out / "state.json").read_text())["steps"]
                and begun(out / "summary.md", "two-nodes")
            ):
                break
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    summary = (out / "summary.md").read_text()
    assert (
        "| PASS | **smoke-stnn** |" in summary and "| PASS | smoke-stnn / phases-sum |" in summary
    )
    assert "| RUNNING | **two-nodes** |" in summary or "| PASS | **two-nodes** |" in summary
    again = acceptance(
        "--rehearsal", "--out", out, "smoke-stnn", "two-nodes", env=FAKE, timeout=600
    )
    assert again.returncode == 0, (out / "summary.md").read_text()
    assert "smoke-stnn: kept from an earlier command" in again.stdout
    assert "| PASS | two-nodes / two-nodes |" in (out / "summary.md").read_text()


def test_a_later_commands_deadline_is_computed_from_the_device_time_left():
    """A second command on the lent machine ends inside the lease: its deadline is the device
    time `status` says is left, less a cold start unless the machine is warm, less the return."""
    from benchmarks.acceptance.__main__ import COLD_START_S, DEADLINE_S, RETURN_S, parse

    cold = parse(["--device-left", "400", "--out", "x"])
    assert cold.deadline == 400 - COLD_START_S - RETURN_S
    assert parse(["--device-left", "400", "--warm", "--out", "x"]).deadline == 400 - RETURN_S
    assert parse(["--out", "x"]).deadline == DEADLINE_S  # no --device-left: the first command's
    with pytest.raises(SystemExit):
        parse(["--device-left", "100", "--out", "x"])  # nothing left after a cold start
