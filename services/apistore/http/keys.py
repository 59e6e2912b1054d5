"""What the application keeps for its handlers (`AppKey`s), in one place."""

from __future__ import annotations

import asyncio

from aiohttp import web

from drasim.apistore.core import ApiCore
from drasim.apistore.http import authn
from drasim.common.bus.client import Bus
from drasim.common.runtime_config import RuntimeConfig
from drasim.common.version import EffectiveVersion

CORE = web.AppKey("core", ApiCore)
BUS = web.AppKey("bus", Bus)
# Who may call, by bearer token; and who the request is (set by the authentication).
TOKENS = web.AppKey("tokens", authn.Tokens)
USER = web.RequestKey("user", authn.UserInfo)
# How often an idle watch that asked for bookmarks gets one (Kubernetes: about a minute).
BOOKMARK_INTERVAL = web.AppKey("bookmark_interval", float)
# Open watch handlers, cancelled at shutdown: a watch never ends on its own.
WATCHES = web.AppKey("watches", set[asyncio.Task[object]])
# The release `/version` reports, and the one it emulates.
VERSION = web.AppKey("version", EffectiveVersion)
# The versions served besides the stored ones (`--runtime-config`).
RUNTIME_CONFIG = web.AppKey("runtime_config", RuntimeConfig)
# What the request's path names, once `options.target` has read it.
TARGET = web.RequestKey("target", object)
