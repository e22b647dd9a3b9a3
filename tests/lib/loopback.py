"""What the test servers of our own (faultproxy.py, hubdouble.py,
s3double.py, hostile.py) share: a quiet HTTP/1.1 handler with a send()
for whole answers, and serving on a free port of 127.0.0.1, printed on the
first line so that servers.Proc can read it."""

import http.server
import socketserver


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, status, body=b"", headers=None, head=False):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver listens with a backlog of 5: a client opening 32
    # connections at once (tensorfs's requests in flight) lost SYNs, each
    # sent again a second later (a cold Xet load stalled 0.9 s now and then)
    request_queue_size = 1024


def serve(handler):
    """Serves for ever on 127.0.0.1 only, after printing the port."""
    srv = Server(("127.0.0.1", 0), handler)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()
