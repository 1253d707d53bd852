# A stand-in for `vllm serve` in tests of dic's P/D router: records every request it gets
# (path, headers, JSON body) as a line of JSON on stdout, and answers as a NIXL prefill or
# decode engine would, or as a broken one does. Prints its port first. Standard library only.
#
# Roles: prefill | decode | failing (400) | prefill-none (200 without kv_transfer_params) |
# hang (reads the request, never answers) | truncated (Content-Length longer than the body,
# then closes) | truncated-stream (two chunks of a stream, then closes). A second argument
# `quiet` records nothing (load tests).
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROLE = sys.argv[1]
QUIET = sys.argv[2:] == ["quiet"]


class Fake(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body, content_type="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.send(200, b'{"object": "list", "data": [{"id": "chat"}]}')

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not QUIET and not self.path.endswith("/render"):
            print(json.dumps({"role": ROLE, "path": self.path,
                              "authorization": self.headers.get("Authorization"),
                              "request_id": self.headers.get("X-Request-Id"), "body": body}),
                  flush=True)
        if ROLE == "failing":
            return self.send(400, b'{"error": {"message": "prompt too long"}}')
        if ROLE == "hang":
            time.sleep(3600)
        if ROLE == "truncated":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b'{"choices": [')
            self.wfile.flush()
            self.close_connection = True
            return
        if ROLE in ("prefill", "prefill-none"):
            answer = {"choices": [{"text": "x"}]}
            if ROLE == "prefill":
                answer["kv_transfer_params"] = {
                    "do_remote_prefill": True, "do_remote_decode": False,
                    "remote_engine_id": "engine-7", "remote_block_ids": [3, 4, 5],
                    "remote_host": "10.1.2.3", "remote_port": 5600}
            return self.send(200, json.dumps(answer).encode())
        if not body.get("stream"):
            return self.send(200, b'{"choices": [{"text": "whole answer"}]}')
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(3):
            event = b"data: {\"token\": %d}\n\n" % i
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
            if ROLE == "truncated-stream" and i == 1:
                self.close_connection = True
                return
        done = b"data: [DONE]\n\n"
        self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the default 5 drops connections under a load test


server = Server(("127.0.0.1", 0), Fake)
print(json.dumps({"port": server.server_address[1]}), flush=True)
server.serve_forever()
