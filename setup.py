"""The package list follows the folders: every folder with an __init__.py under stbench_cli/
(installed as `stbench`) and workloads/ (`stbench.workloads`) is a package, so adding a
workload touches pyproject.toml once (its entry point). Everything else is in pyproject.toml."""

from pathlib import Path

from setuptools import setup

HERE = Path(__file__).parent


def packages(folder: str, name: str) -> list[str]:
    root = HERE / folder
    return sorted(
        ".".join([name, *p.parent.relative_to(root).parts]) for p in root.rglob("__init__.py")
    )


def all_packages() -> list[str]:
    return packages("stbench_cli", "stbench") + packages("workloads", "stbench.workloads")


if __name__ == "__main__":  # setuptools runs this file as __main__; the layout test imports it
    setup(packages=all_packages())
