"""The control plane's keys and certificates, made with `cryptography`.

One CA signs the API server's serving certificate (for 127.0.0.1 and localhost); clients
trust it through the kubeconfig and authenticate with tokens (see `launch`). The
service-account key pair signs and verifies the tokens the API server issues to service
accounts, the controllers' own among them (`--use-service-account-credentials`).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

VALID_FOR = datetime.timedelta(days=30)


@dataclass(frozen=True)
class Pki:
    ca_crt: Path
    ca_key: Path
    server_crt: Path
    server_key: Path
    sa_key: Path
    sa_pub: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(subject: str, key, issuer: str, signer, *, ca: bool, sans=()):  # type: ignore[no-untyped-def]
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALID_FOR)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return builder.sign(signer, hashes.SHA256())


def make_pki(directory: Path) -> Pki:
    """A new CA, serving certificate and service-account key pair in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(
        *(directory / n for n in ("ca.crt", "ca.key", "apiserver.crt", "apiserver.key")),
        directory / "sa.key",
        directory / "sa.pub",
    )
    ca_key = _key()
    ca = _certificate("gpu-portal-test-ca", ca_key, "gpu-portal-test-ca", ca_key, ca=True)
    _write_key(pki.ca_key, ca_key)
    pki.ca_crt.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    server_key = _key()
    sans = (
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.DNSName("localhost"),
        x509.DNSName("kubernetes.default.svc"),
    )
    server = _certificate(
        "kube-apiserver", server_key, "gpu-portal-test-ca", ca_key, ca=False, sans=sans
    )
    _write_key(pki.server_key, server_key)
    pki.server_crt.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    sa_key = _key()
    _write_key(pki.sa_key, sa_key)
    pki.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return pki
