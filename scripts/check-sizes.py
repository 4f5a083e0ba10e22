#!/usr/bin/env python3
"""Files over 500 lines and functions over 80 lines in Sources (docs/DESIGN.md, decision 79).

A function is a `func`, `init` or `deinit` with a body; its length runs from the declaration
to its closing brace. Braces inside string literals and comments are skipped. Exceptions are
named in EXCEPTIONS with the reason DESIGN.md gives; anything else over a limit fails.
"""
import re
import sys
from pathlib import Path

FILE_LIMIT = 500
FUNCTION_LIMIT = 80
# "file:function" -> why it stays whole (DESIGN.md, decision 79).
EXCEPTIONS: dict[str, str] = {}

DECL = re.compile(r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|private|fileprivate|internal|package|open|static|class|final|override|mutating|nonmutating|nonisolated|convenience|required|prefix|postfix|infix|dynamic|consuming|borrowing|@inlinable|@usableFromInline)\s+)*(func\s+([^\s(<]+)|(init)[?!]?\s*[(<]|(deinit)\b|(subscript)\s*[(<])")


def strip(line, state):
    """The line without string literals and comments; `state` carries a block comment or a
    multi-line string across lines."""
    out = []
    i = 0
    while i < len(line):
        if state["block"]:
            end = line.find("*/", i)
            if end < 0:
                return "".join(out)
            state["block"] = False
            i = end + 2
            continue
        if state["multi"]:
            close = state["multi"]
            end = line.find(close, i)
            if end < 0:
                return "".join(out)
            state["multi"] = False
            i = end + len(close)
            continue
        if line.startswith("//", i):
            break
        if line.startswith("/*", i):
            state["block"] = True
            i += 2
            continue
        m = re.match(r'#*"""', line[i:])
        if m:
            state["multi"] = '"""' + "#" * (len(m.group(0)) - 3)
            i += len(m.group(0))
            continue
        m = re.match(r'#*"', line[i:])
        if m:
            hashes = len(m.group(0)) - 1
            close = '"' + "#" * hashes
            j = i + len(m.group(0))
            while j < len(line):
                if line[j] == "\\" and hashes == 0:
                    j += 2
                    continue
                if line.startswith(close, j):
                    break
                j += 1
            i = j + len(close)
            out.append('""')
            continue
        out.append(line[i])
        i += 1
    return "".join(out)


def functions(path):
    lines = path.read_text().splitlines()
    state = {"block": False, "multi": False}
    clean = [strip(line, state) for line in lines]
    found = []
    for start, line in enumerate(clean):
        m = DECL.match(line)
        if not m:
            continue
        name = m.group(2) or m.group(3) or m.group(4) or m.group(5)
        # The body is the first brace outside the parameter list (a closure default value in
        # the parameters, `now: ... = { Date() }`, is not it).
        depth = 0
        parens = 0
        opened = False
        for end in range(start, len(clean)):
            for ch in clean[end]:
                if ch == "(":
                    parens += 1
                elif ch == ")":
                    parens -= 1
                elif ch == "{" and (opened or parens == 0):
                    depth += 1
                    opened = True
                elif ch == "}" and opened:
                    depth -= 1
            if opened and depth <= 0:
                found.append((name, start + 1, end - start + 1))
                break
            # A protocol requirement: no body before the next declaration.
            if not opened and end > start and (DECL.match(clean[end]) or clean[end].strip() == "}"):
                break
    return found


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "Sources")
    problems = []
    for path in sorted(root.rglob("*.swift")):
        count = len(path.read_text().splitlines())
        if count > FILE_LIMIT:
            problems.append(f"{path}: {count} lines (at most {FILE_LIMIT})")
        for name, line, length in functions(path):
            if length > FUNCTION_LIMIT:
                key = f"{path}:{name}"
                note = EXCEPTIONS.get(key)
                if note:
                    print(f"{path}:{line}: {name} {length} lines, an exception: {note}")
                else:
                    problems.append(f"{path}:{line}: {name} is {length} lines (at most {FUNCTION_LIMIT})")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
