"""drasim: an event-sourced emulator of a Kubernetes control plane for KEP-5004."""
