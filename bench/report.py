#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Report of a benchmark run: tables in BENCHMARKS.md and SVG plots.

Reads the results.json that bench/collect.py assembled, copies it to
bench/results.json, writes the tables between the markers of
BENCHMARKS.md and draws the plots into bench/plots/ (matplotlib, Agg
backend; Debian's python3-matplotlib).

Every figure is the median over the successful repetitions of a scenario;
each transport's median is also given as a ratio to the best peer of MRC
(the best of MPTCP, SCTP and TCP) on the same row. Failed runs are never
dropped: they count in the "k/n" of their cell and are listed with their
errors.

Usage:
    report.py [RESULTS] [--markdown FILE] [--copy FILE] [--plots DIR] [--no-plots]
    report.py --self-test
"""

import argparse
import importlib.util
import json
import math
import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import collect  # noqa: E402  (bench/collect.py, next to this file)

BEGIN = "<!-- bench:results:begin -->"
END = "<!-- bench:results:end -->"

TRANSPORTS = ["mrc", "mptcp_connect", "mptcp", "sctp", "tcp"]
PEERS = ("mptcp_connect", "mptcp", "sctp", "tcp")
LABEL = {
    "mrc": "MRC",
    "mptcp_connect": "MPTCP (mptcp_connect)",
    "mptcp": "MPTCP",
    "sctp": "SCTP",
    "tcp": "TCP",
}
COLOR = {
    "mrc": "#d62728",
    "mptcp_connect": "#9467bd",
    "mptcp": "#1f77b4",
    "sctp": "#2ca02c",
    "tcp": "#7f7f7f",
}
# Window of the recovery criterion after a failure, and where the
# "goodput after the failure" average starts.
RECOVERY_WINDOW_S = 0.1
RECOVERY_SHARE = 0.9
POST_FAILURE_SKIP_S = 0.5
# The failover gap is the longest gap between two messages that overlaps the
# failure or the second after it; gaps elsewhere in the run are the host's
# (an emulated CPU that stalls), not the failover's. mrc-perf keeps the gaps
# of at least GAP_KEPT_MS with their place in the timeline.
FAILOVER_WINDOW_S = 1.0
GAP_KEPT_MS = 5.0
# Bytes in a megabyte of the CPU time per megabyte delivered (decimal, as
# the Mbit/s of the goodput).
MB = 1e6


# --- Arithmetic -------------------------------------------------------------------


def median(xs):
    """Median of the numbers in xs (None and missing values excluded); an
    infinite value stands for "never" and sorts last."""
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def jain(xs):
    """Jain's fairness index (sum x)^2 / (n * sum x^2): 1 when all shares
    are equal, 1/n when one connection takes everything."""
    xs = list(xs)
    q = sum(x * x for x in xs)
    if not xs or q == 0:
        return None
    return sum(xs) ** 2 / (len(xs) * q)


def ratio(v, ref):
    if v is None or ref is None or ref == 0 or math.isinf(v) or math.isinf(ref):
        return None
    return v / ref


def best(values, higher_better):
    """(transport, value) of the best peer, or (None, None)."""
    cands = [(t, v) for t, v in values.items() if t in PEERS and v is not None]
    if not cands:
        return None, None
    key = (lambda tv: tv[1]) if higher_better else (lambda tv: -tv[1])
    return max(cands, key=key)


def mbps(samples, dt_s):
    return [b * 8 / dt_s / 1e6 for b in samples]


def longest_stall_end(samples, first, last):
    """Index just past the longest run of empty intervals in samples[first:last]
    (the earliest of equally long runs); first when no interval is empty."""
    best_len, best_end, run = 0, first, 0
    for i in range(first, last):
        run = run + 1 if samples[i] == 0 else 0
        if run > best_len:
            best_len, best_end = run, i + 1
    return best_end


def recovery_ms(samples, dt_s, kill_s, target_mbps, end_s=None, window_s=RECOVERY_WINDOW_S):
    """Time from the failure to the start of the first window of window_s
    (after the failure's longest stall, ending before end_s) whose mean
    goodput is at least target_mbps; None when no window qualifies.

    The search starts after the longest run of empty intervals that follows
    the failure: data already on its way when the plane went down can keep
    the goodput up for a while before the stall, and that is not recovery."""
    if kill_s is None or target_mbps is None or dt_s <= 0:
        return None
    rate = mbps(samples, dt_s)
    w = max(1, int(round(window_s / dt_s)))
    last = len(rate) if end_s is None else min(len(rate), int(round(end_s / dt_s)))
    first = max(0, int(math.floor(kill_s / dt_s + 1e-9)))
    first = longest_stall_end(samples, first, last)
    for i in range(first, last - w + 1):
        if sum(rate[i:i + w]) / w >= target_mbps - 1e-9:
            return max(0.0, (i * dt_s - kill_s) * 1000)
    return None


def mean_rate(samples, dt_s, start_s, end_s):
    rate = mbps(samples, dt_s)
    a = max(0, int(math.ceil(start_s / dt_s - 1e-9)))
    b = min(len(rate), int(round(end_s / dt_s)))
    if b <= a:
        return None
    return sum(rate[a:b]) / (b - a)


# --- Per-run metrics -----------------------------------------------------------------


def client(run):
    return run.get("client") or {}


def servers(run):
    return run.get("server") or []


def run_goodput(run):
    if run.get("transport") == "mptcp_connect":
        t = run_transfer_s(run)
        b = (run.get("tool") or {}).get("bytes")
        return b * 8 / t / 1e6 if t and b else None
    return client(run).get("goodput_mbps")


def run_transfer_s(run):
    if run.get("transport") == "mptcp_connect":
        tool = run.get("tool") or {}
        if tool.get("runtime_ms") is not None:
            return tool["runtime_ms"] / 1000
        return tool.get("wall_s")
    return client(run).get("elapsed_s")


def run_bytes_delivered(run):
    """Bytes the receiver verified: what mrc-perf's server received, summed
    over the connections (checked against the client's counts and digests
    by collect.verify), or mptcp_connect's transfer when cmp found it
    intact; None when unknown."""
    b = (run.get("verify") or {}).get("bytes_received")
    return b if isinstance(b, (int, float)) and not isinstance(b, bool) else None


def run_cpu_per_mb(run):
    """Busy CPU time of the whole VM (user, nice, system, irq, softirq of all
    CPUs; collect.cpu_usage) from the client's launch to its exit, in ms per
    megabyte delivered. Both ends run in the VM, so it is the cost of both.
    None without the CPU record or without bytes."""
    busy = (run.get("cpu") or {}).get("busy_s")
    b = run_bytes_delivered(run)
    if busy is None or not b:
        return None
    return busy * 1000 / (b / MB)


def run_busy_pct(run):
    """Busy share of the VM's CPUs over the same time, in %."""
    share = (run.get("cpu") or {}).get("busy_share")
    return share * 100 if share is not None else None


def run_rtt(run, p):
    r = client(run).get("rtt_us") or {}
    return r.get(p)


def run_conn_goodputs(run):
    """Per-connection goodput at the receiver over the client's run time:
    the bytes the server received for it, divided by the client's elapsed
    time, so that a connection that started late and sent for a short
    while is not credited with a high rate over its own short time (its
    server-side goodput_mbps is used when bytes or that time are missing).
    A connection the server never reported counts as 0."""
    n = (run.get("meta") or {}).get("conns") or client(run).get("parallel") or 0
    el = client(run).get("elapsed_s")
    by = {}
    for s in servers(run):
        if s.get("conn") is None:
            continue
        if el and isinstance(s.get("bytes"), (int, float)):
            by[s["conn"]] = s["bytes"] * 8 / el / 1e6
        else:
            by[s["conn"]] = s.get("goodput_mbps") or 0.0
    return [by.get(i, 0.0) for i in range(n)]


def run_late_starts(run, late_us=1_000_000):
    """Client connections whose hello went out more than late_us after the
    common start (mrc-perf's hello_us); None when mrc-perf did not report it."""
    hs = [c.get("hello_us") for c in client(run).get("conns") or []]
    if not hs or any(h is None for h in hs):
        return None
    return sum(1 for h in hs if h > late_us)


def run_jain(run):
    return jain(run_conn_goodputs(run))


def gap_near(gaps_us, kill_s, window_s=FAILOVER_WINDOW_S):
    """Longest gap, in ms, of a server's gaps_us ([start, length] in µs) that
    overlaps [kill_s, kill_s + window_s]; GAP_KEPT_MS (an upper bound) when
    none of the kept ones does; None without the list or the kill time."""
    if gaps_us is None or kill_s is None:
        return None
    lo, hi = kill_s * 1e6, (kill_s + window_s) * 1e6
    near = [g[1] / 1000 for g in gaps_us if g[0] < hi and g[0] + g[1] > lo]
    return max(near) if near else GAP_KEPT_MS


def gap_before(gaps_us, kill_s, window_s=FAILOVER_WINDOW_S):
    """Longest gap, in ms, of a server's gaps_us that lies within the window_s
    before kill_s: the stalls of the host and the transport with every plane
    up, the level the gap at the failure is to be read against. GAP_KEPT_MS
    (an upper bound) when none of the kept ones does; None without the list,
    the kill time or a whole window before it."""
    if gaps_us is None or kill_s is None or kill_s < window_s:
        return None
    lo, hi = (kill_s - window_s) * 1e6, kill_s * 1e6
    before = [g[1] / 1000 for g in gaps_us if g[0] >= lo and g[0] + g[1] <= hi]
    return max(before) if before else GAP_KEPT_MS


def failover_metrics(run, scenario):
    """Longest delivery gap, recovery and goodput after the failure of one
    run, from the receiver's timeline."""
    cfg = scenario.get("config") or {}
    rates = cfg.get("rates_mbit") or []
    kp = cfg.get("kill_plane")
    remaining = sum(rates) - (rates[kp - 1] if kp and kp <= len(rates) else 0) if rates else None
    kill = (run.get("timing") or {}).get("kill_at_s")
    end = cfg.get("duration_s")
    out = {"kill_at_s": kill, "remaining_mbit": remaining}
    srv = servers(run)
    s = srv[0] if srv else {}
    dt = (s.get("interval_ms") or cfg.get("interval_ms") or 10) / 1000
    samples = s.get("samples") or []
    out["max_gap_ms"] = s.get("max_gap_us") / 1000 if s.get("max_gap_us") is not None else None
    out["failover_gap_ms"] = gap_near(s.get("gaps_us"), kill)
    out["baseline_gap_ms"] = gap_before(s.get("gaps_us"), kill)
    rec = recovery_ms(samples, dt, kill, RECOVERY_SHARE * remaining if remaining else None, end)
    out["recovery_ms"] = rec if rec is not None else (math.inf if run.get("ok") else None)
    if kill is not None and end is not None:
        out["post_failure_mbps"] = mean_rate(samples, dt, kill + POST_FAILURE_SKIP_S, end)
    else:
        out["post_failure_mbps"] = None
    out["bytes_lost"] = (run.get("verify") or {}).get("bytes_lost")
    return out


def train(run):
    return run.get("training") or {}


def train_step_ms(run):
    return [s[1] for s in train(run).get("steps") or [] if s[1] is not None]


def run_step_pct(run, q):
    """The q-th percentile (nearest rank) of a training run's step times,
    in ms; None without steps."""
    ms = sorted(train_step_ms(run))
    if not ms:
        return None
    return ms[max(0, min(len(ms) - 1, math.ceil(q / 100 * len(ms)) - 1))]


# Steps after the failure that "at the failure" covers: the one in flight
# when the plane went down and those that follow it.
TRAIN_FAIL_STEPS = 10


def run_fail_step_max(run):
    """The longest of the first TRAIN_FAIL_STEPS steps that ended after the
    plane went down, in ms (the step in flight at the failure is the first
    of them); None when no step ended after it."""
    t = train(run)
    k = t.get("t_kill")
    after = [s[1] for s in t.get("steps") or [] if k is not None and s[0] is not None and s[0] > k]
    return max(after[:TRAIN_FAIL_STEPS]) if after else None


def run_fail_next_s(run):
    """Seconds from the failure to the end of the first step after it."""
    t = train(run)
    k = t.get("t_kill")
    after = [s[0] for s in t.get("steps") or [] if k is not None and s[0] is not None and s[0] > k]
    return after[0] - k if after else None


def run_train_s(run):
    return (train(run).get("end") or {}).get("train_s")


# --- Metrics per scenario kind ------------------------------------------------------

# (key, label, unit, higher_better, per-run function(run, scenario))
CPU_PER_MB = ("cpu_per_mb", "VM CPU per MB delivered", "ms", False, lambda r, s: run_cpu_per_mb(r))
METRICS = {
    "throughput": [
        ("goodput", "goodput", "Mbit/s", True, lambda r, s: run_goodput(r)),
        CPU_PER_MB,
    ],
    "failover": [
        ("failover_gap", "longest delivery gap at the failure", "ms", False,
         lambda r, s: failover_metrics(r, s)["failover_gap_ms"]),
        ("baseline_gap", "longest delivery gap in the second before the failure", "ms", False,
         lambda r, s: failover_metrics(r, s)["baseline_gap_ms"]),
        ("max_gap", "longest delivery gap", "ms", False, lambda r, s: failover_metrics(r, s)["max_gap_ms"]),
        ("recovery", "back to 90 % of remaining capacity", "ms", False,
         lambda r, s: failover_metrics(r, s)["recovery_ms"]),
        ("post", "goodput after the failure", "Mbit/s", True,
         lambda r, s: failover_metrics(r, s)["post_failure_mbps"]),
    ],
    "latency": [
        ("p50", "round trip p50", "µs", False, lambda r, s: run_rtt(r, "p50")),
        ("p99", "round trip p99", "µs", False, lambda r, s: run_rtt(r, "p99")),
    ],
    "fairness": [
        ("jain", "Jain index", "", True, lambda r, s: run_jain(r)),
        ("goodput", "aggregate goodput", "Mbit/s", True, lambda r, s: run_goodput(r)),
        ("late", "connections whose hello left > 1 s after the start", "", False,
         lambda r, s: run_late_starts(r)),
        CPU_PER_MB,
    ],
    "simult": [
        ("time", "transfer time", "s", False, lambda r, s: run_transfer_s(r)),
    ],
    "training": [
        ("step_p50", "training step p50", "ms", False, lambda r, s: run_step_pct(r, 50)),
        ("step_fail", "longest step at the failure", "ms", False, lambda r, s: run_fail_step_max(r)),
        ("train_s", "training time", "s", False, lambda r, s: run_train_s(r)),
    ],
}


def summarize(scenario):
    """Rows of one scenario: per metric, per transport: median over the
    successful runs, their count, the total count and the spread."""
    rows = []
    for key, label, unit, hb, fn in METRICS.get(scenario.get("kind"), []):
        cells = {}
        for t, tr in (scenario.get("transports") or {}).items():
            runs = tr.get("runs") or []
            vals = [fn(r, scenario) for r in runs if r.get("ok")]
            vals = [v for v in vals if v is not None]
            finite = [v for v in vals if not math.isinf(v)]
            cells[t] = {
                "median": median(vals),
                "ok": sum(1 for r in runs if r.get("ok")),
                "n": len(runs),
                "min": min(finite) if finite else None,
                "max": max(finite) if finite else None,
                "values": vals,
            }
        bt, bv = best({t: c["median"] for t, c in cells.items()}, hb)
        for c in cells.values():
            c["ratio"] = ratio(c["median"], bv)
        rows.append({"key": key, "label": label, "unit": unit, "higher_better": hb,
                     "cells": cells, "best_peer": bt, "best_value": bv})
    return rows


# --- Markdown -------------------------------------------------------------------------


def fmt_num(v):
    if v is None:
        return "–"
    if math.isinf(v):
        return "not reached"
    a = abs(v)
    if a >= 100:
        return "%.0f" % v
    if a >= 10:
        return "%.1f" % v
    if a >= 1:
        return "%.2f" % v
    return "%.3f" % v


def fmt_cell(c, is_best):
    if c is None or c["n"] == 0:
        return "–"
    if c["ok"] == 0:
        return "failed (0/%d)" % c["n"]
    s = fmt_num(c["median"])
    if is_best:
        s = "**%s**" % s
    if c.get("ratio") is not None:
        s += " (%.2f×)" % c["ratio"]
    if c["ok"] < c["n"]:
        s += " %d/%d" % (c["ok"], c["n"])
    return s


def present(results):
    seen = set()
    for sc in results.get("scenarios") or []:
        seen.update((sc.get("transports") or {}).keys())
    return [t for t in TRANSPORTS if t in seen] + sorted(seen - set(TRANSPORTS))


def scenario_label(sc):
    cfg = sc.get("config") or {}
    title = sc.get("title") or sc.get("id")
    rates = cfg.get("rates_mbit")
    if sc.get("kind") in ("throughput", "fairness", "failover") and rates:
        title += " (%s Mbit/s)" % "/".join(str(r) for r in rates)
    return title


def summary_table(results):
    # Columns of the transports that ran a scenario of this table
    # (mptcp_connect runs in the simult_flows scenarios only).
    used = set()
    for sc in results.get("scenarios") or []:
        if sc.get("kind") != "simult":
            used.update((sc.get("transports") or {}).keys())
    cols = [t for t in present(results) if t in used]
    head = "| Scenario | Metric | " + " | ".join(LABEL.get(t, t) for t in cols) + " | MRC ÷ best peer |"
    lines = [head, "|" + "---|" * (len(cols) + 3)]
    for sc in results.get("scenarios") or []:
        if sc.get("kind") == "simult":
            continue
        rows = summarize(sc)
        if not rows:
            continue
        for row in rows:
            arrow = "↑" if row["higher_better"] else "↓"
            metric = "%s%s %s" % (row["label"], ", " + row["unit"] if row["unit"] else "", arrow)
            cells = [fmt_cell(row["cells"].get(t), t == row["best_peer"]) for t in cols]
            m = row["cells"].get("mrc")
            r = m.get("ratio") if m else None
            mrc_vs = ("%.2f× %s" % (r, LABEL.get(row["best_peer"], ""))) if r is not None else "–"
            lines.append("| %s | %s | %s | %s |" % (scenario_label(sc), metric, " | ".join(cells), mrc_vs))
    return lines if len(lines) > 2 else []


def cpu_table(results):
    """Median busy share of the VM's CPUs over the successful runs, per
    scenario and transport (path-scaling has its own table)."""
    scs = [sc for sc in results.get("scenarios") or [] if sc.get("kind") != "scaling"]
    cols = [t for t in present(results) if any(t in (sc.get("transports") or {}) for sc in scs)]
    rows = []
    for sc in scs:
        cells, seen = [], False
        for t in cols:
            runs = ((sc.get("transports") or {}).get(t) or {}).get("runs") or []
            okr = [r for r in runs if r.get("ok")]
            v = median([run_busy_pct(r) for r in okr])
            if not runs:
                cells.append("–")
            elif not okr:
                cells.append("failed (0/%d)" % len(runs))
            elif v is None:
                cells.append("?")
            else:
                seen = True
                cells.append("%.0f %%%s" % (v, "" if len(okr) == len(runs) else " %d/%d" % (len(okr), len(runs))))
        if seen:
            rows.append("| %s | %s |" % (sc.get("id"), " | ".join(cells)))
    if not rows:
        return []
    return ["| Scenario | " + " | ".join(LABEL.get(t, t) for t in cols) + " |",
            "|---|" + "---|" * len(cols)] + rows


def failover_table(results):
    lines = []
    for sc in results.get("scenarios") or []:
        if sc.get("kind") != "failover":
            continue
        cfg = sc.get("config") or {}
        lines.append("Plane %s taken down (`%s`) %s s after the client started; capacity before: %s Mbit/s, after: %s Mbit/s."
                     % (cfg.get("kill_plane"), cfg.get("kill_command"), cfg.get("kill_at_s"),
                        sum(cfg.get("rates_mbit") or []),
                        failover_metrics({}, sc)["remaining_mbit"]))
        lines.append("")
        lines.append("| Transport | longest delivery gap at the failure, ms "
                     "| in the second before it, ms | longest delivery gap of the run, ms "
                     "| back to 90 % of remaining capacity, ms | goodput after the failure, Mbit/s | bytes lost | runs ok |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for t, tr in (sc.get("transports") or {}).items():
            runs = tr.get("runs") or []
            okr = [r for r in runs if r.get("ok")]
            ms = [failover_metrics(r, sc) for r in okr]
            lost = [(r.get("verify") or {}).get("bytes_lost") for r in runs]
            lost_s = ", ".join("?" if b is None else str(b) for b in lost) or "–"
            if not okr:
                lines.append("| %s | no recovery | – | no recovery | no recovery | – | %s | 0/%d |"
                             % (LABEL.get(t, t), lost_s, len(runs)))
                continue
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %d/%d |" % (
                LABEL.get(t, t),
                fmt_num(median([m["failover_gap_ms"] for m in ms])),
                fmt_num(median([m["baseline_gap_ms"] for m in ms])),
                fmt_num(median([m["max_gap_ms"] for m in ms])),
                fmt_num(median([m["recovery_ms"] for m in ms])),
                fmt_num(median([m["post_failure_mbps"] for m in ms])),
                lost_s, len(okr), len(runs)))
        lines.append("")
        lines.append("*At the failure*: the longest gap between two delivered messages that overlaps the "
                     "%g s after the plane went down (mrc-perf keeps the gaps of %g ms or more; %g means none "
                     "of them did). *In the second before it*: the longest gap that lies wholly in the "
                     "%g s before the plane went down, with every plane up: the stalls of the host and the "
                     "transport that the gap at the failure is to be read against. *Of the run*: the longest "
                     "anywhere, host stalls included. Medians over the runs that verified."
                     % (FAILOVER_WINDOW_S, GAP_KEPT_MS, GAP_KEPT_MS, FAILOVER_WINDOW_S))
        lines.append("")
        lines.append("Bytes lost lists every run: data accepted by send() and never delivered "
                     "(0 for every run that verified; a connection that failed loses what it had queued).")
    return lines


# MRC's framing on the simult_flows links (IPv4, route MTU 1500): a datagram of
# MTU - 48 = 1452 bytes (room for IPv6 and UDP headers, see mrc_sock.rs
# dgram_for) holds a 44-byte MRC header and 1408 bytes of payload; on the wire
# each packet also carries UDP (8), IPv4 (20) and Ethernet (14) headers, which
# netem's rate limiter counts.
MRC_PAYLOAD = 1408
MRC_WIRE_OVERHEAD = 44 + 8 + 20 + 14


def training_table(results):
    """Every run of the training scenarios: how it ended, step times, the
    step at the failure, and the final result against MRC's."""
    lines = []
    for sc in results.get("scenarios") or []:
        if sc.get("kind") != "training":
            continue
        cfg = sc.get("config") or {}
        ref = None
        for r in ((sc.get("transports") or {}).get("mrc") or {}).get("runs") or []:
            if r.get("ok"):
                ref = (train(r).get("end") or {})
                break
        lines.append("%s steps of `demo/pytorch/train.py` (%s) between the ends of 2 planes of %s Mbit/s; "
                     "plane %s taken down (`%s`) once rank 0 had done %s steps; a run still going %s s later "
                     "is killed (torch's own timeout: %s s)."
                     % (cfg.get("steps"), cfg.get("model"), "/".join(str(x) for x in cfg.get("rates_mbit") or []),
                        cfg.get("kill_plane"), cfg.get("kill_command"), cfg.get("fail_step"), cfg.get("wait_s"),
                        cfg.get("torch_timeout_s")))
        lines += ["", "| Transport | Rep | Outcome | Steps | p50 ms | p90 ms | p99 ms | max ms | "
                  "longest step at the failure, ms | next step done after the failure, s | final loss | "
                  "weights SHA-256 | same as MRC |", "|---|" + "---|" * 12]
        for t, tr in (sc.get("transports") or {}).items():
            for r in tr.get("runs") or []:
                tt = train(r)
                end = tt.get("end") or {}
                n = len(tt.get("steps") or [])
                if r.get("ok"):
                    outcome = "completed"
                elif tt.get("killed"):
                    k, e = tt.get("t_kill"), tt.get("t_end")
                    outcome = "stalled, killed %s s after the failure" % fmt_num(e - k) if k and e else "stalled, killed"
                else:
                    k, e = tt.get("t_kill"), tt.get("t_end")
                    outcome = "failed%s" % (" %s s after the failure" % fmt_num(e - k) if k and e else "")
                same = "–"
                if ref and end.get("sha256"):
                    same = "yes" if (end.get("sha256"), end.get("final_loss_hex")) == (
                        ref.get("sha256"), ref.get("final_loss_hex")) else "**no**"
                nxt = run_fail_next_s(r)
                lines.append("| %s | %s | %s | %d/%s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    LABEL.get(t, t), r.get("rep"), outcome, n, tt.get("steps_planned"),
                    fmt_num(run_step_pct(r, 50)), fmt_num(run_step_pct(r, 90)), fmt_num(run_step_pct(r, 99)),
                    fmt_num(run_step_pct(r, 100)), fmt_num(run_fail_step_max(r)),
                    fmt_num(nxt) if nxt is not None else "none", "`%s`" % end["final_loss_hex"]
                    if end.get("final_loss_hex") else "–",
                    "`%s…`" % end["sha256"][:16] if end.get("sha256") else "–", same))
        lines.append("")
    return lines


def mrc_wire_limit_ms(total_bytes, msg_size, rates_mbit):
    """Time the links' summed rate needs for MRC's packets of a transfer of
    total_bytes in messages of msg_size (each message starts a packet):
    payload plus every packet's headers, no retransmission, no handshake."""
    rate = sum(rates_mbit or [])
    if not total_bytes or not msg_size or rate <= 0:
        return None
    full, rest = divmod(total_bytes, msg_size)
    pkts = full * -(-msg_size // MRC_PAYLOAD) + (-(-rest // MRC_PAYLOAD) if rest else 0)
    wire = total_bytes + pkts * MRC_WIRE_OVERHEAD
    return wire * 8 / (rate * 1e6) * 1000


def simult_table(results):
    scs = [sc for sc in results.get("scenarios") or [] if sc.get("kind") == "simult"]
    if not scs:
        return []
    cols = [t for t in TRANSPORTS if any(t in (sc.get("transports") or {}) for sc in scs)]
    wire = "mrc" in cols
    extra = " MRC wire limit, ms | MRC over its wire limit |" if wire else ""
    lines = ["| Case | rates, Mbit/s | delays, ms | selftest limit, ms | " + " | ".join(LABEL.get(t, t) for t in cols)
             + " |" + extra,
             "|" + "---|" * (len(cols) + 4 + (2 if wire else 0))]
    for sc in scs:
        cfg = sc.get("config") or {}
        limit = cfg.get("max_time_ms")
        row = summarize(sc)[0]
        cells = []
        wl = mrc_wire_limit_ms(cfg.get("bytes"), cfg.get("msg_size"), cfg.get("rates_mbit"))
        for t in cols:
            c = row["cells"].get(t)
            if not c or c["n"] == 0:
                cells.append("–")
                continue
            if c["ok"] == 0:
                cells.append("failed (0/%d)" % c["n"])
                continue
            ms = c["median"] * 1000
            # mptcp_connect's runtime includes its join pause (-j: 200 ms
            # after each end's first write), for which the limit allows
            # 400 ms; mrc-perf has no pause and is held to the limit less
            # those 400 ms, a stricter bar.
            lim = limit if t == "mptcp_connect" else (limit - (cfg.get("join_sleep_ms") or 0) if limit else None)
            mark = "" if lim is None else (" ✓" if ms <= lim else " ✗")
            s = "%.0f ms%s" % (ms, mark)
            if c["ok"] < c["n"]:
                s += " %d/%d" % (c["ok"], c["n"])
            cells.append(s)
        if wire:
            m = row["cells"].get("mrc")
            ms = m["median"] * 1000 if m and m["ok"] else None
            cells.append("%.0f" % wl if wl else "–")
            cells.append("%+.1f %%" % ((ms / wl - 1) * 100) if wl and ms else "–")
        lines.append("| %s | %s | %s | %s | %s |" % (
            (sc.get("title") or sc.get("id")).replace("simult_flows: ", ""),
            "/".join(str(x) for x in cfg.get("rates_mbit") or []),
            "/".join(str(x) for x in cfg.get("delays_ms") or []),
            limit if limit is not None else "–", " | ".join(cells)))
    return lines


def nstat_value(text, name):
    for line in (text or "").splitlines():
        f = line.split()
        if len(f) >= 2 and f[0] == name:
            try:
                return int(f[1])
            except ValueError:
                return None
    return None


def paths_used(run):
    """How many paths a run's connection had, as its stack reported it:
    MPTCP subflows joined (nstat, whole run), SCTP peer addresses and MRC
    paths (snapshot mid-transfer, first repetition only); None if unknown."""
    t = run.get("transport")
    snap = run.get("snapshot") or {}
    if t in ("mptcp", "mptcp_connect"):
        if not (run.get("counters") or {}).get("nstat_client") and not run.get("ok"):
            return None
        joined = nstat_value((run.get("counters") or {}).get("nstat_client"), "MPTcpExtMPJoinSynAckRx")
        conns = (run.get("meta") or {}).get("conns") or 1
        return 1 + (joined or 0) / conns
    if t == "sctp":
        lines = (snap.get("sctp_remaddr") or "").splitlines()
        if not lines or not lines[0].lstrip().startswith("ADDR"):
            return None
        return len([l for l in lines[1:] if l.strip()])
    if t == "mrc":
        show = snap.get("mrc_show")
        if isinstance(show, dict):
            conns = show.get("connections") or []
            return len(conns[0].get("paths") or []) if conns else None
        return None
    if t == "tcp":
        return 1
    return None


def paths_table(results):
    rows = []
    for sc in results.get("scenarios") or []:
        # A training run has several connections (the c10d store's,
        # Gloo's) that this count does not tell apart.
        if sc.get("kind") == "training":
            continue
        cells = []
        for t in ("mrc", "mptcp_connect", "mptcp", "sctp"):
            tr = (sc.get("transports") or {}).get(t)
            if not tr:
                cells.append("–")
                continue
            vals = [paths_used(r) for r in tr.get("runs") or []]
            vals = [v for v in vals if v is not None]
            cells.append(", ".join(("%d" % v) if v == int(v) else ("%.1f" % v) for v in vals) if vals else "?")
        rows.append("| %s | %s |" % (sc.get("id"), " | ".join(cells)))
    if not rows:
        return []
    return ["| Scenario | MRC paths | MPTCP subflows (mptcp_connect) | MPTCP subflows per connection | SCTP peer addresses |",
            "|---|---|---|---|---|"] + rows


SEND_LIMITS = ("app", "rwnd", "ring", "cwnd", "pacing", "sched", "no_path", "sending")


def sender_limits(run):
    """Share of MRC's sender time in each limit (send_time_ns of `mrc-status
    show` mid-transfer, first repetition, summed over the client's
    connections), or None if not reported."""
    show = (run.get("snapshot") or {}).get("mrc_show")
    if not isinstance(show, dict):
        return None
    tot = {k: 0 for k in SEND_LIMITS}
    for c in show.get("connections") or []:
        for k, v in (c.get("send_time_ns") or {}).items():
            if k in tot and isinstance(v, (int, float)):
                tot[k] += v
    all_ns = sum(tot.values())
    if all_ns <= 0:
        return None
    return {k: v / all_ns for k, v in tot.items()}


def limits_table(results):
    rows = []
    for sc in results.get("scenarios") or []:
        tr = (sc.get("transports") or {}).get("mrc")
        if not tr:
            continue
        shares = [sender_limits(r) for r in tr.get("runs") or []]
        shares = [x for x in shares if x]
        busy = [(r.get("cpu") or {}).get("busy_share") for r in tr.get("runs") or []]
        busy = [b for b in busy if isinstance(b, (int, float))]
        if not shares and not busy:
            continue
        cells = ["%.0f %%" % (shares[0][k] * 100) if shares else "?" for k in SEND_LIMITS]
        cells.append("%.0f %%" % (median(busy) * 100) if busy else "?")
        rows.append("| %s | %s |" % (sc.get("id"), " | ".join(cells)))
    if not rows:
        return []
    return ["| Scenario | " + " | ".join(SEND_LIMITS) + " | VM CPU busy |",
            "|---|" + "---|" * (len(SEND_LIMITS) + 1)] + rows


# --- Path scaling ------------------------------------------------------------------


def mrc_counters(run, role):
    """/proc/net/mrc of one end after the run, as a dict (None if missing)."""
    return collect.counter_lines((run.get("counters") or {}).get("proc_net_mrc_" + role))


def scaling_metrics(run):
    """Per-packet cost of one run of the path-scaling scenario: CPU time of
    the whole VM from the client's launch to its exit (busy: user, system,
    irq, softirq of all CPUs) per DATA packet the client sent, and per MRC
    packet either end sent; the goodput and the busy share of the CPUs."""
    cpu = run.get("cpu") or {}
    cli = mrc_counters(run, "client") or {}
    srv = mrc_counters(run, "server") or {}
    busy = cpu.get("busy_s")
    data = cli.get("tx_type_data")
    total = (cli.get("tx_packets") or 0) + (srv.get("tx_packets") or 0) if cli or srv else None
    out = {
        "paths_target": (run.get("point") or {}).get("paths_target"),
        "ev_per_plane": (run.get("point") or {}).get("ev_per_plane"),
        "paths_seen": paths_used(run),
        "goodput": run_goodput(run),
        "busy_pct": cpu["busy_share"] * 100 if cpu.get("busy_share") is not None else None,
        "busy_s": busy,
        "data_pkts": data,
        "all_pkts": total,
        "us_per_data_pkt": busy * 1e6 / data if busy is not None and data else None,
        "us_per_pkt": busy * 1e6 / total if busy is not None and total else None,
        "pkts_per_data_pkt": total / data if total and data else None,
    }
    return out


def scaling_points(sc):
    """The points of a path-scaling scenario in order of path count: one
    dict per point with its runs' metrics and the medians over the
    successful runs."""
    tr = (sc.get("transports") or {}).get("mrc") or {}
    by = {}
    for r in tr.get("runs") or []:
        n = (r.get("point") or {}).get("paths_target")
        by.setdefault(n, []).append(r)
    pts = []
    for n in sorted(by, key=lambda x: (x is None, x if x is not None else 0)):
        runs = by[n]
        ms = [scaling_metrics(r) for r in runs]
        okm = [m for r, m in zip(runs, ms) if r.get("ok")]
        p = {"paths_target": n, "n": len(runs), "ok": len(okm), "runs": ms}
        for k in ("goodput", "busy_pct", "us_per_data_pkt", "us_per_pkt", "pkts_per_data_pkt"):
            vals = [m[k] for m in okm if m[k] is not None]
            p[k] = median(vals)
            p[k + "_min"] = min(vals) if vals else None
            p[k + "_max"] = max(vals) if vals else None
        seen = sorted({m["paths_seen"] for m in ms if m["paths_seen"] is not None})
        p["paths_seen"] = seen
        evs = {m["ev_per_plane"] for m in ms if m["ev_per_plane"] is not None}
        p["ev_per_plane"] = evs.pop() if len(evs) == 1 else None
        pts.append(p)
    base = next((p["us_per_data_pkt"] for p in pts if p["us_per_data_pkt"] is not None), None)
    for p in pts:
        p["vs_first"] = ratio(p["us_per_data_pkt"], base)
    return pts


def scaling_table(results):
    lines = []
    for sc in results.get("scenarios") or []:
        if sc.get("kind") != "scaling":
            continue
        pts = scaling_points(sc)
        if not pts:
            continue
        if lines:
            lines.append("")
        lines += ["| paths set | paths seen | ev_per_plane | goodput, Mbit/s ↑ | CPU busy, % | "
                  "CPU per DATA packet, µs ↓ | ÷ fewest paths | CPU per MRC packet, µs | "
                  "MRC packets per DATA packet | runs ok |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for p in pts:
            seen = ", ".join("%g" % v for v in p["paths_seen"]) or "?"
            if p["ok"] == 0:
                lines.append("| %s | %s | %s | failed | – | – | – | – | – | 0/%d |" % (
                    p["paths_target"], seen, p["ev_per_plane"] if p["ev_per_plane"] is not None else "?", p["n"]))
                continue
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %d/%d |" % (
                p["paths_target"], seen, p["ev_per_plane"] if p["ev_per_plane"] is not None else "?",
                fmt_num(p["goodput"]), fmt_num(p["busy_pct"]), fmt_num(p["us_per_data_pkt"]),
                ("%.2f×" % p["vs_first"]) if p["vs_first"] is not None else "–",
                fmt_num(p["us_per_pkt"]), fmt_num(p["pkts_per_data_pkt"]), p["ok"], p["n"]))
    return lines


def failures(results, limit=40):
    out = []
    for sc in results.get("scenarios") or []:
        if sc.get("error"):
            out.append("- `%s`: %s" % (sc.get("id"), one_line(sc["error"])))
        for t, tr in (sc.get("transports") or {}).items():
            for r in tr.get("runs") or []:
                if not r.get("ok"):
                    pt = (r.get("point") or {}).get("paths_target")
                    out.append("- `%s` %s%s rep %s: %s" % (sc.get("id"), LABEL.get(t, t),
                                                           " (%s paths)" % pt if pt is not None else "",
                                                           r.get("rep"), one_line(r.get("error") or "failed")))
    if len(out) > limit:
        out = out[:limit] + ["- … %d more in bench/results.json" % (len(out) - limit)]
    return out


def one_line(s, n=300):
    s = " ".join(str(s).split())
    return s if len(s) <= n else s[:n] + "…"


def run_line(results):
    m = results.get("meta") or {}
    parts = []
    if m.get("started"):
        parts.append("run %s" % m["started"])
    if m.get("kernel"):
        parts.append("kernel %s" % m["kernel"])
    if m.get("cpus"):
        mem = m.get("mem_kib")
        parts.append("%s vCPUs%s" % (m["cpus"], ", %d MiB" % (mem // 1024) if isinstance(mem, int) else ""))
    if m.get("reps") is not None:
        parts.append("%s repetition%s of %s s%s" % (
            m["reps"], "" if m["reps"] == 1 else "s", m.get("duration_s"),
            " (failover %s s)" % m["fail_duration_s"] if m.get("fail_duration_s") is not None else ""))
    if m.get("msg_size"):
        parts.append("%s-byte messages" % m["msg_size"])
    if m.get("mrc_perf"):
        parts.append(str(m["mrc_perf"]))
    return ", ".join(parts)


def markdown(results, plots):
    lines = [BEGIN, "", "_Generated by `bench/report.py` from `bench/results.json`; edits between "
             "the markers are overwritten._", ""]
    if results.get("synthetic"):
        lines += ["**These numbers are synthetic test input, not measurements.**", ""]
    if (results.get("meta") or {}).get("quick") is True:
        lines += ["**Smoke run (`BENCH_QUICK=1`): one short repetition; not for comparison.**", ""]
    if not results.get("complete"):
        lines += ["**Incomplete run:** " + "; ".join(results.get("notes") or ["the VM run did not finish"]), ""]
    lines += [run_line(results) + ".", ""]
    sm = summary_table(results)
    if sm:
        lines += ["### Summary", "",
                  "Median of the successful repetitions; in parentheses, the ratio to the best peer of MRC on "
                  "that row (best of MPTCP, SCTP and TCP, in bold). ↑ higher is better, ↓ lower is better. "
                  "`k/n`: only k of n repetitions succeeded; `failed`: none did (errors below). "
                  "*VM CPU per MB delivered*: busy CPU time of the whole VM, both ends and mrc-perf included "
                  "(`/proc/stat`, from the client's launch to its exit), in ms per 10⁶ bytes the server "
                  "verified; the median of the runs' quotients.", ""]
        lines += sm
    ct = cpu_table(results)
    if ct:
        lines += ["", "### VM CPU busy", "",
                  "Median share of the VM's CPUs busy (user, nice, system, irq, softirq of all vCPUs, "
                  "`/proc/stat`) from the client's launch to its exit, over the successful repetitions; "
                  "near 100 % the CPU, not the path, is the limit.", ""] + ct
    ft = failover_table(results)
    if ft:
        lines += ["", "### Failover", ""] + ft
    tt = training_table(results)
    if tt:
        lines += ["", "### PyTorch DDP training across a plane failure", "",
                  "*Step*: rank 0's time for forward, backward (where DDP all-reduces the gradients over "
                  "Gloo) and the optimizer step. *Longest step at the failure*: the longest of the first %d "
                  "steps that ended after the plane went down. *Same as MRC*: final loss and weights equal "
                  "to the bit to MRC's run (the arithmetic is the same whatever carries it)."
                  % TRAIN_FAIL_STEPS, ""] + tt
    st = simult_table(results)
    if st:
        lines += ["", "### simult_flows reproduction", "",
                  "Median transfer time of the selftest's transfer; ✓ within the selftest's time limit "
                  "(for mrc-perf, the limit less the 400 ms of mptcp_connect's join sleeps), ✗ over it. "
                  "*MRC wire limit*: the time the summed rate needs for MRC's packets of the transfer "
                  "(1408 bytes of payload each, every message starting a packet, plus 86 bytes of MRC, "
                  "UDP, IPv4 and Ethernet headers per packet), with no retransmission and no handshake; "
                  "the target is MRC within 3 % of it.", ""]
        lines += st
    sct = scaling_table(results)
    if sct:
        lines += ["", "### Per-packet cost and number of paths (MRC only)", "",
                  "One MRC connection over the unshaped veth (the CPU is the limit) with a given number of "
                  "paths: the handshake's path plus `ev_per_plane` (set in both namespaces with `mrc-status "
                  "param set`) paths of its one plane, so the smallest connection has 2. *CPU per DATA packet*: "
                  "busy CPU time of the whole VM (user, system, irq, softirq of all CPUs, `/proc/stat`) from "
                  "the client's launch to its exit, over the DATA packets the client sent (`tx_type_data` of "
                  "`/proc/net/mrc`); it holds both ends, mrc-perf's copies included. *CPU per MRC packet* "
                  "divides by every packet both ends sent (`tx_packets`). Medians over the successful "
                  "repetitions; paths seen: `mrc-status show` mid-transfer, first repetition. "
                  "No peer is measured: MPTCP caps a connection at 8 subflows, SCTP sends data on one path "
                  "of as many as the peer has addresses, TCP has one path.", ""] + sct
    pt = paths_table(results)
    if pt:
        lines += ["", "### Paths the transports used", "",
                  "MPTCP: subflows of each run (1 + the MP_JOINs that completed, client's MIB counters). "
                  "SCTP: peer addresses of the association and MRC: paths of the connection, both seen "
                  "mid-transfer in the first repetition. `?`: not reported.", ""] + pt
    lt = limits_table(results)
    if lt:
        lines += ["", "### What held MRC's sender back", "",
                  "Share of the sender's time in each limit, from `send_time_ns` of `mrc-status show` "
                  "mid-transfer (first repetition, the client's connections summed): *app* nothing queued, "
                  "*rwnd* the peer's receive window, *ring* the send ring, *cwnd* every path's congestion "
                  "window, *pacing*, *sched* waiting for a path that delivers sooner, *no_path*, *sending* "
                  "data going out (the CPU is the limit). *VM CPU busy*: median share of both vCPUs busy "
                  "(`/proc/stat`) from the client's launch to its exit.", ""] + lt
    fl = failures(results)
    lines += ["", "### Failed runs", ""] + (fl or ["None."])
    if plots:
        lines += ["", "### Plots", ""]
        for title, path in plots:
            lines.append("![%s](%s)" % (title, path))
            lines.append("")
    lines += ["", END]
    # One blank line between blocks, whichever sections are there.
    lines = [l for i, l in enumerate(lines) if l or i == 0 or lines[i - 1]]
    return "\n".join(lines) + "\n"


def update_markdown(text, block):
    """text with everything from BEGIN to END replaced by block."""
    a = text.find(BEGIN)
    b = text.find(END)
    if a < 0 or b < a:
        raise ValueError("markers %s ... %s not found" % (BEGIN, END))
    return text[:a] + block.rstrip("\n") + text[b + len(END):]


# --- Plots ----------------------------------------------------------------------------


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "mrc-bench"
    import matplotlib.pyplot as plt
    return plt


def _save(plt, fig, path):
    fig.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


def representative(runs, key):
    """The successful run whose key is the median one, else the first run
    with a timeline."""
    okr = [r for r in runs if r.get("ok") and key(r) is not None]
    if okr:
        okr.sort(key=key)
        return okr[(len(okr) - 1) // 2]
    for r in runs:
        if servers(r) and servers(r)[0].get("samples"):
            return r
    return None


def plot_failover(results, outdir):
    plt = _pyplot()
    done = []
    for sc in results.get("scenarios") or []:
        if sc.get("kind") != "failover":
            continue
        cfg = sc.get("config") or {}
        fig, ax = plt.subplots(figsize=(8, 4.2))
        total = sum(cfg.get("rates_mbit") or [])
        rem = failover_metrics({}, sc)["remaining_mbit"]
        for t, tr in (sc.get("transports") or {}).items():
            r = representative(tr.get("runs") or [], lambda r: failover_metrics(r, sc)["max_gap_ms"])
            if r is None or not servers(r):
                continue
            s = servers(r)[0]
            dt = (s.get("interval_ms") or 10) / 1000
            # The samples end with the last message; zeros until the
            # connection ended show a stall to its end.
            samples = list(s.get("samples") or [])
            samples += [0] * max(0, int((s.get("elapsed_s") or 0) / dt) - len(samples))
            rate = mbps(samples, dt)
            k = max(1, int(round(0.05 / dt)))
            smooth = [sum(rate[max(0, i - k + 1):i + 1]) / len(rate[max(0, i - k + 1):i + 1]) for i in range(len(rate))]
            kill = (r.get("timing") or {}).get("kill_at_s") or 0.0
            xs = [(i + 1) * dt - kill for i in range(len(smooth))]
            label = LABEL.get(t, t) + ("" if r.get("ok") else " (failed)")
            ax.plot(xs, smooth, label=label, color=COLOR.get(t), linewidth=1.4)
        if total:
            ax.axhline(total, color="black", linewidth=0.6, linestyle=":", label="capacity before (%d Mbit/s)" % total)
        if rem:
            ax.axhline(RECOVERY_SHARE * rem, color="black", linewidth=0.6, linestyle="--",
                       label="90 %% of remaining (%d Mbit/s)" % round(RECOVERY_SHARE * rem))
        ax.axvline(0, color="black", linewidth=1)
        ax.set_xlabel("time since plane %s went down (s)" % cfg.get("kill_plane"))
        ax.set_ylabel("goodput at the receiver (Mbit/s, 50 ms mean)")
        ax.set_title(sc.get("title") or "failover")
        ax.set_ylim(bottom=0)
        ax.legend(loc="upper right", fontsize=8)
        ax.grid(alpha=0.3)
        path = os.path.join(outdir, "failover.svg")
        _save(plt, fig, path)
        done.append(("Goodput across the failure of one plane", path))
    return done


def plot_training(results, outdir):
    """Step time across the failure, one line per transport (first run)."""
    plt = _pyplot()
    done = []
    for sc in results.get("scenarios") or []:
        if sc.get("kind") != "training":
            continue
        cfg = sc.get("config") or {}
        fig, ax = plt.subplots(figsize=(8, 4.2))
        drawn = False
        for t, tr in (sc.get("transports") or {}).items():
            runs = [r for r in tr.get("runs") or [] if train(r).get("steps")]
            if not runs:
                if tr.get("runs"):
                    # In the legend all the same: it ran and failed
                    # before its first step.
                    ax.plot([], [], label=LABEL.get(t, t) + " (failed before the first step)",
                            color=COLOR.get(t), linestyle="none", marker="x")
                continue
            r = runs[0]
            tt = train(r)
            k = tt.get("t_kill") or tt.get("t0") or 0
            pts = [(s[0] - k, s[1]) for s in tt["steps"] if s[0] is not None and s[1] is not None]
            label = LABEL.get(t, t) + ("" if r.get("ok") else " (%s)" % ("stalled, killed" if tt.get("killed") else "failed"))
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=label, color=COLOR.get(t),
                    linewidth=1.0, marker=".", markersize=3)
            if not r.get("ok") and tt.get("t_end"):
                # Where the run ended without finishing.
                ax.plot([tt["t_end"] - k], [pts[-1][1] if pts else 1], marker="x", color=COLOR.get(t),
                        markersize=9, linestyle="none")
            drawn = True
        if not drawn:
            plt.close(fig)
            continue
        ax.axvline(0, color="black", linewidth=1)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("time since plane %s went down (s); each point the end of a step, × where a "
                      "failed run ended" % cfg.get("kill_plane"))
        ax.set_ylabel("training step time (ms)")
        ax.set_title(sc.get("title") or "training")
        ax.legend(loc="lower right", fontsize=8)
        ax.grid(alpha=0.3)
        path = os.path.join(outdir, "%s.svg" % sc.get("id"))
        _save(plt, fig, path)
        done.append(("Training step time across the failure of one plane", path))
    return done


def _goodput_bars(ax, groups, cols):
    width = 0.8 / max(1, len(cols))
    for j, t in enumerate(cols):
        xs, ys, lo, hi, fx = [], [], [], [], []
        for i, (_, cells) in enumerate(groups):
            c = cells.get(t)
            x = i + (j - (len(cols) - 1) / 2) * width
            if not c or c["n"] == 0:
                continue
            if c["median"] is None:
                fx.append(x)
                continue
            xs.append(x)
            ys.append(c["median"])
            lo.append(c["median"] - (c["min"] if c["min"] is not None else c["median"]))
            hi.append((c["max"] if c["max"] is not None else c["median"]) - c["median"])
        if xs:
            ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=LABEL.get(t, t), color=COLOR.get(t))
        if fx:
            ax.plot(fx, [0] * len(fx), "x", color=COLOR.get(t), markersize=8, markeredgewidth=2,
                    label=None if xs else LABEL.get(t, t) + " (failed)")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([g for g, _ in groups], rotation=15, ha="right", fontsize=8)
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)


def plot_goodput(results, outdir):
    """Goodput per scenario; the unshaped veth (CPU-bound, far above the
    shaped planes) gets an axis of its own."""
    plt = _pyplot()
    shaped, unshaped = [], []
    for sc in results.get("scenarios") or []:
        for row in summarize(sc):
            if row["key"] == "goodput":
                g = (scenario_label(sc), row["cells"])
                (unshaped if (sc.get("config") or {}).get("topology") == "unshaped" else shaped).append(g)
    if not shaped and not unshaped:
        return []
    cols = [t for t in present(results) if any(t in cells for _, cells in shaped + unshaped)]
    parts = [g for g in (shaped, unshaped) if g]
    fig, axes = plt.subplots(1, len(parts), figsize=(1.7 * (len(shaped) + len(unshaped)) + 3, 4.4),
                             gridspec_kw={"width_ratios": [len(g) for g in parts]}, squeeze=False)
    for ax, groups in zip(axes[0], parts):
        _goodput_bars(ax, groups, cols)
    axes[0][0].set_ylabel("goodput (Mbit/s), median, min–max")
    axes[0][0].legend(fontsize=8)
    fig.suptitle("Goodput per scenario (× = every repetition failed)")
    path = os.path.join(outdir, "goodput.svg")
    _save(plt, fig, path)
    return [("Goodput per scenario", path)]


def plot_latency(results, outdir):
    plt = _pyplot()
    for sc in results.get("scenarios") or []:
        if sc.get("kind") != "latency":
            continue
        rows = {row["key"]: row for row in summarize(sc)}
        cols = [t for t in present(results) if t in rows["p50"]["cells"]]
        fig, ax = plt.subplots(figsize=(6, 3.6))
        for k, (key, hatch) in enumerate((("p50", ""), ("p99", "//"))):
            xs = [i + (k - 0.5) * 0.38 for i in range(len(cols))]
            ys = [rows[key]["cells"][t]["median"] or 0 for t in cols]
            ax.bar(xs, ys, 0.38, label=key, color=[COLOR.get(t) for t in cols], hatch=hatch, edgecolor="black",
                   linewidth=0.4)
        ax.set_xticks(range(len(cols)))
        ax.set_xticklabels([LABEL.get(t, t) for t in cols])
        ax.set_ylabel("round trip (µs)")
        ax.set_title(sc.get("title") or "latency")
        ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        path = os.path.join(outdir, "latency.svg")
        _save(plt, fig, path)
        return [("Small-message round trip", path)]
    return []


def plot_scaling(results, outdir):
    """CPU per DATA packet (median, min–max) against the paths per
    connection, goodput on a second axis."""
    plt = _pyplot()
    for sc in results.get("scenarios") or []:
        if sc.get("kind") != "scaling":
            continue
        pts = [p for p in scaling_points(sc) if p["paths_target"] is not None]
        got = [p for p in pts if p["us_per_data_pkt"] is not None]
        if not got:
            continue
        xs = [p["paths_target"] for p in got]
        ys = [p["us_per_data_pkt"] for p in got]
        lo = [p["us_per_data_pkt"] - p["us_per_data_pkt_min"] for p in got]
        hi = [p["us_per_data_pkt_max"] - p["us_per_data_pkt"] for p in got]
        fig, ax = plt.subplots(figsize=(6.4, 4))
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, color=COLOR["mrc"],
                    label="CPU per DATA packet (µs)")
        failed = [p["paths_target"] for p in pts if p["ok"] == 0]
        if failed:
            ax.plot(failed, [0] * len(failed), "x", color=COLOR["mrc"], markersize=8, markeredgewidth=2,
                    label="every repetition failed")
        ax.set_xscale("log", base=2)
        allx = [p["paths_target"] for p in pts]
        ax.set_xlim(min(allx) / 1.5, max(allx) * 1.5)
        ax.set_xticks([p["paths_target"] for p in pts])
        ax.set_xticklabels([str(p["paths_target"]) if p["paths_seen"] in ([], [p["paths_target"]]) else
                            "%s\n(%s seen)" % (p["paths_target"], "/".join("%g" % v for v in p["paths_seen"]))
                            for p in pts])
        ax.set_xlabel("paths per connection")
        ax.set_ylabel("CPU per DATA packet (µs), median, min–max")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax2 = ax.twinx()
        gx = [p["paths_target"] for p in pts if p["goodput"] is not None]
        gy = [p["goodput"] for p in pts if p["goodput"] is not None]
        ax2.plot(gx, gy, marker="s", linestyle="--", color="#444444", label="goodput (Mbit/s)")
        ax2.set_ylabel("goodput (Mbit/s)")
        ax2.set_ylim(bottom=0)
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3)
        ax.set_title(sc.get("title") or "path scaling", fontsize=10)
        path = os.path.join(outdir, "path-scaling.svg")
        _save(plt, fig, path)
        return [("MRC: CPU per packet and goodput against the number of paths", path)]
    return []


def make_plots(results, outdir):
    os.makedirs(outdir, exist_ok=True)
    out = []
    out += plot_goodput(results, outdir)
    out += plot_failover(results, outdir)
    out += plot_latency(results, outdir)
    out += plot_scaling(results, outdir)
    out += plot_training(results, outdir)
    return out


# --- Main -------------------------------------------------------------------------------


def report(results_path, md_path, copy_path, plots_dir, plots=True):
    with open(results_path) as f:
        results = json.load(f)
    if copy_path and os.path.abspath(copy_path) != os.path.abspath(results_path):
        os.makedirs(os.path.dirname(os.path.abspath(copy_path)), exist_ok=True)
        shutil.copyfile(results_path, copy_path)
    drawn = make_plots(results, plots_dir) if plots else []
    md_dir = os.path.dirname(os.path.abspath(md_path))
    rel = [(t, os.path.relpath(p, md_dir)) for t, p in drawn]
    with open(md_path) as f:
        text = f.read()
    text = update_markdown(text, markdown(results, rel))
    with open(md_path, "w") as f:
        f.write(text)
    return results


# --- Self test --------------------------------------------------------------------------


def self_test():
    failures_ = []
    count = [0]

    def check(what, got, want, tol=1e-9):
        count[0] += 1
        okv = got == want or (
            isinstance(got, (int, float)) and isinstance(want, (int, float))
            and not isinstance(want, bool) and abs(got - want) <= tol)
        print("%s %s: %r" % ("ok  " if okv else "FAIL", what, got))
        if not okv:
            failures_.append("%s: got %r, want %r" % (what, got, want))

    # Arithmetic on fixed numbers.
    check("median odd", median([3, 1, 2]), 2)
    check("median even", median([4, 1, 3, 2]), 2.5)
    check("median skips None", median([None, 5, 7]), 6)
    check("median empty", median([]), None)
    check("median with never", median([10, math.inf, math.inf]), math.inf)
    check("jain equal", jain([2, 2, 2, 2]), 1.0)
    check("jain one takes all", jain([1, 0, 0, 0]), 0.25)
    check("jain 1..4", jain([1, 2, 3, 4]), 100 / 120)
    check("jain all zero", jain([0, 0]), None)
    check("ratio", ratio(45, 180), 0.25)
    check("ratio to zero", ratio(1, 0), None)
    check("best higher", best({"mrc": 999, "tcp": 5, "mptcp": 9, "sctp": None}, True), ("mptcp", 9))
    check("best lower", best({"mrc": 1, "tcp": 5, "mptcp": 9}, False), ("tcp", 5))
    # 200 Mbit/s for 1 s, nothing for 50 ms, then 150 Mbit/s. The first
    # 100 ms window averaging 140 starts after the gap, and so does the
    # first averaging 135 (90 % of 150): no window may hold the stall.
    dt = 0.01
    samples = [250000] * 100 + [0] * 5 + [187500] * 100
    check("recovery after a 50 ms gap", recovery_ms(samples, dt, 1.0, 140.0), 50.0, tol=1e-6)
    check("recovery at exactly 90 %", recovery_ms(samples, dt, 1.0, 135.0), 50.0, tol=1e-6)
    # Full rate for 100 ms after the failure (data already in flight), then
    # a 30 ms stall, a single empty interval later: recovery is counted from
    # the longest stall, not from the burst before it.
    late = [187500] * 100 + [187500] * 10 + [0] * 3 + [187500] * 5 + [0] + [187500] * 50
    check("recovery after a delayed stall", recovery_ms(late, dt, 1.0, 135.0), 130.0, tol=1e-6)
    gaps = [[500000, 70000], [1990000, 30000], [2500000, 12000], [3100000, 90000]]
    check("gap at the failure", gap_near(gaps, 2.0), 30.0)
    check("gap at the failure, overlapping the kill", gap_near([[1900000, 150000]], 2.0), 150.0)
    check("gap at the failure, none kept", gap_near(gaps, 4.0), GAP_KEPT_MS)
    check("gap at the failure, old results", gap_near(None, 2.0), None)
    check("gap before the failure", gap_before(gaps, 2.0), 5.0)
    check("gap before the failure, two in the window", gap_before(gaps, 2.6), 30.0)
    check("gap before the failure, overlapping the kill is not", gap_before([[1900000, 150000]], 2.0), 5.0)
    check("gap before the failure, window before the start", gap_before(gaps, 0.5), None)
    check("gap before the failure, old results", gap_before(None, 2.0), None)
    check("longest stall end", longest_stall_end([1, 0, 2, 0, 0, 3, 0, 0], 0, 8), 5)
    check("longest stall end, none", longest_stall_end([1, 2], 0, 2), 0)
    check("recovery never", recovery_ms([250000] * 100 + [0] * 100, dt, 1.0, 135.0), None)
    check("mean rate", mean_rate(samples, dt, 1.5, 2.0), 150.0)
    nst = "MPTcpExtMPCapableSYNTX          1                  0.0\nMPTcpExtMPJoinSynAckRx          6                  0.0\n"
    check("nstat value", nstat_value(nst, "MPTcpExtMPJoinSynAckRx"), 6)
    check("MPTCP subflows per connection", paths_used(
        {"transport": "mptcp", "ok": True, "meta": {"conns": 2}, "counters": {"nstat_client": nst}}), 4.0)
    lim = sender_limits({"snapshot": {"mrc_show": {"connections": [
        {"send_time_ns": {"app": 1, "cwnd": 2, "unknown_9": 50}},
        {"send_time_ns": {"cwnd": 4, "sending": 1}}]}}})
    check("sender limits: cwnd share", lim["cwnd"], 6 / 8)
    check("sender limits: app share", lim["app"], 1 / 8)
    check("sender limits: none without a snapshot", sender_limits({"snapshot": {}}), None)
    check("SCTP peer addresses", paths_used({"transport": "sctp", "snapshot": {"sctp_remaddr":
          "ADDR ASSOC_ID HB_ACT RTO\n10.80.1.2 0 1 1000\n10.80.2.2 0 1 1000\n"}}), 2)
    check("SCTP without /proc file", paths_used({"transport": "sctp", "snapshot": {"sctp_remaddr":
          "cat: /proc/net/sctp/remaddr: No such file or directory\n"}}), None)

    # Table math on the synthetic results file.
    with open(os.path.join(HERE, "testdata", "synthetic-results.json")) as f:
        syn = json.load(f)
    by = {sc["id"]: sc for sc in syn["scenarios"]}
    rows = summarize(by["planes-equal"])
    c = rows[0]["cells"]
    check("planes-equal MRC median", c["mrc"]["median"], 45.0)
    check("planes-equal TCP median (2 of 3 ok)", c["tcp"]["median"], 47.5)
    check("planes-equal TCP ok count", (c["tcp"]["ok"], c["tcp"]["n"]), (2, 3))
    check("planes-equal best peer", (rows[0]["best_peer"], rows[0]["best_value"]), ("mptcp", 180.0))
    check("planes-equal MRC ratio", c["mrc"]["ratio"], 0.25)
    check("planes-equal SCTP ratio", c["sctp"]["ratio"], 47 / 180)
    lat = {r["key"]: r for r in summarize(by["latency"])}
    check("latency p99 best peer", (lat["p99"]["best_peer"], lat["p99"]["best_value"]), ("tcp", 85.0))
    check("latency p99 MRC ratio", lat["p99"]["cells"]["mrc"]["ratio"], 110 / 85)
    fair = {r["key"]: r for r in summarize(by["fairness"])}
    check("fairness Jain MRC", fair["jain"]["cells"]["mrc"]["median"], 100 / 120)
    check("fairness Jain TCP (missing conn = 0)", fair["jain"]["cells"]["tcp"]["median"], 0.25)
    late = {"client": {"parallel": 2, "elapsed_s": 5.0},
            "server": [{"conn": 0, "bytes": 5_000_000, "goodput_mbps": 8.0},
                       {"conn": 1, "bytes": 500_000, "goodput_mbps": 80.0}]}
    check("per-connection goodput over the client's time", run_conn_goodputs(late), [8.0, 0.8])
    check("late starts", run_late_starts({"client": {"conns": [{"hello_us": 10}, {"hello_us": 2_000_000}]}}), 1)
    check("late starts unknown", run_late_starts({"client": {"conns": [{"hello_us": None}]}}), None)
    # CPU per MB delivered: each run's busy seconds over its verified
    # megabytes, then the median of those quotients over the successful
    # runs. MRC's runs: 6.0 s / 25 MB, 9.0 s / 28.125 MB, 4.0 s / 31.25 MB
    # = 240, 320, 128 ms per MB: the median is 240, where the quotient of
    # the medians would be 213.3 and the mean 229.3.
    check("CPU per MB of one run", run_cpu_per_mb(
        {"cpu": {"busy_s": 6.0}, "verify": {"bytes_received": 25_000_000}}), 240.0)
    check("CPU per MB without bytes", run_cpu_per_mb({"cpu": {"busy_s": 6.0}, "verify": {"bytes_received": 0}}), None)
    check("CPU per MB without CPU ticks", run_cpu_per_mb({"verify": {"bytes_received": 25_000_000}}), None)
    pe = {r["key"]: r for r in summarize(by["planes-equal"])}
    cpm = pe["cpu_per_mb"]
    check("planes-equal CPU per MB row is lower-better", (cpm["higher_better"], cpm["unit"]), (False, "ms"))
    check("planes-equal CPU per MB, MRC median", cpm["cells"]["mrc"]["median"], 240.0)
    check("planes-equal CPU per MB, SCTP median", cpm["cells"]["sctp"]["median"], 3.0 * 1000 / 29.375)
    # TCP: 60 and 80 ms per MB; its failed run (5000) stays out.
    check("planes-equal CPU per MB, TCP median (2 of 3 ok)", cpm["cells"]["tcp"]["median"], 70.0)
    check("planes-equal CPU per MB, best peer is the lowest", (cpm["best_peer"], cpm["best_value"]), ("tcp", 70.0))
    check("planes-equal CPU per MB, MRC ratio", cpm["cells"]["mrc"]["ratio"], 240 / 70)
    check("planes-equal CPU per MB, MPTCP ratio", cpm["cells"]["mptcp"]["ratio"], 80 / 70)
    fcpm = {r["key"]: r for r in summarize(by["fairness"])}["cpu_per_mb"]
    check("fairness CPU per MB, MRC against TCP", (fcpm["cells"]["mrc"]["median"], fcpm["cells"]["mrc"]["ratio"]),
          (1600.0, 0.8))
    check("no CPU per MB row for failover", "cpu_per_mb" in {r["key"] for r in summarize(by["failover"])}, False)
    fo = {r["key"]: r for r in summarize(by["failover"])}
    check("failover gap MRC", fo["max_gap"]["cells"]["mrc"]["median"], 50.0)
    check("failover recovery MRC", fo["recovery"]["cells"]["mrc"]["median"], 50.0, tol=1e-6)
    check("failover recovery MPTCP (never)", fo["recovery"]["cells"]["mptcp"]["median"], math.inf)
    check("failover TCP failed", (fo["max_gap"]["cells"]["tcp"]["ok"], fo["max_gap"]["cells"]["tcp"]["n"]), (0, 1))
    check("failover post-failure MRC", fo["post"]["cells"]["mrc"]["median"], 150.0)
    md = markdown(syn, [])
    check("markdown MRC cell", "45.0 (0.25×)" in md, True)
    check("markdown best peer bold", "**180** (1.00×)" in md, True)
    check("markdown partial count", "47.5 (0.26×) 2/3" in md, True)
    check("markdown failed cell", "failed (0/1)" in md, True)
    check("markdown lists failures", "`failover` TCP rep 1: conn 0: message 9: Resource temporarily" in md, True)
    check("markdown synthetic banner", "synthetic test input" in md, True)
    check("markdown CPU per MB row", "| 4 equal planes (50/50/50/50 Mbit/s) | VM CPU per MB delivered, ms ↓ | "
          "240 (3.43×) | 80.0 (1.14×) | 102 (1.46×) | **70.0** (1.00×) 2/3 | 3.43× TCP |" in md, True)
    check("markdown VM CPU busy row", "| planes-equal | 60 % | – | 90 % | 30 % | 21 % 2/3 |" in md, True)
    doc = "a\n" + BEGIN + "\nold\n" + END + "\nb\n"
    # 16 MiB in 16 KiB messages: 1024 messages of 12 packets (11 full, one of
    # 896 bytes), 86 bytes of headers each, at 20 Mbit/s.
    check("MRC wire limit", mrc_wire_limit_ms(16 << 20, 16384, [10, 10]),
          ((16 << 20) + 1024 * 12 * 86) * 8 / 20e6 * 1000, tol=1e-6)
    check("MRC wire limit, no rate", mrc_wire_limit_ms(16 << 20, 16384, []), None)
    check("marker update", update_markdown(doc, BEGIN + "\nnew\n" + END), "a\n" + BEGIN + "\nnew\n" + END + "\nb\n")

    # The collector on raw files recorded with mrc-perf (loopback on a
    # development host, see testdata/README).
    rundir = os.path.join(HERE, "testdata", "rundir")
    res = collect.results_from_dir(rundir)
    sc = {s["id"]: s for s in res["scenarios"]}
    tp = sc["sample-throughput"]["transports"]
    check("recorded TCP run verified", tp["tcp"]["runs"][0]["ok"], True)
    check("recorded TCP bytes lost", tp["tcp"]["runs"][0]["verify"]["bytes_lost"], 0)
    check("recorded MRC run failed", tp["mrc"]["runs"][0]["ok"], False)
    check("recorded MRC error kept", "errno 97" in (tp["mrc"]["runs"][0]["error"] or ""), True)
    check("recorded SCTP error kept", "errno 93" in (tp["sctp"]["runs"][0]["error"] or ""), True)
    par = sc["sample-fairness"]["transports"]["tcp"]["runs"][0]
    j = run_jain(par)
    check("recorded 4-connection Jain index in (0.25, 1]", j is not None and 0.25 < j <= 1.0, True)
    lr = sc["sample-latency"]["transports"]["tcp"]["runs"][0]
    check("recorded latency p99 >= p50", run_rtt(lr, "p99") >= run_rtt(lr, "p50"), True)
    # What the guest prints (--emit) gives back the same results.
    import base64
    import gzip
    blocks = []
    for kind, obj in [("header", collect.header_record(rundir))] + [
            ("scenario", collect.scenario_record(os.path.join(rundir, "scenarios", d)))
            for d in sorted(os.listdir(os.path.join(rundir, "scenarios")))] + [
            ("footer", collect.footer_record(rundir))]:
        b64 = base64.b64encode(gzip.compress(json.dumps(obj).encode())).decode()
        blocks.append("noise\r\n@@mrc-bench begin %s\r\n" % kind)
        blocks += ["@@mrc-bench %s\r\n" % b64[i:i + 76] for i in range(0, len(b64), 76)]
        blocks.append("@@mrc-bench end %s\r\n" % kind)
    back = collect.results_from_log("".join(blocks))
    check("extract: same scenarios", json.dumps(back["scenarios"], sort_keys=True) ==
          json.dumps(res["scenarios"], sort_keys=True), True)
    check("extract: complete", back["complete"], True)
    cut = collect.results_from_log("".join(blocks[:-3]))
    check("extract: cut-off output is incomplete", cut["complete"], False)
    # An mptcp_connect run: its CPU ticks, and its file counts as delivered
    # only when cmp found it intact.
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "meta.env"), "w") as f:
            f.write("rep=1\ntransport=mptcp_connect\nt0=100.0\nt_client_exit=102.0\nclient_rc=0\nserver_rc=0\n"
                    "cpu_ticks_t0=[100,0,100,1000,0,0,0,0,0,0]\ncpu_ticks_client_exit=[200,0,250,1100,0,0,50,0,0,0]\n"
                    "clk_tck=100\nbytes=16777216\ncmp_sent_ok=true\ncmp_back_ok=true\n")
        mc = collect.run_record(d, "mptcp_connect")
    check("mptcp_connect run: CPU busy seconds", (mc["ok"], mc["cpu"]["busy_s"], mc["cpu"]["busy_share"]), (True, 3.0, 0.75))
    check("mptcp_connect run: CPU per MB", run_cpu_per_mb(mc), 3.0 * 1000 / 16.777216)
    check("mptcp_connect run, data differs: nothing delivered", run_cpu_per_mb(
        {"cpu": mc["cpu"], "verify": {"bytes_sent": 16777216, "bytes_received": None}}), None)

    # The path-scaling scenario on crafted raw files in the guest's layout
    # (testdata/scaling, see testdata/README): points, CPU ticks, counters.
    scal = collect.results_from_dir(os.path.join(HERE, "testdata", "scaling"))
    ssc = scal["scenarios"][0]
    check("scaling: points of the transport", sorted(ssc["transports"]["mrc"]["points"]), ["p1", "p256", "p8"])
    check("scaling: runs in point order", [(r["point"]["paths_target"], r["rep"]) for r in ssc["transports"]["mrc"]["runs"]],
          [(1, 1), (1, 2), (8, 1), (8, 2), (256, 1), (256, 2)])
    check("scaling: CPU busy seconds", ssc["transports"]["mrc"]["runs"][0]["cpu"]["busy_s"], 2.0)
    check("scaling: CPU busy share", ssc["transports"]["mrc"]["runs"][0]["cpu"]["busy_share"], 0.5)
    # The same run from the raw files: 2.0 s of busy CPU over the
    # 149995520 bytes the server verified.
    check("recorded CPU per MB", run_cpu_per_mb(ssc["transports"]["mrc"]["runs"][0]), 2.0 * 1000 / 149.99552)
    pts = {p["paths_target"]: p for p in scaling_points(ssc)}
    check("scaling: µs per DATA packet, 1 path", pts[1]["us_per_data_pkt"], 21.0)
    check("scaling: µs per DATA packet, 8 paths", pts[8]["us_per_data_pkt"], 24.4)
    check("scaling: failed run left out of the median", (pts[256]["us_per_data_pkt"], pts[256]["ok"], pts[256]["n"]),
          (50.0, 1, 2))
    check("scaling: cost against the fewest paths", pts[256]["vs_first"], 50 / 21)
    check("scaling: µs per MRC packet of both ends", pts[1]["us_per_pkt"], median([2.0e6 / 150500, 2.2e6 / 150500]))
    check("scaling: paths seen", (pts[1]["paths_seen"], pts[256]["paths_seen"]), ([2], [256]))
    check("scaling: ev_per_plane", (pts[1]["ev_per_plane"], pts[8]["ev_per_plane"]), (1, 7))
    smd = markdown(scal, [])
    check("scaling: markdown row", "| 256 | 256 | 255 | 400 | 100 | 50.0 | 2.38× | 31.5 | 1.59 | 1/2 |" in smd, True)
    check("scaling: failure names the point", "`path-scaling` MRC (256 paths) rep 2:" in smd, True)
    check("scaling: no empty summary table", "### Summary" in smd, False)
    check("scaling: kind left out of the summary of the peers", summarize(ssc), [])

    # The pytorch scenario on crafted raw files in the guest's layout: an
    # MRC run that completes across the failure and a TCP run that the
    # harness killed.
    with tempfile.TemporaryDirectory() as d:
        sdir = os.path.join(d, "scenarios", "01-pytorch")
        os.makedirs(sdir)
        with open(os.path.join(sdir, "scenario.env"), "w") as f:
            f.write("id=pytorch\ntitle=PyTorch\nkind=training\nrates_mbit=[50,50]\nkill_plane=1\n"
                    "steps=6\nfail_step=3\nwait_s=10\n")
        end = '{"event": "end", "final_loss": 0.5, "final_loss_hex": "0x1.0p-1", "sha256": "%s", ' \
              '"ranks_agree": true, "train_s": 1.5}\n' % ("ab" * 32)
        for t, ms, tail_, meta in [
                ("mrc", [100, 110, 120, 900, 130, 100], end, "rank0_rc=0\nrank1_rc=0\nkilled=false\n"),
                ("tcp", [100, 100, 100], "", "rank0_rc=143\nrank1_rc=143\nkilled=true\n")]:
            rdir = os.path.join(sdir, t, "rep1")
            os.makedirs(rdir)
            with open(os.path.join(rdir, "meta.env"), "w") as f:
                f.write("rep=1\ntransport=%s\nsteps=6\nfail_step=3\nwait_s=10\nt0=1000.0\nt_kill=1000.35\n"
                        "t_end=1012.0\n%s" % (t, meta))
            with open(os.path.join(rdir, "rank0.out"), "w") as f:
                f.write('{"event": "start", "steps": 6}\n')
                tt = 1000.0
                for i, m in enumerate(ms):
                    tt += m / 1000
                    f.write('{"step": %d, "loss": 1.0, "step_ms": %s, "t": %.3f}\n' % (i, m, tt))
                f.write(tail_)
            open(os.path.join(rdir, "rank0.err"), "w").close()
            open(os.path.join(rdir, "rank1.err"), "w").close()
        tres = collect.results_from_dir(d)
    tsc = tres["scenarios"][0]
    mr = tsc["transports"]["mrc"]["runs"][0]
    tr_ = tsc["transports"]["tcp"]["runs"][0]
    check("training: MRC run ok", (mr["ok"], mr["error"]), (True, None))
    check("training: TCP run killed", (tr_["ok"], (tr_["error"] or "").startswith("killed by the harness after 3 of 6")),
          (False, True))
    check("training: step p50", run_step_pct(mr, 50), 110)
    check("training: step p99", run_step_pct(mr, 99), 900)
    check("training: longest step at the failure", run_fail_step_max(mr), 900)
    check("training: next step after the failure", run_fail_next_s(mr), 0.33 + 0.9 - 0.35, tol=1e-6)
    check("training: no step after the failure", (run_fail_step_max(tr_), run_fail_next_s(tr_)), (None, None))
    tmd = markdown(tres, [])
    check("training: MRC row", "| MRC | 1 | completed | 6/6 | 110 | 900 | 900 | 900 | 900 | 0.880 | `0x1.0p-1` "
          "| `abababababababab…` | yes |" in tmd, True)
    check("training: TCP row", "| TCP | 1 | stalled, killed 11.6 s after the failure | 3/6 |" in tmd, True)
    check("training: in the summary", "| PyTorch | training step p50, ms ↓ | 110 | failed (0/1) | – |" in tmd, True)
    check("training: not in the paths table", "| pytorch |" in tmd, False)

    # Plots, when matplotlib is there.
    have_mpl = importlib.util.find_spec("matplotlib") is not None
    if not have_mpl:
        print("skip plots: matplotlib not installed (apt-get install python3-matplotlib)")
    if have_mpl:
        with tempfile.TemporaryDirectory() as d:
            drawn = make_plots(syn, d)
            names = sorted(os.path.basename(p) for _, p in drawn)
            check("plots drawn", names, ["failover.svg", "goodput.svg", "latency.svg"])
            with open(os.path.join(d, "failover.svg")) as f:
                check("failover plot is SVG", "<svg" in f.read(2000), True)
            drawn = make_plots(scal, d)
            check("scaling plot drawn", [os.path.basename(p) for _, p in drawn], ["path-scaling.svg"])
            drawn = make_plots(tres, d)
            check("training plot drawn", [os.path.basename(p) for _, p in drawn], ["pytorch.svg"])

    print()
    print("%d passed, %d failed" % (count[0] - len(failures_), len(failures_)))
    return 1 if failures_ else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", nargs="?", default=os.path.join(HERE, "results.json"))
    ap.add_argument("--markdown", default=os.path.join(TOP, "BENCHMARKS.md"))
    ap.add_argument("--copy", default=os.path.join(HERE, "results.json"))
    ap.add_argument("--plots", default=os.path.join(HERE, "plots"))
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    report(a.results, a.markdown, a.copy, a.plots, plots=not a.no_plots)
    print("report: %s, %s%s" % (a.markdown, a.copy, "" if a.no_plots else ", " + a.plots + "/"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
