"""ONE helper that checks any zerollm op against PyTorch autograd and finite differences.

    check_op(case_key, torch_fn, dtype)

runs the registered case (zerollm.teach.gradcheck.CASES) forward and backward in NumPy, runs ``torch_fn``
on the same inputs in float64 torch, and compares: output shape and dtype, output values, and the
gradient of every differentiable input. In float64 it also compares the backward with central
finite differences. Errors are measured relative to the largest reference value of each tensor.
"""

import numpy as np
import torch

from zerollm.teach.gradcheck import CASES, check_case, rel_err

TOL = {np.float64: 1e-8, np.float32: 1e-4}


def _to_torch(a, requires_grad):
    a = np.asarray(a)
    if np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_:
        return torch.from_numpy(a.copy())
    return torch.tensor(a, dtype=torch.float64, requires_grad=requires_grad)


def check_op(key, torch_fn, dtype, seed=0):
    """Returns a dict of the measured errors (and asserts they are within tolerance)."""
    case = CASES[key](np.random.default_rng(seed), dtype)
    tol = TOL[dtype]
    out, cache = case.forward(*case.inputs, **case.kwargs)
    out = np.asarray(out)
    assert out.dtype == dtype, f"{case.name}: {dtype.__name__} in, {out.dtype} out"
    dy = np.random.default_rng(seed + 1).standard_normal(out.shape).astype(dtype)

    # torch reference, always in float64 from the very same inputs
    t_in = [None if a is None else _to_torch(a, i in case.wrt) for i, a in enumerate(case.inputs)]
    t_out = torch_fn(case, *t_in)
    assert tuple(t_out.shape) == out.shape, f"{case.name}: shape {out.shape} vs torch {tuple(t_out.shape)}"
    errors = {"out": rel_err(out, t_out.detach().numpy())}
    (t_out * torch.from_numpy(dy.astype(np.float64))).sum().backward()

    grads = case.backward(dy, cache)
    assert len(grads) == len(case.wrt), f"{case.name}: backward returned {len(grads)} grads"
    for g, i in zip(grads, case.wrt):
        assert np.asarray(g).shape == np.shape(case.inputs[i]), f"{case.name}: grad {i} has the wrong shape"
        assert np.asarray(g).dtype == dtype, f"{case.name}: grad {i} is {np.asarray(g).dtype}"
        errors[f"grad{i}"] = rel_err(g, t_in[i].grad.numpy())
    bad = {k: v for k, v in errors.items() if not v <= tol}
    assert not bad, f"{case.name} ({dtype.__name__}): errors above {tol}: {bad}"

    if dtype == np.float64:
        fd = check_case(CASES[key](np.random.default_rng(seed), dtype))
        assert fd.ok, f"{case.name}: finite differences disagree, max rel {fd.max_rel:.2e}"
        errors["finite_diff"] = fd.max_rel
    return errors
