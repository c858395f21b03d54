"""Summarise the audit trail of the whole-domain property tests (tests/test_domain.py).

    OPTCOMP_AUDIT_LOG=/tmp/audit.jsonl .venv/bin/python -m pytest -m slow tests/test_domain.py
    .venv/bin/python benchmarks/audit_summary.py /tmp/audit.jsonl

Prints, per test (regime): the number of checked calls, the worst relative excess over the
60-digit reference among the calls where the reference is tight (never negative: an
under-report fails the test), and the slowest call.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict


def main(path: str) -> int:
    rows = [json.loads(line) for line in open(path) if line.strip()]
    by = defaultdict(list)
    for r in rows:
        by[r["test"].split("::")[-1]].append(r)
    print(f"{len(rows)} checked calls in {len(by)} regimes\n")
    print("| regime (test) | calls | worst relative excess | slowest call (s) |")
    print("|---|---|---|---|")
    slowest = max(rows, key=lambda r: r["seconds"]) if rows else None
    for test in sorted(by):
        rs = by[test]
        rels = [r["rel"] for r in rs if r["rel"] is not None]
        worst = f"{max(rels):.2e}" if rels else "-"
        print(f"| {test} | {len(rs)} | {worst} | {max(r['seconds'] for r in rs):.3f} |")
    if slowest:
        print(f"\nslowest: {slowest['seconds']:.2f} s  {slowest['call']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
