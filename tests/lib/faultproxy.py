#!/usr/bin/python3
"""A fault-injecting HTTP proxy for the tests (Python standard library), for
what nginx cannot do by itself: reset a connection in the middle of a body,
cut a body short, answer another Content-Range, stall, fail a number of
times before answering, compress an answer nobody asked to be compressed,
send more than the range. It forwards everything else to the upstream
(nginx) as it is.

usage: faultproxy.py UPSTREAM_PORT      (prints its own port, then serves)

POST /__faults with a JSON list of rules replaces the rules; GET /__stats
gives the requests seen per path. A rule:
  {"match": "substring of the path" (default all),
   "fault": "reset" | "truncate" | "badrange" | "stall" | "status" | "length" | "slow"
            | "gzip" | "te_gzip" | "overrun",
   "times": how many matching requests it applies to (default: all),
   "after": body bytes sent before a reset or a cut (default 1000),
   "status": the status for "status" (default 503),
   "retry_after": a Retry-After value for "status",
   "seconds": how long "stall" holds the answer, or "slow" the rest of a body
              longer than "after" (default 3600),
   "min": the least body length "gzip", "te_gzip" and "overrun" touch
          (default 0): shorter answers (the first request's) pass as they are}
"gzip" sends the body gzip-compressed with Content-Encoding: gzip (as a proxy
that compresses answers whatever the client asked), "te_gzip" the same as
Transfer-Encoding: gzip, chunked; the status and Content-Range stay the
upstream's. "overrun" sends the body and 4096 bytes more, with no
Content-Length (the end of the connection ends it).
/__stats counts the requests per path; "__slowed" lists the Range headers of
the answers "slow" held, "__accept_encoding" every Accept-Encoding a client
sent.
"""

import gzip
import http.client
import json
import socket
import struct
import sys
import threading
import time

import loopback

UPSTREAM = int(sys.argv[1])
LOCK = threading.Lock()
RULES = []
STATS = {}


class Handler(loopback.Handler):

    def reply_json(self, obj):
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        if self.path == "/__faults":
            rules = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with LOCK:
                RULES[:] = rules
            self.reply_json({"ok": True})
        else:
            self.send_error(404)

    def rule(self):
        with LOCK:
            STATS[self.path] = STATS.get(self.path, 0) + 1
            if self.headers.get("Accept-Encoding") is not None:
                STATS.setdefault("__accept_encoding", []).append(self.headers.get("Accept-Encoding"))
            for r in RULES:
                if r.get("match", "") in self.path and r.get("times", -1) != 0:
                    if r.get("times", -1) > 0:
                        r["times"] -= 1
                    return dict(r)
        return None

    def reset(self):
        # an RST, not a clean end: SO_LINGER with a zero timeout
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True

    def do_HEAD(self):
        self.forward(head=True)

    def do_GET(self):
        if self.path == "/__stats":
            with LOCK:
                self.reply_json(dict(STATS))
            return
        self.forward(head=False)

    def forward(self, head):
        r = self.rule()
        if r and r["fault"] == "status":
            self.send_response(r.get("status", 503))
            if "retry_after" in r:
                self.send_header("Retry-After", str(r["retry_after"]))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if r and r["fault"] == "stall":
            time.sleep(r.get("seconds", 3600))
            self.close_connection = True
            return
        up = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        up.request("HEAD" if head else "GET", self.path, headers=headers)
        resp = up.getresponse()
        body = resp.read()
        up.close()
        coded = r and r["fault"] in ("gzip", "te_gzip", "overrun") and not head and len(body) >= r.get("min", 0)
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() in ("connection", "keep-alive", "transfer-encoding", "server", "date"):
                continue
            if coded and k.lower() == "content-length":
                continue
            if r and r["fault"] == "length" and k.lower() == "content-length":
                v = str(10 ** 15)  # a length no body will have
            if r and r["fault"] == "badrange" and k.lower() == "content-range" and v.startswith("bytes "):
                # the same length, one byte further on
                a, rest = v[6:].split("-", 1)
                b, total = rest.split("/")
                v = f"bytes {int(a) + 1}-{int(b) + 1}/{total}"
            self.send_header(k, v)
        if coded:
            return self.send_coded(r["fault"], body)
        self.end_headers()
        if head:
            return
        if r and r["fault"] == "length":
            self.wfile.write(body)
            self.close_connection = True
            return
        if r and r["fault"] == "slow" and len(body) > r.get("after", 1000):
            n = r.get("after", 1000)
            self.wfile.write(body[:n])
            self.wfile.flush()
            with LOCK:
                STATS.setdefault("__slowed", []).append(self.headers.get("Range", ""))
            time.sleep(r.get("seconds", 3600))
            self.wfile.write(body[n:])
            return
        if r and r["fault"] in ("reset", "truncate"):
            n = min(r.get("after", 1000), len(body))
            self.wfile.write(body[:n])
            self.wfile.flush()
            if r["fault"] == "reset":
                self.reset()
            else:
                self.close_connection = True
            return
        self.wfile.write(body)

    def send_coded(self, fault, body):
        """The rest of an answer whose headers are out but for these."""
        if fault == "gzip":
            out = gzip.compress(body)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
        elif fault == "te_gzip":
            out = gzip.compress(body)
            self.send_header("Transfer-Encoding", "gzip, chunked")
            self.end_headers()
            self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(out), out))
        else:
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body + b"\0" * 4096)
            self.close_connection = True


if __name__ == "__main__":
    loopback.serve(Handler)
