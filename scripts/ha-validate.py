#!/usr/bin/env python3
"""Validates Home Assistant MQTT discovery configs with Home Assistant's own schemas.

Reads `mosquitto_sub -v` output (one `topic payload` per line) from the files given, or
standard input. Every `<prefix>/<platform>/[<node>/]<object>/config` message is processed the
way Home Assistant's `mqtt/discovery.py` processes a discovery payload (JSON object,
abbreviations expanded, `~` substituted) and then validated with
`homeassistant.components.mqtt.<platform>.DISCOVERY_SCHEMA`. On top of the schema:

- a key the schema drops (discovery schemas remove unknown keys silently, so a misspelt key
  would pass) is an error, except the keys in NEWER_KEYS, which newer Home Assistant releases
  read and this one ignores;
- where the input also holds a message on the config's `state_topic`, `json_attributes_topic`
  or availability topic, the config's templates are rendered against it with Home Assistant's
  template engine and the result checked as the entity would use it (a number for a sensor
  with a `state_class`, one of the options for an enum, a date, `payload_on`/`payload_off`, a
  JSON object with an `event_type` from `event_types` for an event).

Empty payloads (removed configs; `(null)` in mosquitto_sub's output) are counted, not validated. Prints `ok <topic>` per valid
config and `REJECTED <topic>: <why>` per invalid one; exits 1 if any was rejected or no
config was found, 2 if Home Assistant cannot be imported.

Run it with the Python of the venv that scripts/install-deps.sh makes:
  ~/.cache/ampel/ha-venv-2024.3/bin/python scripts/ha-validate.py dump.txt
"""

import argparse
import asyncio
import datetime
import importlib
import json
import re
import sys
import tempfile

try:
    import voluptuous as vol
    from homeassistant.components.mqtt import abbreviations
    from homeassistant.components.mqtt.discovery import SUPPORTED_COMPONENTS, TOPIC_BASE
    from homeassistant.const import __version__ as HA_VERSION
    from homeassistant.core import HomeAssistant
    from homeassistant.helpers.template import Template
except ImportError as error:  # the venv is missing or broken
    print(f"cannot import Home Assistant ({error}); install it with scripts/install-deps.sh", file=sys.stderr)
    sys.exit(2)

# Read by Home Assistant releases after the one installed, ignored (dropped) by it:
# `options` of an enum sensor since 2024.9 (home-assistant/core#123248; before, an enum
# sensor takes any state), `default_entity_id` since 2025.10 (it replaced `object_id`).
NEWER_KEYS = {"options", "default_entity_id"}

# As discovery.py matches it: <platform>/[<node>/]<object>/config.
TOPIC_MATCHER = re.compile(r"(?P<component>\w+)/(?:(?P<node_id>[a-zA-Z0-9_-]+)/)?(?P<object_id>[a-zA-Z0-9_-]+)/config")


def expand(payload):
    """Home Assistant's own processing of a discovery payload before its schema sees it."""
    config = {abbreviations.ABBREVIATIONS.get(key, key): value for key, value in payload.items()}
    if isinstance(config.get("device"), dict):
        config["device"] = {abbreviations.DEVICE_ABBREVIATIONS.get(k, k): v for k, v in config["device"].items()}
    if isinstance(config.get("origin"), dict):
        config["origin"] = {abbreviations.ORIGIN_ABBREVIATIONS.get(k, k): v for k, v in config["origin"].items()}
    if "availability" in config:
        entries = config["availability"] if isinstance(config["availability"], list) else [config["availability"]]
        config["availability"] = [
            {abbreviations.ABBREVIATIONS.get(k, k): v for k, v in entry.items()} if isinstance(entry, dict) else entry
            for entry in entries
        ]
    if TOPIC_BASE in config:
        base = config.pop(TOPIC_BASE)
        for key, value in list(config.items()):
            if key.endswith("topic") and isinstance(value, str) and value:
                if value.startswith(TOPIC_BASE):
                    config[key] = base + value[1:]
                if value.endswith(TOPIC_BASE):
                    config[key] = value[:-1] + base
        for entry in config.get("availability") or []:
            topic = entry.get("topic") if isinstance(entry, dict) else None
            if isinstance(topic, str) and topic:
                if topic.startswith(TOPIC_BASE):
                    entry["topic"] = base + topic[1:]
                if topic.endswith(TOPIC_BASE):
                    entry["topic"] = topic[:-1] + base
    return config


# Templates render only with a Home Assistant instance (set by main, in its event loop).
HASS = None


def render(template, payload):
    """The template's result for `payload` as an MQTT entity computes it (`value`, `value_json`)."""
    variables = {"value": payload}
    try:
        variables["value_json"] = json.loads(payload)
    except ValueError:
        pass
    return str(Template(template, HASS).async_render(variables, parse_result=False))


def dropped_keys(config, validated, path=""):
    """Keys of `config` the schema removed (recursing into the device)."""
    missing = []
    for key, value in config.items():
        if key not in validated:
            missing.append(path + key)
        elif isinstance(value, dict) and isinstance(validated[key], dict):
            missing += dropped_keys(value, validated[key], path + key + ".")
    return missing


def check_rendering(platform, config, messages, options):
    """Problems found rendering the config's templates against the messages on its topics;
    `options` as the config gives them (the schema of a release before 2024.9 drops them)."""
    problems = []

    def sample(topic):
        return messages.get(topic) if topic else None

    state = sample(config.get("state_topic"))
    template = config.get("value_template")
    if state is not None:
        value = render(template.template, state) if template is not None else state
        if platform == "sensor":
            if config.get("state_class") is not None and value != "None":
                try:
                    float(value)
                except ValueError:
                    problems.append(f"state {value!r} is not a number, but the sensor has state_class {config['state_class']}")
            device_class = config.get("device_class")
            if device_class == "enum" and options is not None and value not in options:
                problems.append(f"state {value!r} is not one of the options {options}")
            if device_class == "date":
                try:
                    datetime.date.fromisoformat(value)
                except ValueError:
                    problems.append(f"state {value!r} is not a date")
        elif platform == "binary_sensor":
            if value not in (config["payload_on"], config["payload_off"]):
                problems.append(f"state {value!r} is neither payload_on {config['payload_on']!r} nor payload_off {config['payload_off']!r}")
        elif platform == "event":
            try:
                event = json.loads(value)
            except ValueError:
                event = None
            if not isinstance(event, dict) or "event_type" not in event:
                problems.append(f"event payload {value!r} is no JSON object with an event_type")
            elif event["event_type"] not in config["event_types"]:
                problems.append(f"event_type {event['event_type']!r} is not one of the event_types {config['event_types']}")
    attributes = sample(config.get("json_attributes_topic"))
    if attributes is not None and config.get("json_attributes_template") is not None:
        value = render(config["json_attributes_template"].template, attributes)
        try:
            if not isinstance(json.loads(value), dict):
                problems.append(f"attributes {value!r} are no JSON object")
        except ValueError:
            problems.append(f"attributes {value!r} are no JSON")
    for entry in config.get("availability") or []:
        message = sample(entry.get("topic"))
        if message is None:
            continue
        template = entry.get("value_template")
        value = render(template.template, message) if template is not None else message
        if value not in (entry.get("payload_available", "online"), entry.get("payload_not_available", "offline")):
            problems.append(f"availability {value!r} from {entry['topic']} is neither available nor not available")
    return problems


def validate(topic, payload, prefix, messages):
    """Problems with one discovery message (an empty list when Home Assistant takes it)."""
    match = TOPIC_MATCHER.fullmatch(topic[len(prefix) + 1:]) if topic.startswith(prefix + "/") else None
    if not match:
        return ["not a discovery topic Home Assistant accepts"]
    platform = match.group("component")
    if platform not in SUPPORTED_COMPONENTS:
        return [f"{platform} is no MQTT discovery platform of Home Assistant {HA_VERSION}"]
    try:
        payload = json.loads(payload)
    except ValueError as error:
        return [f"not JSON: {error}"]
    if not isinstance(payload, dict):
        return ["not a JSON object"]
    config = expand(payload)
    schema = importlib.import_module(f"homeassistant.components.mqtt.{platform}").DISCOVERY_SCHEMA
    try:
        validated = schema(json.loads(json.dumps(config)))
    except vol.Invalid as error:
        return [f"{platform} schema: {error}"]
    problems = [f"key {key} is unknown to the {platform} schema (dropped)" for key in dropped_keys(config, validated)
                if key not in NEWER_KEYS]
    try:
        problems += check_rendering(platform, validated, messages, config.get("options"))
    except Exception as error:  # a template that does not render is a rejection too
        problems.append(f"template: {type(error).__name__}: {error}")
    return problems


async def main():
    global HASS
    HASS = HomeAssistant(tempfile.mkdtemp(prefix="ha-validate-"))
    try:
        return run()
    finally:
        await HASS.async_stop(force=True)


def run():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dumps", nargs="*", help="mosquitto_sub -v output (default: standard input)")
    parser.add_argument("--prefix", default="homeassistant", help="the discovery prefix (default: homeassistant)")
    args = parser.parse_args()
    lines = []
    for name in args.dumps or ["-"]:
        with (sys.stdin if name == "-" else open(name, encoding="utf-8")) as source:
            lines += source.read().splitlines()
    configs = {}
    messages = {}
    removed = 0
    for line in lines:
        topic, _, payload = line.partition(" ")
        if topic.startswith(args.prefix + "/") and topic.endswith("/config"):
            # mosquitto_sub -v prints an empty payload as (null).
            if payload and payload != "(null)":
                configs[topic] = payload
            else:
                removed += 1
        elif topic:
            messages[topic] = payload
    rejected = 0
    for topic, payload in sorted(configs.items()):
        problems = validate(topic, payload, args.prefix, messages)
        if problems:
            rejected += 1
            for problem in problems:
                print(f"REJECTED {topic}: {problem}")
        else:
            print(f"ok {topic}")
    print(f"Home Assistant {HA_VERSION}: {len(configs) - rejected} of {len(configs)} discovery configs valid, "
          f"{rejected} rejected, {removed} empty (removed)", file=sys.stderr)
    if not configs:
        print("no discovery config in the input", file=sys.stderr)
        return 1
    return 1 if rejected else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
