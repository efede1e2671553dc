"""`stbench migrate`: result folders of an older schema rewritten once to the current one."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from . import render
from .app import app


@app.command("migrate", short_help="Rewrite result folders of an older schema.")
def migrate_command(
    paths: Annotated[
        list[Path],
        typer.Argument(metavar="PATHS", help="result folders, or folders holding them"),
    ],
) -> None:
    """Rewrite result folders of an older schema to this stbench's (every parameter written out,
    run ids kept); a folder already current is left as it is."""
    from ..plan.migrate import folders
    from ..plan.migrate import migrate as rewrite

    for folder in folders(paths):
        render.out.print(rewrite(folder), markup=False, soft_wrap=True)
