"""A local, file-backed stand-in for the Hugging Face Hub HTTP API.

`LocalHub` speaks the subset of the Hub REST API that ``huggingface_hub`` (and through it ``transformers``
and ``peft``) use to create repos, commit files and download them, so tests and demos can push and pull
models without network access::

    with LocalHub(tmp_dir) as hub:
        restore = point_hf_at(hub.url)
        try:
            model.push_to_hub("org/tiny", token="any")
            AutoModelForCausalLM.from_pretrained("org/tiny")
        finally:
            restore()

Only the standard library and simhub's own atomic file writer are used. Files are always committed inline ("regular" upload mode, base64 in the
NDJSON commit payload): the server never asks for LFS and never sends Xet headers, so neither the LFS batch
API nor a Xet CAS server is ever needed.

Storage layout under ``root``::

    {models,datasets,spaces}/{namespace}/{name}/
        meta.json             visibility, creation date
        refs.json             branches, tags and pull-request refs -> commit sha
        commits/{sha}.json    immutable snapshot: parents, message, {path: [blob oid, size]}
        blobs/{oid}           file contents, addressed by their git blob sha1 (the Hub's ETag)
"""

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import hashlib
import json
import logging
import mimetypes
import os
import re
import shutil
import socket
import sys
import threading
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from simhub.schema import atomic_write_bytes

__all__ = ["LocalHub", "main", "point_hf_at"]

logger = logging.getLogger(__name__)

DEFAULT_BRANCH = "main"
# Namespace used when a repo is created without an organization; also the name `whoami` reports.
DEFAULT_USER = "user"

_TYPE_BY_PLURAL = {"models": "model", "datasets": "dataset", "spaces": "space"}
_PLURAL_BY_TYPE = {v: k for k, v in _TYPE_BY_PLURAL.items()}
_URL_PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
_SHA_PREFIX_RE = re.compile(r"[0-9a-f]{7,40}")
_PR_REF_RE = re.compile(r"refs/pr/(\d+)")
_TRUE = {"1", "true", "yes", "on"}

# New repos on the real Hub start with one commit holding this file; clients (e.g. `upload_folder` with
# `delete_patterns`) special-case it, so mirror it.
_INITIAL_GITATTRIBUTES = b"""\
*.bin filter=lfs diff=lfs merge=lfs -text
*.ckpt filter=lfs diff=lfs merge=lfs -text
*.gguf filter=lfs diff=lfs merge=lfs -text
*.h5 filter=lfs diff=lfs merge=lfs -text
*.onnx filter=lfs diff=lfs merge=lfs -text
*.parquet filter=lfs diff=lfs merge=lfs -text
*.pt filter=lfs diff=lfs merge=lfs -text
*.pth filter=lfs diff=lfs merge=lfs -text
*.safetensors filter=lfs diff=lfs merge=lfs -text
*.zip filter=lfs diff=lfs merge=lfs -text
"""


class HubError(Exception):
    """An error answered to the client the way the real Hub does (status, X-Error-Code, JSON body)."""

    def __init__(
        self, status: int, message: str, code: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = headers or {}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _git_blob_oid(data: bytes) -> str:
    # Same id git (and the Hub's ETag for non-LFS files) gives a blob; clients compare it to skip unchanged files.
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _truthy(values: list[str] | None) -> bool:
    return bool(values) and values[-1].strip().lower() in _TRUE


def _check_ref_name(kind: str, name: str) -> None:
    if not re.fullmatch(r"[A-Za-z0-9._/-]+", name) or ".." in name:
        raise HubError(400, f"Invalid {kind} name: {name!r}")


def _content_disposition(filename: str) -> str:
    # Headers are latin-1: keep an ASCII fallback and the exact name in RFC 5987 form.
    fallback = filename.encode("ascii", "replace").decode().replace('"', "_")
    return f"inline; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename)}"


def _clean_repo_path(path: str) -> str:
    """Validate a path inside a repo; reject anything that could escape it or touch git internals."""
    path = path.strip().lstrip("/")
    if path.startswith("./"):
        path = path[2:]
    parts = path.split("/")
    if not path or "\\" in path or any(p in ("", ".", "..", ".git") for p in parts):
        raise HubError(400, f"Invalid path in repo: {path!r}")
    return path


def _validate_repo_id(namespace: str, name: str) -> str:
    for part in (namespace, name):
        if not _NAME_RE.fullmatch(part) or "--" in part or ".." in part:
            raise HubError(400, f"Invalid repo id: '{namespace}/{name}'")
    return f"{namespace}/{name}"


def _repo_not_found(repo_type: str, repo_id: str, status: int = 404) -> HubError:
    return HubError(status, f"Repository not found: {repo_type} '{repo_id}'", code="RepoNotFound")


class _Repo:
    """One repo on disk. Reads take no lock: commits and blobs are immutable and refs are replaced atomically."""

    def __init__(self, root: Path, repo_type: str, repo_id: str) -> None:
        self.repo_type = repo_type
        self.repo_id = repo_id
        self.path = root / _PLURAL_BY_TYPE[repo_type] / repo_id

    def exists(self) -> bool:
        return (self.path / "meta.json").is_file()

    def meta(self) -> dict[str, Any]:
        return json.loads((self.path / "meta.json").read_bytes())

    def save_meta(self, meta: dict[str, Any]) -> None:
        atomic_write_bytes(self.path / "meta.json", json.dumps(meta, indent=1).encode())

    def refs(self) -> dict[str, dict[str, str]]:
        return json.loads((self.path / "refs.json").read_bytes())

    def save_refs(self, refs: dict[str, dict[str, str]]) -> None:
        atomic_write_bytes(self.path / "refs.json", json.dumps(refs, indent=1).encode())

    def commit(self, sha: str) -> dict[str, Any]:
        return json.loads((self.path / "commits" / f"{sha}.json").read_bytes())

    def blob_path(self, oid: str) -> Path:
        return self.path / "blobs" / oid

    def put_blob(self, data: bytes) -> str:
        oid = _git_blob_oid(data)
        if not self.blob_path(oid).exists():
            atomic_write_bytes(self.blob_path(oid), data)
        return oid

    def write_commit(
        self, parents: list[str], files: dict[str, list[Any]], title: str, message: str, author: str
    ) -> str:
        body = {
            "parents": parents,
            "title": title,
            "message": message,
            "date": _now(),
            "authors": [author],
            "files": dict(sorted(files.items())),
        }
        # A random salt keeps two identical commits made in the same millisecond distinct.
        sha = hashlib.sha1(json.dumps(body, sort_keys=True).encode() + uuid.uuid4().bytes).hexdigest()
        body["id"] = sha
        atomic_write_bytes(self.path / "commits" / f"{sha}.json", json.dumps(body).encode())
        return sha

    def resolve(self, revision: str) -> str:
        """Map a branch, tag, PR ref or (possibly abbreviated) commit sha to a full commit sha."""
        refs = self.refs()
        rev = revision
        if rev.startswith("refs/heads/"):
            rev = rev[len("refs/heads/") :]
        elif rev.startswith("refs/tags/") and (sha := refs["tags"].get(rev[len("refs/tags/") :])) is not None:
            return sha
        if (sha := refs["branches"].get(rev)) is not None:
            return sha
        if (sha := refs["tags"].get(rev)) is not None:
            return sha
        if (m := _PR_REF_RE.fullmatch(rev)) and (sha := refs["prs"].get(m[1])) is not None:
            return sha
        if _SHA_PREFIX_RE.fullmatch(rev):
            if len(rev) == 40 and (self.path / "commits" / f"{rev}.json").is_file():
                return rev
            matches = [p.stem for p in (self.path / "commits").glob(f"{rev}*.json")]
            if len(matches) == 1:
                return matches[0]
        raise HubError(404, f"Invalid rev id: {revision}", code="RevisionNotFound")

    def history(self, sha: str) -> Iterable[dict[str, Any]]:
        """Commits reachable from `sha` along first parents, newest first."""
        current: str | None = sha
        while current is not None:
            commit = self.commit(current)
            yield commit
            current = commit["parents"][0] if commit["parents"] else None


def _tree_oid(files: dict[str, list[Any]], folder: str) -> str:
    prefix = folder + "/"
    listing = "\n".join(f"{p} {v[0]}" for p, v in sorted(files.items()) if p.startswith(prefix))
    return hashlib.sha1(listing.encode()).hexdigest()


class _Store:
    """All repos under `root`; mutations are serialized by one lock (a test server has little contention)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.lock = threading.RLock()

    def repo(self, repo_type: str, repo_id: str) -> _Repo:
        return _Repo(self.root, repo_type, repo_id)

    def create(self, repo_type: str, repo_id: str, private: bool, extra: dict[str, Any]) -> _Repo:
        repo = self.repo(repo_type, repo_id)
        with self.lock:
            if repo.exists():
                raise HubError(409, f"You already created this {repo_type} repo: {repo_id}")
            repo.path.mkdir(parents=True, exist_ok=True)
            oid = repo.put_blob(_INITIAL_GITATTRIBUTES)
            sha = repo.write_commit(
                [], {".gitattributes": [oid, len(_INITIAL_GITATTRIBUTES)]}, "initial commit", "", DEFAULT_USER
            )
            repo.save_refs({"branches": {DEFAULT_BRANCH: sha}, "tags": {}, "prs": {}})
            repo.save_meta(
                {
                    "id": uuid.uuid4().hex[:24],
                    "private": private,
                    "createdAt": _now(),
                    "gated": False,
                    **extra,
                }
            )
        return repo

    def list(self, repo_type: str) -> list[_Repo]:
        base = self.root / _PLURAL_BY_TYPE[repo_type]
        found = sorted(p.parent for p in base.glob("*/*/meta.json"))
        return [self.repo(repo_type, f"{p.parent.name}/{p.name}") for p in found]


class _HubHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], store: _Store, tokens: frozenset[str] | None) -> None:
        self.store = store
        self.tokens = tokens
        self.request_log: list[tuple[str, str]] = []
        self.open_connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 so the client's connection pool can keep connections alive between the many small calls.
    protocol_version = "HTTP/1.1"
    server_version = "simhub-local-hub/1.0"
    # Idle keep-alive connections are dropped after this many seconds.
    timeout = 60
    server: _HubHTTPServer

    # -- plumbing -------------------------------------------------------------------------------------------

    def setup(self) -> None:
        super().setup()
        with self.server.connections_lock:
            self.server.open_connections.add(self.connection)

    def finish(self) -> None:
        with self.server.connections_lock:
            self.server.open_connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        # The request line holds no credentials (tokens only travel in the Authorization header).
        logger.debug("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        self.server.request_log.append((method, url.path))
        self._method = method
        self._responded = False
        try:
            # Read the body before anything can fail: unread bytes would corrupt the next keep-alive request.
            self._body = self._read_body()
            # Split before unquoting: revisions and tree paths arrive as single %2F-encoded segments.
            parts = [unquote(p) for p in url.path.split("/")[1:]]
            while parts and parts[-1] == "":
                parts.pop()
            self._route(method, parts, parse_qs(url.query, keep_blank_values=True))
        except HubError as err:
            self._send_error(err)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:
            logger.exception("Local Hub failed on %s %s", method, url.path)
            # The request body may be unread: do not reuse this connection.
            self.close_connection = True
            self._send_error(HubError(500, f"Internal error: {type(exc).__name__}: {exc}"))

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _json_body(self) -> Any:
        if not self._body:
            return {}
        try:
            return json.loads(self._body)
        except ValueError as exc:
            raise HubError(400, f"Invalid JSON body: {exc}") from exc

    def _base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{self.headers.get('Host') or f'{host}:{port}'}"

    def _repo_url(self, repo_type: str, repo_id: str) -> str:
        return f"{self._base_url()}/{_URL_PREFIX[repo_type]}{repo_id}"

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self._responded = True
        self.send_response(status)
        headers = {"Content-Type": "application/json; charset=utf-8", **(headers or {})}
        headers.setdefault("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if self._method != "HEAD" and body:
            self.wfile.write(body)

    def _send_json(self, obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(obj).encode(), headers)

    def _send_error(self, err: HubError) -> None:
        if self._responded:
            # Failed while streaming a body: a second response would corrupt the stream, so just hang up.
            self.close_connection = True
            return
        headers = dict(err.headers)
        if err.code:
            headers["X-Error-Code"] = err.code
        # Header values must be latin-1; the JSON body keeps the full message.
        headers["X-Error-Message"] = err.message.encode("ascii", "replace").decode()[:500]
        try:
            self._send_json({"error": err.message}, err.status, headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    # -- auth -----------------------------------------------------------------------------------------------

    def _token(self) -> str | None:
        """The caller's bearer token, None if anonymous; 401 for a malformed or unknown token."""
        header = self.headers.get("Authorization")
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        token = token.strip()
        # Same message as the real Hub: the client then raises a plain 401 instead of RepositoryNotFound.
        invalid = HubError(401, "Invalid credentials in Authorization header")
        if scheme.lower() != "bearer" or not token:
            raise invalid
        if self.server.tokens is not None and token not in self.server.tokens:
            raise invalid
        return token

    def _require_token(self) -> str:
        token = self._token()
        if token is None:
            raise HubError(401, "Authentication required: pass a token (Authorization: Bearer <token>)")
        return token

    def _readable(self, repo_type: str, repo_id: str) -> _Repo:
        token = self._token()
        repo = self.server.store.repo(repo_type, repo_id)
        if not repo.exists():
            raise _repo_not_found(repo_type, repo_id)
        if repo.meta().get("private") and token is None:
            # The real Hub hides private repos from anonymous callers behind a 401 "RepoNotFound".
            raise _repo_not_found(repo_type, repo_id, status=401)
        return repo

    def _writable(self, repo_type: str, repo_id: str) -> _Repo:
        self._require_token()
        repo = self.server.store.repo(repo_type, repo_id)
        if not repo.exists():
            raise _repo_not_found(repo_type, repo_id)
        return repo

    # -- routing --------------------------------------------------------------------------------------------

    def _route(self, method: str, parts: list[str], query: dict[str, list[str]]) -> None:
        if parts[:1] == ["api"]:
            self._route_api(method, parts[1:], query)
            return
        repo_type = "model"
        if parts and parts[0] in ("datasets", "spaces"):
            repo_type, parts = _TYPE_BY_PLURAL[parts[0]], parts[1:]
        if len(parts) >= 5 and parts[2] in ("resolve", "raw") and method in ("GET", "HEAD"):
            repo_id = _validate_repo_id(parts[0], parts[1])
            self._resolve_file(repo_type, repo_id, parts[3], "/".join(parts[4:]))
            return
        raise HubError(404, f"Not found: {method} {'/'.join(parts)}")

    def _route_api(self, method: str, parts: list[str], query: dict[str, list[str]]) -> None:
        route = (method, *parts[:2])
        if route == ("GET", "whoami-v2"):
            self._require_token()
            self._send_json(
                {
                    "type": "user",
                    "id": DEFAULT_USER,
                    "name": DEFAULT_USER,
                    "fullname": "Local Hub user",
                    "orgs": [],
                    "auth": {
                        "type": "access_token",
                        "accessToken": {"displayName": "local", "role": "write"},
                    },
                }
            )
        elif route == ("POST", "validate-yaml"):
            self._send_json({"errors": [], "warnings": []})
        elif route == ("POST", "repos", "create"):
            self._create_repo()
        elif route == ("DELETE", "repos", "delete"):
            self._delete_repo()
        elif route == ("POST", "repos", "move"):
            self._move_repo()
        elif parts and parts[0] in _TYPE_BY_PLURAL:
            repo_type = _TYPE_BY_PLURAL[parts[0]]
            if len(parts) == 1 and method == "GET":
                self._list_repos(repo_type, query)
                return
            if len(parts) < 3:
                raise HubError(404, "Not found")
            repo_id = _validate_repo_id(parts[1], parts[2])
            self._route_repo_api(method, repo_type, repo_id, parts[3:], query)
        else:
            raise HubError(404, f"Unknown endpoint: {method} /api/{'/'.join(parts)}")

    def _route_repo_api(
        self, method: str, repo_type: str, repo_id: str, rest: list[str], query: dict[str, list[str]]
    ) -> None:
        action = rest[0] if rest else ""
        arg = rest[1] if len(rest) > 1 else None
        if method == "GET" and not rest:
            self._repo_info(repo_type, repo_id, DEFAULT_BRANCH, query)
        elif method == "GET" and action == "revision" and arg is not None:
            self._repo_info(repo_type, repo_id, arg, query)
        elif method == "GET" and action == "tree" and arg is not None:
            self._tree(repo_type, repo_id, arg, "/".join(rest[2:]), query)
        elif method == "POST" and action == "paths-info" and arg is not None:
            self._paths_info(repo_type, repo_id, arg)
        elif method == "GET" and action == "refs":
            self._refs(repo_type, repo_id, query)
        elif method == "GET" and action == "commits" and arg is not None:
            self._commits(repo_type, repo_id, arg)
        elif method == "POST" and action == "preupload" and arg is not None:
            self._preupload(repo_type, repo_id, arg)
        elif method == "POST" and action == "commit" and arg is not None:
            self._commit(repo_type, repo_id, arg, _truthy(query.get("create_pr")))
        elif action == "branch" and arg is not None and method in ("POST", "DELETE"):
            self._branch(method, repo_type, repo_id, arg)
        elif action == "tag" and arg is not None and method in ("POST", "DELETE"):
            self._tag(method, repo_type, repo_id, arg)
        elif method == "PUT" and action == "settings":
            self._settings(repo_type, repo_id)
        else:
            raise HubError(404, f"Unknown endpoint: {method} {'/'.join(rest)} on {repo_type} '{repo_id}'")

    # -- repos ----------------------------------------------------------------------------------------------

    def _create_repo(self) -> None:
        self._require_token()
        body = self._json_body()
        repo_type = body.get("type") or "model"
        if repo_type not in _PLURAL_BY_TYPE:
            raise HubError(400, f"Invalid repo type: {repo_type}")
        repo_id = _validate_repo_id(body.get("organization") or DEFAULT_USER, str(body.get("name", "")))
        private = bool(body.get("private")) or body.get("visibility") == "private"
        extra = {"sdk": body["sdk"]} if body.get("sdk") else {}
        url = self._repo_url(repo_type, repo_id)
        try:
            repo = self.server.store.create(repo_type, repo_id, private, extra)
        except HubError as err:
            if err.status == 409:
                self._send_json({"error": err.message, "url": url}, 409, {"X-Error-Message": err.message})
                return
            raise
        self._send_json({"url": url, "name": repo_id, "id": repo.meta()["id"]})

    def _delete_repo(self) -> None:
        self._require_token()
        body = self._json_body()
        repo_type = body.get("type") or "model"
        repo_id = _validate_repo_id(body.get("organization") or DEFAULT_USER, str(body.get("name", "")))
        store = self.server.store
        with store.lock:
            repo = store.repo(repo_type, repo_id)
            if not repo.exists():
                raise _repo_not_found(repo_type, repo_id)
            shutil.rmtree(repo.path)
        self._send_json({})

    def _move_repo(self) -> None:
        self._require_token()
        body = self._json_body()
        repo_type = body.get("type") or "model"
        src_id = _validate_repo_id(*str(body.get("fromRepo", "")).partition("/")[::2])
        dst_id = _validate_repo_id(*str(body.get("toRepo", "")).partition("/")[::2])
        store = self.server.store
        with store.lock:
            src, dst = store.repo(repo_type, src_id), store.repo(repo_type, dst_id)
            if not src.exists():
                raise _repo_not_found(repo_type, src_id)
            if dst.exists():
                raise HubError(409, f"Repository already exists: {dst_id}")
            dst.path.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src.path, dst.path)
        self._send_json({"url": self._repo_url(repo_type, dst_id)})

    def _settings(self, repo_type: str, repo_id: str) -> None:
        repo = self._writable(repo_type, repo_id)
        body = self._json_body()
        with self.server.store.lock:
            meta = repo.meta()
            if "private" in body and body["private"] is not None:
                meta["private"] = bool(body["private"])
            if body.get("visibility") in ("private", "public"):
                meta["private"] = body["visibility"] == "private"
            if "gated" in body:
                meta["gated"] = body["gated"]
            repo.save_meta(meta)
        self._send_json({})

    def _list_repos(self, repo_type: str, query: dict[str, list[str]]) -> None:
        authed = self._token() is not None
        search = (query.get("search") or [""])[-1].lower()
        author = (query.get("author") or [None])[-1]
        limit = int((query.get("limit") or ["0"])[-1] or 0)
        out = []
        for repo in self.server.store.list(repo_type):
            meta = repo.meta()
            if meta.get("private") and not authed:
                continue
            if search not in repo.repo_id.lower() or (author and repo.repo_id.split("/")[0] != author):
                continue
            sha = repo.refs()["branches"].get(DEFAULT_BRANCH)
            last = repo.commit(sha)["date"] if sha else meta["createdAt"]
            out.append(
                {
                    "_id": meta["id"],
                    "id": repo.repo_id,
                    "author": repo.repo_id.split("/")[0],
                    "private": meta.get("private", False),
                    "sha": sha,
                    "lastModified": last,
                    "createdAt": meta["createdAt"],
                    "downloads": 0,
                    "likes": 0,
                    "tags": [],
                }
            )
        self._send_json(out[:limit] if limit > 0 else out)

    def _repo_info(self, repo_type: str, repo_id: str, revision: str, query: dict[str, list[str]]) -> None:
        repo = self._readable(repo_type, repo_id)
        sha = repo.resolve(revision)
        commit = repo.commit(sha)
        meta = repo.meta()
        blobs = _truthy(query.get("blobs"))
        siblings = [
            {"rfilename": path, **({"size": size, "blobId": oid} if blobs else {})}
            for path, (oid, size) in commit["files"].items()
        ]
        info: dict[str, Any] = {
            "_id": meta["id"],
            "id": repo_id,
            "author": repo_id.split("/")[0],
            "sha": sha,
            "lastModified": commit["date"],
            "createdAt": meta["createdAt"],
            "private": meta.get("private", False),
            "gated": meta.get("gated", False),
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "siblings": siblings,
            "usedStorage": sum(size for _, size in commit["files"].values()),
        }
        if repo_type == "model":
            info["modelId"] = repo_id
            if config := self._config_summary(repo, commit):
                info["config"] = config
        if repo_type == "space" and meta.get("sdk"):
            info["sdk"] = meta["sdk"]
        self._send_json(info)

    @staticmethod
    def _config_summary(repo: _Repo, commit: dict[str, Any]) -> dict[str, Any] | None:
        # The real Hub exposes a few config.json keys in model_info; tools use them to guess the model family.
        entry = commit["files"].get("config.json")
        if entry is None or entry[1] > 1_000_000:
            return None
        try:
            config = json.loads(repo.blob_path(entry[0]).read_bytes())
        except ValueError:
            return None
        if not isinstance(config, dict):
            return None
        return {k: config[k] for k in ("architectures", "model_type") if k in config}

    # -- files: listing ---------------------------------------------------------------------------------------

    def _entry(self, repo: _Repo, sha: str, files: dict[str, list[Any]], path: str, expand: bool) -> dict:
        if path in files:
            oid, size = files[path]
            entry: dict[str, Any] = {"type": "file", "oid": oid, "size": size, "path": path}
        else:
            entry = {"type": "directory", "oid": _tree_oid(files, path), "size": 0, "path": path}
        if expand:
            entry["lastCommit"] = self._last_change(repo, sha, path, entry["oid"], entry["type"] == "file")
        return entry

    @staticmethod
    def _last_change(repo: _Repo, sha: str, path: str, oid: str, is_file: bool) -> dict[str, str]:
        """The oldest commit, walking back from `sha`, since which `path` has had its current content."""
        found: dict[str, Any] | None = None
        for commit in repo.history(sha):
            files = commit["files"]
            current = (files.get(path) or [None])[0] if is_file else _tree_oid(files, path)
            if current != oid:
                break
            found = commit
        assert found is not None
        return {"id": found["id"], "title": found["title"], "date": found["date"]}

    def _tree(
        self, repo_type: str, repo_id: str, revision: str, path: str, query: dict[str, list[str]]
    ) -> None:
        repo = self._readable(repo_type, repo_id)
        sha = repo.resolve(revision)
        files = repo.commit(sha)["files"]
        recursive, expand = _truthy(query.get("recursive")), _truthy(query.get("expand"))
        path = path.strip("/")
        prefix = f"{path}/" if path else ""
        if path and not any(p.startswith(prefix) for p in files):
            raise HubError(404, f"Folder '{path}' not found at revision '{revision}'", code="EntryNotFound")
        dirs: dict[str, None] = {}
        leaves: list[str] = []
        for file_path in files:
            if not file_path.startswith(prefix):
                continue
            segments = file_path[len(prefix) :].split("/")
            if recursive:
                for i in range(1, len(segments)):
                    dirs.setdefault(prefix + "/".join(segments[:i]))
                leaves.append(file_path)
            elif len(segments) > 1:
                dirs.setdefault(prefix + segments[0])
            else:
                leaves.append(file_path)
        paths = sorted(dirs) + sorted(leaves)
        self._send_json([self._entry(repo, sha, files, p, expand) for p in paths])

    def _paths_info(self, repo_type: str, repo_id: str, revision: str) -> None:
        repo = self._readable(repo_type, repo_id)
        sha = repo.resolve(revision)
        files = repo.commit(sha)["files"]
        if "json" in self.headers.get("Content-Type", ""):
            body = self._json_body()
            paths, expand = body.get("paths", []), bool(body.get("expand"))
        else:
            form = parse_qs(self._body.decode(), keep_blank_values=True)
            paths, expand = form.get("paths", []), _truthy(form.get("expand"))
        out = []
        for raw in paths:
            path = raw.strip("/")
            if path in files or any(p.startswith(path + "/") for p in files):
                out.append(self._entry(repo, sha, files, path, expand))
        self._send_json(out)

    def _refs(self, repo_type: str, repo_id: str, query: dict[str, list[str]]) -> None:
        refs = self._readable(repo_type, repo_id).refs()

        def fmt(kind: str, name: str, sha: str) -> dict[str, str]:
            return {"name": name, "ref": f"refs/{kind}/{name}", "targetCommit": sha}

        out: dict[str, Any] = {
            "branches": [fmt("heads", n, s) for n, s in sorted(refs["branches"].items())],
            "converts": [],
            "tags": [fmt("tags", n, s) for n, s in sorted(refs["tags"].items())],
        }
        if _truthy(query.get("include_prs")):
            out["pullRequests"] = [
                fmt("pr", n, s) for n, s in sorted(refs["prs"].items(), key=lambda x: int(x[0]))
            ]
        self._send_json(out)

    def _commits(self, repo_type: str, repo_id: str, revision: str) -> None:
        repo = self._readable(repo_type, repo_id)
        self._send_json(
            [
                {
                    "id": c["id"],
                    "title": c["title"],
                    "message": c["message"],
                    "authors": [{"user": a} for a in c["authors"]],
                    "date": c["date"],
                }
                for c in repo.history(repo.resolve(revision))
            ]
        )

    # -- files: download --------------------------------------------------------------------------------------

    def _resolve_file(self, repo_type: str, repo_id: str, revision: str, path: str) -> None:
        repo = self._readable(repo_type, repo_id)
        sha = repo.resolve(revision)
        files = repo.commit(sha)["files"]
        if path not in files:
            # X-Repo-Commit lets the client cache the miss (`.no_exist`) for this exact commit.
            raise HubError(
                404, f"Entry not found: '{path}' at '{revision}'", "EntryNotFound", {"X-Repo-Commit": sha}
            )
        oid, size = files[path]
        blob = repo.blob_path(oid)
        # No redirect and no X-Xet-* / Link headers: the file is served inline, so the client never goes to
        # a CDN, LFS or Xet. The ETag is the git blob id, exactly like the real Hub for non-LFS files.
        headers = {
            "X-Repo-Commit": sha,
            "ETag": f'"{oid}"',
            "Accept-Ranges": "bytes",
            "Content-Type": mimetypes.guess_type(path)[0] or "application/octet-stream",
            "Content-Disposition": _content_disposition(PurePosixPath(path).name),
        }
        start, end, status = 0, size - 1, 200
        range_header = self.headers.get("Range")
        if range_header and self._method == "GET":
            parsed = self._parse_range(range_header, size)
            if parsed is None:
                raise HubError(
                    416, "Requested range not satisfiable", headers={"Content-Range": f"bytes */{size}"}
                )
            start, end = parsed
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        length = max(0, end - start + 1)
        headers["Content-Length"] = str(length)
        self._send(status, b"", headers)
        if self._method == "HEAD" or length == 0:
            return
        with open(blob, "rb") as fh:
            fh.seek(start)
            remaining = length
            while remaining > 0:
                chunk = fh.read(min(1 << 20, remaining))
                if not chunk:
                    break
                self.wfile.write(chunk)
                remaining -= len(chunk)

    @staticmethod
    def _parse_range(header: str, size: int) -> tuple[int, int] | None:
        m = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", header)
        if m is None or (not m[1] and not m[2]):
            return None
        if not m[1]:
            start, end = max(0, size - int(m[2])), size - 1
        else:
            start = int(m[1])
            end = min(int(m[2]), size - 1) if m[2] else size - 1
        if start >= size or start > end:
            return None
        return start, end

    # -- files: upload ----------------------------------------------------------------------------------------

    def _preupload(self, repo_type: str, repo_id: str, revision: str) -> None:
        repo = self._writable(repo_type, repo_id)
        files = repo.commit(repo.resolve(revision))["files"]
        body = self._json_body()
        # Every file is "regular": its bytes come inline in the commit payload, so the client never needs the
        # LFS batch API or Xet. `oid` lets the client drop files that did not change.
        self._send_json(
            {
                "files": [
                    {
                        "path": f["path"],
                        "uploadMode": "regular",
                        "shouldIgnore": False,
                        "oid": (files.get(str(f["path"]).lstrip("/")) or [None])[0],
                    }
                    for f in body.get("files", [])
                ]
            }
        )

    def _commit(self, repo_type: str, repo_id: str, revision: str, create_pr: bool) -> None:
        repo = self._writable(repo_type, repo_id)
        header: dict[str, Any] = {}
        operations: list[tuple[str, dict[str, Any]]] = []
        for line in self._body.splitlines():
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except ValueError as exc:
                raise HubError(400, f"Invalid NDJSON line in commit payload: {exc}") from exc
            if item.get("key") == "header":
                header = item.get("value") or {}
            else:
                operations.append((str(item.get("key")), item.get("value") or {}))
        title = str(header.get("summary") or "").strip()
        if not title:
            raise HubError(400, "Commit summary (commit message) is required")

        store = self.server.store
        with store.lock:
            refs = repo.refs()
            if create_pr:
                base = repo.resolve(revision)
            else:
                kind, name = self._branch_ref(refs, revision)
                base = refs[kind][name]
            parent = header.get("parentCommit")
            if parent and not base.startswith(str(parent).lower()):
                raise HubError(412, f"A commit has happened since {parent}: head of '{revision}' is {base}")
            files = dict(repo.commit(base)["files"])
            for key, value in operations:
                self._apply_operation(repo, files, key, value)
            sha = repo.write_commit([base], files, title, str(header.get("description") or ""), DEFAULT_USER)
            result: dict[str, Any] = {
                "success": True,
                "commitOid": sha,
                "commitUrl": f"{self._repo_url(repo_type, repo_id)}/commit/{sha}",
                "hookOutput": "",
            }
            if create_pr:
                num = str(max((int(n) for n in refs["prs"]), default=0) + 1)
                refs["prs"][num] = sha
                result["pullRequestUrl"] = f"{self._repo_url(repo_type, repo_id)}/discussions/{num}"
            else:
                refs[kind][name] = sha
            repo.save_refs(refs)
        self._send_json(result)

    @staticmethod
    def _branch_ref(refs: dict[str, dict[str, str]], revision: str) -> tuple[str, str]:
        name = revision[len("refs/heads/") :] if revision.startswith("refs/heads/") else revision
        if name in refs["branches"]:
            return "branches", name
        if (m := _PR_REF_RE.fullmatch(revision)) and m[1] in refs["prs"]:
            return "prs", m[1]
        if name in refs["tags"] or _SHA_PREFIX_RE.fullmatch(name):
            raise HubError(400, f"Cannot commit to '{revision}': not a branch")
        raise HubError(404, f"Invalid rev id: {revision}", code="RevisionNotFound")

    @staticmethod
    def _apply_operation(repo: _Repo, files: dict[str, list[Any]], key: str, value: dict[str, Any]) -> None:
        path = _clean_repo_path(str(value.get("path", "")))
        if key == "file":
            content = value.get("content", "")
            if value.get("encoding", "").lower() == "base64":
                try:
                    data = base64.b64decode(content, validate=True)
                except (binascii.Error, ValueError) as exc:
                    raise HubError(400, f"Invalid base64 content for '{path}'") from exc
            else:
                data = str(content).encode()
            files[path] = [repo.put_blob(data), len(data)]
        elif key == "deletedFile":
            if files.pop(path, None) is None:
                raise HubError(404, f"A file with this name doesn't exist: {path}", code="EntryNotFound")
        elif key == "deletedFolder":
            doomed = [p for p in files if p.startswith(path.rstrip("/") + "/")]
            if not doomed:
                raise HubError(404, f"A folder with this name doesn't exist: {path}", code="EntryNotFound")
            for p in doomed:
                del files[p]
        elif key == "lfsFile":
            # Unreachable with this server's preupload answers; refuse rather than store a dangling pointer.
            raise HubError(
                400, f"LFS is not supported by the local Hub ('{path}'); upload it as a regular file"
            )
        else:
            raise HubError(400, f"Unknown commit operation: {key!r}")

    # -- refs -----------------------------------------------------------------------------------------------

    def _branch(self, method: str, repo_type: str, repo_id: str, branch: str) -> None:
        repo = self._writable(repo_type, repo_id)
        body = self._json_body()
        with self.server.store.lock:
            refs = repo.refs()
            if method == "POST":
                if branch in refs["branches"]:
                    raise HubError(409, f"Reference already exists: refs/heads/{branch}")
                _check_ref_name("branch", branch)
                start = body.get("startingPoint") or DEFAULT_BRANCH
                refs["branches"][branch] = repo.resolve(str(start))
            else:
                if branch == DEFAULT_BRANCH:
                    raise HubError(403, "Cannot delete the default branch")
                if refs["branches"].pop(branch, None) is None:
                    raise HubError(404, f"Invalid rev id: {branch}", code="RevisionNotFound")
            repo.save_refs(refs)
        self._send_json({})

    def _tag(self, method: str, repo_type: str, repo_id: str, arg: str) -> None:
        repo = self._writable(repo_type, repo_id)
        body = self._json_body()
        with self.server.store.lock:
            refs = repo.refs()
            if method == "POST":
                tag = str(body.get("tag", ""))
                _check_ref_name("tag", tag)
                if tag in refs["tags"]:
                    raise HubError(409, f"Tag already exists: {tag}")
                refs["tags"][tag] = repo.resolve(arg)
            elif refs["tags"].pop(arg, None) is None:
                raise HubError(404, f"Invalid rev id: {arg}", code="RevisionNotFound")
            repo.save_refs(refs)
        self._send_json({})


class LocalHub:
    """A Hugging Face Hub look-alike served over HTTP from a folder on disk.

    Args:
        root: folder holding the repos (created if missing; reusing it keeps earlier repos).
        host: interface to bind (IPv4).
        port: port to bind; 0 picks a free one.
        tokens: accepted bearer tokens. ``None`` accepts any token. Writes and reads of private repos need an
            accepted token; anonymous reads of public repos are always allowed.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        host: str = "127.0.0.1",
        port: int = 0,
        tokens: set[str] | None = None,
    ) -> None:
        self.root = Path(root)
        self.host = host
        self.port = port
        self.tokens = frozenset(tokens) if tokens is not None else None
        self._server: _HubHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL of the running server, e.g. ``http://127.0.0.1:54321`` (use as ``HF_ENDPOINT``)."""
        if self._server is None:
            raise RuntimeError("LocalHub is not started: call start() first")
        host, port = self._server.server_address[:2]
        # A wildcard bind is not a connectable address.
        if host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        return f"http://{host}:{port}"

    @property
    def requests(self) -> list[tuple[str, str]]:
        """``(method, path)`` of every request served so far, e.g. to assert that nothing hit the Hub."""
        return list(self._server.request_log) if self._server is not None else []

    def start(self) -> LocalHub:
        """Bind and serve in a daemon thread; returns self."""
        if self._server is not None:
            return self
        self.root.mkdir(parents=True, exist_ok=True)
        self._server = _HubHTTPServer((self.host, self.port), _Store(self.root), self.tokens)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="local-hub", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and drop open keep-alive connections (clients reconnect and fail cleanly)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        with server.connections_lock:
            connections = list(server.open_connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> LocalHub:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.url if self._server is not None else "stopped"
        return f"LocalHub(root={str(self.root)!r}, {where})"


def point_hf_at(url: str, *, set_env: bool = True) -> Callable[[], None]:
    """Make huggingface_hub, transformers, peft (and datasets, if imported) use `url` as the Hub endpoint.

    ``HF_ENDPOINT`` is read once, at import time, into several module globals, so changing the environment
    variable in a running process is not enough. This patches:

    - ``huggingface_hub.constants.ENDPOINT`` (every ``HfApi()`` and most helpers default to it),
    - ``huggingface_hub.constants.HUGGINGFACE_CO_URL_TEMPLATE`` (``hf_hub_url``, hence ``hf_hub_download``),
    - ``huggingface_hub.constants.HF_URL_HOSTS`` and ``huggingface_hub.utils._http._HUB_ORIGINS`` (which hosts
      count as "the Hub" for URL parsing and for keeping the auth header on redirects),
    - ``huggingface_hub.hf_api.api.endpoint`` (the module-level ``HfApi`` behind ``huggingface_hub.create_repo``,
      ``upload_folder``, ``model_info``, ``file_exists``... which peft uses),
    - ``transformers.utils.hub._hf_api.endpoint`` (transformers' cached ``HfApi``, if already created),
    - ``datasets.config.HF_ENDPOINT`` / ``HUB_DATASETS_URL`` (if datasets is imported),
    - ``os.environ["HF_ENDPOINT"]`` for subprocesses and libraries imported later (unless ``set_env=False``).

    Returns a function that undoes all of it.
    """
    import huggingface_hub.constants as hf_constants
    import huggingface_hub.hf_api as hf_api_module

    url = url.rstrip("/")
    original_endpoint = hf_constants.ENDPOINT
    undo: list[Callable[[], None]] = []

    def patch(obj: object, attr: str, value: object) -> None:
        if not hasattr(obj, attr):
            return  # a different library version without this global: nothing to patch
        old = getattr(obj, attr)
        setattr(obj, attr, value)
        undo.append(lambda: setattr(obj, attr, old))

    host = (urlsplit(url).hostname or "").lower()
    patch(hf_constants, "ENDPOINT", url)
    patch(hf_constants, "HUGGINGFACE_CO_URL_TEMPLATE", url + "/{repo_id}/resolve/{revision}/{filename}")
    if host:
        patch(hf_constants, "HF_URL_HOSTS", frozenset(hf_constants.HF_URL_HOSTS) | {host})
    http_module = sys.modules.get("huggingface_hub.utils._http")
    if http_module is not None and hasattr(http_module, "_url_origin"):
        patch(
            http_module, "_HUB_ORIGINS", frozenset(http_module._HUB_ORIGINS) | {http_module._url_origin(url)}
        )
    patch(hf_api_module.api, "endpoint", url)

    transformers_hub = sys.modules.get("transformers.utils.hub")
    if transformers_hub is not None and getattr(transformers_hub, "_hf_api", None) is not None:
        patch(transformers_hub._hf_api, "endpoint", url)

    datasets_config = sys.modules.get("datasets.config")
    if datasets_config is not None:
        patch(datasets_config, "HF_ENDPOINT", url)
        patch(datasets_config, "HUB_DATASETS_URL", url + "/datasets/{repo_id}/resolve/{revision}/{path}")

    _clear_hf_filesystem_cache()

    if set_env:
        old_env = os.environ.get("HF_ENDPOINT")
        os.environ["HF_ENDPOINT"] = url

        def restore_env() -> None:
            if old_env is None:
                os.environ.pop("HF_ENDPOINT", None)
            else:
                os.environ["HF_ENDPOINT"] = old_env

        undo.append(restore_env)

    def restore() -> None:
        while undo:
            undo.pop()()
        # Objects created while patched (transformers' lazily built HfApi, datasets imported meanwhile)
        # captured the local URL: point them back too.
        transformers_hub = sys.modules.get("transformers.utils.hub")
        cached_api = getattr(transformers_hub, "_hf_api", None) if transformers_hub is not None else None
        if cached_api is not None and cached_api.endpoint == url:
            cached_api.endpoint = original_endpoint
        datasets_config = sys.modules.get("datasets.config")
        if datasets_config is not None and getattr(datasets_config, "HF_ENDPOINT", None) == url:
            datasets_config.HF_ENDPOINT = original_endpoint
            datasets_config.HUB_DATASETS_URL = (
                original_endpoint + "/datasets/{repo_id}/resolve/{revision}/{path}"
            )
        _clear_hf_filesystem_cache()

    return restore


def _clear_hf_filesystem_cache() -> None:
    # fsspec caches HfFileSystem instances, each bound to the endpoint it was created with.
    fs_module = sys.modules.get("huggingface_hub.hf_file_system")
    if fs_module is not None and hasattr(fs_module.HfFileSystem, "clear_instance_cache"):
        fs_module.HfFileSystem.clear_instance_cache()


def main(argv: list[str] | None = None) -> None:
    """Run a LocalHub in the foreground: ``python -m simhub.testing.hub_server --root DIR --port N``."""
    parser = argparse.ArgumentParser(
        prog="python -m simhub.testing.hub_server",
        description="Serve a local, file-backed Hugging Face Hub look-alike (point HF_ENDPOINT at it).",
    )
    parser.add_argument("--root", required=True, help="folder holding the repos")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to bind (default: 0 = any free port)")
    parser.add_argument(
        "--token",
        dest="tokens",
        action="append",
        default=None,
        help="accepted bearer token (repeatable); without it any token is accepted",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(message)s")

    hub = LocalHub(
        args.root, host=args.host, port=args.port, tokens=set(args.tokens) if args.tokens else None
    )
    hub.start()
    auth = f"{len(hub.tokens)} accepted token(s)" if hub.tokens is not None else "any token accepted"
    print(f"Local Hub serving {hub.root.resolve()} at {hub.url} ({auth})", flush=True)
    print(f"  export HF_ENDPOINT={hub.url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        hub.stop()


if __name__ == "__main__":
    main()
