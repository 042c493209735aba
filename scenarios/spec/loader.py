"""Load a scenario file into the typed model, with errors a person can act on.

Each error names the file, the field (as a dotted path such as
`topology.paths[1].bw`) and, where the YAML has one, the line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from .files import FileProblem, read_regular
from .model import IDENT, KERNEL_IDENT, SCENARIO_NAME, TOPOLOGY_KINDS, Scenario, ValueRange
from .kernel import KERNEL_KEY
from .sweep import Point, SweepError, point_documents, set_dotted
from .traces import Trace, TraceError, load_trace, trace_files


class ScenarioError(Exception):
    """Bad user input: the CLI prints it and exits 2, without a traceback."""

    def __init__(self, file: str | Path, problems: list[str]):
        self.file = str(file)
        self.problems = problems
        super().__init__(self.render())

    def render(self) -> str:
        if len(self.problems) == 1:
            return f"{self.file}: {self.problems[0]}"
        return f"{self.file}: {len(self.problems)} problems:\n" + "\n".join(f"  - {p}" for p in self.problems)


def _index_lines(node: yaml.Node, loc: tuple, lines: dict, dups: list) -> None:
    """Map every field's location tuple to its 1-based line; record duplicate keys."""
    lines[loc] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value
            line = key_node.start_mark.line + 1
            if key in seen:
                dups.append(f"{_dotted(loc + (key,))} (line {line}): key given twice (first on line {seen[key]})")
            seen[key] = line
            _index_lines(value_node, loc + (key,), lines, dups)
            lines[loc + (key,)] = line
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index_lines(item, loc + (i,), lines, dups)


def _dotted(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _line_for(loc: tuple, lines: dict) -> int | None:
    while loc:
        if loc in lines:
            return lines[loc]
        loc = loc[:-1]
    return lines.get(())


_VALIDATOR_NAMES = {"str", "int", "float", "bool", "list", "dict", "json-or-python"}


def _clean_loc(loc: tuple) -> tuple:
    # pydantic adds the validator's type name for Annotated unions and function
    # validators, and the tag of a discriminated union (topology.routed.links);
    # only the user's keys and indexes matter here.
    out: list = []
    for p in loc:
        if not isinstance(p, int) and (str(p).startswith(("function-", "literal[", "constrained-"))
                                       or "[" in str(p) or str(p) in _VALIDATOR_NAMES):
            continue
        if out and out[-1] == "topology" and p in TOPOLOGY_KINDS:
            continue
        out.append(p)
    return tuple(out)


_PATTERN_WORDS = {
    IDENT: "use letters, digits, '_' or '-', starting with a letter (at most 32)",
    SCENARIO_NAME: "use letters, digits, '.', '_' or '-' (at most 64)",
    KERNEL_IDENT: "use lower-case letters, digits and '_' (a kernel module name)",
}

# A model-level check names its field first ("paths[1].name: ..."), relative
# to the model it belongs to, so the message can point at the right line.
_REL_FIELD = re.compile(r"^([A-Za-z_][\w]*(?:\[\d+\])?(?:\.[A-Za-z_]\w*(?:\[\d+\])?)*): (.*)$", re.S)


def _split_rel(msg: str) -> tuple[tuple, str]:
    m = _REL_FIELD.match(msg)
    if not m:
        return (), msg
    rel: list = []
    for part in m.group(1).split("."):
        name, _, idx = part.partition("[")
        rel.append(name)
        if idx:
            rel.append(int(idx.rstrip("]")))
    return tuple(rel), m.group(2)


# pydantic's error types in the project's words: what is allowed, never how pydantic checks it
_TYPE_WORDS = {
    "less_than_equal": "must be at most {le}", "less_than": "must be less than {lt}",
    "greater_than_equal": "must be at least {ge}", "greater_than": "must be greater than {gt}",
    "int_type": "must be a whole number", "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number", "float_type": "must be a number",
    "float_parsing": "must be a number", "finite_number": "must be a finite number",
    "string_type": "must be text (put it in quotes)", "bool_type": "must be true or false",
    "bool_parsing": "must be true or false", "list_type": "must be a list, e.g. [a, b]",
    "dict_type": "must be a mapping of keys to values", "model_type": "must be a mapping of keys to values",
    "model_attributes_type": "must be a mapping of keys to values",
    "too_short": "must have at least {min_length} item(s)", "too_long": "must have at most {max_length} item(s)",
    "string_too_long": "must be at most {max_length} characters",
    "union_tag_invalid": "must be one of: {expected_tags}",
}


def _message(err: dict) -> str:
    msg = err["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
    words = _TYPE_WORDS.get(err["type"])
    if words is not None:
        msg = words.format(**{k: f"{v:g}" if isinstance(v, float) else v for k, v in (err.get("ctx") or {}).items()})
        if err["type"] == "float_parsing" and isinstance(err.get("input"), str) and err["input"].endswith("%"):
            msg += ", in percent without the % sign"
    elif msg.startswith("Input should be "):
        msg = "must be " + msg[len("Input should be "):]
    if err["type"] == "extra_forbidden":
        return "unknown key (check the spelling; see `run-scenario --schema`)"
    if err["type"] == "missing":
        return "required field is missing"
    if err["type"] == "string_pattern_mismatch":
        pattern = (err.get("ctx") or {}).get("pattern", "")
        what = _PATTERN_WORDS.get(pattern, f"must match {pattern}")
        return f"{err.get('input')!r} is not allowed here: {what}"
    if "input" in err and err["type"] not in ("value_error",) and not isinstance(err["input"], (dict, list)):
        return f"{msg} (got {err['input']!r})"
    return msg


def _validation_problems(errors: list[dict], lines: dict) -> list[str]:
    problems = []
    for err in errors:
        loc = _clean_loc(err["loc"])
        msg = _message(err)
        if err["type"] == "value_error":
            rel, msg = _split_rel(msg)
            loc = loc + rel
        field = _dotted(loc)
        if err["type"] == "missing":
            # the key is absent, so point at the block it belongs in
            line = lines.get(loc[:-1]) if len(loc) > 1 else None
            where = f" (in the block at line {line})" if line else ""
        else:
            line = _line_for(loc, lines)
            where = f" (line {line})" if line else ""
        problems.append((f"{field}{where}", msg))
    return _merge_alternatives(problems)


def _merge_alternatives(problems: list[tuple[str, str]]) -> list[str]:
    """A value that fits none of a union's forms gets one error per form, all on the same field:
    one line saying what each form would have needed."""
    merged: dict[str, list[str]] = {}
    for where, msg in problems:
        msgs = merged.setdefault(where, [])
        if msg not in msgs:
            msgs.append(msg)
    out = []
    for where, msgs in merged.items():
        got = re.search(r" \(got .*\)$", msgs[0])
        if got and len(msgs) > 1 and all(m.endswith(got.group(0)) for m in msgs):
            msgs = [m[:-len(got.group(0))] for m in msgs[:-1]] + [msgs[-1]]
        out.append(f"{where}: {'; or '.join(msgs)}")
    return out


def parse_scenario(text: str, file: str | Path = "<string>") -> Scenario:
    """Parse and validate scenario text; raise ScenarioError on any problem."""
    return parse_experiment(text, file).scenario


@dataclass(frozen=True)
class Experiment:
    """A validated scenario and its points (one point when there is no sweep or variant)."""

    scenario: Scenario
    points: list
    text: str
    file: str
    traces: dict = field(default_factory=dict)   # a trace file as the scenario names it -> its Trace


MAX_FILE_BYTES = 1 << 20     # a scenario is a page of YAML; a 50 MB one took 40 s to refuse
MAX_NODES = 100_000          # YAML nodes once aliases are expanded ("billion laughs": 9 levels, 5.9 GB)


MAX_DEPTH = 50               # nested collections; a scenario needs fewer than 10


class _DepthError(yaml.YAMLError):
    pass


class BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing deep nesting as it scans: its pure-Python scanner is quadratic in
    the flow depth (6 kB of `[` took 2-7 s) and its composer recursive (RecursionError)."""

    def fetch_flow_collection_start(self, token_class):
        if self.flow_level >= MAX_DEPTH:
            raise _DepthError()
        super().fetch_flow_collection_start(token_class)

    def add_indent(self, column):
        if len(self.indents) >= MAX_DEPTH:
            raise _DepthError()
        return super().add_indent(column)


def _expanded_size(node: yaml.Node, seen: dict[int, int], limit: int) -> int:
    """Nodes under `node` with every alias expanded, counted without expanding (shared nodes memoised),
    stopping past `limit`."""
    key = id(node)
    if key in seen:
        return seen[key]
    seen[key] = limit + 1   # a node that contains itself (a recursive alias) is over any limit
    size = 1
    children = ([c for pair in node.value for c in pair] if isinstance(node, yaml.MappingNode)
                else node.value if isinstance(node, yaml.SequenceNode) else [])
    for child in children:
        size += _expanded_size(child, seen, limit)
        if size > limit:
            break
    seen[key] = size
    return size


def _compose(text: str, file) -> yaml.Node | None:
    if len(text) > MAX_FILE_BYTES:
        raise ScenarioError(file, [f"is {len(text)} characters; a scenario may be at most {MAX_FILE_BYTES} bytes"])
    try:
        node = yaml.compose(text, Loader=BoundedLoader)
    except (RecursionError, _DepthError):
        raise ScenarioError(file, [f"YAML nested too deeply (more than {MAX_DEPTH} levels)"]) from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ScenarioError(file, [f"YAML syntax error at {where}{e.problem or e}"]) from None
    except yaml.YAMLError as e:
        raise ScenarioError(file, [f"YAML error: {e}"]) from None
    if node is not None and _expanded_size(node, {}, MAX_NODES) > MAX_NODES:
        raise ScenarioError(file, [f"YAML aliases expand to more than {MAX_NODES} nodes; write the values out "
                                   "(a scenario needs no deep aliases)"])
    return node


def _construct(node: yaml.Node, file):
    """The values of the node _compose made: what yaml.load of the text gives, without scanning and
    composing the text a second time (0.07-0.09 s of a TCG guest's load)."""
    loader = BoundedLoader("")
    try:
        return loader.construct_document(node)
    except yaml.constructor.ConstructorError as e:
        mark = e.problem_mark
        where = f" at line {mark.line + 1}" if mark else ""
        raise ScenarioError(file, [f"YAML{where}: {e.problem} (only plain YAML values are allowed: no tags "
                                   "such as !!python/object)"]) from None
    except (yaml.YAMLError, RecursionError) as e:
        raise ScenarioError(file, [f"YAML error: {e}"]) from None
    finally:
        loader.dispose()


def _kernels_as_written(node: yaml.Node, data: dict) -> None:
    """`sweep: {kernel: [6.1, 6.10]}` as the user wrote it: YAML would read both as the float 6.1."""
    def entry(mapping, key):
        # the last: the value the mapping keeps (construction put a merge key's `<<: *x` pairs first)
        if isinstance(mapping, yaml.MappingNode):
            for k, v in reversed(mapping.value):
                if isinstance(k, yaml.ScalarNode) and k.value == key:
                    return v
        return None

    def fix(grid_node, grid):
        values = entry(grid_node, KERNEL_KEY)
        if isinstance(values, yaml.SequenceNode) and isinstance(grid, dict) and isinstance(grid.get(KERNEL_KEY), list):
            grid[KERNEL_KEY] = [v.value if isinstance(v, yaml.ScalarNode) and isinstance(w, (int, float)) else w
                                for v, w in zip(values.value, grid[KERNEL_KEY])]

    fix(entry(node, "sweep"), data.get("sweep"))
    variants = entry(node, "variants")
    if isinstance(variants, yaml.SequenceNode) and isinstance(data.get("variants"), list):
        for vnode, v in zip(variants.value, data["variants"]):
            if isinstance(v, dict):
                fix(entry(vnode, "sweep"), v.get("sweep"))
                if isinstance(v.get("set"), dict) and isinstance(v["set"].get(KERNEL_KEY), (int, float)):
                    v["set"][KERNEL_KEY] = entry(entry(vnode, "set"), KERNEL_KEY).value


def with_kernels(data: dict, kernels: list[str] | None) -> dict:
    """`--kernel A --kernel B`: the kernels replace the scenario's own `kernel` sweep (or become one)."""
    if not kernels or len(kernels) < 2:
        return data
    data = dict(data)
    data["sweep"] = {**(data.get("sweep") if isinstance(data.get("sweep"), dict) else {}), KERNEL_KEY: list(kernels)}
    variants = data.get("variants")
    if isinstance(variants, list):
        data["variants"] = [{**v, "sweep": {k: x for k, x in (v.get("sweep") or {}).items() if k != KERNEL_KEY}}
                            if isinstance(v, dict) and isinstance(v.get("sweep"), dict) else v for v in variants]
    return data


def _fractional_range_problem(err: dict, params: dict, doc: dict, data: dict, lines: dict) -> str | None:
    """A point's field that takes whole numbers, given a fraction by a range such as {from: 1, step: 0.5}:
    the range is at fault, at every point (its 1.0 too), so say so once, naming the range and the field."""
    field = _clean_loc(err["loc"])
    if not isinstance(err.get("input"), float) or not _message(err).startswith("must be a whole number"):
        return None
    grids = [(("sweep",), data.get("sweep") or {})]
    for i, variant in enumerate(data.get("variants") or []):
        if variant.get("name") == params.get("variant"):
            grids.append((("variants", i, "sweep"), variant.get("sweep") or {}))
    ranges = {key: (where + (key,), ValueRange.model_validate(entry))   # a variant's own grid wins
              for where, grid in grids for key, entry in grid.items() if isinstance(entry, dict)}
    for key, (loc, vrange) in ranges.items():
        # set again, to the same value, for where it went (paths.A.queue: topology.paths[0].queue)
        if not vrange.whole and key in params and set_dotted(doc, key, params[key]) == field:
            line = lines.get(loc)
            return (f"{_dotted(loc)}{f' (line {line})' if line else ''}: {_dotted(field)} takes "
                    f"whole numbers, but this range goes from {vrange.from_:g} in steps of {vrange.step:g}; "
                    "give `from` and `step` as whole numbers")
    return None


def parse_experiment(text: str, file: str | Path = "<string>", kernels: list[str] | None = None,
                     files_from: Path | None = None, read_traces: bool = True) -> Experiment:
    """Parse, validate, and expand the sweep; every point is validated as a whole scenario. `kernels`
    (two or more, from the command line) sweep the kernel. Files the scenario names (traces) are read
    relative to `files_from`, by default the file's own folder (a result set's copy names the original's);
    not at all without `read_traces` (a report of a finished set needs the expectations only)."""
    node = _compose(text, file)
    if node is None:
        raise ScenarioError(file, ["the file is empty; a scenario needs at least `name` and `topology`"])
    lines: dict = {}
    dups: list[str] = []
    _index_lines(node, (), lines, dups)
    if dups:
        raise ScenarioError(file, dups)
    data = _construct(node, file)
    if not isinstance(data, dict):
        raise ScenarioError(file, [f"the top level must be a mapping of keys (got {type(data).__name__})"])
    _kernels_as_written(node, data)
    data = with_kernels(data, kernels)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as e:
        raise ScenarioError(file, _validation_problems(e.errors(), lines)) from None
    points = []
    failing: dict[str, list[str]] = {}  # problem -> labels of the points that have it
    range_problems: dict[str, None] = {}  # a range's own problems, once each, in order
    try:
        docs = point_documents(data)
    except SweepError as e:
        raise ScenarioError(file, [f"sweep: {e}"]) from None
    for i, (params, doc) in enumerate(docs):
        try:
            points.append(Point(id=f"p{i + 1:03d}", params=params, scenario=Scenario.model_validate(doc)))
        except ValidationError as e:
            label = ", ".join(f"{k}={v}" for k, v in params.items())
            errors = []
            for err in e.errors():
                blamed = _fractional_range_problem(err, params, doc, data, lines)
                if blamed:
                    range_problems[blamed] = None
                else:
                    errors.append(err)
            for problem in _validation_problems(errors, {}):
                failing.setdefault(problem, []).append(label)
    if failing or range_problems:
        raise ScenarioError(file, list(range_problems) + [
            f"sweep point {labels[0]}{f' (and {len(labels) - 1} more)' if len(labels) > 1 else ''}: {problem}"
            for problem, labels in failing.items()])
    return Experiment(scenario=scenario, points=points, text=text, file=str(file),
                      traces=_read_traces([scenario] + [p.scenario for p in points], files_from or Path(file).parent,
                                          file, lines) if read_traces else {})


def _read_traces(scenarios: list[Scenario], base: Path, file, lines: dict) -> dict[str, Trace]:
    """Every trace file the scenario and its points name, relative to the scenario file's folder, read
    and checked before anything starts: a problem names the field, its line and the trace's own line."""
    traces: dict[str, Trace] = {}
    problems: dict[str, None] = {}
    for loc, name in dict.fromkeys(item for s in scenarios for item in trace_files(s)):
        if name in traces:
            continue
        try:
            traces[name] = load_trace(base / name)
        except TraceError as e:
            line = _line_for(loc, lines)
            problems[f"{_dotted(loc)}{f' (line {line})' if line else ''}: {e.where(name)}"] = None
    if problems:
        raise ScenarioError(file, list(problems))
    return traces


def load_scenario(path: str | Path) -> Scenario:
    return load_experiment(path).scenario


def load_experiment(path: str | Path, kernels: list[str] | None = None, files_from: Path | None = None,
                    read_traces: bool = True) -> Experiment:
    """Read a scenario file; a missing or unreadable file is a ScenarioError too. `files_from`: see
    parse_experiment."""
    p = Path(path)
    try:
        text = _read_capped(p)
    except FileNotFoundError:
        raise ScenarioError(p, ["no such file"]) from None
    except IsADirectoryError:
        raise ScenarioError(p, ["is a directory, not a scenario file"]) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ScenarioError(p, [f"cannot read: {e}"]) from None
    return parse_experiment(text, p, kernels, files_from, read_traces)


def _read_capped(p: Path) -> str:
    """A regular file of at most MAX_FILE_BYTES (files.read_regular: a FIFO cannot hang us, a device is
    refused before a byte is read)."""
    try:
        return read_regular(p, MAX_FILE_BYTES, "a scenario file").decode("utf-8")
    except FileProblem as e:
        raise ScenarioError(p, [str(e)]) from None
