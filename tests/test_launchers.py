"""Launchers without a cluster: the exact commands each one starts (golden text, 2 nodes x 2
processes), their one-line user errors, run_id stability, and the multi-node planning rules."""

import json
import os
import sys
from pathlib import Path

import pytest

from stbench.cli import main
from stbench.plan.launcher_config import Launch, make_launch, parse_slurm
from stbench.plan.spec import RunSpec, identify
from stbench.runner.launchers import local, sbatch, slurm, srun, torchrun
from tests.helpers import stbench

SPEC = identify(
    RunSpec(
        "cnn-strain",
        "cpu",
        "ddp",
        32,
        1,
        world_size=4,
        nodes=2,
        params=(("backend", "auto"), ("lr", 0.1)),
    )
)
JOB = f"--job-name=stbench-{SPEC.run_id}"
CELL = torchrun.cell_args("/s/spec.json", "/s/result.json")
NODE = (
    'echo "stbench: node $SLURM_NODEID of job $SLURM_JOB_ID.$SLURM_STEP_ID on $(hostname)"; '
    "exec python -m torch.distributed.run --nnodes=2 --nproc-per-node=2 "
    '--node-rank="$SLURM_NODEID" --rdzv-backend=static '
    '--master-addr="$(scontrol show hostnames "$SLURM_STEP_NODELIST" | head -n 1)" '
    '--master-port="$((20000 + (SLURM_JOB_ID + SLURM_STEP_ID) % 20000))" '
    "-m stbench.child.cell /s/spec.json /s/result.json"
)


def test_local_two_loopback_nodes_of_two_processes():
    started = local.commands(SPEC, CELL, "python", port=29611, base={"PATH": "/bin"})
    agent = [
        "python",
        "-m",
        "torch.distributed.run",
        "--nnodes=2",
        "--nproc-per-node=2",
        "--node-rank={}",
        "--rdzv-backend=static",
        "--master-addr=127.0.0.1",
        "--master-port=29611",
        "-m",
        "stbench.child.cell",
        "/s/spec.json",
        "/s/result.json",
    ]
    assert [argv for argv, _ in started] == [[a.format(i) for a in agent] for i in (0, 1)]
    env = {
        "PATH": "/bin",
        "PYTHONUNBUFFERED": "1",
        "GLOO_SOCKET_IFNAME": "lo",
        "OMP_NUM_THREADS": "1",
    }
    assert [e for _, e in started] == [env, env]


def test_local_one_node_is_standalone_and_single_is_one_process():
    one = RunSpec("w", "cpu", "ddp", 8, 1, world_size=2)
    assert local.commands(one, CELL, "python", base={})[0][0] == [
        "python",
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
        "-m",
        "stbench.child.cell",
        "/s/spec.json",
        "/s/result.json",
    ]
    assert local.commands(RunSpec("w", "cpu", "single", 8, 1), CELL, "python", base={})[0][0] == [
        "python",
        "-m",
        "stbench.child.cell",
        "/s/spec.json",
        "/s/result.json",
    ]


def test_local_nccl_nodes_see_their_own_gpus():
    spec = RunSpec("w", "cuda", "ddp", 8, 1, world_size=4, nodes=2, params=(("backend", "auto"),))
    envs = [e["CUDA_VISIBLE_DEVICES"] for _, e in local.commands(spec, CELL, "python", base={})]
    assert envs == ["0,1", "2,3"]
    gloo = RunSpec("w", "cuda", "ddp", 8, 1, world_size=4, nodes=2, params=(("backend", "gloo"),))
    assert all(
        "CUDA_VISIBLE_DEVICES" not in e for _, e in local.commands(gloo, CELL, "python", base={})
    )


def test_srun_step_of_two_nodes():
    argv = srun.command(SPEC, CELL, "python", {"SLURM_CPUS_PER_TASK": "4"}, timeout=600)
    assert argv == [
        "srun",
        "--nodes=2",
        "--ntasks=2",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
        JOB,
        "--cpus-per-task=4",
        "--time=10",
        "bash",
        "-c",
        NODE,
    ]


@pytest.mark.slurm  # submitit checks its parameters against the srun it finds
def test_slurm_job_of_two_nodes():
    launch = Launch("slurm", parse_slurm(["partition=gpu", "cpus_per_task=4", "reservation=r1"]))
    opts = slurm.job_options(SPEC, launch, timeout=601)
    assert opts == {
        "job_name": JOB[11:],
        "nodes": 2,
        "ntasks_per_node": 1,
        "time": 11,
        "cpus_per_task": 4,
        "partition": "gpu",
        "reservation": "r1",
    }
    params = slurm.submitit_parameters(opts)
    assert params == {
        "name": JOB[11:],
        "nodes": 2,
        "tasks_per_node": 1,
        "timeout_min": 11,
        "cpus_per_task": 4,
        "slurm_partition": "gpu",
        "slurm_srun_args": ["--kill-on-bad-exit=1", "--cpus-per-task=4"],
        "slurm_additional_parameters": {"reservation": "r1"},
    }
    import submitit

    submitit.AutoExecutor(folder="unused/%j", cluster="slurm").update_parameters(
        **params
    )  # submitit accepts them
    assert torchrun.slurm_node_script(SPEC, "python", CELL) == NODE
    cuda = RunSpec("w", "cuda", "ddp", 8, 1, world_size=4, nodes=2)
    assert (
        slurm.job_options(cuda, Launch("slurm", (("time", "02:00:00"),)), None)["gpus_per_node"]
        == 2
    )
    assert slurm.submitit_parameters({"time": "02:00:00"})["slurm_time"] == "02:00:00"


def test_dry_run_prints_scripts_and_writes_nothing(tmp_path):
    proc = stbench(
        "run",
        "cnn-strain",
        "--smoke",
        "--strategy",
        "ddp",
        "--nproc",
        "2",
        "--nnodes",
        "2",
        "--epochs",
        "1",
        "--launcher",
        "slurm",
        "--timeout",
        "600",
        "--slurm",
        "partition=gpu",
        "--dry-run",
        "--out",
        tmp_path / "results",
        check=True,
    )
    assert not (tmp_path / "results").exists()
    spec = json.loads(proc.stdout.split("<<'SPEC'\n")[1].split("\nSPEC")[0])
    run_id = spec["run_id"]  # the id the cell was planned with travels in its spec
    assert run_id == identify(RunSpec.from_dict(spec)).run_id and spec["nodes"] == 2
    assert spec["world_size"] == 4
    assert proc.stdout.startswith(f"""\
# cell 1/1: cnn-strain cpu ddp 2x2 batch=64 epochs=1 round 1 (run_id {run_id})
#!/bin/bash
#SBATCH --job-name=stbench-{run_id}
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --time=10
#SBATCH --partition=gpu
cat > {run_id}.spec.json <<'SPEC'
""")
    step = proc.stdout.split("\nSPEC\n")[1].splitlines()[0]
    assert step.startswith(
        f"srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --kill-on-bad-exit=1 "
        f"--job-name=stbench-{run_id} bash -c "
    )
    assert (
        '--node-rank="$SLURM_NODEID"' in step and f"stbench.child.cell {run_id}.spec.json" in step
    )
    assert proc.stdout.endswith(
        "#SBATCH --time=10\n#SBATCH --partition=gpu\n"
        "stbench run cnn-strain --smoke --strategy ddp --nproc 2 --nnodes 2 --epochs 1 "
        f"--launcher srun --timeout 600 --out {tmp_path / 'results'}\n"
    )


def test_study_script_runs_the_same_command_through_srun():
    argv = [
        "/v/bin/stbench",
        "run",
        "w",
        "--launcher=slurm",
        "--slurm",
        "a=b",
        "--slurm=c=d",
        "--dry-run",
        "--nproc",
        "2",
    ]
    assert sbatch.as_srun(argv) == ["stbench", "run", "w", "--launcher=srun", "--nproc", "2"]
    assert sbatch.as_srun(["x", "run", "w"]) == ["stbench", "run", "w", "--launcher", "srun"]


@pytest.mark.parametrize(
    "args,message",
    [
        (["--slurm", "partition"], "--slurm 'partition' is malformed; expected key=value"),
        (
            ["--launcher", "slurm", "--timeout", "60", "--slurm", "nodes=3"],
            "--slurm nodes is set by stbench (--nnodes)",
        ),
        (
            ["--launcher", "slurm", "--timeout", "60", "--slurm", "cpus_per_task=many"],
            "--slurm cpus_per_task='many' is not a valid int",
        ),
        (
            ["--slurm", "partition=gpu"],
            "--slurm options apply to --launcher slurm, not --launcher local",
        ),
        (
            ["--launcher", "slurm"],
            "--launcher slurm needs a time limit for its jobs: give --timeout SECONDS",
        ),
        (["--launcher", "pbs"], "--launcher 'pbs' is unknown; valid: local, slurm, srun"),
        (["--nnodes", "0"], "--nnodes 0 must be a positive integer"),
    ],
)
def test_bad_launcher_options_are_one_line(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "faulty", "--strategy", "ddp", *args, "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and message in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_missing_slurm_is_one_line_before_anything_is_written(tmp_path):
    """No Slurm on the PATH (only the venv's own tools), no allocation in the environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["PATH"] = str(Path(sys.executable).parent)
    exe = Path(sys.executable).parent / "stbench"
    cases = {
        "slurm": "--launcher slurm needs Slurm's sbatch and sacct on the PATH; none found",
        "srun": "--launcher srun needs Slurm's srun on the PATH; none found",
    }
    import subprocess

    for launcher, message in cases.items():
        proc = subprocess.run(
            [exe, "run", "faulty", "--launcher", launcher, "--timeout", "60", "--out", tmp_path],
            capture_output=True,
            text=True,
            env=env,
        )
        assert proc.returncode == 2 and proc.stderr.startswith(f"error: {message}"), proc.stderr
        assert proc.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []
    env["PATH"] = os.environ["PATH"]
    proc = subprocess.run(
        [exe, "run", "faulty", "--launcher", "srun", "--out", tmp_path],
        capture_output=True,
        text=True,
        env=env,
    )
    if (
        "needs Slurm's srun" not in proc.stderr
    ):  # a machine with Slurm installed: no allocation here
        assert (
            proc.returncode == 2
            and "runs inside a Slurm allocation (salloc or an sbatch script)" in proc.stderr
        )
    assert list(tmp_path.iterdir()) == []


def test_allocation_size_is_read_from_the_environment():
    assert srun.allocation_nodes({"SLURM_JOB_NUM_NODES": "2"}) == 2
    assert srun.allocation_nodes({"SLURM_NNODES": "3"}) == 3
    assert srun.allocation_nodes({}) is None
    assert (
        srun.step_args({"SLURM_CPUS_PER_TASK": "8"}) == ("--cpus-per-task=8",)
        and srun.step_args({}) == ()
    )


def test_launch_options_round_trip_through_the_manifest():
    launch = make_launch("slurm", ["partition=gpu", "mem_gb=64", "cpus-per-task=8"], 60.0)
    assert launch.options == {"cpus_per_task": 8, "mem_gb": 64.0, "partition": "gpu"}
    assert Launch.from_dict(json.loads(json.dumps(launch.to_dict()))) == launch


def test_dry_run_of_local_and_srun_prints_each_nodes_command(tmp_path, capsys):
    def dry(*args):
        with pytest.raises(SystemExit) as exit_info:
            main(
                [
                    "run",
                    "cnn-strain",
                    "--smoke",
                    "--strategy",
                    "ddp",
                    "--nproc",
                    "2",
                    "--nnodes",
                    "2",
                    "--epochs",
                    "1",
                    *args,
                    "--dry-run",
                    "--out",
                    str(tmp_path),
                ]
            )
        assert exit_info.value.code == 0
        return capsys.readouterr().out

    text = dry()
    run_id = text.split("(run_id ")[1][:12]
    assert text.startswith(
        "# cell 1/1: cnn-strain cpu ddp 2x2 batch=64 epochs=1 round 1 "
        f"(run_id {run_id})\ncat > {run_id}.spec.json <<'SPEC'\n"
    )
    files = f"{run_id}.spec.json {run_id}.result.json"
    assert text.endswith(f"""\
# on node 0 of 2:
python -m torch.distributed.run --nnodes=2 --nproc-per-node=2 --node-rank=0 --rdzv-backend=static \
--master-addr="$MASTER_ADDR" --master-port=29500 -m stbench.child.cell {files}
# on node 1 of 2:
python -m torch.distributed.run --nnodes=2 --nproc-per-node=2 --node-rank=1 --rdzv-backend=static \
--master-addr="$MASTER_ADDR" --master-port=29500 -m stbench.child.cell {files}
""")
    step = dry("--launcher", "srun", "--timeout", "90").splitlines()[-1]
    assert step.startswith(
        "srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --kill-on-bad-exit=1 "
        f"--job-name=stbench-{run_id} --time=2 bash -c "
    )
    assert list(tmp_path.iterdir()) == []
