"""Energy per device with its method named: RAPL through a stand-in powercap tree
(package zones summed, sub-zones and psys left out, each counter's wrap undone, permission
denied named), NVML's counter, and the row that says why nothing was measured."""

import os
import time
from pathlib import Path

import pytest

from stbench.runner import energy
from stbench.runner.sysmon import SystemSampler
from stbench.store.files import read_runs
from tests.helpers import one_study

RANGE = 262143328850  # a real package's max_energy_range_uj (2^32 x 61 µJ units)


def _zone(root: Path, name: str, label: str, uj: float, span: float = RANGE) -> Path:
    zone = root / name
    zone.mkdir(parents=True)
    (zone / "name").write_text(f"{label}\n")
    (zone / "energy_uj").write_text(f"{uj:.0f}\n")
    (zone / "max_energy_range_uj").write_text(f"{span:.0f}\n")
    return zone


def _tree(root: Path) -> Path:
    _zone(root, "intel-rapl:0", "package-0", 1_000_000)
    _zone(root, "intel-rapl:0:0", "core", 500_000)  # a sub-zone: inside package 0 already
    _zone(root, "intel-rapl:1", "package-1", RANGE - 2_000_000)  # about to wrap
    _zone(root, "intel-rapl:2", "psys", 9_000_000)  # the platform: would count twice
    return root


def test_package_zones_are_read_and_summed_with_each_wrap_undone(tmp_path):
    root = _tree(tmp_path / "powercap")
    start = energy.read_rapl(str(root))
    assert [z for z, _, _ in start.counters] == ["intel-rapl:0", "intel-rapl:1"]
    assert start.method == "rapl (2 packages)"
    (root / "intel-rapl:0" / "energy_uj").write_text("4000000\n")  # +3 J
    (root / "intel-rapl:1" / "energy_uj").write_text("3000000\n")  # wrapped: +2 J +3 J
    (root / "intel-rapl:0:0" / "energy_uj").write_text("99000000\n")  # not counted
    joules, method = energy.cpu_energy(start, energy.read_rapl(str(root)))
    assert joules == pytest.approx(8.0) and method == "rapl (2 packages)"


def test_no_tree_no_package_and_permission_denied_each_say_why(tmp_path, monkeypatch):
    missing = energy.read_rapl(str(tmp_path / "absent"))
    assert missing.startswith("none: no ") and "a VM usually has none" in missing
    (tmp_path / "empty").mkdir()
    said = energy.read_rapl(str(tmp_path / "empty"))
    assert said == f"none: no RAPL package zone under {tmp_path}/empty"
    root = _tree(tmp_path / "powercap")
    real = Path.read_text

    def denied(self, *a, **k):  # root reads any file: deny it the way Linux 5.10+ does
        if self.name == "energy_uj":
            raise PermissionError(13, "Permission denied")
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "read_text", denied)
    said = energy.read_rapl(str(root))
    assert said.startswith(f"none: permission denied reading {root}/intel-rapl:0/energy_uj")
    assert energy.cpu_energy(said, said) == (None, said)


def test_the_sampler_reports_cpu_joules_and_the_window_from_a_stand_in_tree(tmp_path):
    root = _tree(tmp_path / "powercap")
    sampler = SystemSampler(os.getpid(), interval=0.05, rapl_root=str(root)).start()
    (root / "intel-rapl:0" / "energy_uj").write_text("1500000\n")
    time.sleep(0.1)
    out = sampler.stop()
    assert out["cpu_energy_j"] == pytest.approx(0.5)
    assert out["cpu_energy_method"] == "rapl (2 packages)"
    assert out["gpu_energy_j"] is None and out["gpu_energy_method"] == "none: the cell used no GPU"
    assert 0.1 <= out["energy_window_s"] < 60 and out["energy_short"] is True


def test_gpu_methods_and_the_short_window_rule():
    assert energy.gpu_method(True, True, 12.0) == "nvml counter"
    unreadable = energy.gpu_method(True, True, None)
    assert unreadable.startswith("none: NVML's energy counter is not readable")
    assert energy.gpu_method(True, False, None).startswith("none: NVML cannot see")
    long = energy.energy_columns(5000.0, "nvml counter", None, "none: x", 61.0)
    assert long["energy_short"] is False and long["energy_window_s"] == 61.0
    nothing = energy.energy_columns(None, "none: a", None, "none: b", 5.0)
    assert nothing["energy_short"] is None and nothing["energy_window_s"] is None


@pytest.mark.slow
def test_this_machines_rows_name_each_energy_method(tmp_path):
    folder = one_study(
        tmp_path / "out",
        "cnn-strain",
        "--smoke",
        "--epochs",
        "1",
        "--set",
        "max_steps=3",
        timeout=300,
    )
    (row,) = read_runs(folder)
    assert row["gpu_energy_method"] == "none: the cell used no GPU"
    said = energy.read_rapl()
    if isinstance(said, str):  # this VM: no powercap tree; the row says so instead of a blank
        assert row["cpu_energy_method"] == said and row["cpu_energy_j"] is None
    else:
        assert row["cpu_energy_method"] == said.method and row["cpu_energy_j"] >= 0
        assert row["energy_short"] is True
