"""Approves a call over nanocrab's HTTP API while a chat completion waits for it.

Usage: approval_client.py BASE_URL TOKEN ANSWER. Starts a chat completion (the official OpenAI
client) in a thread, polls GET /v1/approvals until one is waiting, answers it with
POST /v1/approvals/{id}, and prints one JSON object: what was pending, the answer's status and
the completion's text.
"""

import json
import sys
import threading
import time
import urllib.request

import openai

base_url, token, answer = sys.argv[1], sys.argv[2], sys.argv[3]
client = openai.OpenAI(base_url=base_url + "/v1", api_key=token, max_retries=0)
result = {}


def complete():
    reply = client.chat.completions.create(
        model="nanocrab",
        user="bob",
        messages=[{"role": "user", "content": "make the file"}],
    )
    result["content"] = reply.choices[0].message.content


def call(method, path, body=None):
    request = urllib.request.Request(
        base_url + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, json.loads(response.read())


worker = threading.Thread(target=complete)
worker.start()
deadline = time.time() + 20
pending = []
while time.time() < deadline and not pending:
    _, listed = call("GET", "/v1/approvals")
    pending = listed["data"]
    time.sleep(0.05)
status, _ = call("POST", "/v1/approvals/" + pending[0]["id"], {"answer": answer})
worker.join(20)
print(json.dumps({"pending": pending, "answer_status": status, "content": result.get("content")}))
