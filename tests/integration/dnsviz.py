"""DNSViz's verdict on a signed zone served on loopback: `dnsviz probe` asks the given
authoritative servers (any port: DNSViz takes ADDR:PORT and keeps it per server), `dnsviz grok`
assesses the answers against the given trust anchors, and every error and warning grok reports
for the zone comes back as a line of text.

    from dnsviz import dnsviz_check, dnskey_anchor
    anchor = dnskey_anchor("test.", "127.0.0.1", knot.port)   # the parent's DNSKEY RRset
    r = dnsviz_check("ds.test.", {"ds.test.": [("127.0.0.1", tern.port)],
                                  "test.": [("127.0.0.1", knot.port)]}, [anchor], workdir)
    r.errors, r.warnings    # lists of "ds.test./delegation/ds[0]: DIGEST_INVALID: ..." lines
    r.status                # the zone's delegation status: "SECURE" when the chain validates

Only loopback is ever asked: the servers given are the only ones queried (-x; the topmost zone
given ends in "+": nothing above it is asked), and DNSViz runs with its sockets guarded: a
connect or send to any other address is refused (OSError) and reported as an error, so a zone
whose data names another server cannot make DNSViz reach outside the machine.
"""

import collections
import json
import os
import re
import socket
import subprocess
import time

import dns.dnssec
import dns.message
import dns.name
import dns.query
import dns.rdata
import dns.rdatatype
import dns.rrset

from servers import free_port as _free_port  # reserved ports (servers.py)

DNSVIZ = "/usr/bin/dnsviz"
# DNSViz's interpreter (its #! line): its modules are Debian's, whatever python runs the tests
PYTHON = "/usr/bin/python3"
TIMEOUT = 120  # seconds for one probe or grok (1.2 s both on loopback; a silent server is retried)

# `dnsviz print`'s status marks (its STATUS_MAP, one character for several statuses)
_PRINT_STATUS = {".": "SECURE", "!": "BOGUS", "-": "INSECURE", "?": "INCOMPLETE"}

Result = collections.namedtuple("Result", "errors warnings status seconds")

# Runs DNSViz's command line in a fresh interpreter whose socket.connect/sendto refuse
# non-loopback addresses (its threads and forked workers inherit the patch).
_GUARD = r"""
import ipaddress, runpy, socket, sys
_c, _cx, _s = socket.socket.connect, socket.socket.connect_ex, socket.socket.sendto
def _ok(addr):
    try:
        host = addr[0] if isinstance(addr, tuple) else addr
        return ipaddress.ip_address(host.split('%')[0]).is_loopback
    except (ValueError, TypeError, AttributeError):
        return isinstance(addr, (str, bytes))  # a UNIX socket path
def _refuse(addr):
    sys.stderr.write("dnsviz-guard: refused %r (not loopback)\n" % (addr,))
    raise OSError(13, "dnsviz-guard: not loopback")
def connect(self, addr):
    return _c(self, addr) if _ok(addr) else _refuse(addr)
def connect_ex(self, addr):
    return _cx(self, addr) if _ok(addr) else _refuse(addr)
def sendto(self, data, *args):
    return _s(self, data, *args) if _ok(args[-1]) else _refuse(args[-1])
socket.socket.connect, socket.socket.connect_ex, socket.socket.sendto = connect, connect_ex, sendto
try:  # Debian's pygraphviz 1.7 lacks the `release` module DNSViz 0.9.4's grok checks for
    import types, pygraphviz
    if not hasattr(pygraphviz, "release"):
        _r = types.ModuleType("pygraphviz.release")
        _r.version = pygraphviz.__version__
        sys.modules["pygraphviz.release"] = pygraphviz.release = _r
except ImportError:
    pass
import dnsviz.util  # probe's "global connectivity" test connects to a root server's address:
_gca = dnsviz.util.get_client_address  # answered "none" here, never tried (nor reported)
dnsviz.util.get_client_address = lambda server: _gca(server) if _ok((str(server), 53)) else None
import os
if os.environ.get("DNSVIZ_NAMED_PORT"):  # the port of the named that serves a -D parent
    import dnsviz.commands.probe
    dnsviz.commands.probe.ZoneFileToServe._next_free_port = int(os.environ["DNSVIZ_NAMED_PORT"])
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def guarded(argv, cwd, env=None):
    """Run the Python program argv[0] (DNSViz's, or a test's) with arguments argv[1:] under the
    loopback guard, in cwd, with env added to the environment: the CompletedProcess (text; a
    refusal is a "dnsviz-guard:" line on stderr)."""
    # cwd: nothing there shadows DNSViz's own modules (this file is dnsviz.py too)
    return subprocess.run([PYTHON, "-c", _GUARD] + list(argv), cwd=cwd,
                          env=dict(os.environ, PYTHONPATH="", **(env or {})),
                          capture_output=True, text=True, timeout=TIMEOUT)


def available():
    """True when DNSViz is installed (Debian's dnsviz package; a zone checked alone also needs
    BIND's named, which DNSViz starts)."""
    return os.path.exists(DNSVIZ)


def dnskey_anchor(zone, addr, port, tags=None):
    """The DNSKEY RRset of zone as the server at addr:port serves it (only the keys with these
    tags, when given: e.g. the KSK a validator's DS names), as zone-file text: a trust anchor
    for dnsviz_check()."""
    r = dns.query.udp(dns.message.make_query(zone, "DNSKEY"), addr, port=port, timeout=3)
    keys = [rrset for rrset in r.answer if rrset.rdtype == dns.rdatatype.DNSKEY]
    if not keys:
        raise RuntimeError("%s#%d has no DNSKEY for %s" % (addr, port, zone))
    rrset = keys[0]
    if tags is not None:
        rrset = dns.rrset.from_rdata_list(rrset.name, rrset.ttl, [
            rd for rd in rrset if dns.dnssec.key_id(rd) in set(tags)])
        if not rrset:
            raise RuntimeError("%s#%d: no DNSKEY of %s has a tag in %s" % (addr, port, zone,
                                                                           sorted(tags)))
    return rrset.to_text()


def _server_arg(zone, servers, top):
    """-x ZONE[+]:ns1.ZONE=ADDR:PORT,...: the name is for DNSViz's reports only."""
    parts = []
    for i, (addr, port) in enumerate(servers):
        host = "[%s]" % addr if ":" in addr else addr
        parts.append("ns%d.dnsviz-probe.%s=%s:%d" % (i + 1, zone.rstrip(".") or ".", host, port))
    return "%s%s:%s" % (zone, "+" if top else "", ",".join(parts))


def _findings(node, path, key, out):
    """Every item under a `key` ("errors" or "warnings") list anywhere below node, as lines."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key and isinstance(v, list):
                for item in v:
                    if isinstance(item, dict):
                        out.append("%s: %s: %s%s" % (
                            path, item.get("code", "?"), item.get("description", item),
                            " (servers %s)" % ", ".join(item["servers"])
                            if item.get("servers") else ""))
                    else:
                        out.append("%s: %s" % (path, item))
            else:
                _findings(v, "%s/%s" % (path, k), key, out)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _findings(v, "%s[%d]" % (path, i), key, out)


def _ds_of(zone, anchors):
    """-D's value: the DS (SHA-256) of each anchor DNSKEY whose owner is zone."""
    out = []
    for line in "\n".join(anchors).splitlines():
        t = line.split()
        if "DNSKEY" in t and dns.name.from_text(t[0]) == dns.name.from_text(zone):
            rd = dns.rdata.from_text("IN", "DNSKEY", " ".join(t[t.index("DNSKEY") + 1:]))
            out.append(dns.dnssec.make_ds(zone, rd, "SHA256").to_text())
    return ",".join(out)


def dnsviz_check(zone, servers, anchors, workdir, rr_types=None):
    """Probe zone (absolute name) at servers ({zone name: [(addr, port), ...]}: the zone's own
    and, for the DS and the chain, its parent's and further ancestors'; DNSViz keeps one port
    per zone and address, so two servers of one zone need two addresses) and grok it against
    anchors (zone-file text of DNSKEY RRsets, e.g. dnskey_anchor() of the topmost zone). With
    the zone's servers alone, anchor it at its own keys (dnskey_anchor(zone, ..., tags=[KSK])):
    DNSViz then has a parent holding their DS served by a named of its own on loopback (-D).
    rr_types: the types to ask for (None: DNSViz's choice for a zone). Returns a Result:
    errors and warnings (lists of "NAME/PATH: CODE: description (servers ...)" lines for zone
    and every name below it that grok reports), status (zone's delegation status as `dnsviz
    print` marks it: SECURE, BOGUS, INSECURE (or indeterminate), INCOMPLETE (or lame); None
    if it shows none) and seconds (probe, grok and print together). The probe's answers,
    grok's JSON and print's text stay in workdir (dnsviz-<zone>.probe.json, .grok.json,
    .print.txt). Raises RuntimeError when DNSViz itself fails."""
    os.makedirs(workdir, exist_ok=True)
    stem = os.path.join(workdir, "dnsviz-%s" % (zone.rstrip(".") or "root"))
    t0 = time.monotonic()
    ordered = sorted(servers, key=lambda z: len(z.rstrip(".").split(".")))
    alone = list(servers) == [zone]
    env = {}
    if alone:  # no parent to ask: DNSViz's named serves one with the anchors' DS
        ds = _ds_of(zone, anchors)
        if not ds:
            raise RuntimeError("%s has no parent's servers and no anchor of its own: DNSViz "
                               "would ask the root" % zone)
        parent = dns.name.from_text(zone).parent().to_text()
        own = _server_arg(zone, servers[zone], False)
        # not -4: DNSViz's named listens on ::1 when it can
        cmd = [DNSVIZ, "probe", "-A", "-p", "-a", parent, "-D", "%s:%s" % (zone, ds),
               "-N", own, "-x", own]
        env["DNSVIZ_NAMED_PORT"] = str(_free_port())
    else:
        cmd = [DNSVIZ, "probe", "-A", "-4", "-p", "-a", ordered[0]]
        for i, z in enumerate(ordered):
            cmd += ["-x", _server_arg(z, servers[z], i == 0)]
    cmd += ["-o", stem + ".probe.json"]
    if rr_types:
        cmd += ["-R", ",".join(rr_types)]
    cmd.append(zone)
    p = guarded(cmd, workdir, env)
    guard = [line for line in p.stderr.splitlines() if line.startswith("dnsviz-guard:")]
    if p.returncode != 0:
        raise RuntimeError("dnsviz probe failed (%d): %s" % (p.returncode, p.stderr[-2000:]))
    anchor_file = stem + ".anchors"
    with open(anchor_file, "w") as f:
        f.write("\n".join(anchors) + "\n")
    # grok at level warning: only what has a finding (at level info it serializes everything,
    # and crashes on the parent DNSViz's named serves for -D)
    g = guarded([DNSVIZ, "grok", "-P", "-l", "warning", "-t", anchor_file, "-r",
                 stem + ".probe.json", "-o", stem + ".grok.json"], workdir)
    if g.returncode != 0:
        raise RuntimeError("dnsviz grok failed (%d): %s" % (g.returncode, g.stderr[-2000:]))
    with open(stem + ".grok.json") as f:
        text = f.read()
    report = json.loads(text) if text.strip() else {}  # nothing to report: no output
    errors, warnings = list(guard), []
    for n in report:
        if n == zone or n.endswith("." + zone):
            _findings(report[n], n, "errors", errors)
            _findings(report[n], n, "warnings", warnings)
    # the delegation's status: `dnsviz print`'s "NAME [zone] [delegation]" line
    pr = guarded([DNSVIZ, "print", "-P", "-t", anchor_file, "-r", stem + ".probe.json", "-o",
                  stem + ".print.txt"], workdir)
    if pr.returncode != 0:
        raise RuntimeError("dnsviz print failed (%d): %s" % (pr.returncode, pr.stderr[-2000:]))
    status = None
    with open(stem + ".print.txt") as f:
        for line in f:
            m = re.match(r"^(\S+) \[(.).?\](?: \[(.).?\])?$", line.rstrip("\n"))
            if m and m.group(1).rstrip(".") == zone.rstrip(".") and m.group(3):
                status = _PRINT_STATUS.get(m.group(3), m.group(3))
    return Result(errors, warnings, status, time.monotonic() - t0)


def dnsviz_errors(zone, servers, anchors, workdir):
    """dnsviz_check()'s errors alone (an empty list: DNSViz finds nothing wrong)."""
    return dnsviz_check(zone, servers, anchors, workdir).errors
