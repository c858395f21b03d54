"""The figure workflow end to end, on config/test.yaml, in a temporary copy of the repository.

One full run (module fixture; tests/conftest.py starts it with the session, beside the other
tests) is shared by the tests below, which then check: every declared output exists and is
non-empty (with provenance); a second run has nothing to do; the notebooks ran and show their
figures; the report builds with every figure, the ratio table and the notebooks; a new config
value adds exactly its own job; a bad config is rejected before any job with a message naming
the key; the SLURM profile dry-runs; ``--lint`` and ``snakefmt --check`` are clean; and, last,
a forced rerun of a representative share of the jobs reproduces every CSV byte for byte
(timings excepted; the rerun of every job is in ``-m slow``).  (The README's quoted block and
the committed sidecars are checked in tests/test_readme.py and tests/test_provenance.py,
against the committed files.)
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("snakemake")
nbformat = pytest.importorskip("nbformat")

from optcomp.experiments import io  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TEST_CONFIG = ["--configfile", "config/test.yaml"]


def snakemake(workdir: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``python -m snakemake ARGS`` (this interpreter's) in ``workdir``; output merged."""
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=workdir, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)


def tail(proc: subprocess.CompletedProcess, n: int = 40) -> str:
    return "\n".join(proc.stdout.splitlines()[-n:])


@pytest.fixture(scope="module")
def pipeline(pipeline_run) -> Path:
    """A copy of the workflow (no results/ or figures/) after one run on the test config:
    ``snakemake --cores 2 --configfile config/test.yaml`` (tests/conftest.py's ``pipeline_run``,
    started with the session's first test, beside the other tests)."""
    assert pipeline_run.wait(timeout=900) == 0, pipeline_run.tail()
    return pipeline_run.work


def declared_outputs(work: Path) -> list[tuple[str, str]]:
    """(path, status) of every file of the DAG, from ``snakemake --summary``."""
    proc = snakemake(work, "--summary", *TEST_CONFIG)
    assert proc.returncode == 0, tail(proc)
    rows = [line.split("\t") for line in proc.stdout.splitlines() if "\t" in line]
    header, body = rows[0], rows[1:]
    assert header[0] == "output_file" and header[4] == "status"
    return [(r[0], r[4]) for r in body]


def result_csvs(work: Path, *, timing: bool = False) -> dict[str, bytes]:
    files = sorted(p for p in (work / "results").rglob("*") if p.suffix in {".csv", ".md"})
    return {str(p.relative_to(work)): p.read_bytes() for p in files
            if timing or "timing" not in p.relative_to(work).parts}


# ----------------------------------------------------------------------------- first run


def test_every_declared_output_exists_and_is_not_empty(pipeline):
    outputs = declared_outputs(pipeline)
    assert len(outputs) > 20
    assert all(s == "ok" for _, s in outputs), [x for x in outputs if x[1] != "ok"]
    for path, _ in outputs:
        f = pipeline / path
        assert f.is_file() and f.stat().st_size > 0, path
    names = {Path(p).name for p, _ in outputs}
    for fig in ["mv_figure2", "heterogeneous", "kov_figure2", "kov_figure3", "runtime", "budget_noise"]:
        assert {f"{fig}.pdf", f"{fig}.png"} <= names
        assert (pipeline / "figures" / f"{fig}.pdf").read_bytes().startswith(b"%PDF")
        assert (pipeline / "figures" / f"{fig}.png").read_bytes().startswith(b"\x89PNG")
    # this machine's timings and their figure go to results/timing/local/, never over the reference
    assert (pipeline / "results/timing/local/runtime.png").read_bytes().startswith(b"\x89PNG")
    assert {p.name for p in (pipeline / "results/timing/reference").glob("*.csv")} >= {"approx_vs_k.csv", "slopes.csv"}
    # chunk outputs are kept (a new config value reruns only its own job); no half-written files
    assert len(list((pipeline / "results" / "chunks" / "homogeneous").glob("*.csv"))) == 4
    assert not list((pipeline / "results").rglob("*.tmp"))


def test_reference_timings_are_not_rewritten(pipeline):
    """No rule writes the committed reference run: after a run every file of it (tables,
    sidecars, slopes, summary) is the committed one, byte for byte."""
    files = sorted((ROOT / "results/timing/reference").iterdir())
    assert {"slopes.csv", "summary.md", "approx_vs_k.meta.json"} <= {p.name for p in files}
    for path in files:
        assert (pipeline / "results/timing/reference" / path.name).read_bytes() == path.read_bytes(), path.name


def test_every_csv_has_provenance(pipeline):
    import numpy
    import scipy

    import optcomp
    from optcomp import provenance

    local = [p for p in (pipeline / "results").rglob("*.csv") if "reference" not in p.parts and "chunks" not in p.parts]
    assert len(local) >= 12
    for path in local:
        meta = json.loads(io.meta_path(path).read_text())
        assert meta["optcomp_version"] == optcomp.__version__, path
        if meta["config_section"] is None:  # a table of tables (e.g. the claims): no config of its own
            assert meta["config"] is None and meta["config_sha256"] is None, path
        else:
            assert len(meta["config_sha256"]) == 64 and meta["config_sha256"] == io.config_hash(meta["config"]), path
        header = path.read_text().partition("\n")[0].split(",")
        assert meta["columns"] == header, path
        assert meta["rows"] == path.read_text().count("\n") - 1, path
        assert meta["numpy"] == numpy.__version__ and meta["scipy"] == scipy.__version__ and meta["python"], path
        # the code that produced it, by content: the same in this copy (no git checkout) as in a clone
        assert meta["code_sha256"] == provenance.code_hash(meta["function"]), path
        assert "git_commit" not in meta and meta["rule"], path
        if "timing" in path.parts and path.name != "slopes.csv":
            machine = meta["machine"]
            assert machine["cpu_count"] >= 1 and len(machine["load_average_1_5_15_min"]) == 3, path


def test_timings_have_repetitions_and_slopes_have_intervals(pipeline):
    for name in ["approx_vs_k", "exact_heterogeneous", "exact_homogeneous"]:
        df = io.read_csv(pipeline / "results/timing/local" / f"{name}.csv")
        assert (df["repeats"] >= 5).all() and (df["seconds_min"] <= df["seconds"]).all()
        assert (df["seconds"] <= df["seconds_max"]).all()
    ref = io.read_csv(ROOT / "results/timing/reference/slopes.csv")
    assert (ref["points"] >= 6).all(), ref[["experiment", "method", "points"]]
    assert (ref["slope_ci95_low"] <= ref["fitted_slope"]).all() and (ref["fitted_slope"] <= ref["slope_ci95_high"]).all()


def test_provenance_records_the_git_commit(tmp_path):
    from optcomp.pipeline import git_state

    state = git_state(ROOT)
    if state["git_commit"] is None:
        pytest.skip("not a git checkout")
    assert re.fullmatch(r"[0-9a-f]{40}", state["git_commit"]) and isinstance(state["git_dirty"], bool)
    assert git_state(tmp_path) == {"git_commit": None, "git_dirty": None}


def test_results_are_sound(pipeline):
    """A few laws the papers prove, checked on the pipeline's own tables."""
    hom = io.read_csv(pipeline / "results/homogeneous/eps_g.csv")
    wide = hom.pivot_table(index=["panel", "eps", "delta_g_log2", "k"], columns="method", values="eps_g")
    for m in ("basic", "drv", "kov"):
        assert (wide["optimal"] <= wide[m] * (1 + 1e-12)).all(), m
    het = io.read_csv(pipeline / "results/heterogeneous/eps_g.csv")
    approx = het[het.method == "approx"].set_index("k")
    assert (approx["eps_g_lower"] <= approx["eps_g"]).all()
    exact = het[het.method == "optimal"].set_index("k")["eps_g"]
    assert len(exact) > 0
    assert (approx.loc[exact.index, "eps_g_lower"] <= exact).all() and (exact <= approx.loc[exact.index, "eps_g"]).all()
    budget = io.read_csv(pipeline / "results/budget/laplace.csv")
    assert (budget["scale_over_optimal"] >= 1 - 1e-12).all()
    ratios = (pipeline / "results/homogeneous/ratios.md").read_text()
    assert ratios.startswith("| eps | delta_g |") and "KOV bound / Optimal" in ratios


# KOV Section 4 (rules kov_section4_*): references written from the mechanisms' definitions


def _rr_delta(e, k, x):
    """delta(x) of k-fold (e, 0) randomized response, i.e. of k geometric mechanisms (KOV Thm 3.3,
    from the definition, 50 digits): sum over the loss atoms l = (k - 2i) e > x of
    P0[L = l] (1 - e^{x - l}), P0[L = (k - 2i) e] = C(k, i) e^{(k - i) e} / (1 + e^e)^k."""
    import mpmath

    with mpmath.workdps(50):
        e, x = mpmath.mpf(e), mpmath.mpf(x)
        z = (1 + mpmath.exp(e)) ** k
        return sum((mpmath.binomial(k, i) * mpmath.exp((k - i) * e) / z * (1 - mpmath.exp(x - (k - 2 * i) * e))
                    for i in range(k + 1) if (k - 2 * i) * e > x), mpmath.mpf(0))


def _largest(ok, lo, hi, steps=80):
    """The largest x in [lo, hi] with ok(x) (ok monotone: true below, false above), by bisection."""
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def test_kov_section4_least_noise_matches_references_from_the_definitions(pipeline):
    """The exact (least certified) noise never lies below the true least noise and is within the
    search's precision of it: the Gaussian at every k (k-fold Gaussian = mu-GDP, mu² = k/sigma²,
    delta(eps) = Φ(mu/2 - eps/mu) - e^eps Φ(-mu/2 - eps/mu)), the geometric mechanism at every
    k (k-fold randomized response), Laplace and staircase at k = 1 (their profiles); KOV's
    variance is 8k log(e + eps/delta)/eps²; every route is certified within the budget."""
    import math

    import mpmath
    import numpy as np

    noise = io.read_csv(pipeline / "results/kov_section4/noise.csv")
    cfg = merged_config()["kov_section4"]
    slack = 5 * cfg["rtol"] + 5e-4  # the search's precision and auto's 1e-4 in eps_g, in variance
    kov = noise[noise.route == "kov"]
    assert noise["certified"].all() and (kov["delta_g_certified"] <= kov["delta_g"]).all()
    checked = set()
    for row in noise[noise.route == "exact"].itertuples():
        eps, delta, k = row.eps_g, row.delta_g, int(row.k)
        if row.mechanism == "gaussian":
            def gdp(mu):
                with mpmath.workdps(40):
                    return (mpmath.ncdf(mu / 2 - eps / mu) - mpmath.exp(eps) * mpmath.ncdf(-mu / 2 - eps / mu)) <= delta
            mu = _largest(gdp, 1e-6, 50.0)
            least = k / mu**2
        elif row.mechanism == "geometric":
            e = _largest(lambda e: _rr_delta(e, k, eps) <= delta, 1e-9, eps + 5.0, steps=60)
            assert row.noise_value <= e * (1 + 1e-9) and row.noise_value >= e * (1 - slack), (k, row.noise_value, e)
            r = math.exp(-e)
            least = 2 * r / (1 - r) ** 2
        elif row.mechanism == "laplace" and k == 1:  # delta(x) = 1 - e^{(x - a)/2} below a = 1/b
            least = 2 / (eps - 2 * math.log1p(-delta)) ** 2
        elif row.mechanism == "staircase" and k == 1:  # delta(x) = p (1 - e^{x - e}), gamma = 1/(1 + e^{e/2})
            def stair(e):
                g = 1 / (1 + math.exp(e / 2))
                p = 0.5 + g * -math.expm1(-e) / (2 * (g + math.exp(-e) * (1 - g)))
                return e <= eps or p * -math.expm1(eps - e) <= delta
            e = _largest(stair, eps, eps + 1.0)
            assert e * (1 - slack) <= row.noise_value <= e * (1 + 1e-9), (row.noise_value, e)
            checked.add(row.mechanism)
            continue
        else:
            continue
        assert least * (1 - 1e-9) <= row.variance <= least * (1 + 2 * slack), (row.mechanism, k, row.variance, least)
        checked.add(row.mechanism)
    assert checked == {"gaussian", "geometric", "laplace", "staircase"}
    kov = kov[kov.mechanism.isin(["gaussian", "laplace"])]
    formula = 8 * kov["k"] * np.log(np.e + kov["eps_g"] / kov["delta_g"]) / kov["eps_g"] ** 2
    assert np.allclose(kov["variance"], formula, rtol=1e-12, atol=0)


def test_kov_section4_geometric_region_and_black_box_are_sound(pipeline):
    """KOV Thm 4.4's table: the optimal delta is the k-fold randomized response's (from the
    definition) and lies in every certified bracket; (c): the black-box eps_g is the exact optimum
    of k (eps_0, 0) black boxes, and the mechanism-aware bracket is ordered and never above it
    (a mechanism is at least as private as its black box)."""
    region = io.read_csv(pipeline / "results/kov_section4/geometric_region.csv")
    assert region["contains"].all() and (region["delta_lower"] <= region["delta_upper"]).all()
    for row in region.iloc[:: max(1, len(region) // 8)].itertuples():
        ref = float(_rr_delta(row.eps, int(row.k), row.eps_g))
        assert row.delta_lower <= ref * (1 + 1e-12) and ref <= row.delta_upper * (1 + 1e-12), row
        assert abs(row.delta_optimal - ref) <= 1e-12 * ref, (row.delta_optimal, ref)
    summary = io.read_csv(pipeline / "results/kov_section4/geometric_summary.csv")
    assert summary["all_contained"].all() and summary["points"].sum() == len(region)
    black = io.read_csv(pipeline / "results/kov_section4/black_box.csv")
    assert (black["eps_g_lower"] <= black["eps_g_upper"]).all()
    assert (black["eps_g_lower"] <= black["eps_g_black_box"] * (1 + 1e-12)).all()
    for row in black.itertuples():
        delta_g, k, e = row.delta_g, int(row.k), row.eps_0
        assert _rr_delta(e, k, row.eps_g_black_box) <= delta_g * (1 + 1e-12)
        assert _rr_delta(e, k, row.eps_g_black_box * (1 - 1e-9)) > delta_g
    claims = (pipeline / "results/kov_section4/claims.md").read_text()
    assert claims.startswith("| KOV Section 4 claim |") and "nothing special about Gaussian" in claims


@pytest.mark.parametrize("override, key", [
    ({"kov_section4": {"mechanisms": ["laplace", "staircase"]}}, "mechanisms"),  # the Gaussian reference
    ({"kov_section4": {"budgets": [{"eps_g": 1.0}]}}, "budgets"),
    ({"kov_section4": {"budgets": [{"eps_g": 1.0, "delta_g": 0.0}]}}, "delta_g"),
    ({"kov_section4": {"sensitivity": 1.5}}, "sensitivity"),  # the geometric mechanism's is an integer
    ({"kov_section4": {"geometric": {"points": 1}}}, "points"),
    ({"kov_section4": {"black_box": {"workloads": [{"mechanism": "gaussian", "parameter": 1.0, "sensitivity": 1}]}}},
     "workloads"),
])
def test_kov_section4_schema_rejects_bad_values_naming_the_key(override, key):
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    with pytest.raises(WorkflowError) as info:
        validate(merged_config(override), str(ROOT / "config" / "schema.yaml"))
    assert key in str(info.value) + "".join(str(a) for a in info.value.args)


def test_kov_section4_k_grids_are_checked_before_any_job():
    from optcomp.pipeline import config_problem

    for override, key in (({"k": {"from": 100, "to": 10}}, "kov_section4.k"),
                          ({"geometric": {"k": {"from": 30, "to": 3}}}, "kov_section4.geometric.k")):
        problem = config_problem(merged_config({"kov_section4": override}), ROOT / "config" / "schema.yaml")
        assert problem is not None and problem.startswith(f"config {key}: from = "), problem


def test_second_run_has_nothing_to_do(pipeline):
    proc = snakemake(pipeline, "--cores", "2", "-n", *TEST_CONFIG)
    assert proc.returncode == 0, tail(proc)
    assert "Nothing to be done" in proc.stdout, tail(proc)


def test_notebooks_were_executed_headless_with_inline_figures(pipeline):
    executed = sorted((pipeline / "results" / "notebooks").glob("*.ipynb"))
    sources = sorted((pipeline / "notebooks").glob("*.ipynb"))
    assert [p.name for p in executed] == [p.name for p in sources] and len(sources) >= 3
    for path in executed:
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code and all(c.get("execution_count") for c in code), path.name
        outputs = [o for c in code for o in c.get("outputs", [])]
        assert not any(o.get("output_type") == "error" for o in outputs), path.name
        assert any("image/png" in o.get("data", {}) for o in outputs), f"{path.name}: no figure"
        assert not any(o.get("name") == "stderr" for o in outputs), path.name  # no warnings
        html = (path.with_suffix(".html")).read_text()
        assert "data:image/png;base64," in html, path.name
    # every notebook reads only results/ (and the package's plotting functions)
    for path in sources:
        text = "".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
        assert "OPTCOMP_RESULTS" in text and "epsilon_g(" not in text, path.name


def test_notebooks_read_results_from_the_environment(pipeline, tmp_path):
    """Run one notebook directly on a moved copy of results/: it must find them via
    OPTCOMP_RESULTS, not through a path relative to the repository."""
    from optcomp.pipeline import run_notebook

    moved = tmp_path / "elsewhere" / "results"
    shutil.copytree(pipeline / "results" / "homogeneous", moved / "homogeneous")
    out = tmp_path / "out.ipynb"
    run_notebook(pipeline / "notebooks" / "01_homogeneous.ipynb", out, results_dir=moved, timeout=120)
    nb = nbformat.read(out, as_version=4)
    assert not any(o.get("output_type") == "error" for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def test_report_builds_with_every_figure_the_ratio_table_and_the_notebooks(pipeline):
    proc = snakemake(pipeline, "--report", "report.html", *TEST_CONFIG)
    assert proc.returncode == 0, tail(proc)
    html = (pipeline / "report.html").read_text(errors="replace")
    for name in ["mv_figure2.png", "heterogeneous.png", "kov_figure2.png", "kov_figure3.png", "runtime.png",
                 "budget_noise.png", "ratios.html", "01_homogeneous.html", "02_heterogeneous.html",
                 "03_runtime.html"]:
        assert name in html, name
    assert "MV Figure 2" in html and "KOV Figure 3" in html and "Notebooks" in html


def test_console_is_quiet_and_a_new_value_reruns_only_its_own_job(pipeline, tmp_path):
    """The README's example -- one more eps in homogeneous.by_eps -- schedules one new curve
    family job (not all of them), with short rerun reasons and a progress message per job."""
    extra = tmp_path / "more.yaml"
    extra.write_text("homogeneous:\n  by_eps: {eps: [0.1, 0.01, 0.02]}\n")
    proc = snakemake(pipeline, "-n", "--cores", "2", *TEST_CONFIG, str(extra))
    assert proc.returncode == 0, tail(proc)
    stats = proc.stdout.split("Job stats:")[1]
    assert re.search(r"homogeneous_family\s+1\b", stats), stats
    assert "heterogeneous_chunk" not in stats and "timing " not in stats, stats
    assert "MV Figure 2: curve family by_eps-eps0.02-dg-25" in proc.stdout
    params_lines = [line for line in proc.stdout.splitlines() if "Params have changed" in line]
    # the parameter part of each reason names short hashes, not whole config dicts
    assert params_lines and all(len(line.split("Params have changed")[1]) < 200 for line in params_lines), params_lines


def test_several_distributions_and_seeds_run_as_jobs_of_their_own(pipeline, tmp_path):
    """Two distributions x two seeds: 4 chunk jobs (test config: chunks 1), the tables gain
    distribution and seed columns, the figure gets a column per distribution, and the
    instance of the single-value run (the config's distribution and seed) has its rows."""
    work = tmp_path / "work"
    shutil.copytree(pipeline, work, symlinks=True)  # with .snakemake: the params trigger sees the change
    extra = tmp_path / "several.yaml"
    extra.write_text("heterogeneous:\n  distribution:\n    - {name: uniform, low: 0.005, high: 0.1}\n"
                     "    - {name: loguniform, low: 0.001, high: 0.1}\n  seed: [20160109, 3]\n")
    targets = ["results/heterogeneous/eps_g.csv", "results/heterogeneous/mechanisms.csv", "figures/heterogeneous.png"]
    proc = snakemake(work, *targets, "--cores", "2", *TEST_CONFIG, str(extra))
    assert proc.returncode == 0, tail(proc)
    assert re.search(r"heterogeneous_chunk\s+4\b", proc.stdout.split("Job stats:")[1]), tail(proc)
    het = io.read_csv(work / "results/heterogeneous/eps_g.csv")
    assert list(het.columns[:3]) == ["distribution", "seed", "delta"]
    cases = list(dict.fromkeys(zip(het["distribution"], het["seed"])))
    assert cases == [("uniform 0.005..0.1", 20160109), ("uniform 0.005..0.1", 3),
                     ("loguniform 0.001..0.1", 20160109), ("loguniform 0.001..0.1", 3)]
    single = (pipeline / "results/heterogeneous/eps_g.csv").read_text()
    first = het[(het["distribution"] == cases[0][0]) & (het["seed"] == cases[0][1])].drop(columns=["distribution", "seed"])
    assert io.format_frame(first.reset_index(drop=True)) == single
    mech = io.read_csv(work / "results/heterogeneous/mechanisms.csv")
    assert len(mech) == 4 * 60 and list(mech.columns[:2]) == ["distribution", "seed"]
    from PIL import Image

    width, height = Image.open(work / "figures/heterogeneous.png").size
    assert width > 1000 and height > 600


# ------------------------------------------------------------------------- configuration


def merged_config(*overrides: dict) -> dict:
    """config.yaml deep-merged with test.yaml and the overrides, as Snakemake merges them."""
    import copy

    import yaml
    from snakemake.utils import update_config

    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    for extra in (yaml.safe_load((ROOT / "config" / "test.yaml").read_text()), *overrides):
        update_config(cfg, copy.deepcopy(extra))
    return cfg


@pytest.mark.parametrize("override, key", [
    ({"homogeneous": {"k_max": -5}}, "k_max"),
    ({"homogeneous": {"bogus_key": 1}}, "bogus_key"),
    ({"regions": {"kov_figure2": {"delta": [0.0, 1.5]}}}, "delta"),
    ({"runtime": {"approx_vs_k": {"k": []}}}, "approx_vs_k"),
    ({"heterogeneous": {"distribution": {"name": "gamma", "low": 0.1, "high": 0.2}}}, "distribution"),
    ({"heterogeneous": {"distribution": [{"name": "uniform", "low": 0.1, "high": 0.2}, {"name": "gamma"}]}},
     "distribution"),
    ({"heterogeneous": {"distribution": []}}, "distribution"),
    ({"heterogeneous": {"seed": [1, 2, 1]}}, "seed"),
    ({"heterogeneous": {"seed": [-1]}}, "seed"),
    ({"hardness": {"families": {"random": [2, 25]}}}, "random"),
    ({"budget": {"methods": ["basic", "kov"]}}, "methods"),  # the optimal reference is required
    ({"notebooks": {"timeout_seconds": "long"}}, "timeout_seconds"),
])
def test_schema_rejects_bad_values_naming_the_key(override, key):
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    validate(merged_config(), str(ROOT / "config" / "schema.yaml"))  # the real configs are valid
    with pytest.raises(WorkflowError) as info:
        validate(merged_config(override), str(ROOT / "config" / "schema.yaml"))
    assert key in str(info.value) + "".join(str(a) for a in info.value.args)


@pytest.mark.parametrize("distribution, message", [
    ([{"name": "uniform", "low": 0.01, "high": 0.1}, {"name": "loguniform", "low": 0.2, "high": 0.1}],
     "config heterogeneous.distribution[1]: low = 0.2 > high = 0.1"),
    ({"name": "choice", "values": [0.1, 0.2], "p": [0.5]},
     "config heterogeneous.distribution.p: 1 probabilities for 2 values"),
    ([{"name": "choice", "values": [0.1, 0.2], "p": [0.5, 0.6]}],
     "config heterogeneous.distribution[0].p: the probabilities sum to 1.1, not 1"),
])
def test_cross_field_checks_name_the_distribution(distribution, message):
    from optcomp.pipeline import config_problem

    cfg = merged_config()
    assert config_problem(cfg, ROOT / "config" / "schema.yaml") is None
    cfg["heterogeneous"]["distribution"] = distribution
    assert config_problem(cfg, ROOT / "config" / "schema.yaml") == message


def test_several_distributions_and_seeds_and_hardness_to_24_are_valid():
    from optcomp.pipeline import config_problem

    several = {"heterogeneous": {"distribution": [{"name": "uniform", "low": 0.01, "high": 0.1},
                                                  {"name": "choice", "values": [0.01, 0.1], "p": [0.9, 0.1]}],
                                 "seed": [1, 2]},
               "hardness": {"families": {"random": [24], "ones": [24]}}}
    assert config_problem(merged_config(several), ROOT / "config" / "schema.yaml") is None
    one = merged_config({"heterogeneous": {"seed": [5]}})  # a list of one is the list form
    assert config_problem(one, ROOT / "config" / "schema.yaml") is None and one["heterogeneous"]["seed"] == [5]


def test_schema_fills_defaults():
    from snakemake.utils import validate

    cfg = {}
    validate(cfg, str(ROOT / "config" / "schema.yaml"))
    assert cfg["homogeneous"]["by_eps"]["delta_g_log2"] == -25 and cfg["homogeneous"]["k_max"] == 1000
    assert cfg["regions"]["kov_figure3"] == {"eps": 0.1, "delta": 0.001, "k": 30, "methods": ["basic", "drv", "optimal"]}


@pytest.mark.parametrize("bad, key", [
    ("homogeneous:\n  bogus_key: 1\n", "bogus_key"),                       # schema
    ("homogeneous:\n  k_max: 50\n  ratio_k: [10, 100]\n", "homogeneous.ratio_k"),  # cross-field check
])
def test_bad_config_stops_before_any_job_naming_the_key(pipeline, tmp_path, bad, key):
    bad_file = tmp_path / "bad.yaml"
    bad_file.write_text(bad)
    before = result_csvs(pipeline, timing=True)
    # no -n: a real run must stop at validation, before scheduling anything
    proc = snakemake(pipeline, "--cores", "1", "--configfile", "config/test.yaml", str(bad_file))
    assert proc.returncode != 0
    assert key in proc.stdout, tail(proc)
    assert "Job stats" not in proc.stdout and "localrule" not in proc.stdout
    assert result_csvs(pipeline, timing=True) == before


def test_slurm_profile_dry_run(pipeline):
    proc = snakemake(pipeline, "-n", "--forceall", "--profile", "profiles/slurm", *TEST_CONFIG)
    assert proc.returncode == 0, tail(proc)
    assert "Job stats" in proc.stdout and "timing" in proc.stdout


def test_lint_is_clean(pipeline):
    proc = snakemake(pipeline, "--lint", *TEST_CONFIG)
    assert proc.returncode == 0, tail(proc)
    assert "Congratulations" in proc.stdout


def test_snakefmt_is_clean():
    snakefmt = shutil.which("snakefmt", path=str(Path(sys.executable).parent)) or shutil.which("snakefmt")
    if snakefmt is None:
        pytest.skip("snakefmt not installed (dev extra)")
    files = [ROOT / "Snakefile", *sorted((ROOT / "rules").glob("*.smk"))]
    proc = subprocess.run([snakefmt, "--check", *map(str, files)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout


def test_config_readme_lists_every_key_with_its_default():
    from optcomp.pipeline import config_reference

    text = (ROOT / "config" / "README.md").read_text()
    quoted = text.split("<!-- config-keys:start -->\n")[1].split("<!-- config-keys:end -->")[0]
    assert quoted == config_reference(ROOT / "config" / "schema.yaml"), \
        "config/README.md is stale: python -m optcomp.pipeline config-reference"


# ------------------------------------------------- several instances, one job per instance


HET_DISTS = [{"name": "uniform", "low": 0.005, "high": 0.1},
             {"name": "choice", "values": [0.01, 0.1], "p": [0.9, 0.1]}]


def het_section(**changes) -> dict:
    cfg = dict(merged_config()["heterogeneous"], k=[1, 3, 9, 27], chunks=2, methods=["basic", "kov", "approx", "optimal"])
    return dict(cfg, **changes)


def test_the_single_value_form_keeps_its_job_specs():
    """The default config's jobs (and so their rerun hashes and tables) are those of one
    instance: no case key, scalar distribution and seed, no extra columns."""
    from optcomp.experiments import heterogeneous as H

    cfg = het_section()
    specs = H.chunks(cfg)
    assert len(specs) == 2 and not H.several(cfg)
    assert [s["k"] for s in specs] == [[1, 9], [3, 27]]
    keys = {"seed", "distribution", "delta", "delta_g_log2", "methods", "eta", "paper_eta", "paper_max_k",
            "optimal_max_k", "k_max", "k"}
    assert all(set(s) == keys and s["seed"] == cfg["seed"] and s["distribution"] == cfg["distribution"]
               for s in specs)
    assert list(H.sweep(specs[0]).columns) == H.COLUMNS
    assert list(H.mechanisms_table(cfg).columns) == ["i", "eps", "delta"]


def test_several_instances_are_the_single_value_sweeps_side_by_side(tmp_path):
    """distribution x seed lists: one job per (distribution, seed, share of k); the merged
    table is, instance by instance and in config order, the single-value form's table of that
    distribution and seed, after two leading columns naming it."""
    from optcomp.experiments import heterogeneous as H

    multi = het_section(distribution=HET_DISTS, seed=[7, 20160109])
    specs = H.chunks(multi)
    assert len(specs) == 2 * 2 * 2
    assert [(s["case"]["distribution"], s["case"]["seed"]) for s in specs[::2]] == [
        ("uniform 0.005..0.1", 7), ("uniform 0.005..0.1", 20160109),
        ("choice 0.01|0.1 p 0.9|0.1", 7), ("choice 0.01|0.1 p 0.9|0.1", 20160109)]
    for i, spec in enumerate(specs):  # as the jobs and the merge rule do: CSVs, read back in job order
        io.write_csv(H.sweep(spec), tmp_path / f"{i:03d}.csv")
    merged = H.sort_rows(pd_concat([io.read_csv(tmp_path / f"{i:03d}.csv") for i in range(len(specs))]))
    assert list(merged.columns) == H.CASE_COLUMNS + H.COLUMNS
    mech = H.mechanisms_table(multi)
    blocks = []
    for dist in HET_DISTS:
        for seed in (7, 20160109):
            single = het_section(distribution=dist, seed=seed)
            expect = H.sort_rows(pd_concat([H.sweep(s) for s in H.chunks(single)]))
            label = H.distribution_label(dist)
            got = merged[(merged["distribution"] == label) & (merged["seed"] == seed)].drop(columns=H.CASE_COLUMNS)
            assert io.format_frame(got.reset_index(drop=True)) == io.format_frame(expect)
            blocks.append(label)
            m = mech[(mech["distribution"] == label) & (mech["seed"] == seed)].drop(columns=H.CASE_COLUMNS)
            assert io.format_frame(m.reset_index(drop=True)) == io.format_frame(H.mechanisms_table(single))
    assert list(dict.fromkeys(merged["distribution"])) == list(dict.fromkeys(blocks))  # config order
    # the draw is the definition: seeded PCG64, uniform on [low, high) / choice with p
    import numpy as np

    rng = np.random.Generator(np.random.PCG64(7))
    first = mech[(mech["distribution"] == "choice 0.01|0.1 p 0.9|0.1") & (mech["seed"] == 7)]["eps"].to_numpy()
    assert first.tolist() == rng.choice([0.01, 0.1], size=27, p=[0.9, 0.1]).tolist()


def test_kov_section4_jobs_merge_to_the_same_tables_for_any_split(tmp_path):
    """KOV Section 4 as independent jobs: part (a) one per (budget, mechanism, share of k), (b)
    one per (eps, k), (c) one per (workload, share of k), each grid point in exactly one job.
    Run in reverse order, written as CSVs and merged as the rules do, they give the bytes of the
    one-process sweep for every ``chunks``; each variance over its own exact route is 1 and the
    Gaussian's exact over itself is 1."""
    import itertools

    from optcomp.experiments import kov_section4 as K

    base = dict(merged_config()["kov_section4"], budgets=[{"eps_g": 1.0, "delta_g": 1e-5},
                                                          {"eps_g": 0.5, "delta_g": 1e-6}],
                k=[1, 3, 10], mechanisms=["gaussian", "geometric"], rtol=1e-3, gaussian_delta_split=[0.5],
                geometric={"eps": [0.1, 0.2], "k": [4, 8], "points": 5, "tol": 1e-4},
                black_box={"delta_g": 1e-5, "rtol": 1e-3,
                           "workloads": [{"mechanism": "geometric", "parameter": 0.1, "sensitivity": 1},
                                         {"mechanism": "geometric", "parameter": 0.05, "sensitivity": 2}]})

    def merged(cfg, part, chunks, rows, table=None):
        specs = chunks(cfg)
        for i, spec in reversed(list(enumerate(specs))):
            io.write_csv(rows(spec), tmp_path / f"{part}-{i:03d}.csv")
        frame = pd_concat([io.read_csv(tmp_path / f"{part}-{i:03d}.csv") for i in range(len(specs))])
        return io.format_frame(table(frame) if table else frame), specs

    whole_noise = io.format_frame(K.sweep_noise(base))
    region, summary = K.sweep_geometric(base)
    whole_black = io.format_frame(K.sweep_black_box(base))
    for n in (1, 2, 3):
        cfg = dict(base, chunks=n)
        noise, specs = merged(cfg, f"noise{n}", K.noise_chunks, K.noise_rows, K.noise_table)
        assert len(specs) == 2 * 2 * min(n, 3) and noise == whole_noise
        points = [(s["eps_g"], s["delta_g"], s["mechanism"], k) for s in specs for k in s["k"]]
        every = {(e, d, m, k) for (e, d), m, k in itertools.product([(1.0, 1e-5), (0.5, 1e-6)],
                                                                    ["gaussian", "geometric"], [1, 3, 10])}
        assert len(points) == len(set(points)) and set(points) == every
        black, specs = merged(cfg, f"black{n}", K.black_box_chunks, K.black_box_rows, K.black_box_table)
        assert len(specs) == 2 * min(n, 3) and black == whole_black
    geo, specs = merged(base, "geometric", K.geometric_chunks, K.geometric_rows)
    assert [(s["eps"], s["k"]) for s in specs] == [(0.1, 4), (0.1, 8), (0.2, 4), (0.2, 8)]
    assert geo == io.format_frame(region)
    assert io.format_frame(K.geometric_summary(io.read_csv(tmp_path / "geometric-000.csv"))) == \
        io.format_frame(summary.iloc[:1])
    table = io.read_csv(tmp_path / "noise1-000.csv")
    assert "variance_over_exact" not in table  # the ratios are the merge's, across jobs
    noise = K.sweep_noise(base)
    assert (noise[noise.route == "exact"]["variance_over_exact"] == 1.0).all()
    gauss = noise[(noise.route == "exact") & (noise.mechanism == "gaussian")]
    assert (gauss["variance_over_gaussian"] == 1.0).all() and len(gauss) == 2 * 3
    assert list(dict.fromkeys(zip(noise["eps_g"], noise["delta_g"]))) == [(1.0, 1e-5), (0.5, 1e-6)]


def test_kov_section4_thm44_point_beyond_the_size_limit_is_computed_at_a_looser_tolerance(monkeypatch):
    """config/paper.yaml's eps 0.5, k = 10^4 needs more lattice points than the engine allows
    at tol 1e-4 near some eps_g: the point is computed at 1e-3 (and says so), not dropped and
    not a failed job."""
    from optcomp import ApproxTooCostly, lattice
    from optcomp.experiments import kov_section4 as K

    real = lattice.mechanism_delta_bounds
    asked = []

    def limited(m, others, eps_g, tol, **kw):
        asked.append(tol)
        if tol < 5e-4 and eps_g > 0.3:
            raise ApproxTooCostly("too fine", None)
        return real(m, others, eps_g, tol, **kw)

    monkeypatch.setattr(lattice, "mechanism_delta_bounds", limited)
    rows = K.geometric_rows({"eps": 0.1, "k": 10, "points": 5, "tol": 1e-4})
    assert rows["tol"].tolist() == [1e-4 if x <= 0.3 else 1e-3 for x in rows["eps_g"]]
    assert rows["contains"].all() and 1e-3 in asked and max(asked) == 1e-3


def pd_concat(frames):
    import pandas as pd

    return pd.concat(frames, ignore_index=True)


def test_distribution_labels_are_exact_and_csv_safe():
    from optcomp.experiments.heterogeneous import distribution_label

    assert distribution_label({"name": "uniform", "low": 0.005, "high": 0.1}) == "uniform 0.005..0.1"
    assert distribution_label({"name": "loguniform", "low": 1e-05, "high": 1}) == "loguniform 1e-05..1"
    assert distribution_label({"name": "choice", "values": [0.1, 0.30000000000000004]}) == \
        "choice 0.1|0.30000000000000004"
    assert "," not in distribution_label({"name": "choice", "values": [0.1, 0.2], "p": [0.25, 0.75]})


HARDNESS = {"eps_total": 1.0, "seed": 1606, "z_max": 50, "walkthrough": [1, 2, 3, 6],
            "families": {"random": [2, 6], "planted": [4, 6], "powers": [4], "ones": [1, 3]}}


def test_hardness_instance_jobs_collect_into_the_whole_sweep(tmp_path):
    """One job per instance (run here in reverse order), collected: the same instance and
    walkthrough tables, field for field, as the sweep that runs every instance itself."""
    from optcomp.experiments import hardness as H

    whole = H.sweep(HARDNESS)
    paths = []
    for family, k, _ in reversed(H.instances(HARDNESS)):
        row, timing = H.instance_sweep(H.instance_spec(HARDNESS, family, k))
        for df, path in ((row, tmp_path / f"{family}-{k}.csv"), (timing, tmp_path / "timing" / f"{family}-{k}.csv")):
            path.parent.mkdir(exist_ok=True)
            io.write_csv(df, path)
            paths.append(path)
    collected = H.sweep(HARDNESS, inputs=paths)
    assert io.format_frame(collected[0]) == io.format_frame(whole[0])
    assert io.format_frame(collected[1]) == io.format_frame(whole[1])
    assert collected[2][["family", "k"]].values.tolist() == whole[2][["family", "k"]].astype(str).values.tolist()
    assert (whole[0]["recovered_count"] == whole[0]["true_count"]).all() and len(whole[0]) == 7
    with pytest.raises(ValueError, match="not the config's"):
        H.sweep(HARDNESS, inputs=paths[2:])
    # a job's spec is its own instance: another family's sizes do not change it
    other = dict(HARDNESS, families={"random": [2, 6, 8]})
    assert H.instance_spec(other, "random", 6) == H.instance_spec(HARDNESS, "random", 6)
    with pytest.raises(ValueError, match="k must be in 1..24"):
        H.instance_sweep(dict(H.instance_spec(HARDNESS, "ones", 1), k=25))


def test_hardness_requests_cover_the_measured_peaks():
    """Measured on this machine (peak RSS, one instance): planted k = 24 4596 MiB, k = 23
    2452 MiB, random k = 22 1212 MiB; random k = 24 took 533 s wall on a busy machine; the
    requests are above them, grow with k and z_max, and ones (no oracle call) asks for little."""
    from optcomp.experiments.hardness import resources

    measured = {("planted", 24): 4596, ("planted", 23): 2452, ("random", 22): 1212}
    for (family, k), peak in measured.items():
        assert resources(family, k)["mem_mb"] >= 1.1 * peak, (family, k)
    assert resources("random", 24)["runtime"] * 60 >= 2 * 533
    ks = range(1, 25)
    mems = [resources("random", k)["mem_mb"] for k in ks]
    assert mems == sorted(mems) and resources("random", 24, z_max=10**6)["mem_mb"] > mems[-1]
    assert resources("ones", 24) == {"mem_mb": 1000, "runtime": 10}


# ----------------------------------------------------------------------- reproducibility


# A representative share of the forced rerun, in the default run: a curve family, the
# heterogeneous sweep from its seeded draw through its merge and mechanism table, and two
# hardness instances (a random and a planted one) -- each kind of job that draws, merges or
# sweeps.  The rerun of every CSV (all 40-odd jobs: about a minute and a half on 2 cores) runs
# with `-m slow`.
RERUN_SHARE = ["results/chunks/homogeneous/by_eps-eps0.1-dg-25.csv", "results/heterogeneous/eps_g.csv",
               "results/heterogeneous/mechanisms.csv", "results/chunks/hardness/random/4.csv",
               "results/chunks/hardness/planted/4.csv"]


def forced_rerun_reproduces(pipeline: Path, targets: list[str], reran: list[str]) -> None:
    """Force ``targets`` (and their inputs) to run again: every CSV and table, same bytes."""
    before = result_csvs(pipeline)
    metas = {p: io.meta_path(pipeline / p).read_bytes() for p in before if p.endswith(".csv") and "chunks" not in p}
    assert set(targets) <= before.keys()
    proc = snakemake(pipeline, *targets, "--cores", "2", "--forceall", *TEST_CONFIG)
    assert proc.returncode == 0, tail(proc)
    assert all(message in proc.stdout for message in reran), tail(proc)  # it really reran
    after = result_csvs(pipeline)
    assert after.keys() == before.keys()
    changed = [p for p in before if after[p] != before[p]]
    assert not changed, changed
    assert {p: io.meta_path(pipeline / p).read_bytes() for p in metas} == metas


def test_forced_rerun_reproduces_a_share_of_the_csvs_byte_for_byte(pipeline):
    """Last but one (it leaves figures older than their CSVs): same config, same bytes."""
    forced_rerun_reproduces(pipeline, RERUN_SHARE, ["MV Figure 2: curve family by_eps-eps0.1-dg-25",
                                                    "heterogeneous: job 000", "hardness: random k=4",
                                                    "hardness: planted k=4"])


@pytest.mark.slow
def test_forced_rerun_reproduces_every_csv_byte_for_byte(pipeline):
    """Last (it leaves figures older than their CSVs): same config, same bytes."""
    targets = [p for p in result_csvs(pipeline) if p.endswith((".csv", ".md"))]
    forced_rerun_reproduces(pipeline, targets, ["MV Figure 2: curve family", "KOV Figures 2 and 3"])


# ---------------------------------------------------------------------------- io helpers


def test_csv_format_is_exact_and_stable(tmp_path):
    import numpy as np
    import pandas as pd

    df = pd.DataFrame({"k": [1, 2, 3], "x": [0.1, 1 / 3, np.inf], "y": [np.nan, 2.0**-1074, -0.0],
                       "m": ["a", "b,c", 'd"e']})
    text = io.format_frame(df)
    assert text == 'k,x,y,m\n1,0.1,,a\n2,0.3333333333333333,5e-324,"b,c"\n3,inf,-0.0,"d""e"\n'
    io.write_csv(df, tmp_path / "t.csv", meta={"function": "f"})
    back = io.read_csv(tmp_path / "t.csv")
    assert back["x"].tolist()[:2] == [0.1, 1 / 3] and back["y"][1] == 2.0**-1074
    assert io.format_frame(back) == text
    assert json.loads((tmp_path / "t.meta.json").read_text())["rows"] == 3


def test_atomic_write_leaves_old_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "x.csv"
    target.write_text("old\n")

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(io.os, "replace", boom)
    with pytest.raises(OSError):
        io.atomic_write_text(target, "new\n")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["x.csv"]  # no temp file left behind
