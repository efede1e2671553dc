"""CLI parsing with the engine patched: the exact cells a command line asks for."""

from pathlib import Path

import pytest

from stbench.cli import main
from stbench.plan.spec import RunSpec, identify
from stbench.runner import study


@pytest.fixture
def captured(monkeypatch):
    seen = {}

    def fake_execute(plan, env, timeout, **callbacks):
        seen.update(plan=plan, timeout=timeout)
        return []

    monkeypatch.setattr(study, "run_study", fake_execute)
    return seen


def run_cli(argv):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    return exit_info.value.code


def test_run_passes_the_exact_cells(captured, tmp_path):
    code = run_cli(
        [
            "run",
            "cnn-strain",
            "--smoke",
            "--device",
            "cpu",
            "--epochs",
            "1",
            "2",
            "--batch-size",
            "32",
            "--set",
            "lr=0.01,0.02",
            "--rounds",
            "2",
            "--seed",
            "3",
            "--timeout",
            "30",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    plan = captured["plan"]
    assert captured["timeout"] == 30
    assert plan.folder.parent == tmp_path and plan.folder.name.endswith("-cnn-strain")
    base = dict(
        allocator="keep",
        backend="auto",
        bucket_cap_mb=25.0,
        checkpoint="none",
        compile="none",
        data="generated",
        ddp_log_every=100,
        prefetch=2,
        precision="default",
        loader="vectorized",
        lr_scaling="none",
        lr_warmup_steps=0,
        max_eval_batches=0,
        max_steps=0,
        n_samples=2048,
        noise=0.01,
        threads=1,
        val_fraction=0.25,
        warmup_steps=2,
        workers=0,
        lr_base_batch=75,
        target=0.0,
        eval_every=0,
        eval_every_s=0.0,
        time_budget=0.0,
        stop_at_target=False,
        interop_threads=0,
        bind="none",
        max_eval_samples=0,
    )
    expected = [
        identify(
            RunSpec(
                "cnn-strain",
                "cpu",
                "single",
                32,
                epochs,
                repeat=repeat,
                seed=3 + repeat,
                params=tuple(sorted({**base, "lr": lr}.items())),
            )
        )  # each repeat its seed
        for repeat in (0, 1)
        for epochs in (1, 2)
        for lr in (0.01, 0.02)
    ]
    assert list(plan.cells) == expected
    assert [RunSpec.from_dict(c) for c in plan.manifest["cells"]] == expected  # each kept whole
    assert plan.manifest["matrix"]["axes"] == (("lr", (0.01, 0.02)),)
    assert plan.manifest["matrix"]["seed_per_repeat"] is True


def test_same_seed_gives_every_repeat_the_seed(captured):
    assert (
        run_cli(["run", "cnn-strain", "--smoke", "--rounds", "3", "--seed", "5", "--same-seed"])
        == 0
    )
    assert [c.seed for c in captured["plan"].cells] == [5, 5, 5]
    assert captured["plan"].manifest["matrix"]["seed_per_repeat"] is False


def test_defaults_come_from_the_preset(captured):
    assert run_cli(["run", "cnn-strain"]) == 0
    (cell,) = captured["plan"].cells
    assert (cell.device, cell.strategy, cell.batch_size, cell.epochs) == ("cpu", "single", 75, 3)
    assert cell.param_dict["n_samples"] == 400_000 and cell.param_dict["lr"] == 4.73e-4
    assert captured["plan"].folder.parent == Path("results")


def test_ddp_axes(captured):
    assert (
        run_cli(
            [
                "run",
                "cnn-strain",
                "--strategy",
                "single",
                "ddp",
                "--nproc",
                "1",
                "2",
                "--set",
                "lr_scaling=linear",
            ]
        )
        == 0
    )
    assert [(c.strategy, c.world_size) for c in captured["plan"].cells] == [
        ("single", 1),
        ("ddp", 1),
        ("ddp", 2),
    ]
    assert {c.param_dict["lr_scaling"] for c in captured["plan"].cells} == {"linear"}


@pytest.mark.parametrize(
    "argv,message",
    [
        (
            ["run", "nope"],
            "unknown workload 'nope'; valid: cnn-strain, dcrnn-pems, faulty, lstm-era5",
        ),
        (
            ["run", "cnn-strain", "--set", "colour=red"],
            "unknown parameter 'colour' for cnn-strain; valid: allocator, backend, bind, "
            "bucket_cap_mb, checkpoint, compile, data, ddp_log_every, eval_every, eval_every_s",
        ),
        (["run", "cnn-strain", "--set", "lr=fast"], "--set lr='fast' is not a valid float"),
        (
            ["run", "cnn-strain", "--set", "loader=magic"],
            "--set loader='magic' is not allowed; valid: vectorized, per-item",
        ),
        (
            ["run", "cnn-strain", "--device", "tpu"],
            "--device 'tpu' is not a device; valid: cpu, cuda, cuda:N",
        ),
        (
            ["run", "cnn-strain", "--preset", "huge"],
            "unknown preset 'huge' for cnn-strain; valid: default, smoke, paper, large-batch",
        ),
        (["run", "cnn-strain", "--batch-size", "0"], "--batch-size 0 must be a positive integer"),
    ],
)
def test_bad_input_is_one_clear_line(captured, capsys, argv, message):
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
    assert "Traceback" not in err
    assert "plan" not in captured


def test_run_takes_its_options_as_one_typed_request_whatever_typer_passes(tmp_path, capsys):
    """`run` builds one typed request (RunRequest: the planner's Request and how its cells run)
    from its own arguments, converting each: on the first H100 acceptance the GPU machine's typer
    passed --out as a str through Click's ctx.params, and every `stbench run` failed on
    `'str' object has no attribute 'exists'`. Here the callback gets Click's raw strings."""
    from stbench.cli.running import run_command

    run_command(
        workload="cnn-strain", smoke=True, out=str(tmp_path / "out"), resume=None
    )  # no exit: ok
    (folder,) = (tmp_path / "out").iterdir()
    assert (folder / "runs.csv").exists()


@pytest.mark.parametrize(
    "command",
    ["run", "gpu-vs-cpu", "compare", "report", "tune", "profile", "list", "env", "doctor", "gate"]
    + ["data prepare"],
)
def test_help_speaks_of_values_never_of_python_types(command, capsys, monkeypatch):
    """A user reads `PATHS` and `--metric COLUMN`, never `PATHS <list[Path]>` or `<str>`."""
    import re

    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(SystemExit) as ended:
        main([*command.split(), "--help"])
    assert ended.value.code == 0
    said = capsys.readouterr().out
    assert said.startswith(f"Usage: stbench {command} ")
    assert re.findall(r"<[a-zA-Z_\[\], ]+>", said) == []


def test_a_progress_line_names_what_sets_its_cell_apart_and_its_round():
    """Two cells of one device, batch and epochs differ in a parameter: each progress line says
    which (`run --set threads=0,1` printed identical lines before), and so does each cell's
    comment in a printed script (`--dry-run`, sbatch: they said `repeat=0` for both)."""
    from stbench.plan.spec import cell_label, varied_params
    from stbench.runner.processes import label

    cells = [
        identify(RunSpec("cnn-strain", "cpu", "single", 64, 3, repeat=r, params=p))
        for r in (0, 1)
        for p in ((("lr", 0.1), ("threads", 0)), (("lr", 0.1), ("threads", 1)))
    ]
    varied = varied_params(cells)
    assert varied == ("threads",)
    labels = [cell_label(c, varied) for c in cells]
    assert labels[1] == "cpu single batch=64 epochs=3 threads=1 round 1"
    assert len(set(labels)) == len(cells)
    said = label(cells[3], cells)
    assert (
        said
        == f"cnn-strain cpu single batch=64 epochs=3 threads=1 round 2 (run_id {cells[3].run_id})"
    )


def test_a_questions_progress_into_a_pipe_names_only_the_windows_that_did_not_end_ok(capsys):
    """A bar over the budget on a terminal; into a file or a pipe (here), a line for each window
    that did not end ok, named by what sets it apart and its round, and nothing for the others."""
    from stbench.cli.render_run import budget_progress

    spec = identify(RunSpec("cnn-strain", "cuda", "single", 4096, 1, repeat=2, params=()))
    with budget_progress(60, [spec]) as on_row:
        on_row(spec, {"status": "ok", "reason": ""})
        on_row(spec, {"status": "oom", "reason": "CUDA out of memory"})
    said = capsys.readouterr().err
    assert said == "  cuda batch=4096 round 3: oom CUDA out of memory\n"


def test_the_run_summary_says_what_threads_auto_chose():
    """`threads 0` asks stbench to choose: the summary says so and what it chose."""
    import math

    from stbench.cli.render_run import _summary_cell

    assert _summary_cell({"p.threads": 0, "threads": 2.0}, "p.threads") == "auto: 2"
    assert _summary_cell({"p.threads": 0, "threads": math.nan}, "p.threads") == "auto"
    assert _summary_cell({"p.threads": 1, "threads": 1.0}, "p.threads") == "1"
