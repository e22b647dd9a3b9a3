#!/usr/bin/python3
"""A forward HTTP proxy for the tests of -o proxy= (Python standard
library), standing for squid or Dragonfly's dfdaemon proxy: it takes
absolute-form requests (GET http://host:port/path) and forwards them, and
opens a tunnel for CONNECT host:port, relaying the bytes both ways. It
records what reached it, so a test can say which credentials a proxy sees.

usage: fwdproxy.py USER:PASSWORD | -   (prints its port, then serves)
  With USER:PASSWORD every request must carry it as Proxy-Authorization
  (Basic), or gets 407; the header is not forwarded.

GET /__seen (origin-form, to the proxy itself) lists every request: its
method, target, headers, and for a tunnel the bytes the client sent through
it (latin-1, the first 64 KiB).
"""

import base64
import http.client
import json
import select
import socket
import sys
import threading

import loopback

CREDS = None if sys.argv[1] == "-" else "Basic " + base64.b64encode(sys.argv[1].encode()).decode()
LOCK = threading.Lock()
SEEN = []
HOP = {"proxy-authorization", "proxy-connection", "connection", "keep-alive", "te", "trailers",
       "transfer-encoding", "upgrade"}


class Handler(loopback.Handler):

    def record(self):
        entry = {"method": self.command, "target": self.path,
                 "headers": {k.lower(): v for k, v in self.headers.items()}, "tunnel": ""}
        with LOCK:
            SEEN.append(entry)
        return entry

    def allowed(self):
        if CREDS is None or self.headers.get("Proxy-Authorization") == CREDS:
            return True
        self.send(407, b"proxy credentials wanted", {"Proxy-Authenticate": 'Basic realm="test"'})
        return False

    def do_CONNECT(self):
        entry = self.record()
        if not self.allowed():
            return
        host, _, port = self.path.rpartition(":")
        try:
            up = socket.create_connection((host, int(port)), timeout=10)
        except OSError:
            return self.send(502, b"cannot reach the target")
        self.send_response(200, "Connection established")
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        ends = [self.connection, up]
        try:
            while True:
                ready, _, _ = select.select(ends, [], [], 10)
                if not ready:
                    break
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    if s is self.connection:
                        with LOCK:
                            if len(entry["tunnel"]) < 65536:
                                entry["tunnel"] += data.decode("latin-1")
                        up.sendall(data)
                    else:
                        self.connection.sendall(data)
        except OSError:
            pass
        finally:
            up.close()

    def forward(self, head):
        if self.path == "/__seen":
            with LOCK:
                body = json.dumps(SEEN).encode()
            return self.send(200, body, {"Content-Type": "application/json"})
        self.record()
        if not self.allowed():
            return
        url = http.client.urlsplit(self.path)
        if url.scheme != "http" or not url.hostname:
            return self.send(400, b"absolute http:// URLs only", head=head)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=30)
        try:
            conn.request(self.command, url.path + ("?" + url.query if url.query else ""), headers=headers)
            r = conn.getresponse()
            body = r.read()
            out = {k: v for k, v in r.getheaders() if k.lower() not in HOP and k.lower() != "content-length"}
            if head and r.getheader("Content-Length"):
                out["Content-Length"] = r.getheader("Content-Length")
                self.send_response(r.status)
                for k, v in out.items():
                    self.send_header(k, v)
                self.end_headers()
                return
            self.send(r.status, body, out, head)
        except OSError:
            self.send(502, b"cannot reach the origin", head=head)
        finally:
            conn.close()

    def do_GET(self):
        self.forward(False)

    def do_HEAD(self):
        self.forward(True)


if __name__ == "__main__":
    loopback.serve(Handler)
