# The cases of the SGLang parity test (props/sglang_parity_test.py and its kinds' modules): one case runs kvshard's
# CLI and compares what it prints with SGLang's answer field by field, keeping its input for the command it prints.
import json
import os
import shlex
import subprocess
import tempfile

class Mismatch(Exception):
    def __init__(self, field, got, want):
        super().__init__(f"{field}: got {got!r}, expected (SGLang) {want!r}")
        self.field, self.got, self.want = field, got, want


class Case:
    """One case: its input file (if any), the CLI argv and a field counter."""

    def __init__(self, kvshard, tmpdir, kind, index):
        self.kvshard, self.tmpdir, self.kind, self.index = kvshard, tmpdir, kind, index
        self.input_json, self.argv, self.fields = None, [], 0

    def write_input(self, obj):
        self.input_json = obj
        path = os.path.join(self.tmpdir, f"{self.kind}_{self.index}.json")
        with open(path, "w") as f:
            json.dump(obj, f)
        return path

    def run(self, *args):
        self.argv = [self.kvshard, *map(str, args)]
        p = subprocess.run(self.argv, capture_output=True, text=True)
        return p.returncode, p.stdout, p.stderr

    def run_json(self, *args):
        rc, out, err = self.run(*args)
        self.check("exit status", rc, 0, detail=err.strip())
        return json.loads(out)

    def check(self, field, got, want, detail=""):
        self.fields += 1
        if got != want:
            raise Mismatch(field + (f" ({detail})" if detail else ""), got, want)

    def check_error(self, needles, args):
        """SGLang raised: the CLI must exit 2 with one error line containing each of `needles`."""
        rc, out, err = self.run(*args)
        self.check("exit status", rc, 2, detail=(out + err).strip()[:300])
        self.check("error lines", err.count("\n"), 1, detail=err.strip())
        for needle in needles:
            self.check("error message contains", needle if needle in err else err.strip(), needle)

    def report(self, mismatch, seed):
        """Prints the case; its input file is kept (Bazel: undeclared test outputs) for the command shown."""
        print(f"MISMATCH in {self.kind} case {self.index} (seed {seed}): {mismatch}")
        argv = list(self.argv)
        if self.input_json is not None:
            print("input JSON:\n" + json.dumps(self.input_json))
            keep_dir = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR") or tempfile.gettempdir()
            kept = os.path.join(keep_dir, f"sglang_parity_{self.kind}_seed{seed}_case{self.index}.json")
            with open(kept, "w") as f:
                json.dump(self.input_json, f, indent=1)
            argv = [kept if a.startswith(self.tmpdir) else a for a in argv]
        print("reproduce: " + " ".join(shlex.quote(a) for a in argv))


def check_dict(case, prefix, got, want):
    """Every key SGLang produced must be in the CLI's JSON with an equal value (the CLI may add keys)."""
    for key, value in want.items():
        case.check(prefix + key, got.get(key, "<missing>"), value)
