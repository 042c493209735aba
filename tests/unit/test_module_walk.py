"""bench/module_walk.py's counting, without a run: the hook records the project's calls with their depth
under the first, and a walk's returns are calls into a module it had entered and left."""
import sys
import types

from bench.module_walk import Walk, summarise


def fake_module(name: str, source: str, **names) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(names)
    exec(source, module.__dict__)
    return module


def test_the_hook_records_the_projects_calls_and_their_depth():
    leaf = fake_module("runners.linux.fake", "def helper():\n    return sorted([2, 1])\n")
    step = fake_module("runners.collect.fake", "def snapshot():\n    return helper() + own()\n"
                                               "def own():\n    return []\n", helper=leaf.helper)
    outside = fake_module("json.fake", "def call(f):\n    return f()\n")
    job = fake_module("runners.pipeline.fakejob", "class Job:\n    @property\n    def run_id(self):\n"
                                                 "        return helper()\n", helper=leaf.helper)
    top = fake_module("runners.pipeline.fake", "def one_run(job):\n"
                                               "    return call(snapshot) + [x for x in snapshot()] + job.run_id\n",
                      call=outside.call, snapshot=step.snapshot)
    sys.modules["runners.pipeline.fakejob"] = job     # where the hook looks for properties
    try:
        walk = Walk()
        sys.setprofile(walk)
        try:
            top.one_run(job.Job())
        finally:
            sys.setprofile(None)
    finally:
        del sys.modules["runners.pipeline.fakejob"]
    # through json.fake, the comprehension and the property: not calls of their own, no depth of their own
    assert [(m, d) for m, d, _ in walk.calls] == [
        ("runners.pipeline.fake", 0), ("runners.collect.fake", 1), ("runners.linux.fake", 2), ("runners.collect.fake", 2),
        ("runners.collect.fake", 1), ("runners.linux.fake", 2), ("runners.collect.fake", 2), ("runners.linux.fake", 1)]
    assert [f for _, _, f in walk.calls][:4] == ["one_run", "snapshot", "helper", "own"]


def test_a_return_is_a_call_into_a_module_entered_and_left_before():
    calls = [(m, d, "f") for m, d in (("one_run", 0), ("mptcp", 1), ("linux", 2), ("tool", 1), ("linux", 2),
                                      ("one_run", 1), ("counters", 1), ("counters", 1), ("store", 2), ("counters", 2),
                                      ("one_run", 1))]
    top = summarise(calls, 1)
    assert top["walk"] == ["one_run", "mptcp", "tool", "one_run", "counters", "one_run"]
    assert (top["modules"], top["returns"], top["returns_by_module"]) == (4, 2, {"one_run": 2})
    assert top["returns_by"] == ["one_run.f", "one_run.f"]
    every = summarise(calls, None)
    assert every["walk"] == ["one_run", "mptcp", "linux", "tool", "linux", "one_run", "counters", "store",
                             "counters", "one_run"]
    assert (every["modules"], every["returns"]) == (6, 4)
    assert every["returns_by_module"] == {"one_run": 2, "linux": 1, "counters": 1}
