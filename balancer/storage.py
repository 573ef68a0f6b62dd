"""Where the lakehouse lives: a local folder or an object-store URI (``s3://bucket/prefix``), and the
storage options every reader and writer of it needs.

The root is normalized once, here: a local path becomes an absolute path without a scheme (exactly
what the tables were always written under); a URI keeps its scheme, loses a trailing ``/``. Every
table path is ``root + "/" + table``. ``options`` are delta-rs's (object_store's) storage options
and go to delta-rs unchanged; the same settings are translated for pyarrow's ``S3FileSystem``
(executors' parquet writes and Python reads) and for Hadoop's S3A (delta-spark).

Commit safety on S3: a Delta commit is "create ``_delta_log/<version>.json`` only if absent". One job
has one committing writer (its driver), but several jobs (one per monitored cluster) may share a
lakehouse and commit to the same tables at the same moment, so a plain PUT (delta-rs's
``AWS_S3_ALLOW_UNSAFE_RENAME``) could let one commit silently overwrite another. S3 has conditional
writes (``If-None-Match``), which delta-rs uses with ``aws_conditional_put: etag``: that is the
default here unless the options choose a locking provider (DynamoDB) or unsafe renames explicitly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

if TYPE_CHECKING:
    from deltalake import DeltaTable

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
OBJECT_STORE_SCHEMES = ("s3", "s3a")

# Keys whose values are secrets: never logged, never in an error (see ``redacted``).
_SECRET = re.compile(r"(secret|token|password|credential|access_key|key_id|sas|signature)", re.IGNORECASE)


def is_uri(path: str | Path) -> bool:
    return isinstance(path, str) and bool(_URI.match(path))


def normalize_root(root: str | Path) -> str:
    """An absolute local path (no scheme), or the URI without a trailing slash; ``file://`` is local."""
    text = str(root)
    if text.startswith("file://"):
        text = urlparse(text).path
    if is_uri(text):
        scheme = text.split("://", 1)[0].lower()
        if scheme not in OBJECT_STORE_SCHEMES:
            raise ValueError(f"lakehouse.path: unsupported scheme {scheme!r} (a local path, s3:// or s3a://)")
        parsed = urlparse(text)
        if parsed.username or parsed.password:
            raise ValueError(
                "lakehouse.path must not carry credentials; put them in lakehouse.storage_options"
            )
        if not parsed.netloc:
            raise ValueError(f"lakehouse.path {text!r} names no bucket")
        return f"{scheme}://{parsed.netloc}{parsed.path.rstrip('/')}"
    return str(Path(text).resolve())


def _plain(key: str) -> str:
    # object_store accepts AWS_ENDPOINT_URL, aws_endpoint, endpoint ... for the same setting.
    key = key.lower()
    return key[4:] if key.startswith("aws_") else key


def redacted(options: dict[str, str]) -> dict[str, str]:
    return {k: ("***" if _SECRET.search(k) else v) for k, v in options.items()}


@dataclass(frozen=True)
class Storage:
    """A normalized lakehouse root and its storage options; picklable (sent to executors)."""

    root: str
    options: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, root: str | Path, options: dict[str, str] | None = None) -> Storage:
        root = normalize_root(root)
        options = {str(k): str(v) for k, v in (options or {}).items()}
        if is_uri(root) and not any(
            _plain(k) in ("conditional_put", "s3_locking_provider", "s3_allow_unsafe_rename") for k in options
        ):
            options["aws_conditional_put"] = "etag"
        return cls(root, options)

    def __repr__(self) -> str:  # dataclass' repr would print the secrets
        return f"Storage({self.root!r}, {redacted(self.options)!r})"

    @property
    def local(self) -> bool:
        return not is_uri(self.root)

    def join(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def delta_options(self) -> dict[str, str] | None:
        """For delta-rs' ``storage_options=`` (None on a local disk: delta-rs' defaults)."""
        return None if self.local else dict(self.options)

    def delta_table(self, path: str) -> DeltaTable:
        """delta-rs' ``DeltaTable`` at ``path`` (under the root) with these options."""
        from deltalake import DeltaTable

        return DeltaTable(path, storage_options=self.delta_options())

    def is_delta_table(self, path: str) -> bool:
        from deltalake import DeltaTable

        return DeltaTable.is_deltatable(path, storage_options=self.delta_options())

    def _setting(self, *names: str) -> str | None:
        for key, value in self.options.items():
            if _plain(key) in names:
                return value
        return None

    # -- pyarrow ---------------------------------------------------------------------------

    @cached_property
    def filesystem(self):
        """pyarrow FileSystem for the root (local, or S3 with the same endpoint, credentials, region)."""
        from pyarrow import fs

        if self.local:
            return fs.LocalFileSystem()
        endpoint = self._setting("endpoint", "endpoint_url")
        kwargs = {}
        if endpoint:
            parsed = urlparse(endpoint if "://" in endpoint else f"https://{endpoint}")
            kwargs["endpoint_override"] = parsed.netloc
            kwargs["scheme"] = parsed.scheme
        for name, aliases in (
            ("access_key", ("access_key_id",)),
            ("secret_key", ("secret_access_key",)),
            ("session_token", ("session_token", "token")),
            ("region", ("region", "default_region")),
        ):
            value = self._setting(*aliases)
            if value:
                kwargs[name] = value
        return fs.S3FileSystem(**kwargs)

    def fs_path(self, path: str) -> str:
        """``path`` (under the root) as the filesystem's own path: no scheme for S3 (``bucket/key``)."""
        return path.split("://", 1)[1] if is_uri(path) else path

    # -- Hadoop (delta-spark) --------------------------------------------------------------

    def hadoop_conf(self) -> dict[str, str]:
        """The storage options as Hadoop S3A settings (``fs.s3a.*``), for the delta-spark engine.

        ``s3://`` is served by S3A too (``fs.s3.impl``). Commit safety there is Delta's LogStore:
        ``S3DynamoDBLogStore`` for several writers, not an S3A setting.
        """
        if self.local:
            return {}
        conf = {"fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem"}
        endpoint = self._setting("endpoint", "endpoint_url")
        if endpoint:
            conf["fs.s3a.endpoint"] = endpoint
            conf["fs.s3a.path.style.access"] = (
                "true"  # a custom endpoint (MinIO, ...) rarely has per-bucket DNS
            )
            if endpoint.startswith("http://"):
                conf["fs.s3a.connection.ssl.enabled"] = "false"
        for hadoop, aliases in (
            ("fs.s3a.access.key", ("access_key_id",)),
            ("fs.s3a.secret.key", ("secret_access_key",)),
            ("fs.s3a.session.token", ("session_token", "token")),
            ("fs.s3a.endpoint.region", ("region", "default_region")),
        ):
            value = self._setting(*aliases)
            if value:
                conf[hadoop] = value
        if "fs.s3a.session.token" in conf:
            conf["fs.s3a.aws.credentials.provider"] = (
                "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
            )
        allow_http = self._setting("allow_http")
        if allow_http is not None and allow_http.lower() == "true":
            conf["fs.s3a.connection.ssl.enabled"] = "false"
        return conf
