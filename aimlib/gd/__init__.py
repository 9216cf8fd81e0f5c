r"""Gradient descent on the square loss: a student that learns the key-query matrix.

The student has the teacher's architecture (book, chapter "Gradient descent"):
``S_hat = W W^T / sqrt(r d)`` with ``W`` of shape ``(d, r)``, output
``y_hat = softmax(beta h_hat)`` and the square loss

.. math::

    L(W) = \frac{1}{2n} \sum_{\mu=1}^n \bigl\| \mathrm{softmax}(\beta \hat h^\mu) - y^\mu \bigr\|_F^2 .

Modules: :mod:`~aimlib.gd.student` (indices through ``X W``, output, loss and
its analytic gradient), :mod:`~aimlib.gd.optim` (Adam and plain gradient
descent), :mod:`~aimlib.gd.memory` (the memory guard), :mod:`~aimlib.gd.train`
(:func:`train_gd`: ``k`` restarts batched in one array computation), :mod:`~aimlib.gd.schedule`
(the loop's options and records: the step decay, the parameters of lowest training loss),
:mod:`~aimlib.gd.checks` (when a run has failed: divergence, no progress, the
iteration cap, and the inputs refused) and :mod:`~aimlib.gd.run`
(:func:`run_gd`: sample a data set and train);
:mod:`~aimlib.gd.direct` (the direct student, ``S_hat`` trained entry by entry)
and :mod:`~aimlib.gd.objective` (weight decay, the two students, spectra);
:mod:`~aimlib.gd.deep` (the two-layer softmax student of the chapter "Deep
attention": its output, gradient, :func:`train_deep_gd` and :func:`run_deep_gd`,
with the helpers of :mod:`~aimlib.gd.blocks` for students of several weight blocks);
:mod:`~aimlib.gd.heads` (students of ``H`` averaged softmax heads, chapter "Several
heads": :func:`train_heads_gd`, :func:`run_heads_gd`, errors matched over the
heads' relabellings); :mod:`~aimlib.gd.posterior` (the reference the runs are measured
against: :func:`sample_posterior`, draws of the exact posterior of the softmax AIM with label
noise by Hamiltonian Monte Carlo, chapter "Gradient descent against posterior draws").  Every
array operation goes through :func:`aimlib.backend.get_array_module`, so the
same code runs on NumPy and CuPy.
"""
from .._validate import MEMORY_MB
from ..channels.softmax import BETA_MAX
from .deep import (DeepGDResult, deep_loss, deep_loss_and_grad, deep_memory_estimate, deep_student_indices,
                   deep_student_output, run_deep_gd, train_deep_gd)
from .heads import HeadsGDResult, heads_memory_estimate, matched_errors, run_heads_gd, train_heads_gd
from .direct import direct_loss, direct_loss_and_grad, initial_matrices
from .memory import memory_estimate
from .objective import EIG_TOL, STUDENTS, count_nonzero, eigenvalues
from .optim import OPTIMIZERS
from .posterior import (SPECTRAL_STATISTICS, PosteriorDraws, mean_pair_distance, planted_factor, sample_posterior,
                        spectral_statistics)
from .run import run_gd
from .student import (initial_weights, loss, loss_and_grad, student_indices, student_matrix,
                      student_output)
from .train import GDResult, train_gd

__all__ = [
    "GDResult",
    "initial_weights",
    "student_matrix",
    "student_indices",
    "student_output",
    "loss",
    "loss_and_grad",
    "train_gd",
    "run_gd",
    "sample_posterior",
    "PosteriorDraws",
    "planted_factor",
    "mean_pair_distance",
    "spectral_statistics",
    "SPECTRAL_STATISTICS",
    "memory_estimate",
    "MEMORY_MB",
    "BETA_MAX",
    "OPTIMIZERS",
    "DeepGDResult",
    "deep_student_indices",
    "deep_student_output",
    "deep_loss",
    "deep_loss_and_grad",
    "deep_memory_estimate",
    "train_deep_gd",
    "run_deep_gd",
    "HeadsGDResult",
    "matched_errors",
    "heads_memory_estimate",
    "train_heads_gd",
    "run_heads_gd",
    "direct_loss",
    "direct_loss_and_grad",
    "initial_matrices",
    "eigenvalues",
    "count_nonzero",
    "EIG_TOL",
    "STUDENTS",
]
