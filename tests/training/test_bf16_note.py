"""--mixed_precision=bf16 on a CPU that emulates bfloat16 products (no AVX512-BF16 or
AMX): the training commands print a note (benchmarks/peer_cpu.md: bf16 fine-tuned at
half fp32's rate there), as the export command does for --precision=bf16."""

import types

import pytest
from helpers import write_cpuinfo

from electra_tf.core.cpu import emulates_bf16
from electra_tf.training import backends

ICE_LAKE = "fpu sse2 avx2 avx512f avx512_vnni avx512vl"  # AVX-512 without BF16


def cpuinfo(tmp_path, flags: str) -> str:
    return write_cpuinfo(tmp_path / "cpuinfo", flags)


@pytest.mark.parametrize("flags, emulated", [
    (ICE_LAKE, True),
    ("fpu avx512f avx512_bf16 avx512vl", False),
    ("fpu avx512f amx_bf16 amx_tile", False),
    ("", False),  # no flags line: nothing is known
])
def test_the_cpu_flags_say_whether_bf16_is_emulated(tmp_path, flags, emulated):
    assert emulates_bf16(cpuinfo(tmp_path, flags)) is emulated
    assert emulates_bf16(str(tmp_path / "absent")) is False  # not Linux


@pytest.mark.parametrize("precision, flags, cpu_only, noted", [
    ("bf16", ICE_LAKE, True, True),
    ("fp32", ICE_LAKE, True, False),
    ("bf16", ICE_LAKE, False, False),  # a GPU or TPU computes: the CPU's flags do not matter
    ("bf16", "fpu avx512f avx512_bf16", True, False),
])
def test_the_training_note_comes_for_bf16_on_an_emulating_cpu_alone(
        tmp_path, monkeypatch, precision, flags, cpu_only, noted):
    monkeypatch.setattr(backends, "load", lambda backend=None: types.SimpleNamespace(
        cpu_only=lambda: cpu_only))
    note = backends.bf16_note("tensorflow", precision, cpuinfo(tmp_path, flags))
    assert (note is not None) is noted, note
    assert not noted or note.startswith("note: --mixed_precision=bf16 on a CPU without")


def test_the_tensorflow_backend_says_whether_it_computes_on_the_cpu_alone():
    import tensorflow as tf

    from electra_tf.training.backends import tensorflow as tf_backend

    accelerators = tf.config.list_logical_devices("GPU") + tf.config.list_logical_devices("TPU")
    assert tf_backend.cpu_only() is (not accelerators)


def test_the_jax_backend_says_whether_it_computes_on_the_cpu_alone():
    from helpers import run_jax_script

    proc = run_jax_script("""
        import jax
        from electra_tf.training.backends import jax as jax_backend
        print(jax_backend.cpu_only(), jax.default_backend())
    """)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cpu_only, platform = proc.stdout.split()[-2:]
    assert cpu_only == str(platform == "cpu")
