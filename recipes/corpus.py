"""Training text: load documents, tokenize once into a cache, pack to the context length.

Sources (`DataArguments.dataset`):
- "embedded": 14 Shakespeare plays and the sonnets (Project Gutenberg, public domain; about 2 MB
  of text, gzipped in `recipes/data/shakespeare/`). Needs no download and no `datasets`.
- local files: a file, a directory or a glob of `.txt`/`.txt.gz` (one document per file), or of
  `.json`/`.jsonl`/`.csv`/`.parquet` (one document per row, via `datasets`).
- anything else is a hub dataset name for `datasets.load_dataset` (needs the network once; e.g.
  `Skylion007/openwebtext`, the paper's data).

Rows with `instruction`/`output` columns (Alpaca style) become one prompt-and-answer document.
Documents are tokenized with an EOS after each, concatenated into one uint16/uint32 token file
under the data cache (keyed by the source and the tokenizer), and `PackedDataset` cuts that stream
into `block_size` windows: sample `i` is tokens `[i * block_size, (i + 1) * block_size)`.
"""

from __future__ import annotations

import glob
import gzip
import hashlib
import json
import logging
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

import numpy as np
import torch

from recipes.config import DataArguments

try:
    import datasets
except ImportError:  # the GPU machines may lack it: text files still work
    datasets = None

logger = logging.getLogger(__name__)

EMBEDDED_DIR = Path(__file__).resolve().parent / "data" / "shakespeare"
TEXT_SUFFIXES = (".txt", ".txt.gz")
TABLE_BUILDERS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet"}
BPE_TRAINING_CHARS = 50_000_000  # the offline BPE learns from at most this much text
ALPACA = "### Instruction:\n{instruction}\n\n{input_block}### Response:\n{output}"


def _suffix(path: Path) -> str:
    return "".join(path.suffixes[-2:]) if path.name.endswith(".gz") else path.suffix


def resolve_files(spec: str) -> list[Path] | None:
    """The local files a dataset spec names, or None when it is a hub name."""
    if spec == "embedded":
        return sorted(EMBEDDED_DIR.glob("*.txt.gz"))
    path = Path(spec).expanduser()
    if path.is_file():
        return [path]
    if path.is_dir():
        files = [p for p in sorted(path.rglob("*")) if p.is_file() and _suffix(p) in (*TEXT_SUFFIXES, *TABLE_BUILDERS)]
        if not files:
            raise FileNotFoundError(f"dataset directory {path} holds no .txt/.txt.gz/.json/.jsonl/.csv/.parquet file")
        return files
    if any(c in spec for c in "*?["):
        files = [Path(p) for p in sorted(glob.glob(str(path), recursive=True))]
        if not files:
            raise FileNotFoundError(f"dataset glob {spec} matches no file")
        return files
    if spec.startswith((".", "/", "~")) or spec.endswith(TEXT_SUFFIXES):
        raise FileNotFoundError(f"dataset path {spec} does not exist")
    return None


def document_text(row: dict, text_column: str) -> str:
    """One training document from a data set row: its text column, or an Alpaca-style prompt."""
    if text_column in row:
        return row[text_column]
    if "instruction" in row and "output" in row:
        extra = row.get("input") or ""
        return ALPACA.format(
            instruction=row["instruction"],
            input_block=f"### Input:\n{extra}\n\n" if extra else "",
            output=row["output"],
        )
    raise KeyError(f"rows have no '{text_column}' column (columns: {sorted(row)}); set --text_column")


def read_text_file(path: Path) -> str:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return f.read()


def iter_documents(args: DataArguments) -> Iterator[str]:
    """The documents of `args.dataset` in a fixed order (at most `args.max_documents`).

    Goes through `datasets.load_dataset` ("text" with one document per file, "json", "csv",
    "parquet", or the hub); without `datasets`, text files are read directly, to the same documents.
    """
    files = resolve_files(args.dataset)
    if datasets is None:
        if files is None or any(_suffix(f) not in TEXT_SUFFIXES for f in files):
            raise ImportError(f"dataset {args.dataset!r} needs the `datasets` package (pip install datasets)")
        docs = (read_text_file(f) for f in files)
    else:
        if files is None:
            ds = datasets.load_dataset(args.dataset, args.dataset_config, split=args.dataset_split)
        else:
            builders = {"text" if _suffix(f) in TEXT_SUFFIXES else TABLE_BUILDERS.get(_suffix(f)) for f in files}
            if len(builders) != 1 or None in builders:
                raise ValueError(f"local dataset files must all be text or all one of {sorted(TABLE_BUILDERS)}")
            builder = builders.pop()
            extra = {"sample_by": "document"} if builder == "text" else {}
            ds = datasets.load_dataset(builder, data_files=[str(f) for f in files], split="train", **extra)
        docs = (document_text(row, args.text_column) for row in ds)
    yield from islice(docs, args.max_documents)


def source_fingerprint(args: DataArguments) -> str:
    """Identifies the documents: file names, sizes and mtimes, or the hub name, config and split."""
    files = resolve_files(args.dataset)
    if files is None:
        parts = [args.dataset, str(args.dataset_config), args.dataset_split]
    else:
        parts = [f"{f.resolve()}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files]
    parts += [args.text_column, str(args.max_documents)]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def training_text_sample(args: DataArguments) -> Iterator[str]:
    """The first BPE_TRAINING_CHARS characters of the documents (what the offline BPE learns from)."""
    budget = BPE_TRAINING_CHARS
    for doc in iter_documents(args):
        if budget <= 0:
            return
        yield doc[:budget]
        budget -= len(doc)


def tokenizer_fingerprint(tokenizer) -> str:
    """Identifies a tokenizer by its full serialized state (fast tokenizers) or its name and size."""
    state = tokenizer.backend_tokenizer.to_str() if tokenizer.is_fast else f"{tokenizer.name_or_path}:{len(tokenizer)}"
    return hashlib.sha256(state.encode()).hexdigest()[:16]


def tokenize_to_cache(args: DataArguments, tokenizer, cache_dir: Path) -> Path:
    """Tokenize the documents once into `cache_dir/tokens-<key>/tokens.bin`; returns that folder."""
    if tokenizer.eos_token_id is None:
        raise ValueError(f"tokenizer {tokenizer.name_or_path} has no EOS token to separate documents")
    key = hashlib.sha256(f"{source_fingerprint(args)}|{tokenizer_fingerprint(tokenizer)}".encode()).hexdigest()[:16]
    folder = Path(cache_dir) / f"tokens-{key}"
    if (folder / "meta.json").is_file():
        return folder
    dtype = np.uint16 if len(tokenizer) <= 2**16 else np.uint32
    tmp = folder.with_name(folder.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    num_tokens = num_docs = 0
    content = hashlib.sha256(np.dtype(dtype).name.encode())
    docs = iter_documents(args)
    with open(tmp / "tokens.bin", "wb") as out:
        while chunk := list(islice(docs, 512)):
            for ids in tokenizer(chunk, add_special_tokens=False)["input_ids"]:
                doc = np.asarray([*ids, tokenizer.eos_token_id], dtype=dtype).tobytes()
                out.write(doc)
                content.update(doc)
                num_tokens += len(ids) + 1
            num_docs += len(chunk)
    meta = {
        "num_tokens": num_tokens,
        "num_documents": num_docs,
        "dtype": np.dtype(dtype).name,
        "dataset": args.dataset,
        "tokenizer": tokenizer.name_or_path,
        "vocab_size": len(tokenizer),
        "content_sha256": content.hexdigest(),
    }
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
    tmp.rename(folder)
    logger.info("tokenized %d documents into %d tokens -> %s", num_docs, num_tokens, folder)
    return folder


def content_sha256(folder: Path, meta: dict) -> str:
    """SHA-256 of a cached token stream (its dtype's name, then its bytes): the identity of the
    data a recorded batch order refers to, the same on every machine and checkout (the cache
    folder's name holds file paths and mtimes). Caches written before it was stored in
    `meta.json` are hashed here."""
    if "content_sha256" in meta:
        return meta["content_sha256"]
    content = hashlib.sha256(meta["dtype"].encode())
    with open(Path(folder) / "tokens.bin", "rb") as f:
        while block := f.read(1 << 24):
            content.update(block)
    return content.hexdigest()


class PackedDataset(torch.utils.data.Dataset):
    """`block_size` windows of a cached token stream: item i = {"input_ids": (block_size,), "labels": same}."""

    def __init__(self, folder: Path, block_size: int):
        meta = json.loads((Path(folder) / "meta.json").read_text())
        self.tokens = np.memmap(Path(folder) / "tokens.bin", dtype=meta["dtype"], mode="r")
        self.block_size = block_size
        self.fingerprint = f"tokens-{content_sha256(folder, meta)[:16]}|{block_size}"
        if len(self) == 0:
            raise ValueError(f"{meta['num_tokens']} tokens cannot fill one block of {block_size}; use more text")

    def __len__(self) -> int:
        return len(self.tokens) // self.block_size

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        if not 0 <= i < len(self):
            raise IndexError(i)
        ids = torch.from_numpy(self.tokens[i * self.block_size : (i + 1) * self.block_size].astype(np.int64))
        return {"input_ids": ids, "labels": ids}
