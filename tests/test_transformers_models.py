"""Hugging Face ``transformers`` unmodified under ``python -m fiamma.run``: tiny models built from
their configurations (nothing downloaded) take a forward and backward step, ``generate`` runs,
the ``Trainer`` trains, ``save_pretrained``/``from_pretrained`` round-trip, and (parity) a model
PyTorch saved loads in fiamma and gives PyTorch's logits, loss, gradients and greedy tokens.
Skipped when transformers is not installed; nothing of transformers is copied into this project.

The parity check runs in float32 (the dtype these models are used in); tolerances are relative
to each tensor's largest magnitude."""

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                reason="transformers is not installed")


def _run(script, tmp_path, *args, fiamma_run=True, env=None):
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(SPECS) + textwrap.dedent(script))
    cmd = [sys.executable] + (["-m", "fiamma.run"] if fiamma_run else []) + [str(path)]
    r = subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True,
                       timeout=900, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path),
                            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                            "TOKENIZERS_PARALLELISM": "false", **(env or {})})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout


# tiny configurations and inputs, the same in both processes (inputs drawn with NumPy)
SPECS = """
    import numpy as np
    import transformers as tf

    V = 64
    DEC = dict(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
               intermediate_size=40, max_position_embeddings=64)
    ENC = dict(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
               intermediate_size=40, max_position_embeddings=64)

    def spec(name):
        '''(config, model class, task) of a tiny model.'''
        if name == "bert_mlm":
            return tf.BertConfig(**ENC), tf.BertForMaskedLM, "mlm"
        if name == "bert_cls":
            return tf.BertConfig(num_labels=3, **ENC), tf.BertForSequenceClassification, "cls"
        if name == "roberta":
            return (tf.RobertaConfig(pad_token_id=1, **{**ENC, "max_position_embeddings": 72}),
                    tf.RobertaForMaskedLM, "mlm")
        if name == "distilbert":
            return (tf.DistilBertConfig(vocab_size=V, dim=32, n_layers=2, n_heads=4,
                                        hidden_dim=40, max_position_embeddings=64, num_labels=3),
                    tf.DistilBertForSequenceClassification, "cls")
        if name == "gpt2":
            return (tf.GPT2Config(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                  pad_token_id=0), tf.GPT2LMHeadModel, "clm")
        if name == "llama":
            return (tf.LlamaConfig(num_key_value_heads=2, pad_token_id=0, **DEC),
                    tf.LlamaForCausalLM, "clm")
        if name == "mistral":
            return (tf.MistralConfig(num_key_value_heads=2, pad_token_id=0, sliding_window=4,
                                     **DEC), tf.MistralForCausalLM, "clm")
        if name == "qwen2":
            return (tf.Qwen2Config(num_key_value_heads=2, pad_token_id=0, **DEC),
                    tf.Qwen2ForCausalLM, "clm")
        if name == "mixtral":  # mixture of experts: top-2 routing over 4 experts
            return (tf.MixtralConfig(num_key_value_heads=2, pad_token_id=0, num_local_experts=4,
                                     num_experts_per_tok=2, **DEC),
                    tf.MixtralForCausalLM, "clm")
        if name == "bloom":  # ALiBi attention through baddbmm
            return (tf.BloomConfig(vocab_size=V, hidden_size=32, n_layer=2, n_head=4,
                                   pad_token_id=0), tf.BloomForCausalLM, "clm")
        if name == "t5":
            return (tf.T5Config(vocab_size=V, d_model=32, d_kv=8, d_ff=40, num_layers=2,
                                num_heads=4, decoder_start_token_id=0, pad_token_id=0),
                    tf.T5ForConditionalGeneration, "s2s")
        if name == "bart":
            return (tf.BartConfig(vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2,
                                  encoder_attention_heads=4, decoder_attention_heads=4,
                                  encoder_ffn_dim=40, decoder_ffn_dim=40,
                                  max_position_embeddings=64),
                    tf.BartForConditionalGeneration, "s2s")
        if name == "vit":
            return (tf.ViTConfig(image_size=16, patch_size=4, num_channels=3, hidden_size=32,
                                 num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=40, num_labels=5),
                    tf.ViTForImageClassification, "img")
        raise ValueError(name)

    def inputs(task, torch):
        '''The batch for a task, as torch tensors (the same numbers in both processes).'''
        rs = np.random.RandomState(0)
        t = lambda a: torch.from_numpy(np.ascontiguousarray(a))
        if task == "img":
            return {"pixel_values": t(rs.randn(2, 3, 16, 16).astype(np.float32)),
                    "labels": t(np.array([1, 4]))}
        ids = rs.randint(3, V, size=(2, 9)).astype(np.int64)
        mask = np.ones((2, 9), np.int64)
        mask[1, 7:] = 0  # the second row is padded (right) by two
        d = {"input_ids": t(ids), "attention_mask": t(mask)}
        if task == "cls":
            d["labels"] = t(np.array([0, 2]))
        elif task == "mlm":
            lab = np.full((2, 9), -100, np.int64)
            lab[:, 2::3] = ids[:, 2::3]
            d["labels"] = t(lab)
        elif task == "clm":
            lab = ids.copy()
            lab[mask == 0] = -100
            d["labels"] = t(lab)
        else:  # s2s
            d["labels"] = t(rs.randint(3, V, size=(2, 5)).astype(np.int64))
        return d

    def attns(cls):
        '''The attention implementations a model class has (T5 has no sdpa one).'''
        return ("eager", "sdpa") if cls._supports_sdpa else ("eager",)

    GENERATE = ("gpt2", "llama", "mistral", "qwen2", "mixtral", "bloom", "t5", "bart")

    def prompt(torch):
        rs = np.random.RandomState(1)
        return torch.from_numpy(rs.randint(3, V, size=(2, 4)).astype(np.int64))

    def run_model(m, name, task, torch):
        '''{key: numpy array}: logits, loss, every parameter's gradient, greedy tokens.'''
        out = {}
        m.eval()  # no dropout: the same numbers in both libraries (gradients still flow)
        m.zero_grad()
        r = m(**inputs(task, torch))
        r.loss.backward()
        out["logits"] = r.logits.detach().numpy()
        out["loss"] = np.array(r.loss.item())
        for k, p in m.named_parameters():
            if p.grad is not None:
                out["grad|" + k] = p.grad.numpy().copy()
        if name in GENERATE:
            with torch.no_grad():
                out["greedy"] = m.generate(prompt(torch), max_new_tokens=6, do_sample=False,
                                           attention_mask=torch.ones(2, 4, dtype=torch.long),
                                           pad_token_id=0).numpy()
        return out
"""

ALL = ["bert_mlm", "bert_cls", "roberta", "distilbert", "gpt2", "llama", "mistral", "qwen2",
       "mixtral", "bloom", "t5", "bart", "vit"]

TRAIN_STEP = """
    import sys
    import torch
    names, attn = sys.argv[1].split(","), sys.argv[2]
    for name in names:
        cfg, cls, task = spec(name)
        if attn not in attns(cls):
            print(name, "ok (no", attn, "implementation)")
            continue
        torch.manual_seed(0)
        m = cls._from_config(cfg, attn_implementation=attn).train()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = m(**inputs(task, torch)).loss
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[-1] < losses[0], (name, losses)
        if name in GENERATE:
            m.eval()
            g = m.generate(prompt(torch), max_new_tokens=5, do_sample=False, pad_token_id=0)
            torch.manual_seed(3)
            s1 = m.generate(prompt(torch), max_new_tokens=5, do_sample=True, top_k=10,
                            pad_token_id=0)
            torch.manual_seed(3)
            s2 = m.generate(prompt(torch), max_new_tokens=5, do_sample=True, top_k=10,
                            pad_token_id=0)
            assert torch.equal(s1, s2), (name, s1, s2)   # the seed fixes the samples
            assert g.shape == s1.shape and g.shape[0] == 2 and g.shape[1] >= 5, g.shape
            beams = m.generate(prompt(torch), max_new_tokens=5, num_beams=3,
                               num_return_sequences=2, pad_token_id=0)
            assert beams.shape[0] == 4, beams.shape
            if name == "llama":  # a static (preallocated) key/value cache: the same tokens
                st = m.generate(prompt(torch), max_new_tokens=5, do_sample=False,
                                pad_token_id=0, cache_implementation="static")
                assert torch.equal(st, g), (st, g)
        print(name, "ok", round(losses[0], 4), round(losses[-1], 4))
"""


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_models_train_and_generate_under_fiamma_run(tmp_path, attn):
    out = _run(TRAIN_STEP, tmp_path, ",".join(ALL), attn)
    for name in ALL:
        assert f"{name} ok" in out, out


REFERENCE = """
    import sys, types
    try:
        import torchvision  # noqa: F401
    except Exception:
        # a torchvision build whose C ops do not load beside this torch (transformers imports
        # it when present): skip the ops' meta registrations
        for k in [k for k in sys.modules if k.startswith("torchvision")]:
            del sys.modules[k]
        sys.modules["torchvision._meta_registrations"] = types.ModuleType("stub")
    import torch
    names, root = sys.argv[1].split(","), sys.argv[2]
    torch.manual_seed(0)
    for name in names:
        cfg, cls, task = spec(name)
        m = cls._from_config(cfg, attn_implementation="eager")
        # non-trivial norms and biases, so their gradients and use are checked too
        with torch.no_grad():
            for p in m.parameters():
                p.add_(torch.randn_like(p) * 0.02)
        m.save_pretrained(f"{root}/{name}")
        for attn in attns(cls):
            m = cls.from_pretrained(f"{root}/{name}", attn_implementation=attn)
            np.savez(f"{root}/{name}-{attn}.npz", **run_model(m, name, task, torch))
"""

COMPARE = """
    import sys
    import torch
    names, root = sys.argv[1].split(","), sys.argv[2]
    for name in names:
        cfg, cls, task = spec(name)
        for attn in attns(cls):
            m = cls.from_pretrained(f"{root}/{name}", attn_implementation=attn)
            ref = np.load(f"{root}/{name}-{attn}.npz")
            got = run_model(m, name, task, torch)
            assert set(got) == set(ref.files), (name, set(got) ^ set(ref.files))
            err = lambda k: float(np.abs(got[k] - ref[k]).max() / max(np.abs(ref[k]).max(),
                                                                     1e-30))
            # gradients relative to the largest of all: some are rounding noise around an exact
            # zero (a key projection's bias cancels in the softmax), which no relative measure
            # of their own can compare
            grads = [k for k in got if k.startswith("grad|")]
            gmax = max(np.abs(ref[k]).max() for k in grads)
            g_err = max(float(np.abs(got[k] - ref[k]).max() / gmax) for k in grads)
            same = int(np.array_equal(got["greedy"], ref["greedy"])) if "greedy" in got else -1
            print(name, attn, err("logits"), err("loss"), g_err, same)
"""


@pytest.mark.parity
def test_pytorch_saved_models_match_in_fiamma(tmp_path):
    pytest.importorskip("torch")
    _run(REFERENCE, tmp_path, ",".join(ALL), tmp_path, fiamma_run=False)
    out = _run(COMPARE, tmp_path, ",".join(ALL), tmp_path)
    rows = [line.split() for line in out.splitlines() if line.split()[:1] and
            line.split()[0] in ALL]
    # T5 and BLOOM have no sdpa implementation
    assert len(rows) == 2 * len(ALL) - 2, out
    for name, attn, logit_err, loss_err, grad_err, same in rows:
        assert float(logit_err) < 1e-5, (name, attn, logit_err)
        assert float(loss_err) < 1e-5, (name, attn, loss_err)
        assert float(grad_err) < 1e-5, (name, attn, grad_err)
        assert same in ("1", "-1"), (name, attn, "greedy tokens differ")


TRAINER = """
    import sys
    import torch
    out = sys.argv[1]
    torch.manual_seed(0)
    cfg, cls, task = spec("bert_cls")
    m = cls(cfg)
    rs = np.random.RandomState(0)

    class Data(torch.utils.data.Dataset):
        def __init__(self, n):
            self.ids = rs.randint(3, V, size=(n, 8))
            self.y = (self.ids[:, 0] > V // 2).astype(np.int64)  # the first token decides

        def __len__(self):
            return len(self.y)

        def __getitem__(self, i):
            return {"input_ids": torch.tensor(self.ids[i]), "labels": torch.tensor(self.y[i])}

    args = tf.TrainingArguments(output_dir=out + "/run", use_cpu=True, max_steps=30,
                                per_device_train_batch_size=8, learning_rate=3e-3,
                                logging_steps=5, report_to=[], save_strategy="no",
                                disable_tqdm=True, seed=0)
    trainer = tf.Trainer(model=m, args=args, train_dataset=Data(64), eval_dataset=Data(16))
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 6 and losses[-1] < 0.8 * losses[0], losses
    assert np.isfinite(trainer.evaluate()["eval_loss"])
    # save_pretrained / from_pretrained within fiamma: the same outputs
    m.eval()
    x = inputs("cls", torch)
    with torch.no_grad():
        want = m(**x).logits
    m.save_pretrained(out + "/saved")
    m2 = cls.from_pretrained(out + "/saved").eval()
    with torch.no_grad():
        assert torch.equal(m2(**x).logits, want)
        # accelerate's loading paths: built on the meta device, then filled
        for kw in ({"device_map": "auto"}, {"low_cpu_mem_usage": True}):
            m3 = cls.from_pretrained(out + "/saved", **kw).eval()
            assert torch.equal(m3(**x).logits, want), kw
    np.save(out + "/logits.npy", want.numpy())
    print("losses", losses)
"""

PYTORCH_LOADS = """
    import sys, types
    try:
        import torchvision  # noqa: F401
    except Exception:
        for k in [k for k in sys.modules if k.startswith("torchvision")]:
            del sys.modules[k]
        sys.modules["torchvision._meta_registrations"] = types.ModuleType("stub")
    import torch
    out = sys.argv[1]
    cfg, cls, task = spec("bert_cls")
    m = cls.from_pretrained(out + "/saved").eval()
    with torch.no_grad():
        got = m(**inputs("cls", torch)).logits.numpy()
    want = np.load(out + "/logits.npy")
    print("err", float(np.abs(got - want).max() / np.abs(want).max()))
"""


def test_trainer_trains_and_saved_model_round_trips(tmp_path):
    out = _run(TRAINER, tmp_path, tmp_path)
    assert "losses" in out


@pytest.mark.parity
def test_fiamma_saved_model_loads_in_pytorch(tmp_path):
    pytest.importorskip("torch")
    _run(TRAINER, tmp_path, tmp_path)
    out = _run(PYTORCH_LOADS, tmp_path, tmp_path, fiamma_run=False)
    err = float(out.split("err")[-1])
    assert err < 1e-5, out


WITHOUT_TORCH_METADATA = """
    import importlib.machinery, importlib.metadata as md
    _find = importlib.machinery.PathFinder.find_distributions
    def _hidden(context=md.DistributionFinder.Context()):
        return [d for d in _find(context)
                if d.metadata["Name"].lower() not in ("torch", "torchvision", "torchaudio")]
    importlib.machinery.PathFinder.find_distributions = staticmethod(_hidden)
"""

SEES_TORCH = """
    import transformers.utils.import_utils as iu
    from transformers import is_torch_available
    print(is_torch_available(), iu.get_torch_version())
"""


def test_transformers_sees_torch_without_a_real_torch_distribution(tmp_path):
    # as on a machine with only fiamma installed: fiamma.run answers torch's metadata
    path = tmp_path / "hidden.py"
    path.write_text(textwrap.dedent(WITHOUT_TORCH_METADATA) + textwrap.dedent(SEES_TORCH))
    from fiamma._torch_alias import TORCH_VERSION
    r = subprocess.run([sys.executable, "-m", "fiamma.run", str(path)], capture_output=True,
                       text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["True", TORCH_VERSION], r.stdout


LORA = """
    import sys
    import torch, peft
    torch.manual_seed(0)
    cfg, cls, task = spec("llama")
    m = cls(cfg)
    pm = peft.get_peft_model(m, peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0,
                                                target_modules=["q_proj", "v_proj"],
                                                task_type="CAUSAL_LM"))
    trainable = [n for n, p in pm.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable), trainable
    frozen = {k: v.clone() for k, v in m.state_dict().items() if "lora_" not in k}
    opt = torch.optim.AdamW([p for p in pm.parameters() if p.requires_grad], lr=1e-2)
    x = inputs(task, torch)
    losses = []
    for _ in range(6):
        opt.zero_grad()
        loss = pm(**x).loss
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0], losses
    assert all(torch.equal(v, frozen[k]) for k, v in m.state_dict().items() if k in frozen)
    pm.eval()
    with torch.no_grad():
        want = pm(**x).logits
        merged = pm.merge_and_unload()
        got = merged(**x).logits
    assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()
    print("lora", losses[0], losses[-1])
"""

ACCELERATE = """
    import torch
    import torch.nn.functional as F
    from accelerate import Accelerator
    from accelerate.utils import set_seed
    set_seed(0)
    acc = Accelerator(cpu=True)
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(64, 4)
    y = x.sum(1, keepdim=True)
    dl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16)
    sched = torch.optim.lr_scheduler.StepLR(opt, 10)
    model, opt, dl, sched = acc.prepare(model, opt, dl, sched)
    losses = []
    for epoch in range(5):
        total = 0.0
        for xb, yb in dl:
            opt.zero_grad()
            loss = F.mse_loss(model(xb), yb)
            acc.backward(loss)
            acc.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            total += loss.item()
        losses.append(total)
    assert losses[-1] < 0.7 * losses[0], losses
    assert str(acc.device) == "cpu" and acc.num_processes == 1
    assert acc.gather(torch.tensor([1.0, 2.0])).tolist() == [1.0, 2.0]
    acc.save_state("state")
    before = [p.detach().clone() for p in model.parameters()]
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    acc.load_state("state")
    assert all(torch.equal(a, p) for a, p in zip(before, model.parameters()))
    print("accelerate", losses[0], losses[-1])
"""


@pytest.mark.skipif(importlib.util.find_spec("peft") is None, reason="peft is not installed")
def test_peft_lora_trains_a_tiny_llama(tmp_path):
    assert "lora" in _run(LORA, tmp_path)


@pytest.mark.skipif(importlib.util.find_spec("accelerate") is None,
                    reason="accelerate is not installed")
def test_accelerate_trains_on_cpu(tmp_path):
    assert "accelerate" in _run(ACCELERATE, tmp_path)


TOKENIZER = """
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    vocab = {"[PAD]": 0, "[UNK]": 1, "hello": 2, "world": 3, "fiamma": 4}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = tf.PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="[PAD]", unk_token="[UNK]")
    b = tok(["hello world", "fiamma"], padding=True, return_tensors="pt")
    assert isinstance(b["input_ids"], torch.Tensor), type(b["input_ids"])
    assert b["input_ids"].tolist() == [[2, 3], [4, 0]]
    assert b["attention_mask"].tolist() == [[1, 1], [1, 0]]
    assert tok.batch_decode(b["input_ids"], skip_special_tokens=True) == ["hello world",
                                                                          "fiamma"]
    cfg, cls, task = spec("gpt2")
    out = cls(cfg)(**b)
    assert out.logits.shape == (2, 2, V)
    print("tokenizer ok")
"""


def test_tokenizer_returns_fiamma_tensors(tmp_path):
    assert "tokenizer ok" in _run(TOKENIZER, tmp_path)


TRAINER_RESUME = """
    import os, sys
    import torch
    out = sys.argv[1]
    cfg, cls, task = spec("bert_cls")
    rs = np.random.RandomState(0)
    ids = rs.randint(3, V, size=(32, 8))
    data = [{"input_ids": torch.tensor(i), "labels": torch.tensor(int(i[0] > V // 2))}
            for i in ids]

    def args(steps):
        return tf.TrainingArguments(
            output_dir=out, use_cpu=True, max_steps=steps, per_device_train_batch_size=8,
            gradient_accumulation_steps=2, learning_rate=3e-3, warmup_steps=2,
            weight_decay=0.01, save_strategy="steps", save_steps=4, eval_strategy="steps",
            eval_steps=4, report_to=[], disable_tqdm=True, seed=0)

    def acc(p):
        return {"acc": float((p.predictions.argmax(-1) == p.label_ids).mean())}

    torch.manual_seed(0)
    tr = tf.Trainer(model=cls(cfg), args=args(8), train_dataset=data, eval_dataset=data[:8],
                    compute_metrics=acc)
    tr.train()
    names = set(os.listdir(out + "/checkpoint-8"))
    assert {"optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json",
            "model.safetensors"} <= names, names
    assert [h["step"] for h in tr.state.log_history if "eval_acc" in h] == [4, 8]
    torch.manual_seed(0)
    tr2 = tf.Trainer(model=cls(cfg), args=args(12), train_dataset=data,
                     eval_dataset=data[:8])
    tr2.train(resume_from_checkpoint=True)  # the optimizer, schedule and RNG states reload
    assert tr2.state.global_step == 12
    assert np.isfinite(tr2.predict(data[:8]).metrics["test_loss"])
    print("resume ok")
"""


def test_trainer_checkpoints_and_resumes(tmp_path):
    assert "resume ok" in _run(TRAINER_RESUME, tmp_path, tmp_path / "run")


COLLATORS_BF16_SEQ2SEQ = """
    import sys
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    out = sys.argv[1]
    vocab = {f"w{i}": i for i in range(V - 2)}
    vocab.update({"[MASK]": V - 2, "[PAD]": V - 1})
    tk = Tokenizer(models.WordLevel(vocab, unk_token="w1"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = tf.PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="[PAD]", unk_token="w1",
                                     mask_token="[MASK]")
    texts = [" ".join(f"w{(i * 7 + j) % 50 + 2}" for j in range(6 + i % 3)) for i in range(32)]
    data = [tok(t) for t in texts]
    mlm = tf.DataCollatorForLanguageModeling(tok, mlm_probability=0.3)
    b = mlm(data[:4])
    assert b["input_ids"].shape == b["labels"].shape and b["input_ids"].shape[0] == 4
    masked = b["labels"] != -100
    assert bool(masked.any()) and bool((b["labels"][~masked] == -100).all())
    torch.manual_seed(0)
    cfg, cls, task = spec("bert_mlm")
    cfg.pad_token_id = V - 1
    m = cls(cfg)
    args = tf.TrainingArguments(output_dir=out + "/mlm", use_cpu=True, max_steps=4,
                                per_device_train_batch_size=8, report_to=[],
                                save_strategy="no", disable_tqdm=True, bf16=True)
    tr = tf.Trainer(model=m, args=args, train_dataset=data, data_collator=mlm)
    assert np.isfinite(tr.train().training_loss)   # CPU autocast to bfloat16
    m.resize_token_embeddings(V + 6)
    assert m(**tok(["w3 w4"], return_tensors="pt")).logits.shape == (1, 2, V + 6)
    cfg, cls, task = spec("t5")
    t5 = cls(cfg)
    pairs = [{"input_ids": d["input_ids"], "labels": d["input_ids"][::-1]} for d in data]
    a2 = tf.Seq2SeqTrainingArguments(output_dir=out + "/s2s", use_cpu=True, max_steps=4,
                                     per_device_train_batch_size=8,
                                     per_device_eval_batch_size=8, report_to=[],
                                     save_strategy="no", disable_tqdm=True,
                                     predict_with_generate=True, generation_max_length=8)
    tr2 = tf.Seq2SeqTrainer(model=t5, args=a2, train_dataset=pairs, eval_dataset=pairs[:8],
                            data_collator=tf.DataCollatorForSeq2Seq(tok, model=t5))
    tr2.train()
    pred = tr2.predict(pairs[:8])
    assert pred.predictions.shape[0] == 8 and np.isfinite(pred.metrics["test_loss"])
    print("extras ok")
"""


def test_collators_bf16_trainer_and_seq2seq_trainer(tmp_path):
    assert "extras ok" in _run(COLLATORS_BF16_SEQ2SEQ, tmp_path, tmp_path)
