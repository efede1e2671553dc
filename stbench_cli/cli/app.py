"""The Typer application; each command lives in its own module and registers itself here."""

from __future__ import annotations

import typer

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Honest GPU-vs-CPU and multi-device scaling benchmarks for spatio-temporal training.",
)
