#!/usr/bin/env python3
"""Round-trip times of DNS queries sent at a light, fixed rate over UDP.

    udp_latency.py ADDR PORT RATE SECS NAME

One SOA query for NAME every 1/RATE s for SECS s from one connected socket, each reply matched
by its ID; prints one JSON line: {"sent", "got", "p50_us", "p90_us", "p99_us", "max_us"}.
bench/xdp.py runs it in the client namespace to show what a device's interrupt deferral (the
busy-polling runs) costs a query when traffic is light: a worker that found its socket empty
sleeps, and the next datagram waits in the device queue for the deferral's timer.
"""
import json
import select
import socket
import struct
import sys
import time


def query(qid, name):
    q = struct.pack(">HHHHHH", qid, 0, 1, 0, 0, 0)
    for label in name.rstrip(".").split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\0" + struct.pack(">HH", 6, 1)  # SOA IN


def main():
    addr, port, rate, secs, name = (sys.argv[1], int(sys.argv[2]), float(sys.argv[3]),
                                    float(sys.argv[4]), sys.argv[5])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect((addr, port))
    s.setblocking(False)
    pending, rtt = {}, []

    def drain(wait):
        r, _, _ = select.select([s], [], [], wait)
        while r:
            try:
                d = s.recv(4096)
            except (BlockingIOError, ConnectionRefusedError):
                return
            if len(d) >= 2:
                t = pending.pop(struct.unpack(">H", d[:2])[0], None)
                if t is not None:
                    rtt.append(time.monotonic() - t)
            r, _, _ = select.select([s], [], [], 0)

    n = int(rate * secs)
    t0 = time.monotonic()
    for i in range(n):
        due = t0 + i / rate
        while time.monotonic() < due:
            drain(max(0.0, due - time.monotonic()))
        qid = i & 0xFFFF
        pending[qid] = time.monotonic()
        try:
            s.send(query(qid, name))
        except (BlockingIOError, ConnectionRefusedError):
            pending.pop(qid, None)
    end = time.monotonic() + 1.0
    while pending and time.monotonic() < end:
        drain(0.05)
    rtt.sort()

    def pct(p):
        return round(1e6 * rtt[min(len(rtt) - 1, int(p * len(rtt)))]) if rtt else None

    print(json.dumps({"sent": n, "got": len(rtt), "p50_us": pct(0.5), "p90_us": pct(0.9),
                      "p99_us": pct(0.99), "max_us": round(1e6 * rtt[-1]) if rtt else None}))


if __name__ == "__main__":
    main()
