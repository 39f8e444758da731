#!/usr/bin/python3
"""SIGHUP reload of a running ternd: under load, failed reloads, coalescing, unchanged zones.

Starts one ternd (two workers, -c config) on a free loopback port serving two zones written into
a temporary directory, then:

  load        dnsperf at 20k q/s for 10 s while the zone is rewritten 20 times (temp file +
              rename, SOA serial bumped, TXT "gen-N" and an A record changed), each followed by
              SIGHUP and a bounded poll until gen-N is served; dnsperf must lose nothing and see
              only NOERROR
  syntax      a zone with a syntax error: the reload fails (logged with file:line), the old data
              keeps answering; the fixed file then reloads
  missing     the zone file renamed away: the reload fails (logged), the old data keeps answering
  config      ternd.yaml truncated to 0 bytes, then "{}", then without its listen line: each
              reload fails saying why (a start would refuse each), both zones keep answering;
              the restored config reloads
  coalesce    5 rewrites + SIGHUPs back to back: ternd stays up, ends with the newest data, and
              logs between 1 and 5 successful reloads
  unchanged   two zones, only one changed: the reload logs "1 changed" (then both: "2 changed")

The contract (see the ternd README): a successful reload logs a line with "reload" and "ok"
(and "N changed"), a failed one a line with "reload" and "failed" naming file:line. Prints one
line per check and "N passed, N failed"; exits 1 on any failure.

    test_reload.py --ternd build/ternd      (or TERND=build/ternd test_reload.py)
"""

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

import dns.exception
import dns.message
import dns.query
import dns.rcode

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402

Failure = servers.Failure
expect = servers.expect
write_atomic = servers.write_atomic

MAIN = "reload.test"
OTHER = "other.test"
SERIAL0 = 2024010100          # serial of generation 0; generation N has SERIAL0 + N
QUERY_TIMEOUT = 1.0           # seconds for one dnspython query
VISIBLE_TIMEOUT = 5.0         # seconds from SIGHUP until the new data must be served
LOG_TIMEOUT = 5.0             # seconds from SIGHUP until the reload's log line must appear
QUIET = 1.5                   # seconds without new reload lines that count as "settled"

# dnsperf: 20k q/s for 10 s from 4 clients, 200 in flight; well above MIN_SENT when it really ran
LOAD_RATE = 20000
LOAD_SECS = 10
LOAD_ROUNDS = 20
LOAD_SPACING = 0.4            # seconds between the starts of two rewrite rounds under load
MIN_SENT = 150000

BAD_LINE = 8                  # line number of the syntax error in the broken zone (see zone_text)






# --- zone files

def zone_text(origin, gen, tag, broken=False):
    """The zone at generation gen: SOA serial, a TXT "<tag>-<gen>" and an A record that change.

    broken=True puts an unparsable record on line BAD_LINE."""
    lines = [
        "$ORIGIN %s." % origin,                                            # 1
        "$TTL 60",                                                          # 2
        "@ IN SOA ns1 hostmaster %d 3600 600 86400 60" % (SERIAL0 + gen),  # 3
        "@ IN NS ns1",                                                      # 4
        "ns1 IN A 192.0.2.1",                                               # 5
        "www IN A 192.0.2.10",                                              # 6
        'gen IN TXT "%s-%d"' % (tag, gen),                                  # 7
    ]
    if broken:
        lines.append("bad IN A 300.1.2.3")                                 # 8 = BAD_LINE
    lines.append("ver IN A 198.51.100.%d" % (gen % 250 + 1))
    return "\n".join(lines) + "\n"




class Zone:
    def __init__(self, workdir, origin, tag):
        self.origin = origin
        self.tag = tag
        self.path = os.path.join(workdir, origin + ".zone")
        self.gen = 0          # the generation last written
        write_atomic(self.path, zone_text(origin, 0, tag))

    def bump(self, broken=False):
        self.gen += 1
        write_atomic(self.path, zone_text(self.origin, self.gen, self.tag, broken))
        return self.gen

    def txt(self, gen):
        return "%s-%d" % (self.tag, gen)


# --- ternd's log

def is_ok_line(line):
    low = line.lower()
    return "reload" in low and re.search(r"\bok\b", low) is not None and "failed" not in low


def is_failed_line(line):
    low = line.lower()
    return "reload" in low and "failed" in low


class Log:
    """ternd's stdout+stderr, which servers.Server redirects to a file."""

    def __init__(self, path):
        self.path = path

    def lines(self):
        try:
            with open(self.path, "rb") as f:
                data = f.read().decode("utf-8", "replace")
        except OSError:
            return []
        return data.split("\n")[:-1]  # complete lines only

    def mark(self):
        return len(self.lines())

    def since(self, mark):
        return self.lines()[mark:]

    def wait_for(self, mark, pred, count=1, timeout=LOG_TIMEOUT):
        """Lines after mark that satisfy pred, once there are count of them (bounded wait)."""
        deadline = time.monotonic() + timeout
        while True:
            got = [l for l in self.since(mark) if pred(l)]
            if len(got) >= count or time.monotonic() >= deadline:
                return got
            time.sleep(0.02)

    def settle(self, mark, timeout=10.0):
        """Wait until no reload line has appeared for QUIET seconds (bounded); returns them."""
        deadline = time.monotonic() + timeout
        last, since = None, time.monotonic()
        while time.monotonic() < deadline:
            got = [l for l in self.since(mark) if "reload" in l.lower()]
            if got != last:
                last, since = got, time.monotonic()
            elif time.monotonic() - since >= QUIET:
                break
            time.sleep(0.05)
        return last or []


# --- queries

class Client:
    def __init__(self, port):
        self.port = port

    def query(self, name, qtype):
        q = dns.message.make_query(name, qtype)
        return dns.query.udp(q, servers.LOOPBACK, port=self.port, timeout=QUERY_TIMEOUT)

    def served(self, zone):
        """(TXT text, SOA serial) currently served for zone; None for what did not answer."""
        txt = serial = None
        try:
            r = self.query("gen.%s" % zone.origin, "TXT")
            if r.rcode() == dns.rcode.NOERROR and r.answer:
                txt = b"".join(r.answer[0][0].strings).decode()
            r = self.query(zone.origin, "SOA")
            if r.rcode() == dns.rcode.NOERROR and r.answer:
                serial = r.answer[0][0].serial
        except (dns.exception.Timeout, OSError):
            pass
        return txt, serial

    def wait_gen(self, zone, gen, timeout=VISIBLE_TIMEOUT):
        """Poll (bounded) until zone answers with generation gen; returns the last seen state."""
        deadline = time.monotonic() + timeout
        while True:
            txt, serial = self.served(zone)
            if txt == zone.txt(gen) and serial == SERIAL0 + gen:
                return True, (txt, serial)
            if time.monotonic() >= deadline:
                return False, (txt, serial)
            time.sleep(0.01)

    def expect_gen(self, zone, gen, what, timeout=VISIBLE_TIMEOUT):
        ok, seen = self.wait_gen(zone, gen, timeout)
        expect(ok, "%s: %s not serving %s/serial %d within %.0f s (serving TXT %r, serial %r)"
               % (what, zone.origin, zone.txt(gen), SERIAL0 + gen, timeout, seen[0], seen[1]))

    def expect_still(self, zone, gen, what, samples=10):
        """The old generation keeps answering, sampled over ~0.5 s."""
        for _ in range(samples):
            txt, serial = self.served(zone)
            expect(txt == zone.txt(gen) and serial == SERIAL0 + gen,
                   "%s: expected the old %s/serial %d to keep answering, got TXT %r serial %r"
                   % (what, zone.txt(gen), SERIAL0 + gen, txt, serial))
            time.sleep(0.05)


# --- the test

class Ctx:
    def __init__(self, tern, main, other, workdir):
        self.tern = tern
        self.main = main
        self.other = other
        self.workdir = workdir
        self.c = Client(tern.port)
        self.log = Log(tern.log_path)
        self.served_main = 0   # generation of MAIN known to be served
        self.served_other = 0

    def hup(self):
        expect(self.tern.proc.poll() is None, "ternd is not running (exit %s)"
               % self.tern.proc.returncode)
        os.kill(self.tern.proc.pid, signal.SIGHUP)

    def wait_ok(self, mark, what):
        got = self.log.wait_for(mark, lambda l: is_ok_line(l) or is_failed_line(l))
        expect(got, "%s: no reload ok line within %.0f s" % (what, LOG_TIMEOUT))
        expect(is_ok_line(got[0]), "%s: reload failed: %s" % (what, got[0]))
        return got[0]


def dnsperf_output(proc):
    try:
        out, _ = proc.communicate(timeout=LOAD_SECS + 30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate(timeout=10)
        raise Failure("dnsperf did not finish within %d s:\n%s" % (LOAD_SECS + 30, out[-2000:]))
    return out


def parse_dnsperf(out):
    def num(pat):
        m = re.search(pat, out)
        return int(m.group(1)) if m else None

    rcodes = {}
    for line in out.splitlines():
        if line.strip().startswith("Response codes:"):
            rcodes = {k: int(v) for k, v in re.findall(r"([A-Z]\w*) (\d+) \(", line)}
    return {"sent": num(r"Queries sent:\s+(\d+)"),
            "completed": num(r"Queries completed:\s+(\d+)"),
            "lost": num(r"Queries lost:\s+(\d+)"),
            "rcodes": rcodes}


def check_load(ctx):
    """20 rewrites + SIGHUPs while dnsperf runs; returns a list of (name, error or None)."""
    qfile = os.path.join(ctx.workdir, "queries.txt")
    with open(qfile, "w") as f:
        for origin in (MAIN, OTHER):
            f.write("%s SOA\n%s NS\nwww.%s A\ngen.%s TXT\nver.%s A\nns1.%s A\n"
                    % ((origin,) * 6))
    argv = ["dnsperf", "-s", servers.LOOPBACK, "-p", str(ctx.tern.port), "-d", qfile,
            "-Q", str(LOAD_RATE), "-l", str(LOAD_SECS), "-c", "4", "-q", "200"]
    mark = ctx.log.mark()
    perf = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            stdin=subprocess.DEVNULL)
    results = []
    try:
        err = None
        start = time.monotonic() + 0.5  # let the load get going first
        slow = []
        for i in range(LOAD_ROUNDS):
            delay = start + i * LOAD_SPACING - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            gen = ctx.main.bump()
            t0 = time.monotonic()
            try:
                ctx.hup()
                ctx.c.expect_gen(ctx.main, gen, "round %d/%d" % (i + 1, LOAD_ROUNDS))
            except Failure as e:
                err = str(e)
                break
            ctx.served_main = gen
            slow.append(time.monotonic() - t0)
            if perf.poll() is not None and i + 1 < LOAD_ROUNDS:
                err = "dnsperf ended after %d of %d rounds: the rounds were too slow" % (
                    i + 1, LOAD_ROUNDS)
                break
        if err is None:
            print("  load: %d reloads under load, SIGHUP→visible max %.0f ms"
                  % (LOAD_ROUNDS, max(slow) * 1000))
        results.append(("load_reload_visible", err))
        out = dnsperf_output(perf)
    except BaseException:
        if perf.poll() is None:
            perf.kill()
            perf.wait(timeout=10)
        raise
    p = parse_dnsperf(out)
    print("  load: dnsperf sent %s, completed %s, lost %s, rcodes %s"
          % (p["sent"], p["completed"], p["lost"], p["rcodes"]))
    if p["sent"] is None or p["lost"] is None:
        err = "cannot parse the dnsperf output (exit %s):\n%s" % (perf.returncode, out[-2000:])
        return results + [("load_dnsperf_ran", err)]
    results.append(("load_volume", None if p["sent"] >= MIN_SENT else
                    "dnsperf sent only %d queries (< %d): the load did not really run"
                    % (p["sent"], MIN_SENT)))
    results.append(("load_no_loss", None if p["lost"] == 0 else
                    "dnsperf lost %d of %d queries" % (p["lost"], p["sent"])))
    bad = {k: v for k, v in p["rcodes"].items() if k != "NOERROR"}
    results.append(("load_all_noerror", None if p["rcodes"] and not bad else
                    "response codes other than NOERROR: %s" % (bad or "none parsed")))
    # one successful reload per SIGHUP (each was sent after the previous one was visible)
    if results[0][1] is None:
        lines = ctx.log.wait_for(mark, is_ok_line, count=LOAD_ROUNDS)
        fails = [l for l in ctx.log.since(mark) if is_failed_line(l)]
        err = None
        if fails:
            err = "failed reloads under load: %s" % fails[:3]
        elif len(lines) < LOAD_ROUNDS:
            err = "%d reload ok lines for %d SIGHUPs" % (len(lines), LOAD_ROUNDS)
        results.append(("load_reload_logged", err))
    return results


def check_syntax_error(ctx):
    z = ctx.main
    old = ctx.served_main
    mark = ctx.log.mark()
    z.bump(broken=True)
    ctx.hup()
    got = ctx.log.wait_for(mark, lambda l: is_failed_line(l) or is_ok_line(l))
    expect(got, "no reload failed line within %.0f s" % LOG_TIMEOUT)
    line = got[0]
    expect(is_failed_line(line), "a zone with a syntax error reloaded: %s" % line)
    base = os.path.basename(z.path)
    m = re.search(re.escape(base) + r":(\d+)", line)
    expect(m, "the failed line does not name %s:LINE: %s" % (base, line))
    # a tokenizer that has consumed the line's newline may report the next line: allow that
    expect(int(m.group(1)) in (BAD_LINE, BAD_LINE + 1), "the failed line names line %s, the "
           "error is on line %d: %s" % (m.group(1), BAD_LINE, line))
    ctx.c.expect_still(z, old, "after the failed reload")
    # fix it: the next reload serves the new data
    mark = ctx.log.mark()
    gen = z.bump()
    ctx.hup()
    ctx.c.expect_gen(z, gen, "after fixing the zone")
    ctx.served_main = gen
    ctx.wait_ok(mark, "after fixing the zone")


def check_missing_file(ctx):
    z = ctx.main
    old = ctx.served_main
    away = z.path + ".away"
    mark = ctx.log.mark()
    os.rename(z.path, away)
    try:
        ctx.hup()
        got = ctx.log.wait_for(mark, lambda l: is_failed_line(l) or is_ok_line(l))
        expect(got, "no reload failed line within %.0f s" % LOG_TIMEOUT)
        expect(is_failed_line(got[0]), "reload with a missing zone file did not fail: %s"
               % got[0])
        expect(os.path.basename(z.path) in got[0], "the failed line does not name %s: %s"
               % (os.path.basename(z.path), got[0]))
        ctx.c.expect_still(z, old, "after the failed reload")
    finally:
        if os.path.exists(away):
            os.remove(away)
    mark = ctx.log.mark()
    gen = z.bump()  # the file is back, with new data
    ctx.hup()
    ctx.c.expect_gen(z, gen, "after restoring the zone file")
    ctx.served_main = gen
    ctx.wait_ok(mark, "after restoring the zone file")


def check_config_refused(ctx):
    """A config that would not start is refused by a reload, which keeps the config in force."""
    conf = os.path.join(ctx.tern.dir, "ternd.yaml")
    with open(conf) as f:
        good = f.read()
    no_listen = re.sub(r"(?m)^listen:.*\n", "", good)
    expect(no_listen != good, "the test's config has no listen line to leave out:\n%s" % good)
    cases = [("truncated to 0 bytes", "", "holds no options"),
             ("{}", "{}\n", "empty mapping"),
             ("without a listen address", no_listen, "no listen address")]
    try:
        for what, text, why in cases:
            mark = ctx.log.mark()
            with open(conf, "w") as f:  # in place, as a crashed editor or a cut copy leaves it
                f.write(text)
            ctx.hup()
            got = ctx.log.wait_for(mark, lambda l: is_failed_line(l) or is_ok_line(l))
            expect(got, "config %s: no reload line within %.0f s" % (what, LOG_TIMEOUT))
            expect(is_failed_line(got[0]), "a config %s reloaded: %s" % (what, got[0]))
            expect(why in got[0], "config %s: the failed line does not say '%s': %s"
                   % (what, why, got[0]))
            ctx.c.expect_still(ctx.main, ctx.served_main, "after the config %s" % what)
            ctx.c.expect_still(ctx.other, ctx.served_other, "after the config %s" % what)
    finally:
        with open(conf, "w") as f:
            f.write(good)
    # the config restored: a reload takes the zone's next generation
    mark = ctx.log.mark()
    gen = ctx.main.bump()
    ctx.hup()
    ctx.c.expect_gen(ctx.main, gen, "after restoring the config")
    ctx.served_main = gen
    ctx.wait_ok(mark, "after restoring the config")


def check_coalesce(ctx):
    z = ctx.main
    mark = ctx.log.mark()
    for _ in range(5):
        gen = z.bump()
        ctx.hup()
    ctx.c.expect_gen(z, gen, "after 5 SIGHUPs back to back", timeout=10)
    ctx.served_main = gen
    lines = ctx.log.settle(mark)
    expect(ctx.tern.proc.poll() is None, "ternd exited (%s)" % ctx.tern.proc.returncode)
    oks = [l for l in lines if is_ok_line(l)]
    fails = [l for l in lines if is_failed_line(l)]
    print("  coalesce: 5 SIGHUPs -> %d reloads" % len(oks))
    expect(not fails, "failed reloads in the burst: %s" % fails[:3])
    expect(1 <= len(oks) <= 5, "%d reload ok lines after 5 SIGHUPs (want 1..5)" % len(oks))
    ctx.c.expect_still(z, gen, "after the burst settled")


def changed_count(line):
    m = re.search(r"(\d+)\s+(?:zones?\s+)?changed", line)
    return int(m.group(1)) if m else None


def check_unchanged(ctx):
    for what, zones, want in (("only %s" % OTHER, [ctx.other], 1),
                              ("both zones", [ctx.main, ctx.other], 2)):
        mark = ctx.log.mark()
        gens = [(z, z.bump()) for z in zones]
        ctx.hup()
        line = ctx.wait_ok(mark, "changed " + what)
        for z, g in gens:
            ctx.c.expect_gen(z, g, "changed " + what)
        ctx.served_main, ctx.served_other = ctx.main.gen, ctx.other.gen
        n = changed_count(line)
        expect(n is not None, "changed %s: no 'N changed' in the reload line: %s" % (what, line))
        expect(n == want, "changed %s: the reload line says %d changed, want %d: %s"
               % (what, n, want, line))
        if ctx.main not in zones:  # the untouched zone still answers with its data
            ctx.c.expect_still(ctx.main, ctx.main.gen, "untouched " + MAIN, samples=2)


def rich_text(origin, serial, edit):
    """A zone of a few hundred names for check_patched: hosts, an MX with in-zone targets, a
    wildcard, a CNAME chain, an empty non-terminal, a delegation with glue. edit=True is the same
    zone changed the way an operator's reload changes it: a new serial, a record changed, a name
    gone, a name added under a new empty non-terminal, an NS added at the apex, a wildcard gone,
    a CNAME swapped for an address, a name's RRs reordered."""
    lines = ["$ORIGIN %s." % origin, "$TTL 300",
             "@ IN SOA ns1 hostmaster %d 3600 600 86400 60" % serial,
             "@ IN NS ns1", "@ IN MX 10 mx1", "@ IN MX 20 mx2",
             "ns1 IN A 192.0.2.1", "mx1 IN A 192.0.2.2", "mx2 IN AAAA 2001:db8::2",
             "*.wild IN TXT \"wild\"", "a.b.c IN A 192.0.2.3",
             "sub IN NS ns.sub", "ns.sub IN A 192.0.2.53",
             "alias IN CNAME www", "www IN A 192.0.2.10"]
    if edit:
        lines[5] = "@ IN MX 20 mx3"                   # a target changed
        lines += ["@ IN NS ns2", "ns2 IN A 192.0.2.4", "mx3 IN A 192.0.2.5",
                  "x.y.c IN A 192.0.2.6"]             # y.c: a new empty non-terminal
        lines.remove("*.wild IN TXT \"wild\"")
        lines[lines.index("alias IN CNAME www")] = "alias IN A 192.0.2.11"
    order = range(300)
    for i in order:
        if edit and i == 7:
            continue                                   # h7 gone
        addrs = ["10.0.%d.%d" % (i >> 8, i & 255), "10.1.%d.%d" % (i >> 8, i & 255)]
        if edit and i == 9:
            addrs.reverse()                            # an RRset in another order
        if edit and i == 11:
            addrs[0] = "10.9.9.9"
        lines += ["h%d IN A %s" % (i, a) for a in addrs]
    return "\n".join(lines) + "\n"


def wire_answers(port, origin, names, types):
    """Every (name, type) asked over UDP: the response bytes as they came (dnspython's to_wire()
    would shuffle RRsets), without the ID."""
    out = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(QUERY_TIMEOUT)
        for n in names:
            for t in types:
                q = dns.message.make_query("%s.%s" % (n, origin) if n else origin, t)
                q.id = 0x4242
                sock.sendto(q.to_wire(), (servers.LOOPBACK, port))
                out[(n, t)] = sock.recv(65535)[2:]
    return out


def check_patched(ctx):
    """A changed zone file is read as a change of the version served (zone_file_patch): the
    reload says it patched, and every answer is byte for byte what a second ternd that reads the
    same file in full gives."""
    z = ctx.main
    mark = ctx.log.mark()
    write_atomic(z.path, rich_text(z.origin, SERIAL0 + 1000, False))
    ctx.hup()
    ctx.wait_ok(mark, "the rich zone")
    mark = ctx.log.mark()
    write_atomic(z.path, rich_text(z.origin, SERIAL0 + 1001, True))
    ctx.hup()
    ctx.wait_ok(mark, "the rich zone changed")
    patched = [l for l in ctx.log.since(mark) if "patched" in l and z.origin in l]
    expect(patched, "no 'patched' line for %s in the log: %s" % (z.origin, ctx.log.since(mark)))
    names = ["", "ns1", "ns2", "mx1", "mx2", "mx3", "x.wild", "wild", "a.b.c", "b.c", "c", "y.c",
             "x.y.c", "sub", "ns.sub", "deep.sub", "alias", "www", "nx", "h7", "h9", "h11", "h12",
             "h299", "h300"]
    types = ["A", "AAAA", "MX", "NS", "SOA", "TXT", "CNAME"]
    got = wire_answers(ctx.tern.port, z.origin, names, types)
    fresh_dir = os.path.join(ctx.workdir, "fresh")
    os.makedirs(fresh_dir, exist_ok=True)
    ref = servers.Ternd(fresh_dir, [(z.origin, z.path)], ctx.tern.binary, workers=1)
    try:
        ref.start(z.origin)
        want = wire_answers(ref.port, z.origin, names, types)
    finally:
        ref.stop()
    diff = [k for k in want if want[k] != got[k]]
    expect(not diff, "%d of %d answers differ from a full read, first %s"
           % (len(diff), len(want), diff[:3]))
    print("  patched reload: %d answers equal a full read's" % len(want))


STEPS = [("syntax_error_keeps_old_data", check_syntax_error),
         ("missing_file_keeps_old_data", check_missing_file),
         ("bad_config_keeps_old_config", check_config_refused),
         ("coalesced_sighups", check_coalesce),
         ("unchanged_zones_not_counted", check_unchanged),
         ("patched_reload_equals_full_read", check_patched)]


def run(ctx):
    results = []
    try:
        results += check_load(ctx)
    except Failure as e:
        results.append(("load", str(e)))
    for name, fn in STEPS:
        if ctx.tern.proc.poll() is not None:
            results.append(("server_alive", "ternd exited (%s) before %s:\n%s"
                            % (ctx.tern.proc.returncode, name, ctx.tern.log_text())))
            break
        try:
            fn(ctx)
            results.append((name, None))
        except Failure as e:
            results.append((name, str(e)))
        except Exception as e:
            results.append((name, "%s: %s" % (type(e).__name__, e)))
            if os.environ.get("VERBOSE"):
                traceback.print_exc()
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ternd", default=os.environ.get("TERND"))
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    if not args.ternd or not os.access(args.ternd, os.X_OK):
        print("test_reload: no ternd binary (--ternd PATH or $TERND), got %r" % args.ternd)
        return 2
    if servers.find_program("dnsperf") is None:
        print("test_reload: dnsperf is not installed; .ci/install-deps installs it "
              "(Debian package dnsperf)")
        print("0 passed, 1 failed")
        return 1
    binary = os.path.abspath(args.ternd)
    workdir = tempfile.mkdtemp(prefix="tern-reload-")
    results = []
    tern = None
    try:
        zdir = os.path.join(workdir, "zones")
        os.makedirs(zdir)
        main_zone = Zone(zdir, MAIN, "gen")
        other_zone = Zone(zdir, OTHER, "other")
        tern = servers.Ternd(workdir, [(MAIN, main_zone.path), (OTHER, other_zone.path)],
                             binary, workers=2)
        try:
            tern.start(MAIN)
        except RuntimeError as e:
            print("test_reload: %s" % e)
            print("0 passed, 1 failed")
            return 1
        ctx = Ctx(tern, main_zone, other_zone, workdir)
        results = run(ctx)
        if tern.proc.poll() is not None:
            results.append(("server_alive", "ternd exited (%s):\n%s"
                            % (tern.proc.returncode, tern.log_text())))
    finally:
        if tern is not None:
            tern.stop()
            bad = servers.clean_exit_result(tern)
            if bad:
                results.append(bad)
            elif any(err for _, err in results):
                print("--- ternd log (tail) ---\n%s--- end ---" % tern.log_text(3000))
        if args.keep:
            print("kept %s" % workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    return servers.report(results, 32)


if __name__ == "__main__":
    sys.exit(main())
