"""Waiting for a standalone cluster's workers reads the master's JSON status page; a master that is up but not
yet serving that page is still starting, not broken."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from balancer.demo.cluster import HOST, StandaloneCluster


def test_a_master_answering_html_at_first_is_waited_for(tmp_path):
    answers = ["<!DOCTYPE html><html><body>Spark Master</body></html>"] * 2 + [
        json.dumps({"workers": [{"state": "ALIVE"}, {"state": "ALIVE"}]})
    ]
    served: list[str] = []

    class Master(BaseHTTPRequestHandler):
        def do_GET(self):
            body = answers[min(len(served), len(answers) - 1)].encode()
            served.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    with ThreadingHTTPServer((HOST, 0), Master) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        cluster = StandaloneCluster(tmp_path, workers=2, master_webui_port=server.server_address[1])
        cluster.wait_for_workers(timeout=30)
        server.shutdown()
    assert served == ["/json"] * 3
