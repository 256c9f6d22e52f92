#!/usr/bin/env python3
"""A webhook receiver and a guard for kerneld, on the Python standard library.

    KERNELD_WEBHOOK_SECRET=whsec_... python3 examples/hooks/receiver.py [port]

POST /webhook prints each delivery whose Standard Webhooks signature
(webhook-id, webhook-timestamp, webhook-signature: v1,<base64 HMAC-SHA256
of "id.timestamp.body">) verifies, and answers 204; a forged or stale one
gets 401. POST /guard is an agent's guard: it denies a tool call whose
arguments mention "secret", asks a person about memory_delete, and allows
everything else (and every run). Both check the signature with the same
secret.
"""
import base64
import hashlib
import hmac
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET = os.environ["KERNELD_WEBHOOK_SECRET"]
KEY = base64.b64decode(SECRET.removeprefix("whsec_"))
TOLERANCE = 5 * 60  # seconds a timestamp may be off


def verified(headers, body):
    msg_id, ts = headers.get("webhook-id", ""), headers.get("webhook-timestamp", "")
    if not ts.isdigit() or abs(time.time() - int(ts)) > TOLERANCE:
        return False
    mac = hmac.new(KEY, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()
    want = base64.b64encode(mac).decode()
    return any(
        hmac.compare_digest(sig.removeprefix("v1,"), want)
        for sig in headers.get("webhook-signature", "").split()
        if sig.startswith("v1,")
    )


def guard(request):
    call = request.get("tool_call")
    if call is None:  # before_run
        return {"decision": "allow"}
    if "secret" in json.dumps(call["arguments"]).lower():
        return {"decision": "deny", "reason": "secrets stay out of memory"}
    if call["name"] == "memory_delete":
        return {"decision": "ask", "reason": "deleting needs a person"}
    return {"decision": "allow"}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if not verified(self.headers, body):
            self.send_response(401)
            self.end_headers()
            return
        payload = json.loads(body)
        if self.path == "/guard":
            answer = json.dumps(guard(payload)).encode()
            print("guard", payload["type"], payload.get("tool_call", {}).get("name", ""), answer.decode(), flush=True)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)
            return
        print("webhook", self.headers["webhook-id"], payload["type"], json.dumps(payload["data"]), flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass  # one line per request above is enough


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 9000
    print(f"listening on http://127.0.0.1:{port}", flush=True)
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
