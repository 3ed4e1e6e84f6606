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


def test_compiler_namespace():
    """``torch.compiler``'s functions (the regional-compilation recipe calls
    ``torch.compiler.reset()``) over fiamma's eager execution."""
    import fiamma.compiler as compiler

    assert compiler.compile is fiamma.compile and compiler.reset is dynamo.reset
    compiler.reset()
    assert not compiler.is_compiling() and not compiler.is_dynamo_compiling()
    assert not compiler.is_exporting()
    assert compiler.list_backends() == ["cudagraphs", "inductor", "openxla", "tvm"]
    assert "eager" in compiler.list_backends(exclude_tags=())
    compiler.cudagraph_mark_step_begin()
    f = compiler.disable(lambda x: x + 1)
    assert f(1) == 2


def test_set_stance_call_block_and_decorator():
    import fiamma.compiler as compiler

    state = compiler._state
    with compiler.set_stance("force_eager"):
        assert state["stance"] == "force_eager"
    assert state["stance"] == "default"

    @compiler.set_stance("eager_on_recompile")
    def g():
        return state["stance"]

    assert state["stance"] == "default" and g() == "eager_on_recompile"
    compiler.set_stance("fail_on_recompile")
    assert state["stance"] == "fail_on_recompile"
    compiler.set_stance()
    with pytest.raises(RuntimeError, match="invalid stance 'fast'"):
        compiler.set_stance("fast")
    with pytest.raises(RuntimeError, match="force_backend is only allowed"):
        compiler.set_stance("force_eager", force_backend="eager")


def test_inductor_config_and_fresh_cache():
    from fiamma._inductor import config, utils

    assert config.max_autotune is False
    config.some_new_flag = 3
    assert config.some_new_flag == 3
    with pytest.raises(AttributeError):
        config.never_set_flag
    with utils.fresh_inductor_cache():
        out = fiamma.compile(lambda x: x * 2)(fiamma.ones(2))
    assert out.tolist() == [2.0, 2.0]
