"""A real local HTTPS server of Client ID Metadata Documents for the tests, with a certificate of its own.

``DocumentServer`` serves what a test puts in ``documents`` (path → status, content type, body), counts the
fetches of each path, and serves ``/slow.json`` as a stall: headers and a first byte, then nothing until the
test ends (``stalled`` is set once a fetch is stuck there), and ``/drip.json`` as a body that drips a byte
every 0.2 s. The site trusts the certificate through
``SSL_CERT_FILE`` in its environment (:attr:`DocumentServer.ca_file`), as OpenSSL reads it.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["DocumentServer"]


def _certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost: ``(cert file, key file)``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cimd test server")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cimd-cert.pem", directory / "cimd-key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_file, key_file


class DocumentServer:
    """Serves client metadata documents over HTTPS on 127.0.0.1 (see the module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.ca_file, key_file = _certificate(directory)
        self.documents: dict[str, tuple[int, str, bytes]] = {}
        self.fetches: Counter[str] = Counter()
        self.stalled = threading.Event()
        self.release = threading.Event()
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.ca_file, key_file)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"https://{host}:{self.port}{path}"

    def publish(self, path: str, metadata: dict[str, Any], *, client_id: str | None = None) -> str:
        """Serve ``metadata`` at ``path`` with ``client_id`` (default: its own URL); returns the URL."""
        url = self.url(path)
        body = {"client_id": client_id or url, **metadata}
        self.documents[path] = (200, "application/json", json.dumps(body).encode())
        return url

    def stop(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                server.fetches[path] += 1
                try:
                    if path == "/slow.json":
                        self._stall()
                        return
                    if path == "/drip.json":
                        self._drip()
                        return
                    status, content_type, body = server.documents.get(path, (404, "text/plain", b"none"))
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                    pass  # the fetcher hung up after its size limit: what the test wants

            def _stall(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "1000")
                self.end_headers()
                self.wfile.write(b"{")
                self.wfile.flush()
                server.stalled.set()
                server.release.wait(60)

            def _drip(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "100000")
                self.end_headers()
                while not server.release.wait(0.2):  # a byte every 0.2 s, never the whole body
                    self.wfile.write(b" ")
                    self.wfile.flush()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
