r"""Update rules for a batch of students: plain gradient descent and Adam.

Both act on weights ``W`` of shape ``(k, d, r)`` with gradient ``g`` and a
``(k,)`` boolean mask ``active``: a stopped restart (mask ``False``) keeps its
weights.  Adam keeps its moments for every restart.  :class:`Batches` draws
the mini-batches.
"""
from __future__ import annotations

from .. import _validate as v
from ..backend import get_array_module, to_device

OPTIMIZERS = ("adam", "gd")


class GradientDescent:
    r"""``W <- W - lr g``."""

    name = "gd"

    def __init__(self, lr: float):
        self.lr = lr

    def step(self, W, g, active):
        """Return the updated weights (restarts with ``active = False`` unchanged)."""
        a = active.astype(W.dtype)[:, None, None]
        return W - (self.lr * a) * g


class Adam:
    r"""Adam with bias correction (Kingma and Ba).

    .. math::

        m_t = \beta_1 m_{t-1} + (1 - \beta_1) g, \quad
        v_t = \beta_2 v_{t-1} + (1 - \beta_2) g^2, \quad
        W \leftarrow W - \mathrm{lr}\, \frac{m_t / (1 - \beta_1^t)}{\sqrt{v_t / (1 - \beta_2^t)} + \epsilon}.
    """

    name = "adam"

    def __init__(self, lr: float, betas=(0.9, 0.999), eps: float = 1e-8):
        self.lr, self.b1, self.b2, self.eps = lr, betas[0], betas[1], eps
        self.m1 = self.m2 = None  # allocated at the first step, like the gradient
        self.t = 0

    def step(self, W, g, active):
        """Return the updated weights (restarts with ``active = False`` unchanged)."""
        xp = get_array_module(W)
        b1, b2 = self.b1, self.b2
        if self.m1 is None:
            self.m1, self.m2 = xp.zeros_like(g), xp.zeros_like(g)
        self.t += 1
        self.m1 = b1 * self.m1 + (1 - b1) * g
        self.m2 = b2 * self.m2 + (1 - b2) * (g * g)
        mh = self.m1 / (1 - b1 ** self.t)
        vh = self.m2 / (1 - b2 ** self.t)
        a = active.astype(W.dtype)[:, None, None]
        return W - (self.lr * a) * mh / (xp.sqrt(vh) + self.eps)


#: the stream of an int seed that draws the mini-batches (its streams ``0, 1, ...`` start the restarts)
BATCH_STREAM = 2**31 - 1


class Batches:
    """Mini-batches: consecutive slices of a random permutation of the samples, a new one per epoch.

    Drawn from stream :data:`BATCH_STREAM` of an int ``seed``, from a child of a
    Generator (:func:`aimlib._validate.streams`), or from fresh entropy (None).
    """

    def __init__(self, n: int, size: int, seed, xp):
        (self.rng,) = v.streams(seed, 1, start=BATCH_STREAM)
        self.n, self.size, self.xp = n, size, xp
        self.perm, self.pos = None, n

    def next(self):
        """Indices (on the array module of the data) of the next mini-batch."""
        if self.pos + self.size > self.n:
            self.perm, self.pos = self.rng.permutation(self.n), 0
        idx = to_device(self.perm[self.pos:self.pos + self.size], self.xp)
        self.pos += self.size
        return idx


def make_optimizer(optimizer: str, *, lr: float, adam_betas=(0.9, 0.999), adam_eps: float = 1e-8):
    """Validate the options and return the update rule ``'adam'`` or ``'gd'``."""
    optimizer = v.choice("optimizer", optimizer, OPTIMIZERS)
    lr = v.positive("lr", lr)
    if len(adam_betas) != 2:
        raise ValueError(f"adam_betas must be a pair (beta1, beta2), got {adam_betas!r}")
    betas = tuple(v.in_range(f"adam_betas[{i}]", b, 0.0, 1.0 - 1e-12) for i, b in enumerate(adam_betas))
    adam_eps = v.positive("adam_eps", adam_eps)
    if optimizer == "adam":
        return Adam(lr, betas, adam_eps)
    return GradientDescent(lr)
