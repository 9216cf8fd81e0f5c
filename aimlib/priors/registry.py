"""Priors by family name and width ratio: the one place where ``rho = inf`` becomes the Gaussian prior."""
from __future__ import annotations

import math

from .. import _validate as v
from .base import Prior
from .gaussian import Gaussian
from .rectangular import Rectangular
from .sampled import Sampled
from .wishart import Centred, Wishart

__all__ = ["FAMILIES", "TEACHER_FAMILIES", "make_prior", "make_priors"]

#: prior families by name (the teachers a finite width ratio ``rho`` names)
FAMILIES = {"wishart": Wishart, "centred": Centred, "rectangular": Rectangular, "sampled": Sampled}
#: the families of a tied teacher ``S = W W^T/sqrt(r d)``: as drawn, or with its known mean removed
TEACHER_FAMILIES = ("wishart", "centred")


def make_prior(prior=0.5, family: str = "wishart") -> Prior:
    """A :class:`~aimlib.priors.base.Prior` from a width ratio, or an instance passed through.

    Parameters
    ----------
    prior : float or Prior
        A width ratio ``rho`` in ``RHO_RANGE`` (``inf``: the Gaussian prior, the
        infinite-width limit of every family, symmetric or square as the family is), or a prior.
    family : {'wishart', 'centred', 'rectangular', 'sampled'}
        The teachers a finite ``rho`` names (``'rectangular'``, ``'sampled'``: untied
        key and query, square ``S``, with the equalised and the sampled denoiser).
    """
    if isinstance(prior, Prior):
        return prior
    v.choice("family", family, FAMILIES)
    rho = v.rho(prior, allow_inf=True)
    return Gaussian(symmetric=FAMILIES[family].symmetric) if math.isinf(rho) else FAMILIES[family](rho)


def make_priors(channel, prior, family: str | None = None) -> tuple:
    """One prior per index matrix that ``channel`` reads (``channel.n_indices`` of them).

    ``prior`` is one width ratio or prior (``L = 1``) or a sequence of ``L``; width
    ratios name the ``family`` (default ``'wishart'``, or ``'rectangular'`` for a
    channel of square indices, ``channel.square``).  A prior must match the channel:
    symmetric ``S`` for the tied channels, square ``S`` for a square one.
    """
    square = channel.square
    family = family or ("rectangular" if square else "wishart")
    L = channel.n_indices
    items = list(prior) if isinstance(prior, (list, tuple)) or getattr(prior, "ndim", 0) == 1 else [prior]
    if len(items) != L:
        raise ValueError(f"rho must hold {L} width ratios or priors (one per index of {channel!r}), "
                         f"got {len(items)}")
    priors = tuple(make_prior(p if isinstance(p, Prior) else float(p), family) for p in items)
    for p in priors:
        if p.symmetric == square:
            raise ValueError(f"the prior {p!r} is {'symmetric' if p.symmetric else 'square'}, but {channel!r} "
                             f"reads {'square' if square else 'symmetric'} index matrices")
    return priors
