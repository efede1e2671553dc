"""Result files: a runs.csv written by an older stbench (fewer columns) stays aligned when a
resumed study appends to it."""

from stbench_cli import results


def test_append_follows_the_files_own_header(tmp_path):
    path = tmp_path / "runs.csv"
    old_columns = [c for c in results.RUN_COLUMNS if c not in ("steps_per_s", "stream_s", "predicted_mb")]
    results.append(path, [{"schema": 1, "run_id": "a", "workload": "w", "device": "cpu", "status": "ok"}], old_columns)
    results.append(path, [{"schema": 1, "run_id": "b", "workload": "w", "device": "cpu", "status": "failed",
                           "steps_per_s": 3.0, "reason": "x"}], results.RUN_COLUMNS)
    rows = results.read_runs(tmp_path)
    assert [r["run_id"] for r in rows] == ["a", "b"] and rows[1]["status"] == "failed" and rows[1]["reason"] == "x"
    assert "steps_per_s" not in rows[1]  # the old header wins; nothing shifted
    assert path.read_text().splitlines()[0].split(",") == old_columns
