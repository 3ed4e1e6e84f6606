"""torchaudio.pipelines' SQUIM bundles: facts, local-weight routes (path=, model_dir, the hub
cache and torchaudio's cache layout) and offline errors, on checkpoints the tests write."""

import os

import numpy as np
import pytest

import fiamma
from fiamma.audio import models, pipelines
from fiamma.audio.pipelines import _assets


def test_bundle_facts():
    o, s = pipelines.SQUIM_OBJECTIVE, pipelines.SQUIM_SUBJECTIVE
    assert isinstance(o, pipelines.SquimObjectiveBundle)
    assert isinstance(s, pipelines.SquimSubjectiveBundle)
    assert o.sample_rate == 16000 and s.sample_rate == 16000
    assert o._path == "squim_objective_dns2020.pth"
    assert o.url == "https://download.pytorch.org/torchaudio/models/squim_objective_dns2020.pth"
    assert s.url == "https://download.pytorch.org/torchaudio/models/squim_subjective_bvcc_daps.pth"
    assert s.file_name == "squim_subjective_bvcc_daps.pth"
    for name in ("SQUIM_OBJECTIVE", "SQUIM_SUBJECTIVE", "SquimObjectiveBundle",
                 "SquimSubjectiveBundle"):
        assert name in pipelines.__all__


@pytest.fixture(scope="module")
def objective_checkpoint(tmp_path_factory):
    """A random squim_objective_base checkpoint in the published layout (a plain state dict)."""
    fiamma.manual_seed(0)
    model = models.squim_objective_base().eval()
    folder = tmp_path_factory.mktemp("ckpt")
    path = folder / "squim_objective_dns2020.pth"
    fiamma.save(model.state_dict(), str(path))
    return model, str(path)


def same_weights(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    for k in sa:
        np.testing.assert_array_equal(sa[k].numpy(), sb[k].numpy())


def test_objective_get_model_from_path(objective_checkpoint):
    src, path = objective_checkpoint
    model = pipelines.SQUIM_OBJECTIVE.get_model(path=path)
    assert isinstance(model, models.SquimObjective) and not model.training
    same_weights(model, src)
    x = 0.1 * fiamma.randn(1, 3000)
    with fiamma.no_grad():
        for a, b in zip(model(x), src(x)):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_objective_get_model_routes(objective_checkpoint, tmp_path, monkeypatch):
    src, path = objective_checkpoint
    folder = os.path.dirname(path)
    bundle = pipelines.SQUIM_OBJECTIVE
    same_weights(bundle.get_model(dl_kwargs={"model_dir": folder, "progress": False}), src)
    # $FIAMMA_HOME/hub/checkpoints/<file>
    home = tmp_path / "home"
    (home / "hub" / "checkpoints").mkdir(parents=True)
    os.symlink(path, home / "hub" / "checkpoints" / "squim_objective_dns2020.pth")
    monkeypatch.setenv("FIAMMA_HOME", str(home))
    monkeypatch.setattr(fiamma.hub, "_hub_dir", None)
    same_weights(bundle.get_model(), src)
    # torchaudio's cache layout: <hub>/torchaudio/models/<file>
    home2 = tmp_path / "home2"
    (home2 / "hub" / "torchaudio" / "models").mkdir(parents=True)
    os.symlink(path, home2 / "hub" / "torchaudio" / "models" / "squim_objective_dns2020.pth")
    monkeypatch.setenv("FIAMMA_HOME", str(home2))
    same_weights(bundle.get_model(), src)


def test_subjective_get_model_from_path(tmp_path, monkeypatch):
    # a small stand-in architecture keeps the test light; the loading path is the bundle's
    def tiny():
        ssl = models.wav2vec2_model(
            "group_norm", [(4, 10, 5), (4, 3, 2)], False, 8, 0.0, 4, 2, 1, 2, 0.0, 12, 0.0, 0.0,
            False, 0.0, None)
        return models.SquimSubjective(ssl, fiamma.nn.Linear(8, 3),
                                      models.squim.subjective.Predictor(6, 5))

    monkeypatch.setattr(pipelines.SquimSubjectiveBundle, "_factory", staticmethod(tiny))
    fiamma.manual_seed(1)
    src = tiny().eval()
    path = tmp_path / "squim_subjective_bvcc_daps.pth"
    fiamma.save(src.state_dict(), str(path))
    model = pipelines.SQUIM_SUBJECTIVE.get_model(path=str(path))
    assert isinstance(model, models.SquimSubjective) and not model.training
    x, ref = fiamma.randn(2, 400), fiamma.randn(2, 150)
    with fiamma.no_grad():
        np.testing.assert_array_equal(model(x, ref).numpy(), src(x, ref).numpy())
    assert pipelines.SquimSubjectiveBundle._factory is tiny


def test_missing_and_offline_errors(tmp_path, monkeypatch):
    bundle = pipelines.SQUIM_OBJECTIVE
    with pytest.raises(FileNotFoundError, match=r"SQUIM_OBJECTIVE.get_model: no file at .*nope"
                                                r"\.pth.*download\.pytorch\.org/torchaudio/"
                                                r"models/squim_objective_dns2020\.pth"):
        bundle.get_model(path=str(tmp_path / "nope.pth"))
    monkeypatch.setattr(_assets, "BASE_URL", "https://127.0.0.1:9/")
    with pytest.raises(OSError) as info:
        bundle.get_model(dl_kwargs={"model_dir": str(tmp_path), "progress": False})
    msg = str(info.value)
    assert msg.startswith("SQUIM_OBJECTIVE.get_model: ")
    assert "https://127.0.0.1:9/models/squim_objective_dns2020.pth" in msg
    assert os.path.join(str(tmp_path), "squim_objective_dns2020.pth") in msg and "path=" in msg
    assert not os.listdir(tmp_path)                 # nothing half-written
    with pytest.raises(TypeError, match=r"unexpected dl_kwargs \['bogus'\]"):
        bundle.get_model(dl_kwargs={"bogus": 1})
    not_a_state_dict = tmp_path / "list.pth"
    fiamma.save([fiamma.zeros(1)], str(not_a_state_dict))
    with pytest.raises(TypeError, match="expected the checkpoint to hold a state dict, got list"):
        bundle.get_model(path=str(not_a_state_dict))


def test_download_route_through_a_file_url(objective_checkpoint, tmp_path, monkeypatch):
    """The download path itself, without a network: the base URL points at a local folder."""
    import hashlib
    import shutil

    src, path = objective_checkpoint
    (tmp_path / "site" / "models").mkdir(parents=True)
    shutil.copy(path, tmp_path / "site" / "models" / "squim_objective_dns2020.pth")
    monkeypatch.setattr(_assets, "BASE_URL", (tmp_path / "site").as_uri() + "/")
    cache = tmp_path / "cache"
    model = pipelines.SQUIM_OBJECTIVE.get_model(dl_kwargs={"model_dir": str(cache),
                                                           "progress": False})
    same_weights(model, src)
    assert os.listdir(cache) == ["squim_objective_dns2020.pth"]
    # check_hash: the hex digits after '-' in the file name must start the SHA-256 digest
    digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
    for name, ok in ((f"squim-{digest[:8]}.pth", True), ("squim-deadbeef.pth", False)):
        shutil.copy(path, tmp_path / "site" / "models" / name)
        bundle = pipelines.SquimObjectiveBundle(name, 16000)
        kwargs = {"model_dir": str(cache), "progress": False, "check_hash": True}
        if ok:
            same_weights(bundle.get_model(dl_kwargs=kwargs), src)
        else:
            with pytest.raises(RuntimeError, match="invalid hash value"):
                bundle.get_model(dl_kwargs=kwargs)
            assert not (cache / name).exists()
