"""The contract between the engine and its workloads: all a workload imports from stbench.

Torch-free at import."""

from ..device import Accelerator, Device, is_cuda
from ..errors import require
from .checkpoint import CHECKPOINT, run_blocks, segments
from .kept import kept_arrays
from .memory import cublas_workspace_bytes, cuda_library_bytes
from .params import COMMON_PARAMS, Param, TrainerParams
from .task import Data, Metric, Model, Optim, ReadCost, Supervised, Task, tensor_mb
from .workload import BATCH, BuildContext, SizeAxis, Workload

__all__ = [
    "require",
    "Accelerator",
    "Device",
    "is_cuda",
    "cublas_workspace_bytes",
    "cuda_library_bytes",
    "CHECKPOINT",
    "kept_arrays",
    "COMMON_PARAMS",
    "BuildContext",
    "run_blocks",
    "segments",
    "Data",
    "Metric",
    "Model",
    "Optim",
    "Param",
    "ReadCost",
    "Supervised",
    "Task",
    "TrainerParams",
    "Workload",
    "SizeAxis",
    "BATCH",
    "tensor_mb",
]
