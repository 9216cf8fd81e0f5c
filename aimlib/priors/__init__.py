r"""Priors on the index matrix ``S``, first-class objects beside the channels.

Each prior holds its law (``second_moment`` ``Q0``, ``mean``, ``sample``) and its
Bayes side (``mmse(Delta)``, ``zero_slope``, ``sector_mmse``, ``denoise``): the
contract of :mod:`~aimlib.priors.base`, which the state evolution, the free
entropy and GAMP-RIE use and :func:`check_prior` checks.

* :mod:`~aimlib.priors.gaussian` -- i.i.d. Gaussian ``S`` (GOE, or square with two sectors);
* :mod:`~aimlib.priors.wishart` -- ``S = W W^T/sqrt(r d)`` (tied key and query) and its centred variant;
* :mod:`~aimlib.priors.rectangular` -- ``S = Q K^T/sqrt(r d)`` (untied key and query, two sectors);
* :mod:`~aimlib.priors.sampled` -- the same law, denoised by sampling its posterior (HMC);
* :mod:`~aimlib.priors.hmc` -- the Hamiltonian Monte Carlo engine of the sampled posteriors;
* :mod:`~aimlib.priors.correlated` -- two layers denoised one at a time under correlated noises;
* :mod:`~aimlib.priors.joint` -- the same two layers denoised jointly, by sampling their posterior;
* :mod:`~aimlib.priors.registry` -- priors by family name and width ratio (:func:`make_prior`);
* :mod:`~aimlib.priors.check` -- the contract check any new prior runs.
"""
from .base import Prior
from .check import check_prior
from .gaussian import Gaussian
from .rectangular import Rectangular
from .registry import FAMILIES, TEACHER_FAMILIES, make_prior, make_priors
from .sampled import Sampled
from .wishart import Centred, Wishart, teacher_width

__all__ = ["Prior", "Gaussian", "Wishart", "Centred", "Rectangular", "Sampled", "FAMILIES", "TEACHER_FAMILIES",
           "make_prior", "make_priors", "check_prior", "teacher_width"]
