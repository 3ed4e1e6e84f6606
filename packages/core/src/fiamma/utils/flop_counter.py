"""fiamma.utils.flop_counter: PyTorch's ``FlopCounterMode``, counting the floating-point
operations of the matrix products and convolutions run inside it.

The counter runs a :mod:`fiamma.profiler` recording with
``with_flops=True`` while it is active and reads the records back. Counted as PyTorch counts
them: ``2*M*N*K`` for mm/addmm/bmm/baddbmm/matmul, ``2 * output elements * weight elements per
output channel`` for the convolutions, and their gradients (the input's as a transposed
convolution, the weight's as ``convolution_backward``) as PyTorch's formulas give them; pointwise
ops count nothing. A backward run inside counts the products autograd runs, as in PyTorch. Module
counts (``get_flop_counts()["Model.layer"]``) come from forward hooks, when fiamma-nn is
installed. Inside a running ``fiamma.profiler.profile`` the counter reads that profile's records
(and leaves them as they were: no FLOPs unless the profile asked for them).

>>> import fiamma
>>> from fiamma.utils.flop_counter import FlopCounterMode
>>> with FlopCounterMode(display=False) as fc:
...     _ = fiamma.ones(4, 3) @ fiamma.ones(3, 5)
>>> fc.get_total_flops()
120
"""

import collections
import importlib

from fiamma.utils._python_dispatch import TorchDispatchMode

__all__ = ["FlopCounterMode"]

# the ops whose FLOPs count (the profiler's names); pointwise mul/add do not (PyTorch's registry)
_COUNTED = frozenset(("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul",
                      "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution",
                      "aten::conv_transpose1d", "aten::conv_transpose2d",
                      "aten::conv_transpose3d", "aten::convolution_backward_weight"))
# the op names the counts are keyed by: PyTorch's (its convolutions all count as convolution,
# their gradients as convolution_backward)
_KEY = {n: n.replace("::", ".") for n in _COUNTED}
_KEY.update({n: "aten.convolution" for n in _COUNTED if n.startswith("aten::conv")})
_KEY["aten::convolution_backward_weight"] = "aten.convolution_backward"
_CONV_BACKWARD_NODE = "autograd::engine::evaluate_function: ConvolutionBackward"


class FlopCounterMode(TorchDispatchMode):
    """Count the FLOPs of what runs inside ``with FlopCounterMode(): ...``.

    A ``TorchDispatchMode`` as PyTorch's (``isinstance`` holds), but it counts from the
    profiler's records instead of entering the dispatch stack: ops inside pay no dispatch,
    ``_get_current_dispatch_mode()`` does not return it, and other dispatch modes and
    ``__torch_dispatch__`` subclasses inside it work unchanged (their ops are counted).

    ``depth`` bounds the module depth of the table ``display=True`` prints on exit;
    ``mods`` is accepted for PyTorch's older signature (every module is tracked);
    ``custom_mapping`` (per-op FLOP formulas for PyTorch's dispatcher) is not supported.
    """

    def __init__(self, mods=None, depth=2, display=True, custom_mapping=None):
        if custom_mapping:
            raise NotImplementedError(
                "FlopCounterMode(custom_mapping=): fiamma counts FLOPs from its profiler's "
                "records and has no per-op formula registry to extend")
        self.depth = depth
        self.display = display
        self.flop_counts = collections.defaultdict(lambda: collections.defaultdict(int))
        self._prof = self._own = self._lent = None  # how it records (see __enter__)
        self._first = 0
        self._hooks = []
        self._stack = []  # [(module name, first raw index)] of the forwards running now
        self._spans = []  # (module name, first raw index, end raw index)

    # ---- results ---------------------------------------------------------------------------

    def get_total_flops(self):
        return sum(self.flop_counts["Global"].values())

    def get_flop_counts(self):
        """``{module name or "Global": {op name: flops}}`` (plain dicts)."""
        return {k: dict(v) for k, v in self.flop_counts.items()}

    def get_table(self, depth=None):
        depth = self.depth if depth is None else depth
        rows = [("Module", "FLOP", "% Total")]
        total = self.get_total_flops()
        for name, ops in self.flop_counts.items():
            if depth is not None and name != "Global" and name.count(".") >= depth:
                continue
            n = sum(ops.values())
            pct = f"{100.0 * n / total:.2f}%" if total else "0.00%"
            rows.append((name, f"{n:,}", pct))
            for op, c in ops.items():
                rows.append((" - " + op, f"{c:,}", f"{100.0 * c / total:.2f}%" if total
                             else "0.00%"))
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows)

    # ---- recording ---------------------------------------------------------------------------

    def __enter__(self):
        import fiamma.profiler as profiler

        R = importlib.import_module("fiamma.profiler._record")  # noqa: N806
        self.flop_counts.clear()
        self._spans, self._stack = [], []
        self._prof = self._own = self._lent = None
        current = R.current_recorder()
        if current is not None:
            # a profile records: count from its records (FLOPs switched on meanwhile)
            self._lent = (current, current.with_flops, current.counter_flops)
            current.with_flops = current.counter_flops = True
        elif R._owner[0] is not None:
            # a profile waits between its recording cycles: record into a recorder of our own
            self._own = R.Recorder(with_flops=True)
            self._own.counter_flops = True
            R.activate(self._own)
        else:
            self._prof = profiler.profile(with_flops=True)
            self._prof.__enter__()
            R.current_recorder().counter_flops = True
        self._first = len(self._raw())
        try:
            mod = importlib.import_module("fiamma.nn.modules.module")
        except ModuleNotFoundError:
            mod = None
        if mod is not None:
            self._hooks = [mod.register_module_forward_pre_hook(self._pre),
                           mod.register_module_forward_hook(self._post)]
        return self

    @staticmethod
    def _key(r, rec):
        # a transposed convolution run by a convolution's backward is its input gradient
        if r[rec.NAME] == "aten::convolution":
            parent = r[rec.PARENT]
            while parent is not None:
                if parent[rec.NAME].startswith(_CONV_BACKWARD_NODE):
                    return "aten.convolution_backward"
                parent = parent[rec.PARENT]
        return _KEY[r[rec.NAME]]

    def _raw(self):
        if self._lent is not None:
            return self._lent[0].raw
        if self._own is not None:
            return self._own.raw
        rec = importlib.import_module("fiamma.profiler._record").current_recorder()
        return rec.raw if rec is not None else []

    def _name_of(self, module):
        if not self._stack:
            return type(module).__name__
        parent_name, parent = self._stack[-1][0], self._stack[-1][2]
        for child_name, child in parent._modules.items():
            if child is module:
                return f"{parent_name}.{child_name}"
        return f"{parent_name}.{type(module).__name__}"

    def _pre(self, module, args):
        self._stack.append((self._name_of(module), len(self._raw()), module))

    def _post(self, module, args, output):
        if self._stack and self._stack[-1][2] is module:
            name, start, _ = self._stack.pop()
            self._spans.append((name, start, len(self._raw())))

    def __exit__(self, *exc):
        rec = importlib.import_module("fiamma.profiler._record")
        raw = list(self._raw())
        for h in self._hooks:
            h.remove()
        self._hooks = []
        if self._prof is not None:
            self._prof.__exit__(*exc)
        elif self._own is not None:
            rec.deactivate(self._own)
        counted = {}  # raw index -> (op key, FLOPs)
        for i in range(self._first, len(raw)):
            r = raw[i]
            if r[rec.NAME] not in _COUNTED or not r[rec.FLOPS]:
                continue
            parent = r[rec.PARENT]
            while parent is not None and parent[rec.NAME] not in _COUNTED:
                parent = parent[rec.PARENT]
            if parent is None:  # an op inside a counted op (matmul -> mm) is not counted again
                counted[i] = (self._key(r, rec), r[rec.FLOPS])
                self.flop_counts["Global"][counted[i][0]] += r[rec.FLOPS]
        if self._lent is not None:
            lender, had_flops, had_counter = self._lent
            lender.with_flops, lender.counter_flops = had_flops, had_counter
            # leave the running profile's records as it would have made them
            for i in range(self._first, len(raw)):
                if not had_flops or (not had_counter
                                     and raw[i][rec.NAME] in rec.COUNTER_FLOP_OPS):
                    raw[i][rec.FLOPS] = 0
        self._prof = self._own = self._lent = None
        for name, start, end in self._spans:
            for i in range(start, end):
                if i in counted:
                    self.flop_counts[name][counted[i][0]] += counted[i][1]
        if self.display:
            print(self.get_table(self.depth))
        return False
