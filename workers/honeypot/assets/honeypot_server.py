"""The honeypot: the only peer a sandbox has on its network. Standard library only.

It runs in its own container (started by a worker) as `python3 honeypot_server.py`, joined
to every sandbox's own network. DNS answers every name with the honeypot's address on the
asker's network, so any connection a sandbox makes comes here; HTTP gets a plain 404 page
that gives nothing away, TLS is read up to its server name and dropped, other ports are
accepted and closed. Every contact is printed as one JSON line on stdout — source,
protocol, port, host, path, time — which the worker reads from the container log as
evidence.

One thread serves everything (no thread per connection to run out of), and nothing one
source does can keep another unrecorded: each source may hold PER_SOURCE connections, all
of them together MAX_CONNECTIONS (when full, the biggest holder's oldest goes), each lives
IDLE_S at most, and a source's records past RECORDS_PER_S a second are counted in one line
instead of written one by one, so a flood cannot rotate others' evidence out of the log.
"""

import json
import selectors
import socket
import struct
import sys
import time

HTTP_PORTS = (80, 8000, 8080, 3128, 5000)
TLS_PORTS = (443, 8443)
OTHER_PORTS = (21, 22, 23, 25, 873, 3306, 5432, 6379, 9418, 27017)
NOT_FOUND = (
    b"HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: 22\r\n"
    b"Connection: close\r\n\r\n<h1>404 Not Found</h1>"
)
MAX_CONNECTIONS = 1024
PER_SOURCE = 32
IDLE_S = 5.0
HEAD_LIMIT = 16384
HELLO_LIMIT = 8192
RECORDS_PER_S = 50
ACCEPTS_PER_WAKE = 64  # then the other sockets get their turn
BACKLOG = 1024


class Records:
    """JSON lines on stdout, at most RECORDS_PER_S a second per source; the rest counted."""

    def __init__(self):
        self.second = 0
        self.counts = {}
        self.suppressed = {}

    def write(self, **hit):
        now = time.time()
        self.roll(now)
        src = hit.get("src", "")
        self.counts[src] = self.counts.get(src, 0) + 1
        if src and self.counts[src] > RECORDS_PER_S:
            self.suppressed[src] = self.suppressed.get(src, 0) + 1
            return
        hit["time"] = round(now, 3)
        self.emit(hit)

    def roll(self, now):
        """A new second: say how many records of each source were not written."""
        if int(now) == self.second:
            return
        for src, count in self.suppressed.items():
            self.emit(
                {
                    "src": src,
                    "proto": "suppressed",
                    "port": 0,
                    "count": count,
                    "time": round(now, 3),
                }
            )
        self.second, self.counts, self.suppressed = int(now), {}, {}

    @staticmethod
    def emit(hit):
        sys.stdout.write(json.dumps(hit, sort_keys=True) + "\n")
        sys.stdout.flush()


records = Records()
local_addresses = {}


def local_address(peer):
    """Our address on the network `peer` is on (we sit on one network per sandbox)."""
    address = local_addresses.get(peer)
    if address is None:
        if len(local_addresses) > 4096:
            local_addresses.clear()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            try:
                probe.connect((peer, 53))  # UDP: picks the route, sends nothing
                address = probe.getsockname()[0]
            except OSError:
                address = "0.0.0.0"
        local_addresses[peer] = address
    return address


def dns_name(packet, offset):
    labels = []
    while offset < len(packet) and packet[offset]:
        length = packet[offset]
        labels.append(packet[offset + 1 : offset + 1 + length].decode("ascii", "replace"))
        offset += length + 1
    return ".".join(labels), offset + 1


def answer_dns(sock):
    for _ in range(ACCEPTS_PER_WAKE):
        try:
            packet, peer = sock.recvfrom(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            continue
        if len(packet) < 17:
            continue
        name, end = dns_name(packet, 12)
        qtype = struct.unpack(">H", packet[end : end + 2])[0] if end + 2 <= len(packet) else 0
        records.write(src=peer[0], proto="dns", port=53, host=name[:255], qtype=qtype)
        question = packet[12 : end + 4]
        if qtype == 1:  # A: point the name at us
            answer = b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x3c\x00\x04" + socket.inet_aton(
                local_address(peer[0])
            )
            header = packet[:2] + b"\x81\x80\x00\x01\x00\x01\x00\x00\x00\x00"
            reply = header + question + answer
        else:  # AAAA and the rest: no records, so clients fall back to A
            reply = packet[:2] + b"\x81\x80\x00\x01\x00\x00\x00\x00\x00\x00" + question
        try:
            sock.sendto(reply, peer)
        except OSError:
            pass


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


def http_request(head):
    lines = head.decode("latin-1").split("\r\n")
    method, _, rest = lines[0].partition(" ") if lines else ("", "", "")
    host = next(
        (l.split(":", 1)[1].strip() for l in lines[1:] if l.lower().startswith("host:")), ""
    )
    return method[:16], host[:255], rest.rsplit(" ", 1)[0][:500]


def tls_complete(data):
    """The whole first TLS record is in (or it is not TLS at all)."""
    if len(data) < 5 or data[0] != 0x16:
        return len(data) >= 1 and data[0] != 0x16
    return len(data) >= 5 + struct.unpack(">H", data[3:5])[0]


class Connection:
    def __init__(self, sock, peer, port):
        self.sock = sock
        self.peer = peer
        self.port = port
        self.opened = time.monotonic()
        self.data = b""


class Server:
    def __init__(self):
        self.selector = selectors.DefaultSelector()
        self.connections = {}  # socket → Connection, oldest first
        self.by_source = {}  # address → open connections

    def listen(self, port):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("0.0.0.0", port))
        sock.listen(BACKLOG)
        sock.setblocking(False)
        self.selector.register(sock, selectors.EVENT_READ, ("listen", port))

    def serve_dns(self):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("0.0.0.0", 53))
        sock.setblocking(False)
        self.selector.register(sock, selectors.EVENT_READ, ("dns", 53))

    def run(self):
        while True:
            for key, _ in self.selector.select(timeout=1.0):
                kind, port = key.data
                if kind == "listen":
                    self.accept(key.fileobj, port)
                elif kind == "dns":
                    answer_dns(key.fileobj)
                else:
                    self.read(key.fileobj)
            self.expire()
            records.roll(time.time())

    def accept(self, listener, port):
        for _ in range(ACCEPTS_PER_WAKE):
            try:
                sock, (peer, _) = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # out of file descriptors, say: drop what waits, go on
                return
            if port not in HTTP_PORTS + TLS_PORTS:
                records.write(src=peer, proto="tcp", port=port)
                sock.close()
                continue
            if self.by_source.get(peer, 0) >= PER_SOURCE:
                # this source holds its share already: noted, not served
                records.write(
                    src=peer,
                    proto="http" if port in HTTP_PORTS else "tls",
                    port=port,
                    refused="too many connections from this source",
                )
                sock.close()
                continue
            if len(self.connections) >= MAX_CONNECTIONS:
                self.evict()
            sock.setblocking(False)
            self.connections[sock] = Connection(sock, peer, port)
            self.by_source[peer] = self.by_source.get(peer, 0) + 1
            self.selector.register(sock, selectors.EVENT_READ, ("conn", port))

    def evict(self):
        """Full: the oldest connection of whoever holds the most goes, so a newcomer fits."""
        biggest = max(self.by_source, key=self.by_source.__getitem__)
        victim = next(c for c in self.connections.values() if c.peer == biggest)
        self.finish(victim)

    def read(self, sock):
        connection = self.connections.get(sock)
        if connection is None:
            return
        try:
            chunk = sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        connection.data += chunk
        if connection.port in HTTP_PORTS:
            done = b"\r\n\r\n" in connection.data or len(connection.data) >= HEAD_LIMIT
        else:
            done = tls_complete(connection.data) or len(connection.data) >= HELLO_LIMIT
        if done or not chunk:
            self.finish(connection)

    def expire(self):
        now = time.monotonic()
        for connection in list(self.connections.values()):
            if now - connection.opened < IDLE_S:
                break  # oldest first: the rest are younger
            self.finish(connection)

    def finish(self, connection):
        """Record what the connection said, answer it if it speaks HTTP, close it."""
        sock, peer, port = connection.sock, connection.peer, connection.port
        if port in HTTP_PORTS:
            method, host, path = http_request(connection.data)
            records.write(src=peer, proto="http", port=port, method=method, host=host, path=path)
            try:
                sock.send(NOT_FOUND)  # small enough for any fresh socket buffer
            except OSError:
                pass
        else:
            records.write(
                src=peer, proto="tls", port=port, host=tls_server_name(connection.data) or ""
            )
        self.selector.unregister(sock)
        del self.connections[sock]
        self.by_source[peer] -= 1
        if not self.by_source[peer]:
            del self.by_source[peer]
        sock.close()


def own_address():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
            return probe.getsockname()[0]
        except OSError:
            return socket.gethostbyname(socket.gethostname())


def main():
    server = Server()
    for port in HTTP_PORTS + TLS_PORTS + OTHER_PORTS:
        server.listen(port)
    server.serve_dns()
    records.write(src="", proto="ready", port=0, host=own_address())
    server.run()


if __name__ == "__main__":
    main()
