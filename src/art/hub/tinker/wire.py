"""The protobuf half of the Tinker wire: forward_backward's request and output, and sample's response.

The schema is the SDK's own, `tinker_public.proto` of tinker 0.38.0 (Apache-2.0): its serialized
descriptor is below, loaded into a descriptor pool of ours, so the server needs only `protobuf` (not the
SDK) and a process that imports both clashes with nothing. Arrays travel as little-endian bytes: int32
tokens, int64/float32 tensors (dense, or sparse CSR with the shape of the dense tensor), and per-datum
outputs concatenated with byte offsets (`BatchedTensor`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from google.protobuf import descriptor_pool, message_factory

from art.hub.tinker.ids import BadInput
from art.training.token_losses import TokenDatum

_DESCRIPTOR = (
    b'\n\x13tinker_public.proto\x12\rtinker_public"\x9c\x03\n\x0eSampleResponse\x121\n\ts'
    b"equences\x18\x01 \x03(\x0b2\x1e.tinker_public.SampledSequence\x12\x1c\n\x0fprompt_log"
    b"probs\x18\x02 \x01(\x0cH\x00\x88\x01\x01\x12>\n\x14topk_prompt_logprobs\x18\x03 \x01(\x0b2\x1b.tinker_publ"
    b"ic.TopkLogprobsH\x01\x88\x01\x01\x12\x1f\n\x17prompt_cache_hit_tokens\x18\x04 \x01(\x05\x12:\n\x16tar"
    b"get_prompt_logprobs\x18\x05 \x01(\x0b2\x15.tinker_public.TensorH\x02\x88\x01\x01\x12>\n\x11pro"
    b"mpt_alt_tokens\x18\x06 \x01(\x0b2\x1e.tinker_public.PromptAltTokensH\x03\x88\x01\x01B\x12\n"
    b"\x10_prompt_logprobsB\x17\n\x15_topk_prompt_logprobsB\x19\n\x17_target_prompt"
    b'_logprobsB\x14\n\x12_prompt_alt_tokens"a\n\x0fPromptAltTokens\x12%\n\x06tokens'
    b"\x18\x01 \x01(\x0b2\x15.tinker_public.Tensor\x12'\n\x08logprobs\x18\x02 \x01(\x0b2\x15.tinker_pub"
    b'lic.Tensor"\xd0\x01\n\x0fSampledSequence\x12.\n\x0bstop_reason\x18\x01 \x01(\x0e2\x19.tinker'
    b"_public.StopReason\x12\x0e\n\x06tokens\x18\x02 \x01(\x0c\x12\x15\n\x08logprobs\x18\x03 \x01(\x0cH\x00\x88\x01\x01\x12?\n"
    b"\x15topk_sampled_logprobs\x18\x04 \x01(\x0b2\x1b.tinker_public.TopkLogprobsH\x01\x88"
    b'\x01\x01B\x0b\n\t_logprobsB\x18\n\x16_topk_sampled_logprobs"N\n\x0cTopkLogprobs\x12\x11\n'
    b"\ttoken_ids\x18\x01 \x01(\x0c\x12\x10\n\x08logprobs\x18\x02 \x01(\x0c\x12\t\n\x01k\x18\x03 \x01(\r\x12\x0e\n\x06length\x18\x04 \x01("
    b'\r"F\n\tSparseCsr\x12\x0e\n\x06values\x18\x01 \x01(\x0c\x12\x14\n\x0ccrow_indices\x18\x02 \x01(\x0c\x12\x13\n\x0bcol_'
    b'indices\x18\x03 \x01(\x0c"\x89\x01\n\x06Tensor\x12\x0f\n\x05dense\x18\x01 \x01(\x0cH\x00\x12.\n\nsparse_csr\x18\x02 \x01('
    b"\x0b2\x18.tinker_public.SparseCsrH\x00\x12#\n\x05dtype\x18\x03 \x01(\x0e2\x14.tinker_public"
    b'.DType\x12\r\n\x05shape\x18\x04 \x03(\x03B\n\n\x08encoding"k\n\rBatchedTensor\x12\x0c\n\x04data\x18\x01'
    b" \x01(\x0c\x12\x0f\n\x07offsets\x18\x02 \x01(\x0c\x12#\n\x05dtype\x18\x03 \x01(\x0e2\x14.tinker_public.DType\x12\x16"
    b'\n\x0etrailing_shape\x18\x04 \x03(\x03"\xb8\x01\n\x0bArrayRecord\x12\x10\n\x08type_tag\x18\x01 \x01(\t\x126\n\x06'
    b"fields\x18\x02 \x03(\x0b2&.tinker_public.ArrayRecord.FieldsEntry\x12\x12\n\nnum_"
    b"datums\x18\x03 \x01(\x03\x1aK\n\x0bFieldsEntry\x12\x0b\n\x03key\x18\x01 \x01(\t\x12+\n\x05value\x18\x02 \x01(\x0b2\x1c.ti"
    b'nker_public.BatchedTensor:\x028\x01"\xdd\x01\n\x15ForwardBackwardOutput\x12\x1b\n\x13l'
    b"oss_fn_output_type\x18\x01 \x01(\t\x123\n\x0floss_fn_outputs\x18\x02 \x03(\x0b2\x1a.tinker_p"
    b"ublic.ArrayRecord\x12B\n\x07metrics\x18\x03 \x03(\x0b21.tinker_public.ForwardBa"
    b"ckwardOutput.MetricsEntry\x1a.\n\x0cMetricsEntry\x12\x0b\n\x03key\x18\x01 \x01(\t\x12\r\n\x05va"
    b'lue\x18\x02 \x01(\x01:\x028\x01"\xb8\x03\n\x16ForwardBackwardRequest\x12\x10\n\x08model_id\x18\x01 \x01(\t\x12\x0e'
    b'\n\x06seq_id\x18\x02 \x01(\x05\x12"\n\x04data\x18\x03 \x03(\x0b2\x14.tinker_public.Datum\x12\x0f\n\x07loss_f'
    b"n\x18\x04 \x01(\t\x12O\n\x0eloss_fn_config\x18\x05 \x03(\x0b27.tinker_public.ForwardBackw"
    b"ardRequest.LossFnConfigEntry\x12\x14\n\x0cforward_only\x18\x06 \x01(\x08\x12T\n\x11loss_f"
    b"n_config_v2\x18\x07 \x03(\x0b29.tinker_public.ForwardBackwardRequest.Los"
    b"sFnConfigV2Entry\x1a3\n\x11LossFnConfigEntry\x12\x0b\n\x03key\x18\x01 \x01(\t\x12\r\n\x05value\x18"
    b"\x02 \x01(\x01:\x028\x01\x1aU\n\x13LossFnConfigV2Entry\x12\x0b\n\x03key\x18\x01 \x01(\t\x12-\n\x05value\x18\x02 \x01(\x0b"
    b'2\x1e.tinker_public.LossConfigValue:\x028\x01"<\n\x0fLossConfigValue\x12\x10\n\x06n'
    b'umber\x18\x01 \x01(\x01H\x00\x12\x0e\n\x04text\x18\x02 \x01(\tH\x00B\x07\n\x05value"\xb4\x02\n\x05Datum\x12)\n\x0bmodel_in'
    b"put\x18\x01 \x03(\x0b2\x14.tinker_public.Chunk\x12>\n\x0eloss_fn_inputs\x18\x02 \x03(\x0b2&.ti"
    b"nker_public.Datum.LossFnInputsEntry\x128\n\x11model_input_spans\x18\x03 \x03"
    b"(\x0b2\x1d.tinker_public.ProvenanceSpan\x12:\n\x13loss_fn_input_spans\x18\x04 \x03"
    b"(\x0b2\x1d.tinker_public.ProvenanceSpan\x1aJ\n\x11LossFnInputsEntry\x12\x0b\n\x03ke"
    b'y\x18\x01 \x01(\t\x12$\n\x05value\x18\x02 \x01(\x0b2\x15.tinker_public.Tensor:\x028\x01"\x96\x01\n\x0eProven'
    b"anceSpan\x12<\n\rprompt_tokens\x18\x01 \x01(\x0b2#.tinker_public.PromptProven"
    b"anceSpanH\x00\x12>\n\x0esampled_tokens\x18\x02 \x01(\x0b2$.tinker_public.SampledPr"
    b'ovenanceSpanH\x00B\x06\n\x04span"K\n\x14PromptProvenanceSpan\x12\x13\n\x0bsequence_i'
    b'd\x18\x01 \x01(\t\x12\x0e\n\x06offset\x18\x02 \x01(\x03\x12\x0e\n\x06length\x18\x03 \x01(\x03"L\n\x15SampledProvenance'
    b'Span\x12\x13\n\x0bsequence_id\x18\x01 \x01(\t\x12\x0e\n\x06offset\x18\x02 \x01(\x03\x12\x0e\n\x06length\x18\x03 \x01(\x03"\x9f\x01'
    b"\n\x05Chunk\x127\n\x0cencoded_text\x18\x01 \x01(\x0b2\x1f.tinker_public.EncodedTextChu"
    b"nkH\x00\x12*\n\x05image\x18\x02 \x01(\x0b2\x19.tinker_public.ImageChunkH\x00\x12(\n\x04dmel\x18\x03 \x01"
    b'(\x0b2\x18.tinker_public.DmelChunkH\x00B\x07\n\x05chunk""\n\x10EncodedTextChunk\x12'
    b'\x0e\n\x06tokens\x18\x01 \x01(\x0c"\xb6\x01\n\nImageChunk\x12\x0c\n\x04data\x18\x01 \x01(\x0c\x12\x0e\n\x06format\x18\x02 \x01(\t'
    b"\x12\x1c\n\x0fexpected_tokens\x18\x03 \x01(\x05H\x00\x88\x01\x01\x12@\n\x13override_dimensions\x18\x04 \x01(\x0b2"
    b"\x1e.tinker_public.ImageDimensionsH\x01\x88\x01\x01B\x12\n\x10_expected_tokensB\x16\n\x14"
    b'_override_dimensions"0\n\x0fImageDimensions\x12\r\n\x05width\x18\x01 \x01(\r\x12\x0e\n\x06he'
    b'ight\x18\x02 \x01(\r"\x19\n\tDmelChunk\x12\x0c\n\x04dmel\x18\x01 \x01(\x0c"\xa5\x02\n\x0eSamplingParams\x12\x17\n\n'
    b"max_tokens\x18\x01 \x01(\x05H\x01\x88\x01\x01\x12\x11\n\x04seed\x18\x02 \x01(\x04H\x02\x88\x01\x01\x12\x18\n\x0btemperature\x18\x03 \x01("
    b"\x02H\x03\x88\x01\x01\x12\x12\n\x05top_k\x18\x04 \x01(\x05H\x04\x88\x01\x01\x12\x12\n\x05top_p\x18\x05 \x01(\x02H\x05\x88\x01\x01\x12/\n\tstop_strs\x18"
    b"\x06 \x01(\x0b2\x1a.tinker_public.StopStringsH\x00\x120\n\x0bstop_tokens\x18\x07 \x01(\x0b2\x19.t"
    b"inker_public.StopTokensH\x00B\x06\n\x04stopB\r\n\x0b_max_tokensB\x07\n\x05_seedB\x0e\n"
    b'\x0c_temperatureB\x08\n\x06_top_kB\x08\n\x06_top_p"\x1d\n\x0bStopStrings\x12\x0e\n\x06values\x18\x01'
    b' \x03(\t"\x1c\n\nStopTokens\x12\x0e\n\x06values\x18\x01 \x03(\x05*:\n\nStopReason\x12\x14\n\x10STOP_REA'
    b"SON_STOP\x10\x00\x12\x16\n\x12STOP_REASON_LENGTH\x10\x01*g\n\x05DType\x12\x15\n\x11DTYPE_UNSPECI"
    b"FIED\x10\x00\x12\x11\n\rDTYPE_FLOAT32\x10\x01\x12\x0f\n\x0bDTYPE_INT64\x10\x02\x12\x0f\n\x0bDTYPE_INT32\x10\x03\x12"
    b"\x12\n\x0eDTYPE_BFLOAT16\x10\x04b\x06proto3"
)
_POOL = descriptor_pool.DescriptorPool()
_POOL.AddSerializedFile(_DESCRIPTOR)


def _message(name: str) -> Any:
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"tinker_public.{name}"))


ForwardBackwardRequest = _message("ForwardBackwardRequest")
ForwardBackwardOutput = _message("ForwardBackwardOutput")
SampleResponse = _message("SampleResponse")
DTYPE_FLOAT32, DTYPE_INT64, DTYPE_INT32 = 1, 2, 3
STOP_REASON = {"stop": 0, "length": 1}
_NUMPY = {DTYPE_FLOAT32: np.float32, DTYPE_INT64: np.int64, DTYPE_INT32: np.int32}


@dataclass
class ForwardBackward:
    """A decoded forward_backward request (forward: `forward_only`)."""

    model_id: str
    seq_id: int
    loss_fn: str
    config: dict[str, float]
    forward_only: bool
    datums: list[TokenDatum]


def parse_forward_backward(body: bytes) -> ForwardBackward:
    """Decode the request (BadInput naming the datum and field of anything this server cannot use)."""
    request = ForwardBackwardRequest()
    try:
        request.ParseFromString(body)
    except Exception as e:  # protobuf's DecodeError, or worse
        raise BadInput(f"the forward_backward body is not a ForwardBackwardRequest protobuf: {e}") from None
    config = {k: float(v) for k, v in request.loss_fn_config.items()}
    for key, value in request.loss_fn_config_v2.items():
        if value.WhichOneof("value") == "number":
            config[key] = float(value.number)
    datums = [_datum(i, d) for i, d in enumerate(request.data)]
    return ForwardBackward(
        request.model_id, request.seq_id, request.loss_fn, config, request.forward_only, datums
    )


def _datum(index: int, datum: Any) -> TokenDatum:
    tokens: list[int] = []
    for chunk in datum.model_input:
        kind = chunk.WhichOneof("chunk")
        if kind != "encoded_text":
            raise BadInput(
                f"datum {index}: a {kind} chunk in model_input; this server takes text tokens only"
            )
        tokens.extend(np.frombuffer(chunk.encoded_text.tokens, dtype="<i4").tolist())
    if not tokens:
        raise BadInput(f"datum {index}: model_input has no tokens")
    inputs = {name: _tensor(index, name, t) for name, t in datum.loss_fn_inputs.items()}
    lengths = {name: len(values) for name, values in inputs.items() if len(values) != len(tokens)}
    if lengths:
        said = ", ".join(f"{name} has {n}" for name, n in sorted(lengths.items()))
        raise BadInput(
            f"datum {index}: its token lists disagree in length: model_input has {len(tokens)} tokens, {said}"
        )
    return TokenDatum(tokens, inputs)


def _tensor(index: int, name: str, tensor: Any) -> list[float]:
    dtype = _NUMPY.get(tensor.dtype)
    if dtype is None:
        raise BadInput(
            f"datum {index}: loss_fn_inputs[{name!r}] has dtype {tensor.dtype}; use float32 or int64"
        )
    if tensor.WhichOneof("encoding") == "sparse_csr":
        csr, shape = tensor.sparse_csr, list(tensor.shape)
        values = np.frombuffer(csr.values, dtype=np.dtype(dtype).newbyteorder("<"))
        crow = np.frombuffer(csr.crow_indices, dtype="<i8")
        cols = np.frombuffer(csr.col_indices, dtype="<i8")
        dense = np.zeros((len(crow) - 1, shape[-1] if shape else 0), dtype=dtype)
        for row in range(len(crow) - 1):
            dense[row, cols[crow[row] : crow[row + 1]]] = values[crow[row] : crow[row + 1]]
        flat: list[float] = dense.reshape(-1).tolist()
        return flat
    dense_values: list[float] = np.frombuffer(tensor.dense, dtype=np.dtype(dtype).newbyteorder("<")).tolist()
    return dense_values


def _batched(arrays: Sequence[Sequence[float]]) -> Any:
    batched = _message("BatchedTensor")()
    parts = [np.asarray(a, dtype="<f4").tobytes() for a in arrays]
    offsets = np.cumsum([0, *[len(p) for p in parts]]).astype("<i8")
    batched.data, batched.offsets, batched.dtype = b"".join(parts), offsets.tobytes(), DTYPE_FLOAT32
    return batched


def forward_backward_output(
    results: Sequence[tuple[Sequence[float], Sequence[float]]], metrics: dict[str, float]
) -> bytes:
    """`ForwardBackwardOutput` of per-datum (logprobs, elementwise_loss); metric keys are `name:reduction`."""
    out = ForwardBackwardOutput(loss_fn_output_type="ArrayRecord")
    record = out.loss_fn_outputs.add(type_tag="ArrayRecord", num_datums=len(results))
    record.fields["logprobs"].CopyFrom(_batched([r[0] for r in results]))
    record.fields["elementwise_loss"].CopyFrom(_batched([r[1] for r in results]))
    for key, value in metrics.items():
        out.metrics[key] = float(value)
    data: bytes = out.SerializeToString()
    return data


@dataclass
class Sampled:
    """One sampled sequence: its tokens (the stop token included), their logprobs, why it stopped."""

    tokens: list[int]
    logprobs: list[float]
    stop_reason: str


def sample_response(sequences: Sequence[Sampled], prompt_logprobs: Sequence[float] | None) -> bytes:
    """`SampleResponse` of `sequences`, with the prompt's logprobs (NaN first) when asked for."""
    out = SampleResponse()
    for seq in sequences:
        item = out.sequences.add(stop_reason=STOP_REASON[seq.stop_reason])
        item.tokens = np.asarray(seq.tokens, dtype="<i4").tobytes()
        item.logprobs = np.asarray(seq.logprobs, dtype="<f4").tobytes()
    if prompt_logprobs is not None:
        out.prompt_logprobs = np.asarray(prompt_logprobs, dtype="<f4").tobytes()
    data: bytes = out.SerializeToString()
    return data
