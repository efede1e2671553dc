"""dcrnn-pems' diffusion: the stacked recurrence and its hand-written backward against DCRNN's
plain one, sparse and dense supports alike, and the split cell against the concatenating one."""

import numpy as np
import pytest
import torch

from stbench.workloads.dcrnn_pems import graph
from stbench.workloads.dcrnn_pems.diffusion import Supports, choose_layout, diffuse
from stbench.workloads.dcrnn_pems.model import DCRNN, DCGRUCell, TinyDCRNN
from stbench.workloads.dcrnn_pems.source import load_graph


def reference_terms(x, supports, k):
    """DCRNN's recurrence, one support and hop at a time under autograd: x (n, f, b) ->
    (n, terms x f, b), terms X, T_1..T_k(S_1) X, T_1..T_k(S_2) X."""
    n, f, b = x.shape
    x0 = x.reshape(n, f * b)
    terms = [x0]
    for s in supports:
        prev, cur = x0, s @ x0
        terms.append(cur)
        for _ in range(2, k + 1):
            prev, cur = cur, 2 * (s @ cur) - prev
            terms.append(cur)
    return torch.stack(terms, dim=1).view(n, -1, b)


def reference_cell(cell, supports, x, h):
    """The DCGRU cell as DCRNN writes it: diffuse [x, h] and [x, r h], one weight product each."""

    def conv(layer, inp):
        terms = reference_terms(inp, supports, cell.k)  # (n, T f, b)
        return torch.einsum("ntb,to->nob", terms, layer.weight) + layer.bias.view(1, -1, 1)

    r, u = torch.sigmoid(conv(cell.gates, torch.cat([x, h], 1))).split(cell.units, dim=1)
    c = torch.tanh(conv(cell.candidate, torch.cat([x, r * h], 1)))
    return u * h + (1 - u) * c


def random_supports(n=11, density=0.3, seed=0):
    g = torch.Generator().manual_seed(seed)
    mats = [
        (torch.rand(n, n, generator=g) < density) * torch.rand(n, n, generator=g) for _ in range(2)
    ]
    return [m.double().to_sparse().coalesce() for m in mats]


@pytest.mark.parametrize("layout", ["sparse", "dense"])
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_stacked_diffusion_matches_the_plain_recurrence_and_its_gradient(layout, k):
    sup = random_supports()
    graph_ = Supports(sup, layout)
    assert graph_.layout == layout
    x = torch.randn(11, 3, 2, dtype=torch.double, requires_grad=True)
    torch.testing.assert_close(
        diffuse(x, graph_, k), reference_terms(x, [s.to_dense() for s in sup], k)
    )
    assert torch.autograd.gradcheck(lambda t: diffuse(t, graph_, k), (x,))


def test_the_split_cell_is_the_concatenating_cell():
    sup = random_supports(seed=1)
    torch.manual_seed(0)
    cell = DCGRUCell(2, 3, 4, 3).double()
    x = torch.randn(11, 3, 5, dtype=torch.double, requires_grad=True)
    h = torch.randn(11, 4, 5, dtype=torch.double, requires_grad=True)
    out = cell.run(x, h, Supports(sup, "sparse"))
    ref = reference_cell(cell, [s.to_dense() for s in sup], x, h)
    torch.testing.assert_close(out, ref)
    weights = [p for p in cell.parameters()]
    grads = torch.autograd.grad(out.square().sum(), [x, h, *weights])
    refs = torch.autograd.grad(ref.square().sum(), [x, h, *weights])
    for g, r in zip(grads, refs):
        torch.testing.assert_close(g, r)


@pytest.mark.parametrize("model", ["tiny", "dcrnn"])
def test_dense_and_sparse_supports_give_the_same_outputs_and_gradients(model):
    _, adj = load_graph({"graph": "la", "size": "la"}, 0)
    supports = graph.random_walk_supports(adj)
    x, y = torch.randn(4, 12, adj.shape[0], 2), torch.randn(4, 12, adj.shape[0], 1)
    results = {}
    for layout in ("sparse", "dense"):
        torch.manual_seed(0)
        net = (
            TinyDCRNN(supports, layout=layout)
            if model == "tiny"
            else DCRNN(supports, units=8, layers=2, layout=layout)
        )
        assert net.graph.layout == layout
        out = net(x, y, 0)
        out.abs().mean().backward()
        results[layout] = (out, [p.grad for p in net.parameters()])
    (out_s, grads_s), (out_d, grads_d) = results["sparse"], results["dense"]
    assert out_s.shape == (4, 12, adj.shape[0], 1)
    torch.testing.assert_close(out_s, out_d, rtol=1e-5, atol=1e-6)
    for gs, gd in zip(grads_s, grads_d):
        torch.testing.assert_close(gs, gd, rtol=1e-4, atol=1e-6)


def test_layout_follows_density():
    """Road graphs (PeMS-BAY: 2.5% of the pairs) stay sparse; a small dense graph goes dense."""
    _, adj = load_graph({"graph": "bay", "size": "bay"}, 0)
    assert choose_layout(graph.random_walk_supports(adj)) == "sparse"
    assert choose_layout(graph.random_walk_supports(np.ones((20, 20), np.float32))) == "dense"
    assert choose_layout(graph.random_walk_supports(adj), "dense") == "dense"
