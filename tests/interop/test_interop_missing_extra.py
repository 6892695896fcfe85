"""Without the safetensors package, transformers folders are refused with what to install."""

import sys

import pytest

from electra_tf.interop import core, hf


def test_without_safetensors_the_error_names_the_package(monkeypatch, tmp_path):
    # safetensors alone converts (the interop extra, which it had named, adds torch and
    # transformers: GBs a conversion does not need)
    monkeypatch.setitem(sys.modules, "safetensors", None)  # `import safetensors` fails
    monkeypatch.delitem(sys.modules, "safetensors.numpy", raising=False)
    with pytest.raises(core.ConversionError,
                       match=r"safetensors package: pip install safetensors \(the `interop` "
                             r"extra also installs torch and transformers, for "
                             r"pytorch_model.bin files and the parity tests\)$"):
        hf._save(str(tmp_path / "hf"), {}, {}, ("", True, 8))
    assert not (tmp_path / "hf").exists()
