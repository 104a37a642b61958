"""A local stand-in for vLLM's /metrics endpoint whose counters move between scrapes, and that can
be told to fail or to answer slowly."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType


class MetricsServer:
    """A local stand-in for vLLM's /metrics whose counters move between scrapes."""

    def __init__(self) -> None:
        self.hits = 0
        self.mode = "ok"  # ok | error | slow
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                if server.mode == "slow":
                    time.sleep(1.0)
                if server.mode == "error" or self.path != "/metrics":
                    self.send_response(500)
                    self.end_headers()
                    return
                server.hits += 1
                n = server.hits
                body = (
                    f'vllm:kv_cache_usage_perc{{engine="0",model_name="tiny"}} {min(1, n / 10)}\n'
                    f'vllm:num_requests_running{{engine="0",model_name="tiny"}} {n % 4}\n'
                    f'vllm:num_requests_waiting{{engine="0",model_name="tiny"}} {n % 3}\n'
                    f'vllm:num_preemptions_total{{engine="0",model_name="tiny"}} {2 * n}\n'
                    f'vllm:prefix_cache_queries_total{{engine="0",model_name="tiny"}} {100 * n}\n'
                    f'vllm:prefix_cache_hits_total{{engine="0",model_name="tiny"}} {25 * n}\n'
                    f'vllm:generation_tokens_total{{engine="0",model_name="tiny"}} {16 * n}\n'
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
