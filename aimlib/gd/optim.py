r"""Update rules for a batch of students: plain gradient descent and Adam.

Both act on weights ``W`` of shape ``(k, d, r)`` with gradient ``g`` and a
``(k,)`` boolean mask ``active``: a stopped restart (mask ``False``) keeps its
weights.  Adam keeps its moments for every restart.  :class:`Batches` draws
the mini-batches.

The default step (:func:`default_lr`) is the paper's Adam ``lr = 0.1`` for a student no
wider than ``d``, and ``0.1 sqrt(d / r)`` for a wider one: Adam moves every entry of ``W``
by about ``lr`` whatever the size of the gradient, and the ``r`` columns of ``W`` move
together, so one step changes ``S_hat = W W^T / sqrt(r d)`` by about ``0.2 lr sqrt(r / d)``
in the units where the data-free estimate has error 1 (measured at ``d = 20``, one step
from a random start: ``||dS_hat||_F / sqrt(d) = 0.21`` at ``r = d``, ``0.80`` at
``r = 25 d``).  At ``rho = 25`` (``d = 20``, ``alpha = 0.3``, seed 0) ``lr = 0.1`` fits the
training data (loss ``0.061 -> 0.0014`` in 1000 steps) while the estimation error goes from
2 (the random start) to 10 at step 50 and ends at 4.4 (seeds 1, 2: 4.4, 3.9), against 1.02
for the data-free estimate; ``lr = 0.1 / sqrt(25) = 0.02`` ends at 0.81 (seeds 1, 2: 1.07,
0.97; 0.62 after 4000 steps).
"""
from __future__ import annotations

import math

from .. import _validate as v
from ..backend import get_array_module, to_device

OPTIMIZERS = ("adam", "gd")
#: the paper's Adam step (arXiv:2506.01582: Adam, lr 0.1, 1000 steps), for students of width ``r <= d``
LR = 0.1


def default_lr(optimizer: str, student: str, r: int, d: int) -> float:
    """The default ``lr``: :data:`LR`, divided by ``sqrt(r / d)`` for Adam on a factorised student wider than ``d``.

    Plain gradient descent needs no such factor (its step in ``S_hat`` is ``lr`` times a
    gradient, which does not grow with ``r``: at ``rho = 25`` and ``lr = 0.1`` it stays slow, error
    2.0 -> 1.9 in 1000 steps), nor does the direct student (no width).
    """
    if optimizer == "adam" and student == "factorised" and r > d:
        return LR / math.sqrt(r / d)   # 0.02 exactly at r = 25 d
    return LR


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
