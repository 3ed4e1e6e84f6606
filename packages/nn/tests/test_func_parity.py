"""fiamma.func against torch.func (parity session): the same functions, written once against
the torch API, transformed by both libraries on the same inputs give the same numbers, and
bad calls raise the same exception types with the same messages."""

import numpy as np
import pytest

import fiamma

pytestmark = pytest.mark.parity
torch = pytest.importorskip("torch")


def both(a):
    a = np.asarray(a, dtype=np.float64)
    return fiamma.tensor(a), torch.tensor(a)


def npy(x):
    if isinstance(x, dict):
        return {k: npy(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(npy(v) for v in x)
    return x if isinstance(x, np.ndarray) else x.detach().numpy()


def close(a, b, rtol=1e-10, atol=1e-12):
    a, b = npy(a), npy(b)
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            close(a[k], b[k], rtol, atol)
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            close(x, y, rtol, atol)
    else:
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def funcs(lib):
    def f(x, y):
        return (lib.sin(x) * y.unsqueeze(-1)).exp().sum(0)

    def scalar(x, y):
        return (x.tanh() @ y.unsqueeze(-1).expand(-1, 2).T).pow(2).sum()

    def tree(p):
        return {"a": (p["w"] * p["b"][0]).sum(-1), "b": p["w"].cos()}

    return f, scalar, tree


RNG = np.random.default_rng(0)
X, Y = RNG.standard_normal((3, 2)), RNG.standard_normal(3)


@pytest.mark.parametrize("name", ["grad", "grad_argnums", "vjp", "jvp", "jacrev", "jacfwd",
                                  "hessian", "jacrev_tree", "jacfwd_tree", "vmap_grad",
                                  "vmap_jacrev", "linearize", "grad_and_value_aux"])
def test_transforms_match(name):
    fx, tx = both(X)
    fy, ty = both(Y)
    tw = RNG.standard_normal((2, 2))
    out = []
    for lib, x, y in ((fiamma, fx, fy), (torch, tx, ty)):
        F = lib.func
        f, scalar, tree = funcs(lib)
        w = lib.tensor(tw)
        p = {"w": w, "b": [w[0]]}
        if name == "grad":
            r = F.grad(scalar)(x, y)
        elif name == "grad_argnums":
            r = F.grad(scalar, argnums=(0, 1))(x, y)
        elif name == "vjp":
            o, fn = F.vjp(f, x, y)
            r = (o, fn(lib.ones_like(o) * 0.5))
        elif name == "jvp":
            r = F.jvp(f, (x, y), (lib.ones_like(x), y * 2))
        elif name == "jacrev":
            r = F.jacrev(f, argnums=(0, 1))(x, y)
        elif name == "jacfwd":
            r = F.jacfwd(f, argnums=(0, 1))(x, y)
        elif name == "hessian":
            r = F.hessian(scalar, argnums=(0, 1))(x, y)
        elif name == "jacrev_tree":
            r = F.jacrev(tree)(p)
        elif name == "jacfwd_tree":
            r = F.jacfwd(tree)(p)
        elif name == "vmap_grad":
            r = F.vmap(F.grad(scalar), in_dims=(0, None))(x.unsqueeze(0).expand(4, 3, 2) * 1.5, y)
        elif name == "vmap_jacrev":
            r = F.vmap(F.jacrev(lambda v: v.sin() * v.sum()), in_dims=1, out_dims=2)(x)
        elif name == "linearize":
            o, fn = F.linearize(lambda a: a.exp() * a, x)
            r = (o, fn(x * 3))
        else:
            r = F.grad_and_value(lambda a, b: (scalar(a, b), {"m": a.mean()}), has_aux=True)(x, y)
        out.append(r)
    close(*out)


def test_per_sample_grads_and_ensemble_match():
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    ours = fiamma.nn.Sequential(fiamma.nn.Linear(4, 8), fiamma.nn.ReLU(), fiamma.nn.Linear(8, 3))
    ours.load_state_dict({k: fiamma.tensor(v.numpy()) for k, v in ref.state_dict().items()})
    data = RNG.standard_normal((6, 4)).astype(np.float32)
    target = RNG.integers(0, 3, 6)
    out = []
    for lib, model in ((fiamma, ours), (torch, ref)):
        F = lib.func
        params = {k: v.detach() for k, v in model.named_parameters()}

        def loss(p, x, t):
            return lib.nn.functional.cross_entropy(F.functional_call(model, p, (x[None],)), t[None])

        out.append(F.vmap(F.grad(loss), in_dims=(None, 0, 0))(
            params, lib.tensor(data), lib.tensor(target)))
    close(*out, rtol=1e-5, atol=1e-6)

    torch.manual_seed(1)
    refs = [torch.nn.Linear(4, 2) for _ in range(3)]
    mine = [fiamma.nn.Linear(4, 2) for _ in range(3)]
    for r, m in zip(refs, mine):
        m.load_state_dict({k: fiamma.tensor(v.numpy()) for k, v in r.state_dict().items()})
    out = []
    for lib, models in ((fiamma, mine), (torch, refs)):
        F = lib.func
        p, b = F.stack_module_state(models)
        out.append(F.vmap(lambda p, b, x: F.functional_call(models[0], (p, b), (x,)),
                          in_dims=(0, 0, None))(p, b, lib.tensor(data)))
    close(*out, rtol=1e-5, atol=1e-6)


ERRORS = {
    "mismatch": lambda F, lib, x: F.vmap(lib.add)(x, lib.ones(5, 2, dtype=x.dtype)),
    "bad_in_dim": lambda F, lib, x: F.vmap(lib.sum, in_dims=2)(x),
    "in_dims_list": lambda F, lib, x: F.vmap(lib.add, in_dims=[0, 0])(x, x),
    "non_tensor_in": lambda F, lib, x: F.vmap(lambda a, b: a * b, in_dims=(0, 0))(x, 2.0),
    "none_batched": lambda F, lib, x: F.vmap(lib.add, in_dims=(None, None))(x, x),
    "non_tensor_out": lambda F, lib, x: F.vmap(lambda a: 1.0)(x),
    "out_none_batched": lambda F, lib, x: F.vmap(lambda a: a * 2, out_dims=None)(x),
    "random": lambda F, lib, x: F.vmap(lambda a: a + lib.rand(2, dtype=x.dtype))(x),
    "randomness_arg": lambda F, lib, x: F.vmap(lambda a: a, randomness="foo")(x),
    "chunk": lambda F, lib, x: F.vmap(lambda a: a, chunk_size=0)(x),
    "grad_nonscalar": lambda F, lib, x: F.grad(lambda a: a * 2)(x),
    "grad_argnum": lambda F, lib, x: F.grad(lambda a: a.sum(), argnums=1)(x),
    "grad_aux": lambda F, lib, x: F.grad(lambda a: a.sum(), has_aux=True)(x),
    "grad_int": lambda F, lib, x: F.grad(lambda a: a.sum())(x.long()),
    "jvp_tuple": lambda F, lib, x: F.jvp(lambda a: a, x, x),
    "jvp_shape": lambda F, lib, x: F.jvp(lambda a: a, (x,), (x[:1],)),
    "jacrev_complex": lambda F, lib, x: F.jacrev(lambda a: a.to(lib.complex128))(x),
    "stack_empty": lambda F, lib, x: F.stack_module_state([]),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_match(case):
    got = []
    for lib in (fiamma, torch):
        x = lib.tensor(X)
        with pytest.raises(Exception) as info:
            ERRORS[case](lib.func, lib, x)
        got.append(info.value)
    ours, theirs = got
    assert isinstance(ours, type(theirs)), (case, ours, theirs)
    assert str(ours).split("\n")[0][:60] == str(theirs).split("\n")[0][:60], (case, ours, theirs)


@pytest.mark.parametrize("pattern, lengths", [
    ("a b c -> c a b", {}), ("a ... -> ... a", {}), ("a b c -> a (b c) 1", {}),
    ("a b c -> a () b c", {}), ("a ... c -> c ... a", {}), ("(a b) c d -> a b c d", {"a": 2}),
    ("b (h1 h) (w1 w) -> (b h1 w1) h w", {"h1": 2, "w1": 3}),
    ("b (h h1) (w w1) -> b h w (h1 w1)", {"h1": 2, "w1": 3})])
def test_rearrange_matches(pattern, lengths):
    a = np.arange(24.0).reshape(1, 4, 6) if "h1" in pattern else np.arange(24.0).reshape(2, 3, 4)
    ours = fiamma.func.rearrange(fiamma.tensor(a), pattern, **lengths)
    theirs = torch.func.rearrange(torch.tensor(a), pattern, **lengths)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
