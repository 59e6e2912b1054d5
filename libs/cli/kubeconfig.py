"""The kubeconfig `drasim up` writes, and the credentials it points to.

    kubectl --kubeconfig .drasim/kubeconfig get pods

Kubernetes clients send a bearer token only over TLS, so the apistore's HTTP API serves
HTTPS with a certificate signed by a cluster CA made here; the kubeconfig carries that CA
and the token. Token and certificates live in the data directory and are kept across
restarts, so a copied kubeconfig stays valid; the kubeconfig itself is rewritten on every
`drasim up`, as the port may change.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

KUBECONFIG_FILE = "kubeconfig"
TOKEN_FILE = "http-token"
PKI_DIR = "pki"
# Names the serving certificate is valid for: the API listens on the loopback interface.
SERVING_HOSTS = ("127.0.0.1", "localhost", "::1")
_VALIDITY = datetime.timedelta(days=3650)


def kubeconfig_path(data_dir: Path) -> Path:
    return data_dir / KUBECONFIG_FILE


def token_path(data_dir: Path) -> Path:
    return data_dir / TOKEN_FILE


def load_or_create_token(data_dir: Path) -> str:
    """The cluster's bearer token, made (owner-only) on first use."""
    path = token_path(data_dir)
    try:
        token = path.read_text().strip()
    except FileNotFoundError:
        token = ""
    if not token:
        token = secrets.token_urlsafe(32)
        _write_private(path, token + "\n")
    return token


@dataclass(frozen=True, slots=True)
class ServingCerts:
    """PEM files: the cluster CA, and the API's certificate and key signed by it."""

    ca_cert: Path
    cert: Path
    key: Path


def ensure_serving_certs(data_dir: Path) -> ServingCerts:
    """The CA and serving certificate under `<data-dir>/pki`, made on first use."""
    pki = data_dir / PKI_DIR
    certs = ServingCerts(pki / "ca.crt", pki / "apiserver.crt", pki / "apiserver.key")
    if certs.ca_cert.exists() and certs.cert.exists() and certs.key.exists():
        return certs
    pki.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "drasim-ca")])
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in SERVING_HOSTS:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (
        _builder(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "drasim-apiserver")]),
            ca_name,
            key.public_key(),
            now,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    _write_private(
        certs.key,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode(),
    )
    _write_private(certs.cert, cert.public_bytes(serialization.Encoding.PEM).decode())
    _write_private(certs.ca_cert, ca_cert.public_bytes(serialization.Encoding.PEM).decode())
    return certs


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: Any, now: datetime.datetime
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
    )


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=not cert_sign,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def build(
    server: str, token: str, ca_pem: bytes, *, name: str, namespace: str = "default"
) -> dict[str, Any]:
    """A kubeconfig with one cluster, user and context, all called `name`."""
    cluster = {"server": server, "certificate-authority-data": base64.b64encode(ca_pem).decode()}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}
        ],
        "current-context": name,
        "preferences": {},
    }


def write(path: Path, server: str, token: str, ca_cert: Path, *, name: str) -> None:
    """Write the kubeconfig atomically and owner-only (it holds the token)."""
    config = build(server, token, ca_cert.read_bytes(), name=name)
    _write_private(path, yaml.safe_dump(config, sort_keys=False))


def _write_private(path: Path, text: str) -> None:
    staging = path.with_suffix(".tmp")
    staging.unlink(missing_ok=True)
    with open(staging, "w", opener=lambda p, flags: os.open(p, flags, 0o600)) as f:
        f.write(text)
    staging.replace(path)


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "kubeconfig",
        help="write the API's token, certificates and a kubeconfig into the data directory",
        description="For an apistore run outside `drasim up` (e.g. docker compose): writes "
        "<data-dir>/kubeconfig, <data-dir>/http-token and <data-dir>/pki/, kept if present.",
    )
    p.add_argument("--server", default="https://127.0.0.1:6443", help="the API's address")
    p.set_defaults(func=_run)


def _run(args: Any) -> int:
    from drasim.cli import cluster
    from drasim.common.config import Config

    config = Config.from_env(**cluster.cluster_flags(args))
    config.data_dir.mkdir(parents=True, exist_ok=True)
    token = load_or_create_token(config.data_dir)
    certs = ensure_serving_certs(config.data_dir)
    path = kubeconfig_path(config.data_dir)
    write(path, args.server, token, certs.ca_cert, name=config.prefix)
    print(path)
    return 0
