"""RAFT (torchvision.models.optical_flow.raft): Teed and Deng, "RAFT: Recurrent All-Pairs Field
Transforms for Optical Flow". A feature encoder maps both images to 1/8 resolution, the
all-pairs correlation of the two feature maps is pooled into a pyramid, and a convolutional GRU,
fed with correlations looked up around the current estimate, refines the flow step by step.
Same classes, module names (torchvision checkpoints load by key), initialisation and weights
enums as torchvision.

    >>> import fiamma
    >>> from fiamma.vision.models.optical_flow import raft_large
    >>> m = raft_large(weights=None).eval()
    >>> img1, img2 = fiamma.rand(1, 3, 128, 136), fiamma.rand(1, 3, 128, 136)
    >>> with fiamma.no_grad():
    ...     flow = m(img1 * 2 - 1, img2 * 2 - 1, num_flow_updates=3)[-1]
    >>> tuple(flow.shape)
    (1, 2, 128, 136)
"""
import fiamma
import fiamma.nn.functional as F
from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum, register_model
from fiamma.vision.models._weights_util import build
from fiamma.vision.models.optical_flow._utils import grid_sample, make_coords_grid, upsample_flow
from fiamma.vision.ops import Conv2dNormActivation

__all__ = ["RAFT", "raft_large", "raft_small", "Raft_Large_Weights", "Raft_Small_Weights"]


class ResidualBlock(nn.Module):
    """Two 3x3 convolutions (with bias, norm, ReLU) and a residual connection, projected by a
    strided 1x1 convolution when ``stride`` is 2 (or ``always_project``); ReLU after the sum."""

    def __init__(self, in_channels, out_channels, *, norm_layer, stride=1, always_project=False):
        super().__init__()
        self.convnormrelu1 = Conv2dNormActivation(in_channels, out_channels,
                                                  norm_layer=norm_layer, kernel_size=3,
                                                  stride=stride, bias=True)
        self.convnormrelu2 = Conv2dNormActivation(out_channels, out_channels,
                                                  norm_layer=norm_layer, kernel_size=3, bias=True)
        if stride == 1 and not always_project:
            self.downsample = nn.Identity()
        else:
            self.downsample = Conv2dNormActivation(in_channels, out_channels,
                                                   norm_layer=norm_layer, kernel_size=1,
                                                   stride=stride, bias=True,
                                                   activation_layer=None)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        y = self.convnormrelu2(self.convnormrelu1(x))
        return self.relu(self.downsample(x) + y)


class BottleneckBlock(nn.Module):
    """1x1 reduce (to out/4), 3x3 (strided), 1x1 expand, each with bias, norm and ReLU; the
    residual is projected when ``stride`` is 2; ReLU after the sum (RAFT-small's encoders)."""

    def __init__(self, in_channels, out_channels, *, norm_layer, stride=1):
        super().__init__()
        q = out_channels // 4
        self.convnormrelu1 = Conv2dNormActivation(in_channels, q, norm_layer=norm_layer,
                                                  kernel_size=1, bias=True)
        self.convnormrelu2 = Conv2dNormActivation(q, q, norm_layer=norm_layer, kernel_size=3,
                                                  stride=stride, bias=True)
        self.convnormrelu3 = Conv2dNormActivation(q, out_channels, norm_layer=norm_layer,
                                                  kernel_size=1, bias=True)
        if stride == 1:
            self.downsample = nn.Identity()
        else:
            self.downsample = Conv2dNormActivation(in_channels, out_channels,
                                                   norm_layer=norm_layer, kernel_size=1,
                                                   stride=stride, bias=True,
                                                   activation_layer=None)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        y = self.convnormrelu3(self.convnormrelu2(self.convnormrelu1(x)))
        return self.relu(self.downsample(x) + y)


class FeatureEncoder(nn.Module):
    """A 7x7 convolution, three stages of two ``block`` each, and a 1x1 convolution to
    ``layers[4]`` channels; ``strides`` (default 2, 1, 2, 2) give 1/8 resolution."""

    def __init__(self, *, block=ResidualBlock, layers=(64, 64, 96, 128, 256),
                 strides=(2, 1, 2, 2), norm_layer=nn.BatchNorm2d):
        super().__init__()
        if len(layers) != 5:
            raise ValueError(f"The expected number of layers is 5, instead got {len(layers)}")
        self.convnormrelu = Conv2dNormActivation(3, layers[0], norm_layer=norm_layer,
                                                 kernel_size=7, stride=strides[0], bias=True)
        self.layer1 = self._make_2_blocks(block, layers[0], layers[1], norm_layer, strides[1])
        self.layer2 = self._make_2_blocks(block, layers[1], layers[2], norm_layer, strides[2])
        self.layer3 = self._make_2_blocks(block, layers[2], layers[3], norm_layer, strides[3])
        self.conv = nn.Conv2d(layers[3], layers[4], kernel_size=1)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.InstanceNorm2d)):
                if m.weight is not None:
                    nn.init.constant_(m.weight, 1)
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0)
        self.output_dim = layers[-1]
        self.downsample_factor = 2 ** sum(1 for s in strides if s == 2)

    def _make_2_blocks(self, block, in_channels, out_channels, norm_layer, first_stride):
        return nn.Sequential(
            block(in_channels, out_channels, norm_layer=norm_layer, stride=first_stride),
            block(out_channels, out_channels, norm_layer=norm_layer, stride=1))

    def forward(self, x):
        x = self.convnormrelu(x)
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.conv(x)


class MotionEncoder(nn.Module):
    """Encodes the looked-up correlations and the current flow into ``out_channels`` motion
    features (the last two of which are the flow itself)."""

    def __init__(self, *, in_channels_corr, corr_layers=(256, 192), flow_layers=(128, 64),
                 out_channels=128):
        super().__init__()
        if len(flow_layers) != 2:
            raise ValueError(f"The expected number of flow_layers is 2, instead got "
                             f"{len(flow_layers)}")
        if len(corr_layers) not in (1, 2):
            raise ValueError(f"The number of corr_layers should be 1 or 2, instead got "
                             f"{len(corr_layers)}")
        self.convcorr1 = Conv2dNormActivation(in_channels_corr, corr_layers[0], norm_layer=None,
                                              kernel_size=1)
        if len(corr_layers) == 2:
            self.convcorr2 = Conv2dNormActivation(corr_layers[0], corr_layers[1],
                                                  norm_layer=None, kernel_size=3)
        else:
            self.convcorr2 = nn.Identity()
        self.convflow1 = Conv2dNormActivation(2, flow_layers[0], norm_layer=None, kernel_size=7)
        self.convflow2 = Conv2dNormActivation(flow_layers[0], flow_layers[1], norm_layer=None,
                                              kernel_size=3)
        self.conv = Conv2dNormActivation(corr_layers[-1] + flow_layers[-1], out_channels - 2,
                                         norm_layer=None, kernel_size=3)
        self.out_channels = out_channels

    def forward(self, flow, corr_features):
        corr = self.convcorr2(self.convcorr1(corr_features))
        motion = self.convflow2(self.convflow1(flow))
        out = self.conv(fiamma.cat([corr, motion], dim=1))
        return fiamma.cat([out, flow], dim=1)


class ConvGRU(nn.Module):
    """A GRU cell whose gates are convolutions over ``cat(h, x)``."""

    def __init__(self, *, input_size, hidden_size, kernel_size, padding):
        super().__init__()
        c = hidden_size + input_size
        self.convz = nn.Conv2d(c, hidden_size, kernel_size=kernel_size, padding=padding)
        self.convr = nn.Conv2d(c, hidden_size, kernel_size=kernel_size, padding=padding)
        self.convq = nn.Conv2d(c, hidden_size, kernel_size=kernel_size, padding=padding)

    def forward(self, h, x):
        hx = fiamma.cat([h, x], dim=1)
        z = fiamma.sigmoid(self.convz(hx))
        r = fiamma.sigmoid(self.convr(hx))
        q = fiamma.tanh(self.convq(fiamma.cat([r * h, x], dim=1)))
        return (1 - z) * h + z * q


def _pass_through_h(h, _):
    return h


class RecurrentBlock(nn.Module):
    """One or two ConvGRU cells applied in turn (RAFT-large: a 1x5 then a 5x1 one)."""

    def __init__(self, *, input_size, hidden_size, kernel_size=((1, 5), (5, 1)),
                 padding=((0, 2), (2, 0))):
        super().__init__()
        if len(kernel_size) != len(padding):
            raise ValueError(f"kernel_size should have the same length as padding, instead got "
                             f"len(kernel_size) = {len(kernel_size)} and len(padding) = "
                             f"{len(padding)}")
        if len(kernel_size) not in (1, 2):
            raise ValueError(f"kernel_size should either 1 or 2, instead got {len(kernel_size)}")
        self.convgru1 = ConvGRU(input_size=input_size, hidden_size=hidden_size,
                                kernel_size=kernel_size[0], padding=padding[0])
        if len(kernel_size) == 2:
            self.convgru2 = ConvGRU(input_size=input_size, hidden_size=hidden_size,
                                    kernel_size=kernel_size[1], padding=padding[1])
        else:
            self.convgru2 = _pass_through_h
        self.hidden_size = hidden_size

    def forward(self, h, x):
        return self.convgru2(self.convgru1(h, x), x)


class FlowHead(nn.Module):
    """Two 3x3 convolutions (ReLU between) from the hidden state to a flow update."""

    def __init__(self, *, in_channels, hidden_size):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, hidden_size, 3, padding=1)
        self.conv2 = nn.Conv2d(hidden_size, 2, 3, padding=1)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.conv2(self.relu(self.conv1(x)))


class UpdateBlock(nn.Module):
    """Motion encoder, recurrent block and flow head: one refinement step."""

    def __init__(self, *, motion_encoder, recurrent_block, flow_head):
        super().__init__()
        self.motion_encoder = motion_encoder
        self.recurrent_block = recurrent_block
        self.flow_head = flow_head
        self.hidden_state_size = recurrent_block.hidden_size

    def forward(self, hidden_state, context, corr_features, flow):
        motion = self.motion_encoder(flow, corr_features)
        hidden_state = self.recurrent_block(hidden_state, fiamma.cat([context, motion], dim=1))
        return hidden_state, self.flow_head(hidden_state)


class MaskPredictor(nn.Module):
    """Predicts the 8x8x9 convex-upsampling weights per coarse pixel from the hidden state,
    scaled by ``multiplier`` (0.25, which the original RAFT used to balance gradients)."""

    def __init__(self, *, in_channels, hidden_size, multiplier=0.25):
        super().__init__()
        self.convrelu = Conv2dNormActivation(in_channels, hidden_size, norm_layer=None,
                                             kernel_size=3)
        self.conv = nn.Conv2d(hidden_size, 8 * 8 * 9, 1, padding=0)
        self.multiplier = multiplier

    def forward(self, x):
        return self.multiplier * self.conv(self.convrelu(x))


class CorrBlock(nn.Module):
    """The correlation pyramid: :meth:`build_pyramid` computes every pair's feature dot product
    (divided by sqrt(C)) and average-pools it ``num_levels - 1`` times; :meth:`index_pyramid`
    samples a ``(2 * radius + 1)``-square neighbourhood around given coordinates at each
    level, giving ``num_levels * (2 * radius + 1) ** 2`` channels."""

    def __init__(self, *, num_levels=4, radius=4):
        super().__init__()
        self.num_levels = num_levels
        self.radius = radius
        self.corr_pyramid = []
        self.out_channels = num_levels * (2 * radius + 1) ** 2

    def build_pyramid(self, fmap1, fmap2):
        if fmap1.shape != fmap2.shape:
            raise ValueError(f"Input feature maps should have the same shape, instead got "
                             f"{tuple(fmap1.shape)} (fmap1.shape) != {tuple(fmap2.shape)} "
                             "(fmap2.shape)")
        # the coarsest level needs at least 2 values per side for bilinear sampling
        min_size = 2 * 2 ** (self.num_levels - 1)
        if any(s < min_size for s in fmap1.shape[-2:]):
            raise ValueError(
                "Feature maps are too small to be down-sampled by the correlation pyramid. H and "
                f"W of feature maps should be at least {min_size}; got: "
                f"{tuple(fmap1.shape[-2:])}. Remember that input images to the model are "
                f"downsampled by 8, so that means their dimensions should be at least 8 * "
                f"{min_size} = {8 * min_size}.")
        corr = self._compute_corr_volume(fmap1, fmap2)
        b, h, w, c, _, _ = corr.shape
        corr = corr.reshape(b * h * w, c, h, w)
        self.corr_pyramid = [corr]
        for _ in range(self.num_levels - 1):
            corr = F.avg_pool2d(corr, kernel_size=2, stride=2)
            self.corr_pyramid.append(corr)

    def index_pyramid(self, centroids_coords):
        if not self.corr_pyramid:
            raise RuntimeError("CorrBlock.index_pyramid: call build_pyramid first")
        side = 2 * self.radius + 1
        d = fiamma.linspace(-self.radius, self.radius, side, device=centroids_coords.device)
        # offset (d[i], d[j]) is added to (x, y): the i-th offset moves x, as in torchvision
        di, dj = fiamma.meshgrid(d, d, indexing="ij")
        delta = fiamma.stack([di, dj], dim=-1).reshape(1, side, side, 2)
        b, _, h, w = centroids_coords.shape
        coords = centroids_coords.permute(0, 2, 3, 1).reshape(b * h * w, 1, 1, 2)
        levels = []
        for corr in self.corr_pyramid:
            sampled = grid_sample(corr, coords + delta, align_corners=True, mode="bilinear")
            levels.append(sampled.reshape(b, h, w, -1))
            coords = coords / 2
        out = fiamma.cat(levels, dim=-1).permute(0, 3, 1, 2).contiguous()
        if tuple(out.shape) != (b, self.out_channels, h, w):
            raise ValueError(f"Output shape of index pyramid is incorrect. Should be "
                             f"{(b, self.out_channels, h, w)}, got {tuple(out.shape)}")
        return out

    def _compute_corr_volume(self, fmap1, fmap2):
        b, c, h, w = fmap1.shape
        corr = fmap1.reshape(b, c, h * w).transpose(1, 2) @ fmap2.reshape(b, c, h * w)
        return corr.reshape(b, h, w, 1, h, w) / float(c) ** 0.5


class RAFT(nn.Module):
    """RAFT from its parts (see :func:`raft_large` and :func:`raft_small` for the standard
    ones). ``context_encoder``'s output is split into the GRU's initial hidden state (the first
    ``update_block.hidden_state_size`` channels, through tanh) and the context (the rest,
    through ReLU). Without ``mask_predictor`` the flow is upsampled bilinearly.

    ``forward(image1, image2, num_flow_updates=12)`` returns the list of the
    ``num_flow_updates`` flow estimates at full resolution, ``(N, 2, H, W)`` each (x, then y
    displacement in pixels); H and W must be multiples of 8.
    """

    def __init__(self, *, feature_encoder, context_encoder, corr_block, update_block,
                 mask_predictor=None):
        super().__init__()
        self.feature_encoder = feature_encoder
        self.context_encoder = context_encoder
        self.corr_block = corr_block
        self.update_block = update_block
        self.mask_predictor = mask_predictor
        if not hasattr(self.update_block, "hidden_state_size"):
            raise ValueError("The update_block parameter should expose a 'hidden_state_size' "
                             "attribute.")

    def forward(self, image1, image2, num_flow_updates=12):
        if image1.ndim != 4 or image1.shape != image2.shape:
            raise ValueError(f"RAFT: expected two images of the same shape (N, 3, H, W), got "
                             f"{tuple(image1.shape)} and {tuple(image2.shape)}")
        b, _, h, w = image1.shape
        if h % 8 or w % 8:
            raise ValueError(f"input image H and W should be divisible by 8, instead got {h} "
                             f"(h) and {w} (w)")
        fmaps = self.feature_encoder(fiamma.cat([image1, image2], dim=0))
        fmap1, fmap2 = fmaps.chunk(2, dim=0)
        if tuple(fmap1.shape[-2:]) != (h // 8, w // 8):
            raise ValueError("The feature encoder should downsample H and W by 8")
        self.corr_block.build_pyramid(fmap1, fmap2)
        context_out = self.context_encoder(image1)
        if tuple(context_out.shape[-2:]) != (h // 8, w // 8):
            raise ValueError("The context encoder should downsample H and W by 8")
        hs = self.update_block.hidden_state_size
        rest = context_out.shape[1] - hs
        if rest <= 0:
            raise ValueError(f"The context encoder outputs {context_out.shape[1]} channels, but "
                             f"it should have at strictly more than hidden_state={hs} channels")
        hidden_state, context = context_out.split([hs, rest], dim=1)
        hidden_state = fiamma.tanh(hidden_state)
        context = F.relu(context)
        coords0 = make_coords_grid(b, h // 8, w // 8, device=fmap1.device)
        coords1 = make_coords_grid(b, h // 8, w // 8, device=fmap1.device)
        flows = []
        for _ in range(num_flow_updates):
            # no gradient through the lookup coordinates (as in the paper)
            coords1 = coords1.detach()
            corr = self.corr_block.index_pyramid(centroids_coords=coords1)
            hidden_state, delta = self.update_block(hidden_state, context, corr,
                                                    coords1 - coords0)
            coords1 = coords1 + delta
            mask = None if self.mask_predictor is None else self.mask_predictor(hidden_state)
            flows.append(upsample_flow(flow=coords1 - coords0, up_mask=mask))
        return flows


def _flow_preset():
    from fiamma.vision.transforms._presets import OpticalFlow
    return OpticalFlow()


_ORIGINAL = "https://github.com/princeton-vl/RAFT"
_REFERENCE = "https://github.com/pytorch/vision/tree/main/references/optical_flow"
_C_T = ":class:`~fiamma.vision.datasets.FlyingChairs` + FlyingThings3D"


def _w(file, n, ops, size, recipe, metrics, docs):
    return Weights(url="https://download.pytorch.org/models/" + file, transforms=_flow_preset,
                   meta={"min_size": (128, 128), "num_params": n, "recipe": recipe,
                         "_metrics": metrics, "_ops": ops, "_file_size": size, "_docs": docs})


def _large(file, recipe, metrics, docs):
    return _w(file, 5257536, 211.007, 20.129, recipe, metrics, docs)


def _small(file, recipe, metrics, docs):
    return _w(file, 990162, 47.655, 3.821, recipe, metrics, docs)


def _sintel_kitti(clean, final, epe, fl):
    return {"Sintel-Train-Cleanpass": {"epe": clean}, "Sintel-Train-Finalpass": {"epe": final},
            "Kitti-Train": {"per_image_epe": epe, "fl_all": fl}}


_PORTED = "Ported from the original RAFT release; trained on FlyingChairs + FlyingThings3D"
_SCRATCH = "Trained from scratch with torchvision's reference scripts on FlyingChairs + " \
           "FlyingThings3D"
_SINTEL = ", then fine-tuned on a Sintel + KittiFlow + HD1K + FlyingThings3D (clean) mix"


class Raft_Large_Weights(WeightsEnum):
    C_T_V1 = _large("raft_large_C_T_V1-22a6c225.pth", _ORIGINAL,
                    _sintel_kitti(1.4411, 2.7894, 5.0172, 17.4506), _PORTED + ".")
    C_T_V2 = _large("raft_large_C_T_V2-1bb1363a.pth", _REFERENCE,
                    _sintel_kitti(1.3822, 2.7161, 4.5118, 16.0679), _SCRATCH + ".")
    C_T_SKHT_V1 = _large("raft_large_C_T_SKHT_V1-0b8c9e55.pth", _ORIGINAL,
                         {"Sintel-Test-Cleanpass": {"epe": 1.94},
                          "Sintel-Test-Finalpass": {"epe": 3.18}}, _PORTED + _SINTEL + ".")
    C_T_SKHT_V2 = _large("raft_large_C_T_SKHT_V2-ff5fadd5.pth", _REFERENCE,
                         {"Sintel-Test-Cleanpass": {"epe": 1.819},
                          "Sintel-Test-Finalpass": {"epe": 3.067}}, _SCRATCH + _SINTEL + ".")
    C_T_SKHT_K_V1 = _large("raft_large_C_T_SKHT_K_V1-4a6a5039.pth", _ORIGINAL,
                           {"Kitti-Test": {"fl_all": 5.1}},
                           _PORTED + _SINTEL + ", then on KittiFlow.")
    C_T_SKHT_K_V2 = _large("raft_large_C_T_SKHT_K_V2-b5c70766.pth", _REFERENCE,
                           {"Kitti-Test": {"fl_all": 5.19}},
                           _SCRATCH + _SINTEL + ", then on KittiFlow.")
    DEFAULT = C_T_SKHT_V2


class Raft_Small_Weights(WeightsEnum):
    C_T_V1 = _small("raft_small_C_T_V1-ad48884c.pth", _ORIGINAL,
                    _sintel_kitti(2.1231, 3.279, 7.6557, 25.2801), _PORTED + ".")
    C_T_V2 = _small("raft_small_C_T_V2-01064c6d.pth", _REFERENCE,
                    _sintel_kitti(1.9901, 3.2831, 7.5978, 25.2369), _SCRATCH + ".")
    DEFAULT = C_T_V2


def _raft(enum_cls, weights, progress, kwargs, *, feature_encoder_layers,
          feature_encoder_block, feature_encoder_norm_layer, context_encoder_layers,
          context_encoder_block, context_encoder_norm_layer, corr_block_num_levels,
          corr_block_radius, motion_encoder_corr_layers, motion_encoder_flow_layers,
          motion_encoder_out_channels, recurrent_block_hidden_state_size,
          recurrent_block_kernel_size, recurrent_block_padding, flow_head_hidden_size,
          use_mask_predictor):
    def make(**kw):
        feature_encoder = kw.pop("feature_encoder", None) or FeatureEncoder(
            block=feature_encoder_block, layers=feature_encoder_layers,
            norm_layer=feature_encoder_norm_layer)
        context_encoder = kw.pop("context_encoder", None) or FeatureEncoder(
            block=context_encoder_block, layers=context_encoder_layers,
            norm_layer=context_encoder_norm_layer)
        corr_block = kw.pop("corr_block", None) or CorrBlock(num_levels=corr_block_num_levels,
                                                             radius=corr_block_radius)
        update_block = kw.pop("update_block", None)
        if update_block is None:
            motion = MotionEncoder(in_channels_corr=corr_block.out_channels,
                                   corr_layers=motion_encoder_corr_layers,
                                   flow_layers=motion_encoder_flow_layers,
                                   out_channels=motion_encoder_out_channels)
            context_channels = context_encoder_layers[-1] - recurrent_block_hidden_state_size
            recurrent = RecurrentBlock(input_size=motion.out_channels + context_channels,
                                       hidden_size=recurrent_block_hidden_state_size,
                                       kernel_size=recurrent_block_kernel_size,
                                       padding=recurrent_block_padding)
            head = FlowHead(in_channels=recurrent_block_hidden_state_size,
                            hidden_size=flow_head_hidden_size)
            update_block = UpdateBlock(motion_encoder=motion, recurrent_block=recurrent,
                                       flow_head=head)
        mask_predictor = kw.pop("mask_predictor", None)
        if mask_predictor is None and use_mask_predictor:
            mask_predictor = MaskPredictor(in_channels=recurrent_block_hidden_state_size,
                                           hidden_size=256, multiplier=0.25)
        return RAFT(feature_encoder=feature_encoder, context_encoder=context_encoder,
                    corr_block=corr_block, update_block=update_block,
                    mask_predictor=mask_predictor, **kw)
    return build(enum_cls, weights, progress, kwargs, make)


_ARGS = """

    Args:
        weights: a :class:`{0}` member or its name (``"DEFAULT"``, ...), the path of a local
            checkpoint file, a state dict, or None (random initialisation, the default).
        progress: show a progress bar while downloading.
        **kwargs: replacement parts for :class:`RAFT` (``feature_encoder``,
            ``context_encoder``, ``corr_block``, ``update_block``, ``mask_predictor``).
"""


@register_model(weights=Raft_Large_Weights)
def raft_large(*, weights=None, progress=True, **kwargs):
    return _raft(Raft_Large_Weights, weights, progress, kwargs,
                 feature_encoder_layers=(64, 64, 96, 128, 256),
                 feature_encoder_block=ResidualBlock, feature_encoder_norm_layer=nn.InstanceNorm2d,
                 context_encoder_layers=(64, 64, 96, 128, 256),
                 context_encoder_block=ResidualBlock, context_encoder_norm_layer=nn.BatchNorm2d,
                 corr_block_num_levels=4, corr_block_radius=4,
                 motion_encoder_corr_layers=(256, 192), motion_encoder_flow_layers=(128, 64),
                 motion_encoder_out_channels=128, recurrent_block_hidden_state_size=128,
                 recurrent_block_kernel_size=((1, 5), (5, 1)),
                 recurrent_block_padding=((0, 2), (2, 0)), flow_head_hidden_size=256,
                 use_mask_predictor=True)


@register_model(weights=Raft_Small_Weights)
def raft_small(*, weights=None, progress=True, **kwargs):
    return _raft(Raft_Small_Weights, weights, progress, kwargs,
                 feature_encoder_layers=(32, 32, 64, 96, 128),
                 feature_encoder_block=BottleneckBlock,
                 feature_encoder_norm_layer=nn.InstanceNorm2d,
                 context_encoder_layers=(32, 32, 64, 96, 160),
                 context_encoder_block=BottleneckBlock, context_encoder_norm_layer=None,
                 corr_block_num_levels=4, corr_block_radius=3,
                 motion_encoder_corr_layers=(96,), motion_encoder_flow_layers=(64, 32),
                 motion_encoder_out_channels=82, recurrent_block_hidden_state_size=96,
                 recurrent_block_kernel_size=(3,), recurrent_block_padding=(1,),
                 flow_head_hidden_size=128, use_mask_predictor=False)


raft_large.__doc__ = ("RAFT (large): residual encoders (instance-norm features, batch-norm "
                      "context), a radius-4 correlation pyramid, two ConvGRUs and convex "
                      "upsampling; 5.3M parameters." + _ARGS.format("Raft_Large_Weights"))
raft_small.__doc__ = ("RAFT (small): bottleneck encoders, a radius-3 correlation pyramid, one "
                      "ConvGRU and bilinear upsampling; 1.0M parameters."
                      + _ARGS.format("Raft_Small_Weights"))
