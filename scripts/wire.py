"""A minimal RESP2 client for the scripts that compare Shale with Redis: it keeps the exact
reply (error text, status vs bulk string, nil), which client libraries smooth over."""

import socket


def encode(parts):
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)


def read_reply(f):
    line = f.readline()
    kind, rest = line[:1], line[1:-2]
    if kind in b"+-:":
        return (kind + rest).decode()
    if kind == b"$":
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2]
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [read_reply(f) for _ in range(n)]
    return line


class Server:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.file = self.sock.makefile("rb")

    def call(self, parts):
        self.sock.sendall(encode(parts))
        return read_reply(self.file)

    def send(self, parts):
        """Sends a command whose reply is read later (a blocking command)."""
        self.sock.sendall(encode(parts))

    def reply(self):
        return read_reply(self.file)

    def drain(self):
        """The messages a subscribed connection has received: everything before the reply to
        a PING sent now, which a RESP2 subscriber gets as ["pong", ""]."""
        self.sock.sendall(encode([b"PING"]))
        messages = []
        while True:
            reply = read_reply(self.file)
            if reply == [b"pong", b""]:
                return messages
            messages.append(reply)
