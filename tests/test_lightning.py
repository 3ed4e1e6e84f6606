"""PyTorch Lightning (``lightning``, ``pytorch_lightning``) and ``torchmetrics`` unmodified under
``python -m fiamma.run``: the Trainer's fit/validate/test/predict with checkpoints, resuming,
early stopping, learning-rate monitoring, gradient clipping and accumulation, bf16-mixed
precision, Fabric, DDP on two CPU processes; torchmetrics' classification and regression
metrics. Parity tests run the same programs on PyTorch and compare (checkpoints load both ways,
metric values agree). Nothing of these libraries is copied into this project.

Two environment notes, both about other packages of this venv, not about the libraries:
``torchmetrics`` imports ``transformers`` when it is installed (for BERTScore); importing
transformers under fiamma is other work, so the children here hide transformers (as if not
installed) except in ``test_imports_with_transformers``, which runs once it imports. The
reference children on PyTorch hide ``torchvision``, whose CUDA build here does not load beside
the CPU torch (torchmetrics imports it for image metrics)."""

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("lightning") is None or importlib.util.find_spec("torchmetrics")
    is None, reason="lightning or torchmetrics is not installed")


def _hide(name):
    return textwrap.dedent(f"""
        import importlib.metadata as _md, sys as _sys
        _sys.modules[{name!r}] = None  # find_spec answers None, import raises
        _version = _md.version
        def _v(n):
            if n == {name!r}:
                raise _md.PackageNotFoundError(n)
            return _version(n)
        _md.version = _v
        """)


HIDE_TRANSFORMERS = _hide("transformers")
HIDE_TORCHVISION = _hide("torchvision")


def _env():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1",
           "PYTHONWARNINGS": "ignore"}
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    return env


def _run(script, tmp_path, *args, torch=False, name="script.py", hide=True, timeout=300):
    """Run ``script`` (a string, or a tuple of parts each dedented by itself) under fiamma.run
    (``torch=True``: on PyTorch); its stdout."""
    prelude = (HIDE_TORCHVISION if torch else HIDE_TRANSFORMERS) if hide else ""
    path = tmp_path / name
    parts = script if isinstance(script, tuple) else (script,)
    path.write_text(prelude + "".join(textwrap.dedent(part) for part in parts))
    cmd = [sys.executable] + ([] if torch else ["-m", "fiamma.run"]) + [str(path)]
    r = subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True,
                       timeout=timeout, env=_env(), cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    return r.stdout


def _json(out):
    lines = [line for line in out.splitlines() if line.startswith("JSON")]
    assert lines, out[-2000:]
    return json.loads(lines[-1][4:])


def test_imports_and_names(tmp_path):
    out = _run("""
        import json
        import torch, fiamma
        import lightning as L, pytorch_lightning as pl, torchmetrics
        from lightning.fabric.utilities.types import ReduceOp, RedOpType
        assert torch.Tensor is fiamma.Tensor and L.Trainer and pl.Trainer and L.Fabric
        assert isinstance(torch.distributed.ReduceOp.SUM, RedOpType)
        print("JSON" + json.dumps({"metric": torchmetrics.Metric.__name__,
                                   "torch": str(torch.__version__)}))
        """, tmp_path)
    assert _json(out) == {"metric": "Metric", "torch": "2.13.0"}


def test_imports_with_transformers(tmp_path):
    probe = subprocess.run([sys.executable, "-m", "fiamma.run", "-c",
                            "from transformers import AutoModel"], capture_output=True,
                           text=True, timeout=300, env=_env())
    if importlib.util.find_spec("transformers") is not None and probe.returncode != 0:
        pytest.skip("transformers does not import under fiamma.run here (torchmetrics imports "
                    "it): " + probe.stderr.strip().splitlines()[-1][:200])
    out = _run("import lightning, pytorch_lightning, torchmetrics; print('ok')", tmp_path,
               hide=False)
    assert out.strip().endswith("ok")


MODULE = """
    import sys, os, json, math
    import numpy as np
    import torch, torch.nn as nn, torch.nn.functional as F
    from torch.utils.data import DataLoader, TensorDataset
    import lightning as L

    def digits(n, seed=0):
        # MNIST-like 8x8 images: ten fixed random templates plus noise (numpy: the same
        # numbers under fiamma and PyTorch)
        templates = (np.random.default_rng(123).random((10, 1, 8, 8)) > 0.5).astype(np.float32)
        rng = np.random.default_rng(seed)
        y = rng.integers(0, 10, n)
        x = templates[y] + 0.5 * rng.standard_normal((n, 1, 8, 8)).astype(np.float32)
        return TensorDataset(torch.tensor(x), torch.tensor(y))

    class Net(L.LightningModule):
        def __init__(self, lr=0.05, momentum=0.9):
            super().__init__()
            self.save_hyperparameters()
            self.conv = nn.Conv2d(1, 8, 3, padding=1)
            self.fc = nn.Linear(8 * 4 * 4, 10)

        def forward(self, x):
            return self.fc(F.max_pool2d(F.relu(self.conv(x)), 2).flatten(1))

        def training_step(self, batch, i):
            x, y = batch
            loss = F.cross_entropy(self(x), y)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch, i):
            x, y = batch
            logits = self(x)
            self.log("val_loss", F.cross_entropy(logits, y))
            self.log("val_acc", (logits.argmax(1) == y).float().mean())

        def test_step(self, batch, i):
            x, y = batch
            self.log("test_acc", (self(x).argmax(1) == y).float().mean())

        def predict_step(self, batch, i):
            return self(batch[0]).argmax(1)

        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=self.hparams.lr,
                                  momentum=self.hparams.momentum)
            return {"optimizer": opt,
                    "lr_scheduler": torch.optim.lr_scheduler.StepLR(opt, 1, 0.5)}

    def quiet(**kw):
        return dict(accelerator="cpu", enable_progress_bar=False, enable_model_summary=False,
                    **kw)
"""


def test_trainer_fit_validate_test_predict_checkpoint_resume(tmp_path):
    out = _run((MODULE, """
        from lightning.pytorch.callbacks import ModelCheckpoint, LearningRateMonitor
        from lightning.pytorch.loggers import CSVLogger
        train, val = digits(640), digits(256, seed=1)
        ck = ModelCheckpoint(dirpath="ck", monitor="val_acc", mode="max", save_last=True)
        t = L.Trainer(max_epochs=3, logger=CSVLogger("logs"), callbacks=[ck, LearningRateMonitor()],
                      **quiet(enable_checkpointing=True))
        m = Net()
        t.fit(m, DataLoader(train, batch_size=32, shuffle=True), DataLoader(val, batch_size=64))
        res = {"step": t.global_step, "epoch": t.current_epoch}
        res["val"] = t.validate(m, DataLoader(val, batch_size=64), verbose=False)[0]
        res["test"] = t.test(m, DataLoader(val, batch_size=64), verbose=False)[0]
        preds = torch.cat(t.predict(m, DataLoader(val, batch_size=64)))
        res["pred_shape"] = list(preds.shape)
        res["pred_acc"] = float((preds == val.tensors[1]).float().mean())
        res["best"] = os.path.basename(ck.best_model_path)
        m2 = Net.load_from_checkpoint(ck.best_model_path)
        best = torch.load(ck.best_model_path, weights_only=False)
        res["best_equal"] = all(torch.equal(v, m2.state_dict()[k])
                                for k, v in best["state_dict"].items())
        res["hparams"] = dict(m2.hparams)
        with open(os.path.join(t.logger.log_dir, "metrics.csv")) as f:
            header, *rows = [r.split(",") for r in f.read().split()]
        lr = header.index("lr-SGD")
        res["lrs"] = [float(r[lr]) for r in rows if r[lr]]
        t2 = L.Trainer(max_epochs=5, logger=False, **quiet(enable_checkpointing=False))
        m3 = Net()
        t2.fit(m3, DataLoader(train, batch_size=32), DataLoader(val, batch_size=64),
               ckpt_path=ck.last_model_path)
        res["resumed"] = [t2.global_step, t2.current_epoch,
                          m3.trainer.optimizers[0].param_groups[0]["lr"]]
        print("JSON" + json.dumps(res))
        """), tmp_path)
    r = _json(out)
    assert r["step"] == 3 * 20 and r["epoch"] == 3
    assert r["val"]["val_acc"] > 0.9 and r["test"]["test_acc"] == r["val"]["val_acc"]
    assert r["pred_shape"] == [256] and abs(r["pred_acc"] - r["test"]["test_acc"]) < 1e-6
    assert r["best"].startswith("epoch=") and r["best_equal"]
    assert r["hparams"] == {"lr": 0.05, "momentum": 0.9}
    assert r["lrs"] == [0.05, 0.025, 0.0125]
    # resumed at epoch 3 / step 60 with the scheduler's state: two more epochs, lr halved twice
    assert r["resumed"] == [100, 5, 0.05 / 32]


def test_module_with_metrics_checkpoints(tmp_path):
    # metrics held by the module are submodules: their state_dict hooks run on save and load
    out = _run((MODULE, """
        import torchmetrics

        class WithMetric(Net):
            def __init__(self):
                super().__init__()
                self.train_acc = torchmetrics.Accuracy(task="multiclass", num_classes=10)
                self.val_acc = torchmetrics.Accuracy(task="multiclass", num_classes=10)
            def training_step(self, batch, i):
                x, y = batch
                logits = self(x)
                self.train_acc(logits, y)
                self.log("train_acc", self.train_acc, on_epoch=True, on_step=False)
                return F.cross_entropy(logits, y)
            def validation_step(self, batch, i):
                x, y = batch
                self.val_acc.update(self(x), y)
                self.log("val_acc", self.val_acc)

        t = L.Trainer(max_epochs=2, logger=False, **quiet(enable_checkpointing=False))
        m = WithMetric()
        t.fit(m, DataLoader(digits(256), batch_size=32),
              DataLoader(digits(128, seed=1), batch_size=64))
        t.save_checkpoint("m.ckpt")
        m2 = WithMetric.load_from_checkpoint("m.ckpt")
        same = all(torch.equal(v, m2.state_dict()[k]) for k, v in m.state_dict().items())
        print("JSON" + json.dumps({"train_acc": float(t.callback_metrics["train_acc"]),
                                   "val_acc": float(t.callback_metrics["val_acc"]),
                                   "same": same, "keys": len(m2.state_dict())}))
        """), tmp_path)
    r = _json(out)
    # learned (chance is 0.1), and the reloaded module equals the trained one
    assert r["same"] and r["keys"] == 4 and 0.5 < r["train_acc"] <= 1 and r["val_acc"] > 0.5


def test_early_stopping_clipping_accumulation(tmp_path):
    out = _run((MODULE, """
        from lightning.pytorch.callbacks import EarlyStopping, Callback
        train = digits(256)

        class Steps(Callback):  # the parameters before and after each optimizer step
            def __init__(self):
                self.deltas, self.before = [], None
            def on_before_optimizer_step(self, trainer, module, optimizer):
                self.before = [p.detach().clone() for p in module.parameters()]
            def on_train_batch_end(self, trainer, module, outputs, batch, i):
                if self.before is not None:
                    d = sum(float(((p - b) ** 2).sum()) for p, b in
                            zip(module.parameters(), self.before)) ** 0.5
                    self.deltas.append(d)
                    self.before = None

        steps = Steps()
        # min_delta larger than any improvement: stops after patience=1 epoch without one
        es = EarlyStopping("val_loss", min_delta=100.0, patience=1)
        t = L.Trainer(max_epochs=10, logger=False, callbacks=[es, steps],
                      gradient_clip_val=1e-3, gradient_clip_algorithm="norm",
                      accumulate_grad_batches=2, **quiet(enable_checkpointing=False))
        m = Net(lr=1.0, momentum=0.0)
        t.fit(m, DataLoader(train, batch_size=32), DataLoader(train, batch_size=64))
        print("JSON" + json.dumps({"epoch": t.current_epoch, "step": t.global_step,
                                   "stopped": es.stopped_epoch, "deltas": steps.deltas}))
        """), tmp_path)
    r = _json(out)
    # 8 batches / 2 accumulated = 4 optimizer steps an epoch; stopped after the second epoch
    assert r["epoch"] == 2 and r["stopped"] == 1 and r["step"] == 8
    assert len(r["deltas"]) == 8
    # SGD with lr 1 moves the parameters by the clipped gradient: its norm is at most 1e-3
    assert all(0 < d <= 1e-3 * (1 + 1e-4) for d in r["deltas"]), r["deltas"]


def test_bf16_mixed_and_model_summary_flops(tmp_path):
    out = _run((MODULE, """
        from lightning.pytorch.utilities.model_summary import ModelSummary
        seen = {}

        class Probe(Net):
            def training_step(self, batch, i):
                out = self(batch[0])
                seen["dtype"] = str(out.dtype)
                return F.cross_entropy(out, batch[1])

        m = Probe()
        m.example_input_array = torch.zeros(2, 1, 8, 8)
        summary = ModelSummary(m, max_depth=1)
        from lightning.fabric.utilities.throughput import measure_flops
        x = torch.zeros(2, 1, 8, 8)
        train_flops = measure_flops(m, lambda: m(x), lambda y: y.sum())
        t = L.Trainer(max_epochs=2, precision="bf16-mixed", logger=False,
                      **quiet(enable_checkpointing=False))
        before = m.fc.weight.detach().clone()
        t.fit(m, DataLoader(digits(256), batch_size=32))
        print("JSON" + json.dumps({"dtype": seen["dtype"], "param": str(m.fc.weight.dtype),
                                   "moved": not torch.equal(before, m.fc.weight),
                                   "flops": summary.total_flops,
                                   "layer_flops": [sum(v.values()) for v in
                                                   summary.flop_counts.values()],
                                   "step": t.global_step, "train_flops": train_flops}))
        """), tmp_path)
    r = _json(out)
    assert r["dtype"] == "torch.bfloat16" and r["param"] == "torch.float32" and r["moved"]
    assert r["step"] == 16
    # PyTorch's FlopCounterMode formulas: conv 2*out elements*(C_in*k*k), linear 2*M*N*K
    conv, fc = 2 * (2 * 8 * 8 * 8) * (1 * 3 * 3), 2 * 2 * 10 * 128
    assert r["flops"] == conv + fc and r["layer_flops"] == [conv, fc]
    # forward and backward (Lightning's measure_flops, as ThroughputMonitor uses it): the conv's
    # weight gradient (the input needs none) and the linear layer's two gradient products
    assert r["train_flops"] == 2 * conv + 3 * fc


def test_fabric_setup_backward_save_load(tmp_path):
    out = _run((MODULE, """
        fabric = L.Fabric(accelerator="cpu", devices=1)
        fabric.launch()
        torch.manual_seed(0)
        def make():
            return nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
        model = make()
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        model, opt = fabric.setup(model, opt)
        dl = fabric.setup_dataloaders(DataLoader(digits(512), batch_size=64))
        losses = []
        for epoch in range(3):
            for x, y in dl:
                loss = F.cross_entropy(model(x), y)
                opt.zero_grad()
                fabric.backward(loss)
                opt.step()
                losses.append(float(loss))
        fabric.save("f.ckpt", {"model": model, "optimizer": opt, "epoch": 3})
        model2 = make()
        opt2 = torch.optim.SGD(model2.parameters(), lr=0.1)
        model2, opt2 = fabric.setup(model2, opt2)
        state = {"model": model2, "optimizer": opt2, "epoch": 0}
        fabric.load("f.ckpt", state)
        same = all(torch.equal(a, b) for a, b in zip(model.parameters(), model2.parameters()))
        print("JSON" + json.dumps({"losses": losses, "epoch": state["epoch"], "same": same}))
        """), tmp_path)
    r = _json(out)
    assert r["losses"][-1] < 0.5 * r["losses"][0] and r["epoch"] == 3 and r["same"]


def test_more_trainer_features(tmp_path):
    pytest.importorskip("tensorboard")
    out = _run((MODULE, """
        import glob, warnings
        from lightning.pytorch import callbacks as C
        from lightning.pytorch.loggers import TensorBoardLogger
        warnings.simplefilter("ignore")
        ds = digits(256)
        res = {}
        def trainer(**kw):
            kw.setdefault("logger", False)
            return L.Trainer(max_epochs=kw.pop("epochs", 1), **quiet(enable_checkpointing=False,
                                                                      **kw))

        class DM(L.LightningDataModule):
            def train_dataloader(self):
                return DataLoader(ds, batch_size=32, shuffle=True, num_workers=2,
                                  persistent_workers=True)
        t = trainer()
        t.fit(Net(), datamodule=DM())
        res["datamodule_workers"] = t.global_step

        m = Net()
        t = trainer(epochs=1, callbacks=[C.ModelPruning("l1_unstructured", amount=0.5)])
        t.fit(m, DataLoader(ds, batch_size=32))
        # global L1 pruning (the callback's default) over the weights and biases: 1370 values
        w = torch.cat([p.detach().flatten() for p in (m.conv.weight, m.conv.bias,
                                                       m.fc.weight, m.fc.bias)])
        res["pruned"] = float((w == 0).float().mean())

        swa = C.StochasticWeightAveraging(swa_lrs=0.01, swa_epoch_start=1)
        t = trainer(epochs=3, callbacks=[swa])
        t.fit(Net(), DataLoader(ds, batch_size=32))
        res["swa_models"] = int(swa.n_averaged)  # as on PyTorch: 3 after epochs 1-2

        t = trainer(precision="16-mixed")  # on CPU Lightning switches to bf16-mixed
        seen = {}
        class Half(Net):
            def training_step(self, b, i):
                seen["dtype"] = str(self(b[0]).dtype)
                return super().training_step(b, i)
        t.fit(Half(), DataLoader(ds, batch_size=32))
        res["16-mixed"] = seen["dtype"]

        class Manual(Net):
            def __init__(self):
                super().__init__()
                self.automatic_optimization = False
            def training_step(self, b, i):
                opt = self.optimizers()
                opt.zero_grad()
                self.manual_backward(F.cross_entropy(self(b[0]), b[1]))
                self.clip_gradients(opt, 1.0, "norm")
                opt.step()
        t = trainer()
        t.fit(Manual(), DataLoader(ds, batch_size=32))
        res["manual_steps"] = t.global_step

        for name in ("simple", "advanced", "pytorch"):
            t = trainer(profiler=name, limit_train_batches=4)
            t.fit(Net(), DataLoader(ds, batch_size=32))
        res["profilers"] = True

        t = trainer(logger=TensorBoardLogger("tb"))
        t.fit(Net(), DataLoader(ds, batch_size=32))
        res["tb_files"] = len(glob.glob("tb/**/events.out.tfevents.*", recursive=True))

        t = trainer(epochs=3, callbacks=[C.LearningRateFinder(num_training_steps=20)])
        m = Net()
        t.fit(m, DataLoader(ds, batch_size=32))
        res["lr_found"] = m.hparams.lr != 0.05

        m = Net()
        m.eval()
        x = torch.zeros(2, 1, 8, 8)
        ts = m.to_torchscript(method="trace", example_inputs=x)
        res["torchscript"] = bool(torch.allclose(ts(x), m(x)))
        print("JSON" + json.dumps(res))
        """), tmp_path)
    r = _json(out)
    assert r["datamodule_workers"] == 8 and r["manual_steps"] == 8 and r["profilers"]
    assert r["pruned"] == 0.5 and r["swa_models"] == 3 and r["16-mixed"] == "torch.bfloat16"
    assert r["tb_files"] >= 1 and r["lr_found"] and r["torchscript"]


INTEROP = (MODULE, """
    mode = sys.argv[1]
    if mode == "save":
        t = L.Trainer(max_epochs=1, logger=False, **quiet(enable_checkpointing=False))
        m = Net(lr=0.01)
        t.fit(m, DataLoader(digits(128), batch_size=32))
        t.save_checkpoint(sys.argv[2])
        np.savez(sys.argv[2] + ".npz", **{k: v.numpy() for k, v in m.state_dict().items()})
    else:
        m = Net.load_from_checkpoint(sys.argv[2])
        want = np.load(sys.argv[2] + ".npz")
        sd = m.state_dict()
        equal = sorted(want.files) == sorted(sd) and all(
            np.array_equal(want[k], sd[k].numpy()) for k in sd)
        t = L.Trainer(max_epochs=2, logger=False, **quiet(enable_checkpointing=False))
        t.fit(Net(lr=0.01), DataLoader(digits(128), batch_size=32), ckpt_path=sys.argv[2])
        print("JSON" + json.dumps({"equal": equal, "hparams": dict(m.hparams),
                                   "resumed": [t.global_step, t.current_epoch]}))
""")


@pytest.mark.parity
@pytest.mark.parametrize("writer", ["fiamma", "torch"])
def test_checkpoints_load_in_the_other_library(tmp_path, writer):
    pytest.importorskip("torch")
    ckpt = tmp_path / "model.ckpt"
    _run(INTEROP, tmp_path, "save", ckpt, torch=writer == "torch")
    r = _json(_run(INTEROP, tmp_path, "load", ckpt, torch=writer == "fiamma"))
    assert r == {"equal": True, "hparams": {"lr": 0.01, "momentum": 0.9}, "resumed": [8, 2]}


METRICS = """
    import json
    import numpy as np, torch, torchmetrics as tm
    import torchmetrics.functional as TF
    rng = np.random.default_rng(0)
    out = {}
    def put(k, v):
        out[k] = v.tolist() if hasattr(v, "tolist") else v
    f32 = lambda a: torch.tensor(np.asarray(a, dtype=np.float32))
    bp, bt = f32(rng.random(200)), torch.tensor(rng.integers(0, 2, 200))
    for name, cls in [("acc", tm.Accuracy), ("f1", tm.F1Score), ("prec", tm.Precision),
                      ("rec", tm.Recall), ("auroc", tm.AUROC)]:
        m = cls(task="binary")
        m.update(bp[:100], bt[:100]); m.update(bp[100:], bt[100:])
        put("bin_" + name, m.compute())
    put("bin_cm", tm.ConfusionMatrix(task="binary")(bp, bt))
    probs = f32(rng.standard_normal((300, 5))).softmax(-1)
    mt = torch.tensor(rng.integers(0, 5, 300))
    for avg in ["micro", "macro", "weighted", "none"]:
        for name, cls in [("acc", tm.Accuracy), ("f1", tm.F1Score), ("prec", tm.Precision),
                          ("rec", tm.Recall)]:
            m = cls(task="multiclass", num_classes=5, average=avg)
            for i in range(3):
                m.update(probs[i * 100:(i + 1) * 100], mt[i * 100:(i + 1) * 100])
            put(f"mc_{name}_{avg}", m.compute())
    put("mc_auroc", tm.AUROC(task="multiclass", num_classes=5)(probs, mt))
    put("mc_auroc_none", tm.AUROC(task="multiclass", num_classes=5, average=None)(probs, mt))
    put("mc_cm", tm.ConfusionMatrix(task="multiclass", num_classes=5)(probs, mt))
    put("mc_cm_true", tm.ConfusionMatrix(task="multiclass", num_classes=5,
                                         normalize="true")(probs, mt))
    put("mc_top2", tm.Accuracy(task="multiclass", num_classes=5, top_k=2)(probs, mt))
    put("ml_f1", tm.F1Score(task="multilabel", num_labels=3)(
        f32(rng.random((50, 3))), torch.tensor(rng.integers(0, 2, (50, 3)))))
    yp = f32(rng.standard_normal(500))
    yt = yp * 0.7 + f32(rng.standard_normal(500)) * 0.3
    for name, cls in [("mse", tm.MeanSquaredError), ("mae", tm.MeanAbsoluteError),
                      ("r2", tm.R2Score), ("pearson", tm.PearsonCorrCoef)]:
        m = cls()
        for i in range(5):
            m.update(yp[i * 100:(i + 1) * 100], yt[i * 100:(i + 1) * 100])
        put("reg_" + name, m.compute())
    put("rmse", tm.MeanSquaredError(squared=False)(yp, yt))
    col = tm.MetricCollection({"acc": tm.Accuracy(task="multiclass", num_classes=5),
                               "f1": tm.F1Score(task="multiclass", num_classes=5,
                                                average="macro")}, prefix="val_")
    col.update(probs, mt)
    for k, v in col.compute().items():
        put("col_" + k, v)
    col.reset(); col.update(probs[:10], mt[:10]); put("col_after_reset", col.compute()["val_acc"])
    put("f_acc", TF.accuracy(probs, mt, task="multiclass", num_classes=5))
    put("f_f1", TF.f1_score(probs, mt, task="multiclass", num_classes=5, average="macro"))
    put("f_prec", TF.precision(bp, bt, task="binary"))
    put("f_recall", TF.recall(bp, bt, task="binary"))
    put("f_auroc", TF.auroc(bp, bt, task="binary"))
    put("f_cm", TF.confusion_matrix(probs, mt, task="multiclass", num_classes=5))
    put("f_mse", TF.mean_squared_error(yp, yt)); put("f_mae", TF.mean_absolute_error(yp, yt))
    put("f_r2", TF.r2_score(yp, yt)); put("f_pearson", TF.pearson_corrcoef(yp, yt))
    print("JSON" + json.dumps(out))
"""


def test_torchmetrics_against_hand_computed_values(tmp_path):
    r = _json(_run(METRICS, tmp_path))
    import numpy as np

    # the same numbers by numpy: the metrics' definitions, not PyTorch's results
    rng = np.random.default_rng(0)
    bp, bt = rng.random(200).astype(np.float32), rng.integers(0, 2, 200)
    pred = bp >= 0.5
    tp, fp, fn = (pred & (bt == 1)).sum(), (pred & (bt == 0)).sum(), (~pred & (bt == 1)).sum()
    assert r["bin_acc"] == pytest.approx((pred == bt).mean(), abs=1e-6)
    assert r["bin_prec"] == pytest.approx(tp / (tp + fp), abs=1e-6)
    assert r["bin_rec"] == pytest.approx(tp / (tp + fn), abs=1e-6)
    assert r["bin_f1"] == pytest.approx(2 * tp / (2 * tp + fp + fn), abs=1e-6)
    pos, neg = bp[bt == 1], bp[bt == 0]
    auc = ((pos[:, None] > neg[None]).sum() + 0.5 * (pos[:, None] == neg[None]).sum()) / (
        len(pos) * len(neg))
    assert r["bin_auroc"] == pytest.approx(auc, abs=1e-5)
    assert np.asarray(r["bin_cm"]).sum() == 200 and r["bin_cm"][1][1] == tp
    assert r["f_cm"] == r["mc_cm"] and np.asarray(r["mc_cm"]).sum() == 300
    assert r["col_val_acc"] == pytest.approx(r["mc_acc_micro"])
    assert r["col_val_f1"] == pytest.approx(r["mc_f1_macro"])
    assert r["f_f1"] == pytest.approx(r["mc_f1_macro"]) and r["f_acc"] == r["mc_acc_micro"]
    assert r["reg_mse"] == pytest.approx(r["f_mse"]) and r["rmse"] == pytest.approx(
        r["reg_mse"] ** 0.5, rel=1e-5)


@pytest.mark.parity
def test_torchmetrics_parity(tmp_path):
    pytest.importorskip("torch")
    import numpy as np

    ours = _json(_run(METRICS, tmp_path, name="ours.py"))
    ref = _json(_run(METRICS, tmp_path, name="ref.py", torch=True))
    assert sorted(ours) == sorted(ref)
    for k in ref:
        np.testing.assert_allclose(np.asarray(ours[k], float), np.asarray(ref[k], float),
                                   rtol=1e-5, atol=1e-6, err_msg=k)


# 57 more metrics and wrappers (classification curves and scores, regression, aggregation,
# image, audio, retrieval, nominal, clustering, segmentation, wrappers), each one value or vector
METRICS_WIDE = """
import json, warnings
import numpy as np, torch, torchmetrics as tm
import torchmetrics.functional as TF
import torchmetrics.clustering, torchmetrics.segmentation, torchmetrics.functional.segmentation
warnings.simplefilter("ignore")
rng = np.random.default_rng(0)
f32 = lambda a: torch.tensor(np.asarray(a, dtype=np.float32))
bp, bt = f32(rng.random(200)), torch.tensor(rng.integers(0, 2, 200))
probs = f32(rng.standard_normal((300, 5))).softmax(-1)
mt = torch.tensor(rng.integers(0, 5, 300))
labels = probs.argmax(-1)
mlp, mlt = f32(rng.random((60, 4))), torch.tensor(rng.integers(0, 2, (60, 4)))
yp = f32(rng.standard_normal(300))
yt = yp * 0.6 + f32(rng.standard_normal(300)) * 0.4
ypp, ytp = yp.abs() + 0.1, yt.abs() + 0.1
img1 = f32(rng.random((2, 3, 32, 32)))
img2 = (img1 + f32(rng.standard_normal((2, 3, 32, 32))) * 0.05).clamp(0, 1)
aud1 = f32(rng.standard_normal((2, 800)))
aud2 = aud1 + f32(rng.standard_normal((2, 800))) * 0.3
p_ = f32(rng.random((10, 6)))
q_ = f32(rng.random((10, 6)))
p_, q_ = p_ / p_.sum(-1, keepdim=True), q_ / q_.sum(-1, keepdim=True)
idx = torch.tensor(rng.integers(0, 8, 200))
groups = torch.arange(200) % 2
MC = dict(task="multiclass", num_classes=5)


def flat(*ts):
    return torch.cat([torch.as_tensor(t, dtype=torch.float32).flatten() for t in ts])


def mean_metric():
    m = tm.MeanMetric()
    m.update(yp[:100])
    m.update(yp[100:], weight=2.0)
    return m.compute()


def running_mean():
    m = tm.RunningMean(window=5)
    for v in yp[:20]:
        m(v)
    return m.compute()


def tracker():
    tr = tm.MetricTracker(tm.Accuracy(**MC))
    for i in range(3):
        tr.increment()
        tr.update(probs[i * 50:(i + 1) * 50], mt[i * 50:(i + 1) * 50])
    return tr.compute_all()


def multitask():
    m = tm.MultitaskWrapper({"a": tm.Accuracy(task="binary"), "b": tm.MeanSquaredError()})
    return flat(*m({"a": bp, "b": yp[:200]}, {"a": bt, "b": yt[:200]}).values())


cases = {
    "avgprec_bin": lambda: tm.AveragePrecision(task="binary")(bp, bt),
    "avgprec_mc": lambda: tm.AveragePrecision(**MC)(probs, mt),
    "roc_bin": lambda: flat(*tm.ROC(task="binary")(bp, bt)),
    "prc_bin": lambda: flat(*tm.PrecisionRecallCurve(task="binary")(bp, bt)),
    "prc_bin_thr": lambda: flat(*tm.PrecisionRecallCurve(task="binary", thresholds=11)(bp, bt)),
    "auroc_ml": lambda: tm.AUROC(task="multilabel", num_labels=4)(mlp, mlt),
    "stat_scores": lambda: tm.StatScores(**MC)(probs, mt),
    "specificity": lambda: tm.Specificity(**MC)(probs, mt),
    "mcc": lambda: tm.MatthewsCorrCoef(**MC)(probs, mt),
    "cohen": lambda: tm.CohenKappa(**MC)(probs, mt),
    "jaccard": lambda: tm.JaccardIndex(**MC)(probs, mt),
    "hamming": lambda: tm.HammingDistance(task="multilabel", num_labels=4)(mlp, mlt),
    "fbeta": lambda: tm.FBetaScore(beta=2.0, **MC)(probs, mt),
    "calibration": lambda: tm.CalibrationError(**MC)(probs, mt),
    "hinge": lambda: tm.HingeLoss(task="binary")(bp, bt),
    "exact_match": lambda: tm.ExactMatch(task="multilabel", num_labels=4)(mlp, mlt),
    "ml_ranking": lambda: tm.classification.MultilabelRankingAveragePrecision(num_labels=4)(
        mlp, mlt),
    "mse_log": lambda: tm.MeanSquaredLogError()(ypp, ytp),
    "mape": lambda: tm.MeanAbsolutePercentageError()(yp, yt),
    "smape": lambda: tm.SymmetricMeanAbsolutePercentageError()(yp, yt),
    "explained_var": lambda: tm.ExplainedVariance()(yp, yt),
    "spearman": lambda: tm.SpearmanCorrCoef()(yp, yt),
    "kendall": lambda: tm.KendallRankCorrCoef()(yp, yt),
    "cosine": lambda: tm.CosineSimilarity(reduction="mean")(yp.reshape(30, 10),
                                                            yt.reshape(30, 10)),
    "concordance": lambda: tm.ConcordanceCorrCoef()(yp, yt),
    "tweedie": lambda: tm.TweedieDevianceScore(power=1.5)(ypp, ytp),
    "kl": lambda: tm.KLDivergence()(p_, q_),
    "log_cosh": lambda: tm.LogCoshError()(yp, yt),
    "minkowski": lambda: tm.MinkowskiDistance(p=3)(yp, yt),
    "r2_adjusted": lambda: tm.R2Score(adjusted=2)(yp, yt),
    "mean_metric": mean_metric,
    "sum_max_min": lambda: flat(tm.SumMetric()(yp), tm.MaxMetric()(yp), tm.MinMetric()(yp)),
    "cat_metric": lambda: tm.CatMetric()(yp[:5]),
    "running_mean": running_mean,
    "psnr": lambda: tm.image.PeakSignalNoiseRatio(data_range=1.0)(img2, img1),
    "ssim": lambda: tm.image.StructuralSimilarityIndexMeasure(data_range=1.0)(img2, img1),
    "ms_ssim": lambda: tm.image.MultiScaleStructuralSimilarityIndexMeasure(
        data_range=1.0, kernel_size=3, betas=(0.5, 0.5))(img2, img1),
    "total_variation": lambda: tm.image.TotalVariation()(img1),
    "uqi": lambda: tm.image.UniversalImageQualityIndex()(img2, img1),
    "snr": lambda: tm.audio.SignalNoiseRatio()(aud2, aud1),
    "si_snr": lambda: tm.audio.ScaleInvariantSignalNoiseRatio()(aud2, aud1),
    "si_sdr": lambda: tm.audio.ScaleInvariantSignalDistortionRatio()(aud2, aud1),
    "retrieval_map": lambda: tm.retrieval.RetrievalMAP()(bp, bt, indexes=idx),
    "retrieval_mrr": lambda: tm.retrieval.RetrievalMRR()(bp, bt, indexes=idx),
    "retrieval_ndcg": lambda: tm.retrieval.RetrievalNormalizedDCG()(bp, bt, indexes=idx),
    "retrieval_prec": lambda: tm.retrieval.RetrievalPrecision(top_k=3)(bp, bt, indexes=idx),
    "classwise": lambda: flat(*tm.ClasswiseWrapper(tm.Accuracy(average=None, **MC))(
        probs, mt).values()),
    "tracker": tracker,
    "multitask": multitask,
    "minmax_wrapper": lambda: flat(*tm.wrappers.MinMaxMetric(tm.Accuracy(task="binary"))(
        bp, bt).values()),
    "dice": lambda: tm.segmentation.DiceScore(num_classes=5, input_format="index")(
        labels.reshape(10, 30), mt.reshape(10, 30)),
    "f_dice": lambda: TF.segmentation.dice_score(labels.reshape(10, 30), mt.reshape(10, 30),
                                                 num_classes=5, input_format="index"),
    "fairness": lambda: flat(*tm.classification.BinaryFairness(num_groups=2)(
        bp, bt, groups).values()),
    "cramers_v": lambda: tm.nominal.CramersV(num_classes=5)(labels, mt),
    "mutual_info": lambda: tm.clustering.MutualInfoScore()(labels, mt),
    "rand_score": lambda: tm.clustering.RandScore()(labels, mt),
    "pairwise": lambda: TF.pairwise_euclidean_distance(yp.reshape(30, 10)[:5],
                                                       yt.reshape(30, 10)[:4]),
}
out = {}
for k, fn in cases.items():
    try:
        out[k] = torch.as_tensor(fn()).double().flatten().tolist()
    except Exception as e:
        out[k] = "ERR " + type(e).__name__ + ": " + str(e)[:200]
print("JSON" + json.dumps(out))
"""


@pytest.mark.parity
def test_torchmetrics_wider_parity(tmp_path):
    pytest.importorskip("torch")
    import numpy as np

    ours = _json(_run(METRICS_WIDE, tmp_path, name="ours.py"))
    ref = _json(_run(METRICS_WIDE, tmp_path, name="ref.py", torch=True))
    assert sorted(ours) == sorted(ref)
    failed = {k: v for k, v in ref.items() if isinstance(v, str)}
    assert not failed, failed  # the reference computes every case
    for k in ref:
        assert not isinstance(ours[k], str), (k, ours[k])
        np.testing.assert_allclose(np.asarray(ours[k], float), np.asarray(ref[k], float),
                                   rtol=1e-4, atol=1e-5, err_msg=k)


DDP = (MODULE, """
    strategy = sys.argv[1]
    W = np.random.default_rng(3).standard_normal((10, 64)).astype(np.float32) * 0.1

    class Lin(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(64, 10)
            with torch.no_grad():
                self.fc.weight.copy_(torch.tensor(W)); self.fc.bias.zero_()
            import torchmetrics
            # the epoch's training accuracy: compute() gathers every rank's counts
            self.acc = torchmetrics.Accuracy(task="multiclass", num_classes=10)
            self.seen = torchmetrics.CatMetric()
        def training_step(self, b, i):
            logits = self.fc(b[0].flatten(1))
            loss = F.cross_entropy(logits, b[1])
            self.log("loss", loss, sync_dist=True)
            self.acc.update(logits.argmax(1), b[1])
            self.seen.update(b[1].float())
            return loss
        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.5)
        def train_dataloader(self):
            # not shuffled (Lightning's own DistributedSampler would shuffle with the library's
            # RNG, whose numbers differ between fiamma and PyTorch): two ranks of batch 8, the
            # samples dealt alternately, average to the gradient of one batch of 16
            from torch.utils.data.distributed import DistributedSampler
            ds, world = digits(128), self.trainer.world_size
            if world == 1:
                return DataLoader(ds, batch_size=16)
            return DataLoader(ds, batch_size=8, sampler=DistributedSampler(
                ds, num_replicas=world, rank=self.global_rank, shuffle=False))
        def test_step(self, b, i):
            acc = (self.fc(b[0].flatten(1)).argmax(1) == b[1]).float().mean()
            self.log("test_acc", acc, sync_dist=True)
        def on_test_end(self):  # (a DDP test run: Lightning syncs the unwrapped model first)
            with open(f"{strategy}-test-rank{self.global_rank}.json", "w") as f:
                json.dump({"acc": float(self.trainer.callback_metrics["test_acc"])}, f)
        def on_train_end(self):  # one file per rank (their stdout lines can interleave)
            with open(f"{strategy}-rank{self.global_rank}.json", "w") as f:
                json.dump({"rank": self.global_rank, "world": self.trainer.world_size,
                           "step": self.trainer.global_step,
                           "w": self.fc.weight.detach().flatten()[:40].tolist(),
                           "acc": float(self.acc.compute()),
                           "seen": sorted(self.seen.compute().tolist()),
                           "loss": float(self.trainer.callback_metrics["loss"])}, f)

    if __name__ == "__main__":
        one = strategy == "single"
        t = L.Trainer(max_epochs=1, logger=False, devices=1 if one else 2,
                      strategy="auto" if one else strategy, use_distributed_sampler=False,
                      **quiet(enable_checkpointing=False))
        t.fit(Lin())
        if strategy != "ddp_spawn":  # (spawn: the test would start two more processes)
            t.test(ckpt_path=None, model=t.lightning_module,
                   dataloaders=DataLoader(digits(64, seed=2), batch_size=16))
""")


@pytest.mark.slow
def test_ddp_spawn_two_processes_equal_one_process(tmp_path):
    import numpy as np

    _run(DDP, tmp_path, "ddp_spawn", name="ddp.py", timeout=600)
    _run(DDP, tmp_path, "single", name="one.py")
    ranks = [json.loads((tmp_path / f"ddp_spawn-rank{r}.json").read_text()) for r in (0, 1)]
    single = json.loads((tmp_path / "single-rank0.json").read_text())

    assert [(d["rank"], d["world"], d["step"]) for d in ranks] == [(0, 2, 8), (1, 2, 8)]
    assert ranks[0]["w"] == ranks[1]["w"]
    np.testing.assert_allclose(ranks[0]["w"], single["w"], rtol=1e-5, atol=1e-6)
    assert single["step"] == 8
    # torchmetrics synchronises over the ranks: every rank's metric covers all 128 samples
    assert ranks[0]["seen"] == ranks[1]["seen"] == single["seen"] and len(single["seen"]) == 128
    assert ranks[0]["acc"] == ranks[1]["acc"] and abs(ranks[0]["acc"] - single["acc"]) < 1e-6
    # the logged loss with sync_dist=True: the two ranks' mean, the same on both
    assert ranks[0]["loss"] == ranks[1]["loss"]


@pytest.mark.slow
def test_ddp_strategy_under_the_launcher(tmp_path):
    # strategy="ddp" starts its other ranks as `python script.py` (outside fiamma.run); under
    # a torchrun-style launcher Lightning starts none and joins the launcher's ranks instead
    import numpy as np

    path = tmp_path / "ddp.py"
    path.write_text(HIDE_TRANSFORMERS + "".join(textwrap.dedent(p) for p in DDP))
    cmd = [sys.executable, "-m", "fiamma.distributed.run", "--nproc-per-node", "2", "-m",
           "fiamma.run", str(path), "ddp"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=_env(),
                       cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    _run(DDP, tmp_path, "single", name="one.py")
    ranks = [json.loads((tmp_path / f"ddp-rank{k}.json").read_text()) for k in (0, 1)]
    single = json.loads((tmp_path / "single-rank0.json").read_text())
    # testing on 2 ranks (half the batches each, synced mean) as on one
    tests = [json.loads((tmp_path / f"{s}-test-rank{k}.json").read_text())["acc"]
             for s, k in (("ddp", 0), ("ddp", 1), ("single", 0))]
    assert tests[0] == tests[1] and abs(tests[0] - tests[2]) < 1e-6
    assert [(d["rank"], d["world"], d["step"]) for d in ranks] == [(0, 2, 8), (1, 2, 8)]
    assert ranks[0]["w"] == ranks[1]["w"]
    np.testing.assert_allclose(ranks[0]["w"], single["w"], rtol=1e-5, atol=1e-6)
    assert ranks[0]["seen"] == ranks[1]["seen"] == single["seen"]
    assert ranks[0]["acc"] == ranks[1]["acc"] and abs(ranks[0]["acc"] - single["acc"]) < 1e-6


FABRIC_DDP = """
import sys, json
import numpy as np, torch, torch.nn as nn, torch.nn.functional as F
import lightning as L
from torch.utils.data import DataLoader, TensorDataset


def run(fabric, batch):
    rng = np.random.default_rng(0)
    ds = TensorDataset(torch.tensor(rng.standard_normal((64, 8)).astype(np.float32)),
                       torch.tensor(rng.integers(0, 2, 64)))
    m = nn.Linear(8, 2)
    with torch.no_grad():
        m.weight.copy_(torch.tensor(np.random.default_rng(1).standard_normal((2, 8)),
                                    dtype=torch.float32))
        m.bias.zero_()
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    m, opt = fabric.setup(m, opt)
    for x, y in fabric.setup_dataloaders(DataLoader(ds, batch_size=batch)):
        opt.zero_grad()
        fabric.backward(F.cross_entropy(m(x), y))
        opt.step()
    sums = fabric.all_gather(m.weight.detach().sum())  # one per rank
    ranks = fabric.all_reduce(torch.tensor(float(fabric.global_rank)), reduce_op="sum")
    if fabric.global_rank == 0:
        with open(f"fabric-{fabric.world_size}.json", "w") as f:
            json.dump({"sums": sums.flatten().tolist(), "ranks": float(ranks),
                       "w": m.weight.detach().flatten().tolist()}, f)


if __name__ == "__main__":
    n = int(sys.argv[1])
    fabric = L.Fabric(accelerator="cpu", devices=n, strategy="ddp_spawn" if n > 1 else "auto")
    fabric.launch(run, 16 // n)  # two ranks of 8 (dealt alternately): one batch of 16
"""


@pytest.mark.slow
def test_fabric_ddp_spawn_equals_one_process(tmp_path):
    import numpy as np

    _run(FABRIC_DDP, tmp_path, 2, name="two.py", timeout=600)
    _run(FABRIC_DDP, tmp_path, 1, name="one.py")
    two = json.loads((tmp_path / "fabric-2.json").read_text())
    one = json.loads((tmp_path / "fabric-1.json").read_text())
    assert len(two["sums"]) == 2 and two["sums"][0] == two["sums"][1] and two["ranks"] == 1.0
    np.testing.assert_allclose(two["w"], one["w"], rtol=1e-5, atol=1e-6)


@pytest.mark.parity
def test_trainer_steps_match_pytorch(tmp_path):
    # the same weights, data and 8 SGD steps through Lightning's loop: the same weights after
    pytest.importorskip("torch")
    import numpy as np

    _run(DDP, tmp_path, "single", name="one.py")
    ours = json.loads((tmp_path / "single-rank0.json").read_text())
    _run(DDP, tmp_path, "single", name="one.py", torch=True)
    ref = json.loads((tmp_path / "single-rank0.json").read_text())
    assert ours["step"] == ref["step"] == 8
    np.testing.assert_allclose(ours["w"], ref["w"], rtol=1e-5, atol=1e-6)
