"""The Typer application; each command lives in its own module and registers itself here."""

from __future__ import annotations

import typer
from typer.core import TyperArgument, TyperGroup

# `stbench --help` lists the commands in the order a newcomer meets them
ORDER = (
    "run",
    "gpu-vs-cpu",
    "compare",
    "report",
    "tune",
    "profile",
    "list",
    "env",
    "doctor",
    "data",
    "gate",
)


class Commands(TyperGroup):
    def list_commands(self, ctx) -> list[str]:
        names = super().list_commands(ctx)
        return sorted(names, key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER))


def plain_arguments(command) -> None:
    """Every argument of `command` and its subcommands shown by its metavar alone: Typer adds
    the Python type beside it (`PATHS <list[Path]>`), which says nothing to a user."""
    for param in getattr(command, "params", ()):
        if isinstance(param, TyperArgument) and param.metavar:
            param.display_type_rich = lambda ctx: None
    for sub in getattr(command, "commands", {}).values():
        plain_arguments(sub)


app = typer.Typer(
    cls=Commands,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # plain help, as Click writes it: it wraps to the terminal, shows each option once, and
    # fits `run --help` in a screen (Typer's boxes took 122 lines)
    rich_markup_mode=None,
    help="Honest GPU-vs-CPU and multi-device scaling benchmarks for spatio-temporal training.",
)
