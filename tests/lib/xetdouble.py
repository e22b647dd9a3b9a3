#!/usr/bin/python3
"""A double of the Hugging Face Hub whose files are in Xet storage, and of
its Xet CAS, built from the public spec (huggingface.co/docs/xet) on top of
the Hub double (hubdouble.py, whose endpoints it keeps). For a repository
with "xet": true, every LFS file is a Xet file of the store (xetstore.py):

  HEAD|GET /ORG/REPO/resolve/REV/PATH   302 to the LFS-compatible bridge
       (the file rebuilt from its xorbs, served in ranges) with
       X-Xet-Hash, X-Linked-Size, X-Linked-Etag (its SHA-256),
       X-Repo-Commit and Link: <token URL>; rel="xet-auth",
       <reconstruction URL>; rel="xet-reconstruction-info"; with
       Accept: application/vnd.xet-fileinfo+json, 200 and those headers
  GET /api/{models|datasets}/ORG/REPO/xet-read-token/REV
       {"accessToken", "exp", "casUrl"} (the Hub token for a gated one)
  GET /v1/reconstructions/HASH, /v2/reconstructions/HASH (CAS; Bearer
       accessToken; Range: bytes=A-B) the terms, offset_into_first_range,
       and fetch_info (v1: a URL and its url_range per chunk run) or xorbs
       (v2: one URL per xorb for all its runs)
  the tree listing's LFS entries carry "xetHash"

Xorb URLs are presigned as nginx's secure_link checks them
(xetstore.xorb_location: md5 of the expiry, the path, the signed ranges r=
and the secret);
a URL is good only with Range: bytes=R (the signed set, or one range of
it), as the Hub's CDN wants url_range. They point at the test's nginx
("xorb_cdn", so a bench can cap them with limit_rate), or at the double
itself (/__xorb/, same checks) when a fault is on or there is no nginx.

Faults (POST /__faults {...}, cleared by {}), each in the tests:
  "token_ttl": N      tokens expire N seconds after they are issued
  "revoke": N         the CAS refuses the next N tokens it is shown (401)
  "url_ttl": N        xorb URLs expire after N seconds (0: already) (403)
  "url_expired": N    the next N xorb URLs issued are already expired
  "short": true|N     a xorb range answered with half its bytes (206);
                      true: every one, N: the next N
  "corrupt": "payload"|"header"   a byte of the first chunk served flipped
                      (of every range; with "corrupt_count": N, the next N)
  "wrong_range": true|N  a reconstruction for the asked length from byte 0
  "wide_fetch": true  every fetch_info entry (v1) widened to its whole xorb:
                      its terms need a few of the chunks fetched
  "status": {"code": 429|503, "retry_after": S, "count": N,
             "where": "cas"|"xorb"|"token"}   N answers of that status
A repository with "xet_token": false names its files' Xet hashes but has
no token endpoint (404), as a Hub without Xet for it.
GET /__seen lists every request (path, whether it had the Hub token, and
for the CAS and xorbs the Range), POST /__seen/clear forgets them; GET
/__store the store's metadata.

usage: xetdouble.py CONFIG.json; CONFIG is hubdouble's plus "xet_store"
(a directory xetstore.build wrote), "xet_files" ({commit dir/path: file
hash}), "cdn_secret", and optionally "xorb_cdn" and "bridge_cdn" (nginx
URLs serving xet_store with xetstore.xorb_location and bridge_location).
"""

import json
import os
import re
import secrets
import sys
import time
import urllib.parse

import hubdouble
import xetstore
from hubdouble import CONFIG, LOCK, SEEN, LFS

import loopback

STORE = CONFIG["xet_store"]
META = json.load(open(os.path.join(STORE, "store.json")))
FILES = CONFIG["xet_files"]
FAULTS = {}
TOKENS = {}  # accessToken -> exp

def take_fault(name):
    """The fault's value; a count (an int where true would do, or a
    NAME_count beside it) is used up one answer at a time."""
    with LOCK:
        v = FAULTS.get(name)
        n = FAULTS.get(f"{name}_count")
        if n is not None:
            if n <= 0:
                return None
            FAULTS[f"{name}_count"] = n - 1
            return v
        if name in ("short", "wrong_range") and type(v) is int:
            if v <= 0:
                return None
            FAULTS[name] = v - 1
        return v


def peek_fault(name):
    """Whether the fault is on, without using it up."""
    with LOCK:
        v, n = FAULTS.get(name), FAULTS.get(f"{name}_count")
        return bool(v) and (n is None or n > 0) and not (type(v) is int and v <= 0)


def take_status(where):
    """The status fault for `where`, counted down."""
    with LOCK:
        st = FAULTS.get("status")
        if not st or st.get("where") != where or st.get("count", 0) <= 0:
            return None
        st["count"] -= 1
        return st


class Handler(hubdouble.Handler):
    # Headers and body go out in two writes: with Nagle's algorithm the
    # second waits for the client's delayed ACK of the first, 20-40 ms a
    # reconstruction (the CAS answered 48 a second, 20 at once).
    disable_nagle_algorithm = True

    def base(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def seen(self, **kw):
        with LOCK:
            SEEN.append(dict({"method": self.command, "path": urllib.parse.urlsplit(self.path).path,
                              "auth": self.headers.get("Authorization") is not None,
                              "token_ok": self.headers.get("Authorization") == f"Bearer {CONFIG['token']}"},
                             **kw))

    def status_fault(self, where, head=False):
        st = take_status(where)
        if not st:
            return False
        self.send(st["code"], b"slow down", {"Retry-After": str(st.get("retry_after", 1))}, head)
        return True

    def handle_any(self, head):
        url = urllib.parse.urlsplit(self.path)
        path = url.path
        if path == "/__store":
            return self.json(META)
        m = re.fullmatch(r"/api/(models|datasets|spaces)/([^/]+/[^/]+)/xet-read-token/([^/]+)", path)
        if m:
            self.seen()
            return self.token(m.group(2), m.group(3))
        m = re.fullmatch(r"/v([12])/reconstructions/([0-9a-f]{64})", path)
        if m:
            self.seen(range=self.headers.get("Range"))
            return self.reconstruction(m.group(2), m.group(1) == "2")
        m = re.fullmatch(r"/__xorb/xorbs/([0-9a-f]{64})", path)
        if m:
            self.seen(range=self.headers.get("Range"))
            return self.xorb(m.group(1), url.query, head)
        m = re.fullmatch(r"/__bridge/bridge/([0-9a-f]{64})", path)
        if m:
            self.seen(range=self.headers.get("Range"))
            return self.bridge(m.group(1), head)
        return super().handle_any(head)

    def do_POST(self):
        if self.path == "/__seen/clear":
            with LOCK:
                SEEN.clear()
            return self.json({"ok": True})
        if self.path != "/__faults":
            return self.send(404, b"")
        n = int(self.headers.get("Content-Length", 0))
        with LOCK:
            FAULTS.clear()
            FAULTS.update(json.loads(self.rfile.read(n) or b"{}"))
        self.json({"ok": True})

    # ---- the Hub ----

    def xet_file(self, repo, sha, path):
        if not repo.get("xet") or not path.endswith(LFS):
            return None
        return FILES.get(f"{repo['commits'][sha]}/{path}")

    def resolve(self, name, rev, path, head):
        repo, sha, root = self.repo_commit(name, rev)
        fh = self.xet_file(repo, sha, path) if repo and sha and self.authorized(repo) else None
        if not fh:
            return super().resolve(name, rev, path, head)
        self.seen()
        f = META["files"][fh]
        kind = repo.get("type", "models")
        links = (f'<{self.base()}/api/{kind}/{name}/xet-read-token/{sha}>; rel="xet-auth", '
                 f'<{self.base()}/v1/reconstructions/{fh}>; rel="xet-reconstruction-info"')
        headers = {"X-Repo-Commit": sha, "X-Xet-Hash": fh, "X-Linked-Size": str(f["size"]),
                   "X-Linked-Etag": f'"{f["sha256"]}"', "ETag": f'"{hubdouble.git_oid(os.path.join(root, path))}"',
                   "Link": links}
        if "application/vnd.xet-fileinfo+json" in self.headers.get("Accept", ""):
            body = json.dumps({"hash": fh, "size": f["size"], "etag": f["sha256"],
                               "refreshUrl": f"{self.base()}/api/{kind}/{name}/xet-read-token/{sha}",
                               "reconstructionUrl": f"{self.base()}/v1/reconstructions/{fh}"}).encode()
            return self.send(200, body, dict(headers, **{"Content-Type": "application/vnd.xet-fileinfo+json"}),
                             head)
        return self.send(302, b"", dict(headers, Location=self.bridge_url(fh)), head)

    def bridge_url(self, fh):
        path = f"/bridge/{fh}"
        cdn = CONFIG.get("bridge_cdn")
        if cdn:
            return f"{cdn}{path}?{xetstore.sign(path, CONFIG['cdn_secret'], 3600)}"
        return f"{self.base()}/__bridge{path}"

    def api(self, kind, name, what, rev, path, query):
        repo = CONFIG["repos"].get(name)
        if not repo or not repo.get("xet") or what != "tree":
            return super().api(kind, name, what, rev, path, query)
        # the listing as the double gives it, with each Xet file's hash
        send = self.json
        _, sha, _ = self.repo_commit(name, rev)

        def with_hash(obj, headers=None):
            for e in obj if isinstance(obj, list) else []:
                fh = sha and self.xet_file(repo, sha, e.get("path", ""))
                if fh and e.get("type") == "file":
                    e["xetHash"] = fh
            send(obj, headers)
        self.json = with_hash
        try:
            return super().api(kind, name, what, rev, path, query)
        finally:
            del self.json

    def token(self, name, rev):
        repo, sha, _ = self.repo_commit(name, rev)
        if not repo:
            return self.send(404, b'{"error":"Repository not found"}')
        if not self.authorized(repo):
            return self.send(401, b'{"error":"Access to this repository is restricted"}')
        if not sha or repo.get("xet_token") is False:
            return self.send(404, b'{"error":"Revision not found"}' if not sha else b'{"error":"Not Found"}')
        if self.status_fault("token"):
            return
        tok = "xet_" + secrets.token_hex(16)
        ttl = take_fault("token_ttl")
        exp = int(time.time()) + (3600 if ttl is None else ttl or -1)
        with LOCK:
            TOKENS[tok] = exp
        cas = self.base()
        self.json({"accessToken": tok, "exp": exp, "casUrl": cas},
                  {"X-Xet-Access-Token": tok, "X-Xet-Token-Expiration": str(exp), "X-Xet-Cas-Url": cas})

    # ---- the CAS ----

    def cas_token_ok(self):
        auth = self.headers.get("Authorization", "")
        tok = auth[7:] if auth.startswith("Bearer ") else None
        with LOCK:
            exp = TOKENS.get(tok)
            if exp is not None and FAULTS.get("revoke", 0) > 0:
                FAULTS["revoke"] -= 1
                del TOKENS[tok]
                return False
        return exp is not None and exp > time.time()

    def reconstruction(self, fh, v2):
        if not self.cas_token_ok():
            return self.send(401, b'{"error":"invalid or expired token"}')
        if self.status_fault("cas"):
            return
        f = META["files"].get(fh)
        if not f:
            return self.send(404, b'{"error":"file not found"}')
        size = f["size"]
        first, last = 0, size - 1
        rng = self.headers.get("Range")
        if rng:
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng)
            if not m:
                return self.send(400, b'{"error":"bad range"}')
            first = int(m.group(1))
            last = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
            if first >= size or first > last:
                return self.send(416, b"", {"Content-Range": f"bytes */{size}"})
        if first > 0 and take_fault("wrong_range"):
            first, last = 0, last - first
        plan = xetstore.plan(META, fh, first, last, self.xorb_url, v2)
        if take_fault("wide_fetch"):
            for xorb, entries in plan.get("fetch_info", {}).items():
                chunks = META["xorbs"][xorb]["chunks"]
                end = chunks[-1][0] + chunks[-1][1] - 1
                for e in entries:
                    e.update({"range": {"start": 0, "end": len(chunks)}, "url": self.xorb_url(xorb, [(0, end)]),
                              "url_range": {"start": 0, "end": end}})
        self.json(plan)

    def xorb_url(self, xorb, ranges):
        path = f"/xorbs/{xorb}"
        with LOCK:
            expired = FAULTS.get("url_expired", 0) > 0
            if expired:
                FAULTS["url_expired"] -= 1
        ttl = -1 if expired else take_fault("url_ttl")
        query = xetstore.sign(path, CONFIG["cdn_secret"], 3600 if ttl is None else ttl or -1, ranges)
        via_self = not CONFIG.get("xorb_cdn") or any(peek_fault(k) for k in ("short", "corrupt")) or \
            (FAULTS.get("status") or {}).get("where") == "xorb"
        base = f"{self.base()}/__xorb" if via_self else CONFIG["xorb_cdn"]
        return f"{base}{path}?{query}"

    def xorb(self, xorb, q, head):
        """A presigned xorb URL served by the double: nginx's checks, then
        the faults."""
        if not xetstore.signed_ok(f"/xorbs/{xorb}", CONFIG["cdn_secret"], q, self.headers.get("Range")):
            return self.send(403, b"<Error><Code>AccessDenied</Code></Error>", head=head)
        if self.status_fault("xorb", head):
            return
        with open(os.path.join(STORE, "xorbs", xorb), "rb") as fx:
            data = fx.read()
        ranges = [tuple(map(int, r.split("-"))) for r in self.headers["Range"][6:].split(",")]
        if any(a > b or b >= len(data) for a, b in ranges):
            return self.send(416, b"", {"Content-Range": f"bytes */{len(data)}"}, head)
        parts = [self.faulty(data, a, b) for a, b in ranges]
        if len(parts) == 1:
            a, b, body = parts[0]
            return self.send(206, body, {"Content-Range": f"bytes {a}-{b}/{len(data)}"}, head)
        # several ranges: multipart/byteranges (RFC 9110), as nginx answers them
        sep = "xet" + secrets.token_hex(8)
        body = b"".join(f"\r\n--{sep}\r\nContent-Type: application/octet-stream\r\n"
                        f"Content-Range: bytes {a}-{b}/{len(data)}\r\n\r\n".encode() + part
                        for a, b, part in parts) + f"\r\n--{sep}--\r\n".encode()
        self.send(206, body, {"Content-Type": f"multipart/byteranges; boundary={sep}"}, head)

    def faulty(self, data, a, b):
        """Bytes a..b of a xorb as the faults have them: (a, b, bytes)."""
        body = bytearray(data[a:b + 1])
        kind = take_fault("corrupt")
        if kind == "header":
            body[1] ^= 0x40  # the first chunk's compressed size
        elif kind:
            clen = int.from_bytes(body[1:4], "little")
            body[8 + clen // 2] ^= 0x01  # the middle of its payload
        if take_fault("short"):
            body = body[:len(body) // 2]
            b = a + len(body) - 1
        return a, b, bytes(body)

    def bridge(self, fh, head):
        """The LFS-compatible route when no nginx serves it: ranges of the
        rebuilt file, under the file's SHA-256 as its ETag (as the Hub's
        bridge), If-Match checked against it."""
        full = os.path.join(STORE, "bridge", fh)
        if not os.path.isfile(full):
            return self.send(404, b"", head=head)
        size = os.path.getsize(full)
        etag = '"%s"' % META["files"][fh]["sha256"]
        im = self.headers.get("If-Match")
        if im and im not in ("*", etag):
            return self.send(412, b"", head=head)
        a, b = 0, size - 1
        rng = self.headers.get("Range")
        if rng:
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng)
            a = int(m.group(1))
            b = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
            if a >= size:
                return self.send(416, b"", {"Content-Range": f"bytes */{size}"}, head)
        with open(full, "rb") as f:
            f.seek(a)
            data = f.read(b - a + 1)
        if rng:
            return self.send(206, data, {"ETag": etag, "Content-Range": f"bytes {a}-{b}/{size}"}, head)
        self.send(200, data, {"ETag": etag, "Accept-Ranges": "bytes"}, head)


if __name__ == "__main__":
    # A thread holding the GIL keeps it up to the switch interval (5 ms)
    # while others wait with their answers ready: at 20 reconstructions at
    # once, 39 ms each, a third of a cold load's part.
    sys.setswitchinterval(0.0002)
    loopback.serve(Handler)
