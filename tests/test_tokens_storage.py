"""Regenerated tokens (``storage='regenerate'``, :class:`aimlib.tokens.TokenStream`): the same numbers as
stored ones."""
from __future__ import annotations

import numpy as np
import pytest

from aimlib import model, sweep
from aimlib.amp import gamp_rie, run_amp
from aimlib.backend import to_host
from aimlib.channels import make_channel
from aimlib.sweep.fields import SpecError
from aimlib.tokens import TOKEN_CHUNK, TokenStream, draw_threads, token_law, token_stream

REGENERATE = {"name": "gaussian", "storage": "regenerate"}


def test_a_chunk_is_the_same_whenever_and_however_it_is_read():
    X = token_stream(3 * TOKEN_CHUNK + 17, 2, 5, np.random.default_rng(4))
    whole = X.materialise()
    assert whole.shape == (3 * TOKEN_CHUNK + 17, 2, 5) and X.stored_bytes == whole.nbytes
    for start, stop in [(0, 1), (TOKEN_CHUNK - 3, TOKEN_CHUNK + 3), (2 * TOKEN_CHUNK, X.n), (5, 5)]:
        assert np.array_equal(X[start:stop], whole[start:stop])
    assert np.array_equal(X.block(2), whole[2 * TOKEN_CHUNK:3 * TOKEN_CHUNK])    # read out of order
    assert abs(whole.mean()) < 0.02 and abs(whole.std() - 1) < 0.02            # 7760 N(0, 1) draws
    other = token_stream(X.n, 2, 5, np.random.default_rng(5)).materialise()
    assert not np.allclose(other, whole)
    with pytest.raises(TypeError, match="slices of samples"):
        X[3]


@pytest.mark.parametrize("law", [{"name": "sparse", "p": 0.3}, {"name": "correlated", "c": 0.4},
                                 {"name": "rademacher"}])
def test_streams_of_other_laws_draw_that_law(law):
    X = token_stream(TOKEN_CHUNK + 1, 2, 6, 3, law)
    assert X.law == token_law(law) and X.materialise().shape == (TOKEN_CHUNK + 1, 2, 6)
    rng = np.random.Generator(np.random.Philox(np.random.SeedSequence(list(X.key), spawn_key=(1,))))
    assert np.allclose(X[TOKEN_CHUNK:TOKEN_CHUNK + 1], token_law(law).sample(rng, (1, 2, 6)))


def test_storage_belongs_to_the_law_spec():
    law = token_law({"name": "sparse", "p": 0.3, "storage": "regenerate"})
    assert law.storage == "regenerate" and token_law(law.to_dict()) == law
    assert token_law("sparse").to_dict() == {"name": "sparse", "p": 0.1}            # store: not written
    assert token_law("gaussian").with_storage("regenerate").storage == "regenerate"
    with pytest.raises(ValueError, match="tokens.storage"):
        token_law({"name": "gaussian", "storage": "disk"})
    with pytest.raises(ValueError, match="tokens_storage"):
        token_law("gaussian").with_storage("disk")


def _regenerated(backend, seed=3, d=40, alpha=0.12, T=2):
    ch = make_channel("softmax")
    return ch, model.sample_dataset(alpha, d, T, 0.5, ch, seed, backend=backend, tokens=REGENERATE)


def test_regenerated_dataset_has_the_indices_of_its_tokens(backend):
    ch, data = _regenerated(backend, T=3)
    assert isinstance(data.X, TokenStream) and data.n == round(0.12 * 40 ** 2)
    stored = data.X.materialise()
    h = model.attention_indices(stored, data.S)
    assert np.allclose(to_host(h), to_host(data.h), atol=1e-12)
    assert np.allclose(to_host(data.y), to_host(ch(h, np.random.default_rng(0))), atol=1e-12)   # noiseless


def _same_run(a, b, tol):
    assert a.iterations == b.iterations and a.reason == b.reason
    assert abs(a.mmse - b.mmse) <= tol and np.abs(a.S_hat - b.S_hat).max() <= tol


@pytest.mark.parametrize("chunk", [TOKEN_CHUNK, None])
def test_gamp_on_regenerated_tokens_equals_gamp_on_the_same_tokens_stored(backend, chunk):
    """Same chunks: the same operations, the same numbers; other chunks: sums in another order (round-off)."""
    ch, data = _regenerated(backend)
    regen = gamp_rie(data.X, data.y, ch, 0.5, S=data.S, chunk_size=chunk, on_max_iter="return")
    store = gamp_rie(data.X.materialise(), data.y, ch, 0.5, S=data.S, chunk_size=chunk, on_max_iter="return")
    _same_run(regen, store, 0.0 if chunk == TOKEN_CHUNK else 1e-10)
    assert regen.options["chunk_size"] % TOKEN_CHUNK == 0 or regen.options["chunk_size"] == data.n


def test_regenerated_equals_stored_on_the_strict_cupy_stand_in(strict_cupy):
    ch, data = _regenerated("cupy")
    assert isinstance(data.X[0:2], strict_cupy.ndarray)
    regen = gamp_rie(data.X, data.y, ch, 0.5, S=data.S, chunk_size=TOKEN_CHUNK, on_max_iter="return")
    store = gamp_rie(data.X.materialise(), data.y, ch, 0.5, S=data.S, chunk_size=TOKEN_CHUNK, on_max_iter="return")
    _same_run(regen, store, 0.0)
    _, host = _regenerated("numpy")                  # the same draws on the host
    assert np.array_equal(to_host(data.X.materialise()), host.X.materialise())


def test_the_memory_check_counts_one_chunk_of_regenerated_tokens():
    ch = make_channel("softmax")
    assert model.dataset_bytes(10**5, 100, 2, stored_tokens=False) < model.dataset_bytes(10**5, 100, 2) / 20
    with pytest.raises(ValueError, match="memory"):
        model.sample_dataset(2.0, 100, 2, 0.5, ch, 0, memory_mb=40)     # 20000 x 2 x 100 tokens: 61 MiB
    data = model.sample_dataset(2.0, 100, 2, 0.5, ch, 0, memory_mb=40, tokens=REGENERATE)
    assert data.n == 20000


def test_run_amp_and_sweeps_regenerate():
    row = run_amp("softmax", 2, 0.5, 0.12, 40, 3, tokens=REGENERATE, max_iter=400, on_max_iter="return")
    ch, data = _regenerated("numpy")
    alone = gamp_rie(data.X, data.y, ch, data.priors, S=data.S, max_iter=400, on_max_iter="return")
    assert row["mmse"] == pytest.approx(alone.mmse, abs=1e-12)
    spec = {"method": "amp", "T": 2, "rho": 0.5, "alpha": 0.12, "d": 40, "seeds": [3]}
    plain = sweep.expand(dict(spec, options={"amp": {"max_iter": 400}}))
    runs = sweep.expand(dict(spec, options={"amp": {"tokens_storage": ["store", "regenerate"], "max_iter": 400}}))
    assert len(runs) == 2 and runs[0].key == plain[0].key          # 'store' is the run without the option
    regen = next(r for r in runs if ("tokens_storage", "regenerate") in r.options)
    assert sweep.execute(regen)["mmse"] == pytest.approx(row["mmse"], abs=1e-12)
    with pytest.raises(SpecError, match="tokens.storage"):
        sweep.expand(dict(spec, tokens=REGENERATE))


def test_a_read_of_several_chunks_draws_them_on_threads_and_the_same_numbers(monkeypatch):
    X = token_stream(5 * TOKEN_CHUNK + 3, 2, 7, np.random.default_rng(9))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert draw_threads() == 1
    one = X.materialise()
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert draw_threads() == 3
    assert np.array_equal(X.materialise(), one)
    assert np.array_equal(X[TOKEN_CHUNK - 1:4 * TOKEN_CHUNK + 1], one[TOKEN_CHUNK - 1:4 * TOKEN_CHUNK + 1])
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert draw_threads() >= 1
