"""Every path the HTTP API serves, in one place.

Resource paths are matched whole (`/api/v1/{path}`, `/apis/{group}/{version}/{path}`) and
taken apart by `options.target`, following Kubernetes' request-info rules, so that
`namespaces/x/pods` and `namespaces/x/status` need no competing routes.
"""

from __future__ import annotations

from aiohttp import web

from drasim.apistore.http import authn, discovery, handlers, healthz, openapi, reviews


def setup_routes(app: web.Application) -> None:
    router = app.router
    router.add_get("/version", discovery.version)
    router.add_get("/version/", discovery.version)  # the Python client asks here
    router.add_get("/api", discovery.core_versions)
    router.add_get("/api/{version:v1}", discovery.resources)
    router.add_get("/apis", discovery.groups)
    router.add_get("/apis/{group}", discovery.group)
    router.add_get("/apis/{group}/{version}", discovery.resources)
    healthz.setup_routes(router)
    router.add_get("/openapi/v3", openapi.serve_index)
    router.add_get("/openapi/v3/{path:.+}", openapi.serve_document)
    router.add_post(authn.SELF_SUBJECT_REVIEW, reviews.self_subject_review)
    router.add_post(authn.SELF_SUBJECT_ACCESS_REVIEW, reviews.self_subject_access_review)
    router.add_post(authn.SELF_SUBJECT_RULES_REVIEW, reviews.self_subject_rules_review)
    for prefix in ("/api/{version:v1}", "/apis/{group}/{version}"):
        resource = router.add_resource(prefix + "/{path:.+}")
        resource.add_route("GET", handlers.get)
        resource.add_route("POST", handlers.post)
        resource.add_route("PUT", handlers.put)
        resource.add_route("PATCH", handlers.patch)
        resource.add_route("DELETE", handlers.delete)
