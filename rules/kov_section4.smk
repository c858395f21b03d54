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


rule kov_section4_noise_chunk:
    """(a) Noise variance per route, k share, for one budget and one mechanism."""
    output:
        "results/chunks/kov_section4/noise/{chunk}.csv",
    log:
        "results/logs/kov_section4_noise_chunk/{chunk}.log",
    wildcard_constraints:
        chunk=r"\d+",
    conda:
        "envs/optcomp.yaml"
    # config/paper.yaml (8 budgets x 4 mechanisms x 2 shares of k to 10^6 = 64 jobs): the
    # heaviest (staircase, eps_g = 2, delta_g = 1e-10, k to 10^6) 129 s and 1.1 GiB alone
    threads: 1
    resources:
        mem_mb=2500,
        runtime=10,
    params:
        function="optcomp.experiments.kov_section4.noise_rows",
        section="kov_section4",
        spec="optcomp.experiments.kov_section4.noise_chunk_spec",
        spec_sha256=params_hash(
            "kov_section4", "optcomp.experiments.kov_section4.noise_chunk_spec"
        ),
        chunk=True,
    message:
        "KOV Section 4 (a): job {wildcards.chunk} (a budget, a mechanism, a share of the k grid)"
    script:
        "scripts/sweep.py"


rule kov_section4_noise:
    """(a) One tidy table: rows by budget, k, mechanism and route, with the variance ratios."""
    input:
        expand(
            "results/chunks/kov_section4/noise/{chunk}.csv",
            chunk=KOV_SECTION4_JOBS["noise"],
        ),
    output:
        "results/kov_section4/noise.csv",
    log:
        "results/logs/kov_section4_noise.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    params:
        function="optcomp.experiments.kov_section4.sweep_noise",
        sort="optcomp.experiments.kov_section4.noise_table",
        section="kov_section4",
        spec="optcomp.experiments.kov_section4.noise_spec",
        spec_sha256=params_hash(
            "kov_section4", "optcomp.experiments.kov_section4.noise_spec"
        ),
    script:
        "scripts/merge.py"


rule kov_section4_geometric_chunk:
    """(b) KOV Thm 4.4 for one (eps, k): the geometric mechanism's delta(eps_g) bracket vs the
    optimal one."""
    output:
        "results/chunks/kov_section4/geometric/{chunk}.csv",
    log:
        "results/logs/kov_section4_geometric_chunk/{chunk}.log",
    wildcard_constraints:
        chunk=r"\d+",
    conda:
        "envs/optcomp.yaml"
    # config/paper.yaml (3 eps x 4 k = 12 jobs): eps 0.5 at k = 10^4 ~10 s per point (81
    # points, ~14 min); eps 0.01 at k = 10^4 74 s and 628 MiB
    threads: 1
    resources:
        mem_mb=2000,
        runtime=45,
    params:
        function="optcomp.experiments.kov_section4.geometric_rows",
        section="kov_section4",
        spec="optcomp.experiments.kov_section4.geometric_chunk_spec",
        spec_sha256=params_hash(
            "kov_section4", "optcomp.experiments.kov_section4.geometric_chunk_spec"
        ),
        chunk=True,
    message:
        "KOV Section 4 (b): job {wildcards.chunk} (one eps, one k; Thm 4.4)"
    script:
        "scripts/sweep.py"


rule kov_section4_geometric:
    """(b) The region rows of every (eps, k), concatenated in config order."""
    input:
        expand(
            "results/chunks/kov_section4/geometric/{chunk}.csv",
            chunk=KOV_SECTION4_JOBS["geometric"],
        ),
    output:
        "results/kov_section4/geometric_region.csv",
    log:
        "results/logs/kov_section4_geometric.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    params:
        function="optcomp.experiments.kov_section4.sweep_geometric",
        section="kov_section4",
        spec="optcomp.experiments.kov_section4.geometric_spec",
        spec_sha256=params_hash(
            "kov_section4", "optcomp.experiments.kov_section4.geometric_spec"
        ),
    script:
        "scripts/merge.py"


rule kov_section4_geometric_summary:
    """(b) Per (eps, k): points, containment and the largest deviations from the optimum."""
    input:
        "results/kov_section4/geometric_region.csv",
    output:
        csv="results/kov_section4/geometric_summary.csv",
    log:
        "results/logs/kov_section4_geometric_summary.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    params:
        function="optcomp.experiments.kov_section4.geometric_summary",
    script:
        "scripts/table.py"


rule kov_section4_black_box_chunk:
    """(c) eps_g of one workload at a share of the k grid: black box vs mechanism-aware."""
    output:
        "results/chunks/kov_section4/black_box/{chunk}.csv",
    log:
        "results/logs/kov_section4_black_box_chunk/{chunk}.log",
    wildcard_constraints:
        chunk=r"\d+",
    conda:
        "envs/optcomp.yaml"
    # config/paper.yaml (4 workloads x 2 shares = 8 jobs): Laplace at k = 10^6 28 s and 2.0 GiB
    threads: 1
    resources:
        mem_mb=4000,
        runtime=10,
    params:
        function="optcomp.experiments.kov_section4.black_box_rows",
        section="kov_section4",
        spec="optcomp.experiments.kov_section4.black_box_chunk_spec",
        spec_sha256=params_hash(
            "kov_section4", "optcomp.experiments.kov_section4.black_box_chunk_spec"
        ),
        chunk=True,
    message:
        "KOV Section 4 (c): job {wildcards.chunk} (a workload, a share of the k grid)"
    script:
        "scripts/sweep.py"


rule kov_section4_black_box:
    """(c) One tidy table: rows by workload (config order), then k."""
    input:
        expand(
            "results/chunks/kov_section4/black_box/{chunk}.csv",
            chunk=KOV_SECTION4_JOBS["black_box"],
        ),
    output:
        "results/kov_section4/black_box.csv",
    log:
        "results/logs/kov_section4_black_box.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    params:
        function="optcomp.experiments.kov_section4.sweep_black_box",
        sort="optcomp.experiments.kov_section4.black_box_table",
        section="kov_section4",
        spec="optcomp.experiments.kov_section4.black_box_spec",
        spec_sha256=params_hash(
            "kov_section4", "optcomp.experiments.kov_section4.black_box_spec"
        ),
    script:
        "scripts/merge.py"


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
