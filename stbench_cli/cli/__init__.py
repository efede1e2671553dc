"""The command line: thin Typer commands, shared options, Rich rendering (Rich lives here only)."""

from __future__ import annotations

import errno
import signal
import sys

_FULL = (errno.ENOSPC, errno.EDQUOT)  # a full disk or quota: one line, not a traceback
# A scheduler's time limit (Slurm's SIGTERM before its SIGKILL), `kill`, `timeout`, a closed
# terminal: without a handler Python dies at once, and a cell's processes (forked from the warm
# server, in a group of their own) trained on alone for as long as their epochs took
STOPS = (signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """A stop signal other than Ctrl-C: the same path as Ctrl-C (every cell's processes ended,
    the rows kept, one line on how to finish), exit 128 + its number as a shell reports it."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_stopped(signum: int, frame) -> None:
    for sig in STOPS:  # the stop is under way: a second signal must not cut its clean-up short
        signal.signal(sig, signal.SIG_IGN)
    raise Stopped(signum)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry: one clear line and exit 2 for any user error."""
    for sig in STOPS:
        if signal.getsignal(sig) is signal.SIG_DFL:  # one `nohup` ignores stays ignored
            signal.signal(sig, _raise_stopped)
    try:
        _main(argv)
    # Ctrl-C while the commands load: Typer's own catch (exit 130) is not armed yet
    except KeyboardInterrupt as exc:
        from .render import exit_code

        sys.stderr.write("interrupted\n")
        sys.exit(exit_code(exc))


def _main(argv: list[str] | None) -> None:
    import typer

    from ..errors import StbenchError

    # Each command module registers its commands on `app`; `--help` lists them in this order.
    from . import (  # noqa: F401, I001
        asking,
        comparing,
        datasets,
        doctoring,
        inventory,
        render,
        reporting,
        running,
        tuning,
    )
    from .app import app, plain_arguments
    from .options import spread_lists

    command = typer.main.get_command(app)
    plain_arguments(command)
    errors = _click_errors()
    try:
        code = command.main(
            args=spread_lists(sys.argv[1:] if argv is None else argv),
            prog_name="stbench",
            standalone_mode=False,
        )
    except StbenchError as exc:
        render.error(str(exc))
        sys.exit(2)
    except errors.NoArgsIsHelpError as exc:  # `stbench` alone, or a command without its argument
        exc.show()
        sys.exit(2)
    except errors.UsageError as exc:  # a bad option, value or command: one line, not a box
        render.error(usage_line(exc))
        sys.exit(2)
    except errors.ClickException as exc:
        render.error(" ".join(exc.format_message().split()))
        sys.exit(exc.exit_code)
    except OSError as exc:
        if exc.errno not in _FULL:
            raise
        # Files are replaced atomically: what was written before this failed write is intact.
        render.error(
            f"cannot write {exc.filename or 'a result file'}: {exc.strerror}; the files written "
            "before are intact (free space, then `stbench run --resume FOLDER` finishes the study)"
        )
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


def _click_errors():
    """The exceptions of the Click that Typer runs on: its own copy in newer Typers (0.17+),
    Click itself before."""
    try:
        from typer._click import exceptions
    except ImportError:
        from click import exceptions
    if not hasattr(exceptions, "NoArgsIsHelpError"):  # Click before 8.2: no such subclass
        exceptions.NoArgsIsHelpError = type("NoArgsIsHelpError", (Exception,), {})
    return exceptions


def usage_line(exc) -> str:
    """A usage error as one line: what was wrong, and where the valid ones are listed."""
    said = " ".join(exc.format_message().split()).rstrip(".")
    ctx = getattr(exc, "ctx", None)
    where = f"`{ctx.command_path} --help`" if ctx is not None else "`stbench --help`"
    return f"{said}; {where} lists what is valid"
