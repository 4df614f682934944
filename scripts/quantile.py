#!/usr/bin/env python3
"""The scripts' one quantile (P50, P90, P99, medians): `quantile(values, q)`.

The convention is the Rust side's, `xsched_report::quantile` (crates/report/src/stats.rs, the
crate doc's "one quantile convention"): the *nearest rank*. The `q` quantile of `n` values is
the `⌈q·n⌉`-th smallest, at least the smallest; the median is `quantile(values, 0.5)`, the lower
middle value for an even count (never a mean of two). HDR histograms answer
`value_at_quantile` by the same rule, so a P99 a script computes from raw values means what a
P99 in an xsched report means. The rank is computed as Rust computes it (`ceil(n as f64 * q)`,
the same floating-point product), so the two pick the same value.

No values: `default` (None unless given, like `max(..., default=...)`), as Rust's `None`.
A `q` outside 0..=1 is a caller's mistake: ValueError (Rust clamps; no script means to).

Scripts beside this file import it as a sibling module; those in a folder under scripts/ put
scripts/ on the path first:

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from quantile import quantile  # noqa: E402

`python3 scripts/quantile.py --self-test` checks known values (scripts/test.sh runs it).
"""

import math
import sys


def quantile(values, q, default=None):
    """The `q` quantile (0 ≤ q ≤ 1) of `values` by nearest rank, or `default` for no values."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile: q must be within 0..=1, not {q!r}")
    v = sorted(values)
    if not v:
        return default
    return v[max(1, math.ceil(len(v) * q)) - 1]


def self_test():
    one_to_100 = list(range(1, 101))
    checks = [
        (one_to_100, 0.5, 50),
        (one_to_100, 0.9, 90),
        (one_to_100, 0.99, 99),
        (one_to_100, 1.0, 100),
        (one_to_100, 0.0, 1),
        (one_to_100, 0.001, 1),
        (list(range(100, 0, -1)), 0.99, 99),  # unsorted input
        ([x * 1000 for x in range(1, 201)], 0.5, 100_000),  # the Rust test's values
        ([x * 1000 for x in range(1, 201)], 0.99, 198_000),
        ([3.0, 1.0, 2.0], 0.5, 2.0),
        ([1, 2, 3, 4], 0.5, 2),  # even count: the lower middle, not 2.5
        ([7], 0.0, 7),
        ([7], 0.5, 7),
        ([7], 0.99, 7),
        ([7], 1.0, 7),
        ((x for x in (5, 1, 3)), 0.5, 3),  # any iterable
    ]
    bad = []
    for values, q, want in checks:
        got = quantile(values, q)
        if got != want:
            bad.append(f"quantile(…, {q}) = {got!r}, want {want!r}")
    if quantile([], 0.99) is not None:
        bad.append("quantile([], 0.99) is not None")
    got = quantile([], 0.5, default=float("nan"))
    if got == got:
        bad.append(f"quantile([], 0.5, default=nan) = {got!r}")
    for q in (-0.1, 1.01, float("nan")):
        try:
            quantile([1, 2], q)
            bad.append(f"quantile([1, 2], {q}) did not raise")
        except ValueError:
            pass
    if bad:
        sys.exit("quantile self-test FAILED:\n  " + "\n  ".join(bad))
    print(f"quantile self-test: {len(checks) + 5} checks ok")


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        self_test()
    else:
        sys.exit(__doc__ + "\nusage: quantile.py --self-test")
