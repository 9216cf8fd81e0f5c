"""The host-threaded ``g_out`` (aimlib.channels.threaded): the same array as one call, to the last bit, for
one and two hardmax layers; the same GAMP-RIE run, row for row, in the three-layer trace script; bad input
named."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from aimlib import model
from aimlib.channels import make_channel
from aimlib.channels.threaded import threaded_channel
from script_support import import_script


@pytest.mark.parametrize("name, params, rho", [("hardmax", {}, 0.5), ("deep-hardmax", {"c": 0.5}, (0.5, 0.5))])
def test_threaded_g_out_is_the_channels(name, params, rho):
    ch = make_channel(name, **params)
    data = model.sample_dataset(1.0, 12, 2, rho, ch, seed=3, backend="numpy")   # g_out runs on the host
    V = 0.2 if ch.n_indices == 1 else (0.2, 0.3)
    omega = 0.8 * np.asarray(data.h)
    with ThreadPoolExecutor(3) as pool:
        threaded = threaded_channel(ch, pool, 3, min_split=10)
        got = threaded.g_out(data.y, omega, V)
        assert threaded.g_out(data.y[:9], omega[:9], V).shape == ch.g_out(data.y[:9], omega[:9], V).shape
    assert type(threaded).__name__ == type(ch).__name__ and isinstance(threaded, type(ch))
    np.testing.assert_array_equal(got, ch.g_out(data.y, omega, V))
    np.testing.assert_array_equal(threaded.log_partition(data.y, omega, V), ch.log_partition(data.y, omega, V))


def test_one_thread_is_the_channel_itself_and_bad_counts_are_named():
    ch = make_channel("hardmax")
    with ThreadPoolExecutor(2) as pool:
        assert threaded_channel(ch, pool, 1) is ch
        for kwargs, word in ((dict(threads=0), "threads"), (dict(threads=2, min_split=0), "min_split"),
                             (dict(threads=2.5), "threads")):
            with pytest.raises((ValueError, TypeError), match=word):
                threaded_channel(ch, pool, **kwargs)


def test_the_trace_script_gives_the_same_rows_on_host_threads():
    """Three layers at d = 70 (4900 samples: above the split's 4096), four iterations past the stopping rule:
    ``--host-threads 3`` gives every row of one thread exactly; zero threads are refused by name."""
    trace = import_script("deep_three_trace")
    one = trace.run(1.0, 70, 0, 0.1, iterations=4)
    assert trace.run(1.0, 70, 0, 0.1, iterations=4, host_threads=3) == one and len(one) == 4
    with pytest.raises(ValueError, match="host_threads"):
        trace.run(1.0, 70, 0, 0.1, iterations=4, host_threads=0)
