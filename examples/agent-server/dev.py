"""Run this example's Agent Server (``langgraph dev``) on a local moto server, and stop
both together: Ctrl-C, or the server's own exit, ends the moto server too.

    python dev.py [--port 2024]

The port is the one asked for, or, when it is taken, a free one: said before the server
starts (``langgraph dev`` would move on its own, and only its log would say so). The
bucket and table are made at start (``LANGGRAPH_S3_SETUP=1``); what the server keeps of
its own (threads' records, runs) goes to ``.langgraph_api/`` in this folder, which git
ignores.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def port_or_free(wanted: int) -> int:
    """``wanted`` when nothing listens there, else a free port the system gives."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will bind
        try:
            s.bind(("127.0.0.1", wanted))
            return wanted
        except OSError:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])


def _stop(signum: int, frame: object) -> None:
    """SIGTERM ends the server and moto as Ctrl-C does."""
    raise KeyboardInterrupt


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--port", type=int, default=2024, help="the Agent Server's port")
    args = parser.parse_args()
    from langgraph_s3.testing.moto import DUMMY_ENV
    from langgraph_s3.testing.moto_child import moto_process

    langgraph = Path(sys.executable).parent / "langgraph"
    if not langgraph.exists():
        print(
            'the Agent Server is not installed here: pip install -e "../..[agent-server,demo]"',
            file=sys.stderr,
        )
        return 2
    signal.signal(signal.SIGTERM, _stop)
    port = port_or_free(args.port)
    if port != args.port:
        print(f"port {args.port} is taken: the Agent Server uses {port}", flush=True)
    with moto_process() as moto_url:
        env = {
            **os.environ,
            **DUMMY_ENV,
            "AWS_ENDPOINT_URL": moto_url,
            "LANGGRAPH_S3_URL": "s3://agent-example/dev?table=agent-example",
            "LANGGRAPH_S3_SETUP": "1",
        }
        print(f"moto at {moto_url}; the Agent Server at http://127.0.0.1:{port}", flush=True)
        server = subprocess.Popen(
            [str(langgraph), "dev", "--no-browser", "--no-reload", "--port", str(port)],
            cwd=HERE,
            env=env,
        )
        try:
            return server.wait()
        except KeyboardInterrupt:  # Ctrl-C (which reached the server too) or SIGTERM
            try:
                server.wait(timeout=5)
            except subprocess.TimeoutExpired:
                server.send_signal(signal.SIGINT)
                try:
                    server.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    server.kill()
                    server.wait()
            return 130
        finally:
            print("stopped the Agent Server and moto", flush=True)


if __name__ == "__main__":
    sys.exit(main())
