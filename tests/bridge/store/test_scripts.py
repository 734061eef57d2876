"""The Redis store's scripts and the Python side that calls them agree: every op has one script
and one typed argument builder (:mod:`bridge.store.redis.scripts`), and each script's headers --
the named locals that take its KEYS and ARGV, at the top of its own file and of the shared parts
it is built from -- name exactly the builder's fields, in the builder's order. Below a header no
script reads KEYS or ARGV by number, so a field moved on one side only fails here, not as a wrong
value in some ask. Then every script compiles on a real server under the SHA the store calls it
by, and the packaging ships every script file."""

from __future__ import annotations

import ast
import fnmatch
import re
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from bridge.store.redis import scripts
from bridge.store.redis.connect import connect
from bridge.store.redis.scripts import (
    CALLS,
    DUE_KEY,
    INDEXED_LIB,
    SHAS,
    SOURCES,
    UNINDEXED,
    AskKeys,
    Call,
    Due,
    Head,
    SharedKeys,
)

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "bridge" / "store" / "redis"
LUA = PACKAGE / "lua"
NAMED = re.compile(
    r"local (\w+) = (?:tonumber\()?(KEYS|ARGV)\[(\d+)\]\)?(?: --.*)?"
    r"|local (\w+) = \{unpack\((KEYS|ARGV), (\d+)\)\}(?: --.*)?"
)
BY_NUMBER = re.compile(r"\b(KEYS|ARGV)\b")


def header(path: Path) -> tuple[dict[str, list[tuple[int, str, bool]]], list[str]]:
    """The named KEYS and ARGV at the top of a script file (after its opening comment), each as
    (position, name, whether it takes every one from there on), and the lines below them."""
    named: dict[str, list[tuple[int, str, bool]]] = {"KEYS": [], "ARGV": []}
    lines = path.read_text().splitlines()
    at = 0
    while at < len(lines) and (lines[at].startswith("--") or not lines[at].strip()):
        at += 1
    while at < len(lines):
        line = lines[at]
        found = NAMED.fullmatch(line)
        if found is None and not line.startswith("--"):
            break
        if found is not None:
            if found.group(1):
                named[found.group(2)].append((int(found.group(3)), found.group(1), False))
            else:
                named[found.group(5)].append((int(found.group(6)), found.group(4), True))
        at += 1
    return named, lines[at:]


def expected(call: type[Call]) -> dict[str, list[tuple[int, str, bool]]]:
    """What a script's headers must name, from its builder."""
    argv = [(n, False) for n in Head._fields]
    keys = [(n, False) for n in (*AskKeys._fields, *SharedKeys._fields)]
    if call.INDEXED:
        argv += [(n, False) for n in Due._fields]
        keys.append((DUE_KEY, False))
    argv += [(f.name, bool(f.metadata.get("rest"))) for f in fields(call)]
    if call.MORE_KEYS is not None:
        keys.append((call.MORE_KEYS, True))
    return {
        "KEYS": [(i, n, rest) for i, (n, rest) in enumerate(keys, 1)],
        "ARGV": [(i, n, rest) for i, (n, rest) in enumerate(argv, 1)],
    }


def test_every_op_has_one_script_and_one_builder() -> None:
    on_disk = {path.stem for path in LUA.glob("*.lua")}
    assert on_disk == set(CALLS)
    libs = {path.stem for path in (LUA / "lib").glob("*.lua")}
    used = {lib for call in CALLS.values() for lib in scripts.libs(call)}
    assert used == libs
    assert scripts.libs(CALLS["close"])[:3] == ("header", "core", INDEXED_LIB)


@pytest.mark.parametrize("op", sorted(CALLS))
def test_each_script_names_its_keys_and_arguments_as_its_builder_does(op: str) -> None:
    call = CALLS[op]
    parts = [LUA / "lib" / f"{lib}.lua" for lib in scripts.libs(call)] + [LUA / f"{op}.lua"]
    heads = [header(path)[0] for path in parts]
    named = {kind: sorted(n for head in heads for n in head[kind]) for kind in ("KEYS", "ARGV")}
    assert named == expected(call)
    # and the builder puts each value where the script takes it
    own_values: dict[str, Any] = {
        f.name: ("r1", "r2") if f.metadata.get("rest") else f"v{i}"
        for i, f in enumerate(fields(call))
    }
    head = Head(op, "1.5", "events", "id", 1000, 10)
    due = Due("2.5", "nx", 60) if call.INDEXED else None
    values = {**head._asdict(), **own_values, **(due._asdict() if due else {})}
    args = scripts.argv(head, call(**own_values), due)
    for position, name, rest in named["ARGV"]:
        if rest:
            assert args[position - 1 :] == list(values[name])
        else:
            assert args[position - 1] == values[name]
    rests = [value for value in values.values() if isinstance(value, tuple)]
    assert len(args) == len(values) - len(rests) + sum(len(r) for r in rests)
    if due is not None:  # called without the index (Cluster): its place kept, the rest in place
        assert scripts.argv(head, call(**own_values)) == [*args[:6], *UNINDEXED, *args[9:]]


def test_a_due_index_goes_only_to_the_ops_that_take_it() -> None:
    with pytest.raises(ValueError, match="takes no due index"):
        scripts.argv(Head("told", "1", "e", "id", 1, 1), CALLS["told"](), Due("1", "", 1))


@pytest.mark.parametrize("path", sorted(LUA.rglob("*.lua")), ids=lambda p: p.name)
def test_no_script_reads_keys_or_arguments_by_number_below_its_header(path: Path) -> None:
    """(What a shared part names in its header, every op built from it names there: the test
    above sums the headers of an op's parts.)"""
    _, rest = header(path)
    stray = [line for line in rest if BY_NUMBER.search(line.split("--")[0])]
    assert stray == []


def test_the_store_calls_every_op() -> None:
    """Every builder is used outside the scripts module (an op nobody calls is dead)."""
    used = {
        node.id
        for path in PACKAGE.glob("*.py")
        if path.name != "scripts.py"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Name)
    }
    assert [call.__name__ for call in CALLS.values() if call.__name__ not in used] == []


async def test_every_script_compiles_on_a_server_under_its_sha(standalone: Any) -> None:
    client, _ = connect(standalone.url)
    try:
        for op, text in SOURCES.items():
            assert await client.script_load(text) == SHAS[op], op
    finally:
        await client.aclose()


def test_the_package_ships_every_script() -> None:
    """Each ``.lua`` file matches the package-data patterns setuptools builds a wheel from."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = project["tool"]["setuptools"]["package-data"]["bridge"]
    files = [path.relative_to(ROOT / "bridge").as_posix() for path in LUA.rglob("*.lua")]
    assert files
    unshipped = [f for f in files if not any(fnmatch.fnmatchcase(f, p) for p in patterns)]
    assert unshipped == []
