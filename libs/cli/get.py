"""`drasim get KIND [NAME] [-n NS | -A] [-l SELECTOR] [-o wide|yaml|json|name]`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

import yaml

from drasim.cli import session
from drasim.common import codec, tables
from drasim.common.api import registry


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("get", help="list objects, or show one")
    p.add_argument("kind", help="resource type: pods, po, nodes, resourceclaims, deviceclasses, …")
    p.add_argument("name", nargs="?", default="")
    add_namespace_options(p)
    p.add_argument("-l", "--selector", default="", help="label selector, e.g. app=web")
    p.add_argument("--field-selector", default="")
    p.add_argument("-o", "--output", default="", choices=["", "wide", "yaml", "json", "name"])
    p.set_defaults(func=run)


def add_namespace_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--namespace", default="")
    p.add_argument("-A", "--all-namespaces", action="store_true")


def to_yaml(obj: Any) -> str:
    return yaml.safe_dump(codec.to_builtins(obj), sort_keys=False, default_flow_style=False)


def format_objects(
    info: registry.ResourceInfo, objs: list[Any], output: str, *, all_namespaces: bool, single: bool
) -> str:
    if output == "name":
        return "\n".join(f"{info.kind_and_group}/{o.metadata.name}" for o in objs)
    if output in ("yaml", "json"):
        if single:
            body = codec.to_builtins(objs[0])
        else:
            body = {
                "apiVersion": "v1",
                "kind": "List",
                "items": [codec.to_builtins(o) for o in objs],
            }
        return (
            json.dumps(body, indent=4)
            if output == "json"
            else yaml.safe_dump(body, sort_keys=False)
        )
    if not objs:
        return ""
    header, body_rows = tables.rows(info.plural, objs, wide=output == "wide")
    namespaces = (
        [o.metadata.namespace for o in objs] if all_namespaces and info.namespaced else None
    )
    return tables.render(header, body_rows, namespace_column=namespaces)


def no_resources_found(info: registry.ResourceInfo, args: argparse.Namespace) -> str:
    """kubectl's note on an empty table, for stderr: the namespace named only when one was
    listed in."""
    if args.all_namespaces or not info.namespaced:
        return "No resources found"
    return f"No resources found in {args.namespace or 'default'} namespace."


def namespace_for(info: registry.ResourceInfo, args: argparse.Namespace) -> str:
    """The namespace a get lists in: none for cluster-scoped kinds and -A, else -n or default."""
    if args.all_namespaces or not info.namespaced:
        return ""
    return args.namespace or "default"


async def fetch(args: argparse.Namespace, info: registry.ResourceInfo) -> list[Any]:
    namespace = namespace_for(info, args)
    async with session.connect(args) as api:
        if args.name:
            return [await api.get(info.type, args.name, namespace=namespace)]
        items, _ = await api.list(
            info.type,
            namespace=namespace,
            label_selector=args.selector,
            field_selector=args.field_selector,
        )
        return items


def run(args: argparse.Namespace) -> int:
    info = registry.resolve(args.kind)
    objs = asyncio.run(fetch(args, info))
    text = format_objects(
        info, objs, args.output, all_namespaces=args.all_namespaces, single=bool(args.name)
    )
    if text:
        print(text.rstrip("\n"))
    elif not args.name and args.output in ("", "wide"):
        print(no_resources_found(info, args), file=sys.stderr)
    return 0
