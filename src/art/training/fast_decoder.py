"""A training forward for Llama-style decoders (Llama, Qwen2) with their PEFT LoRA adapters, in fewer, bigger ops.

Why: on a CPU, a step through Hugging Face's modules + PEFT spends most of its time outside matmuls
(profiled in benchmarks/README.md): every LoRA module runs two skinny matmuls, a scale and an add, and q/k/v
(gate/up) read the same input three (two) times. This forward computes exactly the same function with the same
parameters (the PEFT LoRA tensors stay the source of truth: checkpoints, optimizer and engine are unchanged):

- q, k, v are one matmul against their concatenated frozen weights, and so are gate and up (the copies are
  made once and shared by every step; they never change because the base model is frozen);
- their LoRA adapters too: `u = x A_cat^T` (A of q, k, v stacked, r rows each), then `y = addmm(y, u, B_blk^T)`
  with B block-diagonal and the scaling folded in: one skinny matmul in, one fused multiply-add out;
- o_proj and down_proj add the residual inside their matmul (`addmm(residual, x, W^T)`);
- attention is causal with no mask tensor (rows are right-padded, see batching.py, so real tokens never see
  padding): batched matmuls around C++ softmax kernels (`causal_attention`; 1.08-1.13x faster whole steps
  than SDPA), or SDPA where those do not apply or when `cpp_attention` is off (`RuntimeOptions.train_cpp_attention`).

- a prompt start that every row of the micro-batch shares (a group's system prompt, examples and first
  user turn: 254 of a tic-tac-toe game's ~400 tokens) is computed once, not once per row (`shared_prefix`):
  its rows join the projections and MLPs once, the other rows' attention reads its keys and values, and its
  gradient is the sum of theirs, which is what B copies of it would get (`RuntimeOptions.train_shared_prefix`).

Numerics: the same bf16 matmuls (under the trainer's autocast) with fewer intermediate roundings; the tests check
logprobs and gradients against the Hugging Face + PEFT forward. Anything this forward does not cover (another
architecture, LoRA dropout or DoRA, merged adapters, sliding windows, left padding) uses the model's own forward.
"""

from __future__ import annotations

import functools
import logging
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from art.training import causal_attention

logger = logging.getLogger(__name__)

SUPPORTED_MODEL_TYPES = ("llama", "qwen2")
MIN_SHARED_TOKENS = 32
"""Token computations a shared prefix must save (rows - 1 times its length) before it is computed once:
below it, the extra attention call and copies cost about what they save."""


def _lora_layers(modules: Sequence[Any]) -> list[Any] | None:
    """The PEFT LoRA layers of `modules` (None if any is not a plain LoRA Linear this forward handles)."""
    from peft.tuners.lora import Linear as LoraLinear

    layers = []
    for m in modules:
        if not isinstance(m, LoraLinear):
            return None
        if m.merged or m.lora_variant or any(m.lora_bias.values()):
            return None
        if any(not isinstance(d, torch.nn.Identity) for d in m.lora_dropout.values()):
            return None
        layers.append(m)
    return layers


def _lora_factors(layers: Sequence[Any]) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(A_cat [R, in], B_blk [out_total, R]) of the active adapters of `layers`, scaling folded into B.

    B_blk is block-diagonal: output rows of layer i only see the rank columns of layer i's adapters.
    None when no adapter is active (adapters disabled, e.g. for the KL reference).
    """
    a_list: list[torch.Tensor] = []
    b_list: list[torch.Tensor] = []
    for m in layers:
        out = m.base_layer.out_features
        active = [] if m.disable_adapters else [a for a in m.active_adapters if a in m.lora_A]
        if not active:
            b_list.append(m.lora_B[next(iter(m.lora_B))].weight.new_zeros(out, 0))
            continue
        a_list += [m.lora_A[a].weight for a in active]
        b_list.append(torch.cat([m.lora_B[a].weight * m.scaling[a] for a in active], dim=1))
    if not a_list:
        return None
    return torch.cat(a_list), torch.block_diag(*b_list)  # type: ignore[no-untyped-call]


def _project(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    layers: Sequence[Any],
    residual: torch.Tensor | None = None,
) -> torch.Tensor:
    """`residual + x W^T + bias + LoRA(x)` for the (concatenated) projections of `layers`; x is [N, in]."""
    if residual is None:
        y = F.linear(x, weight, bias)
    else:
        y = torch.addmm(residual, x, weight.t())
        if bias is not None:
            y = y + bias
    factors = _lora_factors(layers)
    if factors is not None:
        a, b = factors
        if a.dtype == x.dtype or torch.is_autocast_enabled(x.device.type):
            # In place: y's producer (a matmul) does not keep its output for backward.
            u = F.linear(x, a).to(y.dtype)
            y = y.addmm_(u, b.to(y.dtype).t())
        else:  # e.g. float32 LoRA on a bf16 base without autocast: peft's way, in the LoRA's dtype
            y = (y + F.linear(F.linear(x.to(a.dtype), a), b)).to(y.dtype)
    return y


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Llama's RMSNorm: float32 statistics, the normalised value rounded to x's dtype, then times the weight."""
    xf = x.float()
    return weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def _rope(x_BTHD: torch.Tensor, cos_1T1D: torch.Tensor, sin_1T1D: torch.Tensor) -> torch.Tensor:
    """Rotary embedding, as Llama applies it (rotate_half)."""
    half = x_BTHD.shape[-1] // 2
    rotated = torch.cat((-x_BTHD[..., half:], x_BTHD[..., :half]), dim=-1)
    return x_BTHD * cos_1T1D + rotated * sin_1T1D


def _qkv_rope(
    qkv_NF: torch.Tensor, cos_1T1D: torch.Tensor, sin_1T1D: torch.Tensor, heads_q: int, heads_kv: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v out of the fused projection (N = B*T rows), q and k rotated; each [B, heads, T, D] contiguous.

    One kernel forward and one backward (the gradient of the fused projection comes out whole, no concat).
    """
    T, D = cos_1T1D.shape[1], cos_1T1D.shape[-1]
    x_BTHD = qkv_NF.view(qkv_NF.shape[0] // T, T, heads_q + 2 * heads_kv, D)
    q_BTHD = _rope(x_BTHD[:, :, :heads_q], cos_1T1D, sin_1T1D)
    k_BTHD = _rope(x_BTHD[:, :, heads_q : heads_q + heads_kv], cos_1T1D, sin_1T1D)
    v_BTHD = x_BTHD[:, :, heads_q + heads_kv :]
    return (
        q_BTHD.transpose(1, 2).contiguous(),
        k_BTHD.transpose(1, 2).contiguous(),
        v_BTHD.transpose(1, 2).contiguous(),
    )


def _swiglu(gate_up_NF: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up of the fused gate/up projection."""
    gate, up = gate_up_NF.chunk(2, dim=-1)
    return F.silu(gate) * up


@dataclass(frozen=True)
class KernelShapes:
    """The sizes one model's element-wise kernels are compiled for: every size but the rows (and positions).

    Static sizes compile 3x faster than fully dynamic ones (7 s instead of 22 s with a warm on-disk cache, for
    smollm2-135m on a 2-core AVX2 host: the symbolic sizes cost dynamo more than the kernels cost inductor) and
    let inductor lay out each loop for the model's real widths."""

    hidden: int
    heads_q: int
    heads_kv: int
    head_dim: int
    intermediate: int
    eps: float

    @classmethod
    def of(cls, model: Any) -> KernelShapes:
        """The shapes of a (PEFT-wrapped) Llama-style `model`'s kernels."""
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        decoder = base.get_decoder()
        attn, mlp = decoder.layers[0].self_attn, decoder.layers[0].mlp
        return cls(
            hidden=int(base.config.hidden_size),
            heads_q=attn.q_proj.out_features // attn.head_dim,
            heads_kv=attn.k_proj.out_features // attn.head_dim,
            head_dim=int(attn.head_dim),
            intermediate=mlp.gate_proj.out_features,
            eps=_eps(decoder.norm),
        )


@functools.cache
def _functions_for(shapes: KernelShapes) -> tuple[Callable[..., Any], ...]:
    """Copies of `_rms_norm`, `_qkv_rope` and `_swiglu` with code objects of their own, one set per `shapes`.

    Dynamo keeps compiled code, and what it has seen of the sizes, per code object: sharing one between two
    models would compile the second model's sizes as dynamic (a recompile whose code depends on what ran
    before in the process); with a copy each, every model's kernels are compiled as if they were the first."""

    def copy(fn: Callable[..., Any]) -> Callable[..., Any]:
        name = f"{fn.__name__}_{shapes.hidden}_{shapes.heads_q}_{shapes.heads_kv}_{shapes.head_dim}_{shapes.intermediate}"
        code = fn.__code__.replace(co_name=name, co_qualname=name)
        return types.FunctionType(code, fn.__globals__, name, fn.__defaults__, fn.__closure__)

    return copy(_rms_norm), copy(_qkv_rope), copy(_swiglu)


class _Kernels:
    """The element-wise pieces for one model's `KernelShapes`, compiled by torch.compile (inductor) when it
    works here, else eager.

    In eager mode each of them is several passes over memory (casts, powers, slices, concatenations, and as
    many again in backward), which profiling found to cost more than the matmuls; compiled, each is one or two
    fused loops. Compilation happens once per process, shapes and dtype, on first use (rows and positions
    dynamic, every other size static); `RuntimeOptions(train_compile=False)` skips it. If compiling fails
    (e.g. no C++ compiler), the eager versions are used.
    """

    def __init__(self, shapes: KernelShapes) -> None:
        self.shapes = shapes
        self.rms_norm: Callable[..., torch.Tensor] = _rms_norm
        self.qkv_rope: Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = _qkv_rope
        self.swiglu: Callable[..., torch.Tensor] = _swiglu
        self.ready = False
        self.compiled = False  # True once torch.compile built and checked them

    def prepare(self, dtype: torch.dtype, compile: bool = True, device: torch.device | str = "cpu") -> None:
        """Compile and check the kernels once (forward and backward on small tensors on `device`, the device
        they will run on: a GPU compiles its own kernels, not the CPU's); `compile=False`: eager."""
        if self.ready:
            return
        self.ready = True
        if not compile:
            return
        # The check runs backward: it needs grad mode even when the first forward to want the kernels is a
        # scoring one under no_grad (the trust region's, the canary's); without, the compile "failed" and
        # every later step trained on eager kernels.
        with torch.enable_grad():
            self._compile(dtype, device)

    def _compile(self, dtype: torch.dtype, device: torch.device | str) -> None:
        """`prepare`'s compile and check (grad mode on)."""
        s = self.shapes
        try:
            rms_norm, qkv_rope, swiglu = (torch.compile(f, dynamic=None) for f in _functions_for(s))
            # Called here in every variant the decoder calls them in, so that no real call compiles them again:
            # a recompile takes its size hints (and so its loop splits, and so its rounding) from the call that
            # triggered it, which made a run's numbers depend on what ran earlier in the process (a seed gave
            # another result after another run). Hence: every input's rows (and the rotary tables' positions)
            # marked dynamic from the first compile, inputs with and without grad, grad mode on and off, rope
            # on one row too (a shared prefix is a batch of 1, which torch.compile specialises), and the model's
            # own epsilon (a float argument is a constant of the compiled code).
            # Inputs from a generator of their own: the same on every call, and the caller's random stream
            # untouched (drawing from the global one made the check, and so which kernels train, depend on
            # the seed and on what ran before). The model's own widths, so that the check runs the very loops
            # (vector bodies and tails) that will train.
            generator = torch.Generator().manual_seed(0)

            def dynamic(t: torch.Tensor, dim: int = 0) -> torch.Tensor:
                torch._dynamo.mark_dynamic(t, dim)
                return t

            def draw(*shape: int, grad: bool = False) -> torch.Tensor:
                t = torch.randn(*shape, generator=generator).to(dtype=dtype, device=device)
                return t.requires_grad_(grad)

            T, B = 5, 3
            weight = 1 + draw(s.hidden) / 4
            qkv = dynamic(draw(B * T, (s.heads_q + 2 * s.heads_kv) * s.head_dim, grad=True))
            one_row = dynamic(qkv[:T])
            cos, sin = dynamic(draw(1, T, 1, s.head_dim), 1), dynamic(draw(1, T, 1, s.head_dim), 1)
            h = dynamic(draw(B * T, s.hidden, grad=True))
            gate_up = dynamic(draw(B * T, 2 * s.intermediate, grad=True))
            heads = (s.heads_q, s.heads_kv)

            def run(rms: Any, rope: Any, glu: Any) -> list[torch.Tensor]:
                outs = [*rope(qkv, cos, sin, *heads), *rope(one_row, cos, sin, *heads), rms(h, weight, s.eps)]
                outs.append(glu(gate_up))
                grads = torch.autograd.grad(sum(o.float().square().sum() for o in outs), (qkv, h, gate_up))
                return [t.detach().float() for t in (*outs, *grads)]

            # Compiled code that computes something else (e.g. loaded from an on-disk cache built for another
            # vector ISA, which torch does not tell apart: NaN or O(1) errors) must not train: check it against
            # eager, tensor by tensor, relative to the tensor's size. Fused code rounds once where eager rounds
            # each step, so in bf16 single elements may differ by several of their units (up to 0.5 was seen
            # where terms cancel, which an element-wise bound mistook for wrong code).
            tolerance = 1e-4 if dtype == torch.float32 else 2e-2
            for got, want in zip(
                run(rms_norm, qkv_rope, swiglu), run(_rms_norm, _qkv_rope, _swiglu), strict=True
            ):
                error = ((got - want).norm() / want.norm().clamp_min(1e-12)).item()
                if not error <= tolerance:  # NaN fails too
                    raise RuntimeError(f"compiled kernels differ from eager by {error:.3g} (relative)")
            # The other variants: the first layer's input (no grad: the embeddings are frozen) and scoring
            # without grad (the canary, logprobs).
            rms_norm(dynamic(h.detach()), weight, s.eps)
            with torch.no_grad():
                rms_norm(h, weight, s.eps), qkv_rope(qkv, cos, sin, *heads), swiglu(gate_up)
                qkv_rope(one_row, cos, sin, *heads)
                # and as a forward under no_grad calls them: on tensors that do not require grad (the trust
                # region's scoring pass; without these it recompiled on its first call, 0.7 s on the default model)
                plain_qkv = dynamic(qkv.detach())
                rms_norm(dynamic(h.detach()), weight, s.eps), swiglu(dynamic(gate_up.detach()))
                qkv_rope(plain_qkv, cos, sin, *heads), qkv_rope(dynamic(plain_qkv[:T]), cos, sin, *heads)
        except Exception as exc:  # any compiler failure or wrong result: fall back to eager, and say so once
            logger.warning("torch.compile is unavailable for training (%s); using eager kernels", exc)
            return
        self.rms_norm, self.qkv_rope, self.swiglu = rms_norm, qkv_rope, swiglu
        self.compiled = True


# by device type, dtype, compiled, shapes
_KERNELS: dict[tuple[str, torch.dtype, bool, KernelShapes], _Kernels] = {}


def _frozen(weight: torch.Tensor) -> torch.Tensor:
    """A norm's weight as the compiled kernels were built for it: a plain tensor (`_Kernels.prepare` compiles
    with one; a Parameter is another kind of input to Dynamo, so another compile) when nothing trains it, as
    under LoRA."""
    return weight if weight.requires_grad else weight.detach()


def _eps(norm: Any) -> float:
    eps = getattr(norm, "variance_epsilon", None) or getattr(norm, "eps", None)
    return 1e-6 if eps is None else float(eps)


def _after_attention(
    e: dict[str, Any], a_ND: torch.Tensor, x_NH: torch.Tensor, kernels: _Kernels
) -> torch.Tensor:
    """The rest of decoder layer `e` once its attention output `a_ND` is known: o_proj plus the residual
    `x_NH`, the post-attention norm, the SwiGLU MLP plus the residual (rows as in `x_NH`)."""
    x_NH = _project(a_ND, e["o"][0], e["o"][1], e["o"][2], residual=x_NH)
    norm = e["layer"].post_attention_layernorm
    h_NH = kernels.rms_norm(x_NH, _frozen(norm.weight), _eps(norm))
    w_down, b_down, lora_down = e["down"]
    return _project(kernels.swiglu(_project(h_NH, *e["gate_up"])), w_down, b_down, lora_down, residual=x_NH)


class FastDecoder:
    """Callable `(input_ids_BT) -> hidden_BTH` (after the final norm) for a supported PEFT-wrapped model."""

    def __init__(
        self,
        model: Any,
        *,
        compile: bool = True,
        cpp_attention: bool = True,
        native_bf16: bool = True,
        shared_prefix: bool = True,
    ) -> None:
        """`compile`: torch.compile the element-wise kernels; `cpp_attention`: the C++ causal attention where it
        applies (else SDPA); `shared_prefix`: compute the rows' shared start once (`shared_prefix_length`).
        Each may be changed later (e.g. by a benchmark alternating them)."""
        self.compile = compile
        self.cpp_attention = cpp_attention
        self.shared_prefix = shared_prefix
        self.native_bf16 = native_bf16  # as the C++ kernels run (`RuntimeOptions.native_bf16`)
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        self.config = base.config
        self.decoder = base.get_decoder()
        self.shapes = KernelShapes.of(model)
        self.layers: list[dict[str, Any]] = []
        for layer in self.decoder.layers:
            attn, mlp = layer.self_attn, layer.mlp
            qkv = [attn.q_proj, attn.k_proj, attn.v_proj]
            gate_up = [mlp.gate_proj, mlp.up_proj]
            entry: dict[str, Any] = {"layer": layer, "attn": attn}
            for key, modules in (
                ("qkv", qkv),
                ("gate_up", gate_up),
                ("o", [attn.o_proj]),
                ("down", [mlp.down_proj]),
            ):
                lora = _lora_layers(modules)
                if lora is None:
                    raise ValueError(f"unsupported projection in {key}")
                bases = [m.base_layer for m in lora]
                with torch.no_grad():
                    weight = bases[0].weight if len(bases) == 1 else torch.cat([b.weight for b in bases])
                    biases = [b.bias for b in bases]
                    if all(b is None for b in biases):
                        bias = None
                    else:
                        bias = torch.cat(
                            [
                                b if b is not None else m.weight.new_zeros(m.out_features)
                                for b, m in zip(biases, bases, strict=True)
                            ]
                        )
                entry[key] = (weight.detach(), None if bias is None else bias.detach(), lora)
            entry["heads"] = (
                attn.q_proj.out_features // attn.head_dim,
                attn.k_proj.out_features // attn.head_dim,
            )
            self.layers.append(entry)

    @classmethod
    def build(cls, model: Any, **switches: bool) -> FastDecoder | None:
        """The fast forward of `model` with the constructor's `switches` (`compile`, `cpp_attention`,
        `native_bf16`, `shared_prefix`), or None when its architecture or adapter setup is not one it covers."""
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        cfg = base.config
        if getattr(cfg, "model_type", None) not in SUPPORTED_MODEL_TYPES:
            return None
        if getattr(cfg, "hidden_act", "silu") != "silu" or getattr(cfg, "use_sliding_window", False):
            return None
        if getattr(cfg, "mlp_bias", False):
            return None
        try:
            return cls(model, **switches)
        except (ValueError, AttributeError):
            return None

    def kernels_ready(self, dtype: torch.dtype, device: torch.device) -> bool:
        """Whether the element-wise kernels for `dtype` on `device` are prepared (compiled, or known eager)."""
        kernels = _KERNELS.get((device.type, dtype, self.compile, self.shapes))
        return kernels is not None and kernels.ready

    def prepare_kernels(self, dtype: torch.dtype, device: torch.device) -> None:
        """Compile and check the element-wise kernels for `dtype` on `device` now (else the first forward does)."""
        self._kernels(dtype, device)

    def _kernels(self, dtype: torch.dtype, device: torch.device) -> _Kernels:
        key = (device.type, dtype, self.compile, self.shapes)
        kernels = _KERNELS.get(key) or _KERNELS.setdefault(key, _Kernels(self.shapes))
        kernels.prepare(dtype, self.compile, device)
        return kernels

    def usable(self, attention_mask_BT: torch.Tensor) -> bool:
        """True when every row is real tokens then padding (right-padded), and adapters are still plain LoRA."""
        if attention_mask_BT.shape[1] > 1 and bool(
            (attention_mask_BT[:, 1:] > attention_mask_BT[:, :-1]).any()
        ):
            return False
        return all(
            _lora_layers(e[k][2]) is not None for e in self.layers for k in ("qkv", "o", "gate_up", "down")
        )

    def shared_prefix_length(self, input_ids_BT: torch.Tensor, attention_mask_BT: torch.Tensor) -> int:
        """How many leading tokens `__call__` computes once for all rows: the rows' common start, within
        every row's real tokens and short of the last position; 0 (each row in full) when that would save
        fewer than `MIN_SHARED_TOKENS` token computations, with one row, or with `shared_prefix` off."""
        B, T = input_ids_BT.shape
        if not self.shared_prefix or B < 2 or T < 2:
            return 0
        same_T = (input_ids_BT == input_ids_BT[:1]).all(dim=0)
        differ = (~same_T).nonzero()
        common = int(differ[0, 0]) if len(differ) else T
        shortest = int(attention_mask_BT.sum(dim=1).min())
        length = min(common, shortest, T - 1)
        return length if (B - 1) * length >= MIN_SHARED_TOKENS else 0

    def __call__(self, input_ids_BT: torch.Tensor, shared_prefix: int = 0) -> torch.Tensor:
        """Final hidden states [B, T, H] of right-padded rows; the first `shared_prefix` tokens, the same in
        every row (`shared_prefix_length`), are computed once."""
        if shared_prefix > 0:
            return self._with_shared_prefix(input_ids_BT, shared_prefix)
        B, T = input_ids_BT.shape
        dec = self.decoder
        x_BTH = dec.embed_tokens(input_ids_BT)
        kernels = self._kernels(x_BTH.dtype, x_BTH.device)
        rms_norm = kernels.rms_norm
        position_ids_1T = torch.arange(T, device=input_ids_BT.device)[None]
        cos_1TD, sin_1TD = dec.rotary_emb(x_BTH, position_ids=position_ids_1T)
        cos_1T1D, sin_1T1D = cos_1TD[:, :, None, :], sin_1TD[:, :, None, :]
        H = x_BTH.shape[-1]
        x_NH = x_BTH.reshape(B * T, H)
        for e in self.layers:
            layer, attn = e["layer"], e["attn"]
            h_NH = rms_norm(x_NH, _frozen(layer.input_layernorm.weight), _eps(layer.input_layernorm))
            q_BHTD, k_BHTD, v_BHTD = kernels.qkv_rope(
                _project(h_NH, *e["qkv"]), cos_1T1D, sin_1T1D, *e["heads"]
            )
            a_BHTD = causal_attention.attention(
                q_BHTD, k_BHTD, v_BHTD, attn.scaling, kernels=self.cpp_attention, native_bf16=self.native_bf16
            )
            a_ND = a_BHTD.transpose(1, 2).reshape(B * T, -1)
            x_NH = _after_attention(e, a_ND, x_NH, kernels)
        return rms_norm(x_NH, _frozen(dec.norm.weight), _eps(dec.norm)).view(B, T, H)

    def _with_shared_prefix(self, input_ids_BT: torch.Tensor, P: int) -> torch.Tensor:
        """`__call__` with the first P tokens (the same in every row) computed once.

        The prefix's P rows and the B rows' S = T - P remaining positions go through each projection and MLP
        as one matrix of P + B*S rows; attention runs the prefix causally on its own, and the rest over the
        prefix's keys and values (broadcast to the B rows) then their own, causally. Backward sums the B rows'
        gradients into the one prefix, which is what B copies of it would have received.
        """
        B, T = input_ids_BT.shape
        S = T - P
        dec = self.decoder
        ids_N = torch.cat([input_ids_BT[0, :P], input_ids_BT[:, P:].reshape(B * S)])
        x_NH = dec.embed_tokens(ids_N)
        kernels = self._kernels(x_NH.dtype, x_NH.device)
        rms_norm = kernels.rms_norm

        def rope_at(start: int, end: int) -> tuple[torch.Tensor, torch.Tensor]:
            # Fresh tensors per range, shaped and strided as `__call__`'s (the compiled rope guards strides).
            positions_1T = torch.arange(start, end, device=input_ids_BT.device)[None]
            cos_1TD, sin_1TD = dec.rotary_emb(x_NH[None], position_ids=positions_1T)
            return cos_1TD[:, :, None, :], sin_1TD[:, :, None, :]

        prefix_rope, rest_rope = rope_at(0, P), rope_at(P, T)
        # Position s of the rest sees the whole prefix and positions 0..s of its own row.
        visible_SK = torch.ones(S, P + S, dtype=torch.bool, device=input_ids_BT.device)
        visible_SK[:, P:] = torch.ones(S, S, dtype=torch.bool, device=input_ids_BT.device).tril()
        H = x_NH.shape[-1]
        for e in self.layers:
            layer, attn = e["layer"], e["attn"]
            h_NH = rms_norm(x_NH, _frozen(layer.input_layernorm.weight), _eps(layer.input_layernorm))
            qkv_NF = _project(h_NH, *e["qkv"])
            q_1HPD, k_1KPD, v_1KPD = kernels.qkv_rope(qkv_NF[:P], *prefix_rope, *e["heads"])
            q_BHSD, k_BKSD, v_BKSD = kernels.qkv_rope(qkv_NF[P:], *rest_rope, *e["heads"])
            a_1HPD = causal_attention.attention(
                q_1HPD, k_1KPD, v_1KPD, attn.scaling, kernels=self.cpp_attention, native_bf16=self.native_bf16
            )
            K = k_BKSD.shape[1]
            k_all = torch.cat([k_1KPD.expand(B, K, P, -1), k_BKSD], dim=2)
            v_all = torch.cat([v_1KPD.expand(B, K, P, -1), v_BKSD], dim=2)
            a_BHSD = F.scaled_dot_product_attention(
                q_BHSD,
                k_all,
                v_all,
                attn_mask=visible_SK,
                scale=attn.scaling,
                enable_gqa=q_BHSD.shape[1] != K,
            )
            a_ND = torch.cat(
                [a_1HPD.transpose(1, 2).reshape(P, -1), a_BHSD.transpose(1, 2).reshape(B * S, -1)]
            )
            x_NH = _after_attention(e, a_ND, x_NH, kernels)
        out_NH = rms_norm(x_NH, _frozen(dec.norm.weight), _eps(dec.norm))
        return torch.cat([out_NH[:P].expand(B, P, H), out_NH[P:].view(B, S, H)], dim=1)
