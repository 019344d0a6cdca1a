#!/usr/bin/env python3
"""Move a node to another pool through the portal's API and wait for the result.

    PORTAL_URL=https://portal.example.com REQUESTER_TOKEN=gpp_… APPROVER_TOKEN=gpp_… \
        python3 move_node.py gpu-node-17 inference "more serving capacity for the launch"

Standard library only. The requester asks; someone else (the approver's token) approves;
a worker applies the change; this script polls until the move ends and exits 0 only if
it succeeded. Retries are safe: both POSTs carry an Idempotency-Key.
"""

import json
import os
import sys
import time
import urllib.error
import urllib.request
import uuid


def call(method, path, token, body=None, idempotency_key=None):
    request = urllib.request.Request(
        os.environ["PORTAL_URL"].rstrip("/") + path,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    if idempotency_key:
        request.add_header("Idempotency-Key", idempotency_key)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        problem = json.loads(error.read())["error"]  # the API's one error shape
        sys.exit(f"{method} {path}: {error.code} {problem['code']}: {problem['message']}")


def main():
    node, destination, reason = sys.argv[1], sys.argv[2], sys.argv[3]
    requester, approver = os.environ["REQUESTER_TOKEN"], os.environ["APPROVER_TOKEN"]
    key = str(uuid.uuid4())
    move = call(
        "POST",
        "/api/v1/moves/",
        requester,
        {"nodes": [node], "destination": destination, "reason": reason},
        idempotency_key=f"{key}-create",
    )
    print(f"move #{move['id']}: {move['state']}, will apply {move['items'][0]['planned_diff']}")
    call(
        "POST",
        f"/api/v1/moves/{move['id']}/approve/",
        approver,
        {"reason": "automation"},
        idempotency_key=f"{key}-approve",
    )
    deadline = time.monotonic() + float(os.environ.get("TIMEOUT_SECONDS", "300"))
    while move["state"] in ("pending", "approved", "executing"):
        if time.monotonic() > deadline:
            sys.exit(f"move #{move['id']} still {move['state']}")
        time.sleep(1)
        move = call("GET", f"/api/v1/moves/{move['id']}/", requester)
    for item in move["items"]:
        print(f"{item['node']}: {item['state']} {item['error']}".rstrip())
    print(f"move #{move['id']}: {move['state']}")
    sys.exit(0 if move["state"] == "succeeded" else 1)


if __name__ == "__main__":
    main()
