"""Serves a folder over HTTPS on loopback, as a release's download host would (SwiftPM fetches a
binary target by https URL only): ``serve-https.py DIR CERT KEY LOG``. Prints ``https://127.0.0.1:PORT``
(a free port) once listening, and appends each GET's path and status to LOG, so the test can say
the library came from here. Stops when its parent kills it."""

import functools
import http.server
import ssl
import sys

folder, cert, key, log = sys.argv[1:5]


class Handler(http.server.SimpleHTTPRequestHandler):
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        with open(log, "a", encoding="utf-8") as out:
            out.write(f"{self.command} {self.path} {code}\n")


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=folder))
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
print(f"https://127.0.0.1:{server.server_address[1]}", flush=True)
server.serve_forever()
