"""The README and docs/ hold commands people paste: every `stbench run` line in their bash blocks
plans (a dry run) as written, and every relative link points at a file that exists."""

import re
import shlex
from pathlib import Path

import pytest

from stbench.cli import main

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# Files a user brings (their own data): the docs name them as examples, the repository has none.
USER_FILES = re.compile(
    r"data=(my_|era5\.zarr|pems-bay\.h5|metr-la\.h5|sst\.mon|pacific_sst|\.\./shared)"
    r"|data=arco|WORKLOAD|…"
)  # the network's store; a synopsis, not a command


def bash_lines(page: Path):
    text = page.read_text()
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():  # continuation lines joined
            line = line.split(" #", 1)[0].strip()
            if line.startswith("stbench run ") and not USER_FILES.search(line):
                yield line


RUN_LINES = sorted(
    {(p.relative_to(ROOT).as_posix(), line) for p in PAGES for line in bash_lines(p)}
)


def test_the_pages_have_examples():
    assert len(PAGES) >= 10 and len(RUN_LINES) >= 20


@pytest.mark.parametrize("page,line", RUN_LINES)
def test_every_run_example_plans_as_written(page, line, capsys, monkeypatch):
    # Planned as on a machine with 8 GPUs and NCCL (a dry run starts nothing, so the CPU build is
    # asked only these availability questions); cells still skipped there would be a wrong example.
    import torch

    monkeypatch.setenv("STBENCH_WARM", "0")  # the inventory here, where the patches are
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    monkeypatch.setattr(torch.distributed, "is_nccl_available", lambda: True)
    argv = shlex.split(line)[1:]
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--dry-run"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 0, f"{page}: `{line}` -> {err.strip()}"


def test_relative_links_point_at_files():
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_the_readme_is_short_and_opens_with_a_result():
    text = (ROOT / "README.md").read_text()
    first_screen = "\n".join(text.splitlines()[:25])
    assert len(text.splitlines()) <= 150
    assert "![" in first_screen and "results/reference/ref-" in first_screen


def test_the_readmes_quoted_finding_is_what_compare_prints(capsys, monkeypatch):
    """The result on the README's first screen is stbench's own words for the committed study."""
    text = (ROOT / "README.md").read_text()
    command = re.search(
        r"as `(stbench compare results/reference/ref-[^`]+)` states it", text
    ).group(1)
    quoted = " ".join(
        ln.removeprefix(">").strip() for ln in text.splitlines() if ln.startswith("> ")
    )
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as exit_info:
        main(shlex.split(command)[1:])
    printed = " ".join(capsys.readouterr().out.split())
    assert exit_info.value.code == 0 and quoted and f"Finding: {quoted}" in printed


OPTIONS_HEADING = "## Every command's options"


def options_table() -> str:
    """The table of every command's options as the CLI declares them (name, value, help): what
    docs/running.md holds under OPTIONS_HEADING. Regenerate it with
    `python -c "from tests.test_docs import options_table; print(options_table())"`."""
    import typer

    from stbench.cli import app as cli_app

    # each command module registers its commands on the app
    from stbench.cli import (  # noqa: F401
        asking,
        comparing,
        datasets,
        doctoring,
        inventory,
        reporting,
        running,
        tuning,
    )

    def leaves(command, path):
        subs = getattr(command, "commands", None)
        if not subs:
            yield path, command
        for name in cli_app.ORDER if not path else sorted(subs or ()):
            if name in (subs or {}):
                yield from leaves(subs[name], [*path, name])

    lines = ["| command | option | value | what it sets |", "|---|---|---|---|"]
    root = typer.main.get_command(cli_app.app)
    for path, command in leaves(root, []):
        for p in command.params:
            names = [o for o in p.opts + p.secondary_opts if o.startswith("--") and o != "--help"]
            if not names:
                continue
            value = "" if getattr(p, "is_flag", False) else (p.metavar or "").replace("|", "\\|")
            what = " ".join((p.help or "").split()).replace("|", "\\|")
            lines.append(f"| {' '.join(path)} | `{' / '.join(names)}` | {value} | {what} |")
    return "\n".join(lines)


def test_running_md_holds_every_commands_options_as_the_cli_declares_them():
    """One table of every option of every command (docs/running.md), the CLI's own words: a new
    or renamed option that the page does not show fails here (regenerate: options_table)."""
    page = (ROOT / "docs" / "running.md").read_text()
    assert OPTIONS_HEADING in page
    section = page.split(OPTIONS_HEADING, 1)[1]
    table = "\n".join(line for line in section.splitlines() if line.startswith("|"))
    assert table.split("\n")[: len(options_table().splitlines())] == options_table().splitlines()
