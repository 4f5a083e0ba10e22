#!/usr/bin/env python3
"""Validates OwnTracks messages against the OwnTracks JSON schema (message.schema.json here).

Usage: validate.py SCHEMA FILE...   (each FILE one JSON message)
Prints one JSON object per line, {"file": ..., "errors": [...]}; exits 0 when every file is valid.

Two passes, both decided by the schema file:
- the schema as it is (Draft 2020-12: `_type`, and the members each type requires);
- every member of the message that the schema defines under `$defs` against that definition.
  The schema's per-type rules only list required members, so on their own they would take
  `"acc": 6.5` or `"event": "arrive"` in a transition; the apps read `acc` as an integer and
  `event` as enter or leave, which is what `$defs` says.
Needs python3-jsonschema (scripts/install-deps.sh).
"""
import json
import sys

from jsonschema import Draft202012Validator


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        schema = json.load(f)
    defs = schema.get("$defs", {})
    whole = Draft202012Validator(schema)
    # Each `$defs` entry reached through a reference, so its own references resolve in the schema.
    members = Draft202012Validator({
        "$schema": schema["$schema"], "$defs": defs, "type": "object",
        "properties": {name: {"$ref": f"#/$defs/{name}"} for name in defs},
    })
    ok = True
    for path in sys.argv[2:]:
        with open(path, encoding="utf-8") as f:
            message = json.load(f)
        errors = [e.message for e in whole.iter_errors(message)]
        errors += [f"{'/'.join(map(str, e.path))}: {e.message}" for e in members.iter_errors(message)]
        ok = ok and not errors
        print(json.dumps({"file": path, "errors": errors}))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
