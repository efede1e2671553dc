"""The contract between the engine and its workloads: all a workload imports from stbench.

Torch-free at import."""

from .params import COMMON_PARAMS, Param, TrainerParams
from .task import Data, Metric, Model, Optim, Supervised, Task, tensor_mb
from .workload import BuildContext, Workload

__all__ = ["COMMON_PARAMS", "BuildContext", "Data", "Metric", "Model", "Optim", "Param", "Supervised", "Task",
           "TrainerParams", "Workload", "tensor_mb"]
