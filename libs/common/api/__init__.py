"""API types, one module per API group (`meta_v1`, `core_v1`, `apps_v1`, `policy_v1`,
`coordination_v1`, `scheduling_v1`, `rbac_v1`, `resource_v1`), the resource registry
(`registry`), defaulting (`defaults`), validation (`validation`) and request math
(`resources`).

Import the modules (`from drasim.common.api import core_v1`), so that every call site says
where a type lives.
"""
