#!/usr/bin/python3
"""A small S3 double for the tests (Python standard library), for what
s3rver does not do: it recomputes the AWS Signature Version 4 of every
request from the request itself and refuses a wrong one, honours If-Match
(412), knows session tokens that have expired, and lets a test replace an
object while it is mounted (a new ETag). Path-style addressing only.

usage: s3double.py ROOT (prints its port, then serves). Objects are the
files under ROOT/BUCKET/. Credentials: access key AKIDTEST, secret
SECRETTEST; with x-amz-security-token "expired" the answer is ExpiredToken.

  GET/HEAD /BUCKET/KEY            Range, If-Match
  GET /BUCKET?list-type=2&prefix=&delimiter=&continuation-token=&max-keys=
  POST /__replace/BUCKET/KEY      the body becomes the object's new bytes
  POST /__keys                    the body, {"AKID": "SECRET", ...}, becomes the
                                  keys it knows (keys rotated)
  POST /__expire                  the body, a session token, is expired from then on
  POST /__hold                    the body, seconds: the next request waits that
                                  long before its signature is checked
  GET /__holding                  how many requests are waiting so now
  GET /__seen                     every request: method, path, query,
                                  whether its signature was right
"""

import hashlib
import hmac
import json
import os
import re
import sys
import threading
import time
import urllib.parse
from xml.sax.saxutils import escape

import loopback

ROOT = sys.argv[1]
KEYS = {"AKIDTEST": "SECRETTEST"}
EXPIRED = {"expired"}
HOLD = [0.0]
HOLDING = [0]
PAGE = int(os.environ.get("S3DOUBLE_PAGE", "1000"))
LOCK = threading.Lock()
SEEN = []


def etag_of(path):
    with open(path, "rb") as f:
        return '"%s"' % hashlib.md5(f.read()).hexdigest()


def uri_encode(s, slash=True):
    return urllib.parse.quote(s, safe="-_.~" + ("/" if not slash else ""))


def expected_signature(method, raw_path, query, headers, secret):
    """SigV4 as AWS documents it (the canonical request, the string to
    sign, the derived key), from what arrived."""
    auth = headers.get("Authorization", "")
    m = re.fullmatch(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/s3/aws4_request, "
                     r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})", auth)
    if not m:
        return None, None, "AuthorizationHeaderMalformed"
    akid, date, region, signed, sig = m.groups()
    params = urllib.parse.parse_qsl(query, keep_blank_values=True)
    cq = "&".join(f"{uri_encode(k)}={uri_encode(v)}" for k, v in sorted(params))
    lines = []
    for h in signed.split(";"):
        v = headers.get(h)
        if v is None:
            return akid, sig, "SignatureDoesNotMatch"
        lines.append(f"{h}:{' '.join(v.strip().split())}\n")
    creq = "\n".join([method, raw_path, cq, "".join(lines), signed,
                      headers.get("x-amz-content-sha256", "")])
    scope = f"{date}/{region}/s3/aws4_request"
    sts = "\n".join(["AWS4-HMAC-SHA256", headers.get("x-amz-date", ""), scope,
                     hashlib.sha256(creq.encode()).hexdigest()])
    k = hmac.new(("AWS4" + secret).encode(), date.encode(), hashlib.sha256).digest()
    for part in (region, "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    good = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    return akid, sig, None if hmac.compare_digest(good, sig) else "SignatureDoesNotMatch"


class Handler(loopback.Handler):

    def error(self, status, code, head=False):
        body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
                f'<Message>{code}</Message></Error>').encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def signed(self, head=False):
        url = urllib.parse.urlsplit(self.path)
        with LOCK:
            hold, HOLD[0] = HOLD[0], 0.0
            HOLDING[0] += hold > 0
        time.sleep(hold)
        with LOCK:
            HOLDING[0] -= hold > 0
        hdrs = {k.lower(): v for k, v in self.headers.items()}
        hdrs["Authorization"] = self.headers.get("Authorization", "")
        akid, sig, problem = expected_signature(self.command, url.path, url.query, hdrs,
                                                KEYS.get(self.headers.get("Authorization", "x")
                                                         .split("Credential=")[-1].split("/")[0], ""))
        if akid is not None and akid not in KEYS:
            problem = "InvalidAccessKeyId"  # known before any signature is checked
        if problem is None and self.headers.get("x-amz-security-token") in EXPIRED:
            problem = "ExpiredToken"
        if problem is None and self.headers.get("x-amz-content-sha256") is None:
            problem = "MissingContentSha256"
        with LOCK:
            SEEN.append({"method": self.command, "path": url.path, "query": url.query,
                         "problem": problem, "if_match": self.headers.get("If-Match"), "akid": akid,
                         "token": self.headers.get("x-amz-security-token")})
        if problem:
            self.error(400 if problem in ("ExpiredToken", "MissingContentSha256",
                                          "AuthorizationHeaderMalformed") else 403, problem, head)
            return None
        return url

    def do_POST(self):
        if self.path in ("/__keys", "/__expire", "/__hold"):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            with LOCK:
                if self.path == "/__keys":
                    KEYS.clear()
                    KEYS.update(json.loads(body))
                elif self.path == "/__hold":
                    HOLD[0] = float(body)
                else:
                    EXPIRED.add(body.decode())
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        m = re.fullmatch(r"/__replace/([^/]+)/(.+)", self.path)
        if not m:
            return self.error(404, "NoSuchKey")
        data = self.rfile.read(int(self.headers["Content-Length"]))
        path = os.path.join(ROOT, m.group(1), urllib.parse.unquote(m.group(2)))
        with open(path + ".new", "wb") as f:
            f.write(data)
        os.replace(path + ".new", path)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self):
        self.do_GET(head=True)

    def do_GET(self, head=False):
        if self.path in ("/__seen", "/__holding"):
            with LOCK:
                body = json.dumps(SEEN if self.path == "/__seen" else HOLDING[0]).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        url = self.signed(head)
        if not url:
            return
        parts = url.path.lstrip("/").split("/", 1)
        bucket = urllib.parse.unquote(parts[0])
        if not os.path.isdir(os.path.join(ROOT, bucket)):
            return self.error(404, "NoSuchBucket", head)
        if len(parts) == 1 or parts[1] == "":
            return self.listing(bucket, urllib.parse.parse_qs(url.query))
        key = urllib.parse.unquote(parts[1])
        path = os.path.join(ROOT, bucket, key)
        if not os.path.isfile(path):
            return self.error(404, "NoSuchKey", head)
        etag = etag_of(path)
        im = self.headers.get("If-Match")
        if im is not None and im != etag:
            return self.error(412, "PreconditionFailed", head)
        size = os.path.getsize(path)
        rng = self.headers.get("Range")
        with open(path, "rb") as f:
            data = f.read()
        if rng:
            m = re.fullmatch(r"bytes=(\d+)-(\d+)", rng)
            a, b = int(m.group(1)), min(int(m.group(2)), size - 1)
            if a >= size:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = data[a:b + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {a}-{b}/{size}")
        else:
            body = data
            self.send_response(200)
        self.send_header("ETag", etag)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def listing(self, bucket, q):
        prefix = q.get("prefix", [""])[0]
        delim = q.get("delimiter", [""])[0]
        start = int(q.get("continuation-token", ["0"])[0])
        keys = []
        base = os.path.join(ROOT, bucket)
        for r, dirs, files in os.walk(base):
            for f in files:
                k = os.path.relpath(os.path.join(r, f), base)
                if k.startswith(prefix) and not (delim and delim in k[len(prefix):]):
                    keys.append(k)
        keys.sort()
        page = keys[start:start + PAGE]
        more = start + PAGE < len(keys)
        out = ['<?xml version="1.0" encoding="UTF-8"?>',
               f'<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>{bucket}</Name>'
               f'<Prefix>{escape(prefix)}</Prefix><KeyCount>{len(page)}</KeyCount>'
               f'<IsTruncated>{"true" if more else "false"}</IsTruncated>']
        if more:
            out.append(f"<NextContinuationToken>{start + PAGE}</NextContinuationToken>")
        for k in page:
            p = os.path.join(base, k)
            out.append(f"<Contents><Key>{escape(k)}</Key><ETag>{escape(etag_of(p))}</ETag>"
                       f"<Size>{os.path.getsize(p)}</Size></Contents>")
        out.append("</ListBucketResult>")
        body = "".join(out).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


if __name__ == "__main__":
    loopback.serve(Handler)
