#!/usr/bin/env python3
"""Counts test cases in JUnit XML files under a folder; prints 'N passed, N failed, N skipped'.

Exits 1 when any case failed or no case ran. Used by tools/test.sh (Bazel's testlogs) and by the GPU
bundle's run_all.sh (gtest --gtest_output=xml files).
"""
import pathlib
import sys
import xml.etree.ElementTree as ET


def main(root: str) -> int:
    passed = failed = skipped = 0
    failures = []
    for path in sorted(pathlib.Path(root).rglob("*.xml")):
        try:
            tree = ET.parse(path)
        except ET.ParseError:
            failed += 1
            failures.append(f"{path}: unreadable XML")
            continue
        for case in tree.iter("testcase"):
            name = f"{case.get('classname', '')}.{case.get('name', '')}"
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
                failures.append(name)
            elif case.get("result") == "skipped" or case.find("skipped") is not None or case.get("status") == "notrun":
                skipped += 1
            else:
                passed += 1
    for f in failures[:20]:
        print(f"FAILED: {f}")
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed or passed + failed == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "bazel-testlogs"))
