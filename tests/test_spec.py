"""Matrix expansion, skip reasons and argument parsing: pure, no torch."""

import pytest

from stbench.cli.options import spread_lists
from stbench.errors import StbenchError
from stbench.plan.skips import skip_reason
from stbench.plan.spec import MatrixSpec, RunSpec, check_device, expand, identify, parse_set


def test_expand_order_and_values():
    m = MatrixSpec(
        "w",
        devices=("cpu", "cuda"),
        batch_sizes=(32, 64),
        epochs=(1,),
        base_params=(("lr", 0.1),),
        axes=(("mode", ("a", "b")),),
        repeats=2,
        seed=7,
    )
    cells = expand(m)
    assert len(cells) == 2 * 2 * 2 * 2
    assert [(c.repeat, c.device, c.batch_size, c.param_dict["mode"]) for c in cells[:8]] == [
        (0, "cpu", 32, "a"),
        (0, "cpu", 32, "b"),
        (0, "cpu", 64, "a"),
        (0, "cpu", 64, "b"),
        (0, "cuda", 32, "a"),
        (0, "cuda", 32, "b"),
        (0, "cuda", 64, "a"),
        (0, "cuda", 64, "b"),
    ]
    assert all(c.repeat == 1 for c in cells[8:])  # repeats outermost
    assert cells[0].params == (("lr", 0.1), ("mode", "a")) and cells[0].seed == 7
    assert expand(m) == cells  # deterministic


def test_each_repeat_gets_its_own_seed_when_the_matrix_says_so():
    m = MatrixSpec("w", batch_sizes=(32, 64), repeats=3, seed=7, seed_per_repeat=True)
    cells = expand(m)
    assert [(c.repeat, c.batch_size, c.seed) for c in cells] == [
        (0, 32, 7),
        (0, 64, 7),
        (1, 32, 8),
        (1, 64, 8),
        (2, 32, 9),
        (2, 64, 9),
    ]
    assert len({c.run_id for c in cells}) == 6
    # --same-seed: every repeat the study's seed; repeat 0 is the same cell either way
    same = expand(MatrixSpec("w", batch_sizes=(32, 64), repeats=3, seed=7, seed_per_repeat=False))
    assert [c.seed for c in same] == [7] * 6
    assert [c.run_id for c in cells[:2]] == [c.run_id for c in same[:2]]


def test_nproc_applies_to_ddp_only():
    m = MatrixSpec("w", strategies=("single", "ddp"), nprocs=(1, 2, 4))
    cells = expand(m)
    assert [(c.strategy, c.world_size) for c in cells] == [
        ("single", 1),
        ("ddp", 1),
        ("ddp", 2),
        ("ddp", 4),
    ]


def test_run_id_is_set_once_stable_and_distinct():
    """identify is the one function that computes an id: from what the cell is, every field and
    parameter; the id then travels with the cell (JSON, the manifest) and is never recomputed."""
    a = identify(RunSpec("w", "cpu", "single", 32, 1, params=(("lr", 0.1),)))
    assert len(a.run_id) == 12 and identify(a) == a
    assert a.run_id == identify(RunSpec("w", "cpu", "single", 32, 1, params=(("lr", 0.1),))).run_id
    assert (
        a.run_id
        != identify(RunSpec("w", "cpu", "single", 32, 1, repeat=1, params=(("lr", 0.1),))).run_id
    )
    assert a.run_id != identify(RunSpec("w", "cpu", "single", 32, 1, params=(("lr", 0.2),))).run_id
    assert RunSpec.from_json(a.to_json()) == a and RunSpec("w", "cpu", "single", 32, 1).run_id == ""
    assert all(c.run_id == identify(c).run_id for c in expand(MatrixSpec("w", repeats=2)))


@pytest.mark.parametrize(
    "spec,gpus,expected",
    [
        (RunSpec("w", "cpu", "single", 1, 1), 0, None),
        (
            RunSpec("w", "cuda", "single", 1, 1),
            0,
            "cuda requested, but no GPU is visible (torch.cuda.is_available() is False)",
        ),
        (
            RunSpec("w", "cuda:1", "single", 1, 1),
            1,
            "cuda:1 requested, but only 1 GPU(s) are visible (cuda:0..cuda:0)",
        ),
        (
            RunSpec("w", "cuda", "ddp", 1, 1, world_size=4, params=(("backend", "auto"),)),
            2,
            "ddp with nproc=4 on cuda needs 4 GPUs, 2 visible "
            "(NCCL wants a GPU per rank; gloo ranks may share one: --set backend=gloo)",
        ),
        (
            RunSpec("w", "cpu", "ddp", 1, 1, world_size=2),
            0,
            "strategy ddp is not supported by w (supported: single)",
        ),
    ],
)
def test_skip_reason(spec, gpus, expected):
    strategies = ("single",) if expected and "strategy" in expected else ("single", "ddp")
    assert skip_reason(spec, gpus, strategies) == expected


def test_bad_values_name_what_is_valid():
    with pytest.raises(StbenchError, match="valid: cpu, cuda, cuda:N"):
        check_device("gpu")
    with pytest.raises(StbenchError, match="expected key=value"):
        parse_set(["lr"])
    assert parse_set(["lr=1e-3, 1e-2"]) == [("lr", ["1e-3", "1e-2"])]


def test_spread_lists():
    argv = [
        "run",
        "w",
        "--device",
        "cpu",
        "cuda",
        "--epochs",
        "5",
        "10",
        "--set",
        "a=1,2",
        "--smoke",
    ]
    assert spread_lists(argv) == [
        "run",
        "w",
        "--device",
        "cpu",
        "--device",
        "cuda",
        "--epochs",
        "5",
        "--epochs",
        "10",
        "--set",
        "a=1,2",
        "--smoke",
    ]
    assert spread_lists(["run", "w", "--device=cuda"]) == ["run", "w", "--device=cuda"]


def test_a_command_that_takes_one_value_refuses_several_in_one_line():
    """`tune --batch-size` is the reference batch; several values were silently the last."""
    with pytest.raises(StbenchError, match="--batch-size 64 128: stbench tune takes one value"):
        spread_lists(["tune", "cnn-strain", "--batch-size", "64", "128"])
    assert spread_lists(["tune", "w", "--batch-size", "64"]) == ["tune", "w", "--batch-size", "64"]
    assert spread_lists(["run", "w", "--batch-size", "64", "128"]) == [
        "run", "w", "--batch-size", "64", "--batch-size", "128",
    ]  # fmt: skip


def test_a_renamed_option_is_refused_in_one_line_naming_the_new_one():
    """One concept, one name in every command: rounds are `--rounds`, a device is `--device`."""
    with pytest.raises(StbenchError, match=r"--repeat is now --rounds \(stbench run --rounds"):
        spread_lists(["run", "cnn-strain", "--repeat", "3"])
    with pytest.raises(StbenchError, match="--gpu is now --device"):
        spread_lists(["gpu-vs-cpu", "cnn-strain", "--gpu=cuda"])
    # the same word is no rename where the command never had it
    assert spread_lists(["tune", "w", "--rounds", "3"]) == ["tune", "w", "--rounds", "3"]
