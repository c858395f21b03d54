#!/usr/bin/env python3
"""What a pipeline run through SLURM cost, job by job, from the scheduler's own accounting.

    workflow/cluster/job-report.py --log cluster.log [--log more.log] \
        --wall "the first half (74 jobs)" 1086 1138 [--wall ...] --note "load average 2-7" \
        --csv benchmarks/results/cluster_paper.csv --md benchmarks/results/cluster_paper.md

``--log``: the console output of ``snakemake --profile profiles/slurm ...`` (the executor plugin
prints "Job N has been submitted with SLURM jobid J (log: .../slurm_logs/rule_R/W/J.log)" for
every job; given several logs, a job run again in a later one counts with its last run); the script asks ``sacct`` for each of those jobs -- state, elapsed time, CPU time
(TotalCPU), peak memory (MaxRSS, sampled every 5 s on the local cluster), and what the job
requested (CPUs, memory, time limit) -- and writes one CSV row per job and a Markdown table
per rule, with wall times below it (``--wall LABEL SLURM_SECONDS LOCAL_SECONDS``: a run through
SLURM and the same targets with ``--cores 2``, measured by the caller; ``-`` for none).  The README's "Running on a cluster" section
quotes the Markdown (``python -m optcomp.pipeline update-readme``).
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import re
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path

SUBMITTED = re.compile(r"submitted with SLURM jobid (\d+) \(log: \S*/slurm_logs/rule_(\w+)/(?:(\S+)/)?\d+\.log\)")
FIELDS = ["JobID", "State", "Elapsed", "TotalCPU", "MaxRSS", "ReqMem", "Timelimit", "AllocCPUS"]
COLUMNS = ["jobid", "rule", "wildcards", "state", "elapsed_s", "cpu_s", "maxrss_mib", "cpus", "req_mem_mib",
           "timelimit_min"]


def seconds(text: str) -> float:
    """sacct durations: [D-]HH:MM:SS, MM:SS.mmm, HH:MM:SS.mmm -> seconds."""
    text = text.strip()
    if not text or text in {"UNLIMITED", "Partition_Limit"}:
        return math.nan
    days = 0
    if "-" in text:
        d, text = text.split("-", 1)
        days = int(d)
    parts = [float(p) for p in text.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0.0)
    h, m, s = parts
    return days * 86400 + h * 3600 + m * 60 + s


def mebibytes(text: str) -> float:
    """sacct sizes (123456K, 1.5G, 4000M, 0; ReqMem may end in n or c) -> MiB."""
    text = text.strip().rstrip("nc")
    if not text:
        return math.nan
    scale = {"K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0 ** 2}
    if text[-1] in scale:
        return float(text[:-1]) * scale[text[-1]]
    return float(text) / 2**20  # bytes


def submitted_jobs(logs: list[Path]) -> "OrderedDict[str, tuple[str, str]]":
    """SLURM job id -> (rule, wildcards) of every job the logs submitted; a job (rule and
    wildcards) submitted again in a later log -- a rerun -- counts once, with its last run."""
    last: OrderedDict[tuple[str, str], str] = OrderedDict()
    for path in logs:
        for jobid, rule, wildcards in SUBMITTED.findall(path.read_text(errors="replace")):
            last.pop((rule, wildcards or ""), None)
            last[(rule, wildcards or "")] = jobid
    return OrderedDict((jobid, key) for key, jobid in last.items())


def accounting(jobids: list[str]) -> dict[str, dict]:
    """sacct's record of each job: the allocation line, with MaxRSS the largest of its steps."""
    out: dict[str, dict] = {}
    for start in range(0, len(jobids), 200):
        chunk = jobids[start:start + 200]
        proc = subprocess.run(["sacct", "-n", "-P", "-j", ",".join(chunk), "-o", ",".join(FIELDS)],
                              capture_output=True, text=True, check=True)
        for line in proc.stdout.splitlines():
            if not line.strip():
                continue
            rec = dict(zip(FIELDS, line.split("|")))
            job, _, step = rec["JobID"].partition(".")
            entry = out.setdefault(job, {"maxrss_mib": 0.0})
            if not step:
                entry.update(state=rec["State"].split()[0], elapsed_s=seconds(rec["Elapsed"]),
                             cpu_s=seconds(rec["TotalCPU"]), cpus=int(rec["AllocCPUS"] or 0),
                             req_mem_mib=mebibytes(rec["ReqMem"]), timelimit_min=seconds(rec["Timelimit"]) / 60)
            if rec["MaxRSS"]:
                entry["maxrss_mib"] = max(entry["maxrss_mib"], mebibytes(rec["MaxRSS"]))
    return out


def duration(s: float) -> str:
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        s = round(s)
        return f"{s // 60} min {s % 60:02d} s"
    m = round(s / 60)
    return f"{m // 60} h {m % 60:02d} min"


def memory(mib: float) -> str:
    return f"{mib / 1024:.1f} GiB" if mib >= 1024 else f"{mib:.0f} MiB"


def span(values: list[float], fmt) -> str:
    lo, hi = min(values), max(values)
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}–{fmt(hi)}"


def markdown(rows: list[dict], walls: list[tuple[str, str, str]], note: str) -> str:
    rules: OrderedDict[str, list[dict]] = OrderedDict()
    for row in rows:
        rules.setdefault(row["rule"], []).append(row)
    lines = ["<!-- generated by workflow/cluster/job-report.py from sacct; do not edit -->",
             "| rule | SLURM jobs | CPU time (sacct TotalCPU) | longest job (wall) | peak memory per job (MaxRSS) "
             "| requested per job: CPUs / memory / time |",
             "|---|---|---|---|---|---|"]
    for rule, jobs in rules.items():
        cpu = sum(j["cpu_s"] for j in jobs)
        lines.append(f"| `{rule}` | {len(jobs)} | {duration(cpu)} | {duration(max(j['elapsed_s'] for j in jobs))} "
                     f"| {memory(max(j['maxrss_mib'] for j in jobs))} "
                     f"| {span([j['cpus'] for j in jobs], str)} / {span([j['req_mem_mib'] for j in jobs], memory)} "
                     f"/ {span([j['timelimit_min'] for j in jobs], lambda m: f'{m:.0f} min')} |")
    total = sum(j["cpu_s"] for j in rows)
    lines.append(f"| **all** | **{len(rows)}** | **{duration(total)} = {total / 3600:.2f} CPU-hours** "
                 f"| {duration(max(j['elapsed_s'] for j in rows))} | **{memory(max(j['maxrss_mib'] for j in rows))}** | |")
    failed = [j for j in rows if j["state"] != "COMPLETED"]
    lines.append("")
    lines.append(f"{len(rows)} SLURM jobs" + (f" ({len(failed)} not COMPLETED)" if failed else ", all COMPLETED")
                 + (f"; {note}" if note else "") + ". Wall times:")
    lines.append("")
    for label, cluster, local in walls:
        parts = []
        if cluster != "-":
            parts.append(f"**{duration(float(cluster))}** through the local SLURM")
        if local != "-":
            parts.append(f"**{duration(float(local))}** with `--cores 2`")
        lines.append(f"- {label}: {', '.join(parts)}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", type=Path, action="append", required=True, help="console output of the SLURM run")
    ap.add_argument("--csv", type=Path, required=True)
    ap.add_argument("--md", type=Path, required=True)
    ap.add_argument("--wall", nargs=3, action="append", default=[], metavar=("LABEL", "SLURM_SECONDS", "LOCAL_SECONDS"),
                    help="wall times of one part of the run ('-' for none)")
    ap.add_argument("--note", default="", help="conditions of the measurement (load, machine)")
    args = ap.parse_args(argv)
    jobs = submitted_jobs(args.log)
    if not jobs:
        print("no 'submitted with SLURM jobid' line in the logs", file=sys.stderr)
        return 2
    acct = accounting(list(jobs))
    rows = []
    for jobid, (rule, wildcards) in jobs.items():
        rec = acct.get(jobid)
        if rec is None or "state" not in rec:
            print(f"sacct knows nothing of job {jobid} ({rule})", file=sys.stderr)
            return 2
        rows.append({"jobid": jobid, "rule": rule, "wildcards": wildcards, **rec})
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: (f"{row[k]:.3f}" if isinstance(row[k], float) else row[k]) for k in COLUMNS})
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    args.csv.write_text(buf.getvalue())
    args.md.write_text(markdown(rows, args.wall, args.note))
    print(args.md.read_text(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
