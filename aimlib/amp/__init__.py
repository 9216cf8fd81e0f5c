r"""GAMP-RIE: approximate message passing for the attention-indexed model.

The attention indices are linear measurements of the key-query matrix ``S``,
``h_ab = <Z_ab, S>/sqrt(d)`` with ``Z_ab = (x_a x_b^T + x_b x_a^T)/2 - delta_ab I``,
observed through a channel ``y = f(h)``.  GAMP-RIE (book chapter "GAMP-RIE")
alternates a channel step, which turns the outputs into an effective Gaussian
observation ``R = S + sqrt(Delta) W`` of the whole matrix (``W`` a GOE matrix),
and a prior step, the prior's denoiser of ``S`` from ``R`` (:mod:`aimlib.priors`:
the rotationally invariant estimator, RIE, for the Wishart prior); ``1/Delta`` is
the empirical version of the state-evolution conjugate ``qhat = alpha F_out``.
A channel that reads ``L`` index matrices gets one denoiser per matrix; a square
(untied) ``S`` is seen in two sectors with one noise each.

Modules: :mod:`~.steps` (the channel step of symmetric priors, the prior step),
:mod:`~.square_step` (the channel step of square priors), :mod:`~.loop` (the
iteration and its stopping rules), :mod:`~.problem` (the validated inputs),
:mod:`~.gamp` (:func:`gamp_rie`: final check, result), :mod:`~.shards` (the samples sharded over Dask workers),
:mod:`~.run` (sampling and running, the cost model), :mod:`~.leave_one_out` (the Onsager matrix
against leave-one-out estimates).
"""
from .gamp import AMPResult, gamp_rie
from .run import flops_per_iteration, memory_footprint, run_amp
from .steps import chunk_size_for

__all__ = ["AMPResult", "gamp_rie", "run_amp", "chunk_size_for", "flops_per_iteration", "memory_footprint"]
