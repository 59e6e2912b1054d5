"""`python -m drasim.apistore`: the apistore service process."""

from __future__ import annotations

import argparse
import os
import ssl
import sys
from pathlib import Path

from drasim.apistore.compaction import DEFAULT_COMPACTION_INTERVAL
from drasim.apistore.event_ttl import DEFAULT_EVENT_TTL
from drasim.apistore.http import authn
from drasim.apistore.server import ApiServer
from drasim.common import runtime_config, service
from drasim.common.duration import format_go_duration, non_negative_duration


def _apistore_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--http-port", type=int, help="serve the Kubernetes HTTP API here")
    parser.add_argument("--http-host", default="127.0.0.1")
    # A file, not the token itself, so that it does not show in the process list.
    parser.add_argument("--http-token-file", type=Path, help="the HTTP API's bearer token")
    parser.add_argument(
        "--token-auth-file",
        type=Path,
        help='users of the HTTP API, a line each: token,user,uid[,"group1,group2"]',
    )
    parser.add_argument("--tls-cert-file", type=Path, help="serve HTTPS with this certificate")
    parser.add_argument("--tls-private-key-file", type=Path)
    parser.add_argument(
        "--fault-injection",
        action="store_true",
        help="let admins install fault plans at run time (drasim.apistore.faults)",
    )
    runtime_config.add_flag(parser)
    parser.add_argument(
        "--event-ttl",
        type=float,
        default=DEFAULT_EVENT_TTL,
        help="seconds an Event is kept after its last write (0: forever)",
    )
    parser.add_argument(
        "--compaction-interval",
        type=non_negative_duration,
        default=os.environ.get("DRASIM_COMPACTION_INTERVAL")
        or format_go_duration(DEFAULT_COMPACTION_INTERVAL),
        metavar="DURATION",
        help="how often the event log and stream are compacted, keeping at least this much "
        "history (kube-apiserver's --etcd-compaction-interval; 0: never; "
        "env DRASIM_COMPACTION_INTERVAL)",
    )


def main(argv: list[str] | None = None) -> int:
    config, args = service.parse_args(
        "apistore", argv, _apistore_options, required=("--nats-url", "--database-url")
    )
    if args.http_port is not None and not (args.http_token_file or args.token_auth_file):
        print(
            "drasim-apistore: --http-port needs --http-token-file or --token-auth-file",
            file=sys.stderr,
        )
        return 2
    token = args.http_token_file.read_text().strip() if args.http_token_file else ""
    tokens = None
    if args.token_auth_file:
        try:
            tokens = authn.Tokens.from_file(args.token_auth_file)
            if token:
                tokens = authn.Tokens({**tokens.users, **authn.Tokens.single(token).users})
        except (OSError, ValueError) as exc:
            print(f"drasim-apistore: --token-auth-file: {exc}", file=sys.stderr)
            return 2
    try:
        served = runtime_config.parse(args.runtime_config)
    except runtime_config.RuntimeConfigError as exc:
        print(f"drasim-apistore: --runtime-config: {exc}", file=sys.stderr)
        return 2
    tls = None
    if args.tls_cert_file is not None:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(args.tls_cert_file, args.tls_private_key_file)

    async def serve() -> None:
        server = await ApiServer.start(
            nats_url=config.nats_url,
            nats_credentials=config.nats_credentials,
            database_url=config.database_url,
            prefix=config.prefix,
            fault_injection=args.fault_injection,
            http_port=args.http_port,
            http_host=args.http_host,
            http_token=token,
            http_tokens=tokens,
            http_tls=tls,
            event_ttl=args.event_ttl,
            compaction_interval=args.compaction_interval,
            features=args.feature_gates,
            runtime_config=served,
        )
        scheme = "https" if tls else "http"
        http = f" http={scheme}://{args.http_host}:{server.http.port}" if server.http else ""
        assert server.metrics is not None
        try:
            await service.serve_until_signal(
                args,
                f"apistore nats={config.nats_url} prefix={config.prefix}{http}",
                registry=server.metrics.registry,
                refresh=server.metrics.refresh,
            )
        finally:
            await server.stop()

    return service.run("apistore", serve, config.log_level)


if __name__ == "__main__":
    sys.exit(main())
