"""Untied key and query: ``S = Q K^T / sqrt(r d)``, not symmetric (book, chapters "Untied key and query" and
"Untied key and query: algorithms and the exact error").

Modules: :mod:`~aimlib.untied.model` (teacher, indices, softmax outputs, counting),
:mod:`~aimlib.untied.denoising` (finite-``d`` draws and the oracle curve; the rectangular RIE and
``mmse_rect`` are :mod:`aimlib.rmt.rectangular`'s, re-exported here),
:mod:`~aimlib.untied.state_evolution` (the two-overlap SE of the softmax channel through the
generic one, its isotropic closure, its bracket and threshold), :mod:`~aimlib.untied.posterior`
(the two-noise prior side and the exact SE, by sampling the posterior),
:mod:`~aimlib.untied.gamp` (GAMP with the two-sector channel step), :mod:`~aimlib.untied.student` (tied and
untied factorised students fitted by L-BFGS).  The prior is :class:`aimlib.priors.Rectangular`
(:class:`aimlib.priors.Sampled` with the sampled denoiser), the channel
:class:`aimlib.channels.UntiedSoftmax`; their pieces used here are re-exported.
"""
from ..channels.untied_softmax import channel_matrices, sector_deltas, shift_basis, untied_g_out
from ..priors.rectangular import rect_prior_step, sure_errors, tuned_prior_step
from ..priors.sampled import hmc_chain
from ..rmt.rectangular import (mmse_rect, oracle_error, rect_shrinkage, rie_rect, singular_density, singular_hilbert,
                               singular_stieltjes, spectral_divergences)
from .denoising import oracle_curve, sample_denoising_untied
from .gamp import UntiedGAMPResult, run_untied_gamp, untied_gamp, untied_prior
from .model import (count_threshold, factor_product, measurements_per_sample, part_errors, part_norms,
                    parts, sample_teacher_untied, unknowns_fraction, untied_indices, untied_softmax)
from .posterior import (SampledSE, TwoNoiseResult, hmc_errors, sample_two_noise, sampled_state_evolution,
                        two_noise_problem)
from .state_evolution import (bracket_untied, curve_untied, output_coefficients, output_free_entropy, solve_sectors,
                              solve_untied, untied_threshold)
from .student import fit_student, row_differences

__all__ = [
    # model
    "factor_product", "sample_teacher_untied", "parts", "part_norms", "part_errors", "untied_indices",
    "untied_softmax", "measurements_per_sample", "unknowns_fraction", "count_threshold",
    # denoising
    "sample_denoising_untied", "oracle_error", "oracle_curve", "rie_rect", "singular_stieltjes",
    "singular_density", "singular_hilbert", "rect_shrinkage", "spectral_divergences", "mmse_rect",
    # state evolution
    "output_coefficients", "output_free_entropy", "solve_sectors",
    "solve_untied", "bracket_untied", "curve_untied", "untied_threshold",
    # the two-noise posterior, sampled
    "two_noise_problem", "hmc_chain", "hmc_errors", "TwoNoiseResult", "sample_two_noise", "SampledSE",
    "sampled_state_evolution",
    # GAMP
    "shift_basis", "channel_matrices", "sector_deltas", "untied_g_out",
    "rect_prior_step", "sure_errors", "tuned_prior_step", "untied_prior", "UntiedGAMPResult",
    "untied_gamp", "run_untied_gamp",
    # students
    "row_differences", "fit_student",
]
