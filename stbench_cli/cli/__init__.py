"""The command line: thin Typer commands, shared options, Rich rendering (Rich lives here only)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    """Console-script entry: one clear line and exit 2 for any user error."""
    import typer

    from ..errors import StbenchError
    # Each command module registers its commands on `app`; `--help` lists them in this order.
    from . import inventory, running, comparing, reporting, doctoring, datasets  # noqa: F401, I001
    from . import render
    from .app import app
    from .options import spread_lists

    command = typer.main.get_command(app)
    try:
        command.main(args=spread_lists(sys.argv[1:] if argv is None else argv), prog_name="stbench",
                     standalone_mode=True)
    except StbenchError as exc:
        render.error(str(exc))
        sys.exit(2)
