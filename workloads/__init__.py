"""The built-in workloads, installed as `stbench.workloads`.

Each sub-package defines `WORKLOAD` (a `stbench.contract.Workload`) and is registered by an
entry point in the `stbench.workloads` group (pyproject.toml), exactly as a third-party
package registers its own. Workloads import only `stbench.contract` from the engine.
"""
