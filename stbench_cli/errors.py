"""The one exception type the CLI turns into a single clear line and a non-zero exit."""


class StbenchError(Exception):
    """A user-facing error: its message names what was wrong and what is valid."""
