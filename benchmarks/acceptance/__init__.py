"""The GPU acceptance: one prepared run of stbench on a lent GPU machine, within one command.

A registry of steps in priority order (`steps.py`: the correctness part; `studies.py`: the
reference studies), each an stbench command line with a time cap and the checks that read what
it wrote. `engine.py` runs them against a global deadline, keeps the verdicts of every step in
OUT/state.json and rewrites OUT/summary.md after each one, so a command killed at its limit
still brings back every verdict it reached; a second command with the same OUT runs only what
failed or was not reached. The checks are the doctor's kind of check (`runner.doctor.Check`),
each a reader of a result folder feeding a pure judge (`checks_rows.py`, `checks_traces.py`;
`checks_answers.py`: whether a question concluded and its predictions held).

`python -m benchmarks.acceptance --list` prints the steps; `benchmarks/gpu_acceptance.py` installs
stbench on the GPU machine and starts it (docs/gpu-acceptance.md).
"""
