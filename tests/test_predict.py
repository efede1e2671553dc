"""Would a GPU pay, answered on a machine without one (plan/predict.py): the shipped table of GPU
models with a source for every figure, the lower bound as the longest of its terms, a user's own
cards by file, and the check against every GPU row there is: no committed bound above the step
the first H100 run measured."""

import json
import math
from functools import partial
from pathlib import Path

import pandas as pd
import pytest

from stbench.errors import StbenchError
from stbench.plan.predict import (
    DATA_SPEEDUP,
    DEFAULT_GPUS,
    HOST_SPEEDUP,
    Step,
    bound_terms,
    bounded_by,
    chosen,
    estimated_step_s,
    predict,
    read_gpus,
)
from tests.helpers import stbench

ROOT = Path(__file__).resolve().parents[1]
H100_RUN = ROOT / "docs" / "acceptance-runs" / "h100-2026-11-26"
CARDS = ("T4", "P100", "V100", "A100-40GB", "A100-80GB", "L4", "A40", "H100", "H200")


def test_the_shipped_table_has_each_card_dense_peaks_and_a_source():
    gpus = read_gpus()
    assert set(CARDS) <= set(gpus)
    for g in gpus.values():
        assert g.fp32_tflops > 0 and g.memory_gbps > 0 and g.memory_gb > 0 and g.host_link_gbps > 0
        assert g.bf16_tflops >= g.fp32_tflops and len(g.source) > 30, g.name
        assert g.launch_floor_us > 0 and "http" in g.launch_source
        assert g.eager_op_us >= g.launch_floor_us and "acceptance-runs" in g.eager_source
    h100 = gpus["H100"]  # dense: the datasheet's 989 TFLOPS TF32 is with sparsity
    assert h100.tf32_tflops == pytest.approx(494.7) and h100.bf16_tflops == pytest.approx(989.4)
    assert gpus["T4"].tf32_tflops == 0  # no TF32: fp32 math runs at fp32's peak
    assert gpus["T4"].peak_flops("default", best=True) == 8.1e12
    assert [g.name for g in chosen(gpus)] == list(DEFAULT_GPUS)


def _step(**changed) -> Step:
    base = dict(
        size="64",
        batch=64,
        flops=1e9,
        launches=100,
        state_bytes=4e6,
        saved_bytes=1e6,
        batch_bytes=1e5,
        host_s=1e-3,
        cpu_step_s=0.05,
    )
    return Step(**{**base, **changed})


def test_the_hosts_own_thread_adds_its_loading_and_the_link_carries_what_is_streamed():
    """A step whose loader runs in its own thread (no workers) waits for it on any host, at most
    DATA_SPEEDUP faster than here; bytes streamed from host memory cross the host link."""
    h100 = read_gpus()["H100"]
    plain = predict(_step(), h100)
    loading = predict(_step(serial_data_s=8e-3, data_s=8e-3), h100)
    assert loading.bound_by == "the host's data loading" and "workers" in loading.lever
    assert loading.bound_s == pytest.approx(plain.terms["the host"] + 8e-3 / DATA_SPEEDUP)
    assert loading.estimate_s >= loading.bound_s  # an estimate is never below its bound
    streamed = predict(_step(streamed_bytes=200e6), h100)
    assert streamed.bound_by == "the host link"
    assert streamed.bound_s == pytest.approx((200e6 + 1e5) / (h100.host_link_gbps * 1e9))


def test_the_bound_is_its_longest_term_and_names_what_bounds_it():
    h100 = read_gpus()["H100"]
    # each operator pays eager PyTorch's least host cost on a GPU's host; a kernel it launches
    # beyond its first (cuDNN's, from C++), the launch floor
    launch_bound = predict(_step(host_s=0.0), h100)
    assert launch_bound.bound_by == "launches"
    assert launch_bound.bound_s == pytest.approx(100 * 8.7e-6)
    assert "CUDA graphs" in launch_bound.lever
    cudnn = predict(_step(host_s=0.0, operators=40), h100)
    assert cudnn.bound_s == pytest.approx(40 * 8.7e-6 + 60 * 3.0e-6)
    host = predict(_step(host_s=5e-3), h100)
    assert host.bound_by == "the host"
    assert host.bound_s == pytest.approx(5e-3 / HOST_SPEEDUP + 100 * 8.7e-6)
    assert host.most_gain == pytest.approx(0.05 / host.bound_s)
    flops = predict(_step(flops=1e15, host_s=0.0), h100)
    assert flops.bound_by == "FLOPs" and flops.bound_s == pytest.approx(1e15 / 494.7e12)
    assert flops.estimate_s >= flops.bound_s  # an estimate is never below its bound
    # a working set in L2 may never reach memory; 10 GB of state does, at the bandwidth
    assert bound_terms(_step(), h100)["memory bandwidth"] == 0.0
    big = bound_terms(_step(state_bytes=1e10, host_s=0.0), h100)
    assert big["memory bandwidth"] == pytest.approx(2e10 / 3.35e12, rel=0.01)
    assert predict(_step(predicted_mb=200_000), h100).fits is False
    assert predict(_step(predicted_mb=1000), h100).fits is True
    assert predict(_step(), h100).fits is None


def test_a_users_cards_join_the_table_and_a_bad_file_is_one_line(tmp_path):
    mine = tmp_path / "gpus.toml"
    mine.write_text(
        '[[gpu]]\nname = "MyCard"\nvariant = "PCIe"\nfp32_tflops = 10\ntf32_tflops = 0\n'
        "bf16_tflops = 40\nmemory_gbps = 500\nmemory_gb = 24\nl2_mb = 6\n"
        'host_link_gbps = 31.5\nsource = "my own measurements, 2026"\n'
    )
    both = read_gpus(mine, read_gpus())
    assert both["MyCard"].launch_floor_us == both["H100"].launch_floor_us  # the shipped floors
    assert both["MyCard"].eager_op_us == both["H100"].eager_op_us == 8.7
    assert "H100" in both
    # a card's own eager operator, as a lent GPU's doctor measures it, bounds its host
    mine.write_text(mine.read_text() + "eager_op_us = 20.0\n")
    own = read_gpus(mine, read_gpus())["MyCard"]
    assert own.eager_op_us == 20.0 and own.launch_floor_us == 3.0
    assert predict(_step(host_s=0.0), own).bound_s == pytest.approx(100 * 20e-6)
    bad = tmp_path / "bad.toml"
    bad.write_text('[[gpu]]\nname = "Half"\nfp32_tflops = 10\n')
    with pytest.raises(StbenchError, match="Half lacks tf32_tflops"):
        read_gpus(bad, read_gpus())


def test_every_h100_row_is_predicted_and_no_bound_exceeds_its_measured_step():
    """benchmarks/predict_check.py wrote predicted.csv from this CPU's anatomy of each row; the
    bound recomputed from its columns with today's code and table must match what it wrote, and
    stay at or below the step the H100 measured (a bound a measurement beats is wrong)."""
    lines = pd.read_csv(H100_RUN / "predicted.csv")
    rows = pd.concat(pd.read_csv(p) for p in sorted(H100_RUN.glob("studies/*/runs.csv")))
    cuda = rows[rows["device"].str.startswith("cuda") & (rows["status"] == "ok")]
    assert sorted(lines["run_id"]) == sorted(cuda["run_id"])
    h100 = read_gpus()["H100"]
    for line in lines.to_dict("records"):
        step = Step(
            line["size"],
            int(str(line["size"]).split()[0]),
            line["flops"],
            float(line["launches"]),
            line["state_bytes"],
            line["saved_bytes"],
            line["batch_bytes"],
            line["host_s"],
            data_s=line["serial_data_s"],
            serial_data_s=line["serial_data_s"],
            streamed_bytes=line["streamed_bytes"],
            operators=line["operators"],
        )
        terms = bound_terms(step, h100)
        assert max(terms.values()) == pytest.approx(line["bound_s"], rel=1e-6)
        assert line["bound_s"] <= line["measured_s"], line["run_id"]
        estimate = max(estimated_step_s(step, h100, line["launch_s"]), line["bound_s"])
        assert estimate == pytest.approx(line["estimate_s"], rel=1e-6)
    assert lines["fitted"].any() and (~lines["fitted"]).any()  # judged on rows not fitted on


def test_every_h100_row_has_its_memory_predicted_beside_the_peak_it_measured():
    """predicted.csv also holds each row's step memory as gpu-vs-cpu predicts it, beside the
    allocator's peak the H100 measured (the row's peak_gpu_mb) and the error between them; where
    the anatomy predicted it (a workload with no memory model of its own) the error stays within
    a third: the tensors a step holds at once, counted on this CPU, are what a GPU holds too,
    but for cuDNN's larger RNN reserve (lstm-era5) and a series moved twice (dcrnn-pems'
    gpu-index before the one-copy fix)."""
    lines = pd.read_csv(H100_RUN / "predicted.csv")
    rows = pd.concat(pd.read_csv(p) for p in sorted(H100_RUN.glob("studies/*/runs.csv")))
    peaks = dict(zip(rows["run_id"], rows["peak_gpu_mb"]))
    for line in lines.to_dict("records"):
        assert line["measured_mb"] == pytest.approx(peaks[line["run_id"]])
        assert line["memory_mb"] > 0 and line["memory_from"] in ("workload", "anatomy")
        assert line["memory_error"] == pytest.approx(line["memory_mb"] / line["measured_mb"] - 1)
    by_anatomy = lines[lines["memory_from"] == "anatomy"]
    assert set(by_anatomy["workload"]) == {"cnn-strain", "dcrnn-pems", "lstm-era5"}
    assert (by_anatomy["memory_error"].abs() < 1 / 3).all()


def test_gpu_vs_cpu_without_a_gpu_predicts_the_cards_of_a_users_file(tmp_path, smoke_question):
    bad = tmp_path / "bad.toml"
    bad.write_text("[[gpu]]\nname = 'Half'\n")
    refused = stbench("gpu-vs-cpu", "cnn-strain", "--gpus", bad, "--out", tmp_path / "o")
    assert refused.returncode == 2 and "Half lacks" in refused.stderr
    assert not (tmp_path / "o").exists()
    done, folder = smoke_question  # the same question with --gpus FILE of tests.helpers.MY_CARD
    assert done.returncode == 0 and folder, done.stderr[-2000:]
    predicted = pd.read_csv(folder / "predicted.csv")
    assert set(predicted["gpu"]) == {"MyCard"}
    assert (predicted["bound_ms"] > 0).all() and predicted["bound_by"].notna().all()
    anatomy = json.loads((folder / "anatomy.json").read_text())
    assert anatomy["launches"] > 10 and anatomy["state_bytes"] > 0
    assert "PREDICTED on GPUs, not measured" in done.stdout and "MyCard" in done.stdout
    assert all(math.isfinite(v) for v in predicted["estimated_gain"])


def test_the_answer_names_each_cards_bound_where_it_differs_from_the_last_cards():
    """The committed lstm-era5 question of the 2-core VM: at 1,024 sequences the A100 and the
    H100 are bound by launches (each operator's host cost), the T4 (a tenth of their bandwidth)
    by its memory's."""
    from stbench.report.gpu_predictions import predicted_table
    from stbench.report.model import studies, with_context
    from stbench.report.read import read_folder

    folder = ROOT / "results" / "reference" / "ref-cpu2-lstm-era5-gpu-vs-cpu"
    (study,) = studies([read_folder(folder)])
    table = predicted_table(study.predicted, with_context(study, question=True))
    bounds = dict(zip(table["sequences a batch"], table["bound"]))
    by = {(r.gpu, str(r.size)): r.bound_by for r in study.predicted.itertuples()}
    assert by[("H100", "1024")] == by[("A100-80GB", "1024")] == "launches"
    assert by[("T4", "1024")] == "memory bandwidth"
    assert bounds["1,024"] == "launches; T4 bandwidth"
    assert bounds["128"] == "launches"  # every card alike: said once


def test_a_recurrent_layer_counts_once_whatever_its_timesteps():
    """oneDNN runs an LSTM layer's whole sequence as one operator, and on the H200 cuDNN ran it
    as one persistent kernel a layer and direction (RNN_blockPersist_fp_LSTM and _bp_LSTM,
    docs/acceptance-runs/h200-2026-11-28): a count per timestep was no floor there (237 against
    the 53 launches measured), so the anatomy counts the layer's operator once."""
    import torch

    from stbench.child.anatomy import _Launches

    lstm = torch.nn.LSTM(3, 8, num_layers=2, batch_first=True)
    counted = []
    for timesteps in (10, 40):
        lstm.zero_grad(set_to_none=True)  # else the second backward adds into the gradients
        counter = _Launches()
        with counter:
            lstm(torch.randn(4, timesteps, 3))[0].sum().backward()
        counted.append((counter.launches, counter.operators))
    assert counted[0] == counted[1]  # the sequence's length adds no launch
    assert all(launches == operators for launches, operators in counted)


def test_the_hosts_own_time_is_the_python_between_operators_not_their_kernels():
    """The anatomy's host time reads torch's profiler: Python between a step's operators counts
    (2 ms waits between pairs of operators; the pairs' own back-to-back gap is the least, what
    the profiler adds to every gap), the kernels inside them do not (ten 384x384 matrix
    products, ~20 ms here), nor do they blur a little Python between them (0.5 ms waits: a
    step's time less its operators' was noise around 0 there)."""
    import time

    import torch

    from stbench.child.anatomy import _host_s

    a, threads = torch.randn(384, 384), torch.get_num_threads()
    torch.set_num_threads(1)

    def waits(x, y):
        for _ in range(5):
            torch.add(x, y)
            torch.mul(x, y)
            began = time.perf_counter()
            while time.perf_counter() - began < 0.002:  # the step's own Python
                pass

    def products(x, y, wait=0.0):
        for _ in range(5):
            torch.mm(x, y)
            torch.mm(x, y)
            began = time.perf_counter()
            while time.perf_counter() - began < wait:
                pass

    try:
        host = _host_s(waits, a[:1, :1], a[:1, :1])
        kernels = _host_s(products, a, a)
        # kernels filling the step, a little Python between: the Python, not noise around 0
        mixed = _host_s(partial(products, wait=0.0005), a, a)
    finally:
        torch.set_num_threads(threads)
    assert 0.007 <= host < 0.05  # the four waits between the five pairs
    assert kernels < 0.002
    assert 0.0015 <= mixed < 0.005


def test_the_gaps_between_top_level_spans_less_the_least():
    """What is nested in another span, or overlaps it, is no gap; each gap less the least."""
    from stbench.child.anatomy import _gaps_s

    class Event:
        def __init__(self, start, end, device="CPU"):
            self.span, self.device = (start, end), device

        def start_ns(self):
            return self.span[0]

        def end_ns(self):
            return self.span[1]

        def device_type(self):
            return type("Kind", (), {"name": self.device})()

    events = [
        Event(0, 100),
        Event(10, 50),  # inside the first
        Event(110, 200),  # 10 after it
        Event(150, 260),  # overlaps: one span with it
        Event(300, 400),  # 40 after
        Event(320, 330, "CUDA"),  # another device's: not the host's
        Event(1400, 1500),  # 1,000 after
    ]
    assert _gaps_s(events) == pytest.approx((0 + 30 + 990) * 1e-9)
    assert _gaps_s([]) == 0.0 and _gaps_s([Event(0, 5)]) == 0.0


def test_the_peak_lines_envelope_is_the_highest_line_at_every_batch():
    """upper_envelope keeps exactly the lines that set the peak somewhere from the first batch
    on: at each batch its highest equals the highest of all the lines."""
    import random

    from stbench.plan.predict import upper_envelope

    rng = random.Random(3)
    for _ in range(200):
        lines = [(rng.uniform(-50, 100), rng.uniform(0, 5)) for _ in range(rng.randint(1, 12))]
        kept = upper_envelope(lines, 2)
        assert len(kept) <= len(lines)
        for batch in (2, 3, 8, 17, 64, 1000, 10**6):
            assert max(a + b * batch for a, b in kept) == pytest.approx(
                max(a + b * batch for a, b in lines)
            )
    # the peak moves: an optimizer's fixed transient at small batches, activations at large
    assert upper_envelope([(10.0, 0.0), (0.0, 1.0), (-5.0, 0.5)], 2) == ((10.0, 0.0), (0.0, 1.0))


def test_live_bytes_counts_each_storage_from_its_making_to_its_freeing():
    import torch

    from stbench.child.anatomy import _LiveBytes

    counter = _LiveBytes()
    with counter:
        a = torch.ones(1000)  # 4,000 bytes
        b = a * 2  # 8,000 alive
        view = b[:10]  # a view: no new storage
        b.add_(1)  # in place: none either
        del a  # freed: 4,000
        c = b + view.sum()  # the sum's 4 bytes, freed at once; c 4,000
    assert counter.trace[:2] == [4000, 8000]
    assert max(counter.trace) == 8000 + 4  # a and b, and the scalar sum while c is made
    assert counter.live == 8000  # b and c
    del b, c, view
    assert counter.live == 0


def test_a_steps_memory_holds_at_least_its_state_and_saved_activations_and_fits_or_not():
    """The anatomy's memory: at the end of the forward pass every saved activation is alive
    beside the parameters and optimizer state, so the peak is at least their sum; a size whose
    predicted memory exceeds a card's is 'does not fit'."""
    from stbench.child.anatomy import measure
    from stbench.contract.memory import cuda_library_bytes
    from stbench.plan.predict import anatomy_memory_mb
    from tests.helpers import preset_params

    found = measure("lstm-era5", preset_params("lstm-era5"), (2, 8))
    assert found.peak_lines and found.resident_bytes > 0
    for batch in (8, 256, 4096):
        least = found.resident_bytes + found.saved_bytes(batch) + found.batch_bytes(batch)
        assert found.memory_bytes(batch) >= least
        assert anatomy_memory_mb(found, batch) == pytest.approx(
            found.memory_bytes(batch) / 2**20 + cuda_library_bytes(None) / 2**20
        )
    assert found.memory_bytes(4096) > found.memory_bytes(256)
    t4 = read_gpus()["T4"]
    step = Step("4096", 4096, 1e9, 100, 1e6, 1e6, 1e6, 1e-3, predicted_mb=17 * 1024)
    assert predict(step, t4).fits is False
    assert predict(step, read_gpus()["H100"]).fits is True


def test_the_training_and_validation_windows_share_one_copy_of_the_series_on_the_device():
    import torch

    from stbench.workloads.dcrnn_pems.windows import IndexWindows

    speed, tod = torch.rand(60, 4), torch.rand(60)
    train = IndexWindows(speed, tod, 0.0, 1.0, 4, 4, first=0, count=30)
    val = IndexWindows(speed, tod, 0.0, 1.0, 4, 4, first=30, count=10)
    on_train, on_val = train.to("meta"), val.to("meta")
    assert on_train.speed is on_val.speed and on_train.tod is on_val.tod
    assert on_train.speed.device.type == "meta" and train.to("cpu").speed is speed


def test_no_bound_a_gpu_vs_cpu_study_predicted_exceeds_the_step_its_gpu_measured():
    """The H200 run's questions predicted each size from their CPU rows on the GPU's own host
    (predicted.csv) and measured the GPU beside them: at every size and precision its windows
    ran, the bound stays at or below the measured step (benchmarks/predict_check.py
    --questions prints the table, the estimate's error beside it)."""
    from benchmarks.predict_check import against_questions

    studies = sorted((ROOT / "results" / "reference").glob("ref-h200-*-gpu-vs-cpu"))
    table = against_questions(studies, "H200")
    assert set(table["workload"]) == {"cnn-strain", "lstm-era5", "stnn", "dcrnn-pems"}
    assert len(table) >= 2 * len(studies)  # each study's sizes at two precisions
    over = table[table["bound_ms"] > table["measured_ms"]]
    assert over.empty, over.to_string()


def test_the_h200s_questions_hold_their_bounds_with_the_hosts_own_time_and_loading():
    """Each H200 question's sizes predicted again from its committed anatomy and CPU rows (the
    GPU's own host measured both), for the H200 marked measured here as a question on that
    machine now marks it: its host's time at 1x, not at HOST_SPEEDUP, and its loading at no less
    than the least its rows took, not at DATA_SPEEDUP. Every bound stays at or
    below the cuda step measured at torch's default precision (eager), and most come within 3x
    of it (7 of 9 when this test was written)."""
    from dataclasses import replace

    from stbench.runner import predictions
    from stbench.store.files import read_runs
    from stbench.store.manifest import read_manifest

    h200 = replace(read_gpus()["H200"], measured_here=True)
    ratios = []
    for study in sorted((ROOT / "results" / "reference").glob("ref-h200-*-gpu-vs-cpu")):
        manifest = read_manifest(study)
        found = predictions.anatomy(study, manifest)  # the kept anatomy.json: nothing measured
        cuda = [
            r
            for r in read_runs(study)
            if r.status == "ok" and r.device == "cuda" and r.params.get("precision") == "default"
        ]
        for step in predictions.steps(study, manifest, found):
            speeds = [r.samples_per_s for r in cuda if r.batch_size == step.batch]
            measured = step.batch / sorted(speeds)[len(speeds) // 2]
            bound = predict(step, h200).bound_s
            assert bound <= measured, (study.name, step.size, bound, measured)
            ratios.append(measured / bound)
    assert len(ratios) == 9 and sum(r <= 3 for r in ratios) >= 6


def test_this_machines_card_takes_its_hosts_own_operator_cost_time_and_loading(monkeypatch):
    """On a GPU machine the card it has is predicted with eager PyTorch's operator cost measured
    on its own host (the doctor's launches check; the table's figure stays for the others, and
    wherever the check cannot run: here, a CPU build fails at CUDA), and with the step's own host
    time and loading as this host measured them, where a card on another host may run them up
    to HOST_SPEEDUP and DATA_SPEEDUP faster."""
    from dataclasses import replace

    from stbench.runner import doctor, predictions

    cards = chosen(read_gpus(), ["T4", "H100"])
    here = ({"name": "NVIDIA H100 80GB HBM3"},)
    assert predictions.on_this_host(cards, here, "") == cards  # no GPU asked: nothing measured
    assert predictions.on_this_host(cards, ({"name": "a card no table has"},), "cuda") == cards
    unmeasured = predictions.on_this_host(cards, here, "cuda")  # the CPU build's CUDA error
    assert unmeasured == [cards[0], replace(cards[1], measured_here=True)]
    loading = _step(
        host_s=0.004, serial_data_s=0.008, least_serial_data_s=0.006, launches=0, operators=0
    )
    assert bound_terms(loading, cards[1])["the host"] == pytest.approx(
        0.004 / HOST_SPEEDUP + 0.008 / DATA_SPEEDUP
    )
    # on its own host: the least loading it took there, never the median
    assert bound_terms(loading, unmeasured[1])["the host"] == pytest.approx(0.004 + 0.006)
    assert bounded_by(loading, unmeasured[1], bound_terms(loading, unmeasured[1])) == (
        "the host's data loading"
    )
    measured = {"ops": 2000, "eager_op_us": 20.0, "op_us": 20.0, "graph_kernel_us": 1.0}
    monkeypatch.setattr(doctor, "child_check", lambda name, device: measured)
    found = {c.name: c for c in predictions.on_this_host(cards, here, "cuda")}
    assert (
        found["H100"].eager_op_us == 20.0 and "measured on this host" in found["H100"].eager_source
    )
    assert found["T4"] == cards[0]  # not this machine's: the table's figure
    step = _step(host_s=0.0)
    assert predict(step, found["H100"]).bound_s == pytest.approx(100 * 20e-6)


def test_the_answer_names_the_card_predicted_from_this_machines_own_host():
    """A predicted.csv whose line says measured_here: the answer's predicted heading names that
    card as this machine's; an older file without the column names none."""
    from stbench.report.gpu_predictions import predicted_levers

    lines = pd.DataFrame(
        {
            "gpu": ["T4", "H100"],
            "bound_by": ["launches"] * 2,
            "lever": ["CUDA graphs"] * 2,
            "fits": [True, True],
            "memory_mb": [10.0, 10.0],
            "measured_here": [False, True],
        }
    )
    assert "; H100 is this machine's: bounded by its host's own time" in predicted_levers(lines)
    assert "this machine's" not in predicted_levers(lines.drop(columns=["measured_here"]))
