#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Turns the raw files of a benchmark run into results.json.

bench/run-guest.sh writes one directory per run; this module reads them
(standard library only: it runs inside the VM too) and checks each run the
way the selftests do: every connection's messages, bytes and digest equal
on both ends, both processes exited 0.

Layout of OUTDIR (written by run-guest.sh):

    meta.env, module.txt, footer.env, dmesg.txt
    scenarios/NN-ID/scenario.env         KEY=VALUE (JSON values stay JSON)
    scenarios/NN-ID/error                harness error, if any
    scenarios/NN-ID/params/*             topology: tc, addresses, offloads
    scenarios/NN-ID/PROTO/params/*       transport settings (first repetition)
    scenarios/NN-ID/PROTO/repK/meta.env  times (EPOCHREALTIME), exit codes
    scenarios/NN-ID/PROTO/repK/{client.json,server.json,*.err,setup.log,error}
    scenarios/NN-ID/PROTO/repK/snapshot/*, counters/*
    scenarios/NN-ID/PROTO/repK/{rank0.out,rank0.err,rank1.err}  the pytorch
                                         scenario's runs (training_record)
    scenarios/NN-ID/PROTO/pN/...         a scenario with points (path-scaling:
                                         N paths per connection) has a level
                                         more: PROTO/pN/params, PROTO/pN/repK

A run's meta.env holds the tick counts of the "cpu" line of /proc/stat at
the client's launch and exit (cpu_ticks_t0, cpu_ticks_client_exit, JSON
arrays; clk_tck ticks per second), for mrc-perf and mptcp_connect alike;
run records summarize them as "cpu", next to the bytes the server verified
("verify"), which bench/report.py divides them by.

Usage:
    collect.py header OUTDIR       JSON of meta.env and module.txt
    collect.py scenario SDIR       JSON of one scenario directory
    collect.py footer OUTDIR       JSON of footer.env, module.txt, dmesg.txt
    collect.py results OUTDIR      the whole results.json from OUTDIR
    collect.py extract LOG [-o F]  results.json rebuilt from the blocks that
                                   run-guest.sh --emit printed into LOG
"""

import base64
import gzip
import json
import os
import re
import sys

FORMAT = "mrc-bench/1"
PREFIX = "@@mrc-bench "
TEXT_LIMIT = 20000
# Transports in the order tables list them.
ORDER = ["mrc", "mptcp_connect", "mptcp", "sctp", "tcp"]


def read_text(path, limit=TEXT_LIMIT):
    try:
        with open(path, errors="replace") as f:
            s = f.read()
    except OSError:
        return None
    if len(s) > limit:
        s = s[:limit] + "\n[... %d more characters]\n" % (len(s) - limit)
    return s


def tail(path, n=400):
    s = read_text(path, limit=1 << 20)
    if s is None:
        return None
    s = s.strip()
    return s[-n:] if len(s) > n else s


def parse_value(v):
    """A KEY=VALUE value: JSON when it parses as JSON, else the string."""
    try:
        return json.loads(v)
    except ValueError:
        return v


def read_env(path):
    out = {}
    s = read_text(path, limit=1 << 20)
    if s is None:
        return out
    for line in s.splitlines():
        if "=" not in line:
            continue
        k, v = line.split("=", 1)
        out[k.strip()] = parse_value(v)
    return out


def read_json(path):
    s = read_text(path, limit=1 << 26)
    if not s or not s.strip():
        return None
    try:
        return json.loads(s)
    except ValueError:
        return None


def read_json_lines(path):
    s = read_text(path, limit=1 << 26)
    out = []
    for line in (s or "").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def read_dir(path):
    """Every file of a directory: parsed JSON for *.json, else text."""
    out = {}
    if not os.path.isdir(path):
        return out
    for name in sorted(os.listdir(path)):
        p = os.path.join(path, name)
        if not os.path.isfile(p):
            continue
        key = os.path.splitext(name)[0]
        if name.endswith(".json"):
            v = read_json(p)
            out[key] = v if v is not None else read_text(p)
        else:
            out[key] = read_text(p)
    return out


def _num(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def verify(client, server, parallel):
    """Compares the client's per-connection results with the server's.

    Returns (problems, summary): problems is a list of strings (empty when
    every connection arrived whole), summary has the byte totals.
    """
    problems = []
    conns = (client.get("conns") or [client]) if client else []
    by_conn = {}
    for s in server:
        if s.get("conn") is not None:
            by_conn[s["conn"]] = s
    sent = received = lost = 0
    digest_match = True
    for c in conns:
        i = c.get("conn")
        s = by_conn.get(i)
        cb = _num(c.get("bytes")) or 0
        sent += cb
        if s is None:
            problems.append("conn %s: no result from the server" % i)
            lost += cb
            digest_match = False
            continue
        sb = _num(s.get("bytes")) or 0
        received += sb
        lost += max(0, cb - sb)
        for k in ("msgs", "bytes", "digest"):
            if s.get(k) != c.get(k):
                problems.append("conn %s: server %s %s, client %s" % (i, k, s.get(k), c.get(k)))
                if k == "digest":
                    digest_match = False
    if client is not None and parallel is not None and len(server) != parallel:
        problems.append("%d server results for %d connections" % (len(server), parallel))
    summary = {
        "conns": len(conns),
        "bytes_sent": sent,
        "bytes_received": received,
        "bytes_lost": lost,
        "digest_match": digest_match and bool(conns),
    }
    return problems, summary


def first_error(client, server):
    if client and client.get("error"):
        return client["error"]
    for c in (client or {}).get("conns") or []:
        if c.get("error"):
            return "conn %s: %s" % (c.get("conn"), c["error"])
    for s in server:
        if s.get("error"):
            return "server conn %s: %s" % (s.get("conn"), s["error"])
    return None


def timing(meta, client):
    """Times of a run relative to the client's launch (t0), and the kill time
    on the mrc-perf timelines.

    The client's timeline starts after its connections are up; its start is
    estimated as (client exit - client elapsed_s), so the estimate is late by
    the client's exit latency at most, and the kill is placed that much
    early: recovery times come out longer, never shorter. The server's
    timeline starts at the hello, one path delay after the client's start.
    """
    t = {}
    t0 = _num(meta.get("t0"))
    texit = _num(meta.get("t_client_exit"))
    tkill = _num(meta.get("t_kill"))
    if t0 is not None and texit is not None:
        t["client_wall_s"] = round(texit - t0, 6)
    elapsed = _num((client or {}).get("elapsed_s"))
    if t0 is not None and texit is not None and elapsed is not None:
        t["start_after_launch_s"] = round(max(0.0, (texit - t0) - elapsed), 6)
    if t0 is not None and tkill is not None:
        t["kill_after_launch_s"] = round(tkill - t0, 6)
        if "start_after_launch_s" in t:
            t["kill_at_s"] = round(tkill - t0 - t["start_after_launch_s"], 6)
    tdone = _num(meta.get("t_kill_done"))
    if tkill is not None and tdone is not None:
        t["kill_command_s"] = round(tdone - tkill, 6)
    return t


def runtime_ms(*stderrs):
    """Transfer time printed by mptcp_connect, in ms: "transfer slower than
    expected! runtime N ms, ..." when over its limit, else a bare number at
    the end of stderr from the end that shut down first. The larger if both
    ends printed one."""
    found = []
    for text in stderrs:
        if not text:
            continue
        m = re.search(r"runtime (\d+) ms", text)
        if m is None:
            m = re.search(r"(?:^|\D)(\d+)\s*$", text)
        if m:
            found.append(int(m.group(1)))
    return max(found) if found else None


def run_record(rdir, transport):
    meta = read_env(os.path.join(rdir, "meta.env"))
    rec = {
        "rep": meta.get("rep"),
        "transport": transport,
        "ok": False,
        "error": None,
        "client_rc": meta.get("client_rc"),
        "server_rc": meta.get("server_rc"),
        "meta": meta,
        "setup_log": tail(os.path.join(rdir, "setup.log"), 2000),
        "client_stderr": tail(os.path.join(rdir, "client.err")),
        "server_stderr": tail(os.path.join(rdir, "server.err")),
        "snapshot": read_dir(os.path.join(rdir, "snapshot")),
        "counters": read_dir(os.path.join(rdir, "counters")),
    }
    harness_error = tail(os.path.join(rdir, "error"))

    if transport == "mptcp_connect":
        crc, src = meta.get("client_rc"), meta.get("server_rc")
        rt = runtime_ms(rec["client_stderr"], rec["server_stderr"])
        t0, t1 = _num(meta.get("t0")), _num(meta.get("t_client_exit"))
        wall = (t1 - t0) if t0 is not None and t1 is not None else None
        # Over its time limit (-T), mptcp_connect exits 1 after a complete
        # transfer: that is the selftest's verdict on speed, kept apart
        # from a failed transfer.
        slow = "transfer slower than expected" in (
            (rec["client_stderr"] or "") + (rec["server_stderr"] or ""))
        rec["tool"] = {
            "runtime_ms": rt,
            "wall_s": round(wall, 6) if wall is not None else None,
            "bytes": meta.get("bytes"),
            "max_time_ms": meta.get("max_time_ms"),
            "over_limit": slow,
            "cmp_sent_ok": meta.get("cmp_sent_ok"),
            "cmp_back_ok": meta.get("cmp_back_ok"),
        }
        exits_ok = (crc == 0 or (crc == 1 and slow)) and (src == 0 or (src == 1 and slow))
        ok = (harness_error is None and exits_ok
              and meta.get("cmp_sent_ok") is True and meta.get("cmp_back_ok") is True)
        rec["ok"] = ok
        if not ok:
            rec["error"] = harness_error or (
                "mptcp_connect exit status client %s, server %s, data %s: %s" % (
                    crc, src,
                    "intact" if meta.get("cmp_sent_ok") is True else "differs",
                    " ".join((rec["client_stderr"] or rec["server_stderr"] or "").splitlines()[-2:])))
        rec["verify"] = {
            "bytes_sent": meta.get("bytes"),
            "bytes_received": meta.get("bytes") if meta.get("cmp_sent_ok") is True else None,
            "bytes_lost": 0 if meta.get("cmp_sent_ok") is True else None,
            "digest_match": meta.get("cmp_sent_ok") is True,
        }
        cpu = cpu_usage(meta)
        if cpu is not None:
            rec["cpu"] = cpu
        return rec

    if meta.get("fail_step") is not None and meta.get("steps") is not None:
        return training_record(rdir, meta, rec, harness_error)

    client = read_json(os.path.join(rdir, "client.json"))
    server = read_json_lines(os.path.join(rdir, "server.json"))
    rec["client"] = client
    rec["server"] = server
    rec["timing"] = timing(meta, client)
    cpu = cpu_usage(meta)
    if cpu is not None:
        rec["cpu"] = cpu
    if meta.get("paths_target") is not None:
        rec["point"] = {"paths_target": meta.get("paths_target"), "ev_per_plane": meta.get("ev_per_plane")}
    problems, summary = verify(client, server, meta.get("conns"))
    rec["verify"] = summary
    err = harness_error or first_error(client, server)
    crc, src = meta.get("client_rc"), meta.get("server_rc")
    if err is None and crc in (124, 137):
        err = "client killed by the harness timeout (%s s)" % (meta.get("hard_timeout_s") or "?")
    if err is None and client is None:
        err = "client printed no result (exit status %s): %s" % (crc, rec["client_stderr"] or "")
    if err is None and problems:
        err = "verification: " + "; ".join(problems[:3])
    if err is None and (crc != 0 or src != 0):
        err = "exit status client %s, server %s: %s" % (
            crc, src, rec["server_stderr"] or rec["client_stderr"] or "")
    if meta.get("kill_failed") is True and err is None:
        err = "the harness could not take the plane down"
    rec["ok"] = err is None and bool(client and client.get("ok"))
    if not rec["ok"] and err is None:
        err = "client reported failure"
    rec["error"] = err
    return rec


def training_record(rdir, meta, rec, harness_error):
    """A run of the pytorch scenario (run-guest.sh run_training): rank 0's
    JSON lines of demo/pytorch/train.py (start, one per step, end), the
    ranks' exit statuses and stderr, and the time the plane went down. The
    run is ok when both ranks exited 0 with a final result on which they
    agree."""
    rec["client_stderr"] = tail(os.path.join(rdir, "rank1.err"))
    rec["server_stderr"] = tail(os.path.join(rdir, "rank0.err"))
    rc0, rc1 = meta.get("rank0_rc"), meta.get("rank1_rc")
    rec["server_rc"], rec["client_rc"] = rc0, rc1
    start = end = None
    steps = []
    for o in read_json_lines(os.path.join(rdir, "rank0.out")):
        if not isinstance(o, dict):
            continue
        if "step" in o:
            steps.append([o.get("t"), o.get("step_ms"), o.get("loss")])
        elif o.get("event") == "start":
            start = o
        elif o.get("event") == "end":
            end = o
    t_kill = _num(meta.get("t_kill"))
    rec["training"] = {
        "start": start, "end": end,
        # [Unix time at the step's end, step time in ms, rank 0's loss]
        "steps": steps,
        "steps_planned": meta.get("steps"),
        "t0": _num(meta.get("t0")), "t_end": _num(meta.get("t_end")), "t_kill": t_kill,
        "killed": meta.get("killed") is True,
    }
    err = harness_error
    if err is None and meta.get("kill_failed") is True:
        err = "the harness could not take the plane down"
    if err is None and meta.get("killed") is True:
        err = "killed by the harness after %d of %s steps: %s" % (
            len(steps), meta.get("steps"),
            "still running %s s after the failure" % meta.get("wait_s") if t_kill else "still running")
    if err is None and (rc0 != 0 or rc1 != 0):
        # The last error line of each rank that failed: the one that
        # failed first is often not rank 0 (whose error then only says
        # that the peer went away).
        said = []
        for r, rc, text in ((0, rc0, rec["server_stderr"]), (1, rc1, rec["client_stderr"])):
            lines = [l.strip() for l in (text or "").splitlines() if l.strip()]
            named = [l for l in lines if "Error" in l or "Timed out" in l or "what()" in l]
            if rc != 0 and (named or lines):
                said.append("rank %d: %s" % (r, (named or lines)[-1][:300]))
        err = "exit status rank 0 %s, rank 1 %s after %d of %s steps: %s" % (
            rc0, rc1, len(steps), meta.get("steps"), "; ".join(said))
    if err is None and end is None:
        err = "rank 0 printed no final result"
    if err is None and end.get("ranks_agree") is not True:
        err = "the ranks' final weights differ"
    rec["ok"] = err is None
    rec["error"] = err
    cpu = cpu_usage(meta)
    if cpu is not None:
        rec["cpu"] = cpu
    return rec


# Fields of the "cpu" line of /proc/stat, in order (guest and guest_nice
# are already counted in user and nice).
CPU_FIELDS = ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"]


def cpu_usage(meta):
    """CPU time of the whole machine (all CPUs) between the client's launch
    and its exit, in seconds, from the /proc/stat ticks in meta.env: busy
    (user, nice, system, irq, softirq), idle (idle, iowait), steal, and the
    busy share of busy + idle; None when not recorded."""
    a, b = meta.get("cpu_ticks_t0"), meta.get("cpu_ticks_client_exit")
    hz = _num(meta.get("clk_tck")) or 100
    if not isinstance(a, list) or not isinstance(b, list) or len(a) < 7 or len(b) < 7:
        return None
    d = {}
    for i, name in enumerate(CPU_FIELDS):
        if i < len(a) and i < len(b) and _num(a[i]) is not None and _num(b[i]) is not None:
            d[name] = (b[i] - a[i]) / hz
        else:
            d[name] = 0.0
    busy = d["user"] + d["nice"] + d["system"] + d["irq"] + d["softirq"]
    idle = d["idle"] + d["iowait"]
    out = {k: round(v, 6) for k, v in d.items()}
    out.update({
        "busy_s": round(busy, 6),
        "idle_s": round(idle, 6),
        "busy_share": round(busy / (busy + idle), 6) if busy + idle > 0 else None,
    })
    return out


def counter_lines(text):
    """NAME VALUE lines (/proc/net/mrc) as a dict of integers; None for
    text that has none (a missing file gives cat's error)."""
    out = {}
    for line in (text or "").splitlines():
        f = line.split()
        if len(f) == 2:
            try:
                out[f[0]] = int(f[1])
            except ValueError:
                pass
    return out or None


def rep_key(name):
    m = re.match(r"rep(\d+)$", name)
    return int(m.group(1)) if m else 1 << 30


def scenario_record(sdir):
    env = read_env(os.path.join(sdir, "scenario.env"))
    sc = {
        "id": env.get("id", os.path.basename(sdir)),
        "title": env.get("title"),
        "kind": env.get("kind"),
        "config": env,
        "error": tail(os.path.join(sdir, "error"), 2000),
        "params": read_dir(os.path.join(sdir, "params")),
        "transports": {},
    }
    names = [n for n in os.listdir(sdir) if os.path.isdir(os.path.join(sdir, n)) and n != "params"]
    names.sort(key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))
    for t in names:
        tdir = os.path.join(sdir, t)
        sc["transports"][t] = {
            "params": read_dir(os.path.join(tdir, "params")),
            "runs": runs_of(tdir, t),
        }
        # Points (pN): their parameters apart, their runs in "runs" in the
        # order of the points, each with its "point".
        points = sorted((n for n in os.listdir(tdir) if re.match(r"p\d+$", n)), key=lambda n: int(n[1:]))
        if points:
            sc["transports"][t]["points"] = {
                p: {"params": read_dir(os.path.join(tdir, p, "params"))} for p in points}
            for p in points:
                sc["transports"][t]["runs"] += runs_of(os.path.join(tdir, p), t)
    return sc


def runs_of(tdir, transport):
    reps = sorted((n for n in os.listdir(tdir) if re.match(r"rep\d+$", n)), key=rep_key)
    return [run_record(os.path.join(tdir, r), transport) for r in reps]


def header_record(outdir):
    return {
        "meta": read_env(os.path.join(outdir, "meta.env")),
        "module": read_text(os.path.join(outdir, "module.txt")),
    }


def footer_record(outdir):
    return {
        "footer": read_env(os.path.join(outdir, "footer.env")),
        "module": read_text(os.path.join(outdir, "module.txt")),
        "dmesg": read_text(os.path.join(outdir, "dmesg.txt")),
    }


def drop_gaps(scenario):
    """Removes mrc-perf's list of long gaps (gaps_us) from the runs of a
    scenario that is not a failover: only the failover table reads it, and
    100 slow connections list thousands."""
    if scenario.get("kind") == "failover":
        return scenario
    for tr in (scenario.get("transports") or {}).values():
        for run in tr.get("runs") or []:
            reports = list(run.get("server") or [])
            cl = run.get("client")
            if isinstance(cl, dict):
                reports += [cl] + list(cl.get("conns") or [])
            for r in reports:
                if isinstance(r, dict):
                    r.pop("gaps_us", None)
    return scenario


def assemble(header, scenarios, footer, notes=None):
    scenarios = [drop_gaps(sc) for sc in scenarios]
    res = {
        "format": FORMAT,
        "complete": footer is not None,
        "meta": (header or {}).get("meta", {}),
        "module": (footer or header or {}).get("module"),
        "scenarios": scenarios,
        "footer": (footer or {}).get("footer"),
        "dmesg": (footer or {}).get("dmesg"),
    }
    if notes:
        res["notes"] = notes
    return res


def results_from_dir(outdir):
    sroot = os.path.join(outdir, "scenarios")
    sdirs = sorted(os.listdir(sroot)) if os.path.isdir(sroot) else []
    scenarios = [scenario_record(os.path.join(sroot, d)) for d in sdirs]
    footer = footer_record(outdir) if os.path.exists(os.path.join(outdir, "footer.env")) else None
    return assemble(header_record(outdir), scenarios, footer)


def parse_blocks(text):
    """The blocks printed by run-guest.sh --emit: (kind, object) pairs, and
    the problems met on the way."""
    blocks, problems = [], []
    kind, lines = None, []
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        i = line.find(PREFIX)
        if i < 0:
            continue
        body = line[i + len(PREFIX):].strip()
        if body.startswith("begin "):
            kind, lines = body[6:].strip(), []
        elif body.startswith("end "):
            if kind is None:
                continue
            try:
                data = gzip.decompress(base64.b64decode("".join(lines)))
                blocks.append((kind, json.loads(data)))
            except (ValueError, OSError, EOFError) as e:
                problems.append("block %s: %s" % (kind, e))
            kind, lines = None, []
        elif kind is not None:
            lines.append(body)
    if kind is not None:
        problems.append("block %s: no end marker (output cut off)" % kind)
    return blocks, problems


def results_from_log(text):
    blocks, problems = parse_blocks(text)
    header, footer, scenarios = None, None, {}
    for kind, obj in blocks:
        if kind == "header":
            header = obj
        elif kind == "footer":
            footer = obj
        elif kind == "scenario":
            scenarios[obj.get("id")] = obj
    notes = list(problems)
    if header is None:
        notes.append("no header block: the VM run did not start the benchmark")
    if footer is None:
        last = None
        for raw in text.splitlines():
            m = re.match(r"\[bench [0-9:]+\] (\S+ \S+(?: p\d+)? rep \d+)\s*$", raw.rstrip("\r"))
            if m:
                last = m.group(1)
        notes.append("no footer block: the VM run ended before the benchmark finished"
                     + (" (last run started: %s; its scenario is missing)" % last if last else ""))
    return assemble(header, list(scenarios.values()), footer, notes)


def dumps(obj):
    """JSON with one key per line but arrays of numbers (the samples) on one
    line, so that the file stays readable and small."""
    text = json.dumps(obj, indent=1)
    return re.sub(r"\[\s*(-?[0-9][-0-9.eE+,\s]*?)\s*\]",
                  lambda m: "[" + re.sub(r"\s+", "", m.group(1)).replace(",", ", ") + "]",
                  text)


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    cmd, arg = argv[1], argv[2]
    if cmd == "header":
        obj = header_record(arg)
    elif cmd == "scenario":
        obj = scenario_record(arg)
    elif cmd == "footer":
        obj = footer_record(arg)
    elif cmd == "results":
        obj = results_from_dir(arg)
    elif cmd == "extract":
        with open(arg, errors="replace") as f:
            obj = results_from_log(f.read())
    else:
        sys.stderr.write(__doc__)
        return 2
    if cmd in ("header", "scenario", "footer"):
        text = json.dumps(obj, separators=(",", ":")) + "\n"
    else:
        text = dumps(obj) + "\n"
    if len(argv) == 5 and argv[3] == "-o":
        with open(argv[4], "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
