"""Training on a device other than the CPU (core, autograd, nn, optim and data together): the
same models, initialised from one state_dict, trained the same steps on the device and on the
CPU, end equal; gradients of common ops equal the CPU's; checkpoints of a device model load
anywhere. Devices: ``xp`` always, ``cuda`` on a GPU (tests/conftest.py).

Parts whose backend family a device does not run yet (embedding/cross-entropy: index ops;
layer norm and convolutions: fused kernels) skip, naming what is missing."""

import io

import pytest
from conftest import assert_same, needs_device_support

import fiamma
import fiamma.nn as nn
import fiamma.nn.functional as F

TOL = dict(rtol=1e-4, atol=1e-5)


def _twin(make, device):
    """(cpu model, device model) with the same parameters."""
    fiamma.manual_seed(0)
    cpu = make()
    dev = make()
    dev.load_state_dict(cpu.state_dict())
    return cpu, dev.to(device)


def _assert_models_equal(dev, cpu, **tol):
    sd_dev, sd_cpu = dev.state_dict(), cpu.state_dict()
    assert list(sd_dev) == list(sd_cpu)
    for k in sd_cpu:
        assert sd_dev[k].device.type != "cpu", k
        assert_same(sd_dev[k], sd_cpu[k], **(tol or TOL))


def _batch(n=32, d=784, classes=10, seed=1):
    g = fiamma.Generator().manual_seed(seed)
    return fiamma.randn(n, d, generator=g), fiamma.randint(0, classes, (n,), generator=g)


# ---- MLP 784-512-512-10 -------------------------------------------------------------------------

def _mlp():
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def _mse_loss(out, y):
    """MSE against the one-hot targets (built by a comparison: no index ops)."""
    return F.mse_loss(out, (y.unsqueeze(1) == fiamma.arange(10, device=out.device)).float())


LOSSES = {"mse": _mse_loss, "cross_entropy": F.cross_entropy}
OPTIMS = {"sgd": lambda p: fiamma.optim.SGD(p, lr=0.05, momentum=0.9),
          # eps above float32 rounding noise: Adam's first steps are ~lr * sign(grad), so an
          # element whose gradient is ~1e-8 would step either way on two devices (seen on an
          # H200: 1 of 262144 weights 0.3% apart with the default eps)
          "adam": lambda p: fiamma.optim.Adam(p, lr=1e-3, eps=1e-5)}


@pytest.mark.parametrize("opt", sorted(OPTIMS))
@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_mlp_training_matches_cpu(device, opt, loss):
    cpu, dev = _twin(_mlp, device)
    x, y = _batch()
    xd, yd = x.to(device), y.to(device)
    lossf = LOSSES[loss]
    needs_device_support(device, loss, lambda: lossf(dev(xd), yd))
    ocpu, odev = OPTIMS[opt](cpu.parameters()), OPTIMS[opt](dev.parameters())
    for _ in range(3):
        for model, o, a, b in ((cpu, ocpu, x, y), (dev, odev, xd, yd)):
            o.zero_grad()
            ls = lossf(model(a), b)
            ls.backward()
            o.step()
        assert ls.device.type == device
    _assert_models_equal(dev, cpu)
    for p in dev.parameters():
        assert p.grad.device.type == device
    for st in odev.state.values():
        for k, v in st.items():
            if isinstance(v, fiamma.Tensor) and v.ndim:
                assert v.device.type == device, k


# ---- optimizers, schedulers, clipping ------------------------------------------------------------

OPTIMIZERS = {
    "sgd_nesterov": lambda p: fiamma.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True,
                                               weight_decay=1e-2),
    "sgd_foreach": lambda p: fiamma.optim.SGD(p, lr=0.1, momentum=0.5, foreach=True),
    "adam_amsgrad": lambda p: fiamma.optim.Adam(p, lr=1e-2, amsgrad=True),
    "adam_foreach": lambda p: fiamma.optim.Adam(p, lr=1e-2, foreach=True),
    "adamw": lambda p: fiamma.optim.AdamW(p, lr=1e-2, weight_decay=0.1),
    "rmsprop": lambda p: fiamma.optim.RMSprop(p, lr=1e-2, momentum=0.5, centered=True),
    "adagrad": lambda p: fiamma.optim.Adagrad(p, lr=1e-1),
    "adamax": lambda p: fiamma.optim.Adamax(p, lr=1e-2),
    "nadam": lambda p: fiamma.optim.NAdam(p, lr=1e-2),
    "radam": lambda p: fiamma.optim.RAdam(p, lr=1e-2),
    "adadelta": lambda p: fiamma.optim.Adadelta(p),
    "rprop": lambda p: fiamma.optim.Rprop(p, lr=1e-2),
    "asgd": lambda p: fiamma.optim.ASGD(p, lr=1e-2),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_steps_match_cpu(device, name):
    def make():
        return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))

    cpu, dev = _twin(make, device)
    x, _ = _batch(12, 8)
    t, _ = _batch(12, 3, seed=2)
    runs = []
    for model, a, b in ((cpu, x, t), (dev, x.to(device), t.to(device))):
        o = OPTIMIZERS[name](model.parameters())
        sched = fiamma.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5)
        for _ in range(4):
            o.zero_grad()
            F.mse_loss(model(a), b).backward()
            norm = nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            o.step()
            sched.step()
        runs.append(norm)
    assert runs[1].device.type == device
    assert_same(runs[1], runs[0], **TOL)
    _assert_models_equal(dev, cpu)


def test_lbfgs_matches_cpu(device):
    cpu, dev = _twin(lambda: nn.Linear(5, 2), device)
    x, _ = _batch(10, 5)
    t, _ = _batch(10, 2, seed=3)
    for model, a, b in ((cpu, x, t), (dev, x.to(device), t.to(device))):
        o = fiamma.optim.LBFGS(model.parameters(), lr=0.5, max_iter=5)

        def closure():
            o.zero_grad()
            ls = F.mse_loss(model(a), b)
            ls.backward()
            return ls

        o.step(closure)
    _assert_models_equal(dev, cpu, rtol=1e-4, atol=1e-4)


# ---- attention and transformer blocks ------------------------------------------------------------

class _AttnBlock(nn.Module):
    """Causal multi-head attention with an MLP and residuals (no norms, no embedding)."""

    def __init__(self, d=16, heads=4):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        L = x.shape[1]
        mask = fiamma.full((L, L), float("-inf"), device=x.device).triu(1)
        x = x + self.attn(x, x, x, attn_mask=mask, need_weights=False)[0]
        return x + self.fc2(F.gelu(self.fc1(x)))


class _GPTBlock(nn.Module):
    """A GPT-style model: token and position embeddings, pre-norm causal attention written
    out (softmax attention), an MLP, a final norm and the vocabulary head."""

    def __init__(self, vocab=20, d=16, heads=4, block=8):
        super().__init__()
        self.heads = heads
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.ln1, self.ln2, self.lnf = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        B, L = idx.shape
        x = self.tok(idx) + self.pos(fiamma.arange(L, device=idx.device))
        q, k, v = self.qkv(self.ln1(x)).split(x.shape[-1], dim=2)
        hd = x.shape[-1] // self.heads
        q, k, v = (t.view(B, L, self.heads, hd).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * hd ** -0.5
        causal = fiamma.ones(L, L, device=idx.device).tril() == 0
        att = att.masked_fill(causal, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, L, -1)
        x = x + self.proj(y)
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))
        return self.head(self.lnf(x))


def _grads_equal(dev, cpu, **tol):
    for (name, pc), pd in zip(cpu.named_parameters(), dev.parameters()):
        assert pd.grad is not None and pd.grad.device.type != "cpu", name
        assert_same(pd.grad, pc.grad, **(tol or TOL))


def test_attention_block_forward_backward(device):
    cpu, dev = _twin(_AttnBlock, device)
    x, _ = _batch(3 * 8, 16)
    x = x.reshape(3, 8, 16)
    yc, yd = cpu(x), dev(x.to(device))
    assert_same(yd, yc, **TOL)
    (yc ** 2).mean().backward()
    (yd ** 2).mean().backward()
    _grads_equal(dev, cpu)


def test_gpt_block_training_matches_cpu(device):
    cpu, dev = _twin(_GPTBlock, device)
    g = fiamma.Generator().manual_seed(4)
    idx = fiamma.randint(0, 20, (4, 8), generator=g)
    tgt = fiamma.randint(0, 20, (4, 8), generator=g)
    idd, tgd = idx.to(device), tgt.to(device)
    needs_device_support(device, "embedding", lambda: F.embedding(idd[:1], dev.tok.weight))
    needs_device_support(device, "layer_norm", lambda: dev.ln1(dev.tok.weight))
    needs_device_support(device, "cross_entropy",
                         lambda: F.cross_entropy(dev.tok.weight[:2], tgd[0, :2]))
    losses = []
    for model, a, b in ((cpu, idx, tgt), (dev, idd, tgd)):
        # SGD, not Adam: the key bias's true gradient is 0 (softmax ignores a per-row shift),
        # and Adam would scale its rounding noise (~1e-9) up to a full step
        o = fiamma.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for step in range(2):
            o.zero_grad()
            ls = F.cross_entropy(model(a).reshape(-1, 20), b.reshape(-1))
            ls.backward()
            if step == 0:
                losses.append(ls)
            o.step()
    assert_same(losses[1], losses[0], **TOL)
    _assert_models_equal(dev, cpu)


def test_transformer_encoder_layer(device):
    def make():
        return nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.0,
                                          batch_first=True)

    cpu, dev = _twin(make, device)
    x, _ = _batch(2 * 6, 16)
    x = x.reshape(2, 6, 16)
    xd = x.to(device)
    needs_device_support(device, "layer_norm", lambda: dev.norm1(xd))
    yc, yd = cpu(x), dev(xd)
    assert_same(yd, yc, **TOL)
    yc.sum().backward()
    yd.sum().backward()
    _grads_equal(dev, cpu)


MODULES = {
    "lstm": (lambda: nn.LSTM(4, 6, num_layers=2), (5, 3, 4)),
    "gru_bidirectional": (lambda: nn.GRU(4, 6, bidirectional=True), (5, 3, 4)),
    "rnn_tanh": (lambda: nn.RNN(4, 6), (5, 3, 4)),
    "lstm_cell": (lambda: nn.LSTMCell(4, 6), (3, 4)),
    "prelu_mlp": (lambda: nn.Sequential(nn.Linear(4, 8), nn.PReLU(), nn.Hardswish(),
                                        nn.Linear(8, 4), nn.Mish()), (3, 4)),
    "mha_seq_first": (lambda: nn.MultiheadAttention(4, 2), (5, 3, 4)),
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_forward_backward(device, name):
    make, shape = MODULES[name]
    cpu, dev = _twin(make, device)
    x, _ = _batch(int(fiamma.tensor(shape).prod()) // shape[-1], shape[-1], seed=8)
    x = x.reshape(shape)
    args = (x, x, x) if name.startswith("mha") else (x,)
    yc, yd = cpu(*args), dev(*(a.to(device) for a in args))
    yc, yd = (yc[0], yd[0]) if isinstance(yc, tuple) else (yc, yd)
    assert_same(yd, yc, **TOL)
    yc.pow(2).sum().backward()
    yd.pow(2).sum().backward()
    _grads_equal(dev, cpu)


LOSS_FNS = {
    "huber": lambda a, b: F.huber_loss(a, b, delta=0.5),
    "smooth_l1": lambda a, b: F.smooth_l1_loss(a, b),
    "l1": lambda a, b: F.l1_loss(a, b, reduction="sum"),
    "bce": lambda a, b: F.binary_cross_entropy(a.sigmoid(), (b > 0).to(a.dtype)),
    "cosine_embedding": lambda a, b: F.cosine_embedding_loss(
        a, b, fiamma.tensor([1.0, -1.0, 1.0, -1.0], dtype=a.dtype).to(a.device)),
    "triplet": lambda a, b: F.triplet_margin_loss(a, b, a.flip(0)),
    "poisson_nll": lambda a, b: F.poisson_nll_loss(a, b.abs()),
    "gaussian_nll": lambda a, b: F.gaussian_nll_loss(a, b, b.abs() + 0.1),
    "multilabel_soft_margin": lambda a, b: F.multilabel_soft_margin_loss(a, (b > 0).to(a.dtype)),
    "soft_margin": lambda a, b: F.soft_margin_loss(a, b.sign()),
}


@pytest.mark.parametrize("name", sorted(LOSS_FNS))
def test_losses_match_cpu(device, name):
    a, _ = _batch(4, 5, seed=9)
    b, _ = _batch(4, 5, seed=10)
    a, b = a.double(), b.double()
    res = []
    for x, y in ((a, b), (a.to(device), b.to(device))):
        x = x.clone().requires_grad_()
        loss = LOSS_FNS[name](x, y)
        loss.backward()
        res.append((loss, x.grad))
    for got, want in zip(res[1], res[0]):
        assert got.device.type == device
        assert_same(got, want, rtol=1e-10, atol=1e-12)


# ---- gradients of common ops ---------------------------------------------------------------------

OPS = {
    "matmul": lambda a, b: (a @ b.T).sum(),
    "softmax": lambda a, b: (a.softmax(-1) * b).sum(),
    "log_softmax": lambda a, b: (F.log_softmax(a, 1) * b).sum(),
    "gelu_tanh_sigmoid": lambda a, b: (F.gelu(a) + a.tanh() * b.sigmoid()).sum(),
    "relu_silu": lambda a, b: (F.relu(a) * F.silu(b)).sum(),
    "elu_softplus": lambda a, b: (F.elu(a) + F.softplus(b)).sum(),
    "reductions": lambda a, b: a.mean() + b.var(0).sum() + a.amax(1).sum() + b.norm(),
    "exp_log_pow": lambda a, b: (a.exp() + (b.abs() + 1).log() + a.pow(3)).sum(),
    "shape": lambda a, b: (fiamma.cat([a, b], 1).reshape(-1, 2).T @ fiamma.stack([a, b])
                           .reshape(-1, 2)).sum(),
    "where_max": lambda a, b: fiamma.where(a > b, a * 2, b).sum() + fiamma.maximum(a, b).sum(),
    "flip_roll_tril": lambda a, b: (a.flip(0).roll(1, 1) * b.tril()).sum(),
    "linalg": lambda a, b: fiamma.linalg.inv(a @ a.T + 5 * fiamma.eye(4, device=a.device,
                                                                      dtype=a.dtype)).sum(),
    "mse_bce": lambda a, b: F.mse_loss(a, b) + F.binary_cross_entropy_with_logits(a, b.sigmoid()),
    "linear": lambda a, b: F.linear(a, b, b[0]).sum(),
    "attention": lambda a, b: F.scaled_dot_product_attention(a[None], b[None], a[None],
                                                             is_causal=True).sum(),
    "cumsum_prod": lambda a, b: (a.cumsum(1) * b).sum() + a[:, :2].prod(),
    "normalize": lambda a, b: (F.normalize(a, dim=1) * b).sum() + F.cosine_similarity(a, b).sum(),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_gradients_match_cpu(device, name):
    a, _ = _batch(4, 4, seed=5)
    b, _ = _batch(4, 4, seed=6)
    a, b = a.double(), b.double()
    grads = []
    for x, y in ((a, b), (a.to(device), b.to(device))):
        x, y = x.clone().requires_grad_(), y.clone().requires_grad_()
        out = OPS[name](x, y)
        out.backward()
        grads.append((out, x.grad, y.grad))
    for got, want in zip(grads[1], grads[0]):
        assert (got is None) == (want is None)
        if got is not None:
            assert got.device.type == device
            assert_same(got, want, rtol=1e-10, atol=1e-12)


def test_gradcheck_on_device(device):
    x = fiamma.randn(3, 4, dtype=fiamma.float64).to(device).requires_grad_()
    w = fiamma.randn(4, 2, dtype=fiamma.float64).to(device).requires_grad_()
    assert fiamma.autograd.gradcheck(lambda a, b: (a @ b).tanh().softmax(-1), (x, w))
    assert fiamma.autograd.gradgradcheck(lambda a: (a * a).sin(), (x,))


def test_backward_seeds_and_grads_cross_devices(device):
    w = fiamma.randn(3, requires_grad=True)
    wd = w.to(device)
    (wd * wd).sum().backward()  # the gradient comes back to the CPU leaf
    assert w.grad.device.type == "cpu"
    assert_same(w.grad, 2 * w.detach())
    v = fiamma.randn(3).to(device).requires_grad_()
    (v * 3).sum().backward()
    (v * 2).sum().backward()  # accumulates on the device
    assert v.grad.device.type == device and v.grad.tolist() == [5.0, 5.0, 5.0]


# ---- modules across devices, checkpoints ---------------------------------------------------------

class _WithBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.register_buffer("scale", fiamma.tensor([1.0, 2.0, 3.0]))

    def forward(self, x):
        return self.fc(x) * self.scale


def test_module_to_and_state_dict(device):
    cpu, dev = _twin(_WithBuffer, device)
    assert all(p.device.type == device for p in dev.parameters())
    assert dev.scale.device.type == device
    assert isinstance(dev.fc.weight, nn.Parameter) and dev.fc.weight.requires_grad
    x, _ = _batch(5, 4)
    assert_same(dev(x.to(device)), cpu(x))
    buf = io.BytesIO()
    fiamma.save(dev.state_dict(), buf)
    buf.seek(0)
    sd = fiamma.load(buf)
    assert sd["fc.weight"].device.type == device
    buf.seek(0)
    sd_cpu = fiamma.load(buf, map_location="cpu")
    assert sd_cpu["fc.weight"].device.type == "cpu"
    fresh_cpu = _WithBuffer()
    fresh_cpu.load_state_dict(sd)  # device tensors copied into CPU parameters
    assert fresh_cpu.fc.weight.device.type == "cpu"
    assert_same(dev(x.to(device)), fresh_cpu(x))
    fresh_dev = _WithBuffer().to(device)
    fresh_dev.load_state_dict(sd_cpu)  # CPU tensors copied into device parameters
    assert fresh_dev.fc.weight.device.type == device
    assert_same(fresh_dev(x.to(device)), cpu(x))
    back = dev.cpu()
    assert back.fc.weight.device.type == "cpu" and back.scale.device.type == "cpu"


def test_cuda_without_gpu_names_the_reason():
    if fiamma.cuda.is_available():
        pytest.skip("a GPU is here")
    with pytest.raises(RuntimeError, match="CUDA"):
        nn.Linear(2, 2).cuda()
    with pytest.raises(RuntimeError, match="CUDA"):
        fiamma.ones(2).cuda()


# ---- data: batches to the device ----------------------------------------------------------------

def test_dataloader_batches_train_on_device(device):
    """Batches go to the device with non_blocking copies; with pin_memory=True they come pinned
    where the device has pinned host memory (CUDA), and the loader warns and does not pin
    elsewhere, as PyTorch does without an accelerator."""
    x, y = _batch(40, 8)
    t = (y % 3).float().unsqueeze(1)
    ds = fiamma.data.TensorDataset(x, t)
    pinned = device == "cuda"
    if pinned:
        loader = fiamma.data.DataLoader(ds, batch_size=16, pin_memory=True)
    else:
        with pytest.warns(UserWarning, match="pin_memory"):
            loader = fiamma.data.DataLoader(ds, batch_size=16, pin_memory=True)
    cpu, dev = _twin(lambda: nn.Linear(8, 1), device)
    ocpu = fiamma.optim.SGD(cpu.parameters(), lr=0.1)
    odev = fiamma.optim.SGD(dev.parameters(), lr=0.1)
    for xb, tb in loader:
        assert xb.is_pinned() == pinned and tb.is_pinned() == pinned
        for model, o, a, b in ((cpu, ocpu, xb, tb), (dev, odev, xb.to(device, non_blocking=True),
                                                     tb.to(device, non_blocking=True))):
            o.zero_grad()
            F.mse_loss(model(a), b).backward()
            o.step()
    _assert_models_equal(dev, cpu)


# ---- convolutional models (need the fused family on the device) ----------------------------------

def _needs_conv(device):
    w = fiamma.ones(1, 1, 3, 3, device=device)
    try:
        out = F.conv2d(fiamma.ones(1, 1, 5, 5, device=device), w)
    except (RuntimeError, AttributeError, NotImplementedError) as e:
        pytest.skip(f"conv2d does not run on {device} yet ({type(e).__name__}: {e})")
    if out.device.type != device:
        pytest.skip(f"conv2d on {device} still computes on {out.device}")


class _LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(1, 6, 5, padding=2), nn.Conv2d(6, 16, 5)
        self.f1, self.f2, self.f3 = nn.Linear(16 * 5 * 5, 120), nn.Linear(120, 84), \
            nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.f3(F.relu(self.f2(F.relu(self.f1(x.flatten(1))))))


class _BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                  nn.BatchNorm2d(cout)) if stride != 1 or cin != cout else None

    def forward(self, x):
        y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        return F.relu(y + (x if self.down is None else self.down(x)))


def _small_resnet():
    return nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                         _BasicBlock(8, 8, 1), _BasicBlock(8, 16, 2),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))


@pytest.mark.parametrize("arch", ["lenet", "resnet"])
def test_conv_model_training_matches_cpu(device, arch):
    _needs_conv(device)
    make, shape = {"lenet": (_LeNet, (8, 1, 28, 28)),
                   "resnet": (_small_resnet, (4, 3, 16, 16))}[arch]
    cpu, dev = _twin(make, device)
    g = fiamma.Generator().manual_seed(7)
    x = fiamma.randn(*shape, generator=g)
    y = fiamma.randint(0, 10, (shape[0],), generator=g)
    needs_device_support(device, "cross_entropy",
                         lambda: F.cross_entropy(fiamma.zeros(1, 10, device=device),
                                                 y[:1].to(device)))
    for model, a, b in ((cpu, x, y), (dev, x.to(device), y.to(device))):
        o = fiamma.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        for _ in range(2):
            o.zero_grad()
            F.cross_entropy(model(a), b).backward()
            o.step()
    _assert_models_equal(dev, cpu, rtol=1e-3, atol=1e-4)
