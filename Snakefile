# optcomp: every result and figure of the project, regenerated from config/config.yaml.
#
#   snakemake --cores 8                              # everything (results/, figures/, notebooks)
#   snakemake --cores 8 --configfile config/test.yaml   # the whole DAG on tiny sweeps
#   snakemake --report report.html                   # offline report: figures, ratio table, notebooks
#
# Data flow: config -> optcomp.pipeline (the glue) -> sweeps in optcomp.experiments
#            -> results/*.csv -> figures/*.pdf|png (optcomp.figures) -> notebooks (results/notebooks/).
# Rules are thin: each calls one package function, named in its params.function.
# Timings: this machine's in results/timing/local/ (git-ignored); figures/runtime.* is drawn
# from the committed reference run in results/timing/reference/ (no rule writes it).

from snakemake.utils import min_version
from optcomp.pipeline import validate_config

min_version("9.0")


configfile: "config/config.yaml"


# the JSON schema (defaults filled in) and the cross-field checks; a problem is one line
# naming the key, before any job
validate_config(config, "config/schema.yaml")


report: "rules/report/workflow.rst"


include: "rules/common.smk"
include: "rules/homogeneous.smk"
include: "rules/regions.smk"
include: "rules/heterogeneous.smk"
include: "rules/runtime.smk"
include: "rules/budget.smk"
include: "rules/hardness.smk"
include: "rules/kov_section4.smk"
include: "rules/dpsgd.smk"
include: "rules/notebooks.smk"


rule all:
    default_target: True
    input:
        ALL_TARGETS,
