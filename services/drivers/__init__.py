"""Driver shims a kubelet runs per node: the DRA driver (`dra_driver`, API in `dra_api`) and
the device plugin (`device_plugin`), over an emulated hardware probe (`probe`).
"""
