"""The commands that start a cell's world: torchrun (PyTorch's own elastic launcher) on every node.

Pure: argument lists and shell text, pinned by golden tests. A multi-node world uses torchrun's
static rendezvous, so node rank 0 (the first node) hosts rank 0 and the rendezvous store:

    torchrun --nnodes N --nproc-per-node P --node-rank I --rdzv-backend static
             --master-addr FIRST_HOST --master-port PORT -m stbench.child.cell SPEC RESULT
"""

from __future__ import annotations

import shlex

from ...plan.spec import RunSpec

# Inside a Slurm step every task knows its node and the step's nodes from the environment. The
# port follows the job and step ids, so consecutive cells of one allocation (srun) never reuse one.
SLURM_NODE_RANK = '"$SLURM_NODEID"'
SLURM_MASTER_ADDR = '"$(scontrol show hostnames "$SLURM_STEP_NODELIST" | head -n 1)"'
SLURM_MASTER_PORT = '"$((20000 + (SLURM_JOB_ID + SLURM_STEP_ID) % 20000))"'
SLURM_HELLO = (
    'echo "stbench: node $SLURM_NODEID of job $SLURM_JOB_ID.$SLURM_STEP_ID on $(hostname)"'
)


def cell_args(spec_path, result_path, extra: tuple[str, ...] = ()) -> list[str]:
    return ["-m", "stbench.child.cell", str(spec_path), str(result_path), *extra]


def single_process(python: str, cell: list[str]) -> list[str]:
    """A `single` cell: one plain process."""
    return [python, *cell]


def standalone(spec: RunSpec, python: str, cell: list[str]) -> list[str]:
    """A one-node world on this machine (torchrun picks its own free port)."""
    return [
        python,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={spec.nproc_per_node}",
        *cell,
    ]


def node(
    spec: RunSpec, python: str, cell: list[str], node_rank, master_addr, master_port
) -> list[str]:
    """The torchrun agent of one node of a (possibly multi-node) world, static rendezvous."""
    return [
        python,
        "-m",
        "torch.distributed.run",
        f"--nnodes={spec.nodes}",
        f"--nproc-per-node={spec.nproc_per_node}",
        f"--node-rank={node_rank}",
        "--rdzv-backend=static",
        f"--master-addr={master_addr}",
        f"--master-port={master_port}",
        *cell,
    ]


def slurm_node_script(spec: RunSpec, python: str, cell: list[str]) -> str:
    """What every task of a Slurm step runs (bash): its node's torchrun agent, with the node rank,
    first host and port read from the step's environment."""
    marks = {
        "@NODE_RANK@": SLURM_NODE_RANK,
        "@MASTER_ADDR@": SLURM_MASTER_ADDR,
        "@MASTER_PORT@": SLURM_MASTER_PORT,
    }
    text = shlex.join(node(spec, python, cell, *marks))
    for mark, shell in marks.items():
        text = text.replace(mark, shell)
    return f"{SLURM_HELLO}; exec {text}"


def srun(spec: RunSpec, script: str, extra: tuple[str, ...] = ()) -> list[str]:
    """One step of an allocation: one task per node, each running `script`; one failing task
    ends the step (torchrun on the other nodes would otherwise wait for it forever)."""
    return [
        "srun",
        f"--nodes={spec.nodes}",
        f"--ntasks={spec.nodes}",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
        f"--job-name=stbench-{spec.run_id}",
        *extra,
        "bash",
        "-c",
        script,
    ]


def spec_heredoc(spec: RunSpec, path: str) -> str:
    """Shell lines that write a cell's spec file, for commands printed to run by hand."""
    return f"cat > {shlex.quote(path)} <<'SPEC'\n{spec.to_json()}\nSPEC"
