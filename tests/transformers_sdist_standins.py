"""The parts of transformers' test package that its sdist leaves out, and the package itself.

The sdist of transformers ships ``tests/test_modeling_common.py`` and ``tests/test_configuration_common.py`` (and
other ``test_*_common.py`` / ``*_mixin.py`` files), but not the helper modules they import. :func:`load` makes the
unpacked sdist ``tests/`` folder importable as the package ``transformers_sdist_tests`` and puts these minimal
stand-ins in the place of the missing modules (a module the sdist does ship is always used instead):

- ``generation/test_utils.py`` -> :class:`GenerationTesterMixin`. ``ModelTesterMixin`` only asks whether a tester
  of a model that can ``generate`` inherits it (``test_generation_tester_mixin_inheritance``), and uses its
  ``_check_caches_are_equal`` when there is one (``test_bc_cache_name_forward``). The stand-in is that marker plus
  that comparison; the real mixin's ``generate()`` tests are not reproduced (ours are in
  tests/test_modeling_scratchformer.py).
- ``exporters/test_export.py`` -> :class:`ExportTesterMixin`, the base class of ``ModelTesterMixin``. Empty (no
  tests): the real one runs each model through transformers' exporters (torch.export, ONNX, ExecuTorch, OpenVINO,
  ...); our ONNX export is tested by tests/test_onnx.py.
- ``utils/test_configuration_utils.py`` -> :data:`config_common_kwargs`, which ``ConfigTester`` sets on a config to
  check that every field of ``PreTrainedConfig`` itself is stored: one non-default value for each of them.
- ``__init__.py`` of the ``tests`` folder: ``test_configuration_common.py`` runs
  ``direct_transformers_import(<its folder>)``, which executes that file (empty in the repository); scripts/setup.sh
  writes the empty file when it unpacks the sdist.
"""

from __future__ import annotations

import importlib
import sys
import types
import warnings
from pathlib import Path

import torch

PACKAGE = "transformers_sdist_tests"


class GenerationTesterMixin:
    """Stand-in for ``tests/generation/test_utils.py``: the marker that a tester covers a model that can generate."""

    def _check_caches_are_equal(self, cache1, cache2) -> None:
        """Two key/value caches hold the same keys and values, layer by layer (both sides of an
        ``EncoderDecoderCache``); exact equality up to ``torch.testing.assert_close``'s float32 default (1.3e-6
        relative, 1e-5 absolute)."""
        self.assertEqual(type(cache1), type(cache2))
        pairs = [(cache1, cache2)]
        if hasattr(cache1, "self_attention_cache"):
            pairs = [(cache1.self_attention_cache, cache2.self_attention_cache),
                     (cache1.cross_attention_cache, cache2.cross_attention_cache)]
        for first, second in pairs:
            self.assertEqual(len(first.layers), len(second.layers))
            for layer1, layer2 in zip(first.layers, second.layers):
                self.assertEqual(layer1.is_initialized, layer2.is_initialized)
                if layer1.is_initialized:
                    torch.testing.assert_close(layer1.keys, layer2.keys)
                    torch.testing.assert_close(layer1.values, layer2.values)


class ExportTesterMixin:
    """Stand-in for ``tests/exporters/test_export.py``: the (empty) base class of ``ModelTesterMixin``."""


# One value for each field that PreTrainedConfig itself declares, none of them its default.
config_common_kwargs = {
    "return_dict": False,
    "output_hidden_states": True,
    "output_attentions": True,
    "dtype": "float16",
    "chunk_size_feed_forward": 5,
    "architectures": ["BertModel"],
    "id2label": {0: "label"},
    "label2id": {"label": "0"},
    "problem_type": "regression",
}

STANDINS = {
    "generation.test_utils": {"GenerationTesterMixin": GenerationTesterMixin},
    "exporters.test_export": {"ExportTesterMixin": ExportTesterMixin},
    "utils.test_configuration_utils": {"config_common_kwargs": config_common_kwargs},
}


def _module(name: str, path: Path, attributes: dict | None = None) -> types.ModuleType:
    module = types.ModuleType(name)
    if attributes is None:  # a package
        module.__path__ = [str(path)]
    else:
        module.__file__ = str(path)
        module.__dict__.update(attributes)
    sys.modules[name] = module
    return module


def load(sdist_tests: Path, *names: str) -> list[types.ModuleType]:
    """Import ``names`` (e.g. ``"test_modeling_common"``) from the unpacked sdist folder ``sdist_tests``, as
    modules of the package ``transformers_sdist_tests``, with the stand-ins in place of what the folder lacks."""
    if PACKAGE not in sys.modules:
        _module(PACKAGE, sdist_tests)
        for dotted, attributes in STANDINS.items():
            parent, leaf = dotted.split(".")
            if (sdist_tests / parent / f"{leaf}.py").is_file():
                continue  # the sdist ships it: the real module is imported
            if f"{PACKAGE}.{parent}" not in sys.modules:
                sys.modules[PACKAGE].__dict__[parent] = _module(f"{PACKAGE}.{parent}", sdist_tests / parent)
            setattr(sys.modules[f"{PACKAGE}.{parent}"], leaf,
                    _module(f"{PACKAGE}.{dotted}", Path(__file__), attributes))
    with warnings.catch_warnings():
        # The sdist's tests carry marks registered in transformers' own pytest configuration (flash_attn_test, ...).
        import pytest

        warnings.simplefilter("ignore", pytest.PytestUnknownMarkWarning)
        return [importlib.import_module(f"{PACKAGE}.{name}") for name in names]
