"""Without the interop extra, transformers folders are refused with the extra to install."""

import sys

import pytest

from electra_tf.interop import core, hf


def test_without_safetensors_the_error_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "safetensors", None)  # `import safetensors` fails
    monkeypatch.delitem(sys.modules, "safetensors.numpy", raising=False)
    with pytest.raises(core.ConversionError,
                       match=r"safetensors package: pip install 'electra_tf\[interop\]'"):
        hf._save(str(tmp_path / "hf"), {}, {})
    assert not (tmp_path / "hf").exists()
