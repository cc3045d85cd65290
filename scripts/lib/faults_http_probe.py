#!/usr/bin/env python3
"""Usage: faults_http_probe.py PORT PID

scripts/faults' oversized requests against `kiln serve` on 127.0.0.1:PORT (its process PID):
a 1 MiB request line must get 414; 100 MB of headers 431, answered early, with the server's
peak memory (VmHWM) under 200 MB; the report must load; a path that names nothing must get a
404 that does not echo it. Prints "431 after N MB sent; server peak M MB"; an assertion fails
(exit 1, its message last) on the first answer that is wrong.
"""
import socket
import sys
import urllib.error
import urllib.request

if len(sys.argv) != 3:
    sys.exit(__doc__)
port, pid = int(sys.argv[1]), sys.argv[2]


def status(sock):
    sock.settimeout(30)
    head = sock.recv(4096).decode("latin-1")
    return head.split(" ")[1] if head.startswith("HTTP/") else repr(head[:40])


s = socket.create_connection(("127.0.0.1", port))
try:
    s.sendall(b"GET /" + b"a" * (1 << 20) + b" HTTP/1.1\r\n\r\n")
except OSError:
    pass
got = status(s)
assert got == "414", f"a 1 MiB request line got {got}"
s = socket.create_connection(("127.0.0.1", port))
sent, chunk = 0, b"X-Pad: " + b"p" * 65536 + b"\r\n"
try:
    s.sendall(b"GET / HTTP/1.1\r\n")
    while sent < 100 << 20:
        s.sendall(chunk)
        sent += len(chunk)
except OSError:
    pass
got = status(s)
assert got == "431", f"100 MB of headers got {got}"
hwm = int(next(l.split()[1] for l in open(f"/proc/{pid}/status") if l.startswith("VmHWM")))
print(f"431 after {sent >> 20} MB sent; server peak {hwm >> 10} MB")
assert hwm < 200 << 10, f"the server's peak memory is {hwm >> 10} MB"
urllib.request.urlopen(f"http://127.0.0.1:{port}/report/", timeout=120).read()
try:
    urllib.request.urlopen(f"http://127.0.0.1:{port}/{'secret' * 1000}", timeout=30)
    raise AssertionError("a path that names nothing was answered")
except urllib.error.HTTPError as e:
    body = e.read()
    assert e.code == 404 and b"secret" not in body, f"404 echoed the request ({len(body)} bytes)"
