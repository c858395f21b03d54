"""The experiments behind every figure: sweep functions that return tidy DataFrames.

One module per figure, each a set of pure functions of a config section:

* :mod:`.homogeneous` — MV Figure 2 (eps_g vs k, Summing/DRV/KOV/Optimal) and the ratio table;
* :mod:`.heterogeneous` — the poster's heterogeneous comparison (approximation vs KOV bound);
* :mod:`.regions` — KOV Figures 2 and 3 (privacy regions);
* :mod:`.budget` — Laplace noise per query under a global budget (:mod:`optcomp.calibrate`);
* :mod:`.runtime` — wall-clock scaling of the exact and approximate algorithms (timing CSVs);

plus :mod:`.io` (atomic, byte-reproducible CSV writing with provenance; progress lines).
The Snakemake glue that calls these sweeps, the figures and the notebooks lives above both,
in :mod:`optcomp.pipeline`.  Nothing here is imported by the library itself.
"""
