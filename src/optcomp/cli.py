"""Command line: ``optcomp epsilon|delta|methods``.

    optcomp epsilon --eps 0.1 --k 100 --delta-g 1e-6
    optcomp epsilon --eps 0.1,0.2,0.3 --delta 1e-7 --delta-g 1e-5 --method kov
    optcomp delta --eps 0.1 --k 100 --eps-g 2.0

Prints one number (``inf`` when the method certifies nothing).  Bad input: one line on
stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys

from . import METHOD_INFO, METHODS, delta_g, epsilon_g


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        self.exit(2, f"optcomp: error: {message}\n")


def _numbers(text: str):
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or comma-separated numbers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one number")
    return values[0] if len(values) == 1 and "," not in text else values


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="optcomp", description="Composition of differential privacy (optcomp).")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, target, help_text in (
        ("epsilon", "--delta-g", "least eps_g certified at a given delta_g"),
        ("delta", "--eps-g", "least delta_g certified at a given eps_g"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--eps", type=_numbers, required=True, help="per-mechanism eps: a number (with --k) or a,b,c")
        p.add_argument("--delta", type=_numbers, default=0.0, help="per-mechanism delta: a number or a,b,c (default 0)")
        p.add_argument("--k", type=float, default=None, help="number of identical mechanisms (with a single --eps)")
        p.add_argument(target, type=float, required=True, dest="target")
        p.add_argument("--method", default="optimal", help=f"one of {', '.join(METHODS)} (default optimal)")
        p.add_argument("--eta", type=float, default=None, help="accuracy of method=approx")
        p.add_argument("--algorithm", default=None, help="algorithm of method=approx (e.g. paper)")
    sub.add_parser("methods", help="list the methods and their theorems")
    return parser


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "methods":
        for name in METHODS:
            print(f"{name:14s} {METHOD_INFO[name].theorem}")
        return 0
    options = {key: getattr(args, key) for key in ("eta", "algorithm") if getattr(args, key) is not None}
    try:
        if args.command == "epsilon":
            value = epsilon_g(args.eps, args.delta, delta_g=args.target, k=args.k, method=args.method, **options)
        else:
            value = delta_g(args.eps, args.delta, eps_g=args.target, k=args.k, method=args.method, **options)
    except ValueError as exc:
        print(f"optcomp: error: {exc}", file=sys.stderr)
        return 2
    print(repr(value) if value == value and value not in (float("inf"),) else "inf")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
