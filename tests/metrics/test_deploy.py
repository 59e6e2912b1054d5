"""deploy/compose.yaml serves every drasim service's /metrics on its own host port."""

from __future__ import annotations

import yaml

from tests.deploy.test_compose import COMPOSE


def test_every_drasim_service_publishes_its_metrics_port() -> None:
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    published: dict[str, str] = {}
    for name, service in services.items():
        if service.get("entrypoint", [])[:2] != ["python", "-m"]:
            continue
        command = service["command"]
        port = command[command.index("--metrics-port") + 1]
        assert command[command.index("--metrics-host") + 1] == "0.0.0.0", name
        (host_port,) = [p.split(":")[0] for p in service["ports"] if p.endswith(f":{port}")]
        published[name] = host_port
    assert published.keys() == {"apistore", "controllers", "scheduler", "kubelet-0", "kubelet-1"}
    assert len(set(published.values())) == len(published)
