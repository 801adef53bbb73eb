"""The worker's side of a pooled sandbox's server stream: lines out of Docker's frames."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest

from workers.sandbox.engine import FRAME_HEADER, Attached
from workers.sandbox.protocol import Program, Reply, Results, Sent, SentResult
from workers.sandbox.server_sandboxes import ServerGone, ServerStream


def frame(kind: int, payload: bytes) -> bytes:
    return FRAME_HEADER.pack(kind, len(payload)) + payload


@pytest.fixture
def pair() -> Iterator[tuple[ServerStream, socket.socket]]:
    ours, theirs = socket.socketpair()
    stream = ServerStream(Attached(sock=ours, handle=ours))
    try:
        yield stream, theirs
    finally:
        stream.close()
        theirs.close()


def test_a_line_split_across_frames_and_chunks_is_one_message(
    pair: tuple[ServerStream, socket.socket],
) -> None:
    stream, server = pair
    line = json.dumps({"reply": "x" * 1000, "exit_code": 0}).encode() + b"\n"
    data = frame(1, line[:10]) + frame(2, b"a warning\n") + frame(1, line[10:])
    for i in range(0, len(data), 7):  # the socket may deliver any cut of the frames
        server.sendall(data[i : i + 7])
    assert stream.receive(time.monotonic() + 5) == {"reply": "x" * 1000, "exit_code": 0}
    assert bytes(stream.stderr) == b"a warning\n"


def test_two_messages_in_one_frame_come_one_at_a_time(
    pair: tuple[ServerStream, socket.socket],
) -> None:
    stream, server = pair
    server.sendall(frame(1, b'{"ready": true}\n{"n": 2}\n'))
    assert stream.receive(time.monotonic() + 5) == {"ready": True}
    assert stream.receive(time.monotonic() + 5) == {"n": 2}


def test_silence_past_the_deadline_and_a_closed_stream_are_a_lost_server(
    pair: tuple[ServerStream, socket.socket],
) -> None:
    stream, server = pair
    with pytest.raises(ServerGone, match="in time"):
        stream.receive(time.monotonic() + 0.2)
    server.close()
    with pytest.raises(ServerGone, match="closed"):
        stream.receive(time.monotonic() + 5)


def test_what_is_not_an_object_is_a_lost_server(pair: tuple[ServerStream, socket.socket]) -> None:
    stream, server = pair
    server.sendall(frame(1, b"[1, 2]\n"))
    with pytest.raises(ServerGone):
        stream.receive(time.monotonic() + 5)


def test_packets_sent_between_two_counts() -> None:
    before, after = Sent(), Sent()
    program = Program([before, after])
    ids = [program.id_of(before), program.id_of(after)]
    counted = Results(
        program,
        Reply(
            nonce="n",
            results={ids[0]: SentResult(packets=4), ids[1]: SentResult(packets=9)},
            error=None,
        ),
    )
    assert counted.sent(before, after) == 5
    unreadable = Results(
        program,
        Reply(
            nonce="n",
            results={ids[0]: SentResult(packets=None), ids[1]: SentResult(packets=9)},
            error=None,
        ),
    )
    assert unreadable.sent(before, after) is None
