#!/usr/bin/env python3
"""Counts test cases in JUnit XML files under a folder; prints the RapidCheck property cases run (from the
rapidcheck_cases each property records), then 'N passed, N failed, N skipped'.

Exits 1 when any case failed or no case ran. Used by tools/test.sh (Bazel's testlogs) and by the GPU
bundle's run_all.sh (gtest --gtest_output=xml files).
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


def main(root: str) -> int:
    passed = failed = skipped = cases = 0
    failures = []
    for path in sorted(pathlib.Path(root).rglob("*.xml")):
        try:
            tree = ET.parse(path)
        except ET.ParseError:
            failed += 1
            failures.append(f"{path}: unreadable XML")
            continue
        for case in tree.iter("testcase"):
            cases += property_cases(case)
            name = f"{case.get('classname', '')}.{case.get('name', '')}"
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
                failures.append(name)
            elif case.get("result") == "skipped" or case.find("skipped") is not None or case.get("status") == "notrun":
                skipped += 1
            else:
                passed += 1
    if cases:
        print(f"{cases} RapidCheck property cases run")
    for f in failures[:20]:
        print(f"FAILED: {f}")
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed or passed + failed == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "bazel-testlogs"))
