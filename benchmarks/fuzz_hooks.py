"""Schemathesis hooks for benchmarks/fuzz_http.py, loaded by `st run` (SCHEMATHESIS_HOOKS).

They run inside the schemathesis process, not the apistore's: `after_call` writes every
request with its answer and time to the JSON-lines file `DRASIM_FUZZ_LOG` names, which
fuzz_http.py then judges (5xx, slow, 4xx that are no Status); `flatmap_path_parameters`
sends some requests to the objects fuzz_http.py created, so that reads, updates, patches
and deletes reach existing objects rather than answering 404 to random names.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import schemathesis
from hypothesis import strategies as st

# What fuzz_http.py created before the run: objects of this name in this namespace.
NAMESPACE = os.environ.get("DRASIM_FUZZ_NAMESPACE", "default")
NAME = os.environ.get("DRASIM_FUZZ_NAME", "fuzz")
# Bodies and answers are kept up to this many characters in the log.
KEEP = 2000

_lock = threading.Lock()


@schemathesis.hook
def flatmap_path_parameters(context: Any, path_parameters: dict[str, Any]) -> Any:
    """The generated parameters, or the same aimed at the existing namespace and object."""
    if not path_parameters:
        return st.just(path_parameters)
    existing = dict(path_parameters)
    if "namespace" in existing:
        existing["namespace"] = NAMESPACE
    in_namespace = dict(existing)
    if "name" in existing:
        existing["name"] = NAME
    return st.sampled_from([path_parameters, in_namespace, existing])


@schemathesis.hook
def after_call(context: Any, case: Any, response: Any) -> None:
    request = response.request
    body = request.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "backslashreplace")
    record = {
        "operation": f"{case.method.upper()} {case.operation.path}",
        "method": request.method,
        "path": request.path_url,
        "content_type": request.headers.get("Content-Type", ""),
        "body": (body or "")[:KEEP],
        "status": response.status_code,
        "elapsed": response.elapsed,
        "response_content_type": (response.headers.get("content-type") or [""])[0],
        # Whole when an error (a Status, judged by fuzz_http.py), else its start.
        "response": (
            response.content if response.status_code >= 400 else response.content[:KEEP]
        ).decode("utf-8", "backslashreplace"),
    }
    line = json.dumps(record) + "\n"
    with _lock, open(os.environ["DRASIM_FUZZ_LOG"], "a", encoding="utf-8") as log:
        log.write(line)
