"""Certificates and keys for the TLS tests, made with `cryptography`: a
CA, a server certificate for 127.0.0.1/localhost, client certificates
(valid, expired, and one from a CA the broker does not trust), all as
PEM files in one directory."""

import datetime
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
import ipaddress

NOW = datetime.datetime.now(datetime.timezone.utc)
DAY = datetime.timedelta(days=1)


@dataclass
class Issued:
    cert: Path
    key: Path


def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _write(directory: Path, name: str, cert, key) -> Issued:
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return Issued(cert_path, key_path)


def _name(common_name: str):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


class Authority:
    def __init__(self, directory: Path, name: str):
        self.directory = directory
        self.key = _key()
        self.cert = (x509.CertificateBuilder()
                     .subject_name(_name(name)).issuer_name(_name(name))
                     .public_key(self.key.public_key())
                     .serial_number(x509.random_serial_number())
                     .not_valid_before(NOW - DAY).not_valid_after(NOW + 30 * DAY)
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
                     .add_extension(x509.KeyUsage(True, False, False, False, False, True, True,
                                                  False, False), True)
                     .sign(self.key, hashes.SHA256()))
        self.issued = _write(directory, name, self.cert, self.key)

    def issue(self, name: str, common_name: str, server: bool = False, sans=(),
              not_before=NOW - DAY, not_after=NOW + 30 * DAY) -> Issued:
        key = _key()
        usage = x509.ExtendedKeyUsageOID.SERVER_AUTH if server else \
            x509.ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (x509.CertificateBuilder()
                   .subject_name(_name(common_name)).issuer_name(self.cert.subject)
                   .public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(not_before).not_valid_after(not_after)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), True)
                   .add_extension(x509.ExtendedKeyUsage([usage]), False))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), False)
        return _write(self.directory, name, builder.sign(self.key, hashes.SHA256()), key)


@dataclass
class Pki:
    ca: Path
    server: Issued
    device: Issued          # CN=device-1, URI SAN spiffe://ferry.test/device-one
    other_device: Issued    # CN=device-2
    expired: Issued         # CN=device-old, expired yesterday
    untrusted: Issued       # CN=device-1, from a CA the broker does not know
    untrusted_ca: Path


def make_pki(directory: Path) -> Pki:
    ca = Authority(directory, "ferry-test-ca")
    rogue = Authority(directory, "rogue-ca")
    server_names = [x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    return Pki(
        ca=ca.issued.cert,
        server=ca.issue("server", "localhost", server=True, sans=server_names),
        device=ca.issue("device-1", "device-1",
                        sans=[x509.UniformResourceIdentifier("spiffe://ferry.test/device-one")]),
        other_device=ca.issue("device-2", "device-2"),
        expired=ca.issue("device-old", "device-old", not_before=NOW - 10 * DAY,
                         not_after=NOW - DAY),
        untrusted=rogue.issue("device-rogue", "device-1"),
        untrusted_ca=rogue.issued.cert,
    )
