"""Parent-side check: open the source and select, so a bad file, column or point fails up front."""

from .build import load_split


def check(params: dict) -> None:
    if params["data"] == "generated":
        return
    load_split(params)
