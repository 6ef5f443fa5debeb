"""The environment the SGLang comparison tests share: where the workspace, SGLang's reference folder and the kvshard
binary are, and how a test skips or reports in JUnit XML (so tools/test_summary.py counts it)."""
import os
import sys
import xml.sax.saxutils


def workspace_root():
    """The source tree: the real path of this file (a runfile symlink under Bazel) is props/sglang_env.py."""
    return os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def runfile(rel):
    """A file of this workspace: Bazel's runfile when there is one, else the source tree's."""
    srcdir = os.environ.get("TEST_SRCDIR")
    if srcdir:
        path = os.path.join(srcdir, os.environ.get("TEST_WORKSPACE", "kvshard"), rel)
        if os.path.exists(path):
            return path
    return os.path.join(workspace_root(), rel)


def sglang_ref_dir():
    return os.environ.get("KVSHARD_SGLANG_REF") or os.path.join(workspace_root(), "..", "shared", "sglang_ref")


def kvshard_binary():
    if os.environ.get("TEST_SRCDIR"):
        return runfile(os.path.join("cli", "kvshard"))
    return os.environ.get("KVSHARD_BIN") or os.path.join(workspace_root(), "bazel-bin", "cli", "kvshard")


def write_xml(suite, classname, cases):
    """cases: [(name, status, message)] with status in passed|failed|skipped; written only under Bazel."""
    path = os.environ.get("XML_OUTPUT_FILE")
    if not path:
        return
    esc = xml.sax.saxutils.quoteattr
    failures = sum(s == "failed" for _, s, _ in cases)
    skips = sum(s == "skipped" for _, s, _ in cases)
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             f'<testsuites tests="{len(cases)}" failures="{failures}" skipped="{skips}">',
             f'<testsuite name="{suite}" tests="{len(cases)}" failures="{failures}" skipped="{skips}">']
    for name, status, message in cases:
        body = {"passed": "", "failed": f"<failure message={esc(message)}/>",
                "skipped": f"<skipped message={esc(message)}/>"}[status]
        result = ' result="skipped"' if status == "skipped" else ""
        lines.append(f'<testcase classname="{classname}" name="{name}"{result}>{body}</testcase>')
    lines += ["</testsuite>", "</testsuites>"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def skip(suite, classname, why):
    print(f"SKIPPED: {why}")
    write_xml(suite, classname, [("all", "skipped", why)])
    sys.exit(0)


def require_inputs(suite, classname, ref_file):
    """What every SGLang comparison test needs before it starts: SGLang's reference folder (holding ref_file), torch
    and the kvshard binary. Skips, saying why, where one of the first two is missing, and fails where the binary is
    (the build makes it). Returns (the folder's real path, the torch module, the binary's path)."""
    ref_dir = os.path.realpath(sglang_ref_dir())
    if not os.path.isfile(os.path.join(ref_dir, ref_file)):
        skip(suite, classname, f"SGLang reference folder not found at {ref_dir} (set KVSHARD_SGLANG_REF)")
    try:
        import torch
    except ImportError:
        skip(suite, classname, f"torch is not importable by {sys.executable} (Debian: apt-get install python3-torch)")
    kvshard = kvshard_binary()
    if not os.access(kvshard, os.X_OK):
        sys.exit(f"kvshard binary not found at {kvshard} (bazel build //cli:kvshard)")
    return ref_dir, torch, kvshard
