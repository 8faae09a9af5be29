#!/usr/bin/env python3
"""Rebuilds cases.json and swagger-merge-item.json from a clone of kubernetes/apimachinery.

Usage: vendor_cases.py GIT_DIR [REV]   (GIT_DIR a bare clone or a work tree's .git; REV
defaults to HEAD). Reads pkg/util/strategicpatch/patch_test.go at REV and writes, next to
this script:

- cases.json: {"repository", "tag", "commit", "file", "licence", "tables", "rawTables",
  "mapTables"}: the test data of patch_test.go, each text byte for byte as the Go source has
  it:
  - "tables": the YAML test tables held as `var NAME = []byte(`...`)`
    (createStrategicMergePatchTestCaseData, customStrategicMergePatchTestCaseData,
    sortMergeListTestCaseData), name -> YAML text;
  - "rawTables": the []StrategicMergePatchRawTestCase literals
    (strategicMergePatchRawTestCases, customStrategicMergePatchRawTestCases,
    replaceRawExtensionPatchTestCases), name -> list of {"Description", "Original", ...,
    "ExpectedError"}: each field the text of its []byte(`...`) or string literal;
  - "mapTables": the map literals of TestNumberConversion and TestUnknownField, function
    name -> {case name -> {field -> text}}.
- swagger-merge-item.json: pkg/util/strategicpatch/testdata/swagger-merge-item.json, copied.
"""
import json
import os
import re
import subprocess
import sys

FILE = "pkg/util/strategicpatch/patch_test.go"
SWAGGER = "pkg/util/strategicpatch/testdata/swagger-merge-item.json"
HERE = os.path.dirname(os.path.abspath(__file__))


def show(git_dir, rev, path):
    return subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{rev}:{path}"],
        check=True, capture_output=True, text=True).stdout


def block(source, start):
    """The text from `start` (an opening brace) to its matching brace, skipping Go string
    literals (backquoted and double-quoted)."""
    depth, i = 0, start
    while True:
        c = source[i]
        if c == "`":
            i = source.index("`", i + 1)
        elif c == '"':
            i += 1
            while source[i] != '"':
                i += 2 if source[i] == "\\" else 1
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return source[start:i + 1]
        i += 1


def string_fields(text):
    """`Name: []byte(`...`)`, `Name: `...`` and `Name: "..."` fields of a literal."""
    fields = {}
    pattern = re.compile(r'(\w+):\s*(?:\[\]byte\()?(`[^`]*`|"(?:[^"\\]|\\.)*")')
    for match in pattern.finditer(text):
        literal = match.group(2)
        fields[match.group(1)] = literal[1:-1] if literal[0] == "`" else json.loads(literal)
    return fields


def items(body):
    """The top-level `{...}` items of a composite literal's body."""
    out, i = [], 1
    while True:
        j = body.find("{", i)
        if j < 0:
            return out
        item = block(body, j)
        out.append(item)
        i = j + len(item)


def main():
    git_dir = sys.argv[1]
    rev = sys.argv[2] if len(sys.argv) > 2 else "HEAD"
    commit = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", f"{rev}^{{commit}}"],
                            check=True, capture_output=True, text=True).stdout.strip()
    source = show(git_dir, commit, FILE)
    tables = {name: text for name, text in
              re.findall(r"^var (\w+) = \[\]byte\(`([^`]*)`\)", source, re.M)}
    raw = {}
    for name in re.findall(r"^var (\w+) = \[\]StrategicMergePatchRawTestCase\{", source, re.M):
        start = source.index(f"var {name} = ")
        body = block(source, source.index("{", start + len(f"var {name} = []Strategic")))
        raw[name] = [string_fields(item) for item in items(body)]
    maps = {}
    for function in ("TestNumberConversion", "TestUnknownField"):
        start = source.index(f"func {function}(")
        literal = source.index("}{", start) + 1
        body = block(source, literal)
        cases = {}
        for match in re.finditer(r'\n\t\t"([^"]+)": \{', body):
            cases[match.group(1)] = string_fields(block(body, match.end() - 1))
        maps[function] = cases
    out = {
        "repository": "https://github.com/kubernetes/apimachinery",
        "tag": rev,
        "commit": commit,
        "file": FILE,
        "licence": "Apache-2.0 (LICENSE here, copied from the same commit)",
        "tables": tables,
        "rawTables": raw,
        "mapTables": maps,
    }
    with open(os.path.join(HERE, "cases.json"), "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    with open(os.path.join(HERE, "swagger-merge-item.json"), "w") as f:
        f.write(show(git_dir, commit, SWAGGER))
    with open(os.path.join(HERE, "LICENSE"), "w") as f:
        f.write(show(git_dir, commit, "LICENSE"))


if __name__ == "__main__":
    main()
