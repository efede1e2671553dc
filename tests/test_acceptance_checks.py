"""The GPU acceptance's checks (benchmarks.acceptance) on small hand-made result folders: every
judge fails on numbers that must fail it (a check that cannot fail proves nothing), a folder with
nothing to judge fails. The rehearsal's verdicts: test_acceptance_rehearsal.py."""

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from benchmarks.acceptance import checks_answers as answers
from benchmarks.acceptance import checks_rows as rows
from benchmarks.acceptance import checks_traces as traces
from benchmarks.acceptance import reference
from benchmarks.acceptance.verdicts import FAIL, PASS, UNTESTED, NothingToJudge, run_check
from tests.helpers import NOT_COMPILED
from tests.helpers import acceptance_check as one
from tests.helpers import acceptance_folder as write_runs


def test_a_folder_with_a_cell_not_ok_or_no_study_fails_every_check_with_its_reason(tmp_path):
    folder = write_runs(
        tmp_path / "a", [{"run_id": "a", "status": "failed", "reason": NOT_COMPILED}]
    )
    for judge in (
        rows.phases_sum,
        rows.nvml,
        rows.checkpoint,
        rows.memory_prediction,
        traces.no_syncs,
        reference.cpu_gpu_agree,
    ):
        check = one("x", judge, folder)
        assert (
            check.status == FAIL
            and check.detail == f"cells did not end ok: a: failed {NOT_COMPILED}"
        )
    assert (
        one("x", rows.phases_sum, tmp_path / "nowhere").detail
        == "no study in nowhere (the step wrote no runs.csv)"
    )


def test_cpu_gpu_agree_compares_each_cuda_cell_with_its_carried_cpu_twin(tmp_path):
    params = json.dumps({"lr": 0.01})
    cell = {"run_id": "b", "params": params, "final_train_loss": 0.103, "val_value": 0.051}
    folder = write_runs(tmp_path / "a", [cell])
    twin = {
        **dict.fromkeys(reference.KEY, ""),
        **{
            k: str(v)
            for k, v in {
                "workload": "cnn-strain",
                "strategy": "single",
                "world_size": 1,
                "batch_size": 64,
                "epochs": 1,
                "seed": 0,
                "params": params,
                "final_train_loss": 0.1,
                "val_value": 0.05,
            }.items()
        },
    }
    ref = tmp_path / "ref.json"
    ref.write_text(json.dumps({"rows": [twin]}))
    check = one("cpu-gpu-agree", reference.cpu_gpu_agree, folder, reference=ref)
    assert check.status == PASS and "largest difference 3.000%" in check.detail
    ref.write_text(json.dumps({"rows": [{**twin, "final_train_loss": "0.2"}]}))
    check = one("cpu-gpu-agree", reference.cpu_gpu_agree, folder, reference=ref)
    assert (
        check.status == FAIL
        and "final_train_loss: 0.2 vs 0.103 (tolerance 5% + 0.0001)" in check.detail
    )
    ref.write_text(json.dumps({"rows": [{**twin, "seed": "1"}]}))  # a stale reference: no twin
    check = one("cpu-gpu-agree", reference.cpu_gpu_agree, folder, reference=ref)
    assert (
        check.status == FAIL
        and "has no CPU twin" in check.detail
        and "--cpu-reference" in check.detail
    )


def test_the_carried_cpu_reference_has_a_twin_for_every_cuda_smoke_cell_planned_now(
    tmp_path, monkeypatch
):
    """A smoke preset that changed makes the GPU run's cells differ from the carried CPU rows:
    rewrite them (`python -m benchmarks.acceptance --cpu-reference`). Planned as on one GPU."""
    import torch

    from benchmarks.acceptance.steps import SMOKE_SETS
    from stbench.plan.planner import Request, plan_new
    from stbench.runner import envinfo
    from stbench.runner.study import identity

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    ref, env = reference.load(), envinfo.collect()
    for workload, sets in SMOKE_SETS.items():
        req = Request(
            workload, devices=("cuda",), smoke=True, sets=tuple(sets.split()[1::2]), out=tmp_path
        )
        cells = plan_new(req, env).cells
        assert cells and all(reference.key(vars(identity(c))) in ref for c in cells), workload


def _world(run_id, strategy, backend, world, loss, sync, status="ok", reason=""):
    return {
        "run_id": run_id,
        "strategy": strategy,
        "backend": backend,
        "world_size": world,
        "final_train_loss": loss,
        "sync_s": sync,
        "status": status,
        "reason": reason,
    }


def test_distributed_is_untested_without_an_nccl_world_and_fails_without_a_sync_or_a_world(
    tmp_path,
):
    # the planner's reason on the H100 named no backend: the row's backend column decides
    skipped = "ddp with nproc=2 on cuda needs 2 GPUs, 1 visible"
    cells = [
        _world("a", "ddp", "nccl", 1, 0.5, 0),
        _world("b", "ddp", "nccl", 2, "", "", "skipped", skipped),
        _world("c", "ddp", "gloo", 2, 0.5, 0.2),
        _world("d", "zero1", "gloo", 2, 0.501, 0.3),
    ]
    folder = write_runs(tmp_path / "a", cells)
    nccl = one("n", rows.distributed, folder, backend="nccl")
    assert (
        nccl.status == UNTESTED and "no nccl world of 2+ ranks ran here" in nccl.detail
    )  # never a PASS
    assert one("g", rows.distributed, folder, backend="gloo").status == PASS
    cells[3]["sync_s"] = 0
    check = one("g", rows.distributed, write_runs(tmp_path / "b", cells), backend="gloo")
    assert check.status == FAIL and "without a measured sync: ['d']" in check.detail
    cells[3].update(sync_s=0.3, final_train_loss=0.9)
    assert (
        one("g", rows.distributed, write_runs(tmp_path / "c", cells), backend="gloo").status == FAIL
    )
    check = one("g", rows.distributed, write_runs(tmp_path / "d", cells[:1]), backend="gloo")
    assert check.status == FAIL and "nothing was checked" in check.detail  # no gloo world at all
    cells[2].update(status="skipped", reason=skipped)  # a skipped gloo world is no pass
    check = one("g", rows.distributed, write_runs(tmp_path / "e", cells), backend="gloo")
    assert check.status == FAIL and "c: skipped" in check.detail


def test_memory_prediction_fails_outside_half_to_one_and_a_half(tmp_path):
    row = {
        "run_id": "s",
        "workload": "stnn",
        "params": json.dumps({"relations": "dense"}),
        "predicted_mb": 40,
    }
    check = one(
        "m", rows.memory_prediction, write_runs(tmp_path / "a", [{**row, "peak_gpu_mb": 50}])
    )
    assert check.status == PASS and "dense 1.25x" in check.detail
    check = one(
        "m",
        rows.memory_prediction,
        write_runs(tmp_path / "b", [{**row, "predicted_mb": 4, "peak_gpu_mb": 35}]),
    )
    assert check.status == FAIL and "dense 8.75x (must be 0.5-1.5x)" in check.detail
    two = [{**row, "run_id": str(b), "batch_size": b, "peak_gpu_mb": 44} for b in (10, 500)]
    check = one("m", rows.memory_prediction, write_runs(tmp_path / "c", two))
    assert "dense at 10 pairs 1.10x, dense at 500 pairs 1.10x" in check.detail  # one line each


def test_no_syncs_fails_on_a_trace_without_profiled_steps(tmp_path):
    folder = write_runs(tmp_path / "a", [{"run_id": "p"}])
    (folder / "study" / "profile" / "p").mkdir(parents=True)
    (folder / "study" / "profile" / "p" / "trace.json").write_text(
        json.dumps(
            {
                "traceEvents": [
                    {"name": "cudaStreamSynchronize", "cat": "cuda_runtime", "ts": 10, "dur": 1}
                ]
            }
        )
    )
    check = one("no-syncs", traces.no_syncs, folder)
    assert check.status == FAIL and "no ProfilerStep window" in check.detail


def test_the_doctors_checks_are_read_from_its_file_and_a_missing_file_fails(tmp_path):
    (tmp_path / "doctor.json").write_text(
        json.dumps(
            {
                "checks": [
                    {
                        "name": "peaks",
                        "device": "cuda",
                        "status": "PASS",
                        "detail": "fine",
                        "seconds": 12.34,
                    },
                    {"name": "sampling", "device": "cuda", "status": "SKIP", "detail": "no NVML"},
                ]
            }
        )
    )
    found = run_check("doctor", rows.doctor_checks, tmp_path)
    assert [(c.name, c.status) for c in found] == [
        ("doctor peaks cuda", PASS),
        ("doctor sampling cuda", UNTESTED),
    ]
    assert found[0].detail == "fine (12.3 s)" and found[1].detail == "no NVML"  # its time, if kept
    assert run_check("doctor", rows.doctor_checks, tmp_path / "nowhere")[0].status == FAIL


# --- every judge fails on numbers that must fail it -------------------------------------------


def test_agreement_fails_beyond_its_tolerance_on_nan_and_with_nothing_to_compare():
    assert rows.judge_agree("a", {"loss": (0.100, 0.103)}, 0.05).figures["worst"] == pytest.approx(
        0.03
    )
    for pairs in ({"loss": (0.1, 0.2)}, {"loss": (0.1, float("nan"))}, {}):
        assert rows.judge_agree("a", pairs, 0.05).status == FAIL


def test_a_share_fails_outside_its_range_and_on_nan():
    assert rows.judge_share("p", "phases", 0.9, 0.7, 1.01).detail == "phases: 90.0%"
    for bad in (0.5, 1.2, float("nan")):
        assert rows.judge_share("p", "phases", bad, 0.7, 1.01).status == FAIL


def test_an_h2d_phase_shorter_than_a_bare_copy_fails():
    assert rows.judge_h2d(120e-6, 100e-6).detail.startswith("h2d 120.0 us/step")
    check = rows.judge_h2d(40e-6, 100e-6)  # the 2-us under-measurement an old check let through
    assert check.status == FAIL and "under-measured" in check.detail


def test_syncs_fail_without_a_profiled_step_beyond_the_limit_and_beyond_one_wait_per_copy():
    assert traces.judge_syncs({}, 0).status == FAIL  # an old no-syncs passed here
    assert traces.judge_syncs({1: [], 2: []}, 0).detail.startswith("2 profiled steps")
    assert (
        "step 2: 1 host-device syncs"
        in traces.judge_syncs({1: [], 2: ["cudaStreamSynchronize"]}, 0).detail
    )
    waits = frozenset({"cudaEventSynchronize"})
    assert traces.judge_syncs({1: ["cudaEventSynchronize"] * 2}, 0, waits, {1: 4}).status == PASS
    assert traces.judge_syncs({1: ["cudaEventSynchronize"] * 3}, 0, waits, {1: 2}).status == FAIL
    assert traces.judge_syncs({1: ["cudaDeviceSynchronize"]}, 0, waits, {1: 9}).status == FAIL


def test_offload_chunks_on_the_compute_stream_fail_its_batches_there_pass_and_overlap_is_a_figure():
    kernels = [(90, 170, 7), (0, 500, 7)]
    chunk, batch = (100, 200, 20, 9_000_000), (0, 2, 7, 4_000)
    check = traces.judge_side_stream([chunk], [(90, 170, 7), (120, 130, 7)])
    assert check.status == PASS and "70% of their 0.1 ms overlaps compute" in check.detail
    # the H100's offload profile: each step's batch copied on the compute stream, beside chunks
    assert traces.judge_side_stream([chunk, batch], kernels).status == PASS
    on_compute = traces.judge_side_stream([chunk, (300, 400, 7, 9_000_000)], kernels)
    assert on_compute.status == FAIL and "ran on the compute stream" in on_compute.detail
    assert traces.judge_side_stream([(100, 200, 7, 9_000_000)], kernels).status == FAIL
    assert traces.judge_side_stream([], kernels).status == FAIL


def test_checkpoint_fails_unless_full_lowers_the_peak_with_sqrt_between():
    check = rows.judge_checkpoint({"none": 30, "sqrt": 20, "full": 10})
    assert check.status == PASS and check.detail.startswith("activation peak")
    # the H100's cells: sqrt's first segment holds nearly every activation of 3 blocks
    assert rows.judge_checkpoint({"none": 3.1, "sqrt": 3.1, "full": 2.2}).status == PASS
    for bad in (
        {"none": 30, "sqrt": 20, "full": 30},  # full lowers nothing
        {"none": 30, "sqrt": 35, "full": 10},  # sqrt above none
        {"none": 30, "sqrt": 5, "full": 10},  # sqrt below full
        {"none": 30, "full": 10},
    ):
        assert rows.judge_checkpoint(bad).status == FAIL


def test_nvml_fails_on_an_empty_field_no_sample_or_no_energy():
    from dataclasses import replace

    from stbench.store.rows import SystemRow

    good = SystemRow("r", 1.0, 90.0, 500.0, 95.0, 40.0, 97.0, 2000.0, 310.0)
    assert rows.judge_nvml([good], [950.0]).status == PASS
    assert (
        "empty fields ['gpu_power_w']"
        in rows.judge_nvml([replace(good, gpu_power_w=None)], [950.0]).detail
    )
    assert rows.judge_nvml([], [950.0]).status == FAIL
    assert rows.judge_nvml([good], [0.0]).status == FAIL


def test_memory_and_worlds_judges_fail_on_bad_numbers():
    assert rows.judge_memory({"dense": 1.0}).status == PASS
    assert rows.judge_memory({"dense": 0.3}).status == FAIL and rows.judge_memory({}).status == FAIL
    assert (
        rows.judge_worlds([_world("c", "ddp", "gloo", 2, 0.5, float("nan"))], "gloo").status == FAIL
    )


# --- the rehearsal's verdicts -------------------------------------------------------------------


def test_tf32_peak_fails_where_a_tf32_cell_divided_by_another_peak_or_none_ran_tf32():
    # the first H100 run's lstm-era5 cells: cuDNN at TF32, divided by the TF32 peak
    assert rows.judge_tf32_peak([("tf32", "tf32"), ("tf32", "tf32")]).status == PASS
    missed = rows.judge_tf32_peak([("tf32", "tf32"), ("tf32", "fp32")])
    assert missed.status == FAIL and "1 of 2" in missed.detail and "['fp32']" in missed.detail
    assert rows.judge_tf32_peak([("tf32", None)]).status == FAIL  # no fraction: no peak used
    assert rows.judge_tf32_peak([("fp32", "fp32")]).status == FAIL  # nothing ran at TF32


def test_a_question_fails_unless_every_size_has_five_rounds_and_the_largest_concluded():
    sizes = ["75", "600", "4096"]
    good = answers.judge_question(sizes, [], {s: 6 for s in sizes}, {s: True for s in sizes})
    assert good.status == PASS and "4096: 6 rounds" in good.detail
    left = answers.judge_question(sizes, ["4096"], {"75": 6, "600": 6}, {"75": True, "600": True})
    assert left.status == FAIL and "not measured: 4096" in left.detail
    few = answers.judge_question(
        sizes, [], {"75": 6, "600": 2, "4096": 6}, dict.fromkeys(sizes, True)
    )
    assert few.status == FAIL and "fewer than 5 paired rounds at 600: 2" in few.detail
    open_ = answers.judge_question(sizes, [], {s: 6 for s in sizes}, {"4096": False})
    assert open_.status == FAIL and "not concluded at the largest size, 4096" in open_.detail


def test_the_question_check_has_nothing_to_judge_in_a_question_without_a_cuda_row(tmp_path):
    import shutil

    from tests.helpers import ROOT

    shutil.copytree(
        ROOT / "results" / "reference" / "ref-cpu2-cnn-strain-gpu-vs-cpu", tmp_path / "q"
    )
    with pytest.raises(NothingToJudge, match="no cuda row"):
        answers.question_concluded(tmp_path)


def test_a_bound_its_measured_step_beats_fails_and_the_h200s_committed_bounds_hold(tmp_path):
    """A GPU question's predictions for its own card: a lower bound above the step measured is
    wrong; the figures say how tight each is and each estimate's error."""
    import shutil

    from tests.helpers import ROOT

    good = answers.judge_prediction("H200", {"75": (0.5, 2.2, 2.0), "600": (1.0, 1.8, 2.0)})
    assert good.status == PASS and "75: 4.0x, estimate +10%" in good.detail
    bad = answers.judge_prediction("H200", {"75": (0.5, 2.2, 2.0), "600": (2.5, 2.6, 2.0)})
    assert bad.status == FAIL and "exceeds the measured step at 600" in bad.detail
    assert answers.judge_prediction("H200", {}).status == FAIL  # nothing predicted: nothing holds
    reference = ROOT / "results" / "reference"
    shutil.copytree(reference / "ref-h200-lstm-era5-gpu-vs-cpu", tmp_path / "h200" / "q")
    found = answers.prediction_holds(tmp_path / "h200")
    assert found.status == PASS and set(found.figures) == {"128", "1024", "4096"}
    assert "128: 3.1x" in found.detail
    shutil.copytree(reference / "ref-cpu2-cnn-strain-gpu-vs-cpu", tmp_path / "cpu" / "q")
    with pytest.raises(NothingToJudge, match="no cuda row"):
        answers.prediction_holds(tmp_path / "cpu")


def test_the_kernel_count_fails_where_the_cpus_count_exceeds_the_measured_launches(tmp_path):
    """The GPU predictions count a step's launches on the CPU and call the count a floor: a
    profile's kernels.csv with fewer launches a step than that count proves it wrong."""
    assert traces.judge_kernel_count("x", 60.0, 49.0).status == PASS
    bad = traces.judge_kernel_count("x", 40.0, 49.0)
    assert bad.status == FAIL and "the count is no floor" in bad.detail
    assert traces.judge_kernel_count("x", 60.0, 0.0).status == FAIL  # nothing was counted

    from tests.helpers import preset_params

    params = json.dumps(preset_params("lstm-era5"))
    folder = write_runs(
        tmp_path / "a", [{"run_id": "p", "workload": "lstm-era5", "params": params}]
    )
    profiled = folder / "study" / "profile" / "p"
    profiled.mkdir(parents=True)
    check = one("kernel-count", traces.kernel_count, folder)
    assert check.status == FAIL and "no kernels.csv" in check.detail
    # the CPU's count of the preset LSTM's launches: a step measured with fewer fails, one with
    # more passes
    from stbench.child.anatomy import measure
    from stbench.runner.predictions import SMALL_BATCHES

    counted = measure("lstm-era5", json.loads(params), SMALL_BATCHES).launches
    assert counted > 10
    for measured, status in ((counted - 10, FAIL), (counted + 10, PASS)):
        (profiled / "kernels.csv").write_text(
            f"kind,kernel,calls,per_step,device_ms\nkernel,a,{measured * 10},{measured},1.0\n"
        )
        check = one("kernel-count", traces.kernel_count, folder)
        assert check.status == status, check.detail
        assert f"{measured:,.1f} kernels, copies and memsets a step measured" in check.detail


def test_a_real_steps_operators_cheaper_on_the_host_than_the_bound_charges_fail(tmp_path):
    """The bound charges each operator at least the card's eager_op_us (gpus.toml): a profiled
    step whose operators took less each on the GPU's host proves it too high."""
    assert traces.judge_host_per_operator("x", 60, 0.6, 8.7).status == PASS  # 10 us each
    bad = traces.judge_host_per_operator("x", 60, 0.3, 8.7)  # 5 us each
    assert bad.status == FAIL and "more than a real step's took" in bad.detail
    assert traces.judge_host_per_operator("x", 0, 0.0, 8.7).status == FAIL  # nothing counted

    folder = write_runs(tmp_path / "a", [{"run_id": "p", "device_name": "NVIDIA H200"}])
    profiled = folder / "study" / "profile" / "p"
    profiled.mkdir(parents=True)
    check = one("host-per-operator", traces.host_per_operator, folder)
    assert check.status == FAIL and "no host.csv" in check.detail
    head = "step,operators,in_operators_ms,between_ms,threads\n"
    for inside, status in ((0.3, FAIL), (3.0, PASS)):  # 5 and 50 us an operator, 3 steps
        lines = "".join(f"{k},60,{inside},0.1,2\n" for k in (2, 3, 4))
        (profiled / "host.csv").write_text(head + lines)
        check = one("host-per-operator", traces.host_per_operator, folder)
        assert check.status == status, check.detail
        assert "60 operators a step" in check.detail and "against the bound's 8.7" in check.detail


def test_the_memory_estimate_holds_the_allocators_peak_against_the_anatomys_prediction(
    tmp_path,
):
    """A profile step's cuda cell of a workload with no memory model: its peak within
    0.67-1.5x of the step's memory as gpu-vs-cpu predicts it on a CPU, or FAIL; a workload with
    its own model (stnn) is the memory-prediction check's, so alone it is nothing to judge."""
    from stbench.child.anatomy import measure
    from stbench.plan.predict import anatomy_memory_mb
    from stbench.runner.predictions import SMALL_BATCHES
    from tests.helpers import preset_params

    params = json.dumps(preset_params("lstm-era5"))
    batch = 128
    predicted = anatomy_memory_mb(measure("lstm-era5", json.loads(params), SMALL_BATCHES), batch)
    assert predicted > 64  # the workspaces and the step's tensors
    cell = {"run_id": "p", "workload": "lstm-era5", "params": params, "batch_size": batch}
    for i, (peak, status) in enumerate(((1.2 * predicted, PASS), (3.0 * predicted, FAIL))):
        folder = write_runs(tmp_path / str(i), [{**cell, "peak_gpu_mb": peak}])
        check = one("memory-estimate", traces.memory_estimate, folder)
        assert check.status == status, check.detail
        assert "GPU peak / predicted: lstm-era5 p" in check.detail
    stnn = write_runs(tmp_path / "s", [{**cell, "workload": "stnn", "peak_gpu_mb": 100}])
    with pytest.raises(NothingToJudge, match="without a memory model"):
        traces.memory_estimate(stnn)


ROOT_RUNS = Path(__file__).resolve().parents[1] / "docs" / "acceptance-runs"
H200_RUN = ROOT_RUNS / "h200-2026-11-28"


@pytest.mark.parametrize("step", ["profile-cnn-strain", "profile-lstm-era5", "profile-dcrnn-pems"])
def test_the_cpus_count_is_a_floor_of_the_launches_the_h200_measured(step):
    """Each profiled cuda cell of the H200 run: the kernels, copies and memsets its step launched
    there (its kernels.csv) are at least today's count of them on this CPU. The run's own count
    of lstm-era5 was no floor: 237 a step, counting each LSTM layer's kernels a timestep, against
    53 launched, cuDNN running each layer's sequence in one persistent kernel."""
    check = one("kernel-count", traces.kernel_count, H200_RUN / "correctness" / step)
    assert check.status == PASS, check.detail


def test_warm_cells_passes_where_every_single_process_cell_was_forked_and_names_the_rest():
    assert rows.judge_warm([], 3).status == PASS
    fresh = rows.judge_warm(["a1", "b2"], 3)
    assert fresh.status == FAIL and "1 of 3" in fresh.detail and "a1, b2" in fresh.detail
    assert rows.judge_warm([], 0).status == FAIL  # nothing looked at
    # the H200 run: its first profile step's cell was forked, stnn's three after it were not
    run = H200_RUN / "correctness"
    assert one("warm-cells", rows.warm_cells, run / "profile-cnn-strain").status == PASS
    stnn = one("warm-cells", rows.warm_cells, run / "profile-stnn")
    assert stnn.status == FAIL and "0 of 3" in stnn.detail


def test_the_summary_tables_each_questions_predictions_against_its_measured_steps(tmp_path):
    """summary.md carries the figures of every prediction-holds check as one table: what the
    docs' prediction-against-measurement tables are made from, the next GPU run's included."""
    import shutil

    from benchmarks.acceptance.state import State, StepRecord, summary
    from tests.helpers import ROOT

    shutil.copytree(
        ROOT / "results" / "reference" / "ref-h200-lstm-era5-gpu-vs-cpu", tmp_path / "s" / "q"
    )
    check = answers.prediction_holds(tmp_path / "s")
    record = StepRecord("ref-lstm-era5-gpu-vs-cpu", PASS, "ok", 1.0, (check,))
    again = StepRecord.from_dict(json.loads(json.dumps(asdict(record))))  # as state.json keeps it
    text = summary([record.step], State({}, {record.step: again}))
    assert "## Predicted against measured" in text
    assert (
        "| ref-lstm-era5-gpu-vs-cpu | 128 | 0.867 | the host | 3.653 | 2.730 | 3.1 | +34% |" in text
    )
    bare = StepRecord("x", PASS, "ok")
    assert "Predicted against measured" not in summary(["x"], State({}, {"x": bare}))


def test_the_largest_sizes_cells_are_predicted_on_their_host_and_a_beaten_bound_fails(tmp_path):
    """A GPU-only `run` step (the workloads' largest sizes): each cuda cell predicted as a
    question predicts a size, from the anatomy measured here and the cell's own loading, for
    the card it ran on. The first H100 run's cnn-strain cells hold (2.7-3.4x above their
    bounds); the same cells made 100x faster beat their bounds and fail; a card stbench's table
    lacks is UNTESTED."""
    import shutil

    import pandas as pd

    study = ROOT_RUNS / "h100-2026-11-26" / "studies" / "ref-h100-cnn-strain-batch-knee"
    shutil.copytree(study, tmp_path / "a" / "s")
    found = answers.cells_prediction(tmp_path / "a")
    assert found.status == PASS, found.detail
    assert set(found.figures) == {"cnn-strain 512", "cnn-strain 1,024", "cnn-strain 2,048"}
    assert all(f["bound_by"] and f["bound_ms"] < f["measured_ms"] for f in found.figures.values())
    for name, change in (("b", {"samples_per_s": 100.0}), ("c", {"device_name": "Voodoo 5"})):
        shutil.copytree(study, tmp_path / name / "s")
        table = tmp_path / name / "s" / "runs.csv"
        frame = pd.read_csv(table)
        for column, value in change.items():
            frame[column] = frame[column] * value if column == "samples_per_s" else value
        frame.to_csv(table, index=False)
    beaten = answers.cells_prediction(tmp_path / "b")
    assert beaten.status == FAIL and "the bound exceeds the measured step" in beaten.detail
    assert answers.cells_prediction(tmp_path / "c").status == UNTESTED
    # a size the planner skipped as too large for the card is said where skips may happen
    table = tmp_path / "a" / "s" / "runs.csv"
    frame = pd.read_csv(table)
    skipped = frame.iloc[[0]].assign(
        run_id="big", batch_size=65536, status="skipped", reason="needs 90 GB, 80 GB here"
    )
    pd.concat([frame, skipped]).to_csv(table, index=False)
    with pytest.raises(NothingToJudge, match="big: skipped needs 90 GB"):
        answers.cells_prediction(tmp_path / "a")
    said = answers.cells_prediction(tmp_path / "a", may_skip=True)
    assert said.status == PASS and "not run here: batch 65536: needs 90 GB" in said.detail


def test_the_largest_steps_ask_each_workloads_two_largest_declared_sizes_on_cuda_alone():
    """The largest-W extras follow the workloads' size axes: a size added or moved moves them."""
    from benchmarks.acceptance.steps import LARGEST
    from stbench.plan.registry import get

    for step in LARGEST:
        workload = step.name.removeprefix("largest-")
        argv = list(step.argv)
        sizes = argv[argv.index("--batch-size") + 1 : argv.index("--epochs")]
        assert sizes == [str(v) for v in get(workload).size.values[-2:]]
        assert argv[argv.index("--device") + 1] == "cuda"
