"""Ready-made parametrizations (``torch.nn.utils.parametrizations``): ``weight_norm``,
``spectral_norm`` and ``orthogonal``, registered through ``parametrize`` (state_dict keys
``parametrizations.<name>.original0/1`` or ``.original`` plus the parametrization's buffers,
as in PyTorch).

>>> import fiamma
>>> from fiamma import nn
>>> from fiamma.nn.utils.parametrizations import weight_norm
>>> m = weight_norm(nn.Linear(4, 2))
>>> sorted(m.state_dict())
['bias', 'parametrizations.weight.original0', 'parametrizations.weight.original1']
"""

import math

import fiamma
from fiamma.nn import functional as F
from fiamma.nn.modules.module import Module
from fiamma.nn.utils import parametrize

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


# ---- helpers shared with the older hook-based weight_norm / spectral_norm ------------------------


def _norm_except_dim(v, dim):
    """2-norm of ``v`` over every dimension but ``dim`` (kept with size 1); the norm of the
    whole tensor (0-d) when ``dim == -1``, as PyTorch's ``norm_except_dim``."""
    if dim == -1:
        return fiamma.linalg.vector_norm(v)
    axes = tuple(d for d in range(v.dim()) if d != dim)
    return fiamma.linalg.vector_norm(v, 2, dim=axes, keepdim=True)


def _weight_norm(v, g, dim):
    return v * (g / _norm_except_dim(v, dim))


def _to_matrix(weight, dim):
    if dim != 0:
        weight = weight.permute(dim, *(d for d in range(weight.dim()) if d != dim))
    return weight.reshape(weight.shape[0], -1)


def _is_transposed_conv(module):
    return any(c.__name__ in ("ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d")
               for c in type(module).__mro__)


# ---- weight_norm -----------------------------------------------------------------------------


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return _norm_except_dim(weight, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """Reparametrize ``module.<name>`` as ``g * v / ||v||`` (norm over every dimension but
    ``dim``; the whole tensor when ``dim`` is None): ``original0`` is g, ``original1`` is v."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def _legacy_keys(state_dict, prefix, *_):
        # checkpoints saved with the older nn.utils.weight_norm store ``<name>_g``/``<name>_v``
        # (PyTorch's parametrization loads them under the new names too)
        g, v = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g in state_dict and v in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v)

    module._register_load_state_dict_pre_hook(_legacy_keys)
    return module


# ---- spectral_norm ---------------------------------------------------------------------------


class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.dim()
        if dim >= ndim or dim < -ndim:
            raise IndexError("Dimension out of range (expected to be in range of "
                             f"[-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            mat = _to_matrix(weight.detach(), self.dim)
            h, w = mat.shape
            u = fiamma.randn(h, dtype=weight.dtype)
            v = fiamma.randn(w, dtype=weight.dtype)
            self.register_buffer("_u", F.normalize(u, dim=0, eps=eps))
            self.register_buffer("_v", F.normalize(v, dim=0, eps=eps))
            self._power_method(mat, 15)  # start from a reasonable estimate

    def _power_method(self, mat, n):
        with fiamma.no_grad():
            mat = mat.detach()
            for _ in range(n):
                self._u.copy_(F.normalize(fiamma.mv(mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(fiamma.mv(mat.T, self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        if weight.dim() == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        mat = _to_matrix(weight, self.dim)
        if self.training:
            self._power_method(mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = fiamma.dot(u, fiamma.mv(mat, v))
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Divide ``module.<name>`` by its largest singular value, estimated by power iteration
    (``n_power_iterations`` per forward in training mode; buffers ``_u``, ``_v``). ``dim``
    is the output dimension (default 0, 1 for transposed convolutions)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, fiamma.Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if _is_transposed_conv(module) else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


# ---- orthogonal ------------------------------------------------------------------------------


def _matrix_exp(a):
    """``exp(a)`` of (batched) square matrices by scaling and squaring with a Taylor
    polynomial (differentiable: matmuls only)."""
    with fiamma.no_grad():
        norm = float(a.detach().abs().sum(-1).amax().item()) if a.numel() else 0.0
    s = max(0, int(math.ceil(math.log2(norm))) + 1) if norm > 0.5 else 0
    x = a / (2.0 ** s)
    n = a.shape[-1]
    eye = fiamma.eye(n, dtype=a.dtype)
    res = eye + x
    term = x
    for k in range(2, 19):
        term = term @ x / k
        res = res + term
    for _ in range(s):
        res = res @ res
    return res


def _householder_product(a, tau):
    """``H_1 H_2 ... H_k`` (first columns) for reflectors ``H_i = I - tau_i v_i v_i^T`` with
    ``v_i`` the i-th column of ``a`` below the diagonal and 1 on it."""
    n, k = a.shape[-2], a.shape[-1]
    eye = fiamma.eye(n, dtype=a.dtype)
    q = eye.expand(*a.shape[:-2], n, n)
    rows = fiamma.arange(n).unsqueeze(1)
    for i in range(k):
        col = a[..., :, i:i + 1]
        v = fiamma.where(rows > i, col, fiamma.where(rows == i, fiamma.ones_like(col),
                                                    fiamma.zeros_like(col)))
        h = eye - tau[..., i].unsqueeze(-1).unsqueeze(-1) * (v @ v.mT)
        q = q @ h
    return q[..., :, :k]


def _geqrf(a):
    """LAPACK's geqrf for a tall (batch of) matrix: R on and above the diagonal, the
    Householder vectors (unit first entry implied) below it, and the factors ``tau``."""
    a = a.clone()
    n, k = a.shape[-2], a.shape[-1]
    taus = []
    for j in range(k):
        x = a[..., j:, j]
        alpha = x[..., 0]
        xnorm = fiamma.linalg.vector_norm(x[..., 1:], dim=-1) if j + 1 < n \
            else fiamma.zeros_like(alpha)
        trivial = xnorm == 0
        sign = fiamma.where(alpha >= 0, fiamma.ones_like(alpha), -fiamma.ones_like(alpha))
        beta = -sign * fiamma.hypot(alpha, xnorm)
        beta = fiamma.where(trivial, alpha, beta)
        safe_beta = fiamma.where(trivial, fiamma.ones_like(beta), beta)
        tau = fiamma.where(trivial, fiamma.zeros_like(beta), (beta - alpha) / safe_beta)
        denom = fiamma.where(trivial, fiamma.ones_like(alpha), alpha - beta)
        v = fiamma.cat([fiamma.ones_like(alpha).unsqueeze(-1),
                        x[..., 1:] / denom.unsqueeze(-1)], -1)
        if j + 1 < k:  # apply H = I - tau v v^T to the remaining columns
            rest = a[..., j:, j + 1:]
            w = (v.unsqueeze(-1) * rest).sum(-2, keepdim=True)
            a[..., j:, j + 1:] = rest - tau.unsqueeze(-1).unsqueeze(-1) * v.unsqueeze(-1) * w
        a[..., j, j] = beta
        if j + 1 < n:
            a[..., j + 1:, j] = v[..., 1:]
        taus.append(tau)
    return a, fiamma.stack(taus, -1)


def _make_orthogonal(a):
    """Q of ``a = QR`` with ``diag(R) >= 0``."""
    q, r = fiamma.linalg.qr(a)
    sign = fiamma.sign(r.diagonal(dim1=-2, dim2=-1))
    sign = fiamma.where(sign == 0, fiamma.ones_like(sign), sign)
    return q * sign.unsqueeze(-2)


def _is_orthogonal(q):
    n, k = q.shape[-2], q.shape[-1]
    eye = fiamma.eye(k, dtype=q.dtype)
    eps = 10.0 * n * fiamma.finfo(q.dtype).eps
    return bool(((q.mT @ q - eye).abs() <= eps).all())


_MAPS = ("matrix_exp", "cayley", "householder")


class _Orthogonal(Module):
    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, x):
        n, k = x.shape[-2], x.shape[-1]
        transposed = n < k
        if transposed:
            x = x.mT
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            x = x.tril()
            if n != k:
                x = fiamma.cat([x, fiamma.zeros(*x.shape[:-2], n, n - k, dtype=x.dtype)], -1)
            a = x - x.mT
            if self.orthogonal_map == "matrix_exp":
                q = _matrix_exp(a)
            else:  # Cayley: (I - A/2)^{-1} (I + A/2)
                eye = fiamma.eye(n, dtype=a.dtype)
                q = fiamma.linalg.solve(eye - 0.5 * a, eye + 0.5 * a)
            if n != k:
                q = q[..., :k]
        else:
            a = x.tril(-1)
            tau = 2.0 / (1.0 + (a * a).sum(-2))
            q = _householder_product(a, tau)
            q = q * x.diagonal(dim1=-2, dim2=-1).detach().trunc().unsqueeze(-2)
        if "base" in self._buffers:
            q = self.base @ q
        if transposed:
            q = q.mT
        return q

    def right_inverse(self, q):
        with fiamma.no_grad():
            if tuple(q.shape) != self.shape:
                raise ValueError(f"Expected a matrix or batch of matrices of shape "
                                 f"{list(self.shape)}. Got a tensor of shape {list(q.shape)}.")
            q_init = q
            n, k = q.shape[-2], q.shape[-1]
            transpose = n < k
            if transpose:
                q = q.mT
                n, k = k, n
            if "base" not in self._buffers:
                if self.orthogonal_map in ("matrix_exp", "cayley"):
                    raise NotImplementedError("It is not possible to assign to the matrix "
                                              "exponential or the Cayley parametrizations when "
                                              "use_trivialization=False.")
                # Householder: the reflectors of Q's QR factorisation, with R's diagonal
                # signs (+-1) on the diagonal (a reflector left out flips the sign)
                a, tau = _geqrf(q)
                d = fiamma.sign(a.diagonal(dim1=-2, dim2=-1))
                d = fiamma.where(tau == 0, -d, d)
                a.diagonal(dim1=-2, dim2=-1).copy_(d)
                return a.mT if transpose else a
            if n == k:
                q = q.clone() if _is_orthogonal(q) else _make_orthogonal(q)
            else:
                extra = fiamma.randn(*q.shape[:-2], n, n - k, dtype=q.dtype)
                q = _make_orthogonal(fiamma.cat([q, extra], -1))
            self.base = q
            neg_id = fiamma.zeros_like(q_init)
            neg_id.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
            return neg_id


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """Constrain ``module.<name>`` (a matrix or batch of matrices) to be orthogonal through
    ``orthogonal_map``: "matrix_exp" (default for square), "cayley" or "householder" (default
    otherwise). With ``use_trivialization`` the map is taken around a ``base`` buffer, and
    assigning a matrix sets ``base`` to (an orthogonalisation of) it."""
    weight = getattr(module, name, None)
    if not isinstance(weight, fiamma.Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.dim() < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of "
                         f"{weight.dim()} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] \
            else "householder"
    if orthogonal_map not in _MAPS:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", '
                         f'"householder". Got: {orthogonal_map}')
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
