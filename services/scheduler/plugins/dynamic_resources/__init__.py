"""DynamicResources, split by concern as upstream's `dynamicresources/` is:

- `class_cache`: which DeviceClass serves an extended resource name (spec §2);
- `extended`: the special claim for DRA-backed extended resources (spec §3.3, §3.5);
- `cel_env`: the CEL environment of device selectors;
- `allocator`: structured-parameters allocation on one node (spec §3.4, §3.7.2).
"""
