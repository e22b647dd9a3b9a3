"""Real servers on 127.0.0.1 for the remote-source tests: Debian's nginx
with a generated configuration, and, for what nginx cannot do, two small
standard-library programs started as processes of their own: a
fault-injecting proxy (faultproxy.py) and a Hugging Face Hub double
(hubdouble.py). Every server is stopped by the test that started it."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from tfsutil import missing

HERE = os.path.dirname(os.path.abspath(__file__))
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
ECHO_MODULE = "/usr/lib/nginx/modules/ngx_http_echo_module.so"


def free_port():
    return free_ports(1)[0]


def free_ports(n):
    """n different free ports: each socket is held until all are picked,
    or the kernel may give one port twice, and one nginx would then put
    two of its servers on one socket (the first answering for both)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _listener_inode(port):
    """The inode of the socket listening on 127.0.0.1:port, or None."""
    want = f"0100007F:{port:04X}"
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            parts = line.split()
            if parts[1] == want and parts[3] == "0A":
                return parts[9]
    return None


def _holds_socket(pid, inode):
    """Whether process pid or one of its descendants holds socket inode."""
    link = f"socket:[{inode}]"
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            for fd in os.listdir(f"/proc/{p}/fd"):
                try:
                    if os.readlink(f"/proc/{p}/fd/{fd}") == link:
                        return True
                except OSError:
                    pass
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return False


class PortTaken(RuntimeError):
    """The server could not have its port: another process took it between
    free_port() and the server's bind (a test running beside this one). The
    caller starts it again on other ports."""


def wait_port(port, proc=None, timeout=20):
    """Waits until something listens on 127.0.0.1:port; with proc, until
    proc (or a process it started) does: a port free_port() gave can be
    taken by another test's server before proc binds it, and a test must
    never talk to another test's server."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise PortTaken(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                pass
        except OSError:
            time.sleep(0.02)
            continue
        inode = _listener_inode(port)
        if proc is None or (inode is not None and _holds_socket(proc.pid, inode)):
            return
        time.sleep(0.02)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


def start_retrying(start, stop, tries=5):
    """start() (which picks free ports and waits for them), again on new
    ports while another process took one of them."""
    for k in range(tries):
        try:
            return start()
        except PortTaken:
            stop()
            if k == tries - 1:
                raise


# The servers of one nginx, each on its own port (name: extra directives).
SERVERS = {
    "plain": "",
    "norange": "max_ranges 0;",
    "slow": "limit_rate 200k;",
    "unavailable": 'return 503; add_header Retry-After 1 always;',
    "loop": "return 302 http://127.0.0.1:$server_port$uri;",
}


def stop_proc(proc):
    """SIGTERM, then SIGKILL after 10 s: a server never outlives its test."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Nginx:
    """nginx serving `root` on several ports (SERVERS), with a latency
    server (echo_sleep) when the echo module is there; its access log
    records Range, If-Match and Authorization of every request."""

    def __init__(self, root, latency_ms=20, extra_servers=None):
        if not os.path.exists(NGINX):
            missing("nginx (Debian's nginx-light)")
        self.root = root
        self.dir = tempfile.mkdtemp(prefix="tfs-nginx-")
        self.servers = dict(SERVERS)
        if extra_servers:
            self.servers.update(extra_servers)
        self.has_echo = os.path.exists(ECHO_MODULE)
        self.pick_ports()
        self.latency_ms = latency_ms
        self.log = os.path.join(self.dir, "access.log")
        os.chmod(self.dir, 0o755)

    def pick_ports(self):
        names = list(self.servers) + (["latency"] if self.has_echo else [])
        self.ports = dict(zip(names, free_ports(len(names))))

    def config(self):
        lines = []
        if self.has_echo:
            lines.append(f"load_module {ECHO_MODULE};")
        lines += [
            "daemon off;", "worker_processes 2;", f"pid {self.dir}/nginx.pid;",
            f"error_log {self.dir}/error.log;",
            # as root the workers would run as nobody and could not read
            # a temporary directory (mode 0700)
            "user root;" if os.getuid() == 0 else "",
            "events { worker_connections 1024; }",
            "http {",
            "  log_format tfs '$request_method\t$uri\t$status\t$body_bytes_sent\t$http_range\t"
            "$http_if_match\t$http_authorization\t$server_port\t$http_user_agent\t$bytes_sent';",
            f"  access_log {self.log} tfs;",
            "  sendfile on; keepalive_requests 100000;",
        ]
        for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
            lines.append(f"  {t}_temp_path {self.dir}/{t};")
        for name, extra in self.servers.items():
            lines.append(f"  server {{ listen 127.0.0.1:{self.ports[name]}; root {self.root}; "
                         f"location / {{ {extra} }} }}")
        if self.has_echo:
            lines.append(f"  server {{ listen 127.0.0.1:{self.ports['latency']}; root {self.root}; "
                         f"location / {{ echo_sleep {self.latency_ms / 1000:.3f}; echo_exec /f$uri; }} "
                         f"location /f/ {{ internal; alias {self.root}/; }} }}")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def __enter__(self):
        return start_retrying(self._start, self._again)

    def _start(self):
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(self.config())
        self.proc = subprocess.Popen([NGINX, "-p", self.dir, "-c", conf, "-e", f"{self.dir}/error.log"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for port in self.ports.values():
            wait_port(port, self.proc)
        return self

    def _again(self):
        self.proc.wait()
        self.pick_ports()

    def __exit__(self, *a):
        self.proc.send_signal(signal.SIGQUIT)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, server="plain", path=""):
        return f"http://127.0.0.1:{self.ports[server]}/{path}"

    def requests(self):
        """The access log so far: one dict per request ("-" for a header
        the request did not have)."""
        keys = ("method", "uri", "status", "bytes", "range", "if_match", "auth", "port", "agent", "sent")
        out = []
        if not os.path.exists(self.log):
            return out
        with open(self.log) as f:
            for line in f:
                # nginx writes a quote in a logged header as \x22
                r = dict(zip(keys, line.rstrip("\n").replace("\\x22", '"').split("\t")))
                r["status"], r["bytes"], r["port"] = int(r["status"]), int(r["bytes"]), int(r["port"])
                r["sent"] = int(r["sent"])  # headers and body
                out.append(r)
        return out

    def clear_log(self):
        open(self.log, "w").close()


class Proc:
    """A helper program of ours that prints its port on its first line."""

    def __init__(self, script, *args):
        self.argv = [sys.executable, os.path.join(HERE, script), *map(str, args)]

    def __enter__(self):
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.argv[1]} did not start: {self.proc.stderr.read()}")
        self.port = int(line)
        wait_port(self.port, self.proc)
        return self

    def __exit__(self, *a):
        stop_proc(self.proc)

    def get(self, path):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as r:
            return json.loads(r.read())

    def post(self, path, obj):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=json.dumps(obj).encode(),
                                     method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())


class FaultProxy(Proc):
    """faultproxy.py in front of an upstream port; faults() sets the rules."""

    def __init__(self, upstream_port):
        super().__init__("faultproxy.py", upstream_port)

    def faults(self, *rules):
        return self.post("/__faults", list(rules))

    def stats(self):
        return self.get("/__stats")

    def url(self, path=""):
        return f"http://127.0.0.1:{self.port}/{path}"


class HubDouble(Proc):
    """hubdouble.py: repos is a dict written to a JSON file it reads."""

    def __init__(self, config_path):
        super().__init__("hubdouble.py", config_path)

    def seen(self):
        return self.get("/__seen")

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"


class FleetCache:
    """The shipped fleet cache (contrib/fleet-cache/run) in front of
    `origin`, on a free port of 127.0.0.1, its slices in a temporary
    directory (or cache_dir, its CACHE_DIR); env: its FLEET_CACHE_* knobs.
    Stopped with SIGTERM, as the recipe says."""

    RUN = os.path.join(os.path.dirname(os.path.dirname(HERE)), "contrib", "fleet-cache", "run")

    def __init__(self, origin, cache_dir=None, **env):
        if not os.path.exists(NGINX):
            missing("nginx (Debian's nginx-light)")
        self.origin = origin
        self.env = {"FLEET_CACHE_USER": "root", **env}
        self.dir = tempfile.mkdtemp(prefix="tfs-fleet-")
        self.cache_dir = cache_dir or os.path.join(self.dir, "c")
        self.port = free_port()

    def __enter__(self):
        try:
            return start_retrying(self._start, self._again)
        except BaseException:
            # a start that failed for good leaves no directory behind
            if getattr(self, "proc", None) is not None:
                stop_proc(self.proc)
            if getattr(self, "err", None) is not None:
                self.err.close()
            shutil.rmtree(self.dir, ignore_errors=True)
            raise

    def _start(self):
        self.err = open(os.path.join(self.dir, "stderr"), "w+")
        self.proc = subprocess.Popen([self.RUN, self.origin, f"127.0.0.1:{self.port}", self.cache_dir],
                                     env=dict(os.environ, **self.env), stdout=subprocess.DEVNULL, stderr=self.err)
        wait_port(self.port, self.proc)
        return self

    def _again(self):
        self.proc.wait()
        self.err.close()
        self.port = free_port()

    def __exit__(self, *a):
        stop_proc(self.proc)
        self.err.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def log(self):
        """What nginx said on its stderr so far."""
        self.err.flush()
        with open(self.err.name) as f:
            return f.read()

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def url(self, path=""):
        return f"{self.endpoint}/{path}"


class FwdProxy(Proc):
    """fwdproxy.py, wanting `creds` (USER:PASSWORD) as Proxy-Authorization."""

    def __init__(self, creds=None):
        super().__init__("fwdproxy.py", creds or "-")

    def url(self, creds=None):
        return f"http://{creds + '@' if creds else ''}127.0.0.1:{self.port}"


S3RVER = os.path.join(os.path.dirname(os.path.dirname(HERE)), "build", "npm", "s3rver", "node_modules",
                      "s3rver", "bin", "s3rver.js")


class S3rver:
    """s3rver (from the npm registry, scripts/install-test-tools.sh) on a
    free port with a temporary directory and the bucket `models`; its
    credentials are S3RVER/S3RVER, addressing is path-style."""

    def __init__(self):
        if not os.path.exists(S3RVER) or not shutil.which("node"):
            missing("s3rver (make test-tools installs it from the npm registry) and node")
        self.dir = tempfile.mkdtemp(prefix="tfs-s3rver-")
        self.port = free_port()

    def __enter__(self):
        return start_retrying(self._start, self._again)

    def _start(self):
        self.proc = subprocess.Popen(["node", S3RVER, "-d", self.dir, "-a", "127.0.0.1", "-p", str(self.port),
                                      "--configure-bucket", "models", "--silent"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_port(self.port, self.proc)
        return self

    def _again(self):
        self.proc.wait()
        self.port = free_port()

    def __exit__(self, *a):
        stop_proc(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def put(self, key, path):
        """Uploads with curl's own SigV4, as any S3 client would."""
        subprocess.run(["curl", "-s", "-f", "--aws-sigv4", "aws:amz:us-east-1:s3",
                        "-u", "S3RVER:S3RVER", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                        "-T", path, f"{self.endpoint}/models/{key}"], check=True, stdout=subprocess.DEVNULL)


class S3Double(Proc):
    """s3double.py over ROOT (buckets are its directories)."""

    def __init__(self, root, page=None):
        super().__init__("s3double.py", root)
        self.page = page

    def __enter__(self):
        if self.page:
            os.environ["S3DOUBLE_PAGE"] = str(self.page)
        try:
            return super().__enter__()
        finally:
            os.environ.pop("S3DOUBLE_PAGE", None)

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def seen(self):
        return self.get("/__seen")

    def post(self, path, data):
        import urllib.request as ur
        req = ur.Request(f"{self.endpoint}{path}", data=data, method="POST")
        ur.urlopen(req, timeout=10).read()

    def replace(self, bucket, key, data):
        self.post(f"/__replace/{bucket}/{key}", data)

    def rotate_keys(self, keys):
        """Only these keys ({"AKID": "SECRET"}) are known from now on."""
        self.post("/__keys", json.dumps(keys).encode())

    def expire(self, token):
        """The session token is expired from now on."""
        self.post("/__expire", token.encode())

    def hold(self, seconds):
        """The next request waits this long before it is looked at."""
        self.post("/__hold", str(seconds).encode())

    def holding(self):
        """How many requests wait so now."""
        return self.get("/__holding")


class Hostile(Proc):
    """hostile.py over ROOT: a server that misbehaves as mode() says."""

    def __init__(self, root):
        super().__init__("hostile.py", root)

    def mode(self, **kw):
        return self.post("/__mode", kw)

    def seen(self):
        return self.get("/__seen")

    def url(self, path="", host="127.0.0.1"):
        return f"http://{host}:{self.port}/{path}"
