#!/usr/bin/python3
"""A server that misbehaves on purpose (Python standard library), for the
tests of what tensorfs promises against a hostile or broken server: one
that ignores If-Match while the file changes, sends headers too long to
keep, answers with something that is not HTTP, redirects credentials to
another origin, stalls after the first answer, or lists for ever.

usage: hostile.py ROOT (prints its port, then serves the files under ROOT)

POST /__mode with a JSON object replaces the behaviour (every key is
optional); GET /__seen lists every request (method, path, range,
if_match, authorization, x-amz-security-token).
  "ignore_if_match": true      serve 206 whatever If-Match says (else 412)
  "swap": {"/a": "/b"}         serve the bytes of ROOT/b at /a (new ETag)
  "etag": "..."                the ETag sent for every file
  "redirect": "http://..."     302 to this URL + the path, for every request
  "auth": "user:password"      401 without this Basic authorization
  "garbage": true              answer bytes that are not HTTP
  "stall_from": N, "stall_seconds": S
                               a Range request starting at N or later gets
                               no answer for S seconds
  "hub_endless": true          the Hub's API: a revision, and a tree listing
                               whose Link rel="next" never ends
  "s3_endless": true           ListObjectsV2 that always IsTruncated
  "delay": S                   every range answer waits S seconds first
  "size": N                    every file claims N bytes (Content-Range's
                               total); its bytes past the real ones are zeros
GET /__inflight gives the most range requests it answered at once.
"""

import base64
import hashlib
import json
import os
import re
import sys
import threading
import time
import urllib.parse

import loopback

ROOT = sys.argv[1]
LOCK = threading.Lock()
MODE = {}
SEEN = []
INFLIGHT = [0, 0]  # now, most
SHA = "0123456789abcdef0123456789abcdef01234567"


class Handler(loopback.Handler):


    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path == "/__mode":
            with LOCK:
                MODE.clear()
                MODE.update(json.loads(body))
            return self.send(200, b"{}")
        self.send(404)

    def do_HEAD(self):
        self.any(head=True)

    def do_GET(self):
        self.any(head=False)

    def any(self, head):
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/__seen":
            with LOCK:
                return self.send(200, json.dumps(SEEN).encode())
        if url.path == "/__inflight":
            with LOCK:
                return self.send(200, json.dumps(INFLIGHT[1]).encode())
        with LOCK:
            mode = dict(MODE)
            SEEN.append({"method": self.command, "path": url.path, "range": self.headers.get("Range"),
                         "if_match": self.headers.get("If-Match"),
                         "auth": self.headers.get("Authorization"),
                         "token": self.headers.get("x-amz-security-token")})
        if mode.get("garbage"):
            self.wfile.write(b"SSH-2.0-OpenSSH_9.2\r\nthis is not http\r\n\r\n")
            self.close_connection = True
            return
        if "redirect" in mode:
            return self.send(302, b"", {"Location": mode["redirect"] + self.path}, head)
        if "auth" in mode:
            want = "Basic " + base64.b64encode(mode["auth"].encode()).decode()
            if self.headers.get("Authorization") != want:
                return self.send(401, b"", {"WWW-Authenticate": 'Basic realm="x"'}, head)
        if mode.get("hub_endless"):
            return self.hub_endless(url)
        if mode.get("s3_endless"):
            return self.s3_endless(url)
        with LOCK:
            INFLIGHT[0] += 1
            INFLIGHT[1] = max(INFLIGHT)
        try:
            if mode.get("delay") and self.headers.get("Range"):
                time.sleep(mode["delay"])
            self.file(url.path, mode, head)
        finally:
            with LOCK:
                INFLIGHT[0] -= 1

    def file(self, path, mode, head):
        served = mode.get("swap", {}).get(path, path)
        full = os.path.join(ROOT, served.lstrip("/"))
        if ".." in served.split("/") or not os.path.isfile(full):
            return self.send(404, b"", head=head)
        data = open(full, "rb").read()
        etag = mode.get("etag") or '"%s"' % hashlib.md5(data).hexdigest()
        im = self.headers.get("If-Match")
        if im and im != etag and not mode.get("ignore_if_match"):
            return self.send(412, b"", head=head)
        rng = self.headers.get("Range")
        if not rng:
            return self.send(200, data, {"ETag": etag}, head)
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng)
        a = int(m.group(1))
        if "size" in mode:
            # a lying size: at most 1 MiB of zeros past the real bytes
            total = mode["size"]
            b = min(int(m.group(2)) if m.group(2) else total - 1, total - 1, a + (1 << 20) - 1)
            body = (data[a:b + 1] + bytes(b + 1 - max(a, len(data)))) if a < total else b""
            if a >= total:
                return self.send(416, b"", {"Content-Range": f"bytes */{total}"}, head)
            return self.send(206, body, {"ETag": etag, "Content-Range": f"bytes {a}-{b}/{total}"}, head)
        b = min(int(m.group(2)) if m.group(2) else len(data) - 1, len(data) - 1)
        if "stall_from" in mode and a >= mode["stall_from"]:
            time.sleep(mode.get("stall_seconds", 3600))
            self.close_connection = True
            return
        if a >= len(data):
            return self.send(416, b"", {"Content-Range": f"bytes */{len(data)}"}, head)
        self.send(206, data[a:b + 1], {"ETag": etag, "Content-Range": f"bytes {a}-{b}/{len(data)}"}, head)

    def hub_endless(self, url):
        base = f"http://127.0.0.1:{self.server.server_address[1]}"
        m = re.fullmatch(r"/api/models/([^/]+/[^/]+)/(revision|tree)/([^/]+)(/.*)?", url.path)
        if not m:
            return self.send(404)
        if m.group(2) == "revision":
            body = json.dumps({"id": m.group(1), "sha": SHA, "siblings": []}).encode()
            return self.send(200, body, {"Content-Type": "application/json"})
        page = int(urllib.parse.parse_qs(url.query).get("cursor", ["0"])[0])
        entries = [{"type": "file", "path": f"f{page}-{i}.txt", "size": 1, "oid": "0" * 40}
                   for i in range(1000)]
        nxt = f"{base}{url.path}?recursive=true&cursor={page + 1}"
        self.send(200, json.dumps(entries).encode(),
                  {"Content-Type": "application/json", "Link": f'<{nxt}>; rel="next"'})

    def s3_endless(self, url):
        q = urllib.parse.parse_qs(url.query)
        page = int(q.get("continuation-token", ["0"])[0])
        prefix = q.get("prefix", [""])[0]
        keys = "".join(f"<Contents><Key>{prefix}k{page}-{i}.bin</Key><Size>1</Size>"
                       f"<ETag>&quot;x&quot;</ETag></Contents>" for i in range(1000))
        body = (f'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>models</Name>'
                f"<Prefix>{prefix}</Prefix>{keys}<IsTruncated>true</IsTruncated>"
                f"<NextContinuationToken>{page + 1}</NextContinuationToken></ListBucketResult>").encode()
        self.send(200, body, {"Content-Type": "application/xml"})


if __name__ == "__main__":
    loopback.serve(Handler)
