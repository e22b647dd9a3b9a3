#!/usr/bin/python3
"""A double of the Hugging Face Hub for the tests (Python standard library):
the Hub cannot be reached from CI. It follows the Hub's documented
behaviour for the endpoints tensorfs uses:

  GET  /api/{models|datasets}/ORG/REPO/revision/REV     {"sha": ..., "siblings": [...]}
  GET  /api/{models|datasets}/ORG/REPO/tree/REV[/PATH]?recursive=true
       a JSON array of {"type", "path", "size", "oid", "lfs": {...}} in pages,
       the next page named by a Link: <...>; rel="next" header
  HEAD|GET /[datasets/]ORG/REPO/resolve/REV/PATH
       an LFS file (*.safetensors, *.gguf, *.bin): 302 to the CDN (the
       nginx of the test) with X-Repo-Commit, X-Linked-Etag (the CDN's
       ETag of the bytes) and X-Linked-Size; any other file: 200 from the
       Hub itself, with Range requests answered 206
  401 for a gated repository without the right "Authorization: Bearer"
  404 for an unknown repository, revision or file; 307 (relative) for a
  renamed repository

usage: hubdouble.py CONFIG.json (prints its port, then serves). CONFIG:
  {"cdn": "http://127.0.0.1:PORT", "cdn_root": DIR served by the CDN,
   "token": "the valid token", "page_size": N,
   "repos": {"org/name": {"type": "models", "gated": false,
                          "refs": {"main": SHA, ...},
                          "commits": {SHA: "dir under cdn_root", ...},
                          "hostile": "dotdot" | "foreign_link" (optional),
                          "cdn": "self" (optional: LFS files from the double's own
                                 /__cdn/ path with the Hub's ETags, the file's
                                 SHA-256, as cas-bridge.xethub.hf.co gives them),
                          "tamper": true (optional, with "cdn": "self": the CDN
                                 serves the LFS files with their last byte
                                 flipped, under the ETag of the true bytes)}},
                          "cdn": "signed" (optional: LFS files from the nginx CDN
                                 under a URL signed for "sign_ttl" seconds (nginx's
                                 secure_link: md5 of expires, path, a nonce that
                                 changes on every resolve, and "cdn_secret"), with
                                 X-Linked-Etag the file's SHA-256, as the Hub)}},
   "renamed": {"old/name": "org/name"}}
GET /__seen lists every request: its method, path and whether it carried the token.
GET /__token?set=NEW makes NEW the one valid token from then on (a token rotated);
with &also=OLD, OLD stays valid too until the next set (a rotation's overlap).
A gated repository with "cdn": "self" asks for the token on its CDN path too,
as the Hub's own host does.
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

CONFIG = json.load(open(sys.argv[1]))
LOCK = threading.Lock()
SEEN = []
LFS = (".safetensors", ".gguf", ".bin", ".pt", ".npz")


def nginx_etag(path):
    st = os.stat(path)
    return '"%x-%x"' % (int(st.st_mtime), st.st_size)


def git_oid(path):
    data = open(path, "rb").read()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def files_of(commit_dir):
    out = []
    for root, dirs, files in os.walk(commit_dir):
        dirs.sort()
        rel_root = os.path.relpath(root, commit_dir)
        if rel_root != ".":
            out.append(("directory", rel_root))
        for f in sorted(files):
            out.append(("file", os.path.normpath(os.path.join(rel_root, f))))
    return out


NONCE = [0]


def signed_url(commit_dir, path):
    """The CDN's URL of a file, valid for sign_ttl seconds, its signature
    new on every call (nginx's secure_link_md5 "$secure_link_expires$uri$arg_n SECRET")."""
    uri = f"/{commit_dir}/{path}"
    expires = int(time.time()) + CONFIG.get("sign_ttl", 60)
    with LOCK:
        NONCE[0] += 1
        n = NONCE[0]
    digest = hashlib.md5(f"{expires}{uri}{n} {CONFIG['cdn_secret']}".encode()).digest()
    sig = base64.urlsafe_b64encode(digest).decode().rstrip("=")
    return f"{CONFIG['cdn']}{urllib.parse.quote(uri)}?n={n}&expires={expires}&md5={sig}"


class Handler(loopback.Handler):


    def json(self, obj, headers=None):
        self.send(200, json.dumps(obj).encode(), dict(headers or {}, **{"Content-Type": "application/json"}))

    def token_ok(self):
        return self.headers.get("Authorization") in [f"Bearer {t}" for t in [CONFIG["token"]] + CONFIG.get("also", [])]

    def authorized(self, repo):
        if not repo.get("gated"):
            return True
        return self.token_ok()

    def repo_commit(self, name, rev):
        repo = CONFIG["repos"].get(name)
        if not repo:
            return None, None, None
        rev = urllib.parse.unquote(rev)
        sha = repo["refs"].get(rev, rev if rev in repo["commits"] else None)
        if not sha:
            return repo, None, None
        return repo, sha, os.path.join(CONFIG["cdn_root"], repo["commits"][sha])

    def do_GET(self):
        self.handle_any(head=False)

    def do_HEAD(self):
        self.handle_any(head=True)

    def handle_any(self, head):
        url = urllib.parse.urlsplit(self.path)
        with LOCK:
            SEEN.append({"method": self.command, "path": url.path, "auth": self.headers.get("Authorization") is not None,
                         "token_ok": self.token_ok()})
        if url.path == "/__seen":
            with LOCK:
                return self.json(list(SEEN))
        if url.path == "/__token":
            with LOCK:
                q = urllib.parse.parse_qs(url.query)
                CONFIG["token"], CONFIG["also"] = q["set"][0], q.get("also", [])
            return self.json({"token": "set"})
        m = re.fullmatch(r"/api/(models|datasets)/([^/]+/[^/]+)/(revision|tree)/([^/]+)(/.*)?", url.path)
        if m:
            return self.api(m.group(1), m.group(2), m.group(3), m.group(4), (m.group(5) or "")[1:],
                            urllib.parse.parse_qs(url.query))
        m = re.fullmatch(r"/__cdn/([^/]+/[^/]+)/([0-9a-f]{40})/(.+)", url.path)
        if m:
            return self.cdn(m.group(1), m.group(2), urllib.parse.unquote(m.group(3)), head)
        m = re.fullmatch(r"/(datasets/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+)", url.path)
        if m:
            return self.resolve(m.group(2), m.group(3), urllib.parse.unquote(m.group(4)), head)
        self.send(404, b"not found", head=head)

    def api(self, kind, name, what, rev, path, query):
        repo, sha, root = self.repo_commit(name, rev)
        if not repo or repo.get("type", "models") != kind:
            return self.send(404, b'{"error":"Repository not found"}')
        if not self.authorized(repo):
            return self.send(401, b'{"error":"Access to this repository is restricted"}')
        if not sha:
            return self.send(404, b'{"error":"Revision not found"}')
        entries = files_of(root)
        if what == "revision":
            return self.json({"id": name, "sha": sha,
                              "siblings": [{"rfilename": p} for t, p in entries if t == "file"]})
        listing = []
        for t, p in entries:
            if path and not (p == path or p.startswith(path + "/")):
                continue
            e = {"type": t, "path": p, "oid": hashlib.sha1(p.encode()).hexdigest()}
            if t == "file":
                full = os.path.join(root, p)
                size = os.path.getsize(full)
                e["size"] = size
                if p.endswith(LFS):
                    e["size"] = 134  # the pointer's size, as the Hub lists it
                    e["lfs"] = {"oid": hashlib.sha256(open(full, "rb").read()).hexdigest(),
                                "size": size, "pointerSize": 134}
            listing.append(e)
        if repo.get("hostile") == "dotdot":
            listing.append({"type": "file", "path": "../../etc/passwd", "size": 10, "oid": "0" * 40})
        size = CONFIG.get("page_size", 1000)
        start = int(query.get("cursor", ["0"])[0])
        page = listing[start:start + size]
        headers = {}
        if start + size < len(listing):
            base = f"http://127.0.0.1:{self.server.server_address[1]}"
            if repo.get("hostile") == "foreign_link":
                base = "http://127.0.0.2:9"
            nxt = f"{base}/api/{kind}/{name}/tree/{rev}{'/' + path if path else ''}?recursive=true&cursor={start + size}"
            headers["Link"] = f'<{nxt}>; rel="next"'
        self.json(page, headers)

    def cdn(self, name, sha, path, head):
        """The CDN of an LFS file: ETag the SHA-256 of its true bytes,
        If-Match and single ranges honoured."""
        repo = CONFIG["repos"].get(name)
        root = os.path.join(CONFIG["cdn_root"], repo["commits"][sha]) if repo and sha in repo["commits"] else None
        full = os.path.join(root, path) if root else None
        if not full or not os.path.isfile(full):
            return self.send(404, b"", head=head)
        if not self.authorized(repo):
            return self.send(401, b'{"error":"Access to this repository is restricted"}', head=head)
        data = open(full, "rb").read()
        etag = '"%s"' % hashlib.sha256(data).hexdigest()
        if repo.get("tamper") and data:
            data = bytearray(data)
            data[-1] ^= 0x01
            data = bytes(data)
        if self.headers.get("If-Match") not in (None, etag):
            return self.send(412, b"", head=head)
        size = len(data)
        rng = self.headers.get("Range")
        if rng:
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng)
            a = int(m.group(1))
            b = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
            if a >= size:
                return self.send(416, b"", {"Content-Range": f"bytes */{size}"}, head)
            return self.send(206, data[a:b + 1], {"ETag": etag, "Content-Range": f"bytes {a}-{b}/{size}"}, head)
        self.send(200, data, {"ETag": etag, "Accept-Ranges": "bytes"}, head)

    def resolve(self, name, rev, path, head):
        if name in CONFIG.get("renamed", {}):
            new = CONFIG["renamed"][name]
            return self.send(307, b"", {"Location": f"/{new}/resolve/{rev}/{urllib.parse.quote(path)}"}, head)
        repo, sha, root = self.repo_commit(name, rev)
        if not repo:
            return self.send(404, b"Repository not found", {"X-Error-Code": "RepoNotFound"}, head)
        if not self.authorized(repo):
            return self.send(401, b"Access restricted", {"X-Error-Code": "GatedRepo"}, head)
        full = os.path.join(root, path) if sha else None
        if not sha or not os.path.isfile(full):
            return self.send(404, b"Entry not found", {"X-Error-Code": "EntryNotFound"}, head)
        size = os.path.getsize(full)
        common = {"X-Repo-Commit": sha}
        if path.endswith(LFS) and repo.get("cdn") == "self":
            oid = '"%s"' % hashlib.sha256(open(full, "rb").read()).hexdigest()
            cdn = f"http://127.0.0.1:{self.server.server_address[1]}/__cdn/{name}/{sha}/{urllib.parse.quote(path)}"
            return self.send(302, b"", dict(common, **{
                "Location": cdn, "X-Linked-Etag": oid, "X-Linked-Size": str(size),
                "ETag": '"%s"' % git_oid(full)}), head)
        if path.endswith(LFS) and repo.get("cdn") == "signed":
            return self.send(302, b"", dict(common, **{
                "Location": signed_url(repo["commits"][sha], path), "X-Linked-Size": str(size),
                "X-Linked-Etag": '"%s"' % hashlib.sha256(open(full, "rb").read()).hexdigest(),
                "ETag": '"%s"' % git_oid(full)}), head)
        if path.endswith(LFS):
            cdn = f"{CONFIG['cdn']}/{repo['commits'][sha]}/{urllib.parse.quote(path)}"
            return self.send(302, b"", dict(common, **{
                "Location": cdn, "X-Linked-Etag": nginx_etag(full), "X-Linked-Size": str(size),
                "ETag": '"%s"' % git_oid(full)}), head)
        etag = '"%s"' % git_oid(full)
        data = open(full, "rb").read()
        rng = self.headers.get("Range")
        if rng and not head:
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng)
            a = int(m.group(1))
            b = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
            if a >= size:
                return self.send(416, b"", dict(common, **{"Content-Range": f"bytes */{size}"}))
            return self.send(206, data[a:b + 1], dict(common, **{"ETag": etag,
                                                                 "Content-Range": f"bytes {a}-{b}/{size}"}))
        self.send(200, data, dict(common, **{"ETag": etag, "Accept-Ranges": "bytes"}), head)


if __name__ == "__main__":
    loopback.serve(Handler)
