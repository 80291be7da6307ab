"""Constrained decoding's cost per token on our engine: free text vs a JSON schema, per grammar library.

    python benchmarks/bench_structured.py            # default model (SmolLM2-135M), batch 1 and 32 (~5 min)
    python benchmarks/bench_structured.py --quick    # tiny random model made on the spot, batch 1 and 4

Each row runs `batch` requests at once on one `TorchEngine` (seeded, `max_tokens` each) and reports generated
tokens per second over the wall time, and that against the free-text row of the same batch size. The
grammar rows constrain every request to the same JSON schema (an object holding an array of up to 40 small
objects: long enough that most replies run to max_tokens, so the rows compare per-token cost); the free rows
generate with `ignore_eos` to max_tokens. The libraries plug into the engine the same way
(`engine.grammars.matcher(constraint)` -> an object with `fill_bitmask(bitmask, row)` and `consume(token)`;
the engine applies the int32 bitmask all three write), so only the library differs between grammar rows:

- llguidance (what the engine uses: `art.chat.grammar`): lazy Earley parser + lexer, masks on demand;
- xgrammar: a pushdown automaton compiled per schema (cached), masks from precomputed token sets;
- outlines-core: a regex (from the schema) compiled into a token-level DFA index over the vocabulary.

Also reported: "first" = seconds until the first request's grammar was ready (tokenizer wrapping + compile),
"mask ms/step" = the sampler phase's extra time per decode step over the free row (masks + their
application), and how many finished replies parse as JSON (replies cut by max_tokens are prefixes).
The last line is a JSON summary (tests read it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train_step import cpu_summary

SCHEMA = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "maxItems": 40,
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "maxLength": 12},
                    "qty": {"type": "integer", "minimum": 0, "maximum": 999},
                    "tag": {"enum": ["new", "used", "broken"]},
                },
                "required": ["name", "qty", "tag"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["items"],
    "additionalProperties": False,
}


# ---- the libraries, as the engine sees them ----


class _XgrMatcher:
    error = "xgrammar refused the token"

    def __init__(self, matcher: Any) -> None:
        self.matcher = matcher

    def fill_bitmask(self, bitmask: Any, row: int) -> None:
        self.matcher.fill_next_token_bitmask(bitmask, row)

    def consume(self, token_id: int) -> bool:
        return bool(self.matcher.accept_token(token_id))


class XGrammar:
    """xgrammar behind the engine's `grammars` interface (JSON schemas only, compiled once per schema)."""

    def __init__(self, tokenizer: Any, vocab_size: int, stop_token_ids: list[int]) -> None:
        import xgrammar as xgr

        self.xgr = xgr
        info = xgr.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=vocab_size, stop_token_ids=stop_token_ids
        )
        self.compiler = xgr.GrammarCompiler(info)

    def matcher(self, constraint: Any) -> _XgrMatcher:
        compiled = self.compiler.compile_json_schema(
            json.dumps(constraint.json_schema), any_whitespace=False, separators=(", ", ": ")
        )  # cached by the compiler
        return _XgrMatcher(self.xgr.GrammarMatcher(compiled))


class _OutlinesMatcher:
    error = "outlines-core refused the token"

    def __init__(self, guide: Any) -> None:
        self.guide = guide

    def fill_bitmask(self, bitmask: Any, row: int) -> None:
        target = bitmask[row]
        self.guide.write_mask_into(target.data_ptr(), target.numel(), 4)

    def consume(self, token_id: int) -> bool:
        try:
            self.guide.advance(token_id, return_tokens=False)
        except Exception:
            return False
        return True


class OutlinesCore:
    """outlines-core behind the engine's `grammars` interface (a regex index per schema, cached)."""

    def __init__(self, tokenizer: Any, vocab_size: int, stop_token_ids: list[int]) -> None:
        import outlines_core
        from outlines_core.json_schema import build_regex_from_schema

        from art.chat.detokenize import TokenTable

        self.oc, self.to_regex = outlines_core, build_regex_from_schema
        table, special = TokenTable(tokenizer), set(tokenizer.all_special_ids)
        tokens: dict[bytes, list[int]] = {}
        for token_id in range(min(vocab_size, len(tokenizer))):
            if token_id not in special:
                tokens.setdefault(bytes(table.get(token_id)[1]), []).append(token_id)
        tokens.pop(b"", None)
        self.vocabulary = outlines_core.Vocabulary(stop_token_ids[0], tokens)
        self.indexes: dict[str, Any] = {}

    def matcher(self, constraint: Any) -> _OutlinesMatcher:
        key = json.dumps(constraint.json_schema, sort_keys=True)
        if key not in self.indexes:
            regex = self.to_regex(json.dumps(constraint.json_schema), whitespace_pattern="")
            self.indexes[key] = self.oc.Index(regex, self.vocabulary)
        return _OutlinesMatcher(self.oc.Guide(self.indexes[key]))


def library(name: str, engine: Any) -> Any:
    """The engine's `grammars` object for a library name (llguidance: the engine's own)."""
    from art.chat.grammar import GrammarCompiler

    tokenizer, vocab = engine.tokenizer, int(engine._weights.embed.shape[0])
    stops = sorted(engine._scheduler._stop_ids.tolist())
    if name == "llguidance":
        return GrammarCompiler(tokenizer, vocab_size=vocab, stop_token_ids=stops)
    if name == "xgrammar":
        return XGrammar(tokenizer, vocab, stops)
    return OutlinesCore(tokenizer, vocab, stops)


def available(names: list[str]) -> list[str]:
    """The libraries that import here."""
    modules = {"llguidance": "llguidance", "xgrammar": "xgrammar", "outlines-core": "outlines_core"}
    out = []
    for name in names:
        try:
            __import__(modules[name])
        except ImportError:
            print(f"(skipping {name}: not installed)")
            continue
        out.append(name)
    return out


# ---- one row ----


async def _generate(engine: Any, prompt: list[int], sampling: Any) -> tuple[list[int], str]:
    from art.engines.base import GenerateRequest

    ids, reason = [], ""
    request = GenerateRequest(model=engine.base_model_name, prompt_token_ids=prompt, sampling=sampling)
    async with contextlib.aclosing(engine.generate(request)) as outputs:
        async for out in outputs:
            ids += out.token_ids
            reason = out.finish_reason or reason
    return ids, reason


async def _ready_within(grammars: Any, constraint: Any, limit: float) -> bool:
    """Make the first matcher (tokenizer wrapping + compiling the schema) in a daemon thread; False if it
    takes over `limit` seconds (the thread is left to finish on its own: compilers cannot be interrupted)."""
    done = threading.Event()

    def compile_now() -> None:
        grammars.matcher(constraint)
        done.set()

    threading.Thread(target=compile_now, daemon=True).start()
    return await asyncio.to_thread(done.wait, limit)


async def run_row(
    engine: Any, lib: str | None, batch: int, max_tokens: int, prompt: list[int], compile_limit: float = 300.0
) -> dict[str, Any] | None:
    """Generate `batch` replies at once; tokens/s, time to the first grammar, sampler seconds (None: the
    library's grammar was not ready within `compile_limit` seconds)."""
    from art.chat.grammar import StructuredOutputs
    from art.engines.base import SamplingParams

    constraint = StructuredOutputs(json=SCHEMA) if lib else None
    if lib:
        engine.grammars = library(lib, engine)
    first = time.perf_counter()
    if lib and not await _ready_within(engine.grammars, constraint, compile_limit):
        print(
            f"| {lib} | {batch} | - | - | > {compile_limit:.0f} | - | grammar not ready in time |", flush=True
        )
        return None
    first = time.perf_counter() - first
    sampler, steps = engine.phase_seconds()["sample"], engine.decode_steps
    start = time.perf_counter()
    results = await asyncio.gather(
        *(
            _generate(
                engine,
                prompt,
                SamplingParams(
                    seed=i, max_tokens=max_tokens, ignore_eos=lib is None, structured_outputs=constraint
                ),
            )
            for i in range(batch)
        )
    )
    seconds = time.perf_counter() - start
    tokens = sum(len(ids) for ids, _ in results)
    finished = [ids for ids, reason in results if reason == "stop"]
    parsed = 0
    for ids in finished:
        with contextlib.suppress(ValueError):
            json.loads(engine.tokenizer.decode(ids, skip_special_tokens=True))
            parsed += 1
    return {
        "library": lib or "free (no grammar)",
        "batch": batch,
        "tokens": tokens,
        "tok_per_s": tokens / seconds,
        "first_s": first,
        "sample_ms_per_step": 1000
        * (engine.phase_seconds()["sample"] - sampler)
        / max(engine.decode_steps - steps, 1),
        "finished": len(finished),
        "parsed": parsed,
    }


def _print_row(r: dict[str, Any]) -> None:
    free = r["library"] == "free (no grammar)"
    vs = "1.00x" if free else f"{r['vs_free']:.2f}x"
    mask = "-" if free else f"{r['mask_ms_per_step']:.2f}"
    first = "-" if free else f"{r['first_s']:.2f}"
    fin = "-" if free else f"{r['finished']}: {r['parsed']}"
    print(
        f"| {r['library']} | {r['batch']} | {r['tok_per_s']:.1f} | {vs} | {first} | {mask} | {fin} |",
        flush=True,
    )


async def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="tiny random model made on the spot")
    parser.add_argument("--model", default="smollm2-135m", help="short name, local folder or HF id")
    parser.add_argument(
        "--batches", default=None, help="comma-separated batch sizes (default 1,32; quick 1,4)"
    )
    parser.add_argument("--max-tokens", type=int, default=None, help="per request (default 96; quick 24)")
    parser.add_argument(
        "--libraries",
        default="llguidance,xgrammar,outlines-core",
        help="comma-separated, in the order to run",
    )
    parser.add_argument(
        "--compile-limit", type=float, default=300.0, help="seconds a library may take to compile"
    )
    args = parser.parse_args(argv)
    import torch

    from art.engines.torch.torch_engine import TorchEngine

    batches = [int(b) for b in (args.batches or ("1,4" if args.quick else "1,32")).split(",")]
    max_tokens = args.max_tokens or (24 if args.quick else 96)
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if args.quick:
            from art.testing.tiny_model import make_tiny_model

            model = str(make_tiny_model(Path(tmp) / "tiny"))
        engine = TorchEngine.from_pretrained(
            model, served_name="bench", max_num_seqs=max(batches), dtype=None
        )
        try:
            await engine.warm_up()
            prompt = engine.chat_template.render_ids(
                [{"role": "user", "content": "List the items in the shop as JSON."}],
                add_generation_prompt=True,
            )
            libs = available(args.libraries.split(","))
            print(
                f"model: {'tiny (quick)' if args.quick else args.model}; {cpu_summary()}; "
                f"torch threads {torch.get_num_threads()}"
            )
            print(
                f"max_tokens {max_tokens}; schema: an object with an array of up to 40 objects (string, "
                "integer, enum)\n"
            )
            print("| row | batch | tok/s | vs free | first (s) | mask ms/step | finished: parse |")
            print("|---|---|---|---|---|---|---|", flush=True)
            rows = []
            for batch in batches:
                free = await run_row(engine, None, batch, max_tokens, prompt)
                assert free is not None
                rows.append(free)
                _print_row(free)
                for lib in libs:
                    row = await run_row(engine, lib, batch, max_tokens, prompt, args.compile_limit)
                    if row is None:
                        continue
                    row["vs_free"] = row["tok_per_s"] / free["tok_per_s"]
                    row["mask_ms_per_step"] = row["sample_ms_per_step"] - free["sample_ms_per_step"]
                    rows.append(row)
                    _print_row(row)
        finally:
            await engine.close()
    summary = {"rows": rows}
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    asyncio.run(main())
