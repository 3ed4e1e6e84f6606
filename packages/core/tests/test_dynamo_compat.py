"""fiamma._dynamo: torch._dynamo's switches for an eager-only library."""

import pytest

import fiamma
import fiamma._dynamo as dynamo
from fiamma._dynamo import config


def test_config_defaults_and_set():
    assert config.cache_size_limit == 8 and config.suppress_errors is False
    config.inline_inbuilt_nn_modules = 1
    assert config.inline_inbuilt_nn_modules == 1
    config.inline_inbuilt_nn_modules = True
    with pytest.raises(AttributeError):
        config.no_such_flag_was_set


def test_disable_and_friends_return_the_function():
    def f(x):
        return x * 2

    assert dynamo.disable(f) is f
    assert dynamo.disable()(f) is f
    assert dynamo.disable(recursive=False)(f) is f
    assert dynamo.allow_in_graph(f) is f
    assert dynamo.assume_constant_result(f) is f
    assert dynamo.is_compiling() is False
    assert dynamo.reset() is None
    t = fiamma.ones(3, 4)
    dynamo.mark_dynamic(t, 0)
    dynamo.mark_static(t)
    assert fiamma.compile(dynamo.disable(f))(t).sum().item() == 24.0


def test_bad_input():
    with pytest.raises(TypeError, match="disable: expected a callable"):
        dynamo.disable(3)
    with pytest.raises(TypeError, match="mark_dynamic: expected a Tensor"):
        dynamo.mark_dynamic([1, 2], 0)


def test_torch_alias_import_and_lazy_attribute():
    from fiamma import _torch_alias

    assert _torch_alias.target_name("torch._dynamo.config") == "fiamma._dynamo.config"
    assert fiamma._dynamo is dynamo  # `torch._dynamo.config.x = ...` without an import


@pytest.mark.parity
def test_config_defaults_match_pytorch():
    pytest.importorskip("torch")
    import torch._dynamo.config as tc

    for name in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                 "suppress_errors", "verbose", "capture_scalar_outputs",
                 "capture_dynamic_output_shape_ops", "automatic_dynamic_shapes",
                 "assume_static_by_default", "optimize_ddp", "specialize_int",
                 "guard_nn_modules"):
        assert getattr(config, name) == getattr(tc, name), name
