r"""The convex route: minimum-trace recovery of a PSD ``S`` and its statistical dimension.

Book, chapter "What training learns".  Weight decay on a wide factorised student
``S = W W^T`` becomes, as its strength goes to zero, the minimum-trace PSD matrix
consistent with the data.  :mod:`~.cone` gives the statistical dimension of the
descent cone (``psi(rho) d^2``) and the threshold ``alpha_cvx``; :mod:`~.sdp`
solves the semidefinite program at small ``d`` (needs ``cvxpy`` and ``scs``);
:mod:`~.first_order` solves it at scale by ADMM, matrix-free through the
measurement maps of :mod:`~.operators` (the index operator
:class:`aimlib.index_map.IndexMap` for softmax data) or, for Gaussian
measurements, through their null space (:mod:`~.null_space`); :mod:`~.transition` locates
where the recovery probability crosses one half and extrapolates it in ``d``.
"""
from .cone import (FiniteStatisticalDimension, StatisticalDimension, goe_frobenius,
                   min_trace_threshold, semicircle_tail, statistical_dimension,
                   statistical_dimension_finite)
from .first_order import MinTraceResult, conjugate_gradient, min_trace_admm, psd_projection
from .null_space import GaussianNullSpace
from .operators import (GaussianMeasurements, SoftmaxDifferences, gram_inverse,
                        measurement_pairs, softmax_targets)
from .transition import Crossing, Extrapolation, extrapolate_crossing, transition_crossing
from .sdp import (GAUSSIAN_MAPS, MEASUREMENTS, SOLVERS, gaussian_measurements, min_trace_estimate,
                  min_trace_solve, recovery_trial, softmax_measurements)

__all__ = ["StatisticalDimension", "FiniteStatisticalDimension", "semicircle_tail",
           "goe_frobenius", "statistical_dimension", "statistical_dimension_finite",
           "min_trace_threshold", "softmax_measurements", "gaussian_measurements",
           "min_trace_solve", "min_trace_estimate", "recovery_trial", "MEASUREMENTS", "SOLVERS",
           "GAUSSIAN_MAPS", "GaussianNullSpace",
           "MinTraceResult", "conjugate_gradient", "min_trace_admm", "psd_projection",
           "GaussianMeasurements", "SoftmaxDifferences", "gram_inverse", "measurement_pairs",
           "softmax_targets", "Crossing", "Extrapolation", "transition_crossing",
           "extrapolate_crossing"]
