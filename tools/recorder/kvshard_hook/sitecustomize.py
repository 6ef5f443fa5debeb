"""kvshard recorder's import hook: Python imports this module at start-up when kvshard_recorder.py put this folder
first on PYTHONPATH; it attaches the recorder (kvshard_recorder.install) to the process, writing to
$KVSHARD_RECORD_DIR, then runs the sitecustomize this one shadows, if any."""
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(_HERE))  # tools/recorder: kvshard_recorder.py
try:
    import kvshard_recorder
finally:
    del sys.path[0]
if os.environ.get(kvshard_recorder.ENV_OUT):
    kvshard_recorder.install(os.environ[kvshard_recorder.ENV_OUT])

_shadowed = importlib.machinery.PathFinder.find_spec(
    "sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _HERE])
if _shadowed is not None and _shadowed.loader is not None:
    _module = importlib.util.module_from_spec(_shadowed)
    _shadowed.loader.exec_module(_module)
