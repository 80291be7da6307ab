"""A compact forward pass for the Llama family (Llama, Mistral, Qwen2, Qwen3) over a slot KV cache.

Why not call the HF model: continuous batching needs per-row positions and cache lengths, a cache laid out
by slot, and several LoRA adapters in one batch; HF's forward supports none of these together. This module
is the whole transformer in one screen: RMSNorm, rotary embeddings, grouped-query attention with torch's
SDPA, SwiGLU MLP, tied or separate lm_head. It matches HF's numerics step for step (norms in float32, the
same rope tables), which the tests check against HF's logits.

Weights are *references* to the HF model's parameters (`LlamaWeights.from_hf`), never copies: the trainer
wraps the same modules with PEFT in place and trains LoRA on them, sharing the base weights. Projections
that read the same input run as ONE matmul (q/k/v, and gate/up: `LORA_GROUPS`), which needs their weights
side by side: `from_hf` moves them once into one [sum of outputs, in] tensor and points each parameter's
`.data` at its block of rows, so HF's modules and this forward still share one copy. Holding the
`Parameter` objects (not modules) keeps this forward working after PEFT wraps the modules; `refresh()`
(run before every prefill) re-fuses if something such as `model.to(...)` replaced their `.data`.

Three entry points, all under `torch.inference_mode()` in the engine's worker thread:
- `prefill`: new prompts, right-padded to one length, attend among themselves (causal + padding mask),
  write their keys/values into consecutive cache slots, return the last position's logits per row;
- `decode`: one token per running row (slots 0..B-1), written at each row's own position, attending over
  the cache up to the longest row with a per-row length mask;
- `score`: logits at every position of given sequences, without touching the cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from art.engines.torch.decode_attention import DecodeAttention, compile_wanted
from art.engines.torch.folded_lora import FoldedAdapters, LayerGroups, base_group, fold_layers
from art.engines.torch.kv_cache import SlotKVCache
from art.engines.torch.lora import LORA_GROUPS, LoraAdapter, LoraBatch
from art.engines.torch.rope import apply_rope, rope_tables, signed_sin
from art.kernels import cpp_kernels, packed_linear

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3")
FOLD_MAX_BYTES = 2 << 30  # memory for folded adapter weights (see LlamaForward._projections)


@dataclass
class _Projections:
    """The projection weights of one forward pass: `segments` of (rows, per-layer groups) pairs, rows None
    meaning the whole batch, and the LoRA deltas still to add on top (None when there are none, or the
    adapters are folded into the groups)."""

    segments: list[tuple[torch.Tensor | None, LayerGroups]]
    lora: LoraBatch | None


@dataclass
class LayerWeights:
    """One decoder layer's parameters (references into the HF model) and their fused groups."""

    input_norm: torch.Tensor
    post_norm: torch.Tensor
    proj: dict[str, torch.Tensor]  # q_proj ... down_proj: [out, in] (views into `fused`)
    bias: dict[str, torch.Tensor | None]
    q_norm: torch.Tensor | None
    k_norm: torch.Tensor | None
    fused: dict[str, torch.Tensor] = field(default_factory=dict)  # group -> [group out, in]
    fused_bias: dict[str, torch.Tensor | None] = field(default_factory=dict)

    def refresh(self) -> None:
        """(Re)build the fused groups; cheap when the parameters already sit side by side."""
        for group, modules in LORA_GROUPS.items():
            self.fused[group] = _fuse_rows([self.proj[m] for m in modules])
            biases = [self.bias[m] for m in modules]
            if all(b is None for b in biases):
                self.fused_bias[group] = None
            elif all(b is not None for b in biases):
                self.fused_bias[group] = _fuse_rows([b for b in biases if b is not None])
            else:  # some projections of the group have a bias, others not: zeros stand in (a copy)
                self.fused_bias[group] = torch.cat(
                    [
                        b.detach() if b is not None else self.proj[m].new_zeros(self.proj[m].shape[0])
                        for m, b in zip(modules, biases, strict=True)
                    ]
                )


def _side_by_side(tensors: list[torch.Tensor]) -> bool:
    """True when the tensors are contiguous, one right after the other in the same storage."""
    first = tensors[0]
    end = first.data_ptr()
    for t in tensors:
        if (
            not t.is_contiguous()
            or t.dtype != first.dtype
            or t.device != first.device
            or t.shape[1:] != first.shape[1:]
            or t.untyped_storage().data_ptr() != first.untyped_storage().data_ptr()
            or t.data_ptr() != end
        ):
            return False
        end += t.numel() * t.element_size()
    return True


def _fuse_rows(params: list[torch.Tensor]) -> torch.Tensor:
    """One tensor whose row blocks are the given parameters, sharing their memory (see the module docstring).

    If they are not side by side yet, they are copied once into a new tensor and each parameter's `.data`
    becomes a view of its rows (so the old separate copies are freed).
    """
    if len(params) == 1:
        return params[0].detach()
    rows = sum(int(p.shape[0]) for p in params)
    first = params[0].detach()
    if _side_by_side([p.detach() for p in params]):
        return first.as_strided((rows, *first.shape[1:]), first.stride())
    with torch.no_grad():
        fused = torch.cat([p.detach() for p in params], 0)
        offset = 0
        for p in params:
            n = int(p.shape[0])
            p.data = fused[offset : offset + n]
            offset += n
    return fused


def _linear_parts(module: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(weight, bias) of an nn.Linear, or of the base layer of a PEFT-wrapped one."""
    base = getattr(module, "base_layer", module)
    return base.weight, base.bias


@dataclass
class LlamaWeights:
    """Every parameter the forward needs, plus the shapes it derives from the config."""

    embed: torch.Tensor
    lm_head: torch.Tensor
    final_norm: torch.Tensor
    layers: list[LayerWeights]
    num_heads: int
    num_kv_heads: int
    head_dim: int
    eps: float

    @classmethod
    def from_hf(cls, model: Any) -> LlamaWeights:
        """References to the parameters of a HF Llama-family model (fusing groups in place); raises for others."""
        config = model.config
        model_type = getattr(config, "model_type", None)
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise ValueError(
                f"the built-in engine does not support model type {model_type!r} "
                f"({type(model).__name__}); supported: {', '.join(SUPPORTED_MODEL_TYPES)}"
            )
        if getattr(config, "hidden_act", "silu") != "silu":
            raise ValueError(f"hidden_act {config.hidden_act!r} is not supported (only silu)")
        inner = model.get_decoder() if hasattr(model, "get_decoder") else model.model
        layers = []
        for layer in inner.layers:
            attn, mlp = layer.self_attn, layer.mlp
            modules = {
                "q_proj": attn.q_proj,
                "k_proj": attn.k_proj,
                "v_proj": attn.v_proj,
                "o_proj": attn.o_proj,
                "gate_proj": mlp.gate_proj,
                "up_proj": mlp.up_proj,
                "down_proj": mlp.down_proj,
            }
            parts = {name: _linear_parts(m) for name, m in modules.items()}
            layers.append(
                LayerWeights(
                    input_norm=layer.input_layernorm.weight,
                    post_norm=layer.post_attention_layernorm.weight,
                    proj={name: w for name, (w, _) in parts.items()},
                    bias={name: b for name, (_, b) in parts.items()},
                    q_norm=attn.q_norm.weight if hasattr(attn, "q_norm") else None,
                    k_norm=attn.k_norm.weight if hasattr(attn, "k_norm") else None,
                )
            )
            layers[-1].refresh()
        num_heads = int(config.num_attention_heads)
        head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // num_heads)
        return cls(
            embed=inner.embed_tokens.weight,
            lm_head=model.get_output_embeddings().weight,
            final_norm=inner.norm.weight,
            layers=layers,
            num_heads=num_heads,
            num_kv_heads=int(getattr(config, "num_key_value_heads", None) or num_heads),
            head_dim=head_dim,
            eps=float(config.rms_norm_eps),
        )

    def refresh(self) -> None:
        """Re-fuse any group whose parameters were replaced since (see the module docstring)."""
        for layer in self.layers:
            layer.refresh()

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(in_features, out_features) of each LoRA-targetable projection."""
        return {name: (int(w.shape[1]), int(w.shape[0])) for name, w in self.layers[0].proj.items()}

    def out_sizes(self) -> dict[str, int]:
        """Output size of each LoRA-targetable projection (the row blocks of the fused groups)."""
        return {name: out for name, (_, out) in self.linear_shapes().items()}


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """HF's RMSNorm: normalise in float32, cast back, then scale (torch's fused kernel: 3 ops, not 8)."""
    return weight * F.rms_norm(x.float(), (x.shape[-1],), None, eps).to(x.dtype)


def additive_mask(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """0 where attention is allowed, -inf elsewhere: built once per forward, not by SDPA in every layer."""
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill_(
        ~allowed, float("-inf")
    )


class LlamaForward:
    """The compact forward over `LlamaWeights` (see the module docstring)."""

    def __init__(
        self,
        weights: LlamaWeights,
        config: Any,
        *,
        max_positions: int,
        pack_weights: bool | None = None,
        compile_kernels: bool | None = None,
        fold_adapters: bool = True,
        native_bf16: bool = True,
    ) -> None:
        """pack_weights: keep oneDNN-packed copies of the matmul weights (`packed_linear`); None: when
        `packed_linear.should_pack` says it pays and fits (bf16 on CPU).
        compile_kernels: build and use compiled kernels (`decode_attention`, `cpp_kernels`) where they work
        here; None: `compile_wanted` (on CPU).
        fold_adapters: generate with adapters folded into the base matmuls (`folded_lora`), for as many
        adapters as fit in `FOLD_MAX_BYTES` (`RuntimeOptions.fold_lora`).
        native_bf16: the C++ kernels may use AVX-512 BF16's conversion where the CPU has it
        (`RuntimeOptions.native_bf16`)."""
        self.w = weights
        self.native_bf16 = native_bf16
        self.device = weights.embed.device
        self.dtype = weights.embed.dtype
        self.cos_PD, sin_PD = rope_tables(
            config, weights.head_dim, max_positions, dtype=self.dtype, device=self.device
        )
        self.signed_sin_PD = signed_sin(sin_PD)
        self.scale = weights.head_dim**-0.5
        w = weights
        self._q_end = w.num_heads * w.head_dim
        self._k_end = self._q_end + w.num_kv_heads * w.head_dim
        all_weights = [lw.fused[g] for lw in w.layers for g in LORA_GROUPS] + [w.lm_head]
        self.pack_weights = packed_linear.should_pack(all_weights) if pack_weights is None else pack_weights
        copy_bytes = sum(t.numel() * t.element_size() for t in all_weights[:-1])
        self._folded = FoldedAdapters(copy_bytes, FOLD_MAX_BYTES if fold_adapters else 0)
        self._base_groups: LayerGroups = []
        self._packed: list[dict[str, torch.Tensor]] = []
        self._packed_lm_head: torch.Tensor | None = None
        self._packed_from: list[int] = []
        self._decode_logits: torch.Tensor | None = None  # decode's logits buffer, valid until the next decode
        if compile_kernels is None:
            compile_kernels = compile_wanted(self.device)
        self.decode_attention = DecodeAttention(compile=compile_kernels, native_bf16=native_bf16)
        self._fast: bool | None = None if compile_kernels else False
        self._weights_key: tuple[int, ...] = ()
        self.weights_version = 0  # +1 whenever `sync_weights` finds replaced parameters
        self.sync_weights()

    def sync_weights(self) -> None:
        """Follow replaced parameters (`LlamaWeights.refresh`), repacking if needed; run before prefills.
        `weights_version` counts the changes (keys and values computed before one are stale)."""
        self.w.refresh()
        pointers = [lw.fused[g].data_ptr() for lw in self.w.layers for g in LORA_GROUPS]
        pointers.append(self.w.lm_head.data_ptr())
        key = tuple(pointers)
        self._ensure_packed(pointers)
        if key != self._weights_key or not self._base_groups:
            packed = bool(self._packed)
            self._base_groups = [
                {
                    g: base_group(
                        self._packed[i][g] if packed else lw.fused[g], lw.fused_bias[g], packed=packed
                    )
                    for g in LORA_GROUPS
                }
                for i, lw in enumerate(self.w.layers)
            ]
        if self._weights_key and key != self._weights_key:
            self.weights_version += 1
        self._weights_key = key

    def _ensure_packed(self, pointers: list[int]) -> None:
        """(Re)pack the weights if packing is on and the fused tensors changed since (cheap otherwise)."""
        if not self.pack_weights or pointers == self._packed_from:
            return
        with torch.no_grad():
            self._packed = [{g: packed_linear.pack(lw.fused[g]) for g in LORA_GROUPS} for lw in self.w.layers]
            self._packed_lm_head = packed_linear.pack(self.w.lm_head)
        self._packed_from = pointers

    def _projections(self, lora: LoraBatch | None, *, fold: bool) -> _Projections:
        """The weights this forward pass multiplies each row by, and the LoRA work left on top of them.

        With `fold` (generation), each adapter in use is folded into its rows' matmuls (`folded_lora`).
        Without (scoring: the trainer's arithmetic, op for op, for the canary), or when folding is off or
        a batch uses more adapters than folded copies fit, the LoRA deltas are added to the base weights'
        products (`LoraBatch.apply`). Both give the same numbers.
        """
        base = self._base_groups
        if lora is None:
            return _Projections([(None, base)], None)
        if not (fold and len(lora.adapters) <= self._folded.capacity):
            return _Projections([(None, base)], lora)
        if lora.all_rows_same:
            return _Projections([(None, self._folded_groups(lora.adapters[0]))], None)
        segments: list[tuple[torch.Tensor | None, LayerGroups]] = []
        for index, adapter in [(-1, None), *enumerate(lora.adapters)]:
            rows_N = (lora.row_adapter_B == index).nonzero().squeeze(1)
            if rows_N.numel():
                segments.append((rows_N, base if adapter is None else self._folded_groups(adapter)))
        return _Projections(segments, None)

    def forget_adapter(self, adapter: LoraAdapter) -> None:
        """Free the folded weights of an adapter that is no longer served (any thread)."""
        self._folded.forget(adapter)

    @property
    def folds_adapters(self) -> bool:
        """True when generation folds adapters into the base matmuls (`_projections`)."""
        return self._folded.capacity > 0

    def _folded_groups(self, adapter: LoraAdapter) -> LayerGroups:
        def build() -> LayerGroups:
            fused = [lw.fused for lw in self.w.layers]
            biases = [lw.fused_bias for lw in self.w.layers]
            return fold_layers(
                self._base_groups, fused, biases, adapter, self.w.out_sizes(), self.native_bf16
            )

        return self._folded.get(adapter, self._weights_key, build)

    def _group(self, layer: int, group: str, x: torch.Tensor, proj: _Projections) -> torch.Tensor:
        """One fused projection group (plus any LoRA delta) of `layer` for rows x [B, ...]: [..., group out]."""
        if len(proj.segments) == 1:
            y = proj.segments[0][1][layer][group](x)
        else:  # rows of different adapters: each multiplied by its own weights
            parts = [
                (rows, groups[layer][group](x.index_select(0, rows)))
                for rows, groups in proj.segments
                if rows is not None  # only the single-segment case covers the whole batch
            ]
            y = x.new_empty((*x.shape[:-1], parts[0][1].shape[-1]))
            for rows, part in parts:
                y.index_copy_(0, rows, part)
        return y if proj.lora is None else proj.lora.apply(layer, group, x, y)

    def _group_for_kernel(
        self, layer: int, group: str, x: torch.Tensor, proj: _Projections
    ) -> tuple[torch.Tensor, cpp_kernels.LoraBT | None]:
        """`_group` for a C++ kernel that takes a folded adapter's B product in place: (y, None), or, when every
        row uses one folded group with a B, ([y | x A^T], its B^T) for the kernel's `lora_bt` argument."""
        if len(proj.segments) == 1 and proj.lora is None:
            folded = proj.segments[0][1][layer][group]
            bt = folded.fused_bt
            if bt is not None:
                return folded.extended(x), bt
        return self._group(layer, group, x, proj), None

    def _qkv(
        self, layer: int, h_BTE: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], proj: _Projections
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Rotated queries [B,T,H,D] and keys [B,T,Hkv,D], and values [B,T,Hkv,D], for hidden states h."""
        w, lw = self.w, self.w.layers[layer]
        B, T, _ = h_BTE.shape
        H, Hkv, D = w.num_heads, w.num_kv_heads, w.head_dim
        qkv_BTO = self._group(layer, "qkv", h_BTE, proj)
        v_BTHD = qkv_BTO[..., self._k_end :].view(B, T, Hkv, D)
        cos_BT1D, sin_BT1D = rope
        if lw.q_norm is not None and lw.k_norm is not None:  # Qwen3: per-head norms before rope
            q_BTHD = rms_norm(qkv_BTO[..., : self._q_end].view(B, T, H, D), lw.q_norm, w.eps)
            k_BTHD = rms_norm(qkv_BTO[..., self._q_end : self._k_end].view(B, T, Hkv, D), lw.k_norm, w.eps)
            return apply_rope(q_BTHD, cos_BT1D, sin_BT1D), apply_rope(k_BTHD, cos_BT1D, sin_BT1D), v_BTHD
        qk_BTHD = apply_rope(qkv_BTO[..., : self._k_end].view(B, T, H + Hkv, D), cos_BT1D, sin_BT1D)
        return qk_BTHD[:, :, :H], qk_BTHD[:, :, H:], v_BTHD

    def _norm(
        self,
        x_BTE: torch.Tensor,
        y_BTE: torch.Tensor | None,
        weight: torch.Tensor,
        fast: bool,
        lora_bt: cpp_kernels.LoraBT | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(x + y, RMSNorm(x + y) * weight); y None: (x, RMSNorm(x) * weight). One C++ pass when `fast`
        (`lora_bt`: y is a folded group's [y | x A^T], see `_group_for_kernel`)."""
        if fast:
            return cpp_kernels.add_rms_norm(
                x_BTE, y_BTE, weight, self.w.eps, lora_bt, native_bf16=self.native_bf16
            )
        s_BTE = x_BTE if y_BTE is None else x_BTE + y_BTE
        return s_BTE, rms_norm(s_BTE, weight, self.w.eps)

    def _mlp_and_norm(
        self, layer: int, x_BTE: torch.Tensor, attn_BTE: torch.Tensor, proj: _Projections, fast: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Output projection, residual, MLP, residual; returns (x, the next norm of x): the next layer's
        input norm, or the final norm after the last layer (each norm fused with the residual add before it)."""
        lw = self.w.layers[layer]
        last = layer + 1 == len(self.w.layers)
        next_norm = self.w.final_norm if last else self.w.layers[layer + 1].input_norm
        if fast:  # the C++ kernels, each adding its input's LoRA B product as it reads it
            o_BTE, bt = self._group_for_kernel(layer, "o", attn_BTE, proj)
            x_BTE, h_BTE = self._norm(x_BTE, o_BTE, lw.post_norm, fast, bt)
            act_BTF = cpp_kernels.swiglu(
                *self._group_for_kernel(layer, "gate_up", h_BTE, proj), native_bf16=self.native_bf16
            )
            down_BTE, bt = self._group_for_kernel(layer, "down", act_BTF, proj)
            return self._norm(x_BTE, down_BTE, next_norm, fast, bt)
        x_BTE, h_BTE = self._norm(x_BTE, self._group(layer, "o", attn_BTE, proj), lw.post_norm, fast)
        gate_up_BTF = self._group(layer, "gate_up", h_BTE, proj)
        F_ = gate_up_BTF.shape[-1] // 2
        act_BTF = F.silu(gate_up_BTF[..., :F_]).mul_(gate_up_BTF[..., F_:])
        return self._norm(x_BTE, self._group(layer, "down", act_BTF, proj), next_norm, fast)

    def fast_kernels(self) -> bool:
        """Whether generation runs the element-wise pieces as C++ kernels (`cpp_kernels`; decided at the
        first call: the kernels must build here and match torch; `compile_kernels=False` turns them off)."""
        if self._fast is None:
            w = self.w
            sizes = [int(w.embed.shape[1]), int(w.layers[0].proj["down_proj"].shape[1])]
            self._fast = cpp_kernels.usable(self.dtype, self.device, *sizes, native_bf16=self.native_bf16)
        return self._fast

    def _fast_rope(self) -> bool:
        """The C++ rope + cache write applies (no per-head q/k norms, head size a multiple of 32)."""
        lw = self.w.layers[0]
        return lw.q_norm is None and cpp_kernels.supported(self.dtype, self.device, self.w.head_dim // 2)

    def _rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Rope tables for the given positions [B,T], shaped [B,T,1,D] to broadcast over heads."""
        return self.cos_PD[positions][:, :, None], self.signed_sin_PD[positions][:, :, None]

    def _causal_forward(
        self,
        tokens_BT: torch.Tensor,
        lengths_B: torch.Tensor,
        lora: LoraBatch | None,
        cache: SlotKVCache | None,
        first_slot: int,
        *,
        fold: bool,
        start: int | torch.Tensor = 0,
    ) -> torch.Tensor:
        """Hidden states [B,T,E] after the final norm for right-padded sequences attending among themselves.

        fold: fold adapters into the base matmuls, as generation does (see `_projections`).
        start: the tokens continue sequences whose first `start` positions (one int for all rows, or an int64
        [B] per row) are already in the cache (slots first_slot..first_slot+B-1): row b's tokens sit at
        positions start[b].., and attend to its cached positions too.
        """
        self.sync_weights()
        proj = self._projections(lora, fold=fold)
        B, T = tokens_BT.shape
        arange_T = torch.arange(T, device=self.device)
        if isinstance(start, torch.Tensor):
            starts_B = start.to(device=self.device, dtype=torch.int64)
        else:
            starts_B = torch.full((B,), start, dtype=torch.int64, device=self.device)
        continues = bool(starts_B.any())
        if continues and cache is None:
            raise ValueError("start > 0 continues cached sequences: it needs the cache")
        positions_BT = starts_B[:, None] + arange_T
        ends_B = starts_B + lengths_B  # each row's keys: its cached positions, then its new tokens
        K = int(ends_B.max()) if continues else T
        arange_K = torch.arange(K, device=self.device)
        allowed_BTK = (arange_K <= positions_BT[:, :, None]) & (arange_K < ends_B[:, None])[:, None, :]
        mask_B1TK = additive_mask(allowed_BTK[:, None], self.dtype)
        if continues:  # where each real new token's key and value go: (slot, position) pairs
            real_BT = arange_T < lengths_B[:, None]
            slots_BT = (first_slot + torch.arange(B, device=self.device))[:, None].expand(B, T)
            write_slots_N, write_positions_N = slots_BT[real_BT], positions_BT[real_BT]
        rope = self._rope(positions_BT)
        # Torch ops here (fast=False), always: this path scores for the canary (`score_hidden`), which must
        # compute what the trainer does op for op; the C++ element-wise kernels (1-ulp different) serve decode.
        fast = False
        x_BTE, h_BTE = self._norm(
            F.embedding(tokens_BT, self.w.embed), None, self.w.layers[0].input_norm, fast
        )
        for layer in range(len(self.w.layers)):
            q_BTHD, k_BTHD, v_BTHD = self._qkv(layer, h_BTE, rope, proj)
            k_BHTD, v_BHTD = k_BTHD.transpose(1, 2), v_BTHD.transpose(1, 2)
            if cache is not None:
                slots = slice(first_slot, first_slot + B)
                keys_SHPD, values_SHPD = cache.keys_LSHTD[layer], cache.values_LSHTD[layer]
                if continues:  # write the real tokens' keys and values, then attend over the cache
                    keys_SHPD[write_slots_N, :, write_positions_N] = k_BTHD[real_BT]
                    values_SHPD[write_slots_N, :, write_positions_N] = v_BTHD[real_BT]
                    k_BHTD, v_BHTD = keys_SHPD[slots, :, :K], values_SHPD[slots, :, :K]
                else:
                    keys_SHPD[slots, :, :T] = k_BHTD
                    values_SHPD[slots, :, :T] = v_BHTD
            attn_BHTD = F.scaled_dot_product_attention(
                q_BTHD.transpose(1, 2), k_BHTD, v_BHTD, attn_mask=mask_B1TK, scale=self.scale, enable_gqa=True
            )
            attn_BTE = attn_BHTD.transpose(1, 2).reshape(B, T, -1)
            x_BTE, h_BTE = self._mlp_and_norm(layer, x_BTE, attn_BTE, proj, fast)
        return h_BTE

    def logits(self, h_NE: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """lm_head logits in float32 (written into `out` when given: [N, vocab] float32)."""
        if self._packed_lm_head is not None:
            logits = packed_linear.linear(h_NE, self._packed_lm_head, None)
        else:
            logits = F.linear(h_NE, self.w.lm_head)
        return logits.float() if out is None else out.copy_(logits)

    def prefill(
        self,
        tokens_BT: torch.Tensor,
        lengths_B: torch.Tensor,
        lora: LoraBatch | None,
        cache: SlotKVCache,
        first_slot: int,
        *,
        start: int | torch.Tensor = 0,
    ) -> torch.Tensor:
        """Logits [B,V] (float32) at each prompt's last token; caches slots first_slot.. first_slot+B-1.

        start: the slots already hold each prompt's first `start` tokens (an int for all rows or an int64 [B]
        per row: a prefix computed once and copied, `SlotKVCache.share`, or kept from an earlier request,
        `prefix_cache`); `tokens_BT` and `lengths_B` are then the rest of each prompt."""
        h_BTE = self._causal_forward(tokens_BT, lengths_B, lora, cache, first_slot, fold=True, start=start)
        last_BE = h_BTE[torch.arange(h_BTE.shape[0], device=self.device), lengths_B - 1]
        return self.logits(last_BE)

    def score_hidden(
        self,
        tokens_BT: torch.Tensor,
        lengths_B: torch.Tensor,
        lora: LoraBatch | None,
        *,
        as_generated: bool = False,
    ) -> torch.Tensor:
        """Final hidden states [B,T,E] at every position (nothing cached); `logits` maps them to the vocab.

        By default op for op as the trainer computes it; `as_generated` as generation does (adapters folded
        into the base matmuls), to check that path against the trainer too."""
        return self._causal_forward(tokens_BT, lengths_B, lora, None, 0, fold=as_generated)

    def decode(
        self,
        tokens_B: torch.Tensor,
        positions_B: torch.Tensor,
        attend_len: int,
        lora: LoraBatch | None,
        cache: SlotKVCache,
    ) -> torch.Tensor:
        """Logits [B,V] (float32) for one new token per running row (row i is cache slot i); a view of a
        buffer the next `decode` overwrites.

        Row i's token sits at `positions_B[i]` and attends to cache positions 0..positions_B[i];
        `attend_len` > max(positions_B) bounds the cache view every row attends over.
        """
        B = tokens_B.shape[0]
        proj = self._projections(lora, fold=True)
        fast = self.fast_kernels()
        fast_rope = fast and self._fast_rope()
        rows_B = torch.arange(B, device=self.device)
        lengths_B = positions_B + 1  # each row attends to its cache up to and including its new token
        rope = None if fast_rope else self._rope(positions_B[:, None])
        x_B1E, h_B1E = self._norm(
            F.embedding(tokens_B[:, None], self.w.embed), None, self.w.layers[0].input_norm, fast
        )
        for layer in range(len(self.w.layers)):
            keys_SHTD, values_SHTD = cache.keys_LSHTD[layer], cache.values_LSHTD[layer]
            if rope is None:  # rotate q and k, and write k and v into the cache, in one C++ pass
                qkv_B1O, bt = self._group_for_kernel(layer, "qkv", h_B1E, proj)
                q_BH1D = cpp_kernels.rope_qkv(
                    qkv_B1O.view(B, -1),
                    self.cos_PD,
                    self.signed_sin_PD,
                    positions_B,
                    keys_SHTD,
                    values_SHTD,
                    self.w.num_heads,
                    bt,
                    native_bf16=self.native_bf16,
                )
            else:
                q_B1HD, k_B1HD, v_B1HD = self._qkv(layer, h_B1E, rope, proj)
                keys_SHTD[rows_B, :, positions_B] = k_B1HD[:, 0]
                values_SHTD[rows_B, :, positions_B] = v_B1HD[:, 0]
                q_BH1D = q_B1HD.transpose(1, 2)
            attn_BH1D = self.decode_attention(
                q_BH1D,
                keys_SHTD[:B, :, :attend_len],
                values_SHTD[:B, :, :attend_len],
                lengths_B,
                self.scale,
            )
            attn_B1E = attn_BH1D.transpose(1, 2).reshape(B, 1, -1)
            x_B1E, h_B1E = self._mlp_and_norm(layer, x_B1E, attn_B1E, proj, fast)
        vocab = self.w.lm_head.shape[0]
        if self._decode_logits is None or self._decode_logits.shape[0] < B:  # reused: no fresh 6 MiB per step
            self._decode_logits = torch.empty(B, vocab, dtype=torch.float32, device=self.device)
        return self.logits(h_B1E[:, 0], out=self._decode_logits[:B])
