"""``fiamma.amp.GradScaler``: loss scaling for mixed-precision training (PyTorch's API)."""

import enum
import numbers
import warnings

__all__ = ["GradScaler", "OptState"]


class OptState(enum.Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_state():
    return {"stage": OptState.READY, "found_inf": None}


class GradScaler:
    """Scale the loss so that small low-precision gradients do not flush to zero, then unscale
    the gradients before the optimizer step, skipping the step when they hold inf or NaN.

    ``GradScaler(device="cuda", init_scale=2.**16, growth_factor=2.0, backoff_factor=0.5,
    growth_interval=2000, enabled=True)``: ``update()`` multiplies the scale by
    ``backoff_factor`` after a step with inf/NaN gradients, and by ``growth_factor`` after
    ``growth_interval`` steps in a row without. ``device="cuda"`` without CUDA warns and
    disables the scaler (then ``scale`` returns its input and ``step`` just steps), as in
    PyTorch; use ``device="cpu"`` for CPU training.

    >>> import fiamma
    >>> w = fiamma.ones(2, requires_grad=True)
    >>> opt = fiamma.optim.SGD([w], lr=0.1)          # doctest: +SKIP
    >>> scaler = fiamma.amp.GradScaler("cpu")
    >>> loss = (w * 3).sum()
    >>> scaler.scale(loss).backward()
    >>> w.grad.tolist()     # scaled by 2**16
    [196608.0, 196608.0]
    """

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        if not isinstance(device, str):
            device = getattr(device, "type", device)
        if device not in ("cpu", "cuda"):
            raise RuntimeError(f"GradScaler: unsupported device {device!r} (fiamma supports "
                               "'cpu' and 'cuda')")
        self._device = device
        self._enabled = bool(enabled)
        if self._enabled and device == "cuda":
            from fiamma import cuda

            if not cuda.is_available():
                warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not "
                              "available.  Disabling.", UserWarning, stacklevel=2)
                self._enabled = False
        if self._enabled:
            if not growth_factor > 1.0:
                raise ValueError(f"GradScaler: the growth factor must be > 1.0, got "
                                 f"{growth_factor}")
            if not backoff_factor < 1.0:
                raise ValueError(f"GradScaler: the backoff factor must be < 1.0, got "
                                 f"{backoff_factor}")
            if not (isinstance(growth_interval, numbers.Integral) and growth_interval > 0):
                raise ValueError("GradScaler: growth_interval must be a positive int, got "
                                 f"{growth_interval!r}")
        self._init_scale = float(init_scale)
        self._scale = None  # a float32 0-d tensor, made on first use
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._init_growth_tracker = 0
        self._growth_tracker = 0
        self._per_optimizer_states = {}

    # ---- scaling ---------------------------------------------------------------------------

    def _scale_tensor(self):
        if self._scale is None:
            import fiamma

            self._scale = fiamma.tensor(self._init_scale, dtype=fiamma.float32)
        return self._scale

    def scale(self, outputs):
        """``outputs`` (a tensor, or nested lists/tuples of tensors) times the scale."""
        if not self._enabled:
            return outputs
        import fiamma

        s = self._scale_tensor()

        def apply(v):
            if isinstance(v, fiamma.Tensor):
                return v * (s if v.device == s.device else s.to(v.device))
            if isinstance(v, (list, tuple)):
                return type(v)(apply(x) for x in v)
            raise ValueError("GradScaler.scale: outputs must be a Tensor or an iterable of "
                             f"Tensors, got {type(v).__name__}")

        return apply(outputs)

    def _state(self, optimizer):
        st = self._per_optimizer_states.get(id(optimizer))
        if st is None:
            st = self._per_optimizer_states[id(optimizer)] = _fresh_state()
        return st

    def unscale_(self, optimizer):
        """Divide ``optimizer``'s gradients by the scale in place and record whether any is
        inf or NaN (call it before clipping gradients; ``step`` then does not unscale again)."""
        if not self._enabled:
            return
        st = self._state(optimizer)
        if st["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since "
                               "the last update().")
        if st["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        st["found_inf"] = self._unscale_grads(optimizer)
        st["stage"] = OptState.UNSCALED

    def _unscale_grads(self, optimizer):
        import fiamma

        if self._scale is None:
            raise RuntimeError("GradScaler.unscale_: no scale yet: call scale() on the loss "
                               "before unscaling or stepping")
        inv = 1.0 / float(self._scale.item())  # in float64, then float32 as PyTorch does
        found = False
        with fiamma.no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if g.dtype is fiamma.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    g.mul_(fiamma.tensor(inv, dtype=fiamma.float32, device=g.device))
                    if not found and not bool(fiamma.isfinite(g).all()):
                        found = True
        return found

    def step(self, optimizer, *args, **kwargs):
        """Unscale the gradients (unless ``unscale_`` did) and call ``optimizer.step(*args,
        **kwargs)`` when they are all finite; skip it otherwise. Returns what step returned
        (None when skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is "
                               "enabled.")
        st = self._state(optimizer)
        if st["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if st["stage"] is OptState.READY:
            self.unscale_(optimizer)
        result = None if st["found_inf"] else optimizer.step(*args, **kwargs)
        st["stage"] = OptState.STEPPED
        return result

    def update(self, new_scale=None):
        """Set the scale for the next iteration: ``new_scale`` if given (a float or a 1-element
        tensor), else backed off after inf/NaN gradients or grown after ``growth_interval``
        clean steps."""
        if not self._enabled:
            return
        import fiamma

        if new_scale is not None:
            if isinstance(new_scale, fiamma.Tensor):
                if new_scale.numel() != 1:
                    raise ValueError("GradScaler.update: new_scale should be a single-element "
                                     f"tensor, got shape {tuple(new_scale.shape)}")
                if new_scale.requires_grad:
                    raise ValueError("GradScaler.update: new_scale should not require grad")
                new_scale = new_scale.item()
            self._scale = fiamma.tensor(float(new_scale), dtype=fiamma.float32)
        else:
            found = [st["found_inf"] for st in self._per_optimizer_states.values()
                     if st["found_inf"] is not None]
            if not found:
                raise AssertionError("No inf checks were recorded prior to update.")
            scale = float(self._scale_tensor().item())
            if any(found):
                scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    scale *= self._growth_factor
                    self._growth_tracker = 0
            # the scale lives in float32, as in PyTorch
            self._scale = fiamma.tensor(scale, dtype=fiamma.float32)
        self._per_optimizer_states = {}

    # ---- accessors ---------------------------------------------------------------------------

    def get_scale(self):
        """The current scale as a Python float (1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale.item())

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = int(new_interval)

    def is_enabled(self):
        return self._enabled

    def state_dict(self):
        """``{"scale", "growth_factor", "backoff_factor", "growth_interval",
        "_growth_tracker"}`` (PyTorch's keys); empty when disabled."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        import fiamma

        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            self._scale = fiamma.tensor(self._init_scale, dtype=fiamma.float32)
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        self._growth_tracker = self._init_growth_tracker

    def __getstate__(self):
        state = self.__dict__.copy()
        if self._enabled:
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._growth_tracker
            state["_scale"] = None
        state["_per_optimizer_states"] = {}
        return state
