"""The middlewares in real servers against a real leash: a WSGI app under wsgiref's server,
and an ASGI app under a small asyncio HTTP/1.1 server written here (the standard library
has none): it parses each request, builds the ASGI scope, calls the app with real receive
and send callables and writes what the app sent back to the socket."""

import asyncio
import json
import threading
import unittest
import urllib.error
import urllib.request
from wsgiref.simple_server import WSGIRequestHandler, make_server

import leash
from tests.env import KEYS, URL, unique


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass


def hello_wsgi(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello"]


async def hello_asgi(scope, receive, send):
    assert scope["type"] == "http"
    await receive()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"hello"})


def get(url, headers):
    """GET url; (status, headers, body), error statuses included."""
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


async def serve_asgi(app):
    """Serves app on a free loopback port; returns the asyncio server and its base URL."""

    async def handle(reader, writer):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            path, _, query = target.partition("?")
            headers = []
            for line in lines[1:]:
                if line:
                    k, _, v = line.partition(":")
                    headers.append((k.strip().lower().encode("latin-1"), v.strip().encode("latin-1")))
            peer = writer.get_extra_info("peername")
            scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
                     "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": query.encode(),
                     "headers": headers, "client": (peer[0], peer[1]), "server": writer.get_extra_info("sockname")[:2]}
            sent = []

            async def receive():
                return {"type": "http.request", "body": b"", "more_body": False}

            async def send(message):
                sent.append(message)

            await app(scope, receive, send)
            start = next(m for m in sent if m["type"] == "http.response.start")
            body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
            out = [f"HTTP/1.1 {start['status']} X".encode()]
            out += [k + b": " + v for k, v in start.get("headers", [])]
            out += [b"Content-Length: " + str(len(body)).encode(), b"Connection: close", b"", body]
            writer.write(b"\r\n".join(out))
            await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


class MiddlewareTest(unittest.TestCase):
    def check_three(self, answers):
        self.assertEqual([a[0] for a in answers], [200, 200, 429])
        self.assertEqual(answers[0][2], b"hello")
        self.assertEqual(answers[0][1]["RateLimit-Limit"], "2")
        self.assertEqual(answers[0][1]["RateLimit-Remaining"], "1")
        _, h, body = answers[2]
        self.assertEqual(h["RateLimit-Limit"], "2")
        self.assertEqual(h["RateLimit-Remaining"], "0")
        self.assertTrue(1 <= int(h["RateLimit-Reset"]) <= 60, h["RateLimit-Reset"])
        self.assertTrue(1 <= int(h["Retry-After"]) <= 60, h["Retry-After"])
        self.assertEqual(h["Content-Type"], "application/json")
        self.assertEqual(json.loads(body), {"error": "rate limit exceeded", "code": "rate_limited"})

    def test_wsgi_answers_429_with_ratelimit_headers(self):
        app = leash.WSGIMiddleware(hello_wsgi, leash.Client(URL, KEYS["scale"]), namespace=unique("py-wsgi"),
                                   key=leash.key_by_header("X-User"), algorithm="fixed_window", limit=2, window_ms=60000)
        server = make_server("127.0.0.1", 0, app, handler_class=QuietHandler)
        t = threading.Thread(target=server.serve_forever)
        t.start()
        try:
            base = f"http://127.0.0.1:{server.server_port}"
            self.check_three([get(base + "/hello", {"X-User": "u1"}) for _ in range(3)])
        finally:
            server.shutdown()
            t.join()
            server.server_close()

    def test_asgi_answers_429_with_ratelimit_headers(self):
        async def main():
            app = leash.ASGIMiddleware(hello_asgi, leash.AsyncClient(URL, KEYS["scale"]), namespace=unique("py-asgi"),
                                       key=leash.key_by_header("X-User"), algorithm="fixed_window", limit=2, window_ms=60000)
            server, base = await serve_asgi(app)
            try:
                loop = asyncio.get_running_loop()
                return [await loop.run_in_executor(None, get, base + "/hello", {"X-User": "u1"}) for _ in range(3)]
            finally:
                server.close()
                await server.wait_closed()

        self.check_three(asyncio.run(main()))

    def test_hard_cap_is_passed_on(self):
        app = leash.WSGIMiddleware(hello_wsgi, leash.Client(URL, KEYS["capped_mw"]), namespace="py-cap",
                                   key=lambda environ: "k", limit=100, window_ms=60000)
        server = make_server("127.0.0.1", 0, app, handler_class=QuietHandler)
        t = threading.Thread(target=server.serve_forever)
        t.start()
        try:
            answers = [get(f"http://127.0.0.1:{server.server_port}/", {}) for _ in range(4)]
        finally:
            server.shutdown()
            t.join()
            server.server_close()
        self.assertEqual([a[0] for a in answers], [200, 200, 200, 429])
        self.assertEqual(json.loads(answers[3][2])["code"], "hard_cap_exceeded")
        self.assertGreaterEqual(int(answers[3][1]["Retry-After"]), 1)

    def test_unreachable_fails_open_or_closed(self):
        dead = leash.Client("http://127.0.0.1:9", "k", max_retries=0)
        errors = []
        open_app = leash.WSGIMiddleware(hello_wsgi, dead, namespace="n", limit=1, window_ms=1000,
                                        on_error=lambda env, e: errors.append(e))
        closed_app = leash.WSGIMiddleware(hello_wsgi, dead, namespace="n", limit=1, window_ms=1000, fail_closed=True)
        for app, want in ((open_app, 200), (closed_app, 503)):
            server = make_server("127.0.0.1", 0, app, handler_class=QuietHandler)
            t = threading.Thread(target=server.serve_forever)
            t.start()
            try:
                status, h, body = get(f"http://127.0.0.1:{server.server_port}/", {})
            finally:
                server.shutdown()
                t.join()
                server.server_close()
            self.assertEqual(status, want)
            if want == 503:
                self.assertEqual(h["Retry-After"], "1")
                self.assertEqual(json.loads(body), {"error": "rate limiter unavailable", "code": "unavailable"})
        self.assertEqual(len(errors), 1)
        self.assertTrue(errors[0].unavailable)


if __name__ == "__main__":
    unittest.main()
