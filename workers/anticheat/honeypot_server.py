"""The honeypot: the only peer a sandbox has on its network. Standard library only.

It runs in its own container on the sandbox network (started by a worker, or by compose),
as `python3 honeypot_server.py`. DNS answers every name with the honeypot's own address,
so any connection a sandbox makes comes here; HTTP gets a plain 404 page that gives
nothing away, TLS is read up to its server name and dropped, other ports are accepted and
closed. Every contact is printed as one JSON line on stdout — source, protocol, port,
host, path, time — which the worker reads from the container log as evidence.
"""

import json
import socket
import socketserver
import struct
import sys
import threading
import time

HTTP_PORTS = (80, 8000, 8080, 3128, 5000)
TLS_PORTS = (443, 8443)
OTHER_PORTS = (21, 22, 23, 25, 873, 3306, 5432, 6379, 9418, 27017)
NOT_FOUND = (
    b"HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: 22\r\n"
    b"Connection: close\r\n\r\n<h1>404 Not Found</h1>"
)
lock = threading.Lock()


def record(**hit):
    hit["time"] = round(time.time(), 3)
    with lock:
        sys.stdout.write(json.dumps(hit, sort_keys=True) + "\n")
        sys.stdout.flush()


def own_address():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
            return probe.getsockname()[0]
        except OSError:
            return socket.gethostbyname(socket.gethostname())


def dns_name(packet, offset):
    labels = []
    while offset < len(packet) and packet[offset]:
        length = packet[offset]
        labels.append(packet[offset + 1 : offset + 1 + length].decode("ascii", "replace"))
        offset += length + 1
    return ".".join(labels), offset + 1


def serve_dns(address):
    packed = socket.inet_aton(address)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", 53))
    while True:
        packet, peer = sock.recvfrom(4096)
        if len(packet) < 17:
            continue
        name, end = dns_name(packet, 12)
        qtype = struct.unpack(">H", packet[end : end + 2])[0] if end + 2 <= len(packet) else 0
        record(src=peer[0], proto="dns", port=53, host=name, qtype=qtype)
        question = packet[12 : end + 4]
        if qtype == 1:  # A: point the name at us
            answer = b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x3c\x00\x04" + packed
            header = packet[:2] + b"\x81\x80\x00\x01\x00\x01\x00\x00\x00\x00"
            sock.sendto(header + question + answer, peer)
        else:  # AAAA and the rest: no records, so clients fall back to A
            header = packet[:2] + b"\x81\x80\x00\x01\x00\x00\x00\x00\x00\x00"
            sock.sendto(header + question, peer)


def read_head(conn, limit=65536):
    data = b""
    conn.settimeout(5)
    try:
        while b"\r\n\r\n" not in data and len(data) < limit:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    return data


def tls_server_name(hello):
    """The SNI of a TLS ClientHello, or None."""
    try:
        if hello[0] != 0x16:
            return None
        pos = 5 + 4 + 2 + 32
        pos += 1 + hello[pos]
        pos += 2 + struct.unpack(">H", hello[pos : pos + 2])[0]
        pos += 1 + hello[pos]
        end = pos + 2 + struct.unpack(">H", hello[pos : pos + 2])[0]
        pos += 2
        while pos + 4 <= end:
            kind, length = struct.unpack(">HH", hello[pos : pos + 4])
            if kind == 0:
                name_length = struct.unpack(">H", hello[pos + 7 : pos + 9])[0]
                return hello[pos + 9 : pos + 9 + name_length].decode("ascii", "replace")
            pos += 4 + length
    except (IndexError, struct.error):
        return None
    return None


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        port = self.server.server_address[1]
        peer = self.client_address[0]
        if port in HTTP_PORTS:
            head = read_head(self.request)
            lines = head.decode("latin-1").split("\r\n")
            method, _, rest = lines[0].partition(" ") if lines else ("", "", "")
            path = rest.rsplit(" ", 1)[0]
            host = next(
                (l.split(":", 1)[1].strip() for l in lines[1:] if l.lower().startswith("host:")), ""
            )
            record(src=peer, proto="http", port=port, method=method, host=host, path=path[:500])
            try:
                self.request.sendall(NOT_FOUND)
            except OSError:
                pass
        elif port in TLS_PORTS:
            self.request.settimeout(5)
            try:
                hello = self.request.recv(8192)
            except OSError:
                hello = b""
            record(src=peer, proto="tls", port=port, host=tls_server_name(hello) or "")
        else:
            record(src=peer, proto="tcp", port=port)


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def main():
    address = own_address()
    for port in HTTP_PORTS + TLS_PORTS + OTHER_PORTS:
        server = Server(("0.0.0.0", port), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
    record(src="", proto="ready", port=0, host=address)
    serve_dns(address)


if __name__ == "__main__":
    main()
