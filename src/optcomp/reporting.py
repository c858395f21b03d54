"""What the repository's front page quotes of the generated files, kept in step with them.

* :data:`README_QUOTES` -- the README blocks (``<!-- name:start --> ... <!-- name:end -->``)
  and the generated Markdown file each quotes; :func:`quoted_text` -- what of a file a block
  holds;
* :func:`update_readme` -- copy every generated file into its block and rerun the README's
  ``console`` sessions (``$ optcomp ...`` lines), so that no number or output in the README
  is typed by hand (``python -m optcomp.pipeline update-readme``; the tests compare).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["README_QUOTES", "quoted_text", "update_readme"]


# README blocks that quote generated files: <!-- name:start --> ... <!-- name:end -->
README_QUOTES = {
    "ratios": "results/homogeneous/ratios.md",
    "timing-summary": "results/timing/reference/summary.md",
    "command-times": "results/timing/reference/commands.md",
    "bench-scale": "benchmarks/results/bench_scale.md",
    "bench-exact": "benchmarks/results/bench_exact.md",
    "bench-approx": "benchmarks/results/bench_approx.md",
    "bench-mechanisms": "benchmarks/results/bench_mechanisms.md",
    # config/paper.yaml through the local SLURM: sacct's CPU time and peak memory per rule
    # (workflow/cluster/job-report.py)
    "cluster-paper": "benchmarks/results/cluster_paper.md",
    "kov-section4-claims": "results/kov_section4/claims.md",
}


def quoted_text(generated: str) -> str:
    """What the README quotes of a generated Markdown file: the file without its generator
    comment and outer blank lines (inner blank lines stay: they end tables and paragraphs)."""
    return "\n".join(line for line in generated.splitlines() if not line.startswith("<!--")).strip()


def update_readme(readme: str | os.PathLike = "README.md", root: str | os.PathLike = ".") -> list[str]:
    """Copy every generated file of :data:`README_QUOTES` into its README block (the
    numbers the README quotes are never typed by hand); returns the blocks changed."""
    import re

    path = Path(readme)
    text = path.read_text()
    changed = []
    for name, source in README_QUOTES.items():
        generated = Path(root, source)
        if not generated.exists():
            continue
        new = f"<!-- {name}:start -->\n" + quoted_text(generated.read_text()) + f"\n<!-- {name}:end -->"
        pattern = re.compile(rf"<!-- {name}:start -->.*?<!-- {name}:end -->", re.S)
        if pattern.search(text) and pattern.search(text).group(0) != new:
            text = pattern.sub(lambda _m: new, text)
            changed.append(name)
    refreshed = _refresh_console(text, Path(root))
    if refreshed != text:
        text = refreshed
        changed.append("console sessions")
    path.write_text(text)
    return changed


def _refresh_console(text: str, root: Path) -> str:
    """Rerun every ``$ optcomp ...`` line of the README's ``console`` blocks (as
    ``python -m optcomp`` from ``root/src``) and put its output (stdout and stderr) below it."""
    import re
    import subprocess
    import tempfile

    env = dict(os.environ, PYTHONPATH=str((root / "src").resolve()))

    def run_block(match) -> str:
        out = []
        with tempfile.TemporaryDirectory() as tmp:
            for line in match.group(1).splitlines(keepends=True):
                if not line.startswith("$ "):
                    continue
                command = line[2:].rstrip("\n")
                shell = re.sub(r"(^|\| )optcomp ", rf"\g<1>{sys.executable} -m optcomp ", command)
                r = subprocess.run(shell, shell=True, capture_output=True, text=True, env=env, cwd=tmp, timeout=600)
                out.append(line + r.stdout + r.stderr)
        return "```console\n" + "".join(out) + "```"

    return re.sub(r"```console\n(.*?)```", run_block, text, flags=re.S)
