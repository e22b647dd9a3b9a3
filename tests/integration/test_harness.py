"""The test servers themselves: a port free_port() gives can be taken by
another test's server before ours binds it (pytest -n 2, or two checkouts
testing at once). A test must then get its own server on another port,
never talk to the other one."""
import os
import socket
import urllib.request

import servers


def test_a_taken_port_is_never_shared(tmp, monkeypatch):
    other = socket.socket()
    other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    other.bind(("127.0.0.1", 0))
    other.listen(5)
    taken = other.getsockname()[1]
    real = servers.free_ports
    handed = []

    def first_taken(n):
        ports = real(n)
        if not handed:
            ports[0] = taken
        handed.extend(ports)
        return ports

    monkeypatch.setattr(servers, "free_ports", first_taken)
    with open(os.path.join(tmp, "x"), "w") as f:
        f.write("ours")
    try:
        with servers.Nginx(tmp) as n:
            assert taken in handed
            assert taken not in n.ports.values()
            for name in n.ports:
                if name == "plain":
                    assert urllib.request.urlopen(n.url(name, "x"), timeout=10).read() == b"ours"
    finally:
        other.close()


def test_the_ports_of_one_server_differ():
    """A port picked and let go can come back at once: ports picked one by
    one for one nginx were once the same, and its 503 server answered for
    the one a test used. 500 picks one by one repeat one almost surely."""
    ports = servers.free_ports(500)
    assert len(set(ports)) == len(ports)
