#!/usr/bin/env python3
"""Counts test cases in JUnit XML files under one or more folders; prints the RapidCheck property cases run (from
the rapidcheck_cases each property records), then 'N passed, N failed, N skipped'.

  test_summary.py DIR                           one folder (the GPU bundle's run_all.sh, gtest --gtest_output=xml)
  test_summary.py NAME=DIR NAME=DIR ...         several runs (tools/test.sh: normal, asan, ubsan): a line per run,
                                                then the total as the last line
  --failed NAME:WHY                             a run that produced no results (its build failed): one failure

Exits 1 when any case failed or no case ran.
"""
import pathlib
import sys
import xml.etree.ElementTree as ET


def property_cases(case) -> int:
    """RapidCheck cases a test case recorded (props/property.h: <property name="rapidcheck_cases">), else 0."""
    for prop in case.iter("property"):
        if prop.get("name") == "rapidcheck_cases":
            return int(prop.get("value", "0"))
    return int(case.get("rapidcheck_cases", "0"))


class Counts:
    def __init__(self):
        self.passed = self.failed = self.skipped = self.cases = 0
        self.failures = []

    def add(self, other: "Counts"):
        self.passed += other.passed
        self.failed += other.failed
        self.skipped += other.skipped
        self.cases += other.cases
        self.failures += other.failures

    def line(self) -> str:
        return f"{self.passed} passed, {self.failed} failed, {self.skipped} skipped"


def count(root: str, label: str) -> Counts:
    c = Counts()
    prefix = f"{label}: " if label else ""
    for path in sorted(pathlib.Path(root).rglob("*.xml")):
        try:
            tree = ET.parse(path)
        except ET.ParseError:
            c.failed += 1
            c.failures.append(f"{prefix}{path}: unreadable XML")
            continue
        for case in tree.iter("testcase"):
            c.cases += property_cases(case)
            name = f"{case.get('classname', '')}.{case.get('name', '')}"
            if case.find("failure") is not None or case.find("error") is not None:
                c.failed += 1
                c.failures.append(prefix + name)
            elif case.get("result") == "skipped" or case.find("skipped") is not None or case.get("status") == "notrun":
                c.skipped += 1
            else:
                c.passed += 1
    return c


def main(args) -> int:
    runs, broken = [], []
    i = 0
    while i < len(args):
        if args[i] == "--failed" and i + 1 < len(args):
            broken.append(args[i + 1])
            i += 2
            continue
        name, sep, root = args[i].partition("=")
        runs.append((name, root) if sep else ("", args[i]))
        i += 1
    if not runs and not broken:
        runs = [("", "bazel-testlogs")]
    total = Counts()
    per_run = []
    for name, root in runs:
        c = count(root, name)
        per_run.append((name, c))
        total.add(c)
    for b in broken:
        total.failed += 1
        total.failures.append(b.replace(":", ": ", 1))
    if total.cases:
        print(f"{total.cases} RapidCheck property cases run")
    for f in total.failures[:20]:
        print(f"FAILED: {f}")
    if len(per_run) + len(broken) > 1:
        for name, c in per_run:
            print(f"{name}: {c.line()}" + (f" ({c.cases} RapidCheck cases)" if c.cases else ""))
        for b in broken:
            print(b.replace(":", ": ", 1))
    print(total.line())
    return 1 if total.failed or total.passed + total.failed == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
