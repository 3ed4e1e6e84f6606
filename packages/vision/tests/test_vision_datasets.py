"""fiamma.vision.datasets: datasets on files written here in the real formats, and downloads
from a local HTTP server (resume, corruption, archives)."""

import gzip
import hashlib
import io
import os
import pickle
import struct
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from PIL import Image

import fiamma
from fiamma.data import DataLoader
from fiamma.vision import datasets as D
from fiamma.vision.datasets import utils as U
from fiamma.vision.io import read_image


def to_tensor(img):
    """PIL image -> uint8 tensor (H, W) or (H, W, C), enough to batch samples."""
    return fiamma.from_numpy(np.array(img))


def md5(b):
    return hashlib.md5(b).hexdigest()


# ---------------------------------------------------------------- IDX (MNIST family)

_IDX_CODE = {np.dtype(np.uint8): 0x08, np.dtype(np.int8): 0x09, np.dtype(np.int16): 0x0B,
             np.dtype(np.int32): 0x0C, np.dtype(np.float32): 0x0D, np.dtype(np.float64): 0x0E}


def idx_bytes(arr):
    head = bytes([0, 0, _IDX_CODE[arr.dtype], arr.ndim]) + struct.pack(f">{arr.ndim}I",
                                                                       *arr.shape)
    return head + arr.astype(arr.dtype.newbyteorder(">")).tobytes()


def write_idx(path, arr):
    data = idx_bytes(arr)
    if str(path).endswith(".gz"):
        data = gzip.compress(data)
    with open(path, "wb") as f:
        f.write(data)


def mnist_arrays(n_train=12, n_test=5, seed=0):
    rng = np.random.default_rng(seed)
    return {"train": (rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
                      rng.integers(0, 10, n_train).astype(np.uint8)),
            "t10k": (rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
                     rng.integers(0, 10, n_test).astype(np.uint8))}


def write_mnist(folder, arrays, gz):
    os.makedirs(folder, exist_ok=True)
    ext = ".gz" if gz else ""
    for split, (imgs, labels) in arrays.items():
        write_idx(os.path.join(folder, f"{split}-images-idx3-ubyte{ext}"), imgs)
        write_idx(os.path.join(folder, f"{split}-labels-idx1-ubyte{ext}"), labels)


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_torchvision_layout(tmp_path, gz):
    arrays = mnist_arrays()
    write_mnist(tmp_path / "MNIST" / "raw", arrays, gz)
    train = D.MNIST(tmp_path, train=True)
    test = D.MNIST(str(tmp_path), train=False)
    assert len(train) == 12 and len(test) == 5
    assert train.data.dtype == fiamma.uint8 and tuple(train.data.shape) == (12, 28, 28)
    assert train.targets.dtype == fiamma.int64
    np.testing.assert_array_equal(train.data.numpy(), arrays["train"][0])
    np.testing.assert_array_equal(test.targets.numpy(), arrays["t10k"][1])
    img, label = train[3]
    assert isinstance(img, Image.Image) and img.mode == "L" and img.size == (28, 28)
    np.testing.assert_array_equal(np.array(img), arrays["train"][0][3])
    assert label == int(arrays["train"][1][3]) and type(label) is int
    assert train.class_to_idx["3 - three"] == 3
    assert "Split: Test" in repr(test) and "Number of datapoints: 5" in repr(test)


def test_mnist_deprecated_names(tmp_path):
    # torchvision's old train_labels/test_labels/train_data/test_data: warn, give targets/data
    arrays = mnist_arrays()
    write_mnist(tmp_path / "MNIST" / "raw", arrays, False)
    train = D.MNIST(tmp_path, train=True)
    test = D.MNIST(tmp_path, train=False)
    with pytest.warns(UserWarning, match="renamed targets"):
        np.testing.assert_array_equal(train.train_labels.numpy(), arrays["train"][1])
    with pytest.warns(UserWarning, match="renamed targets"):
        np.testing.assert_array_equal(test.test_labels.numpy(), arrays["t10k"][1])
    with pytest.warns(UserWarning, match="renamed data"):
        assert train.train_data is train.data
    with pytest.warns(UserWarning, match="renamed data"):
        assert test.test_data is test.data


def test_fashion_and_kmnist_in_a_plain_folder_with_transforms(tmp_path):
    arrays = mnist_arrays(seed=1)
    write_mnist(tmp_path, arrays, gz=True)  # the files directly in root, as Debian ships them
    ds = D.FashionMNIST(tmp_path, train=False, transform=to_tensor,
                        target_transform=lambda y: y + 100)
    x, y = ds[0]
    assert fiamma.is_tensor(x) and tuple(x.shape) == (28, 28)
    np.testing.assert_array_equal(x.numpy(), arrays["t10k"][0][0])
    assert y == int(arrays["t10k"][1][0]) + 100
    assert ds.classes[9] == "Ankle boot"
    k = D.KMNIST(tmp_path, transform=to_tensor)
    assert len(k) == 12 and k[1][1] == int(arrays["train"][1][1])
    np.testing.assert_array_equal(k[1][0].numpy(), arrays["train"][0][1])


class Pairs(D.VisionDataset):
    def __len__(self):
        return 3

    def __getitem__(self, i):
        return self._apply(i, 10 * i)


def test_vision_dataset_transforms():
    assert Pairs("~/x", transforms=lambda a, b: (-a, b + 1))[2] == (-2, 21)
    assert Pairs(None, transform=lambda a: a * 3)[2] == (6, 20)
    assert Pairs(None, target_transform=str)[1] == (1, "10")
    assert Pairs(None)[1] == (1, 10)
    assert Pairs("~/x").root == os.path.expanduser("~/x")
    with pytest.raises(ValueError, match="only transforms"):
        Pairs(None, transforms=lambda a, b: (a, b), transform=to_tensor)
    r = repr(Pairs("r", transform=to_tensor, target_transform=str)).splitlines()
    assert r[:3] == ["Dataset Pairs", "    Number of datapoints: 3", "    Root location: r"]
    assert r[3] == "    StandardTransform" and r[4].startswith("    Transform: <function")
    assert r[5].startswith("    Target transform: <class 'str'>")


def test_mnist_dataloader(tmp_path):
    arrays = mnist_arrays(n_train=10)
    write_mnist(tmp_path / "MNIST" / "raw", arrays, gz=False)
    loader = DataLoader(D.MNIST(tmp_path, transform=to_tensor), batch_size=4, shuffle=False)
    batches = list(loader)
    assert [tuple(b[0].shape) for b in batches] == [(4, 28, 28), (4, 28, 28), (2, 28, 28)]
    xs = np.concatenate([b[0].numpy() for b in batches])
    ys = np.concatenate([b[1].numpy() for b in batches])
    np.testing.assert_array_equal(xs, arrays["train"][0])
    np.testing.assert_array_equal(ys, arrays["train"][1])
    assert batches[0][1].dtype == fiamma.int64


def test_idx_reader_and_errors(tmp_path):
    for arr in (np.arange(24, dtype=np.int16).reshape(2, 3, 4) - 7,
                np.linspace(-1, 1, 10).astype(np.float32), np.arange(6, dtype=np.int32)):
        p = tmp_path / "x.idx"
        write_idx(p, arr)
        np.testing.assert_array_equal(D.mnist.read_sn3_pascalvincent_tensor(p).numpy(), arr)
    bad = tmp_path / "bad-images-idx3-ubyte"
    bad.write_bytes(b"\x01\x02\x03\x04garbage")
    with pytest.raises(RuntimeError, match="bad-images-idx3-ubyte.*not an IDX"):
        D.mnist.read_image_file(bad)
    short = tmp_path / "short"
    short.write_bytes(idx_bytes(np.zeros((3, 28, 28), np.uint8))[:-5])
    with pytest.raises(RuntimeError, match="short.*shape"):
        D.mnist.read_image_file(short)
    corrupt = tmp_path / "c.gz"
    corrupt.write_bytes(gzip.compress(idx_bytes(np.zeros(5, np.uint8)))[:-8])
    with pytest.raises(RuntimeError, match="c.gz"):
        D.mnist.read_label_file(corrupt)
    with pytest.raises(RuntimeError, match="download=True"):
        D.MNIST(tmp_path / "nothing")
    # mismatched counts
    write_mnist(tmp_path / "m", mnist_arrays(), gz=False)
    write_idx(tmp_path / "m" / "t10k-labels-idx1-ubyte", np.zeros(3, np.uint8))
    with pytest.raises(RuntimeError, match="5 images but"):
        D.MNIST(tmp_path / "m", train=False)


FASHION = "/usr/share/datasets/fashion-mnist"


@pytest.mark.skipif(not os.path.isdir(FASHION), reason="Debian's dataset-fashion-mnist is not "
                    "installed")
def test_real_fashion_mnist():
    train, test = D.FashionMNIST(FASHION, train=True), D.FashionMNIST(FASHION, train=False)
    assert len(train) == 60000 and len(test) == 10000
    assert sorted(set(test.targets.tolist())) == list(range(10))
    img, label = train[0]
    assert img.size == (28, 28) and 0 <= label < 10


# ---------------------------------------------------------------- CIFAR

def cifar_batch(n, seed, key="labels", n_classes=10):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, 3072), dtype=np.uint8), \
        [int(v) for v in rng.integers(0, n_classes, n)]


def write_pickle(path, obj, protocol):
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=protocol)


def make_cifar10(root, protocol=2, bytes_keys=False):
    folder = os.path.join(root, "cifar-10-batches-py")
    os.makedirs(folder, exist_ok=True)
    k = (lambda s: s.encode()) if bytes_keys else (lambda s: s)
    batches = {}
    for i, name in enumerate(["data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4",
                              "data_batch_5", "test_batch"]):
        data, labels = cifar_batch(3 + i, seed=i)
        batches[name] = (data, labels)
        write_pickle(os.path.join(folder, name),
                     {k("batch_label"): f"batch {i}", k("labels"): labels, k("data"): data,
                      k("filenames"): [f"img{j}.png" for j in range(len(labels))]}, protocol)
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
             "truck"]
    write_pickle(os.path.join(folder, "batches.meta"),
                 {k("label_names"): [n.encode() if bytes_keys else n for n in names],
                  k("num_vis"): 3072}, protocol)
    return batches


def hwc(data):
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)


def _md5s_off(monkeypatch, cls):
    monkeypatch.setattr(cls, "train_list", [[n, None] for n, _ in cls.train_list])
    monkeypatch.setattr(cls, "test_list", [[n, None] for n, _ in cls.test_list])
    monkeypatch.setattr(cls, "meta", dict(cls.meta, md5=None))


@pytest.mark.parametrize("protocol,bytes_keys", [(2, True), (2, False), (4, False), (5, True)])
def test_cifar10(tmp_path, monkeypatch, protocol, bytes_keys):
    _md5s_off(monkeypatch, D.CIFAR10)
    batches = make_cifar10(tmp_path, protocol, bytes_keys)
    train = D.CIFAR10(tmp_path, train=True)
    test = D.CIFAR10(tmp_path, train=False, transform=to_tensor)
    assert len(train) == 3 + 4 + 5 + 6 + 7 and len(test) == 8
    expect = np.concatenate([hwc(batches[f"data_batch_{i}"][0]) for i in range(1, 6)])
    np.testing.assert_array_equal(train.data, expect)
    assert train.targets == sum((batches[f"data_batch_{i}"][1] for i in range(1, 6)), [])
    img, label = train[4]
    assert isinstance(img, Image.Image) and img.mode == "RGB" and img.size == (32, 32)
    np.testing.assert_array_equal(np.array(img), expect[4])
    assert train.classes[3] == "cat" and train.class_to_idx["truck"] == 9
    x, y = test[7]
    np.testing.assert_array_equal(x.numpy(), hwc(batches["test_batch"][0])[7])
    assert y == batches["test_batch"][1][7]
    xb, yb = next(iter(DataLoader(test, batch_size=8)))
    assert tuple(xb.shape) == (8, 32, 32, 3) and yb.tolist() == batches["test_batch"][1]


def _py2_str(b):
    return (b"U" + bytes([len(b)]) + b) if len(b) < 256 else (b"T" + struct.pack("<I", len(b)) + b)


def _py2_int(i):
    return b"J" + struct.pack("<i", i)


def py2_cifar_batch(data, labels):
    """A CIFAR batch as Python 2's cPickle wrote the real files (protocol 2, str keys and raw
    bytes, numpy.core.multiarray._reconstruct)."""
    arr = b"cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\n"
    arr += _py2_int(0) + b"\x85" + _py2_str(b"b") + b"\x87R"
    arr += b"(" + _py2_int(1) + b"(" + b"".join(_py2_int(d) for d in data.shape) + b"t"
    arr += b"cnumpy\ndtype\n" + _py2_str(b"u1") + _py2_int(0) + _py2_int(1) + b"\x87R"
    arr += b"(" + _py2_int(3) + _py2_str(b"|") + b"NNN" + _py2_int(-1) + _py2_int(-1)
    arr += _py2_int(0) + b"tb" + b"\x89" + _py2_str(data.tobytes()) + b"tb"
    lab = b"](" + b"".join(_py2_int(v) for v in labels) + b"e"
    return (b"\x80\x02}(" + _py2_str(b"batch_label") + _py2_str(b"testing batch 1 of 1") +
            _py2_str(b"labels") + lab + _py2_str(b"data") + arr + b"u.")


def test_cifar_reads_python2_pickles(tmp_path, monkeypatch):
    _md5s_off(monkeypatch, D.CIFAR10)
    make_cifar10(tmp_path)
    data, labels = cifar_batch(4, seed=11)
    (tmp_path / "cifar-10-batches-py" / "test_batch").write_bytes(py2_cifar_batch(data, labels))
    ds = D.CIFAR10(tmp_path, train=False)
    np.testing.assert_array_equal(ds.data, hwc(data))
    assert ds.targets == labels


def test_cifar100(tmp_path, monkeypatch):
    _md5s_off(monkeypatch, D.CIFAR100)
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    data, fine = cifar_batch(6, seed=9, n_classes=100)
    coarse = [f // 5 for f in fine]
    for name in ("train", "test"):
        write_pickle(folder / name, {"data": data, "fine_labels": fine, "coarse_labels": coarse,
                                     "filenames": ["a"] * 6, "batch_label": name}, 2)
    write_pickle(folder / "meta", {"fine_label_names": [f"c{i}" for i in range(100)],
                                   "coarse_label_names": [f"s{i}" for i in range(20)]}, 2)
    ds = D.CIFAR100(tmp_path, train=False)
    assert ds.targets == fine and len(ds.classes) == 100 and ds.classes[42] == "c42"
    np.testing.assert_array_equal(ds.data, hwc(data))


def test_cifar_refuses_code_in_pickles(tmp_path, monkeypatch):
    _md5s_off(monkeypatch, D.CIFAR10)
    make_cifar10(tmp_path)
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    write_pickle(tmp_path / "cifar-10-batches-py" / "data_batch_2", {"data": Evil()}, 2)
    with pytest.raises(RuntimeError, match="data_batch_2.*refusing the global"):
        D.CIFAR10(tmp_path)
    assert not marker.exists()
    write_pickle(tmp_path / "cifar-10-batches-py" / "data_batch_2",
                 {"data": np.array([1, "x"], dtype=object), "labels": [0, 1]}, 2)
    with pytest.raises(RuntimeError, match="data_batch_2"):
        D.CIFAR10(tmp_path)
    (tmp_path / "cifar-10-batches-py" / "data_batch_2").write_bytes(b"\x80\x02garbage")
    with pytest.raises(RuntimeError, match="data_batch_2"):
        D.CIFAR10(tmp_path)


def test_cifar_checks_md5(tmp_path):
    make_cifar10(tmp_path)  # our batches do not have the real files' md5
    with pytest.raises(RuntimeError, match="not found or corrupted"):
        D.CIFAR10(tmp_path)


# ---------------------------------------------------------------- folders, FakeData

def make_image_folder(root):
    rng = np.random.default_rng(5)
    files = {}
    for cls, names in (("dog", ["b.png", "a.jpg", "sub/c.png"]), ("cat", ["x.PNG", "y.bmp"])):
        for name in names:
            path = os.path.join(root, cls, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            arr = rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)
            Image.fromarray(arr).save(path)
            files[path] = arr
    with open(os.path.join(root, "dog", "notes.txt"), "w") as f:
        f.write("not an image")
    os.makedirs(os.path.join(root, "empty"))
    return files


def test_image_folder(tmp_path):
    files = make_image_folder(tmp_path)
    with pytest.raises(FileNotFoundError, match="empty"):
        D.ImageFolder(tmp_path)
    ds = D.ImageFolder(tmp_path, allow_empty=True)
    assert ds.classes == ["cat", "dog", "empty"]
    assert ds.class_to_idx == {"cat": 0, "dog": 1, "empty": 2}
    rel = [(os.path.relpath(p, tmp_path), t) for p, t in ds.samples]
    assert rel == [("cat/x.PNG", 0), ("cat/y.bmp", 0), ("dog/a.jpg", 1), ("dog/b.png", 1),
                   ("dog/sub/c.png", 1)]
    assert ds.targets == [0, 0, 1, 1, 1] and ds.imgs is ds.samples and len(ds) == 5
    img, y = ds[0]
    assert isinstance(img, Image.Image) and img.mode == "RGB" and y == 0
    np.testing.assert_array_equal(np.array(img), files[ds.samples[0][0]])
    tds = D.ImageFolder(tmp_path, loader=read_image, allow_empty=True,
                        is_valid_file=lambda p: p.endswith(".png"))
    assert [os.path.basename(p) for p, _ in tds.samples] == ["b.png", "c.png"]
    x, _ = tds[0]
    np.testing.assert_array_equal(x.numpy(), files[tds.samples[0][0]].transpose(2, 0, 1))
    xb, yb = next(iter(DataLoader(tds, batch_size=2)))
    assert tuple(xb.shape) == (2, 3, 6, 5) and yb.tolist() == [1, 1]
    # worker processes get the dataset pickled: same batches
    par = [b for b in DataLoader(tds, batch_size=1, num_workers=2)]
    assert [b[1].tolist() for b in par] == [[1], [1]]
    np.testing.assert_array_equal(par[0][0].numpy()[0], x.numpy())
    assert "Root location" in repr(ds)


def test_dataset_folder(tmp_path):
    for cls in ("a", "b"):
        os.makedirs(tmp_path / cls)
        for i in range(2):
            np.save(tmp_path / cls / f"{i}.npy", np.full(3, i + (10 if cls == "b" else 0)))
    ds = D.DatasetFolder(tmp_path, loader=np.load, extensions=(".npy",),
                         transform=lambda a: a * 2, target_transform=str)
    assert len(ds) == 4
    x, y = ds[3]
    assert x.tolist() == [22, 22, 22] and y == "1"
    with pytest.raises(ValueError, match="exactly one"):
        D.DatasetFolder(tmp_path, loader=np.load)
    with pytest.raises(ValueError, match="exactly one"):
        D.DatasetFolder(tmp_path, np.load, (".npy",), is_valid_file=lambda p: True)
    with pytest.raises(FileNotFoundError, match="supported extensions"):
        D.DatasetFolder(tmp_path, np.load, (".png",))

    class Only(D.DatasetFolder):
        def find_classes(self, directory):
            return ["b"], {"b": 0}

    assert len(Only(tmp_path, np.load, ".npy")) == 2
    bad = tmp_path / "img"
    (bad / "c").mkdir(parents=True)
    (bad / "c" / "broken.png").write_bytes(b"nope")
    with pytest.raises(RuntimeError, match="broken.png"):
        D.ImageFolder(bad)[0]


def test_fakedata_and_vision_dataset_repr():
    ds = D.FakeData(size=6, image_size=(1, 7, 5), num_classes=3, transform=to_tensor)
    x0, y0 = ds[2]
    x1, y1 = ds[2]
    assert tuple(x0.shape) == (7, 5) and (x0.numpy() == x1.numpy()).all() and y0 == y1
    assert 0 <= y0 < 3 and type(y0) is int
    assert not (ds[3][0].numpy() == x0.numpy()).all()
    shifted = D.FakeData(size=6, image_size=(1, 7, 5), num_classes=3, transform=to_tensor,
                         random_offset=1)
    assert (shifted[1][0].numpy() == ds[2][0].numpy()).all()
    with pytest.raises(IndexError):
        ds[6]
    assert len(list(DataLoader(ds, batch_size=4))) == 2
    r = repr(D.FakeData(size=2, transform=to_tensor))
    assert r.startswith("Dataset FakeData") and "Number of datapoints: 2" in r
    assert "Transform: <function to_tensor" in r


# ---------------------------------------------------------------- downloads

class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        srv = self.server
        srv.log.append((self.path, self.headers.get("Range")))
        data = srv.files.get(self.path)
        if data is None:
            self.send_error(404)
            return
        start = 0
        rng = self.headers.get("Range")
        if rng and not srv.ignore_range:
            start = int(rng.split("=")[1].split("-")[0])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            first = 0 if srv.bad_range else start
            self.send_header("Content-Range", f"bytes {first}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        cut = srv.cut.pop(self.path, None)
        if cut is not None:  # an interrupted transfer: part of the body, then the line drops
            self.wfile.write(body[:cut])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.files, srv.log, srv.cut = {}, [], {}
    srv.ignore_range = srv.bad_range = False
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}"
    yield srv
    srv.shutdown()
    srv.server_close()


PAYLOAD = bytes(np.random.default_rng(7).integers(0, 256, 300_000, dtype=np.uint8))


def test_download_url(server, tmp_path, capsys):
    server.files["/d/file.bin"] = PAYLOAD
    path = U.download_url(server.url + "/d/file.bin", tmp_path / "r", md5=md5(PAYLOAD),
                          sha256=hashlib.sha256(PAYLOAD).hexdigest())
    assert path == str(tmp_path / "r" / "file.bin")
    assert open(path, "rb").read() == PAYLOAD
    assert os.listdir(tmp_path / "r") == ["file.bin"]
    assert "file.bin" in capsys.readouterr().err  # the progress bar
    n = len(server.log)
    # present and intact: no request at all
    U.download_url(server.url + "/d/file.bin", tmp_path / "r", md5=md5(PAYLOAD))
    assert len(server.log) == n
    U.download_url(server.url + "/d/file.bin", tmp_path / "r", filename="other", progress=False)
    assert open(tmp_path / "r" / "other", "rb").read() == PAYLOAD
    assert capsys.readouterr().err == ""
    assert U.check_integrity(path, md5(PAYLOAD)) and not U.check_integrity(path, "0" * 32)
    assert not U.check_integrity(tmp_path / "missing")


def test_download_corrupt_leaves_nothing(server, tmp_path):
    server.files["/bad.bin"] = PAYLOAD
    root = tmp_path / "root"
    with pytest.raises(U.DownloadError, match="corrupt.*md5"):
        U.download_url(server.url + "/bad.bin", root, md5="0" * 32, progress=False)
    assert os.listdir(root) == []
    with pytest.raises(U.DownloadError, match="sha256"):
        U.download_url(server.url + "/bad.bin", root, sha256="f" * 64, progress=False)
    assert os.listdir(root) == []
    with pytest.raises(U.DownloadError, match="404"):
        U.download_url(server.url + "/missing.bin", root, progress=False)
    assert os.listdir(root) == []


def test_download_resumes_with_range(server, tmp_path):
    server.files["/big.bin"] = PAYLOAD
    server.cut["/big.bin"] = 120_000
    with pytest.raises(U.DownloadError, match="interrupted|resumes"):
        U.download_url(server.url + "/big.bin", tmp_path, md5=md5(PAYLOAD), progress=False)
    part = tmp_path / "big.bin.part"
    assert part.exists() and 0 < part.stat().st_size < len(PAYLOAD)
    assert not (tmp_path / "big.bin").exists()
    have = part.stat().st_size
    U.download_url(server.url + "/big.bin", tmp_path, md5=md5(PAYLOAD), progress=False)
    assert server.log[-1] == ("/big.bin", f"bytes={have}-")
    assert (tmp_path / "big.bin").read_bytes() == PAYLOAD
    assert os.listdir(tmp_path) == ["big.bin"]


def test_download_restarts_when_range_is_ignored(server, tmp_path):
    server.files["/f.bin"] = PAYLOAD
    server.ignore_range = True
    (tmp_path / "f.bin.part").write_bytes(b"stale bytes that must not survive")
    U.download_url(server.url + "/f.bin", tmp_path, md5=md5(PAYLOAD), progress=False)
    assert (tmp_path / "f.bin").read_bytes() == PAYLOAD


def test_download_refuses_a_misplaced_range(server, tmp_path):
    server.files["/h.bin"] = PAYLOAD
    server.bad_range = True
    (tmp_path / "h.bin.part").write_bytes(PAYLOAD[:1000])
    with pytest.raises(U.DownloadError, match="range"):
        U.download_url(server.url + "/h.bin", tmp_path, progress=False)
    assert os.listdir(tmp_path) == []
    server.bad_range = False
    U.download_url(server.url + "/h.bin", tmp_path, md5=md5(PAYLOAD), progress=False)
    assert (tmp_path / "h.bin").read_bytes() == PAYLOAD


def test_download_complete_part_gets_416(server, tmp_path):
    server.files["/g.bin"] = PAYLOAD
    (tmp_path / "g.bin.part").write_bytes(PAYLOAD)
    U.download_url(server.url + "/g.bin", tmp_path, md5=md5(PAYLOAD), progress=False)
    assert server.log[-1][1] == f"bytes={len(PAYLOAD)}-"
    assert (tmp_path / "g.bin").read_bytes() == PAYLOAD


def _targz(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_extract_archives(server, tmp_path):
    arc = _targz({"top/a.txt": b"alpha", "top/sub/b.txt": b"beta"})
    server.files["/arc.tar.gz"] = arc
    out = U.download_and_extract_archive(server.url + "/arc.tar.gz", tmp_path / "dl",
                                         extract_root=tmp_path / "x", md5=md5(arc),
                                         progress=False)
    assert out == tmp_path / "x" or str(out) == str(tmp_path / "x")
    assert (tmp_path / "x" / "top" / "sub" / "b.txt").read_bytes() == b"beta"
    assert (tmp_path / "dl" / "arc.tar.gz").exists()
    gz = tmp_path / "single.txt.gz"
    gz.write_bytes(gzip.compress(b"hello"))
    U.extract_archive(gz, remove_finished=True)
    assert (tmp_path / "single.txt").read_bytes() == b"hello" and not gz.exists()
    evil = tmp_path / "evil.tar.gz"
    evil.write_bytes(_targz({"../escape.txt": b"x"}))
    with pytest.raises(RuntimeError, match="outside"):
        U.extract_archive(evil, tmp_path / "e")
    assert not (tmp_path / "escape.txt").exists()
    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(arc[:40])
    with pytest.raises(RuntimeError, match="broken.tar.gz"):
        U.extract_archive(broken, tmp_path / "b")
    badgz = tmp_path / "half.bin.gz"
    badgz.write_bytes(gzip.compress(PAYLOAD)[:5000])
    with pytest.raises(RuntimeError, match="half.bin.gz"):
        U.extract_archive(badgz, tmp_path / "h")
    assert os.listdir(tmp_path / "h") == []  # no partial output
    with pytest.raises(ValueError, match="unknown archive"):
        U.extract_archive(tmp_path / "x" / "top" / "a.txt")


def test_mnist_download(server, tmp_path, monkeypatch):
    arrays = mnist_arrays()
    resources = []
    for split, (imgs, labels) in arrays.items():
        for kind, arr in (("images-idx3", imgs), ("labels-idx1", labels)):
            name = f"{split}-{kind}-ubyte.gz"
            server.files[f"/good/{name}"] = gzip.compress(idx_bytes(arr))
            resources.append((name, md5(server.files[f"/good/{name}"])))
    # the first mirror fails, the second serves the files
    monkeypatch.setattr(D.MNIST, "mirrors", [server.url + "/down/", server.url + "/good/"])
    monkeypatch.setattr(D.MNIST, "resources", resources)
    ds = D.MNIST(tmp_path, train=False, download=True)
    np.testing.assert_array_equal(ds.data.numpy(), arrays["t10k"][0])
    raw = sorted(os.listdir(tmp_path / "MNIST" / "raw"))
    assert "t10k-images-idx3-ubyte" in raw and "t10k-images-idx3-ubyte.gz" in raw
    assert not any(n.endswith(".part") for n in raw)
    n = len(server.log)
    server.shutdown()  # present files: download=True touches no network
    ds2 = D.MNIST(tmp_path, train=True, download=True)
    assert len(ds2) == 12 and len(server.log) == n


def test_mnist_download_all_mirrors_fail(server, tmp_path):
    # the module-level list of mirrors, replaced in place
    saved = list(D.mnist.FASHION_MNIST_MIRRORS)
    D.mnist.FASHION_MNIST_MIRRORS[:] = [server.url + "/a/", server.url + "/b/"]
    try:
        with pytest.raises(RuntimeError, match="(?s)error downloading train-images.*a/.*b/"):
            D.FashionMNIST(tmp_path, download=True)
    finally:
        D.mnist.FASHION_MNIST_MIRRORS[:] = saved
    assert [p for p, _ in server.log] == ["/a/train-images-idx3-ubyte.gz",
                                          "/b/train-images-idx3-ubyte.gz"]
    assert not any(f.endswith(".part") for f in os.listdir(tmp_path / "FashionMNIST" / "raw"))


def test_cifar_download(server, tmp_path, monkeypatch):
    src = tmp_path / "src"
    batches = make_cifar10(src)
    folder = src / "cifar-10-batches-py"
    members = {f"cifar-10-batches-py/{n}": (folder / n).read_bytes()
               for n in sorted(os.listdir(folder))}
    arc = _targz(members)
    server.files["/cifar-10-python.tar.gz"] = arc
    monkeypatch.setattr(D.CIFAR10, "mirrors", [server.url + "/cifar-10-python.tar.gz"])
    monkeypatch.setattr(D.CIFAR10, "tgz_md5", md5(arc))
    monkeypatch.setattr(D.CIFAR10, "train_list", [[n, md5(members[f"cifar-10-batches-py/{n}"])]
                                                  for n, _ in D.CIFAR10.train_list])
    monkeypatch.setattr(D.CIFAR10, "test_list", [["test_batch",
                                                  md5(members["cifar-10-batches-py/test_batch"])]])
    monkeypatch.setattr(D.CIFAR10, "meta", dict(D.CIFAR10.meta, md5=md5(
        members["cifar-10-batches-py/batches.meta"])))
    root = tmp_path / "root"
    ds = D.CIFAR10(root, train=False, download=True)
    np.testing.assert_array_equal(ds.data, hwc(batches["test_batch"][0]))
    n = len(server.log)
    D.CIFAR10(root, train=True, download=True)
    assert len(server.log) == n  # verified batches: nothing fetched again
