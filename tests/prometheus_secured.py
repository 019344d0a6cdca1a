"""Prometheus behind authentication, for the tests: the real Prometheus binary started with
`--web.config.file` (TLS with a private CA, a client certificate required, basic auth), and
a gateway in front of a plain Prometheus that wants a bearer token and a tenant header, as
Mimir's, Cortex's or Thanos's gateways do."""

from __future__ import annotations

import contextlib
import datetime
import http.server
import ipaddress
import threading
import urllib.request
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.servers import free_port, prometheus_server

USERNAME = "portal"
PASSWORD = "prometheus-test-password-0123"


@dataclass(frozen=True)
class Pki:
    ca: Path  # the private CA's certificate: PROMETHEUS_CA_BUNDLE
    server_cert: Path
    server_key: Path
    client_cert: Path  # signed by the CA: PROMETHEUS_CLIENT_CERT
    client_key: Path
    stranger_cert: Path  # signed by another CA: refused
    stranger_key: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _write(directory: Path, name: str, cert: x509.Certificate, key: object) -> tuple[Path, Path]:
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(  # type: ignore[attr-defined]
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def _ca(common: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common))
        .issuer_name(_name(common))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _leaf(
    common: str,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
    usage: x509.ObjectIdentifier,
    *,
    server: bool,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common))
        .issuer_name(issuer[0].subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer[0].public_key()),
            critical=False,
        )
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return builder.sign(issuer[1], hashes.SHA256()), key


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca, stranger_ca = _ca("portal test CA"), _ca("another CA")
    (directory / "ca.crt").write_bytes(ca[0].public_bytes(serialization.Encoding.PEM))
    server = _write(
        directory, "server", *_leaf("prometheus", ca, ExtendedKeyUsageOID.SERVER_AUTH, server=True)
    )
    client = _write(
        directory, "client", *_leaf("portal", ca, ExtendedKeyUsageOID.CLIENT_AUTH, server=False)
    )
    stranger = _write(
        directory,
        "stranger",
        *_leaf("stranger", stranger_ca, ExtendedKeyUsageOID.CLIENT_AUTH, server=False),
    )
    return Pki(directory / "ca.crt", *server, *client, *stranger)


def bcrypt_hash(password: str) -> str:
    """Prometheus's web config takes bcrypt hashes only (glibc's crypt makes them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt

        # bcrypt, with few rounds: a test server.
        salt = crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 4)  # noqa: S324
        return crypt.crypt(password, salt)


@dataclass
class SecuredPrometheus:
    port: int
    pki: Pki

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"


@contextlib.contextmanager
def secured_prometheus(workdir: Path) -> Iterator[SecuredPrometheus]:
    """The real Prometheus over TLS only, wanting a client certificate the private CA signed
    and basic auth (USERNAME, PASSWORD) on every request."""
    workdir.mkdir(parents=True, exist_ok=True)
    pki = make_pki(workdir / "pki")
    web = workdir / "web.yml"
    web.write_text(
        "tls_server_config:\n"
        f"  cert_file: {pki.server_cert}\n"
        f"  key_file: {pki.server_key}\n"
        "  client_auth_type: RequireAndVerifyClientCert\n"
        f"  client_ca_file: {pki.ca}\n"
        "basic_auth_users:\n"
        f"  {USERNAME}: '{bcrypt_hash(PASSWORD)}'\n"
    )
    with prometheus_server(workdir, scrape_interval="15s", rules=False, web_config=web) as server:
        yield SecuredPrometheus(server.port, pki)


@dataclass
class Gateway:
    """A gateway in front of Prometheus: forwards a request only with the right bearer token
    and a tenant header, counting what it let through by tenant and what it refused."""

    port: int
    upstream: str
    tokens: set[str]
    tenant_header: str = "X-Scope-OrgID"
    passed: Counter[str] = field(default_factory=Counter)
    refused: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextlib.contextmanager
def gateway(upstream: str, tokens: set[str]) -> Iterator[Gateway]:
    state = Gateway(free_port(), upstream, tokens)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            auth = self.headers.get("Authorization", "")
            tenant = self.headers.get(state.tenant_header, "")
            if not auth.startswith("Bearer ") or auth[7:] not in state.tokens or not tenant:
                state.refused += 1
                self.send_response(401)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            state.passed[tenant] += 1
            with urllib.request.urlopen(state.upstream + self.path, timeout=10) as answer:
                body = answer.read()
                status = answer.status
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", state.port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True, name="gateway")
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
