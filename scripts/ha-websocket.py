#!/usr/bin/env python3
"""Sends one command over Home Assistant's websocket API and prints its result as JSON.

    ha-websocket.py <base url> <access token> <type> [<json of further fields>]

For what the REST API does not show, such as the entity registry (`config/entity_registry/list`:
each entity's unique id, platform and entity id). Runs in the Home Assistant venv, whose
aiohttp it uses. Exits 1 with the message when authentication or the command fails.
"""
import asyncio
import json
import sys

import aiohttp


async def command(base: str, token: str, kind: str, fields: dict) -> object:
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(base.rstrip("/") + "/api/websocket", timeout=10) as ws:
            hello = await ws.receive_json(timeout=10)
            if hello.get("type") != "auth_required":
                raise SystemExit(f"unexpected greeting: {hello}")
            await ws.send_json({"type": "auth", "access_token": token})
            auth = await ws.receive_json(timeout=10)
            if auth.get("type") != "auth_ok":
                raise SystemExit(f"authentication failed: {auth}")
            await ws.send_json({"id": 1, "type": kind, **fields})
            while True:
                answer = await ws.receive_json(timeout=30)
                # Only the answer to our command; nothing else is subscribed.
                if answer.get("id") == 1 and answer.get("type") == "result":
                    break
            if not answer.get("success"):
                raise SystemExit(f"{kind} failed: {answer.get('error')}")
            return answer.get("result")


def main() -> None:
    if len(sys.argv) not in (4, 5):
        raise SystemExit(__doc__)
    fields = json.loads(sys.argv[4]) if len(sys.argv) == 5 else {}
    result = asyncio.run(command(sys.argv[1], sys.argv[2], sys.argv[3], fields))
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
