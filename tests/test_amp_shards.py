"""GAMP-RIE with its samples sharded over Dask workers (:mod:`aimlib.amp.shards`): the single-process numbers."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

from aimlib import model
from aimlib.amp import gamp_rie
from aimlib.amp.shards import shard_bounds
from aimlib.channels import UntiedSoftmax, make_channel
from aimlib.tokens import TOKEN_CHUNK, token_stream
from aimlib.untied import untied_prior

pytest.importorskip("distributed")
REGENERATE = {"name": "gaussian", "storage": "regenerate"}


@pytest.fixture(scope="module")
def client():
    """A LocalCluster of 2 workers (TLS, 127.0.0.1), shared by the module's tests."""
    from aimlib.cluster import dask_client
    with dask_client("local", 2, 1) as c:
        yield c


def test_shard_bounds_cover_the_samples_in_whole_chunks():
    assert shard_bounds(1000, 100, 3) == [(0, 300), (300, 700), (700, 1000)]
    assert shard_bounds(950, 100, 2) == [(0, 500), (500, 950)]
    assert shard_bounds(150, 100, 4) == [(0, 100), (100, 150)]     # fewer chunks than shards
    for n, chunk, k in [(1, 7, 3), (999, 64, 5), (4096, 256, 7)]:
        b = shard_bounds(n, chunk, k)
        assert b[0][0] == 0 and b[-1][1] == n and all(x[1] == y[0] for x, y in zip(b, b[1:]))
        assert all(a % chunk == 0 for a, _ in b)


def test_a_window_of_a_stream_reads_the_same_draws_and_pickles():
    X = token_stream(3 * TOKEN_CHUNK + 17, 2, 5, np.random.default_rng(4))
    whole = X.materialise()
    w = X.window(TOKEN_CHUNK, X.n)
    assert w.shape == (2 * TOKEN_CHUNK + 17, 2, 5)
    assert np.array_equal(w.materialise(), whole[TOKEN_CHUNK:])
    assert np.array_equal(w.window(TOKEN_CHUNK, w.n).materialise(), whole[2 * TOKEN_CHUNK:])
    assert np.array_equal(pickle.loads(pickle.dumps(w)).materialise(), w.materialise())
    with pytest.raises(ValueError, match="multiple of its chunk"):
        X.window(5, 10)
    with pytest.raises(ValueError, match="ends by n="):
        X.window(0, X.n + 1)


def _pair(data, channel, rho, client, shards, **kw):
    """The same run in one process and sharded."""
    kw = dict(S=data.S, max_iter=12, on_max_iter="return", **kw)
    one = gamp_rie(data.X, data.y, channel, rho, **kw)
    many = gamp_rie(data.X, data.y, channel, rho, scheduler=client, shards=shards, **kw)
    return one, many


@pytest.mark.parametrize("tokens", [None, REGENERATE])
def test_sharded_softmax_gives_the_single_process_run(client, tokens):
    ch = make_channel("softmax")
    data = model.sample_dataset(0.3, 40, 2, 0.5, ch, 1, tokens=tokens)
    one, many = _pair(data, ch, 0.5, client, 3, chunk_size=TOKEN_CHUNK // 2 if tokens is None else None)
    assert one.iterations == many.iterations
    assert np.max(np.abs(one.S_hat - many.S_hat)) < 1e-10
    assert abs(one.mmse - many.mmse) < 1e-10 and abs(one.m - many.m) < 1e-12


def test_sharded_two_layers_give_the_single_process_run(client):
    ch = make_channel("deep-hardmax")
    data = model.sample_dataset(1.0, 20, 2, (0.5, 0.5), ch, 2)
    one, many = _pair(data, ch, data.priors, client, 2, chunk_size=50, damping=0.7)
    assert one.S_hat.shape == many.S_hat.shape == (2, 20, 20)
    assert np.max(np.abs(one.S_hat - many.S_hat)) < 1e-10
    assert np.allclose(one.mmse, many.mmse, rtol=0, atol=1e-10)


def test_sharding_refuses_what_it_cannot_run(client):
    ch = make_channel("softmax")
    data = model.sample_dataset(0.3, 10, 2, 0.5, ch, 0)
    with pytest.raises(ValueError, match="shards needs a scheduler"):
        gamp_rie(data.X, data.y, ch, 0.5, shards=2)
    with pytest.raises(ValueError, match="shards must be"):
        gamp_rie(data.X, data.y, ch, 0.5, scheduler=client, shards=0)
    square = UntiedSoftmax()
    X = np.random.default_rng(0).standard_normal((50, 2, 10))
    y = square(np.random.default_rng(1).standard_normal((50, 2, 2)))
    with pytest.raises(ValueError, match="symmetric index matrices"):
        gamp_rie(X, y, square, untied_prior(0.5, "equalised", 0), scheduler=client)


def test_the_command_line_shards_a_run_and_prints_the_same_row(capsys):
    from aimlib import cli
    base = ["amp", "--channel", "softmax", "--T", "2", "--rho", "0.5", "--alpha", "0.1", "--d", "40", "--seed",
            "3", "--max-iter", "8", "--on-max-iter", "return", "--tokens-storage", "regenerate"]
    rows = []
    for extra in ([], ["--scheduler", "local", "--shards", "2"]):
        assert cli.main(base + extra) == 0
        rows.append(capsys.readouterr().out.splitlines())
    header, one = rows[0][0].split(","), rows[0][1].split(",")
    many = rows[1][1].split(",")
    for key in ("alpha", "d", "seed", "iterations", "converged"):
        assert one[header.index(key)] == many[header.index(key)]
    assert abs(float(one[header.index("mmse")]) - float(many[header.index("mmse")])) < 1e-10
    assert cli.main(["amp", "--alpha", "0.1", "--d", "10", "--shards", "2"]) == 2
    assert "--shards needs --scheduler" in capsys.readouterr().err
