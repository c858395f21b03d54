# KOV Section 4 checked exactly: (a) the noise variance each mechanism needs for k queries
# within a global budget (exact, KOV Thm 4.2/4.3 and Cor. 4.1, black box); (b) KOV Thm 4.4,
# the k-fold geometric mechanism against the optimal region; (c) black-box vs mechanism-aware
# eps_g.  Included before notebooks.smk: it registers its notebook and targets.

KOV_SECTION4_TABLES = [
    "results/kov_section4/noise.csv",
    "results/kov_section4/geometric_region.csv",
    "results/kov_section4/geometric_summary.csv",
    "results/kov_section4/black_box.csv",
]
KOV_SECTION4_FIGURES = [
    "kov_section4_noise",
    "kov_section4_geometric",
    "kov_section4_black_box",
]
NOTEBOOK_INPUTS["kov_section4"] = KOV_SECTION4_TABLES + [
    "results/kov_section4/claims.csv"
]
ALL_TARGETS.extend(
    KOV_SECTION4_TABLES
    + ["results/kov_section4/claims.csv", "results/kov_section4/claims.md"]
    + [path for name in KOV_SECTION4_FIGURES for path in figure(name)]
    + [
        "results/notebooks/kov_section4.ipynb",
        "results/notebooks/kov_section4.html",
    ]
)


rule kov_section4_noise:
    """(a) Noise variance per mechanism, route (exact, KOV, black box), k and budget."""
    output:
        "results/kov_section4/noise.csv",
    log:
        "results/logs/kov_section4_noise.log",
    conda:
        "envs/optcomp.yaml"
    # config/config.yaml (2 budgets, k to 10^4): measured in README's pipeline section
    threads: 1
    resources:
        mem_mb=1000,
        runtime=30,
    params:
        function="optcomp.experiments.kov_section4.sweep_noise",
        section="kov_section4",
        spec="optcomp.experiments.kov_section4.noise_spec",
        spec_sha256=params_hash(
            "kov_section4", "optcomp.experiments.kov_section4.noise_spec"
        ),
    message:
        "KOV Section 4 (a): noise variance for k queries, exact vs KOV vs black box"
    script:
        "scripts/sweep.py"


rule kov_section4_geometric:
    """(b) KOV Thm 4.4: the geometric mechanism's delta(eps_g) bracket vs the optimal one."""
    output:
        "results/kov_section4/geometric_region.csv",
        "results/kov_section4/geometric_summary.csv",
    log:
        "results/logs/kov_section4_geometric.log",
    conda:
        "envs/optcomp.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=20,
    params:
        function="optcomp.experiments.kov_section4.sweep_geometric",
        section="kov_section4",
        spec="optcomp.experiments.kov_section4.geometric_spec",
        spec_sha256=params_hash(
            "kov_section4", "optcomp.experiments.kov_section4.geometric_spec"
        ),
    message:
        "KOV Section 4 (b): the k-fold geometric mechanism against the optimal region (Thm 4.4)"
    script:
        "scripts/sweep.py"


rule kov_section4_black_box:
    """(c) eps_g of Laplace and geometric workloads: black box vs mechanism-aware."""
    output:
        "results/kov_section4/black_box.csv",
    log:
        "results/logs/kov_section4_black_box.log",
    conda:
        "envs/optcomp.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=20,
    params:
        function="optcomp.experiments.kov_section4.sweep_black_box",
        section="kov_section4",
        spec="optcomp.experiments.kov_section4.black_box_spec",
        spec_sha256=params_hash(
            "kov_section4", "optcomp.experiments.kov_section4.black_box_spec"
        ),
    message:
        "KOV Section 4 (c): black-box vs mechanism-aware eps_g"
    script:
        "scripts/sweep.py"


rule kov_section4_claims:
    """The claims table the README quotes: every KOV Section 4 claim beside its numbers."""
    input:
        "results/kov_section4/noise.csv",
        "results/kov_section4/geometric_summary.csv",
        "results/kov_section4/black_box.csv",
    output:
        csv="results/kov_section4/claims.csv",
        md="results/kov_section4/claims.md",
    log:
        "results/logs/kov_section4_claims.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    params:
        function="optcomp.experiments.kov_section4.claims",
        markdown="optcomp.experiments.kov_section4.claims_markdown",
    script:
        "scripts/table.py"


rule kov_section4_noise_figure:
    """(a) Noise variance for k queries: exact vs KOV vs black box, ratios to the Gaussian."""
    input:
        "results/kov_section4/noise.csv",
    output:
        pdf="figures/kov_section4_noise.pdf",
        png=report(
            "figures/kov_section4_noise.png",
            caption="report/kov_section4_noise.rst",
            category="KOV Section 4",
            labels={"figure": "Noise for k queries"},
        ),
    log:
        "results/logs/kov_section4_noise_figure.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    params:
        function="optcomp.figures.kov_section4.noise",
    script:
        "scripts/plot.py"


rule kov_section4_geometric_figure:
    """(b) KOV Thm 4.4: the geometric mechanism's bracket against the optimal delta."""
    input:
        "results/kov_section4/geometric_region.csv",
    output:
        pdf="figures/kov_section4_geometric.pdf",
        png=report(
            "figures/kov_section4_geometric.png",
            caption="report/kov_section4_geometric.rst",
            category="KOV Section 4",
            labels={"figure": "Geometric mechanism (Thm 4.4)"},
        ),
    log:
        "results/logs/kov_section4_geometric_figure.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    params:
        function="optcomp.figures.kov_section4.geometric",
    script:
        "scripts/plot.py"


rule kov_section4_black_box_figure:
    """(c) Black-box vs mechanism-aware eps_g over k."""
    input:
        "results/kov_section4/black_box.csv",
    output:
        pdf="figures/kov_section4_black_box.pdf",
        png=report(
            "figures/kov_section4_black_box.png",
            caption="report/kov_section4_black_box.rst",
            category="KOV Section 4",
            labels={"figure": "Black box vs mechanism"},
        ),
    log:
        "results/logs/kov_section4_black_box_figure.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    params:
        function="optcomp.figures.kov_section4.black_box",
    script:
        "scripts/plot.py"
