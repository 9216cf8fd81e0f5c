r"""Random-matrix toolkit for the prior side: spectra, Stieltjes transforms, the RIE.

Model (book, chapters "Random matrices" and "Matrix denoising")
---------------------------------------------------------------
* Target: ``S = W W^T / sqrt(r d)`` with ``W`` of shape ``(d, r)`` i.i.d. ``N(0, 1)``,
  ``rho = r / d`` and ``s = sqrt(rho)``.  Its spectrum is ``s`` times a
  Marchenko-Pastur law of ratio ``1/rho`` (plus an atom of mass ``1 - rho`` at 0
  when ``rho < 1``); its R-transform is ``R_S(w) = s / (1 - w / s)``.
* Observation: ``Y = S + sqrt(Delta) Z`` with ``Z`` a GOE matrix whose spectrum
  is the semicircle on ``[-2, 2]``; ``R_Y(w) = R_S(w) + Delta w``.

Conventions
-----------
* Stieltjes transform: ``g(z) = int mu(x) / (z - x) dx``; on the real line
  ``g(x + i0) = h(x) - i pi mu(x)`` with ``h(x) = p.v. int mu(y)/(x - y) dy``.
  Its inverse is ``z(g) = 1/g + R_Y(g)``, which gives the cubic of
  :func:`cubic_coefficients`.
* RIE: eigenvectors of ``Y``, eigenvalue map ``lambda -> lambda - 2 Delta h(lambda)``.
* MMSE: ``mmse(Delta) = Delta - (4 pi^2 / 3) Delta^2 int mu_Delta^3``.

Modules: :mod:`~aimlib.rmt.spectrum` (the spectra, the cubic, the support,
moments, sampling) and :mod:`~aimlib.rmt.denoising` (the MMSE and the estimators);
``_arcs`` computes the support's edges and its :func:`quadrature` (nodes, weights and
boundary values ``g(x + i0)``), both cached (:func:`clear_caches` empties the caches).
"""
from __future__ import annotations

from .._validate import DELTA_RANGE, RHO_RANGE
from ._arcs import clear_caches, quadrature
from .denoising import linear_shrinkage, mmse, mmse_gaussian, rie, rie_divergence, rie_eigenvalues
from .spectrum import (atom_S, cdf, cubic_coefficients, density, density_S, discriminant_quartic,
                       hilbert, integral_density_cubed, moments, sample_denoising, sample_goe,
                       sample_wishart, stieltjes, support, support_S)

__all__ = [
    "atom_S",
    "density_S",
    "support_S",
    "cubic_coefficients",
    "discriminant_quartic",
    "stieltjes",
    "hilbert",
    "density",
    "support",
    "moments",
    "cdf",
    "integral_density_cubed",
    "mmse",
    "mmse_gaussian",
    "rie_eigenvalues",
    "rie_divergence",
    "rie",
    "linear_shrinkage",
    "sample_goe",
    "sample_wishart",
    "sample_denoising",
    "quadrature",
    "clear_caches",
]
