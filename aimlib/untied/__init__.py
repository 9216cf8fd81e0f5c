"""Untied key and query: ``S = Q K^T / sqrt(r d)``, not symmetric (book, chapters "Untied key and query" and
"Untied key and query: algorithms and the exact error").

Modules: :mod:`~aimlib.untied.model` (teacher, indices, softmax outputs, counting),
:mod:`~aimlib.untied.denoising` (finite-``d`` draws and the oracle curve),
:mod:`~aimlib.untied.state_evolution` (the two-overlap SE of the softmax channel through the
generic one, its isotropic closure, its bracket and threshold), :mod:`~aimlib.untied.posterior`
(the two-noise prior side and the exact SE, by sampling the posterior),
:mod:`~aimlib.untied.gamp` (GAMP with the two-sector channel step), :mod:`~aimlib.untied.student` (tied and
untied factorised students fitted by L-BFGS).  What the library's contracts hold lives there, not
here: the prior :class:`aimlib.priors.Rectangular` (:mod:`aimlib.priors.rectangular`: its prior
steps; :class:`aimlib.priors.Sampled` with the sampled denoiser), the channel
:class:`aimlib.channels.UntiedSoftmax` (:mod:`aimlib.channels.untied_softmax`: the sectors' Fisher
informations, the output free entropy, GAMP's channel matrices; registered as ``untied-softmax``, so
``python -m aimlib se|threshold|amp|sweep`` reach it) and the square denoising theory
(:mod:`aimlib.rmt.rectangular`: the rectangular RIE, ``mmse_rect``).
"""
from .denoising import oracle_curve, sample_denoising_untied
from .gamp import UntiedGAMPResult, run_untied_gamp, untied_gamp, untied_prior
from .model import (count_threshold, factor_product, measurements_per_sample, part_errors, part_norms,
                    parts, sample_teacher_untied, unknowns_fraction, untied_indices, untied_softmax)
from .posterior import (SampledSE, TwoNoiseResult, hmc_errors, sample_two_noise, sampled_state_evolution,
                        two_noise_problem)
from .state_evolution import bracket_untied, curve_untied, solve_sectors, solve_untied, untied_threshold
from .student import fit_student, row_differences

__all__ = [
    # model
    "factor_product", "sample_teacher_untied", "parts", "part_norms", "part_errors", "untied_indices",
    "untied_softmax", "measurements_per_sample", "unknowns_fraction", "count_threshold",
    # denoising
    "sample_denoising_untied", "oracle_curve",
    # state evolution
    "solve_sectors", "solve_untied", "bracket_untied", "curve_untied", "untied_threshold",
    # the two-noise posterior, sampled
    "two_noise_problem", "hmc_errors", "TwoNoiseResult", "sample_two_noise", "SampledSE",
    "sampled_state_evolution",
    # GAMP
    "untied_prior", "UntiedGAMPResult", "untied_gamp", "run_untied_gamp",
    # students
    "row_differences", "fit_student",
]
