"""Command line: ``optcomp {epsilon,delta,bounds,compare,split,curve,methods}`` (also ``python -m optcomp``).

    optcomp epsilon --eps 0.1 --k 100 --delta-g 1e-6
    optcomp delta --eps 0.1,0.2 --delta 1e-6 --count 50,20 --eps-g 4
    optcomp bounds --file mech.csv --delta-g 1e-6
    optcomp compare --eps 0.1 --k 100 --delta-g 1e-6
    optcomp split --eps-g 1 --delta-g 1e-6 --k 100
    optcomp curve --eps 0.1 --k 100 --num 11 --csv
    optcomp methods

Mechanisms come inline (``--eps`` with ``--k``, ``--count``, ``--delta``; ``--mechanism
laplace:scale=10,count=100``, repeatable, for mechanisms known by more than (eps, delta)) or
from a CSV/JSON file (``--file``; ``-`` reads stdin; a ``mechanism`` column or field).
Output is an aligned table; ``--json`` and ``--csv`` print the same rows for scripts, floats
in shortest round-trip form, infinity as ``inf`` (a JSON string), never NaN.  Notes a reader
must see (why an answer is inf, what a ratio is relative to, a row left out) end the table's
caption, form a JSON ``"notes"`` list, or go to stderr with ``--csv``.  Everything is
computed before anything is printed; bad input prints one short line on stderr and exits
with status 2.  Imports are deferred so that a homogeneous question costs little more than
the computation and numpy/scipy's own start-up.

The files (``--file``) and mechanism specs (``--mechanism``) are read by
:mod:`optcomp.ledger`, beside the Accountant they fill; this module holds the argparse tree,
one command function per subcommand and the output, all of them parsing and printing
around the library with one user-facing error convention (one line, exit 2).
"""

from __future__ import annotations

import argparse
import math
import re
import sys

from . import ledger
from ._version import __version__
from .ledger import _one_line, _parse_mechanism, _show, _spec
from .methods import METHOD_INFO, METHODS

__all__ = ["main"]

PROG = "optcomp"


class UsageError(Exception):
    """Bad input found after parsing (one line on stderr, exit status 2)."""


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # a value such as -1e-6, -.5 or -inf is a (negative) number, not an option: it reaches
        # the option's range check, which names the parameter (argparse's own pattern knows
        # only -1 and -1.5)
        self._negative_number_matcher = re.compile(r"^-\.?\d|^-(?i:inf|nan)")

    def parse_known_args(self, args=None, namespace=None):
        self._argv = list(sys.argv[1:] if args is None else args)  # for error(): the options typed
        return super().parse_known_args(args, namespace)

    def error(self, message):  # one line, exit 2
        typos = self._typos()
        # a mistyped option is named first: argparse would otherwise report the required
        # option it left missing ("--detla-g" -> "--delta-g is required")
        if typos and message.startswith(("the following arguments are required", "one of the arguments",
                                          "unrecognized arguments")):
            message = "unrecognized option" + ("s " if len(typos) > 1 else " ") + ", ".join(
                f"{t} (did you mean {close}?)" if close else t for t, close in typos)
        self.exit(2, _short(f"{self.prog}: error: {_one_line(message)}") + f" (see {self.prog} --help)\n")

    def _typos(self) -> list[tuple[str, str | None]]:
        """(token, nearest option or None) for each option-like token of this parser's
        arguments that names none of its options (nor abbreviates one); the top-level
        parser looks only before the command (the command's parser checks the rest)."""
        import difflib

        commands = set()
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                commands = set(action.choices)
        known = [o for o in self._option_string_actions if o.startswith("--") and o != "--help"]
        out = []
        for token in getattr(self, "_argv", ()):
            if token == "--" or token in commands:
                break
            if not token.startswith("-") or token == "-" or self._negative_number_matcher.match(token):
                continue
            name = token.split("=", 1)[0]
            if name in self._option_string_actions or any(o.startswith(name) for o in self._option_string_actions):
                continue
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            out.append((_show(name), close[0] if close else None))
        return out


class _SubParser(_Parser):
    """A command's parser: options it does not know are its error (with its own help), not
    the top-level parser's."""

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


MAX_LINE = 300  # an error line longer than this is cut (the parameter is named at its start)


def _short(line: str) -> str:
    return line if len(line) <= MAX_LINE else line[:MAX_LINE - 1] + "\u2026"


# ----------------------------------------------------------------------------------- argument types


def _argument(parse):
    """An argparse type from one of :mod:`optcomp.ledger`'s number parsers (their ValueError
    becomes the ArgumentTypeError argparse reports as "argument --flag: message")."""
    def parse_argument(text: str, *args, **kwargs):
        try:
            return parse(text, *args, **kwargs)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse_argument.__name__ = parse.__name__
    return parse_argument


_real = _argument(ledger._real)
_integer = _argument(ledger._integer)
_count = _argument(ledger._count)  # a number of mechanisms (--k, --count): an integer in [1, 10^12]


def _bytes(text: str) -> int:
    """A memory size (--max-memory): an integer number of bytes, or a number with a suffix K,
    M, G (KiB, MiB, GiB: powers of 1024), at least 1 MiB."""
    t = text.strip().replace("_", "")
    units = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}
    core = t[:-2] if t.upper().endswith("IB") else t[:-1] if t.upper().endswith("B") else t
    unit = core[-1:].upper() if core[-1:] and core[-1:].upper() in "KMG" else ""
    number = core[:-1] if unit else core
    try:
        value = float(number) * units[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a size such as 512M or 2G, got {_show(text)}") from None
    if not (math.isfinite(value) and value >= 2**20):
        raise argparse.ArgumentTypeError(f"expected a size of at least 1M, got {_show(text)}")
    return int(value)


def _points(text: str) -> int:
    """A number of grid points (--num, --num-alpha): an integer >= 2."""
    return _integer(text, lo=2)


def _list_of(parse):
    def parse_list(text: str) -> list:
        items = text.split(",")
        out = []
        for i, item in enumerate(items, 1):
            if not item.strip():
                raise argparse.ArgumentTypeError(f"empty item {i} in {_show(text)}")
            out.append(parse(item.strip()))
        return out

    return parse_list


def _mechanism_arg(text: str):
    """argparse type of --mechanism: (object, count or None, the spec as given)."""
    try:
        m, count = _parse_mechanism(text)
    except (TypeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(f"{_show(text)}: {_one_line(exc)}") from None
    return m, count, text


def _noise_name(text: str) -> str:
    """A mechanism name of split's --mechanism (the noise split calibrates)."""
    from .noise import NOISE_MECHANISMS

    if ":" in text:
        raise argparse.ArgumentTypeError(f"split takes mechanism names only (their noise is what it finds), "
                                         f"got {_show(text)}")
    name = text.strip().lower().replace("-", "_")
    if name.replace("_", "") == "discretegaussian":
        name = "discrete_gaussian"
    if name not in NOISE_MECHANISMS:
        raise argparse.ArgumentTypeError(f"unknown mechanism {_show(text)} (choose from {', '.join(NOISE_MECHANISMS)})")
    return name


class _Once(argparse.Action):
    """Store a value; giving the same option twice is an error (two sources for one input)."""

    def __call__(self, parser, namespace, values, option_string=None):
        seen = namespace.__dict__.setdefault("_given", set())
        if self.dest in seen:
            parser.error(f"argument {option_string}: given more than once")
        seen.add(self.dest)
        setattr(namespace, self.dest, values)


class _OnceTrue(_Once):
    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=False, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        super().__call__(parser, namespace, True, option_string)


# ----------------------------------------------------------------------------------- parser

_FORMATTER = argparse.RawDescriptionHelpFormatter


def _add_mechanisms(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("mechanisms (inline, or --file)")
    g.add_argument("--eps", type=_list_of(_real), action=_Once, metavar="E[,E...]",
                   help="per-mechanism eps: one value (with --k or --count) or a comma-separated list")
    g.add_argument("--delta", type=_list_of(_real), action=_Once, metavar="D[,D...]",
                   help="per-mechanism delta: one value for all, or one per --eps item (default 0)")
    g.add_argument("--k", type=_count, action=_Once, metavar="N",
                   help="number of identical mechanisms, 1 to 10^12 (required with a single --eps value, unless --count)")
    g.add_argument("--count", type=_list_of(_count), action=_Once, metavar="N[,N...]",
                   help="multiplicity of each --eps item (integers, one per item)")
    g.add_argument("--mechanism", type=_mechanism_arg, action="append", metavar="NAME[:KEY=V,...]",
                   help="a mechanism known by more than (eps, delta), repeatable: laplace:scale=B[,sensitivity=S], "
                        "gaussian:sigma=S[,sensitivity=S], geometric:eps=E[,sensitivity=N], "
                        "discrete_gaussian:sigma=S[,sensitivity=N], staircase:eps=E[,gamma=G (default "
                        "1/(1+e^(E/2)))][,sensitivity=S], randomized_response:eps=E[,values=K], pair:p=P1/P2/..,"
                        "q=Q1/Q2/.., profile:eps=E1/E2/..,delta=D1/D2/.., black_box:eps=E[,delta=D]; count=N for "
                        "N copies (or --k with one --mechanism, --count with one item per --mechanism when there is "
                        "no --eps); q=R (sampling_rate=R for a pair) runs it on a Poisson subsample of rate R "
                        "(DP-SGD: gaussian:sigma=1.1,q=0.0042,count=14063)")
    g.add_argument("--file", action=_Once, metavar="PATH",
                   help="CSV (header eps,delta[,count][,mechanism][,q]: a row gives eps[,delta] or a --mechanism "
                        "spec in the mechanism column, and q a Poisson sampling rate for it) or JSON ([{\"eps\":..,\"delta\":..,\"count\":..}, {\"mechanism\": "
                        "\"Laplace\", \"scale\": 10, \"count\": 5}] or an Accountant.to_dict record) with the "
                        "mechanisms; '-' reads stdin")


def _add_options(p: argparse.ArgumentParser, *, method: bool = True, exact: bool = True) -> None:
    g = p.add_argument_group("method and its options")
    if method:
        g.add_argument("--method", choices=METHODS, action=_Once, default="auto",
                       help="composition theorem (default auto: optimal where exact is feasible, else "
                            "approx's certified upper bound within 1e-4; see `optcomp methods`)")
    g.add_argument("--eta", type=_real, action=_Once,
                   help="accuracy of method approx (MV Thm 1.7; default 1e-3, 0.1 with --algorithm paper)")
    g.add_argument("--tol", type=_real, action=_Once,
                   help="certified gap of method approx's fast algorithm (default eta)")
    if exact:
        g.add_argument("--algorithm", choices=("fast", "paper"), action=_Once,
                       help="algorithm of method approx: fast (default) or paper (as published)")
        g.add_argument("--max-atoms", type=_integer, action=_Once, dest="max_atoms", metavar="N",
                       help="largest exact distribution (atoms per half) method optimal may build")
    g.add_argument("--max-points", type=_integer, action=_Once, dest="max_points", metavar="N",
                   help="largest lattice method approx may use")
    g.add_argument("--max-memory", type=_bytes, action=_Once, dest="max_memory", metavar="SIZE",
                   help="memory budget of methods optimal, approx and auto, in bytes or with a suffix K, M, G "
                        "(powers of 1024; default 1.5G)")


def _add_output(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("output (default: an aligned table)")
    x = g.add_mutually_exclusive_group()
    x.add_argument("--json", action=_OnceTrue, help="print JSON: {\"command\": ..., \"rows\": [{...}, ...]} (and \"notes\": [...] if any)")
    x.add_argument("--csv", action=_OnceTrue, help="print CSV with a header line")


def _wrap(text: str) -> str:
    import textwrap

    return "\n".join(textwrap.fill(p, 88, break_on_hyphens=False) for p in text.split("\n"))


def _subparser(sub, name, help_text, description, examples):
    epilog = "examples:\n" + "\n".join(f"  {e}" for e in examples)
    return sub.add_parser(name, help=help_text, description=_wrap(description), epilog=epilog,
                          formatter_class=_FORMATTER)


_SETTING = ("The theorems assume the (eps_i, delta_i) are fixed in advance (the mechanisms may be adaptive); "
            "adaptively chosen parameters need a privacy filter, which optcomp does not provide.")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG, formatter_class=_FORMATTER,
        description=_wrap("Composition of differential privacy: every theorem of Murtagh-Vadhan and "
                          "Kairouz-Oh-Viswanath, exact and certified-approximate.\n" + _SETTING),
        epilog="examples:\n  optcomp epsilon --eps 0.1 --k 100 --delta-g 1e-6\n"
               "  optcomp compare --eps 0.1 --k 100 --delta-g 1e-6\n"
               "  optcomp split --eps-g 1 --delta-g 1e-6 --k 100\n"
               "Run `optcomp COMMAND --help` for the options of each command.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_SubParser)

    p = _subparser(sub, "epsilon", "least eps_g certified at a given delta_g",
                   "Least eps_g such that the composition is (eps_g, delta_g)-DP under --method "
                   "(inf: the method certifies nothing at this delta_g).",
                   ["optcomp epsilon --eps 0.1 --k 100 --delta-g 1e-6",
                    "optcomp epsilon --eps 0.1,0.2,0.5 --delta 1e-7 --delta-g 1e-5 --method kov",
                    "optcomp epsilon --mechanism laplace:scale=10,count=100 --mechanism gaussian:sigma=5 --delta-g 1e-6",
                    "optcomp epsilon --file mech.csv --delta-g 1e-6 --method approx --tol 1e-4 --json"])
    _add_mechanisms(p)
    p.add_argument("--delta-g", type=_real, required=True, action=_Once, dest="delta_g",
                   help="global delta_g in [0, 1) (required)")
    _add_options(p)
    _add_output(p)

    p = _subparser(sub, "delta", "least delta_g certified at a given eps_g",
                   "Least delta_g such that the composition is (eps_g, delta_g)-DP under --method "
                   "(1.0: nothing better certified).",
                   ["optcomp delta --eps 0.1 --k 100 --eps-g 4",
                    "optcomp delta --eps 0.1,0.2 --count 50,20 --eps-g 5 --csv"])
    _add_mechanisms(p)
    p.add_argument("--eps-g", type=_real, required=True, action=_Once, dest="eps_g",
                   help="global eps_g >= 0 (required)")
    _add_options(p)
    _add_output(p)

    p = _subparser(sub, "bounds", "certified bracket lower <= optimum <= upper",
                   "Certified lower and upper bounds on the optimal eps_g (with --delta-g) or on the optimal "
                   "delta_g (with --eps-g), from the lattice algorithm behind method approx; the gap is at "
                   "most --tol (relative for delta).",
                   ["optcomp bounds --eps 0.1,0.2,0.3 --count 300,200,100 --delta-g 1e-6",
                    "optcomp bounds --eps 0.1 --k 1000 --eps-g 10 --tol 1e-4 --json"])
    _add_mechanisms(p)
    _add_target(p)
    _add_options(p, method=False, exact=False)
    _add_output(p)

    p = _subparser(sub, "compare", "every method side by side, with its theorem",
                   "The answer of every method to one question (eps_g at --delta-g, or delta_g at --eps-g), "
                   "its ratio to the optimum and the theorem it comes from.  Options such as --eta go to the "
                   "methods that accept them.",
                   ["optcomp compare --eps 0.1 --k 100 --delta-g 1e-6",
                    "optcomp compare --eps 0.05,0.1,0.2 --count 100,100,100 --eps-g 3 --csv"])
    _add_mechanisms(p)
    _add_target(p)
    p.add_argument("--methods", type=_list_of(str), action=_Once, metavar="M[,M...]",
                   help=f"methods to compare (default all: {','.join(METHODS)})")
    _add_options(p, method=False)
    _add_output(p)

    p = _subparser(sub, "split", "split a global budget: per-query eps and Laplace noise",
                   "Largest per-query eps such that k queries (each (eps, delta)-DP) stay within the global "
                   "(eps_g, delta_g), under each method, and the Laplace noise that achieves it "
                   "(scale = sensitivity/eps, std = sqrt(2) scale); KOV Cor. 4.1's closed-form recipe beside "
                   "them.  Certified: the method certifies the returned split.  With --weights, query i gets "
                   "eps_i = c w_i with the largest common c.\n" + _SETTING,
                   ["optcomp split --eps-g 1 --delta-g 1e-6 --k 100",
                    "optcomp split --eps-g 1 --delta-g 1e-6 --k 100 --method optimal --sensitivity 2 --json",
                    "optcomp split --eps-g 1 --delta-g 1e-6 --k 100 --mechanism laplace,gaussian",
                    "optcomp split --eps-g 1 --delta-g 1e-6 --weights 1,2,5 --count 10,10,2"])
    p.add_argument("--eps-g", type=_real, required=True, action=_Once, dest="eps_g",
                   help="global eps_g >= 0 (required)")
    p.add_argument("--delta-g", type=_real, required=True, action=_Once, dest="delta_g",
                   help="global delta_g in [0, 1) (required)")
    q = p.add_argument_group("queries (--k, or --weights)")
    q.add_argument("--k", type=_count, action=_Once, metavar="N", help="number of identical queries")
    q.add_argument("--weights", type=_list_of(_real), action=_Once, metavar="W[,W...]",
                   help="relative budgets of the queries (eps_i = c w_i)")
    q.add_argument("--count", type=_list_of(_count), action=_Once, metavar="N[,N...]",
                   help="with --weights: number of queries of each weight")
    q.add_argument("--delta", type=_real, action=_Once, default=0.0,
                   help="per-query delta (default 0: pure DP, e.g. Laplace)")
    q.add_argument("--sensitivity", type=_real, action=_Once, default=1.0,
                   help="sensitivity of each query (default 1), for the Laplace scale")
    q.add_argument("--mechanism", type=_list_of(_noise_name), action=_Once, metavar="NAME[,NAME...]",
                   help="with --k: add a mechanism-aware row per name (laplace, gaussian, geometric, staircase, "
                        "discrete_gaussian): the least noise of that mechanism whose k copies, composed as that "
                        "mechanism, meet the budget (method auto; its standard deviation and --mechanism spec)")
    p.add_argument("--method", choices=METHODS, action=_Once,
                   help="one method only (default: basic, drv, kov, optimal and KOV Cor. 4.1; with --weights: "
                        "optimal)")
    _add_options(p, method=False)
    _add_output(p)

    p = _subparser(sub, "curve", "the privacy curve delta(eps_g), or the trade-off curve",
                   "Certified delta at each eps_g of a grid (with lower bounds for method approx), or with "
                   "--tradeoff the hypothesis-testing trade-off curve (KOV Sec. 2): beta = least missed-"
                   "detection probability at false-alarm probability alpha, and the region's upper boundary.",
                   ["optcomp curve --eps 0.1 --k 100 --num 11",
                    "optcomp curve --eps 0.1 --k 100 --eps-g 2,4,6 --method kov --csv",
                    "optcomp curve --eps 0.4 --k 5 --tradeoff --num-alpha 11"])
    _add_mechanisms(p)
    grid = p.add_argument_group("grid")
    grid.add_argument("--eps-g", type=_list_of(_real), action=_Once, dest="eps_g", metavar="X[,X...]",
                      help="the eps_g values (default: --num points from 0 to where delta becomes negligible)")
    grid.add_argument("--num", type=_points, action=_Once, default=21, metavar="N",
                      help="number of eps_g points of the default grid (default 21, at least 2)")
    grid.add_argument("--tradeoff", action=_OnceTrue,
                      help="print the trade-off curve (alpha, beta, beta_upper) instead of delta(eps_g)")
    grid.add_argument("--num-alpha", type=_points, action=_Once, default=101, dest="num_alpha", metavar="N",
                      help="equispaced alpha points of the trade-off curve, kinks added (default 101)")
    _add_options(p)
    _add_output(p)

    p = _subparser(sub, "methods", "list the methods and their theorems",
                   "The composition theorems optcomp implements, their options and sources.",
                   ["optcomp methods", "optcomp methods --json"])
    _add_output(p)
    return parser


def _add_target(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("question (exactly one)").add_mutually_exclusive_group(required=True)
    g.add_argument("--delta-g", type=_real, action=_Once, dest="delta_g",
                   help="global delta_g in [0, 1): bounds on the least eps_g")
    g.add_argument("--eps-g", type=_real, action=_Once, dest="eps_g",
                   help="global eps_g >= 0: bounds on the least delta_g")


# ----------------------------------------------------------------------------------- mechanisms


def _accountant_from_inline(args):
    from .accountant import Accountant

    eps = args.eps
    if args.k is not None and args.count is not None:
        raise UsageError("give --k (identical mechanisms) or --count (multiplicities), not both")
    if args.k is not None and len(eps) != 1:
        raise UsageError("--k goes with a single --eps value; use --count for the multiplicity of each of several")
    if args.k is None and args.count is None and len(eps) == 1:
        raise UsageError("--k is required with a single --eps value (the number of identical mechanisms; "
                         "--k 1 for one mechanism)")
    counts = [args.k] if args.k is not None else (args.count or [1] * len(eps))
    if len(counts) != len(eps):
        raise UsageError(f"--count has {len(counts)} items but --eps has {len(eps)}")
    delta = args.delta if args.delta is not None else [0.0]
    if len(delta) == 1:
        delta = delta * len(eps)
    elif len(delta) != len(eps):
        raise UsageError(f"--delta has {len(delta)} items but --eps has {len(eps)} (give one value or one per item)")
    acc = Accountant()
    for i, (e, d, n) in enumerate(zip(eps, delta, counts), 1):
        try:
            acc.compose(e, d, n)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"mechanism {i} (--eps/--delta/--count item {i}): {exc}") from None
    return acc


def _accountant_from_file(path: str):
    try:
        return ledger.read_accountant(path)
    except ledger.LedgerError as exc:
        raise UsageError(f"--file {exc}") from None


def _mechanisms(args):
    specs = args.mechanism or []
    inline = [flag for flag, v in (("--eps", args.eps), ("--delta", args.delta), ("--k", args.k),
                                   ("--count", args.count), ("--mechanism", args.mechanism)) if v is not None]
    if args.file is not None:
        if inline:
            raise UsageError(f"give the mechanisms either inline ({', '.join(inline)}) or with --file, not both")
        return _accountant_from_file(args.file)
    if args.eps is None:
        if specs:
            return _accountant_from_specs(args, specs)
        if inline:
            raise UsageError(f"{inline[0]} needs --eps (the per-mechanism eps)")
        raise UsageError("no mechanisms: give --eps (with --k or --count), --mechanism or --file")
    acc = _accountant_from_inline(args)
    for m, count, _ in specs:  # beside --eps items (which --k/--count count): count= in the spec, else 1
        acc.compose(m, count=1 if count is None else count)
    return acc


def _accountant_from_specs(args, specs):
    """The --mechanism items without --eps: counted by count= in each, or --k (one item) or
    --count (one per item)."""
    from .accountant import Accountant

    if args.delta is not None:
        raise UsageError("--delta goes with --eps (a --mechanism carries its own guarantee)")
    if args.k is not None and args.count is not None:
        raise UsageError("give --k (identical mechanisms) or --count (multiplicities), not both")
    counts = [None] * len(specs)
    if args.k is not None:
        if len(specs) != 1:
            raise UsageError(f"--k goes with a single --mechanism (got {len(specs)}); use count= in each, or --count")
        counts = [args.k]
    elif args.count is not None:
        if len(args.count) != len(specs):
            raise UsageError(f"--count has {len(args.count)} items but --mechanism is given {len(specs)} times")
        counts = args.count
    acc = Accountant()
    for (m, own, text), n in zip(specs, counts):
        if own is not None and n is not None:
            raise UsageError(f"--mechanism {_show(text)}: count given twice (count= and {'--k' if args.k else '--count'})")
        acc.compose(m, count=own if own is not None else n if n is not None else 1)
    return acc


def _options(args, method: str | None = None) -> dict:
    keys = ("eta", "tol", "algorithm", "max_atoms", "max_points", "max_memory")
    opts = {key: getattr(args, key, None) for key in keys}
    opts = {key: v for key, v in opts.items() if v is not None}
    if method is not None:
        accepted = METHOD_INFO[method].options
        bad = sorted(set(opts) - set(accepted))
        if bad:
            flag = "--" + bad[0].replace("_", "-")
            flags = [o for o in accepted if o in keys]  # (progress is no flag: a status line on a terminal)
            raise UsageError(f"{flag} does not apply to method {method} (its options: "
                             f"{', '.join('--' + o.replace('_', '-') for o in flags) or 'none'})")
    return opts


def _objects(acc) -> list:
    """The mechanism objects of the ledger (the entries that are not (eps, delta) pairs)."""
    return [e for e, _, _ in acc.mechanisms if not isinstance(e, float)]


def _describe(acc) -> str:
    objects = len(_objects(acc))
    n = len(acc.mechanisms) - objects
    text = f"{acc.k} mechanism{'s' if acc.k != 1 else ''} ({n} distinct (eps, delta) pair{'s' if n != 1 else ''}"
    if objects:
        text += f", {objects} distinct mechanism object{'s' if objects != 1 else ''}"
    return text + ")"


def _decimal_down(x: float, above: float) -> str:
    """The shortest decimal rounded down from ``x`` that is still > ``above`` (so that the
    printed "above < value" stays true and value <= x)."""
    from decimal import ROUND_FLOOR, Decimal, localcontext

    exact, bound = Decimal(x), Decimal(above)
    for digits in range(4, 18):
        with localcontext() as ctx:
            ctx.prec, ctx.rounding = digits, ROUND_FLOOR
            d = +exact
        if d > bound:
            return f"{d:g}"
    return repr(x)


def _unattainable(acc, delta_g: float, method: str | None = None) -> str | None:
    """Why eps_g is inf at ``delta_g``: the delta events alone exceed delta_g (no method can
    help), or (with ``method``) that method certifies nothing although the optimum is finite;
    with mechanism objects in the ledger, that their loss is unbounded or infinite beyond
    delta_g.  None when the budget is attainable and no method was named."""
    from .loss import delta_event_bounds

    a_lo, a_hi = delta_event_bounds(acc.multiset)  # certified bounds on 1 - prod(1 - delta_i)
    if delta_g < a_lo:
        return (f"unattainable: delta_g = {delta_g!r} < 1 - prod(1 - delta_i) = {_decimal_down(a_lo, delta_g)} "
                f"(the chance of some mechanism's delta event): no eps_g is certified")
    if _objects(acc):  # their losses, not only the pairs' delta events, decide what is attainable
        return (f"no finite eps_g is certified at delta_g = {delta_g!r}: a mechanism's privacy loss exceeds every "
                f"eps_g with probability above it (unbounded loss, e.g. Gaussian noise, needs delta_g > 0; an "
                f"infinite loss needs delta_g above its mass)")
    if delta_g <= a_hi:
        return (f"unattainable: delta_g = {delta_g!r} is within rounding of 1 - prod(1 - delta_i), in "
                f"[{a_lo!r}, {a_hi!r}]: no eps_g is certified")
    if method is None or method in ("optimal", "approx", "auto"):
        return None
    return (f"method {method} certifies no eps_g at delta_g = {delta_g!r}, but the optimum is finite "
            f"(delta_g > 1 - prod(1 - delta_i) = {a_hi!r}): try --method optimal or approx")


def _gap(b) -> float:
    """upper - lower of a Bounds, inf (not NaN) when both are inf (an unattainable budget)."""
    return math.inf if b.upper == math.inf else b.upper - b.lower


_APPROX_THEOREM = {  # what method approx ran: the registry's label names the published algorithm
    "fast": "Certified approximation of the optimum, MV Thm 1.7 guarantee (fast lattice algorithm, "
            "certified bounds within tol)",
    "paper": "Certified approximation of the optimum, MV Thm 1.7 (algorithm='paper' as published)",
    None: "Certified approximation of the optimum, MV Thm 1.7 (default: fast lattice algorithm; "
          "--algorithm paper: as published)",
}


def _theorem(method: str, algorithm: str | None = "fast") -> str:
    """The theorem behind ``method`` as run (for approx: by the algorithm that ran; None: the
    method in general, as `optcomp methods` lists it)."""
    return _APPROX_THEOREM[algorithm] if method == "approx" else METHOD_INFO[method].theorem


# ----------------------------------------------------------------------------------- commands
# each returns (caption, columns, rows) or (caption, columns, rows, notes): notes are
# sentences the reader must see (why a value is inf, what a column is relative to, a row
# left out): appended to the table's caption, a "notes" list in JSON, stderr with --csv


def _auto(acc, direction: str, target: float, opts: dict) -> tuple[float, str]:
    """(value, which method answered) of method auto at ``target`` (delta_g for ``"eps"``,
    eps_g for ``"delta"``)."""
    from . import auto
    from ._inputs import check_delta_g, check_eps_g

    m = acc.multiset  # the ledger's validated multiset
    if direction == "eps":
        return auto.resolve_epsilon(m, check_delta_g(target), **opts)
    return auto.resolve_delta(m, check_eps_g(target), **opts)


def _cmd_epsilon(args):
    acc = _mechanisms(args)
    how = ""
    if args.method == "auto" and acc.k:
        value, how = _auto(acc, "eps", args.delta_g, _options(args, "auto"))
        how = f"; method auto: {how}"
    else:
        value = acc.get_epsilon(args.delta_g, method=args.method, **_options(args, args.method))
    notes = [_unattainable(acc, args.delta_g, args.method)] if value == math.inf else []
    return _describe(acc) + how, ["method", "delta_g", "eps_g"], [[args.method, args.delta_g, value]], notes


def _cmd_delta(args):
    acc = _mechanisms(args)
    how = ""
    if args.method == "auto" and acc.k:
        value, how = _auto(acc, "delta", args.eps_g, _options(args, "auto"))
        how = f"; method auto: {how}"
    else:
        value = acc.get_delta(args.eps_g, method=args.method, **_options(args, args.method))
    return _describe(acc) + how, ["method", "eps_g", "delta_g"], [[args.method, args.eps_g, value]]


def _cmd_bounds(args):
    acc = _mechanisms(args)
    opts = _options(args, "approx")
    notes = []
    if args.delta_g is not None:
        b = acc.bounds(delta_g=args.delta_g, **opts)
        cols, row = ["delta_g", "eps_g_lower", "eps_g_upper", "gap"], [args.delta_g, b.lower, b.upper, _gap(b)]
        if b.upper == math.inf:
            notes.append(_unattainable(acc, args.delta_g, "approx"))
    else:
        b = acc.bounds(eps_g=args.eps_g, **opts)
        cols, row = ["eps_g", "delta_g_lower", "delta_g_upper", "gap"], [args.eps_g, b.lower, b.upper, _gap(b)]
    return _describe(acc) + "; certified: lower <= optimum <= upper", cols, [row], notes


def _cmd_compare(args):
    from ._inputs import check_delta_g, check_eps_g
    from .lattice import ApproxTooCostly
    from .optimal import ExactTooLarge

    acc = _mechanisms(args)
    methods = args.methods or list(METHODS)
    for m in methods:
        if m not in METHOD_INFO:
            raise UsageError(f"--methods: unknown method {m!r} (choose from {', '.join(METHODS)})")
    opts = _options(args)
    for key in opts:
        if not any(key in METHOD_INFO[m].options for m in methods):
            raise UsageError(f"--{key.replace('_', '-')} applies to none of the methods compared")
    by_eps = args.delta_g is not None
    target = check_delta_g(args.delta_g) if by_eps else check_eps_g(args.eps_g)
    objects = bool(_objects(acc))
    rows, notes = [], {}
    for m in methods:
        mine = {key: v for key, v in opts.items() if key in METHOD_INFO[m].options}
        lower = None
        if objects and getattr(METHOD_INFO[m].epsilon, "pairs_only", None):
            notes[m] = "the theorem composes (eps, delta) pairs only, not these mechanisms"
            rows.append([m, None, None, _theorem(m, mine.get("algorithm", "fast"))])
            continue
        try:
            if m == "auto":  # what the other commands answer by default, and which method gave it
                done = next((r[1] for r in rows if r[0] == "optimal" and r[1] is not None), None)
                if done is not None and "max_atoms" not in opts:  # auto's exact attempt is this very call
                    value, how = done, "optimal (exact)"
                else:
                    value, how = _auto(acc, "eps" if by_eps else "delta", target, mine)
                rows.append([m, value, None, f"The default: {how}"])
                continue
            if m == "approx" and mine.get("algorithm", "fast") == "fast":
                bo = {key: v for key, v in mine.items() if key != "algorithm"}
                b = acc.bounds(target, **bo) if by_eps else acc.bounds(eps_g=target, **bo)
                lower, value = b.lower, b.upper
            elif by_eps:
                value = acc.get_epsilon(target, method=m, **mine)
            else:
                value = acc.get_delta(target, method=m, **mine)
        except (ExactTooLarge, ApproxTooCostly) as exc:
            value, notes[m] = None, _one_line(exc)
        rows.append([m, value, lower, _theorem(m, mine.get("algorithm", "fast"))])
    # the ratio column is relative to the optimum; without it, to approx's certified upper
    # bound, and then named so
    ref = next(((r[0], r[1]) for r in rows if r[0] == "optimal" and r[1] is not None), None)
    if ref is None:
        ref = next(((r[0], r[1]) for r in rows if r[0] == "approx" and r[1] is not None), None)
    name = "eps_g" if by_eps else "delta_g"
    out = []
    for m, value, lower, theorem in rows:
        certified = value is not None and math.isfinite(value) and (by_eps or value < 1.0)
        ratio = value / ref[1] if certified and ref is not None and ref[1] != 0.0 else None
        out.append([m, value, lower, ratio, theorem] + ([notes.get(m, "")] if notes else []))
    ratio_col = "vs_approx" if ref is not None and ref[0] == "approx" else "vs_optimal"
    cols = ["method", name, "certified_lower", ratio_col, "theorem"] + (["note"] if notes else [])
    caption = f"{_describe(acc)}; {name} at {'delta_g' if by_eps else 'eps_g'} = {target!r}"
    why = []
    if ratio_col == "vs_approx":
        why.append(f"vs_approx: ratio to approx's certified upper bound (method optimal "
                   f"{'gave no value' if 'optimal' in methods else 'not compared'}), not to the optimum")
    elif ref is None:
        why.append("vs_optimal left empty: neither optimal nor approx gave a value")
    if by_eps and any(r[1] == math.inf for r in rows):
        why.append(_unattainable(acc, target))
    return caption, cols, out, why


def _cmd_split(args):
    from . import calibrate
    from ._inputs import check_sensitivity

    if (args.k is None) == (args.weights is None):
        raise UsageError("give the queries with --k (identical) or --weights (relative budgets), exactly one")
    if args.count is not None and args.weights is None:
        raise UsageError("--count goes with --weights (the number of queries of each weight)")
    if args.mechanism is not None and args.weights is not None:
        raise UsageError("--mechanism goes with --k (identical queries), not --weights")
    if args.weights is not None:
        method = args.method or "optimal"
        opts = _options(args, method)
        counts = args.count or [1] * len(args.weights)
        if len(counts) != len(args.weights):
            raise UsageError(f"--count has {len(counts)} items but --weights has {len(args.weights)}")
        c = calibrate.largest_scale(args.weights, args.eps_g, args.delta_g, delta=args.delta, counts=counts,
                                    method=method, progress=sys.stderr.isatty(), **opts)
        s = check_sensitivity(args.sensitivity)
        rows = []
        for w, n in zip(args.weights, counts):
            eps = c * w
            scale = s / eps if eps > 0 and math.isfinite(s / eps) else None
            rows.append([w, n, eps, args.delta, scale, None if scale is None else math.sqrt(2.0) * scale])
        k = sum(counts)
        caption = (f"{k} queries within (eps_g={args.eps_g!r}, delta_g={args.delta_g!r}) under {method}: "
                   f"eps_i = c * weight_i, c = {c!r}")
        return caption, ["weight", "count", "eps", "delta", "laplace_scale", "laplace_std"], rows
    methods = (args.method,) if args.method else calibrate.TABLE_METHODS
    opts = _options(args, args.method) if args.method else _options(args)
    if not args.method:
        for key in opts:
            if not any(key in METHOD_INFO[m].options for m in methods):
                raise UsageError(f"--{key.replace('_', '-')} applies to none of {', '.join(methods)}")
    names = list(dict.fromkeys(args.mechanism or ()))
    table = calibrate.noise_table(args.k, args.eps_g, args.delta_g, sensitivity=args.sensitivity, delta=args.delta,
                                  methods=methods, recipe=args.method is None, mechanisms=names,
                                  progress=sys.stderr.isatty(), **opts)
    cols = ["method", "eps", "delta", "laplace_scale", "laplace_std", "noise_vs_optimal", "theorem"]
    rows = [[r.method, r.eps, r.delta, r.laplace_scale, r.laplace_std, r.vs_optimal,
             _theorem(r.method, opts.get("algorithm", "fast")) if r.method in METHOD_INFO else r.theorem]
            for r in table]
    if names:  # the noise of every row, and the mechanism a --mechanism spec reads back
        cols[-1:-1] = ["noise_std", "mechanism"]
        for row, r in zip(rows, table):
            row[-1:-1] = [r.noise_std, None if r.mechanism is None else _spec(r.mechanism)]
    caption = (f"{args.k} queries within (eps_g={args.eps_g!r}, delta_g={args.delta_g!r}), sensitivity "
               f"{args.sensitivity!r}: largest certified per-query (eps, delta), Laplace noise per query")
    if names:
        caption += ("; NAME-aware rows: the least noise of that mechanism whose k copies, composed as that "
                    "mechanism, meet the budget (noise_std: its standard deviation; eps, delta: its own pure-DP "
                    "guarantee, eps inf for the Gaussians)")
    if any(r.laplace_scale is None and r.mechanism is None for r in table):  # not the Gaussians' empty Laplace cells
        caption += "; '-': the method certifies no positive per-query eps within this budget"
    notes = []
    if args.method is None and not any(r.method == "kov_cor4.1" for r in table):
        notes.append(f"no kov_cor4.1 row: KOV Cor. 4.1 holds only for 0 < eps_g <= 0.9 and delta_g > 0 "
                     f"(here eps_g = {args.eps_g!r}, delta_g = {args.delta_g!r})")
    return caption, cols, rows, notes


def _cmd_curve(args):
    from .curves import privacy_curve_of

    acc = _mechanisms(args)
    curve = privacy_curve_of(acc.multiset, eps_g=args.eps_g, num=args.num, method=args.method,
                          num_alpha=args.num_alpha, **_options(args, args.method))
    if args.tradeoff:
        rows = [[a, b, u] for a, b, u in zip(curve.alpha.tolist(), curve.beta.tolist(), curve.beta_upper.tolist())]
        return (f"{_describe(acc)}; privacy region certified by {args.method}: P_MD >= beta(P_FA = alpha)",
                ["alpha", "beta", "beta_upper"], rows)
    if curve.delta_lower is not None:
        rows = [list(r) for r in zip(curve.eps_g.tolist(), curve.delta_lower.tolist(), curve.delta.tolist())]
        cols = ["eps_g", "delta_lower", "delta"]
    else:
        rows = [list(r) for r in zip(curve.eps_g.tolist(), curve.delta.tolist())]
        cols = ["eps_g", "delta"]
    return f"{_describe(acc)}; delta(eps_g) certified by {args.method}", cols, rows


def _cmd_methods(args):
    rows = [[m.name, ",".join(m.options) or None, _theorem(m.name, None)] for m in METHOD_INFO.values()]
    return "composition theorems (--method NAME)", ["method", "options", "theorem"], rows


_COMMANDS = {"epsilon": _cmd_epsilon, "delta": _cmd_delta, "bounds": _cmd_bounds, "compare": _cmd_compare,
             "split": _cmd_split, "curve": _cmd_curve, "methods": _cmd_methods}


# ----------------------------------------------------------------------------------- output


def _number(x) -> str:
    if isinstance(x, float):
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return repr(x)
    return str(x)


def _render(command: str, caption: str, columns, rows, fmt: str, notes=()) -> str:
    """The output text; ``notes`` go into the caption (table) or a "notes" list (JSON); with
    --csv :func:`main` writes them on stderr.  NaN is never printed: no value (null, an empty
    CSV field, '-')."""
    rows = [[None if isinstance(v, float) and math.isnan(v) else v for v in r] for r in rows]
    if fmt == "json":
        import json

        def cell(x):
            if isinstance(x, float) and not math.isfinite(x):
                return _number(x)  # JSON has no infinity: the string "inf"
            return x

        data = {"command": command, "rows": [{c: cell(v) for c, v in zip(columns, r)} for r in rows]}
        if notes:
            data["notes"] = list(notes)
        return json.dumps(data, indent=2, allow_nan=False) + "\n"
    if fmt == "csv":
        import csv
        import io

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            w.writerow(["" if v is None else _number(v) for v in r])
        return buf.getvalue()
    cells = [list(columns)] + [["-" if v is None else _number(v) for v in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    caption = "; ".join([caption, *notes]) if caption else "; ".join(notes)
    lines = [f"# {caption}"] if caption else []
    for row in cells:
        lines.append("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = _parser()
    if not argv:
        sys.stderr.write(parser.format_help())
        return 2
    args = parser.parse_args(argv)
    if args.command is None:  # only options such as --json before the command
        parser.error("a command is required")
    fmt = "json" if getattr(args, "json", False) else "csv" if getattr(args, "csv", False) else "table"
    import warnings

    try:
        with warnings.catch_warnings(record=True) as caught:
            # a floating-point overflow in optcomp's own code (which never warns on the
            # values it supports: the test suite makes every such warning an error) stops the
            # command with one line instead of a screen of warnings and a later symptom
            warnings.simplefilter("always")
            warnings.filterwarnings("error", category=RuntimeWarning, module=r"optcomp(\.|$)")
            caption, columns, rows, *rest = _COMMANDS[args.command](args)
            notes = [n for n in (rest[0] if rest else ()) if n]
            text = _render(args.command, caption, columns, rows, fmt, notes)
    except (RuntimeWarning, OverflowError) as exc:  # optcomp raises no OverflowError of its own
        sys.stderr.write(_short(f"{PROG} {args.command}: error: values beyond floating-point range for this "
                                f"computation ({_one_line(exc)})") + "\n")
        return 2
    except (UsageError, ValueError, TypeError) as exc:
        sys.stderr.write(_short(f"{PROG} {args.command}: error: {_one_line(exc)}") + "\n")
        return 2
    except MemoryError:
        sys.stderr.write(f"{PROG} {args.command}: error: out of memory\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG} {args.command}: interrupted\n")
        return 130
    try:
        for w in {str(w.message): w for w in caught}.values():  # others' warnings on a result: one line each
            sys.stderr.write(_short(f"{PROG} {args.command}: warning: {w.category.__name__}: "
                                    f"{_one_line(w.message)}") + "\n")
        if fmt == "csv":  # CSV has no place for them
            for note in notes:
                sys.stderr.write(f"{PROG} {args.command}: note: {note}\n")
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. `optcomp curve ... | head`
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
