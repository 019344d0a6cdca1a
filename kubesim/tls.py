"""A self-signed CA and a server certificate for --tls, made with the openssl command.

Kept next to the kubeconfig and reused on the next start while they still verify (the
server certificate signed by the CA, valid for the host for another day), so a restarted
simulator is still trusted by the kubeconfig and the clients that read it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def make_certificates(directory: Path, host: str) -> tuple[Path, Path, Path]:
    """Return (ca.crt, server.crt, server.key) in `directory`, creating them if missing."""
    if shutil.which("openssl") is None:
        raise SystemExit("kubesim: --tls needs the openssl command (apt-get install openssl)")
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_crt = directory / "ca.key", directory / "ca.crt"
    key, crt = directory / "server.key", directory / "server.crt"
    if _reusable(ca_crt, ca_key, crt, key, host):
        return ca_crt, crt, key
    _make_ca(ca_key, ca_crt)
    _make_server_certificate(directory, host, ca_key, ca_crt)
    return ca_crt, crt, key


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _make_ca(ca_key: Path, ca_crt: Path) -> None:
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "30",
        "-subj",
        "/CN=kubesim-ca",
        "-keyout",
        str(ca_key),
        "-out",
        str(ca_crt),
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=keyCertSign,cRLSign",
    )


def _make_server_certificate(directory: Path, host: str, ca_key: Path, ca_crt: Path) -> None:
    """server.key, and server.crt signed by the CA for localhost, 127.0.0.1 and `host`."""
    key, csr, crt = directory / "server.key", directory / "server.csr", directory / "server.crt"
    ext = directory / "server.ext"
    _openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=kubesim",
        "-keyout",
        str(key),
        "-out",
        str(csr),
    )
    alt = f"IP:{host}" if host.replace(".", "").isdigit() else f"DNS:{host}"
    ext.write_text(
        f"subjectAltName=DNS:localhost,IP:127.0.0.1,{alt}\nextendedKeyUsage=serverAuth\n"
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca_crt),
        "-CAkey",
        str(ca_key),
        "-CAcreateserial",
        "-days",
        "30",
        "-out",
        str(crt),
        "-extfile",
        str(ext),
    )


def _reusable(ca_crt: Path, ca_key: Path, crt: Path, key: Path, host: str) -> bool:
    if not all(p.exists() for p in (ca_crt, ca_key, crt, key)):
        return False

    def ok(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["openssl", *args], capture_output=True, text=True, check=False)

    verified = ok("verify", "-CAfile", str(ca_crt), str(crt))
    fresh = ok("x509", "-checkend", "86400", "-noout", "-in", str(crt))
    names = ok("x509", "-noout", "-ext", "subjectAltName", "-in", str(crt))
    wanted = f"IP Address:{host}" if host.replace(".", "").isdigit() else f"DNS:{host}"
    return (
        verified.returncode == 0
        and fresh.returncode == 0
        and (wanted in names.stdout or host in ("127.0.0.1", "localhost"))
    )
