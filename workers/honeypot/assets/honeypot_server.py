"""The honeypot: the only peer a sandbox has on its network. Standard library only.

It runs in its own container (started by a worker) as `python3 honeypot_server.py`, joined
to every sandbox's own network. DNS answers every name with the honeypot's address on the
asker's network, and every other address is the honeypot's too: each sandbox network's
default gateway has no owner but the honeypot, whose namespace treats every destination as
local (`catch_all`), so a connection to a raw IP comes here as well. HTTP gets a plain 404
page that gives nothing away, TLS is read up to its server name and dropped, other listened
ports are accepted and closed; a TCP connection to any other port, a UDP datagram or a ping
is seen by a packet socket (`Sniffer`) and refused by the kernel. Every contact is printed
as one JSON line on stdout — source, destination, protocol, port, host, path, time — which
the worker reads from the container log as evidence.

It starts as root with NET_ADMIN, NET_RAW, SETUID and SETGID only, sets the routing up,
opens its sockets, then becomes an unprivileged user with no capability left.

One thread serves everything (no thread per connection to run out of), and nothing one
source does can keep another unrecorded: each source may hold PER_SOURCE connections, all
of them together MAX_CONNECTIONS (when full, the biggest holder's oldest goes), each lives
IDLE_S at most, and a source's records past RECORDS_PER_S a second are counted in one line
instead of written one by one, so a flood cannot rotate others' evidence out of the log.
"""

import ctypes
import json
import os
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
RUN_AS = 1000  # uid and gid once the network is set up
IP_PKTINFO = 8


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
            packet, ancillary, _, peer = sock.recvmsg(4096, socket.CMSG_SPACE(12))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            continue
        if len(packet) < 17:
            continue
        # the address asked (a resolver at a raw IP is answered from that IP)
        info = next((data for level, kind, data in ancillary if kind == IP_PKTINFO), None)
        dst = socket.inet_ntoa(info[4:8]) if info and len(info) >= 12 else ""
        name, end = dns_name(packet, 12)
        qtype = struct.unpack(">H", packet[end : end + 2])[0] if end + 2 <= len(packet) else 0
        records.write(src=peer[0], dst=dst, proto="dns", port=53, host=name[:255], qtype=qtype)
        question = packet[12 : end + 4]
        if qtype == 1:  # A: point the name at us
            answer = b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x3c\x00\x04" + socket.inet_aton(
                local_address(peer[0])
            )
            header = packet[:2] + b"\x81\x80\x00\x01\x00\x01\x00\x00\x00\x00"
            reply = header + question + answer
        else:  # AAAA and the rest: no records, so clients fall back to A
            reply = packet[:2] + b"\x81\x80\x00\x01\x00\x00\x00\x00\x00\x00" + question
        cmsg = [(socket.IPPROTO_IP, IP_PKTINFO, info)] if info else []
        try:
            sock.sendmsg([reply], cmsg, 0, peer)
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
    def __init__(self, sock, peer, port, dst):
        self.sock = sock
        self.peer = peer
        self.port = port
        self.dst = dst
        self.opened = time.monotonic()
        self.data = b""


class Server:
    def __init__(self):
        self.selector = selectors.DefaultSelector()
        self.connections = {}  # socket → Connection, oldest first
        self.by_source = {}  # address → open connections
        self.sniffer = None

    def listen(self, port):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("0.0.0.0", port))
        sock.listen(BACKLOG)
        sock.setblocking(False)
        self.selector.register(sock, selectors.EVENT_READ, ("listen", port))

    def serve_dns(self):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
        sock.bind(("0.0.0.0", 53))
        sock.setblocking(False)
        self.selector.register(sock, selectors.EVENT_READ, ("dns", 53))

    def sniff(self, sniffer):
        self.sniffer = sniffer
        self.selector.register(sniffer.sock, selectors.EVENT_READ, ("sniff", 0))

    def run(self):
        while True:
            for key, _ in self.selector.select(timeout=1.0):
                kind, port = key.data
                if kind == "listen":
                    self.accept(key.fileobj, port)
                elif kind == "dns":
                    answer_dns(key.fileobj)
                elif kind == "sniff":
                    self.sniffer.read()
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
            try:
                dst = sock.getsockname()[0]  # whatever address the sandbox dialled
            except OSError:
                dst = ""
            if port not in HTTP_PORTS + TLS_PORTS:
                records.write(src=peer, dst=dst, proto="tcp", port=port)
                sock.close()
                continue
            if self.by_source.get(peer, 0) >= PER_SOURCE:
                # this source holds its share already: noted, not served
                records.write(
                    src=peer,
                    dst=dst,
                    proto="http" if port in HTTP_PORTS else "tls",
                    port=port,
                    refused="too many connections from this source",
                )
                sock.close()
                continue
            if len(self.connections) >= MAX_CONNECTIONS:
                self.evict()
            sock.setblocking(False)
            self.connections[sock] = Connection(sock, peer, port, dst)
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
        sock, peer, port, dst = connection.sock, connection.peer, connection.port, connection.dst
        if port in HTTP_PORTS:
            method, host, path = http_request(connection.data)
            records.write(
                src=peer, dst=dst, proto="http", port=port, method=method, host=host, path=path
            )
            try:
                sock.send(NOT_FOUND)  # small enough for any fresh socket buffer
            except OSError:
                pass
        else:
            records.write(
                src=peer,
                dst=dst,
                proto="tls",
                port=port,
                host=tls_server_name(connection.data) or "",
            )
        self.selector.unregister(sock)
        del self.connections[sock]
        self.by_source[peer] -= 1
        if not self.by_source[peer]:
            del self.by_source[peer]
        sock.close()


# ---------------------------------------------------------------- every address is ours
#
# Routing policy (rtnetlink, no tools needed): `local 0.0.0.0/0` in the local table makes
# every destination ours — a packet for a raw IP is delivered here, an ARP request for a
# sandbox network's gateway (which the host's bridge does not own) is answered by us, and a
# reply can leave from the address the sandbox dialled. Our own traffic must not loop back,
# so the rule for the local table moves after one that sends what we originate (iif lo) to
# the main table; loopback keeps the local table first.

NLMSG_ERROR = 2
RTM_NEWROUTE, RTM_NEWRULE, RTM_DELRULE = 24, 32, 33
NLM_F_REQUEST, NLM_F_ACK, NLM_F_EXCL, NLM_F_CREATE = 0x1, 0x4, 0x200, 0x400
RTA_DST, RTA_OIF, RTA_PRIORITY, RTA_TABLE = 1, 4, 6, 15
FRA_DST, FRA_IIFNAME, FRA_PRIORITY, FRA_TABLE = 1, 3, 6, 15
RT_TABLE_MAIN, RT_TABLE_LOCAL = 254, 255
RTN_LOCAL, RT_SCOPE_HOST, RTPROT_BOOT, FR_ACT_TO_TBL = 2, 254, 3, 1
EEXIST, ENOENT = 17, 2


def attribute(kind, value):
    body = struct.pack("HH", 4 + len(value), kind) + value
    return body + b"\0" * (-len(body) % 4)


class Netlink:
    def __init__(self):
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        self.seq = 0

    def request(self, kind, body, *, flags=0, tolerate=()):
        self.seq += 1
        header = struct.pack(
            "IHHII", 16 + len(body), kind, NLM_F_REQUEST | NLM_F_ACK | flags, self.seq, 0
        )
        self.sock.send(header + body)
        while True:
            reply = self.sock.recv(65536)
            _, answer, _, seq, _ = struct.unpack("IHHII", reply[:16])
            if answer == NLMSG_ERROR and seq == self.seq:
                error = -struct.unpack("i", reply[16:20])[0]
                if error and error not in tolerate:
                    raise OSError(error, f"netlink request {kind}: {os.strerror(error)}")
                return

    def route_local_everything(self):
        rtmsg = struct.pack(
            "BBBBBBBBI",
            socket.AF_INET,
            0,
            0,
            0,
            RT_TABLE_LOCAL,
            RTPROT_BOOT,
            RT_SCOPE_HOST,
            RTN_LOCAL,
            0,
        )
        body = rtmsg + attribute(RTA_OIF, struct.pack("I", socket.if_nametoindex("lo")))
        self.request(RTM_NEWROUTE, body, flags=NLM_F_CREATE | NLM_F_EXCL, tolerate=(EEXIST,))

    def rule(self, kind, priority, table, *, iif=None, dst=None, tolerate=()):
        header = struct.pack(
            "BBBBBBBBI", socket.AF_INET, dst[1] if dst else 0, 0, 0, 0, 0, 0, FR_ACT_TO_TBL, 0
        )
        body = header + attribute(FRA_PRIORITY, struct.pack("I", priority))
        body += attribute(FRA_TABLE, struct.pack("I", table))
        if iif:
            body += attribute(FRA_IIFNAME, iif.encode() + b"\0")
        if dst:
            body += attribute(FRA_DST, socket.inet_aton(dst[0]))
        flags = NLM_F_CREATE | NLM_F_EXCL if kind == RTM_NEWRULE else 0
        self.request(kind, body, flags=flags, tolerate=tolerate)


def catch_all():
    """Make every IPv4 destination local to us (see above); idempotent."""
    link = Netlink()
    try:
        link.rule(RTM_NEWRULE, 10, RT_TABLE_LOCAL, dst=("127.0.0.0", 8), tolerate=(EEXIST,))
        link.rule(RTM_NEWRULE, 20, RT_TABLE_MAIN, iif="lo", tolerate=(EEXIST,))
        link.rule(RTM_NEWRULE, 30, RT_TABLE_LOCAL, tolerate=(EEXIST,))
        link.rule(RTM_DELRULE, 0, RT_TABLE_LOCAL, tolerate=(ENOENT,))
        link.route_local_everything()
    finally:
        link.sock.close()


# ---------------------------------------------------------------- what no listener takes

ETH_P_IP = 0x0800
PACKET_OUTGOING = 4
SO_ATTACH_FILTER = 26
SNAP = 64
# classic BPF on the IP header: keep first fragments of TCP SYNs (no ACK), UDP not for DNS
# (answered by its own socket) and ICMP echo requests; the kernel drops the rest unseen
FILTER = [
    (0x28, 0, 0, 6),  # 0: ldh [6] (fragment offset)
    (0x45, 15, 0, 0x1FFF),  # 1: a later fragment → drop
    (0x30, 0, 0, 9),  # 2: ldb [9] (protocol)
    (0x15, 2, 0, 6),  # 3: tcp → 6
    (0x15, 5, 0, 17),  # 4: udp → 10
    (0x15, 7, 11, 1),  # 5: icmp → 13, else drop
    (0xB1, 0, 0, 0),  # 6: x = header length
    (0x50, 0, 0, 13),  # 7: ldb [x+13] (tcp flags)
    (0x54, 0, 0, 0x12),  # 8: and SYN|ACK
    (0x15, 6, 7, 0x02),  # 9: SYN alone → accept, else drop
    (0xB1, 0, 0, 0),  # 10: x = header length
    (0x48, 0, 0, 2),  # 11: ldh [x+2] (udp destination port)
    (0x15, 4, 3, 53),  # 12: dns → drop, else accept
    (0xB1, 0, 0, 0),  # 13: x = header length
    (0x50, 0, 0, 0),  # 14: ldb [x] (icmp type)
    (0x15, 0, 1, 8),  # 15: echo request → accept, else drop
    (0x06, 0, 0, SNAP),  # 16: accept
    (0x06, 0, 0, 0),  # 17: drop
]


def bpf_program(program):
    raw = b"".join(struct.pack("HBBI", *instruction) for instruction in program)
    buffer = ctypes.create_string_buffer(raw, len(raw))
    return buffer, struct.pack("HP", len(program), ctypes.addressof(buffer))


class Sniffer:
    """Contacts no listener takes: TCP to a port we do not listen on, UDP, ping — to any
    address. The kernel refuses them (a reset, port unreachable); this records them."""

    def __init__(self, listened):
        self.listened = frozenset(listened)
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_IP))
        self.buffer, program = bpf_program(FILTER)
        self.sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, program)
        self.sock.setblocking(False)

    def read(self):
        for _ in range(ACCEPTS_PER_WAKE):
            try:
                packet, address = self.sock.recvfrom(SNAP)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                continue
            if address[2] == PACKET_OUTGOING or len(packet) < 20:
                continue
            self.record(packet)

    def record(self, packet):
        header = (packet[0] & 0x0F) * 4
        protocol = packet[9]
        src, dst = socket.inet_ntoa(packet[12:16]), socket.inet_ntoa(packet[16:20])
        if protocol == 1:
            records.write(src=src, dst=dst, proto="icmp", port=0)
            return
        if len(packet) < header + 4:
            return
        port = struct.unpack(">H", packet[header + 2 : header + 4])[0]
        if protocol == 6 and port in self.listened:
            return  # the listener records it, with what was said
        records.write(src=src, dst=dst, proto="tcp" if protocol == 6 else "udp", port=port)


def drop_privileges():
    """No capability left once the sockets are open (they keep working)."""
    if os.getuid() == 0:
        os.setgroups([])
        os.setgid(RUN_AS)
        os.setuid(RUN_AS)


def own_address():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
            return probe.getsockname()[0]
        except OSError:
            return socket.gethostbyname(socket.gethostname())


def main():
    catch_all()
    server = Server()
    for port in HTTP_PORTS + TLS_PORTS + OTHER_PORTS:
        server.listen(port)
    server.serve_dns()
    server.sniff(Sniffer(HTTP_PORTS + TLS_PORTS + OTHER_PORTS))
    drop_privileges()
    records.write(src="", proto="ready", port=0, host=own_address(), catch_all=True)
    server.run()


if __name__ == "__main__":
    main()
