"""Drives nanocrab's OpenAI-compatible API with the official OpenAI Python client, unchanged.

Usage: openai_client.py BASE_URL TOKEN. Prints one JSON object with what each call returned;
the Rust test that runs this script checks it (and the requests the mock LLM saw).
"""

import json
import sys

import openai

base_url, token = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base_url, api_key=token, max_retries=0)
out = {}

out["models"] = [m.id for m in client.models.list().data]

first = client.chat.completions.create(
    model="nanocrab",
    user="alice",
    messages=[{"role": "user", "content": "first question"}],
)
out["first"] = {
    "content": first.choices[0].message.content,
    "finish_reason": first.choices[0].finish_reason,
    "total_tokens": first.usage.total_tokens,
}

stream = client.chat.completions.create(
    model="nanocrab",
    user="alice",
    messages=[{"role": "user", "content": "second question"}],
    stream=True,
    stream_options={"include_usage": True},
)
pieces, finish, usage = [], None, None
for chunk in stream:
    if chunk.usage is not None:
        usage = chunk.usage.total_tokens
    for choice in chunk.choices:
        if choice.delta.content:
            pieces.append(choice.delta.content)
        if choice.finish_reason:
            finish = choice.finish_reason
out["streamed"] = {"content": "".join(pieces), "finish_reason": finish, "total_tokens": usage}

override = client.chat.completions.create(
    model="openai/other-model",
    messages=[
        {"role": "system", "content": "Answer in one word."},
        {"role": "user", "content": "earlier question"},
        {"role": "assistant", "content": "earlier answer"},
        {"role": "user", "content": "third question"},
    ],
)
out["override"] = override.choices[0].message.content

try:
    openai.OpenAI(base_url=base_url, api_key="wrong-token", max_retries=0).models.list()
    out["wrong_token"] = "accepted"
except openai.AuthenticationError as err:
    out["wrong_token"] = err.status_code

try:
    client.chat.completions.create(
        model="no-such-agent", messages=[{"role": "user", "content": "hi"}]
    )
    out["unknown_model"] = "accepted"
except openai.NotFoundError as err:
    out["unknown_model"] = err.status_code

print(json.dumps(out))
