"""The root-safety audit of the scenario format, made structural: every string a scenario can hold is
either constrained (a pattern, a list of choices, an address) or named here with the reason it never
reaches a command, a path or a shell. A new free-text field fails this test until someone decides.
Then each constrained class of field is fed the same hostile values, which must all be refused."""
import pytest

from scenarios.spec.loader import ScenarioError, parse_scenario
from scenarios.spec.model import json_schema

# field -> why free text is safe there
FREE_TEXT = {
    ".description": "printed and stored, never run",
    ".variants[].description": "printed and stored, never run",
    ".topology.kind": "a discriminator: only the planners' names validate",
    ".expect[].check": "parsed by the project's own grammar (scenarios/spec/expect.py), never evaluated",
}
# words that run as argument lists (never through a shell), and only with --allow-commands
USER_COMMANDS = {".traffic.command.client[]", ".traffic.command.server[]", ".traffic.command.setup_client[][]",
                 ".traffic.command.setup_server[][]"}


def string_fields() -> dict[str, dict]:
    schema = json_schema()
    defs = schema.get("$defs", {})
    found: dict[str, list[dict]] = {}

    def walk(node, path: str, seen: frozenset) -> None:
        if not isinstance(node, dict):
            return
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            if name not in seen:
                walk(defs[name], path, seen | {name})
            return
        types = node.get("type") if isinstance(node.get("type"), list) else [node.get("type")]
        if "string" in types or "const" in node and isinstance(node["const"], str):
            found.setdefault(path, []).append(node)
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in node.get(key, []):
                walk(sub, path, seen)
        for k, v in node.get("properties", {}).items():
            walk(v, f"{path}.{k}", seen)
        walk(node.get("items"), path + "[]", seen)
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], path + "{}", seen)
    walk(schema, "", frozenset())
    return found


def constrained(node: dict) -> bool:
    return any(k in node for k in ("pattern", "enum", "const", "format"))


def test_every_string_field_is_constrained_or_known_to_be_safe():
    loose = {path for path, forms in string_fields().items() if not all(constrained(f) for f in forms)}
    assert loose - set(FREE_TEXT) - USER_COMMANDS == set(), "a new free-text field: constrain it or explain it"
    assert set(FREE_TEXT) | USER_COMMANDS <= set(string_fields()), "a field named here is gone"


HOSTILE = ["a;reboot", "$(reboot)", "`reboot`", "a b", "a\nb", "../../etc/passwd", "-rf", "a|b", "a&b", "a>b",
           "\x00", "é", "x" * 300]

BASE = """\
name: audit
topology:
  kind: dual-homed
  paths:
    - {name: A, bw: 10, delay: 5ms}
    - {name: B, bw: 10, delay: 5ms}
"""
# one field of each class that reaches a command line, a path or a file name, and where to put it
FIELDS = {
    "scenario name (result folder)": lambda v: BASE.replace("name: audit", f"name: {v!r}"),
    "path name (interface, nft, tc)": lambda v: BASE.replace("{name: A,", f"{{name: {v!r},"),
    "scheduler (sysctl value)": lambda v: BASE + f"mptcp: {{scheduler: {v!r}}}\n",
    "congestion control (sysctl value)": lambda v: BASE + f"mptcp: {{congestion: {v!r}}}\n",
    "rate (tc)": lambda v: BASE.replace("bw: 10,", f"bw: {v!r},", 1),
    "delay (netem)": lambda v: BASE.replace("delay: 5ms}", f"delay: {v!r}}}", 1),
    "traffic tool (registry name)": lambda v: BASE + f"traffic: {{tool: {v!r}}}\n",
    "kernel requirement (file names)": lambda v: BASE + f"requires: {{kernel: {v!r}}}\n",
    "controller app (a Python file)": lambda v: (
        "name: audit\ntopology:\n  kind: switched\n  switches: [{name: s1, type: ovs, controller: true}]\n"
        f"  controller: {{app: {v!r}}}\n  links:\n"
        "    - {name: l1, between: [h1, s1]}\n    - {name: l2, between: [h2, s1]}\n"
        "  paths:\n    - {name: A, client_if: 0, server_if: 0}\n"),
}


@pytest.mark.parametrize("field", sorted(FIELDS))
@pytest.mark.parametrize("value", HOSTILE, ids=[repr(v)[:12] for v in HOSTILE])
def test_hostile_values_are_refused_in_every_field_class(field, value):
    text = FIELDS[field](value)
    with pytest.raises(ScenarioError) as e:
        parse_scenario(text, "hostile.yaml")
    assert "hostile.yaml" in e.value.render()
