"""Start and stop the DNS servers the integration tests talk to: ternd, NSD and Knot.

Each server runs in the foreground as a child process on a free loopback port, with its own
configuration, pid file and state under a temporary directory. Every wait is bounded; stop()
always ends the process it started (by its pid), first politely, then with SIGKILL.
"""

import fcntl
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import time

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rcode

LOOPBACK = "127.0.0.1"
START_TIMEOUT = 15.0  # seconds for a server to answer its first query (Knot loads zones lazily)
STOP_TIMEOUT = 5.0
REDIS_WAIT = 15.0  # seconds for redis-server to start or stop
# writes the small MaxMind DB fixtures of the geo tests (tests/data/make_mmdb.pl)
MAKE_MMDB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "make_mmdb.pl")


# Ports for servers are taken below the kernel's ephemeral range (net.ipv4.ip_local_port_range,
# 32768-60999 by default). A port picked there by binding port 0 and released again could be
# handed by the kernel to any client socket's automatic bind before our server binds it (a
# dig's source port: it then got its own query back), and two tests running beside each other
# could pick the same one. Below the range the kernel never picks; among tests, a lock file per
# port held by the picking process for its whole life keeps every port with one test.
PORT_LOW, PORT_HIGH = 20000, 32000
PORT_LOCKS = os.path.join(os.environ.get("TMPDIR", "/tmp"), "tern-test-ports")
_held_ports = {}  # port -> open lock file, kept open (so locked) until this process exits


def _ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def _reserve(port):
    """Lock port for this process; False if another process holds it."""
    os.makedirs(PORT_LOCKS, mode=0o1777, exist_ok=True)
    f = open(os.path.join(PORT_LOCKS, "%d.lock" % port), "a")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        return False
    _held_ports[port] = f
    return True


def _bindable(port):
    """Free for both TCP and UDP on every IPv4 address (so on 127.0.0.2 and the rest too)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t:
            t.bind(("0.0.0.0", port))
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                u.bind(("0.0.0.0", port))
    except OSError:
        return False
    return True


def free_port():
    """A port free for both UDP and TCP on every IPv4 address, reserved for this process: outside
    the kernel's ephemeral range and locked against the other tests (see PORT_LOCKS). A port is
    never handed out twice by one process (bounded number of tries)."""
    lo, hi = _ephemeral_range()
    low, high = PORT_LOW, PORT_HIGH
    if not (high < lo or low > hi):  # an unusual ephemeral range: stay below it
        low, high = 1024, max(1025, lo - 1)
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(200):
        port = rng.randint(low, high)
        if port in _held_ports or not _reserve(port):
            continue
        if _bindable(port):
            return port
        # held by something outside the tests: keep the lock (never retried) and go on
    raise RuntimeError("no free loopback port found")


def find_program(name):
    """Full path of a program, looking in PATH and the sbin directories; None if absent."""
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin:/usr/local/sbin"
    return shutil.which(name, path=path)


def stop_process(proc):
    """SIGTERM proc (a Popen we started) if it still runs, SIGKILL after STOP_TIMEOUT."""
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT)


class Server:
    """One server process; subclasses write the config and give the command line."""

    name = "server"

    def __init__(self, workdir, zones):
        self.dir = os.path.join(workdir, self.name)
        os.makedirs(self.dir, exist_ok=True)
        self.zones = zones  # list of (origin, absolute zone file path)
        self.port = free_port()
        self.proc = None
        self.log_path = os.path.join(self.dir, "output.log")
        self._log = None

    def command(self):
        raise NotImplementedError

    def start(self, probe_name):
        """Start the process and wait until it answers a SOA query for probe_name."""
        cmd = self.command()
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=self.dir)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited with status %s during startup:\n%s"
                                   % (self.name, self.proc.returncode, self.log_text()))
            try:
                q = dns.message.make_query(probe_name, "SOA")
                r = dns.query.udp(q, LOOPBACK, port=self.port, timeout=0.3)
                if r.rcode() == dns.rcode.NOERROR and r.answer:
                    return
            except (dns.exception.DNSException, OSError):  # a stray datagram (UnexpectedSource) too
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("%s did not answer within %.0f s:\n%s"
                           % (self.name, START_TIMEOUT, self.log_text()))

    def stop(self):
        stop_process(self.proc)
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_text(self, limit=4000):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-limit:].decode("utf-8", "replace")
        except OSError:
            return ""


class External:
    """A server someone else started (for debugging against a running instance)."""

    def __init__(self, name, port):
        self.name = name
        self.port = port

    def stop(self):
        pass


class Ternd(Server):
    name = "tern"

    def __init__(self, workdir, zones, binary, identity=None, version=None, extra_yaml="",
                 workers=1):
        self.binary = binary
        self.workers = workers
        self.identity = identity
        self.version = version
        self.extra_yaml = extra_yaml
        super().__init__(workdir, zones)

    def command(self):
        conf = os.path.join(self.dir, "ternd.yaml")
        with open(conf, "w") as f:
            f.write('listen: ["%s:%d"]\nworkers: %d\n' % (LOOPBACK, self.port, self.workers))
            if os.geteuid() == 0:
                # CI runs as root; ternd refuses to stay root unless told (the tests' zone files
                # live in root-only temp dirs, so dropping to another user is no option here)
                f.write("allow_root: true\n")
            if self.identity:
                f.write('identity: "%s"\n' % self.identity)
            if self.version:
                f.write('version: "%s"\n' % self.version)
            f.write(self.extra_yaml)
            f.write("zones:\n")
            for origin, path in self.zones:
                f.write('  - origin: "%s"\n    file: "%s"\n' % (origin, path))
        return [self.binary, "-c", conf]


class YamlTernd(Server):
    """ternd on its own port with a config given as YAML text (listen, workers 2, a control
    socket in its directory, allow_root under CI's root are added), for the tests that need
    more than zones."""

    name = "tern"

    def __init__(self, workdir, binary, yaml, name=None, ternctl=None):
        self.binary = binary
        self.yaml = yaml
        self.ternctl_bin = ternctl
        if name:  # two of them in one test: their own directories
            self.name = name
        super().__init__(workdir, [])

    def command(self):
        conf = os.path.join(self.dir, "ternd.yaml")
        with open(conf, "w") as f:
            f.write('listen: ["%s:%d"]\nworkers: 2\n' % (LOOPBACK, self.port))
            if os.geteuid() == 0:
                f.write("allow_root: true\n")
            f.write('control_socket: "%s/ctl.sock"\n' % self.dir)
            f.write(self.yaml)
        return [self.binary, "-c", conf]

    def ctl(self, *args):
        """ternctl ARGS against this ternd: the CompletedProcess (text)."""
        return subprocess.run([self.ternctl_bin, "-s", os.path.join(self.dir, "ctl.sock")]
                              + list(args), capture_output=True, text=True, timeout=60)

    def log_has(self, text):
        return text in self.log_text(limit=400000)


class Nsd(Server):
    name = "nsd"

    def __init__(self, workdir, zones, identity, version, extra_conf=""):
        self.identity = identity
        self.version = version
        self.extra_conf = extra_conf  # appended as is (e.g. secondary zones: test_xfr.py)
        super().__init__(workdir, zones)

    def command(self):
        binary = find_program("nsd")
        d = self.dir
        conf = os.path.join(d, "nsd.conf")
        with open(conf, "w") as f:
            f.write(f"""server:
    ip-address: {LOOPBACK}@{self.port}
    port: {self.port}
    do-ip6: no
    username: ""
    chroot: ""
    zonesdir: "{d}"
    database: ""
    pidfile: "{d}/nsd.pid"
    xfrdfile: "{d}/xfrd.state"
    xfrdir: "{d}"
    zonelistfile: "{d}/zone.list"
    logfile: "{d}/nsd.log"
    verbosity: 1
    server-count: 1
    identity: "{self.identity}"
    version: "{self.version}"
    hide-version: no
    hide-identity: no
    minimal-responses: yes
""")
            if nsd_has_ratelimit(binary):
                f.write("    rrl-ratelimit: 0\n")
            f.write("remote-control:\n    control-enable: no\n")
            for origin, path in self.zones:
                f.write(f'zone:\n    name: "{origin}"\n    zonefile: "{path}"\n')
            f.write(self.extra_conf.replace("{dir}", d))
        return [binary, "-d", "-c", conf]


def nsd_has_ratelimit(binary):
    """NSD built with --enable-ratelimit knows rrl-ratelimit (Debian's is); others reject it."""
    checkconf = find_program("nsd-checkconf")
    if checkconf is None:
        return True
    out = subprocess.run([checkconf, "-o", "rrl-ratelimit", "/dev/null"], capture_output=True,
                         timeout=10)
    return out.returncode == 0


def knot_conf_head(d, port, log="warning", server_extra=""):
    """The common start of a knot.conf: server on LOOPBACK@port with one worker of each kind,
    server_extra lines in its block, storage and the control socket in d, stderr at log level;
    the caller appends keys, ACLs, templates and zones."""
    return f"""server:
    rundir: "{d}"
    listen: {LOOPBACK}@{port}
{server_extra}    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
database:
    storage: "{d}/db"
control:
    listen: "{d}/knot.sock"
log:
  - target: stderr
    any: {log}
"""


class Knot(Server):
    name = "knot"

    def __init__(self, workdir, zones, identity, version):
        self.identity = identity
        self.version = version
        super().__init__(workdir, zones)

    def command(self):
        binary = find_program("knotd")
        d = self.dir
        conf = os.path.join(d, "knot.conf")
        with open(conf, "w") as f:
            ident = f'    identity: "{self.identity}"\n    version: "{self.version}"\n'
            f.write(knot_conf_head(d, self.port, server_extra=ident))
            f.write(f"""template:
  - id: default
    storage: "{d}"
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
zone:
""")
            for origin, path in self.zones:
                f.write(f'  - domain: "{origin}"\n    file: "{path}"\n')
        return [binary, "-c", conf]


def clean_exit_result(tern):
    """('clean_exit', error) if a stopped Ternd did not exit cleanly on SIGTERM, else None."""
    if tern.proc is not None and tern.proc.returncode not in (0, -15):
        return ("clean_exit", "ternd exited with %s on SIGTERM:\n%s"
                % (tern.proc.returncode, tern.log_text()))
    return None


def finish(tern, results, width=40):
    """After tern.stop(): its clean exit as one more check, its log when any check failed; the
    exit status (report())."""
    r = clean_exit_result(tern)
    if r:
        results.append(r)
    if any(err for _, err in results):
        print(tern.log_text())
    return report(results, width)


def report(results, width=40):
    """Print one line per (name, error-or-None) check and a summary; the exit status to return."""
    failed = 0
    for name, err in results:
        print("%-*s %s" % (width, name, "ok" if err is None else "FAIL: " + err))
        failed += err is not None
    print("%d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed else 0


class Failure(Exception):
    """A check that did not hold; the message says what."""


def run_check(results, name, fn):
    """Run one named check: append (name, None) to results, or (name, why) when fn raised
    Failure or anything else (a check that crashes is a failed check)."""
    try:
        fn()
        results.append((name, None))
    except Failure as e:
        results.append((name, str(e)))
    except Exception as e:  # noqa: BLE001
        results.append((name, "%s: %s" % (type(e).__name__, e)))


def run_checks(results, checks, only=None, always=()):
    """run_check() each (name, fn) of checks in order, stopping at the first that fails (the
    later ones build on it); with only (a list of names), the others are skipped except those
    in always (the setup every check needs)."""
    for name, fn in checks:
        if only and name not in only and name not in always:
            continue
        run_check(results, name, fn)
        if results[-1][1]:
            break


def expect(cond, what):
    if not cond:
        raise Failure(what)


def wait_until(fn, limit, what):
    """Call fn until it returns true (a DNS timeout or a socket error counts as not yet), at most
    limit seconds: the seconds it took, or Failure naming what and the last error."""
    t0 = time.monotonic()
    last = None
    while time.monotonic() - t0 < limit:
        try:
            if fn():
                return time.monotonic() - t0
        except (dns.exception.DNSException, OSError) as e:
            last = e
        time.sleep(0.05)
    raise Failure("%s: not within %.0f s (%s)" % (what, limit, last))


def write_atomic(path, text):
    """Write text to path as a new file: temp file in the same directory, fsync, then rename."""
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class Redis:
    """A redis-server of our own, and a minimal RESP client for it."""

    def __init__(self, workdir, port=None, name="redis", args=()):
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.port = port or free_port()
        self.args = list(args)  # more redis-server options ("--replicaof", host, port)
        self.proc = None
        self.sock = None

    def argv(self):
        return (["redis-server", "--port", str(self.port), "--bind", LOOPBACK, "--dir", self.dir,
                 "--save", "", "--appendonly", "no", "--notify-keyspace-events", "KEA",
                 "--logfile", os.path.join(self.dir, "redis.log")] + list(self.args))

    def start(self):
        self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + REDIS_WAIT
        while time.monotonic() < deadline:
            try:
                self.sock = socket.create_connection((LOOPBACK, self.port), timeout=1)
                if self.cmd("PING") == "PONG":
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("%s did not start on port %d" % (self.argv()[0], self.port))

    def stop(self):
        if self.sock:
            self.sock.close()
            self.sock = None
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=REDIS_WAIT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=REDIS_WAIT)

    def cmd(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        f = self.sock.makefile("rb")
        try:
            return self._reply(f)
        finally:
            f.close()

    def _reply(self, f):
        line = f.readline().rstrip(b"\r\n")
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError("redis: " + rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = f.read(n + 2)[:-2]
            return data.decode()
        if kind == b"*":
            return [self._reply(f) for _ in range(int(rest))]
        raise RuntimeError("redis: bad reply %r" % line)

    def put_zone(self, zone, labels, soa):
        """A zone as redins keeps it: config (with soa, or without one when soa is None), the
        hash of labels, and the member of redins:zones."""
        cfg = {"soa": soa} if soa is not None else {"domain_id": "x"}
        self.cmd("SET", "redins:zones:%s:config" % zone, json.dumps(cfg))
        for label, value in labels.items():
            text = value if isinstance(value, str) else json.dumps(value)
            self.cmd("HSET", "redins:zones:%s" % zone, label, text)
        self.cmd("SADD", "redins:zones", zone)


class Unbound:
    """A validating Unbound in the foreground on a loopback port of its own. zones: (zone,
    port, ds) each: a stub zone asking only 127.0.0.1@port, with ds (DS RDATA text) as the
    zone's trust anchor (None: no anchor, nothing in it validates). Queries go out from
    `outgoing` (the address a steering server sees)."""

    def __init__(self, work, name, zones, outgoing=LOOPBACK, tcp_upstream=False, timeout=5.0):
        self.name = name
        self.dir = os.path.join(work, name)
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        self.zones = zones
        self.outgoing = outgoing
        self.tcp_upstream = tcp_upstream
        self.timeout = timeout
        self.proc = None
        self._out = None
        self.log_path = os.path.join(self.dir, "unbound.log")

    def config_text(self):
        d = self.dir
        tas = "".join('    trust-anchor: "%s DS %s"\n' % (z, ds) for z, _, ds in self.zones if ds)
        # test. is one of Unbound's default local zones (RFC 6761: NXDOMAIN for everything in
        # it); nodefault on each stub zone and its parent lets the stub zones answer
        parents = sorted({z.rstrip(".").split(".", 1)[1] + "." for z, _, _ in self.zones
                          if "." in z.rstrip(".")} | {z for z, _, _ in self.zones})
        locals_ = "".join('    local-zone: "%s" nodefault\n' % p for p in parents)
        stubs = "".join('stub-zone:\n    name: "%s"\n    stub-addr: %s@%d\n' % (z, LOOPBACK, port)
                        for z, port, _ in self.zones)
        return f"""server:
    verbosity: 0  # errors, and (val-log-level) one line per validation failure
    interface: {LOOPBACK}
    port: {self.port}
    do-ip4: yes
    do-ip6: no
    do-udp: yes
    do-tcp: yes
    tcp-upstream: {"yes" if self.tcp_upstream else "no"}
    outgoing-interface: {self.outgoing}
    num-threads: 1
    so-reuseport: no
    directory: "{d}"
    chroot: ""
    username: ""
    use-syslog: no
    logfile: "{self.log_path}"
    log-time-ascii: yes
    pidfile: "{d}/unbound.pid"
    do-not-query-localhost: no
    module-config: "validator iterator"
    val-log-level: 2
    qname-minimisation: no
    minimal-responses: yes
    prefetch: no
    prefetch-key: no
    aggressive-nsec: no
    trust-anchor-signaling: no
    root-key-sentinel: no
    cache-min-ttl: 0
    cache-max-negative-ttl: 60
{locals_}{tas}remote-control:
    control-enable: no
{stubs}"""

    def start(self):
        conf = os.path.join(self.dir, "unbound.conf")
        with open(conf, "w") as f:
            f.write(self.config_text())
        self._out = open(os.path.join(self.dir, "output.log"), "wb")
        self.proc = subprocess.Popen([find_program("unbound"), "-d", "-c", conf],
                                     stdout=self._out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=self.dir)
        # ready once it answers localhost. from its own default local zone (the signer is not
        # asked, so nothing is cached early)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("unbound %s exited with status %s during startup:\n%s"
                                   % (self.name, self.proc.returncode, self.log_text()))
            try:
                r = dns.query.udp(dns.message.make_query("localhost.", "A"), LOOPBACK,
                                  port=self.port, timeout=0.3)
                if r.rcode() == dns.rcode.NOERROR:
                    return
            except (dns.exception.DNSException, OSError):
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("unbound %s did not answer within %.0f s:\n%s"
                           % (self.name, START_TIMEOUT, self.log_text()))

    def stop(self):
        stop_process(self.proc)
        if self._out is not None:
            self._out.close()
            self._out = None

    def log_text(self, limit=3000):
        text = ""
        for p in (os.path.join(self.dir, "output.log"), self.log_path):
            try:
                with open(p, "rb") as f:
                    text += f.read()[-limit:].decode("utf-8", "replace")
            except OSError:
                pass
        return text

    def ask(self, name, rtype):
        """The response to name/rtype with DO set (over TCP when truncated)."""
        q = dns.message.make_query(name, rtype, want_dnssec=True, payload=1232)
        try:
            r = dns.query.udp(q, LOOPBACK, port=self.port, timeout=self.timeout)
            if r.flags & dns.flags.TC:
                r = dns.query.tcp(q, LOOPBACK, port=self.port, timeout=self.timeout)
        except dns.exception.Timeout:
            raise Failure("%s %s: no answer from unbound %s within %.0f s"
                          % (name, rtype, self.name, self.timeout))
        return r


def named_conf(d, port, options=(), rest=""):
    """named.conf for a BIND the tests start in directory d, answering on LOOPBACK port: the
    options every test needs (its files in d, no recursion or validation, no IPv6, no rndc), the
    lines of options added to them, then rest (keys, tls blocks, zones)."""
    extra = "".join("    %s\n" % o for o in options)
    return f"""options {{
    directory "{d}";
    pid-file "{d}/named.pid";
    listen-on port {port} {{ {LOOPBACK}; }};
    listen-on-v6 {{ none; }};
    recursion no;
    dnssec-validation no;
    session-keyfile "{d}/session.key";
    managed-keys-directory "{d}";
{extra}}};
controls {{ }};
{rest}"""


class Named(Server):
    """BIND 9 (named -g) on its own port, as the secondary of the given zones: secondaries is a
    list of (zone, primary port); each zone's copy is kept in its directory (raw format off:
    text) and may be transferred out again to anyone on loopback."""

    name = "named"

    def __init__(self, workdir, secondaries, name=None):
        if name:
            self.name = name
        self.secondaries = secondaries
        super().__init__(workdir, [])

    def command(self):
        d = self.dir
        conf = os.path.join(d, "named.conf")
        zones = "".join(f"""zone "{z}" {{
    type secondary;
    primaries {{ {LOOPBACK} port {port}; }};
    file "{d}/{z}.db";
    masterfile-format text;
}};
""" for z, port in self.secondaries)
        with open(conf, "w") as f:
            f.write(named_conf(d, self.port, (
                "notify no;", "allow-transfer { 127.0.0.0/8; };", "allow-notify { 127.0.0.0/8; };",
                "allow-query { any; };", "transfers-in 10;", "min-refresh-time 1;"), zones))
        return [find_program("named"), "-g", "-c", conf, "-n", "1"]


def make_tls_certs(d, name="dns.test", stem="server", ca=None):
    """A test PKI under d, made with the openssl CLI (ECDSA P-256, 30 days): a CA (made when ca
    is None, else ca = (ca.pem, ca.key) signs) and a certificate for name and 127.0.0.1 signed
    by it. Returns (ca_pem, ca_key, cert_pem, key_pem) as paths."""
    def run(*args):
        subprocess.run(["openssl"] + list(args), check=True, capture_output=True, timeout=30)
    if ca is None:
        ca = (os.path.join(d, "ca.pem"), os.path.join(d, "ca.key"))
        run("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", ca[1])
        run("req", "-x509", "-new", "-key", ca[1], "-subj", "/CN=tern test CA", "-days", "30",
            "-out", ca[0])
    key = os.path.join(d, stem + ".key")
    csr = os.path.join(d, stem + ".csr")
    cert = os.path.join(d, stem + ".pem")
    ext = os.path.join(d, stem + ".ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:%s,IP:127.0.0.1\n" % name)
    run("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key)
    run("req", "-new", "-key", key, "-subj", "/CN=%s" % name, "-out", csr)
    run("x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
        "-days", "30", "-extfile", ext, "-out", cert)
    return ca[0], ca[1], cert, key


def read_exact(sock, n):
    """n bytes from a stream socket (TCP or TLS); Failure when it closes first."""
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise Failure("connection closed after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return buf


def geo_fixtures(ternctl, data, asn_csv):
    """The MaxMind DB fixtures (tests/data/make_mmdb.pl) in data, and an ASN table compiled
    there from asn_csv (ip-location-db CSV text) by ternctl: the table's path."""
    subprocess.run(["perl", MAKE_MMDB, data], check=True, timeout=60, stdout=subprocess.DEVNULL)
    csv = os.path.join(data, "asn.csv")
    with open(csv, "w") as f:
        f.write(asn_csv)
    table = os.path.join(data, "asn.bin")
    subprocess.run([ternctl, "asn", "compile", "-o", table, csv], check=True, timeout=60,
                   stdout=subprocess.DEVNULL)
    return table


def serve_http(addr, port, answer):
    """A threaded HTTP/1.1 server on addr:port (a health endpoint for the checker): every HEAD
    and GET goes to answer(handler), which writes the response; no access log, and a client
    that resets its connection (a check that stopped reading) is not an error. Returns the
    server and its thread, started; stop with stop_http()."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_HEAD(self):
            answer(self)

        do_GET = do_HEAD

    class Server(http.server.ThreadingHTTPServer):
        daemon_threads = True
        allow_reuse_address = True

        def handle_error(self, request, client_address):
            pass

    httpd = Server((addr, port), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    return httpd, thread


def stop_http(httpd, thread, timeout=15.0):
    """Stop a serve_http() server and wait for its thread."""
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=timeout)


def http_ok_server(addr, port):
    """A serve_http() health endpoint answering 200 with an empty body to HEAD and GET (what a
    health check takes for up): (server, thread); http_stop() ends it."""
    def ok(h):
        h.send_response(200)
        h.send_header("Content-Length", "0")
        h.send_header("Connection", "close")
        h.end_headers()
    return serve_http(addr, port, ok)


http_stop = stop_http  # the name test_steer_tiers uses
