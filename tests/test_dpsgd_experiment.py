"""The DP-SGD experiment (optcomp.experiments.dpsgd, optcomp.figures.dpsgd, config section
``dpsgd``): workloads resolved as their publications state them, every accountant placed
against optcomp's bracket, the published values and claims, the figure, the config checks.

The one-step rows are checked against ``tests/reference_dpsgd.py`` (from the definitions);
the peers (dp_accounting, prv-accountant: the "compare" extra) must be installed.
"""

from __future__ import annotations

import math

import mpmath as mp
import pandas as pd
import pytest

pytest.importorskip("dp_accounting")
pytest.importorskip("prv_accountant")

from optcomp.experiments import dpsgd  # noqa: E402
from optcomp.experiments import io  # noqa: E402
from reference_dpsgd import DPS, gauss, ref_eps_poisson  # noqa: E402

CFG = {"delta_g": 1e-5, "rtol": 1e-3, "points": 2, "first_step": 1, "pld_interval": 1e-3, "prv_eps_error": 0.1,
       "workloads": [{"name": "one", "sample_rate": 0.2, "noise_multiplier": 1.0, "steps": 3,
                      "published_epsilon": 2.0, "published_by": "RDP"},
                     {"name": "two.b", "label": "batches", "batch_size": 20, "dataset_size": 100,
                      "noise_multiplier": 2.0, "steps": 2, "published_epsilon": 1.0, "published_by": "RDP"}]}


@pytest.fixture(scope="module")
def tables():
    return dpsgd.sweep(CFG)


def test_workloads_resolve_the_published_parameters():
    tf = {"name": "tf", "batch_size": 256, "dataset_size": 60000, "noise_multiplier": 1.1, "steps": 14063}
    (w,) = dpsgd.workloads({"workloads": [tf]})
    assert w["sample_rate"] == 256 / 60000 and w["steps"] == 14063 and w["label"] == "tf"
    assert math.isnan(w["published_epsilon"])
    with pytest.raises(ValueError, match="sample_rate or batch_size"):
        dpsgd.workloads({"workloads": [dict(tf, sample_rate=0.1)]})
    with pytest.raises(ValueError, match="duplicate"):
        dpsgd.workloads({"workloads": [tf, tf]})
    with pytest.raises(ValueError, match="no workload named"):
        dpsgd.workload_spec(CFG, "missing")


def test_step_grid_ends_at_the_published_length():
    grid = dpsgd.step_grid(14063, 6, 10)
    assert grid[0] == 10 and grid[-1] == 14063 and len(grid) == 6
    ratio = (14063 / 10) ** (1 / 5)  # geometric spacing, rounded to integers
    assert all(abs(b / a - ratio) < 0.02 * ratio for a, b in zip(grid, grid[1:]))
    assert dpsgd.step_grid(5, 6, 10) == [5] and dpsgd.step_grid(100, 1, 10) == [100]


def test_every_accountant_at_every_step_placed_against_the_bracket(tables):
    table, pub = tables
    assert list(table.columns) == dpsgd.COLUMNS and list(pub.columns) == dpsgd.PUBLISHED_COLUMNS
    assert list(table["workload"].unique()) == ["one", "two.b"]
    for (name, steps), g in table.groupby(["workload", "steps"]):
        assert list(g["accountant"]) == list(dpsgd.ACCOUNTANTS)
        ours = g[g["accountant"] == "optcomp"].iloc[0]
        assert ours["lower"] <= ours["upper"] == ours["epsilon"]
        assert ours["upper"] - ours["lower"] <= ours["tol"]
        for _, row in g.iterrows():
            expected = ("inside" if ours["lower"] <= row["epsilon"] <= ours["upper"] else
                        "above" if row["epsilon"] > ours["upper"] else "below")
            assert row["position"] == expected
            assert row["excess"] == pytest.approx(row["epsilon"] / ours["upper"] - 1, rel=1e-12, abs=1e-15)
        prv = g[g["accountant"] == "prv"].iloc[0]
        assert prv["lower"] <= prv["estimate"] <= prv["upper"] == prv["epsilon"]
        rdp = g[g["accountant"] == "rdp"].iloc[0]
        assert rdp["epsilon"] >= ours["lower"]  # RDP is an upper bound of the optimum


def test_one_step_bracket_holds_the_reference(tables):
    table, _ = tables
    row = table[(table["workload"] == "one") & (table["steps"] == 1) & (table["accountant"] == "optcomp")].iloc[0]
    with mp.workdps(DPS):
        ref = ref_eps_poisson(gauss(1.0), 0.2, 1e-5)
    assert row["lower"] <= ref <= row["upper"]


def test_published_values_and_claims(tables):
    table, pub = tables
    one = pub[pub["workload"] == "one"].iloc[0]
    last = table[(table["workload"] == "one") & (table["steps"] == 3)].set_index("accountant")
    assert one["optcomp_upper"] == last.loc["optcomp", "upper"]
    assert one["overstatement"] == 2.0 / one["optcomp_upper"] - 1
    assert pub[pub["workload"] == "two.b"].iloc[0]["sample_rate"] == 0.2
    claims = dpsgd.claims(table, pub)
    assert list(claims.columns) == dpsgd.CLAIMS_COLUMNS and len(claims) == 2 + 3
    md = dpsgd.claims_markdown(claims)
    assert md.startswith("<!-- generated") and md.count("\n| ") == len(claims) + 1
    assert "overstates the optimum by at least" in md


def test_jobs_collect_into_the_same_tables(tables, tmp_path):
    table, pub = tables
    paths = []
    for name in reversed(dpsgd.workload_names(CFG)):  # any order
        path = tmp_path / f"{name}.csv"
        io.write_csv(table[table["workload"] == name], path)
        paths.append(path)
    collected, pub2 = dpsgd.sweep(CFG, inputs=paths)
    pd.testing.assert_frame_equal(collected, table.reset_index(drop=True))
    pd.testing.assert_frame_equal(pub2, pub)
    with pytest.raises(ValueError, match="expected the workloads"):
        dpsgd.sweep(CFG, inputs=paths[:1])


def test_figure_has_a_column_per_workload(tables, tmp_path):
    import matplotlib.pyplot as plt

    from optcomp.figures.dpsgd import eps_steps

    table, pub = tables
    io.write_csv(table, tmp_path / "eps.csv")
    io.write_csv(pub, tmp_path / "pub.csv")
    fig = eps_steps(tmp_path / "eps.csv", tmp_path / "pub.csv")
    assert len(fig.axes) == 4
    assert [ax.get_title(loc="left").split("\n")[0] for ax in fig.axes[:2]] == ["(a) one", "(b) batches"]
    plt.close(fig)


@pytest.mark.parametrize("workloads, message", [
    ([{"name": "a", "noise_multiplier": 1.0, "steps": 5}], "give sample_rate"),
    ([{"name": "a", "noise_multiplier": 1.0, "steps": 5, "sample_rate": 0.1, "batch_size": 2,
       "dataset_size": 10}], "give sample_rate"),
    ([{"name": "a", "noise_multiplier": 1.0, "steps": 5, "batch_size": 2}], "go together"),
    ([{"name": "a", "noise_multiplier": 1.0, "steps": 5, "batch_size": 20, "dataset_size": 10}], "exceeds"),
    ([{"name": "a", "noise_multiplier": 1.0, "steps": 5, "sample_rate": 0.1}] * 2, "names two workloads"),
])
def test_config_cross_field_checks_name_the_workload(workloads, message):
    import yaml

    from optcomp.pipeline import config_problem

    config = yaml.safe_load(open("config/config.yaml"))
    config["dpsgd"]["workloads"] = workloads
    problem = config_problem(config)
    assert problem is not None and "dpsgd.workloads[" in problem and message in problem


@pytest.mark.parametrize("q, sigma, steps, published", [
    (256 / 60000, 1.1, 14063, 3.01), (0.004, 1.1, 15000, 2.91), (0.004, 1.3, 3750, 1.16), (0.004, 0.7, 11250, 6.86)])
def test_the_classic_rdp_conversion_reproduces_the_published_values(q, sigma, steps, published):
    """The TF Privacy and Opacus MNIST numbers, as printed by their READMEs, are the RDP bound
    at orders 1.1..63 converted by Mironov's Prop. 3 (rounded to two decimals)."""
    from optcomp.experiments import peers

    assert round(peers.rdp_classic_dpsgd_epsilon([(sigma, q, steps)], delta_g=1e-5), 2) == published
