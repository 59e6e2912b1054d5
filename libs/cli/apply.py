"""`drasim apply -f FILE|DIR|-`: create or update every object of multi-document YAML."""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import yaml

from drasim.cli import session
from drasim.common import codec, errors
from drasim.common.api import registry
from drasim.common.client import ApiClient


class ManifestError(Exception):
    """A document that cannot be applied; the message names file, document and field."""


@dataclass
class Document:
    source: str  # file name, or "-" for stdin
    index: int  # 1-based position in the file
    body: dict[str, Any]

    def where(self) -> str:
        return f"{self.source}: document {self.index}"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("apply", help="create or update objects from YAML files")
    p.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        help="a file, a directory of .yaml/.yml/.json files, or - for stdin",
    )
    p.add_argument("-n", "--namespace", default="", help="namespace for namespaced objects")
    p.set_defaults(func=run)


def read_documents(paths: list[str]) -> list[Document]:
    docs: list[Document] = []
    for path in paths:
        if path == "-":
            sources = [("-", sys.stdin.read())]
        elif Path(path).is_dir():
            files = sorted(
                p for p in Path(path).iterdir() if p.suffix in (".yaml", ".yml", ".json")
            )
            sources = [(str(f), f.read_text()) for f in files]
        else:
            try:
                sources = [(path, Path(path).read_text())]
            except OSError as exc:
                raise ManifestError(f"{path}: {exc.strerror}") from exc
        for name, text in sources:
            try:
                bodies = codec.load_yaml_documents(text)
            except yaml.YAMLError as exc:
                raise ManifestError(f"{name}: not valid YAML: {exc}") from exc
            for i, body in enumerate(bodies, 1):
                if not isinstance(body, dict):
                    raise ManifestError(f"{name}: document {i}: not a mapping")
                if body.get("kind", "").endswith("List") and isinstance(body.get("items"), list):
                    docs.extend(Document(name, i, item) for item in body["items"])
                else:
                    docs.append(Document(name, i, body))
    return docs


def decode(doc: Document) -> tuple[registry.ResourceInfo, Any]:
    """The document as a typed object; errors name the file, the document and the field."""
    for field in ("apiVersion", "kind"):
        if not doc.body.get(field):
            raise ManifestError(f"{doc.where()}: field {field}: Required value")
    try:
        info = registry.by_api_version_kind(doc.body["apiVersion"], doc.body["kind"])
    except errors.NotFound as exc:
        raise ManifestError(f"{doc.where()}: field kind: {exc.message}") from exc
    try:
        obj = codec.convert(doc.body, info.type)
    except msgspec.ValidationError as exc:
        problems = "; ".join(f"field {e.field}: {e.message}" for e in codec.decode_errors(exc))
        name = (doc.body.get("metadata") or {}).get("name", "")
        raise ManifestError(f"{doc.where()} ({info.kind} {name!r}): {problems}") from exc
    return info, obj


async def apply_one(api: ApiClient, info: registry.ResourceInfo, obj: Any, namespace: str) -> str:
    """Create, or update what exists (kubectl's created / configured / unchanged)."""
    if info.namespaced and not obj.metadata.namespace:
        obj.metadata.namespace = namespace or "default"
    if not obj.metadata.name:
        created = await api.create(obj)
        return f"{info.kind_and_group}/{created.metadata.name} created"
    try:
        await api.create(obj)
        return f"{info.kind_and_group}/{obj.metadata.name} created"
    except errors.AlreadyExists:
        pass
    for _ in range(5):
        current = await api.get(info.type, obj.metadata.name, namespace=obj.metadata.namespace)
        obj.metadata.resource_version = current.metadata.resource_version
        try:
            updated = await api.update(obj)
        except errors.Conflict:
            continue
        same = updated.metadata.resource_version == current.metadata.resource_version
        return f"{info.kind_and_group}/{obj.metadata.name} {'unchanged' if same else 'configured'}"
    what = f"{info.kind_and_group}/{obj.metadata.name}"
    raise errors.Conflict(f"{what}: kept changing while applying")


async def apply_documents(api: ApiClient, docs: list[Document], namespace: str) -> list[str]:
    decoded = [(doc, *decode(doc)) for doc in docs]  # refuse a bad file before writing any of it
    lines = []
    for doc, info, obj in decoded:
        try:
            lines.append(await apply_one(api, info, obj, namespace))
        except errors.Invalid as exc:
            raise ManifestError(f"{doc.where()}: {exc.message}") from exc
    return lines


def run(args: argparse.Namespace) -> int:
    try:
        docs = read_documents(args.filename)

        async def go() -> list[str]:
            async with session.connect(args) as api:
                return await apply_documents(api, docs, args.namespace)

        for line in asyncio.run(go()):
            print(line)
    except ManifestError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
