#!/usr/bin/python3
"""conf/grafana/tern.json against a real ternd's /metrics, so the dashboard cannot drift from the
exposition.

ternd runs with a zone, health checks (tcp, on a listener of the test's own: the tern_health_*
families exist only with endpoints), the metrics listener, and one reload (the tern_last_reload_*
samples exist only after one). Then:

  json        the file is valid JSON with a title, a uid, unique panel ids, every panel's grid
              position, and the $datasource / $instance variables its queries use
  metrics     every tern_* name in every query is a family (or a sample name) of /metrics
  labels      every label a query matches on, groups by or names in its legend is a label of
              that query's metrics (instance and job are Prometheus' own); every value an
              equality matcher wants is a value some sample has

    test_grafana.py --ternd build/ternd --ternctl build/ternctl [--dashboard conf/grafana/tern.json]
"""

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
from servers import Failure, Ternd, expect, run_check  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DASHBOARD = os.path.join(HERE, "..", "..", "conf", "grafana", "tern.json")
PROM_LABELS = {"instance", "job"}  # added by Prometheus at scrape time
WAIT = 15.0

ZONE = """$ORIGIN grafana.test.
@    300 IN SOA ns1.grafana.test. h.grafana.test. 1 3600 600 86400 60
@    300 IN NS  ns1.grafana.test.
ns1  300 IN A   192.0.2.53
svc    5 IN A   127.0.0.40
"""

# [a-zA-Z_:][a-zA-Z0-9_:]* names that are ours
METRIC = re.compile(r"\btern_[a-zA-Z0-9_:]*")
SELECTOR = re.compile(r"\b(tern_[a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?')
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
LEGEND = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+\S+$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_exposition(text):
    """{family or sample name: {label: set of values}} from the text format."""
    fams = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            fams.setdefault(line.split()[2], {})
            continue
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            raise Failure("unparsable /metrics line: %r" % line)
        labels = fams.setdefault(m.group(1), {})
        for k, v in LABEL.findall(m.group(2) or ""):
            labels.setdefault(k, set()).add(v)
    return fams


def panels_of(dash):
    for p in dash.get("panels", []):
        yield p
        for q in p.get("panels", []):  # collapsed rows hold theirs
            yield q


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ternd", required=True)
    ap.add_argument("--ternctl", required=True)
    ap.add_argument("--dashboard", default=DASHBOARD)
    args = ap.parse_args()
    args.ternd, args.ternctl = os.path.abspath(args.ternd), os.path.abspath(args.ternctl)
    results = []
    work = tempfile.mkdtemp(prefix="tern-grafana-")
    tport = servers.free_port()
    target = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    target.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    target.bind(("127.0.0.40", tport))
    target.listen(16)
    zone = os.path.join(work, "grafana.zone")
    with open(zone, "w") as f:
        f.write(ZONE)
    mport = servers.free_port()
    sock = os.path.join(work, "ctl.sock")
    extra = """control_socket: "%s"
metrics_listen: "127.0.0.1:%d"
health:
  check_interval_ms: 200
  checks:
    - {address: 127.0.0.40, protocol: tcp, port: %d, timeout: 300, up_count: 1, down_count: -1}
""" % (sock, mport, tport)
    tern = Ternd(work, [("grafana.test", zone)], args.ternd, extra_yaml=extra)
    state = {}
    try:
        tern.start("grafana.test")

        def dashboard_json():
            with open(args.dashboard) as f:
                dash = json.load(f)
            expect(dash.get("title") and dash.get("uid"), "title and uid")
            ids = [p["id"] for p in panels_of(dash)]
            expect(len(ids) == len(set(ids)), "panel ids repeat: %s" % ids)
            names = {v["name"] for v in dash["templating"]["list"]}
            expect({"datasource", "instance"} <= names, "variables: %s" % names)
            exprs = []
            for p in panels_of(dash):
                g = p.get("gridPos", {})
                expect(all(k in g for k in ("h", "w", "x", "y")) and g["x"] + g["w"] <= 24,
                       "panel %r: gridPos %s" % (p.get("title"), g))
                for t in p.get("targets", []):
                    expect(t.get("expr") and t.get("refId"), "panel %r: a target without expr"
                           % p.get("title"))
                    expect("$instance" in t["expr"], "panel %r: %s does not select $instance"
                           % (p.get("title"), t["expr"]))
                    expect(t.get("datasource", {}).get("uid") == "${datasource}",
                           "panel %r: datasource %s" % (p.get("title"), t.get("datasource")))
                    exprs.append((p["title"], t["expr"], t.get("legendFormat", "")))
            expect(len(exprs) >= 20, "only %d queries" % len(exprs))
            state["exprs"] = exprs
            print("  %d panels, %d queries" % (len(ids), len(exprs)))
        run_check(results, "json", dashboard_json)

        # one reload (for tern_last_reload_*), and the endpoint checked at least once
        subprocess.run([args.ternctl, "-s", sock, "reload"], check=True, capture_output=True,
                       timeout=60)
        deadline = time.monotonic() + WAIT
        while True:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % mport, timeout=5) as r:
                text = r.read().decode()
            if "tern_health_endpoint_up{" in text and "tern_last_reload_success 1" in text:
                break
            if time.monotonic() > deadline:
                raise Failure("no health sample or reload in /metrics within %.0f s" % WAIT)
            time.sleep(0.2)
        fams = parse_exposition(text)

        def metrics():
            missing = set()
            for title, expr, _ in state["exprs"]:
                for name in METRIC.findall(expr):
                    if name not in fams:
                        missing.add("%s (panel %r)" % (name, title))
            expect(not missing, "not in /metrics: %s" % sorted(missing))
            used = {n for _, e, _ in state["exprs"] for n in METRIC.findall(e)}
            print("  %d families used, all in /metrics (%d there)" % (len(used), len(fams)))
        run_check(results, "metrics", metrics)

        def labels():
            bad = []
            for title, expr, legend in state["exprs"]:
                names = set(METRIC.findall(expr))
                have = set(PROM_LABELS)
                for n in names:
                    have |= set(fams.get(n, {}))
                for name, body in SELECTOR.findall(expr):
                    for lab, op, val in MATCHER.findall(body):
                        if lab in PROM_LABELS:
                            continue
                        if lab not in fams.get(name, {}):
                            bad.append("%s has no label %s (panel %r)" % (name, lab, title))
                        elif op == "=" and val not in fams[name][lab]:
                            bad.append('%s{%s="%s"}: no such sample (panel %r)'
                                       % (name, lab, val, title))
                for group in GROUPING.findall(expr):
                    for lab in (x.strip() for x in group.split(",") if x.strip()):
                        if lab not in have:
                            bad.append("by (%s): not a label of %s (panel %r)"
                                       % (lab, sorted(names), title))
                for lab in LEGEND.findall(legend):
                    if lab not in have:
                        bad.append("legend {{%s}}: not a label of %s (panel %r)"
                                   % (lab, sorted(names), title))
            expect(not bad, "; ".join(bad))
        run_check(results, "labels", labels)
    except (Failure, RuntimeError, OSError, subprocess.SubprocessError) as e:
        results.append(("setup", str(e)))
    finally:
        tern.stop()
        target.close()
    rc = servers.finish(tern, results)
    shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
