"""Redraw time of the state-evolution panel (``aimlib.widgets.se_panel``).

Cases
-----
* softmax, ``T = 2``, ``alpha`` in ``[0.001, 1]``: four new values of ``rho``
  (new parameters: the SE curve is computed), then the same four values three
  times over (from the cache).
* hardmax, ``T = 2``, ``alpha`` in ``[0.01, 10]``: two new values of ``rho``,
  then those two twice over (from the cache).

Every redraw is timed by the panel itself (``panel.last_seconds`` and
``panel.last_cpu_seconds``: compute and render to PNG); the caches of the
panels are emptied first.  The table of medians is printed and written, with
every time, to ``benchmarks/results/widgets.json``.

Run: ``python benchmarks/bench_widgets.py`` (about half a minute on a 2-core machine).
"""
from __future__ import annotations

import statistics

from _common import write_record

from aimlib import widgets

RHOS = {"softmax": (0.2, 0.4, 0.8, 1.6), "hardmax": (0.2, 0.4)}
PASSES_FROM_CACHE = {"softmax": 3, "hardmax": 2}


def redraw_times(panel, rhos) -> list[dict]:
    """Set ``rho`` to each value in turn; the panel's wall and CPU time of each redraw."""
    out = []
    for rho in rhos:
        panel.controls["rho"].value = rho
        if panel.error:
            raise RuntimeError(f"the panel refused rho = {rho}: {panel.error}")
        out.append({"rho": rho, "wall_s": panel.last_seconds, "cpu_s": panel.last_cpu_seconds})
    return out


def bench_channel(panel, channel: str) -> dict:
    """Redraws of ``channel``: new parameters first, then the same parameters from the cache."""
    rhos = RHOS[channel]
    new = redraw_times(panel, rhos)
    cached = redraw_times(panel, rhos * PASSES_FROM_CACHE[channel])
    row = {"channel": channel, "new": new, "cached": cached}
    for kind in ("new", "cached"):
        for clock in ("wall_s", "cpu_s"):
            row[f"median_{kind}_{clock}"] = statistics.median(r[clock] for r in row[kind])
    return row


def main() -> None:
    widgets.clear_caches()
    panel = widgets.se_panel(channel="softmax", T=2, alpha_range="0.001, 1")
    rows = [bench_channel(panel, "softmax")]
    panel.controls["channel"].value = "hardmax"
    panel.controls["alpha_range"].value = "0.01, 10"
    rows.append(bench_channel(panel, "hardmax"))
    print(f"{'channel':>8} {'redraw':>15} {'n':>3} {'median wall ms':>15} {'median cpu ms':>14}")
    for r in rows:
        for kind, label in (("new", "new parameters"), ("cached", "from cache")):
            print(f"{r['channel']:>8} {label:>15} {len(r[kind]):>3} "
                  f"{1e3 * r[f'median_{kind}_wall_s']:>15.0f} {1e3 * r[f'median_{kind}_cpu_s']:>14.0f}")
    path = write_record("widgets", {"note": "wall-clock times on a shared machine; see load_average",
                                    "se_panel": rows})
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
