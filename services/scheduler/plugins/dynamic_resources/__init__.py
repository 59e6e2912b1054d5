"""DynamicResources, split by concern as upstream's `dynamicresources/` is:

- `plugin`: the plugin, one method per extension point;
- `claims`: the pod's user claims, found, checked and written;
- `extended`: the extended-resource path, the special claim (upstream
  `extendeddynamicresources.go`), opening with
  a map of what each extension point does for it;
- `state`: what one attempt keeps in the CycleState;
- `queueing_hints`: the events that may requeue a rejected pod, and their hints;
- `pools`: the devices each node can reach, from the ResourceSlices;
- `allocator`: structured-parameters allocation on one node (upstream
  `staging/src/k8s.io/dynamic-resource-allocation/structured`);
- `cel_env`: the CEL environment of device selectors.
"""
