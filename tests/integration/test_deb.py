#!/usr/bin/env python3
"""The Debian package (debian/): built from a copy of the tree, linted, installed into a clean
Debian 12 root, run there.

  build      dpkg-buildpackage -us -uc -b (parallel=2, nocheck) in a copy of the tree under
             --workdir; the source tree is left as it was (git status unchanged)
  lintian    lintian on the .changes (the .deb and its -dbgsym): no error (warnings and notes
             are printed)
  contents   ternd, ternctl, man pages, the unit in /lib/systemd/system, sysusers.d, tmpfiles.d,
             logrotate, /etc/tern/ternd.yaml a conffile, a machine-readable copyright file
  root       a Debian 12 root from Debian's archive (mmdebstrap --variant=apt), cached as a
             tarball under --workdir/cache, unpacked afresh; the .deb installed by apt inside
             it, which pulls its Depends (and Recommends, as apt does by default)
  installed  the tern system user (nologin), /var/lib/tern and /var/log/tern owned by it,
             /etc/tern/ternd.yaml listed as a conffile, `ternd --check-config -c
             /etc/tern/ternd.yaml` exit 0, systemd-analyze verify accepts the unit
  serve      ternd started in the root (no systemd in a chroot: as root, switching to tern as the
             config says) with the installed config on a loopback port: answers www.example.test
             from /etc/tern/example.zone, runs as tern, its /metrics (libmicrohttpd, dlopen()ed:
             a Depends shlibs cannot see) answers, `ternctl status` over its control socket
  logrotate  /etc/logrotate.d/tern rotates a query log in /var/log/tern and ternd, signalled by
             the postrotate script through its pid file, writes to the new file
  purge      ternd stops cleanly on SIGTERM; apt-get purge removes the conffiles, the unit and
             /var/log/tern, and keeps what is in /var/lib/tern (DNSSEC keys live there)
The chroot shares the host's network, so the queries go to the host's loopback. Every command in
the root runs in a mount namespace of its own (unshare -m): /proc and the apt caches are mounted
there only and vanish with it. Without Debian's archive the test fails and says so.
"""

import argparse
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

import dns.message
import dns.query
import dns.rdatatype

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402

Failed = servers.Failure
expect = servers.expect

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
ARCHIVE = "http://deb.debian.org/debian"
SECURITY = "http://deb.debian.org/debian-security"
SUITE = "bookworm"
# Debian's archive over the network: a slow mirror may take a while for the first root.
NET_TIMEOUT = 300
TOOLS = ("dpkg-buildpackage", "dh", "fakeroot", "lintian", "mmdebstrap", "unshare", "chroot")


def run(argv, what, timeout=NET_TIMEOUT, env=None, cwd=None):
    """Run argv; its output, or Failure naming what with the output's tail."""
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, timeout=timeout, env=env, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise Failed("%s: no end within %d s" % (what, timeout))
    out = p.stdout.decode("utf-8", "replace")
    if p.returncode != 0:
        raise Failed("%s failed (exit %d):\n%s" % (what, p.returncode, out[-4000:]))
    return out


class Deb:
    def __init__(self, args):
        self.workdir = os.path.abspath(args.workdir)
        self.cache = os.path.join(self.workdir, "cache")
        self.tarball = os.path.join(self.cache, "%s-apt.tar" % SUITE)
        self.root = os.path.join(self.workdir, "root")
        self.deb = None
        self.proc = None
        self.proc_rc = None
        self.times = []

    def timed(self, name, fn):
        t0 = time.monotonic()
        try:
            fn()
        finally:
            self.times.append((name, time.monotonic() - t0))

    # -- the root: every command in a mount namespace of its own -------------------------------
    def in_root(self, argv, apt_cache=False):
        """argv run in the root: unshare -m, /proc (and the apt caches) mounted, then chroot."""
        mounts = ['mount -t proc proc "$R/proc"']
        if apt_cache:
            for sub, inside in (("archives", "var/cache/apt/archives"),
                                ("lists", "var/lib/apt/lists")):
                os.makedirs(os.path.join(self.cache, "apt", sub, "partial"), exist_ok=True)
                mounts.append('mount --bind "$C/%s" "$R/%s"' % (sub, inside))
        script = "set -e; %s; exec chroot \"$R\" \"$@\"" % "; ".join(mounts)
        return (["unshare", "--mount", "--propagation", "private", "env",
                 "R=" + self.root, "C=" + os.path.join(self.cache, "apt"), "sh", "-c", script,
                 "sh"] + list(argv))

    def root_run(self, argv, what, **kw):
        return run(self.in_root(argv, kw.pop("apt_cache", False)), what, **kw)

    def mounted_under_root(self):
        with open("/proc/self/mounts") as f:
            return [ln.split()[1] for ln in f if ln.split()[1].startswith(self.root + "/")]

    def remove_root(self):
        stale = self.mounted_under_root()
        if stale:  # never rm -rf through a mount (only our namespaces mount there)
            raise Failed("mounts left under %s: %s" % (self.root, stale))
        shutil.rmtree(self.root, ignore_errors=True)

    # -- checks ----------------------------------------------------------------------------------
    def check_prerequisites(self):
        missing = [t for t in TOOLS if not servers.find_program(t)]
        expect(not missing, "missing %s: .ci/install-deps --test installs them" % " ".join(missing))
        expect(os.geteuid() == 0, "needs root (chroot, mount namespaces, mmdebstrap --mode=root)")
        try:
            urllib.request.urlopen("%s/dists/%s/Release" % (ARCHIVE, SUITE), timeout=20).close()
        except (urllib.error.URLError, OSError) as e:
            raise Failed("Debian's archive (%s) is unreachable (%s): this test builds a Debian 12 "
                         "root from it and installs the package's dependencies from it" %
                         (ARCHIVE, e))

    def tree_status(self):
        if not os.path.isdir(os.path.join(REPO, ".git")) and \
                not os.path.isfile(os.path.join(REPO, ".git")):
            return None
        return run(["git", "-C", REPO, "status", "--porcelain", "--ignored=no"], "git status")

    def copy_tree(self, dest):
        """The tree's files (git's view: tracked and untracked-not-ignored, as they are on
        disk), or everything but build directories when it is not a git checkout."""
        if self.tree_status() is not None:
            files = run(["git", "-C", REPO, "ls-files", "-z", "--cached", "--others",
                         "--exclude-standard"], "git ls-files").split("\0")
            for rel in filter(None, files):
                src = os.path.join(REPO, rel)
                if not os.path.lexists(src):  # deleted in the work tree, not yet committed
                    continue
                os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
                shutil.copy2(src, os.path.join(dest, rel), follow_symlinks=False)
        else:
            shutil.copytree(REPO, dest, symlinks=True,
                            ignore=shutil.ignore_patterns("build*", ".cache", "__pycache__"))

    def check_build(self):
        before = self.tree_status()
        src = os.path.join(self.workdir, "src")
        shutil.rmtree(src, ignore_errors=True)
        tree = os.path.join(src, "tern")
        self.copy_tree(tree)
        env = dict(os.environ, DEB_BUILD_OPTIONS="parallel=2 nocheck", LC_ALL="C.UTF-8")
        run(["nice", "dpkg-buildpackage", "-us", "-uc", "-b"], "dpkg-buildpackage",
            timeout=900, env=env, cwd=tree)
        debs = [f for f in os.listdir(src) if f.startswith("tern_") and f.endswith(".deb")]
        expect(len(debs) == 1, "want one tern_*.deb in %s, got %s" % (src, debs))
        self.deb = os.path.join(src, debs[0])
        expect(self.tree_status() == before, "the build changed the source tree:\n%s"
               % self.tree_status())

    def check_lintian(self):
        # The .changes: the .deb and its -dbgsym, and the build's own metadata.
        changes = self.deb[:-len(".deb")] + ".changes"
        p = subprocess.run(["lintian", "--pedantic", "--display-info", changes],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        out = p.stdout.decode("utf-8", "replace")
        tags = [ln for ln in out.splitlines() if ln[:3] in ("E: ", "W: ", "I: ", "P: ")]
        for ln in tags:
            print("  lintian " + ln)
        errors = [ln for ln in tags if ln.startswith("E: ")]
        expect(not errors, "lintian errors:\n" + "\n".join(errors))
        expect(p.returncode == 0, "lintian exit %d:\n%s" % (p.returncode, out[-2000:]))

    def check_contents(self):
        listing = run(["dpkg-deb", "-c", self.deb], "dpkg-deb -c")
        paths = {ln.split()[5].lstrip(".") for ln in listing.splitlines() if len(ln.split()) > 5}
        for f in ("/usr/sbin/ternd", "/usr/sbin/ternctl", "/usr/share/man/man8/ternd.8.gz",
                  "/usr/share/man/man8/ternctl.8.gz", "/lib/systemd/system/ternd.service",
                  "/usr/lib/sysusers.d/tern.conf", "/usr/lib/tmpfiles.d/tern.conf",
                  "/etc/logrotate.d/tern", "/etc/tern/ternd.yaml", "/etc/tern/example.zone",
                  "/usr/share/doc/tern/copyright", "/usr/share/doc/tern/changelog.gz",
                  "/usr/share/doc/tern/README.md"):
            expect(f in paths, "not in the package: %s" % f)
        info = run(["dpkg-deb", "-I", self.deb, "conffiles"], "dpkg-deb -I conffiles")
        expect("/etc/tern/ternd.yaml" in info.split(), "ternd.yaml is no conffile: %r" % info)
        text = run(["dpkg-deb", "-I", self.deb, "control"], "dpkg-deb -I control")
        for dep in ("libmicrohttpd12", "libsystemd0", "libldns3"):
            expect(dep in text, "Depends lack %s:\n%s" % (dep, text))

    def make_tarball(self):
        os.makedirs(self.cache, exist_ok=True)
        tmp = self.tarball[:-4] + ".tmp.tar"
        run(["nice", "mmdebstrap", "--variant=apt", "--mode=root", SUITE, tmp,
             "deb %s %s main" % (ARCHIVE, SUITE),
             "deb %s %s-updates main" % (ARCHIVE, SUITE),
             "deb %s %s-security main" % (SECURITY, SUITE)], "mmdebstrap", timeout=NET_TIMEOUT)
        os.rename(tmp, self.tarball)

    def check_root(self):
        if not os.path.exists(self.tarball):
            self.timed("mmdebstrap", self.make_tarball)
        self.remove_root()
        os.makedirs(self.root)
        run(["tar", "-C", self.root, "-xpf", self.tarball], "unpacking the root")
        shutil.copy2("/etc/resolv.conf", os.path.join(self.root, "etc", "resolv.conf"))
        # Nothing the package installs is started (there is no systemd here anyway).
        policy = os.path.join(self.root, "usr", "sbin", "policy-rc.d")
        with open(policy, "w") as f:
            f.write("#!/bin/sh\nexit 101\n")
        os.chmod(policy, 0o755)
        shutil.copy2(self.deb, os.path.join(self.root, "tmp", os.path.basename(self.deb)))
        env = "DEBIAN_FRONTEND=noninteractive"
        self.root_run(["env", env, "apt-get", "update", "-qq"], "apt-get update in the root",
                      apt_cache=True)
        self.root_run(["env", env, "apt-get", "install", "-y", "-qq",
                       "/tmp/" + os.path.basename(self.deb), "logrotate"],
                      "apt-get install tern in the root", apt_cache=True)

    def check_installed(self):
        pw = self.root_run(["getent", "passwd", "tern"], "getent passwd tern").strip().split(":")
        expect(len(pw) == 7 and pw[6] == "/usr/sbin/nologin" and int(pw[2]) < 1000,
               "tern is no system account without a shell: %r" % pw)
        self.uid = int(pw[2])
        for d in ("var/lib/tern", "var/log/tern"):
            st = os.stat(os.path.join(self.root, d))
            expect(st.st_uid == self.uid and (st.st_mode & 0o777) == 0o750,
                   "/%s: owner %d mode %o, want tern and 0750" % (d, st.st_uid, st.st_mode & 0o777))
        expect(os.path.isdir(os.path.join(self.root, "etc", "tern")), "no /etc/tern")
        conffiles = self.root_run(["dpkg-query", "-W", "-f=${Conffiles}", "tern"], "dpkg-query")
        for f in ("/etc/tern/ternd.yaml", "/etc/logrotate.d/tern"):
            expect(f in conffiles, "%s is not a conffile of the installed package:\n%s"
                   % (f, conffiles))
        out = self.root_run(["/usr/sbin/ternd", "--check-config", "-c", "/etc/tern/ternd.yaml"],
                            "ternd --check-config -c /etc/tern/ternd.yaml", timeout=60)
        print("  check-config: " + out.strip().replace("\n", "\n  "))
        if os.path.exists(os.path.join(self.root, "usr", "bin", "systemd-analyze")):
            self.root_run(["systemd-analyze", "verify", "/lib/systemd/system/ternd.service"],
                          "systemd-analyze verify ternd.service", timeout=60)

    def check_serve(self):
        self.port = servers.free_port()
        self.metrics = servers.free_port()
        # The installed config, with the metrics port and a query log moved for this test: a copy
        # beside it (relative zone paths resolve against the config's directory).
        with open(os.path.join(self.root, "etc", "tern", "ternd.yaml")) as f:
            text = f.read()
        expect('metrics_listen: "127.0.0.1:9153"' in text and "\nquery_log: ~\n" in text,
               "the installed ternd.yaml changed: update this test's copy of it")
        text = text.replace('metrics_listen: "127.0.0.1:9153"',
                            'metrics_listen: "127.0.0.1:%d"' % self.metrics)
        text = text.replace("\nquery_log: ~\n", "\nquery_log: {requests: {target: file, "
                            "format: text, path: /var/log/tern/requests.log}}\n")
        with open(os.path.join(self.root, "etc", "tern", "deb-test.yaml"), "w") as f:
            f.write(text)
        self.log = open(os.path.join(self.workdir, "ternd.log"), "wb")
        self.proc = subprocess.Popen(
            self.in_root(["/usr/sbin/ternd", "-c", "/etc/tern/deb-test.yaml", "--listen",
                          "%s:%d" % (servers.LOOPBACK, self.port)]),
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        servers.wait_until(lambda: self.query_www() == "192.0.2.80", servers.START_TIMEOUT,
                           "www.example.test A from the installed ternd")
        with open("/proc/%d/status" % self.proc.pid) as f:
            uids = [ln.split()[1:] for ln in f if ln.startswith("Uid:")][0]
        expect(all(int(u) == self.uid for u in uids), "ternd runs as uids %s, want tern (%d)"
               % (uids, self.uid))
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.metrics, timeout=5) as r:
            body = r.read().decode()
        expect("tern_" in body, "/metrics without tern_ series:\n%s" % body[:500])
        out = self.root_run(["/usr/sbin/ternctl", "-s", "/run/tern/ternd.sock", "status"],
                            "ternctl status in the root", timeout=30)
        expect("example.test" in out, "ternctl status does not list example.test:\n%s" % out)

    def query_www(self):
        q = dns.message.make_query("www.example.test", "A")
        r = dns.query.udp(q, servers.LOOPBACK, port=self.port, timeout=1.0)
        for rrset in r.answer:
            if rrset.rdtype == dns.rdatatype.A:
                return rrset[0].address
        return None

    def log_lines(self, name):
        path = os.path.join(self.root, "var", "log", "tern", name)
        if not os.path.exists(path):
            return []
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace").splitlines()

    def check_logrotate(self):
        logged = lambda: any("www.example.test" in ln for ln in self.log_lines("requests.log"))
        servers.wait_until(lambda: self.query_www() and logged(), 10,
                           "the query in /var/log/tern/requests.log")
        self.root_run(["logrotate", "--force", "/etc/logrotate.d/tern"], "logrotate", timeout=60)
        expect(os.path.exists(os.path.join(self.root, "var", "log", "tern", "requests.log.1")),
               "no requests.log.1 after logrotate: %s"
               % os.listdir(os.path.join(self.root, "var", "log", "tern")))
        # ternd reopens on SIGHUP (sent by postrotate through the pid file): the next query's
        # line lands in a new requests.log.
        servers.wait_until(lambda: self.query_www() and logged(), 10,
                           "a query logged in the new requests.log after rotation")

    def stop(self):
        if self.proc is not None and self.proc_rc is None:
            servers.stop_process(self.proc)
            self.proc_rc = self.proc.returncode
            self.log.close()

    def check_purge(self):
        self.stop()
        expect(self.proc_rc in (0, -15), "ternd exited with %s on SIGTERM" % self.proc_rc)
        # Something in /var/lib/tern (as a dnssec policy's keys would be) must survive a purge.
        keep = os.path.join(self.root, "var", "lib", "tern", "kept")
        with open(keep, "w") as f:
            f.write("state\n")
        self.root_run(["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "purge", "-y", "-qq",
                       "tern"], "apt-get purge tern")
        for gone in ("etc/tern/ternd.yaml", "etc/logrotate.d/tern", "var/log/tern",
                     "usr/sbin/ternd", "lib/systemd/system/ternd.service"):
            expect(not os.path.lexists(os.path.join(self.root, gone)),
                   "/%s left behind by apt-get purge" % gone)
        expect(os.path.exists(keep), "purge removed what was in /var/lib/tern")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", required=True,
                    help="build copy, .deb, cached root tarball and apt caches (kept for reruns)")
    ap.add_argument("--keep-root", action="store_true", help="leave the unpacked root behind")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    d = Deb(args)
    results = []
    t0 = time.monotonic()
    checks = [("prerequisites", d.check_prerequisites), ("build", d.check_build),
              ("lintian", d.check_lintian), ("contents", d.check_contents),
              ("root", d.check_root), ("installed", d.check_installed),
              ("serve", d.check_serve), ("logrotate", d.check_logrotate),
              ("purge", d.check_purge)]
    try:
        for name, fn in checks:
            servers.run_check(results, name, lambda fn=fn, name=name: d.timed(name, fn))
            if results[-1][1]:
                break
    finally:
        d.stop()
        purged = any(name == "purge" for name, _ in results)  # which checked the exit itself
        if d.proc is not None and d.proc_rc not in (0, -15) and not purged:
            results.append(("clean_exit", "ternd exited with %s on SIGTERM" % d.proc_rc))
        if any(err for _, err in results) and d.proc is not None:
            with open(os.path.join(d.workdir, "ternd.log"), "rb") as f:
                print(f.read()[-3000:].decode("utf-8", "replace"))
        if not args.keep_root:
            try:
                d.remove_root()
            except Failed as e:
                results.append(("cleanup", str(e)))
    print("times: " + ", ".join("%s %.0f s" % t for t in d.times) +
          "; total %.0f s" % (time.monotonic() - t0))
    return servers.report(results)


if __name__ == "__main__":
    sys.exit(main())
