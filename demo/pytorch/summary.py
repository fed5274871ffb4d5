#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The summary table of `make demo-pytorch` (scripts/demo-pytorch-guest.sh).

Reads every run directory under DIR (N-NAME/ with meta.json, rank0.out,
rank0.err, rank1.err) and prints, per run: how it ended, the steps done,
step-time percentiles, the longest step after the failure, the final loss
and weight hash, and whether they equal those of the first run without
failure. With --json, also writes the table's data as JSON.

    python3 summary.py /tmp/mrc-demo-pytorch [--json FILE]
"""

import argparse
import json
import os
import sys


def pct(sorted_vals, q):
    """The q-th percentile (nearest rank) of a sorted list."""
    if not sorted_vals:
        return None
    i = max(0, min(len(sorted_vals) - 1, int(round(q / 100 * len(sorted_vals) + 0.5)) - 1))
    return sorted_vals[i]


def last_error(path):
    """The last line of a rank's stderr that names an error, shortened."""
    try:
        lines = [l.strip() for l in open(path, errors="replace") if l.strip()]
    except OSError:
        return ""
    for l in reversed(lines):
        if "Error" in l or "error" in l or "Timed out" in l:
            return l[:200]
    return lines[-1][:200] if lines else ""


def load_run(d):
    meta = json.load(open(os.path.join(d, "meta.json")))
    steps, start, end = [], None, None
    for line in open(os.path.join(d, "rank0.out"), errors="replace"):
        try:
            o = json.loads(line)
        except ValueError:
            continue
        if "step" in o:
            steps.append(o)
        elif o.get("event") == "start":
            start = o
        elif o.get("event") == "end":
            end = o
    ms = sorted(s["step_ms"] for s in steps)
    r = {
        "run": meta["run"], "name": meta["name"], "transport": meta["transport"],
        "failure": meta["failure"], "steps_done": len(steps),
        "steps": start["steps"] if start else None,
        "rc": [meta["rc0"], meta["rc1"]], "killed": meta["killed"],
        "step_ms_p50": pct(ms, 50), "step_ms_p90": pct(ms, 90), "step_ms_p99": pct(ms, 99),
        "step_ms_max": ms[-1] if ms else None,
        "import_s": start["import_s"] if start else None,
        "rendezvous_s": start["rendezvous_s"] if start else None,
        "train_s": end["train_s"] if end else None,
        "final_loss_hex": end["final_loss_hex"] if end else None,
        "sha256": end["sha256"] if end else None,
        "tcp_opens": meta["tcp_opens"], "mrc_rx_bytes": meta["mrc_rx_bytes"],
        "step_times": [[s["t"], s["step_ms"]] for s in steps if "t" in s],
    }
    t_fail = meta["t_fail"] if meta["failure"] else 0
    r["t_fail"] = t_fail or None
    if t_fail:
        after = [s for s in steps if s.get("t", 0) > t_fail]
        before = [s for s in steps if s.get("t", 0) <= t_fail]
        r["fail_after_step"] = len(before)
        # The step in flight at the failure and the next ones: the longest.
        r["step_ms_max_after_failure"] = max((s["step_ms"] for s in after[:20]), default=None)
        # From the failure to the first step that ended after it.
        r["first_step_after_failure_s"] = round(after[0]["t"] - t_fail, 3) if after else None
        r["end_after_failure_s"] = round(meta["t_end"] - t_fail, 3)
    if end and meta["rc0"] == 0 and meta["rc1"] == 0:
        r["outcome"] = "completed"
    elif meta["killed"]:
        r["outcome"] = (f"stalled: killed {r.get('end_after_failure_s', 0):.0f} s after the failure"
                        if t_fail else "stalled: killed")
    else:
        when = f" {r['end_after_failure_s']:.0f} s after the failure" if t_fail else ""
        r["outcome"] = f"failed{when} (exit {meta['rc0']}/{meta['rc1']})"
        r["error"] = last_error(os.path.join(d, "rank0.err")) or last_error(os.path.join(d, "rank1.err"))
    return r


def fmt(v, spec="{:.0f}"):
    return "-" if v is None else spec.format(v)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir")
    p.add_argument("--json", help="also write the data to this file")
    a = p.parse_args()
    runs = []
    for name in sorted(os.listdir(a.dir)):
        d = os.path.join(a.dir, name)
        if os.path.isfile(os.path.join(d, "meta.json")):
            runs.append(load_run(d))
    if not runs:
        sys.exit(f"no runs under {a.dir}")
    ref = next((r for r in runs if not r["failure"] and r["sha256"]), None)

    head = ["run", "plane 2", "outcome", "steps", "p50 ms", "p90 ms", "p99 ms", "max ms",
            "max after fail", "loss (hex)", "sha256", "same as run %s" % (ref["run"] if ref else "-")]
    rows = []
    for r in runs:
        same = "-"
        if ref and r["sha256"]:
            same = "yes" if (r["sha256"], r["final_loss_hex"]) == (ref["sha256"], ref["final_loss_hex"]) else "NO"
        elif ref:
            same = "no result"
        rows.append([
            f"{r['run']} {r['transport'].upper()}",
            f"down after step {r['fail_after_step']}" if r["failure"] and "fail_after_step" in r else "up",
            r["outcome"], f"{r['steps_done']}/{r['steps'] or '?'}",
            fmt(r["step_ms_p50"]), fmt(r["step_ms_p90"]), fmt(r["step_ms_p99"]), fmt(r["step_ms_max"]),
            fmt(r.get("step_ms_max_after_failure")) if r["failure"] else "",
            r["final_loss_hex"] or "-", (r["sha256"] or "-")[:16], same,
        ])
    w = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    line = lambda cells: "  ".join(str(c).ljust(n) for c, n in zip(cells, w)).rstrip()
    print(line(head))
    print(line(["-" * n for n in w]))
    for row in rows:
        print(line(row))
    print()
    for r in runs:
        extra = []
        if r["import_s"] is not None:
            extra.append(f"import torch {r['import_s']:.0f} s, rendezvous {r['rendezvous_s']:.1f} s")
        if r["train_s"] is not None:
            extra.append(f"training {r['train_s']:.1f} s")
        if r.get("first_step_after_failure_s") is not None:
            extra.append(f"first step ended {r['first_step_after_failure_s']:.2f} s after the failure")
        elif r["failure"] and "fail_after_step" in r:
            extra.append("no step ended after the failure")
        extra.append(f"TCP connections opened {r['tcp_opens'][0]}+{r['tcp_opens'][1]}, "
                     f"MRC bytes received {r['mrc_rx_bytes'][0]}+{r['mrc_rx_bytes'][1]}")
        print(f"run {r['run']} ({r['name']}): " + "; ".join(extra))
        if r.get("error"):
            print(f"  error: {r['error']}")
    if ref:
        print(f"\nrun {ref['run']}: final loss {ref['final_loss_hex']}, sha256 {ref['sha256']}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
