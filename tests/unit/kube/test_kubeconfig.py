"""The kubeconfig reader for common configurations gives what the ``kubernetes`` package gives,
and leaves every other configuration to the package."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from pyscheduler.kube.client import (
    ConnectionConfig,
    _package_config,
    _plain_kubeconfig,
    _strip_bearer,
)

PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def kubeconfig(cluster: dict[str, Any], user: dict[str, Any],
               context: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Config", "current-context": "main",
            "clusters": [{"name": "other", "cluster": {"server": "https://other:1"}},
                         {"name": "c", "cluster": cluster}],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "main", "context": context or {"cluster": "c", "user": "u"}},
                         {"name": "second", "context": {"cluster": "other", "user": "u"}}]}


def read(name: str | None) -> bytes | None:
    return Path(name).read_bytes() if name else None


def token(config: ConnectionConfig) -> str | None:
    # The package re-reads a kubeconfig's token through a hook; the plain reader holds it.
    return _strip_bearer(config.token_source()) if config.token_source is not None \
        else config.token


def same(a: ConnectionConfig, b: ConnectionConfig) -> None:
    assert (a.host, token(a), a.verify_ssl, a.tls_server_name, a.proxy) == \
        (b.host, token(b), b.verify_ssl, b.tls_server_name, b.proxy)
    for field in ("ca_file", "cert_file", "key_file"):
        assert read(getattr(a, field)) == read(getattr(b, field)), field


DATA = base64.b64encode(PEM).decode()


@pytest.mark.parametrize(("cluster", "user", "context"), [
    pytest.param({"server": "https://10.0.0.1:6443", "certificate-authority-data": DATA},
                 {"token": "abc"}, None, id="token and CA data"),
    pytest.param({"server": "https://api.example:443/", "certificate-authority": "ca.pem"},
                 {"client-certificate": "crt.pem", "client-key": "key.pem"}, None,
                 id="client certificate files relative to the kubeconfig"),
    pytest.param({"server": "https://api:6443", "insecure-skip-tls-verify": True,
                  "tls-server-name": "kubernetes", "proxy-url": "http://proxy:3128"},
                 {"client-certificate-data": DATA, "client-key-data": DATA}, None,
                 id="insecure, server name, proxy, certificate data"),
    pytest.param({"server": "http://127.0.0.1:8080"}, {}, None, id="no credentials"),
    pytest.param({"server": "https://api:6443"}, {"token": "Bearer xyz"}, "second",
                 id="another context"),
])
def test_plain_reader_matches_the_package(tmp_path: Path, cluster: dict[str, Any],
                                          user: dict[str, Any], context: str | None) -> None:
    for name in ("ca.pem", "crt.pem", "key.pem"):
        (tmp_path / name).write_bytes(PEM)
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(kubeconfig(cluster, user)))
    plain = _plain_kubeconfig(str(path), context)
    assert plain is not None
    same(plain, _package_config(str(path), context, str(path)))


@pytest.mark.parametrize(("cluster", "user", "context"), [
    pytest.param({"server": "https://a"}, {"exec": {"command": "get-token",
                                                    "apiVersion": "x"}}, None, id="exec"),
    pytest.param({"server": "https://a"}, {"username": "x", "password": "y"}, None,
                 id="basic auth"),
    pytest.param({"server": "https://a"}, {"token": "t"}, "missing", id="unknown context"),
    pytest.param({"server": "https://a", "certificate-authority": "nowhere.pem"},
                 {"token": "t"}, None, id="a CA file that does not exist"),
])
def test_anything_else_is_left_to_the_package(tmp_path: Path, cluster: dict[str, Any],
                                              user: dict[str, Any],
                                              context: str | None) -> None:
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(kubeconfig(cluster, user)))
    assert _plain_kubeconfig(str(path), context) is None


def test_several_files_and_bad_yaml_are_left_to_the_package(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text("clusters: [")
    assert _plain_kubeconfig(str(path), None) is None
    assert _plain_kubeconfig(f"{path}:{path}", None) is None
    assert _plain_kubeconfig(str(tmp_path / "absent"), None) is None
