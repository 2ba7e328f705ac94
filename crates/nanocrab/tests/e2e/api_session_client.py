"""Asks nanocrab's OpenAI-compatible API twice without `user` (as most OpenAI clients do),
then once as `bob`, with the official OpenAI Python client.

Usage: api_session_client.py BASE_URL. Prints the three answers as a JSON list.
"""

import json
import sys

import openai

client = openai.OpenAI(base_url=sys.argv[1], api_key="unused-on-loopback", max_retries=0)
answers = []
for user, question in [(None, "first question"), (None, "second question"), ("bob", "bob's question")]:
    extra = {"user": user} if user else {}
    reply = client.chat.completions.create(
        model="nanocrab",
        messages=[{"role": "user", "content": question}],
        **extra,
    )
    answers.append(reply.choices[0].message.content)
print(json.dumps(answers))
