#!/usr/bin/env python3
"""The official `openai` client against an OpenAI-compatible server: one deterministic chat
completion (temperature 0, a fixed seed), non-streaming and streaming. Prints one JSON line
with what came back, so a test can compare the gateway's answers with the engine's.

Usage: python3 scripts/llm/openai_check.py BASE_URL   (e.g. http://127.0.0.1:8000/v1)
"""

import json
import sys

from openai import OpenAI


def main():
    client = OpenAI(base_url=sys.argv[1], api_key="unused", max_retries=0, timeout=120)
    request = dict(
        model="smollm2",
        messages=[{"role": "user", "content": "Name three colours."}],
        max_tokens=16,
        temperature=0,
        seed=1,
    )
    whole = client.chat.completions.create(**request)
    pieces = []
    for chunk in client.chat.completions.create(stream=True, **request):
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
    print(json.dumps({
        "content": whole.choices[0].message.content,
        "finish_reason": whole.choices[0].finish_reason,
        "usage": whole.usage.model_dump() if whole.usage else None,
        "streamed": "".join(pieces),
        "chunks": len(pieces),
    }))


if __name__ == "__main__":
    main()
