"""The fast engine's compiled kernels are kept per version of its sources (engine/fast/jit.py,
kernel_cache_folder): numba alone reuses a kernel while its own file is unchanged, even when a helper it
inlined from another file (exp32 in jit.py) has changed since."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from zerollm.engine.fast.jit import kernel_cache_folder

ROOT = Path(__file__).resolve().parents[1]


def _copy_package(tmp_path):
    shutil.copytree(ROOT / "zerollm", tmp_path / "zerollm", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "zerollm" / "engine" / "fast"


def test_the_folder_changes_with_any_source_of_the_engine_and_only_with_them(tmp_path):
    fast = _copy_package(tmp_path)
    first = kernel_cache_folder(str(fast))
    assert Path(first).parent == fast / "__pycache__" and Path(first).name.startswith("kernels-")
    assert kernel_cache_folder(str(fast)) == first
    (tmp_path / "zerollm" / "nn" / "activation.py").write_text("# not the engine's source\n", encoding="utf-8")
    assert kernel_cache_folder(str(fast)) == first
    jit = fast / "jit.py"
    jit.write_text(jit.read_text(encoding="utf-8") + "\n# exp32 changed\n", encoding="utf-8")
    assert kernel_cache_folder(str(fast)) != first


def test_a_process_keeps_its_kernels_in_its_versions_folder_and_clears_older_ones(tmp_path):
    fast = _copy_package(tmp_path)
    older = fast / "__pycache__" / "kernels-000000000000"          # an earlier version's kernels
    older.mkdir(parents=True)
    (older / "x.nbi").write_bytes(b"old")
    loose = fast / "__pycache__" / "activation._gelu_tanh-37.py311.nbi"   # numba's own place, before
    loose.write_bytes(b"old")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["PYTHONPATH"] = str(tmp_path)
    code = ("import numba, numpy as np\n"
            "from zerollm.engine.fast import activation, jit\n"
            "x = np.linspace(-3, 3, 16, dtype=np.float32); y = np.empty_like(x)\n"
            "activation._gelu_tanh(x, y)\n"
            "print(numba.config.CACHE_DIR == jit.kernel_cache_folder(), jit.__file__)\n"
            "print(float(abs(y - x * 0.5 * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))).max()))\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    same, where = out.stdout.split("\n")[0].split()
    assert same == "True" and Path(where).parent == fast
    assert float(out.stdout.split("\n")[1]) < 1e-5
    assert not older.exists() and not loose.exists()
    kept = Path(kernel_cache_folder(str(fast)))
    assert any(kept.rglob("*.nbi")) and any(kept.rglob("*.nbc"))


def test_a_folder_the_user_names_is_kept(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "mine")}
    out = subprocess.run([sys.executable, "-c", "import numba, zerollm.engine.fast.jit; print(numba.config.CACHE_DIR)"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(tmp_path / "mine")
