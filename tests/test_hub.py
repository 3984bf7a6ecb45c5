"""Hub-ready export and upload, proven end to end without the internet.

A fake Hub (tests/fake_hub.py) listens on 127.0.0.1; ``scratchformer push`` uploads to it in a subprocess whose
HF_ENDPOINT/HF_TOKEN point there, and a fresh process that cannot import scratchformer downloads the repo through
the normal ``from_pretrained(repo_id, trust_remote_code=True)`` path and must reproduce the original model.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import pickle
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import torch
from fake_hub import FakeHub, FakeRepo
from model_fixtures import run_without_scratchformer, tiny_config

from scratchformer import ScratchformerForConditionalGeneration, ScratchformerModel
from scratchformer.cli import main as cli_main
from scratchformer.hub import HubError, check_folder, export, load_scores, push
from scratchformer.hub.card import GENERATED_MARK

TEXTS = ["the cat sat on the mat.", "attention is all you need.", "hello world, this is a test of the hub."] * 8
SENTENCES = ["the cat sat on the mat.", "hello world"]
SCORES = {"results": [{"task": "translation", "task_name": "English to Spanish", "dataset": "kjv-web",
                       "dataset_name": "KJV -> WEB", "split": "test", "metrics": {"bleu": 21.4, "chrf": 48.9},
                       "source": "sacrebleu 2.5 (13a)"}]}
EXPORTED = {"README.md", "config.json", "configuration_scratchformer.py", "generation_config.json",
            "model.safetensors", "modeling_scratchformer.py", "paper_scratchformer.py", "card_scratchformer.py",
            "scores.json", "tokenizer.json", "tokenizer_config.json",
            "modules.json", "config_sentence_transformers.json", "sentence_bert_config.json", "1_Pooling",
            "checksums.sha256"}
TIMEOUT = 240


def make_tokenizer():
    """A small byte-level BPE ScratchformerTokenizer (<pad> <s> </s> <unk> <mask> = 0-4)."""
    try:
        from scratchformer.tokenizer.training import train_fast_tokenizer
    except ImportError:  # the tokenizer module is not there: build the same kind of tokenizer by hand
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

        from scratchformer import ScratchformerTokenizer

        backend = Tokenizer(models.BPE())
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        backend.decoder = decoders.ByteLevel()
        backend.train_from_iterator(TEXTS, trainers.BpeTrainer(
            vocab_size=300, special_tokens=["<pad>", "<s>", "</s>", "<unk>", "<mask>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        backend.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=True),
            processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 2)])])
        return ScratchformerTokenizer(tokenizer_object=backend, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                      unk_token="<unk>", mask_token="<mask>", model_max_length=64)
    return train_fast_tokenizer(TEXTS, vocab_size=300, scheme="byte_level", model_max_length=64, min_frequency=1)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    """A tiny random model + tokenizer saved as a training run would (with scores.json), its export, and the
    outputs every other process must reproduce."""
    root = tmp_path_factory.mktemp("hub")
    tokenizer = make_tokenizer()
    torch.manual_seed(0)
    model = ScratchformerForConditionalGeneration(tiny_config(vocab_size=len(tokenizer))).eval()
    source = root / "run"
    model.save_pretrained(source)
    tokenizer.save_pretrained(source)
    (source / "scores.json").write_text(json.dumps(SCORES))
    folder = export(source, root / "export")

    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**batch, decoder_input_ids=batch["input_ids"][:, :4]).logits
        greedy = model.generate(**batch, max_new_tokens=10, do_sample=False)
        encoded = model.get_encoder()(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    expected = {"ids": batch["input_ids"], "mask": batch["attention_mask"], "logits": logits, "greedy": greedy,
                "text": tokenizer.batch_decode(greedy, skip_special_tokens=True), "encoded": encoded,
                "mean": (encoded * mask).sum(1) / mask.sum(1)}
    torch.save(expected, root / "expected.pt")
    return {"root": root, "source": source, "folder": folder, "model": model, "tokenizer": tokenizer,
            "expected": root / "expected.pt"}


@pytest.fixture
def hub():
    server = FakeHub(token="hf_test_write_token").start()
    try:
        yield server
    finally:
        server.stop()


def hub_env(hub: FakeHub, **extra) -> dict:
    """Environment of a process that talks to the fake Hub: set before huggingface_hub is imported there."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN")}  # PYTHONPATH: this checkout
    env.update(HF_ENDPOINT=hub.url, HF_TOKEN=hub.token, HF_HUB_DISABLE_TELEMETRY="1", **extra)
    return env


def run_cli(args: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scratchformer.cli", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=TIMEOUT)


# ---------------------------------------------------------------------------------------------------- export


def test_export_writes_a_self_contained_folder_with_a_model_card(artifacts):
    from huggingface_hub import ModelCard

    folder = artifacts["folder"]
    assert {p.name for p in folder.iterdir()} == EXPORTED  # safetensors only, flat code, tokenizer, card
    config = json.loads((folder / "config.json").read_text())
    assert config["auto_map"] == {
        "AutoConfig": "configuration_scratchformer.ScratchformerConfig",
        "AutoModel": "modeling_scratchformer.ScratchformerEncoderModel",
        "AutoModelForMaskedLM": "modeling_scratchformer.ScratchformerForMaskedLM",
        "AutoModelForSeq2SeqLM": "modeling_scratchformer.ScratchformerForConditionalGeneration",
        "AutoModelForSequenceClassification": "modeling_scratchformer.ScratchformerForSequenceClassification",
        "AutoModelForTokenClassification": "modeling_scratchformer.ScratchformerForTokenClassification",
    }
    assert "auto_map" not in json.loads((folder / "tokenizer_config.json").read_text())  # the tokenizer runs no code
    assert json.loads((folder / "1_Pooling" / "config.json").read_text())["pooling_mode_mean_tokens"] is True
    assert config["scratchformer_format"] == 1
    assert json.loads((folder / "generation_config.json").read_text())["decoder_start_token_id"] == 1
    check_folder(folder)  # imports: torch/transformers/stdlib + single-dot siblings; headers; auto_map targets

    card = ModelCard.load(folder / "README.md")
    data = card.data
    assert data.library_name == "transformers" and data.license == "apache-2.0"
    assert data.pipeline_tag == "feature-extraction"  # served by transformers 5; "text2text-generation" is gone
    assert {"scratchformer", "custom_code", "feature-extraction", "sentence-transformers"} <= set(data.tags)
    assert data.datasets is None  # score names ("kjv-web") are not Hub dataset ids: never listed as datasets
    assert data.metrics == ["bleu", "chrf"]
    assert {(r.metric_type, r.metric_value, r.dataset_split) for r in data.eval_results} == {
        ("bleu", 21.4, "test"), ("chrf", 48.9, "test")}
    for snippet in ("AutoModelForSeq2SeqLM.from_pretrained", "model.generate(", "AutoModel.from_pretrained",
                    'pipeline("feature-extraction"', "SentenceTransformer(", "trust_remote_code=True",
                    "AutoModelForSequenceClassification", "## Uses", "## Limitations", "## Citation",
                    "@inproceedings{vaswani2017attention", GENERATED_MARK,
                    "| English to Spanish | KJV -> WEB | test | bleu | 21.4 | sacrebleu 2.5 (13a) |"):
        assert snippet in card.text, snippet


def test_export_cli_and_its_refusals(artifacts, tmp_path, capsys):
    out = tmp_path / "cli-export"
    assert cli_main(["export", str(artifacts["source"]), str(out), "--model-name", "tiny", "--language", "en",
                     "--repo-id", "alice/tiny"]) == 0
    assert {p.name for p in out.iterdir()} == EXPORTED
    readme = (out / "README.md").read_text()
    assert "# tiny" in readme and 'from_pretrained("alice/tiny"' in readme and "- en" in readme
    assert cli_main(["export", str(artifacts["source"]), str(out)]) == 2  # not empty, no --overwrite
    assert "not empty" in capsys.readouterr().err
    assert cli_main(["export", str(artifacts["source"]), str(out), "--overwrite"]) == 0

    with pytest.raises(HubError, match="ScratchformerForConditionalGeneration"):
        export(ScratchformerModel(tiny_config()), tmp_path / "base", artifacts["tokenizer"])
    no_tokenizer = tmp_path / "no-tokenizer"
    artifacts["model"].save_pretrained(no_tokenizer)
    with pytest.raises(HubError, match="no tokenizer"):
        export(no_tokenizer, tmp_path / "x")
    mismatched = ScratchformerForConditionalGeneration(tiny_config(vocab_size=len(artifacts["tokenizer"]),
                                                                   eos_token_id=4))
    with pytest.raises(HubError, match=r"eos: tokenizer '</s>' has id 2, the model's eos_token_id is 4"):
        export(mismatched, tmp_path / "y", artifacts["tokenizer"])
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()  # nothing half-written


def booby_trap(folder: Path) -> None:
    """Make a saved model folder carry someone else's code: foreign auto_map entries, custom_pipelines and a code
    file, in config.json and in tokenizer_config.json."""
    evil = "attacker/repo--modeling_evil.EvilModel"
    for name, extra in (("config.json", {"AutoModel": evil, "AutoModelForCausalLM": evil}),
                        ("tokenizer_config.json", {"AutoProcessor": "attacker/repo--processing_evil.Evil"})):
        data = json.loads((folder / name).read_text())
        data["auto_map"] = {**data.get("auto_map", {}), **extra}
        data["custom_pipelines"] = {"evil-task": {"impl": "attacker/repo--pipeline_evil.EvilPipeline", "pt": []}}
        (folder / name).write_text(json.dumps(data))
    (folder / "modeling_evil.py").write_text("import os\nos.system('echo pwned')\n")


def test_export_writes_only_our_auto_map_whatever_the_source_config_carried(artifacts, tmp_path):
    source = tmp_path / "trapped"
    shutil.copytree(artifacts["source"], source)
    booby_trap(source)
    folder = export(source, tmp_path / "clean")
    config = json.loads((folder / "config.json").read_text())
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    assert config["auto_map"] == json.loads((artifacts["folder"] / "config.json").read_text())["auto_map"]
    assert "auto_map" not in tokenizer_config
    assert "custom_pipelines" not in config and "custom_pipelines" not in tokenizer_config
    assert {p.name for p in folder.iterdir()} == EXPORTED  # modeling_evil.py stays behind
    assert "attacker" not in "".join(p.read_text() for p in folder.iterdir() if p.suffix in (".json", ".py", ".md"))

    booby_trap(folder)  # the same trap in a folder made by hand: the check names every entry
    with pytest.raises(HubError) as error:
        check_folder(folder)
    for culprit in ("config.json: auto_map['AutoModel'] is 'attacker/repo--modeling_evil.EvilModel'",
                    "config.json: auto_map has entries that name code we did not ship: ['AutoModelForCausalLM']",
                    "config.json: custom_pipelines", "tokenizer_config.json: auto_map has entries",
                    "tokenizer_config.json: custom_pipelines"):
        assert culprit in str(error.value), (culprit, str(error.value))


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its content (``None`` for a folder): equal snapshots = nothing changed."""
    return {str(path.relative_to(root)): None if path.is_dir() else path.read_bytes() for path in root.rglob("*")}


@pytest.fixture
def run_folder(artifacts, tmp_path) -> Path:
    """A training run as the Trainer leaves it: the final model, checkpoint-6 with optimizer state, a log."""
    run = tmp_path / "run"
    shutil.copytree(artifacts["source"], run)
    shutil.copytree(artifacts["source"], run / "checkpoint-6")
    (run / "checkpoint-6" / "optimizer.pt").write_bytes(b"optimizer state")
    (run / "train_log.txt").write_text("step 6: loss 3.2\n")
    return run


@pytest.mark.parametrize("model, out, message", [
    ("run/checkpoint-6", "run/checkpoint-6", "is the source folder"),
    ("run/checkpoint-6", "run", "contains the source folder"),
    ("run/checkpoint-6", ".", "contains the source folder"),
    ("run", "run/hub-export", "is inside the source folder"),
    ("run/checkpoint-6", "run/checkpoint-6/export", "is inside the source folder"),
])
def test_export_never_writes_into_or_over_its_source(run_folder, tmp_path, monkeypatch, capsys, model, out, message):
    monkeypatch.chdir(tmp_path)
    before = tree(tmp_path)
    assert cli_main(["export", model, out, "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("scratchformer export: error: ") and message in err and err.count("\n") == 1, err
    assert tree(tmp_path) == before


def test_overwrite_refuses_what_is_not_an_earlier_export(artifacts, run_folder, tmp_path, capsys):
    not_exports = {"run": (run_folder, "subfolders (checkpoint-6)")}
    not_exports["saved-model"] = (artifacts["source"], "it lacks README.md")  # save_pretrained, not export
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("do not delete me")
    not_exports["notes"] = (notes, "it lacks config.json")
    for name, (folder, reason) in not_exports.items():
        before = tree(folder)
        assert cli_main(["export", str(artifacts["folder"]), str(folder), "--overwrite"]) == 2, name
        err = capsys.readouterr().err
        assert "--overwrite replaces only an earlier export" in err and reason in err, (name, err)
        assert tree(folder) == before, name
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging folder left behind


def test_overwrite_replaces_only_the_files_of_an_earlier_export(artifacts, tmp_path, monkeypatch):
    out = export(artifacts["source"], tmp_path / "out")  # with scores.json
    (out / "loss_curve.png").write_bytes(b"a plot someone added")
    (out / "README.md").write_text("an old card")
    export(artifacts["model"], out, artifacts["tokenizer"], overwrite=True)  # no scores this time
    assert {p.name for p in out.iterdir()} == EXPORTED - {"scores.json"} | {"loss_curve.png"}
    assert (out / "loss_curve.png").read_bytes() == b"a plot someone added"
    assert "No measured scores" in (out / "README.md").read_text()
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)  # an empty OUT needs no --overwrite, and stays the folder it was (a working directory)
    export(artifacts["source"], ".")
    assert Path.cwd() == empty and {p.name for p in Path(".").iterdir()} == EXPORTED
    assert "\n# empty\n" in (empty / "README.md").read_text()  # the card is named after the folder, not "."


@pytest.mark.parametrize("scores, message", [
    ({"results": [{"task": "translation", "metrics": {"bleu": 1.0}}]}, "needs 'dataset'"),
    ([{"task": "translation", "dataset": "d", "metrics": {"bleu": "high"}}], "must be a finite number"),
    ([{"task": "translation", "dataset": "d", "metrics": {}}], "needs 'metrics'"),
    ([{"task": "translation", "dataset": "d", "metrics": {"bleu": 1}, "bleu": 2}], "unknown keys"),
    ({"bleu": 1.0}, "expected"),
])
def test_bad_scores_are_refused_naming_the_field(scores, message):
    with pytest.raises(HubError, match=message):
        load_scores(scores)


# ---------------------------------------------------------------------------------------------------- push + load


def test_push_then_load_from_the_hub_where_scratchformer_is_not_installed(artifacts, hub, tmp_path):
    result = run_cli(["push", str(artifacts["source"]), "alice/tiny-scratchformer", "--private",
                      "-m", "First upload"], hub_env(hub), tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "pushed to" in result.stdout
    # one repo creation, the card's metadata check, one preupload, ONE commit with model, code and tokenizer
    assert [line for line in hub.log if line.startswith("POST")] == [
        "POST /api/repos/create",
        "POST /api/validate-yaml",
        "POST /api/models/alice/tiny-scratchformer/preupload/main",
        "POST /api/models/alice/tiny-scratchformer/commit/main",
    ]
    repo = hub.repos["alice/tiny-scratchformer"]
    assert repo.private and len(repo.commits) == 1 and repo.commits[0]["summary"] == "First upload"
    assert set(repo.files) == EXPORTED - {"1_Pooling"} | {"1_Pooling/config.json"}
    assert repo.files["model.safetensors"] == (artifacts["folder"] / "model.safetensors").read_bytes()
    assert 'from_pretrained("alice/tiny-scratchformer"' in repo.files["README.md"].decode()

    hub.log.clear()
    loaded = run_without_scratchformer(
        f"""
        import os
        # the helper switches the Hub off; this process must download from the fake Hub instead
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
            os.environ.pop(name, None)
        os.environ.update(HF_ENDPOINT={hub.url!r}, HF_TOKEN={hub.token!r})
        import torch
        from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM, AutoTokenizer
        repo = "alice/tiny-scratchformer"
        expected = torch.load({str(artifacts["expected"])!r})
        config = AutoConfig.from_pretrained(repo, trust_remote_code=True)
        assert "transformers_modules" in type(config).__module__, type(config).__module__
        tokenizer = AutoTokenizer.from_pretrained(repo, trust_remote_code=True)
        assert type(tokenizer).__name__ == "TokenizersBackend", type(tokenizer)  # built in: no tokenizer code
        model = AutoModelForSeq2SeqLM.from_pretrained(repo, trust_remote_code=True).eval()
        encoder = AutoModel.from_pretrained(repo, trust_remote_code=True).eval()
        assert type(encoder).__name__ == "ScratchformerEncoderModel", type(encoder)
        batch = tokenizer({SENTENCES!r}, padding=True, return_tensors="pt")
        assert torch.equal(batch["input_ids"], expected["ids"])
        with torch.no_grad():
            logits = model(**batch, decoder_input_ids=batch["input_ids"][:, :4]).logits
            greedy = model.generate(**batch, max_new_tokens=10, do_sample=False)
            encoded = encoder(**batch).last_hidden_state
        assert torch.allclose(logits, expected["logits"], atol=1e-5), (logits - expected["logits"]).abs().max()
        assert torch.allclose(encoded, expected["encoded"], atol=1e-5)
        assert torch.equal(greedy, expected["greedy"])
        assert tokenizer.batch_decode(greedy, skip_special_tokens=True) == expected["text"]
        print("HUB-LOAD-OK")
        """,
        tmp_path,
        timeout=TIMEOUT,
    )
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert "HUB-LOAD-OK" in loaded.stdout
    downloaded = {line.rsplit("/", 1)[-1] for line in hub.log if line.startswith("GET /alice/tiny-scratchformer/")}
    assert {"config.json", "model.safetensors", "modeling_scratchformer.py", "configuration_scratchformer.py",
            "paper_scratchformer.py", "card_scratchformer.py", "tokenizer.json", "tokenizer_config.json"} <= downloaded


def test_push_cli_refused_by_the_hub_gives_a_clear_error(artifacts, hub, monkeypatch, capsys):
    import huggingface_hub.constants

    # in-process: the endpoint and offline switch were read at import, so set them where push reads them
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", hub.url)
    monkeypatch.setenv("HF_TOKEN", hub.token)
    hub.refuse = {"create", "commit"}
    assert cli_main(["push", str(artifacts["source"]), "someone-else/model"]) == 2
    err = capsys.readouterr().err
    assert f"error: the Hub at {hub.url} refused creating the repository someone-else/model (HTTP 403" in err
    assert "write access" in err
    assert "someone-else/model" not in hub.repos


def test_push_errors_without_token_network_or_permission(artifacts, hub, tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    with pytest.raises(HubError, match="no Hugging Face token: set HF_TOKEN"):
        push(artifacts["source"], "alice/x", endpoint=hub.url)

    with pytest.raises(HubError, match="refused creating the repository alice/x \\(HTTP 401"):
        push(artifacts["source"], "alice/x", token="hf_wrong", endpoint=hub.url)

    hub.repos["alice/frozen"] = FakeRepo()
    hub.refuse = {"commit"}  # the repo exists (create_repo gets 409, which is fine), the commit is refused
    with pytest.raises(HubError, match=r"refused uploading to alice/frozen \(the repository exists; nothing was "
                                       r"committed\) \(HTTP 403: You don't have the rights"):
        push(artifacts["source"], "alice/frozen", token=hub.token, endpoint=hub.url)
    assert hub.repos["alice/frozen"].commits == []

    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))  # bound but never listening: every connection is refused
        dead = f"http://127.0.0.1:{unused.getsockname()[1]}"
        with pytest.raises(HubError, match=f"cannot reach the Hub at {dead}.*HF_ENDPOINT"):
            push(artifacts["source"], "alice/x", token=hub.token, endpoint=dead)

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(HubError, match=r"offline mode is enabled. To disable it, please unset the `HF_HUB_OFFLINE`"):
        push(artifacts["source"], "alice/x", token=hub.token, endpoint=hub.url)


SECRET_TOKEN = "hf_SecretWriteToken0123456789"
SECRET_PASSWORD = "pa55w0rd-not-for-logs"


@pytest.mark.parametrize("case", ["echoed-token", "endpoint-with-password", "success-with-password"])
def test_push_never_prints_a_secret_a_server_echoes_or_an_endpoint_carries(artifacts, tmp_path, case):
    """A server that echoes the request's headers (Authorization: Bearer <token>, or the Basic credentials of an
    endpoint http://user:password@host) into its error message, and an endpoint with credentials in a success line:
    push printed both verbatim. Nothing secret reaches stdout or stderr now; the endpoint is named with ***@."""
    import base64

    with FakeHub(token=SECRET_TOKEN) as hub:
        hub.echo_headers = True
        hub.refuse = set() if case.startswith("success") else {"create"}
        port = hub.url.rsplit(":", 1)[1]
        # the http client sends an endpoint's user:password as Basic credentials (the fake takes the token there)
        password = SECRET_TOKEN if case.startswith("success") else SECRET_PASSWORD
        endpoint = hub.url if case == "echoed-token" else f"http://alice:{password}@127.0.0.1:{port}"
        env = {**hub_env(hub), "HF_ENDPOINT": endpoint}
        done = run_cli(["push", str(artifacts["source"]), "alice/secret-test"], env, tmp_path)
    output = done.stdout + done.stderr
    for secret in (SECRET_TOKEN, SECRET_PASSWORD, base64.b64encode(f"alice:{password}".encode()).decode(),
                   "alice:"):
        assert secret not in output, (secret, output[-3000:])
    shown = hub.url if case == "echoed-token" else f"http://***@127.0.0.1:{port}"
    if case.startswith("success"):  # the fake echoes the credentials into the repo's URL too
        assert done.returncode == 0, output[-3000:]
        assert f"pushed to {shown}/alice/secret-test: " in done.stdout, done.stdout
        return
    assert done.returncode == 2, output[-3000:]
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert errors[0].startswith(f"scratchformer push: error: the Hub at {shown} refused creating the repository")
    assert "request headers" in errors[0] and "'***'" in errors[0], errors[0]  # the echo is there, redacted


def test_push_to_a_hub_that_never_answers_ends_in_one_line_within_a_minute(artifacts, tmp_path):
    """It hung for more than 150 s: huggingface_hub's client has no timeout by default. Now each request has one
    (10 s to connect, 20 s without progress), so the silent endpoint is one line naming it (redacted)."""
    import time

    from fake_hub import silent_endpoint

    with silent_endpoint(f"alice:{SECRET_PASSWORD}") as endpoint:
        env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
        env.update(HF_ENDPOINT=endpoint, HF_TOKEN=SECRET_TOKEN, HF_HUB_DISABLE_TELEMETRY="1")
        start = time.monotonic()
        done = run_cli(["push", str(artifacts["source"]), "alice/silent"], env, tmp_path)
        seconds = time.monotonic() - start
    assert seconds < 60, seconds
    assert done.returncode == 2, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    port = endpoint.rsplit(":", 1)[1]
    assert errors == [line for line in errors if line.startswith(
        f"scratchformer push: error: cannot reach the Hub at http://***@127.0.0.1:{port} while creating the "
        "repository alice/silent (ReadTimeout")] and len(errors) == 1, done.stderr[-3000:]
    assert SECRET_PASSWORD not in done.stderr + done.stdout and SECRET_TOKEN not in done.stderr + done.stdout


def test_a_push_whose_retries_outlast_its_time_limit_ends_in_one_line_and_logs_no_secret(artifacts, monkeypatch):
    """A Hub that answers the repo creation, then never answers the upload: huggingface_hub retries that request
    five times with back-off. The push's time limit ends it, and the retries it logs (with the URL) are redacted."""
    import logging
    import time

    import huggingface_hub.constants

    import scratchformer.loading as loading

    push_module = sys.modules["scratchformer.hub.push"]  # scratchformer.hub.push is the function
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(push_module, "REQUEST_TIMEOUT", 1.0)
    monkeypatch.setattr(loading, "TRANSFER_TIME", 4.0)
    monkeypatch.setattr(loading, "SLOWEST_RATE", 10**12)  # the size adds nothing to the 4 s
    with FakeHub(token=SECRET_TOKEN) as hub:
        hub.silent = {"_preupload"}
        port = hub.url.rsplit(":", 1)[1]
        endpoint = f"http://alice:{SECRET_TOKEN}@127.0.0.1:{port}"
        records: list[str] = []
        recorder = logging.Handler()
        recorder.emit = lambda record: records.append(recorder.format(record))
        logging.getLogger("huggingface_hub").addHandler(recorder)  # what huggingface_hub's own handler writes
        start = time.monotonic()
        try:
            with pytest.raises(HubError) as caught:
                push(artifacts["source"], "alice/stalled", token=SECRET_TOKEN, endpoint=endpoint)
        finally:
            logging.getLogger("huggingface_hub").removeHandler(recorder)
        seconds = time.monotonic() - start
    message = str(caught.value)
    assert seconds < 4 + push_module.STOP_GRACE + 5, seconds  # without it: 6 tries of 1 s and 23 s of back-off
    assert message.startswith(f"the push to the Hub at http://***@127.0.0.1:{port} did not finish within its time "
                              "limit of 4 s"), message
    assert "\n" not in message
    assert hub.log.count("POST /api/models/alice/stalled/preupload/main") >= 2  # it did retry, within the limit
    logged = "\n".join(records)
    assert "Retrying in" in logged and f"thrown while requesting POST http://***@127.0.0.1:{port}/" in logged, logged
    assert SECRET_TOKEN not in logged + message and "alice:" not in logged + message, logged[-2000:]
    from huggingface_hub.utils import _http

    assert getattr(_http, "_GLOBAL_CLIENT_FACTORY", _http.default_client_factory) is _http.default_client_factory


def test_push_to_a_hub_that_answers_one_byte_at_a_time_ends_within_its_time_limit(artifacts, monkeypatch):
    """A Hub that sends one byte every 5 s never trips a read timeout: the push ran past 480 s. The whole upload now
    has a time limit (TRANSFER_TIME s plus 1 s per 100 kB; 2 s here, and one byte every 0.5 s): past it, no request
    is sent, the open connection is shut, and the push is one line naming the endpoint (redacted) and the limit."""
    import threading
    import time

    import huggingface_hub.constants
    from fake_hub import slow_endpoint

    import scratchformer.loading as loading

    push_module = sys.modules["scratchformer.hub.push"]
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(loading, "TRANSFER_TIME", 2.0)
    monkeypatch.setattr(loading, "SLOWEST_RATE", 10**12)  # the size adds nothing to the 2 s
    with slow_endpoint(0.5, f"alice:{SECRET_PASSWORD}") as endpoint:
        port = endpoint.rsplit(":", 1)[1]
        start = time.monotonic()
        with pytest.raises(HubError) as caught:
            push(artifacts["source"], "alice/slow", token=SECRET_TOKEN, endpoint=endpoint)
        seconds = time.monotonic() - start
        stopped = time.monotonic() + 5  # the upload's thread ends once its connection is shut
        while any(thread.name == "scratchformer-network" for thread in threading.enumerate()):
            assert time.monotonic() < stopped, "the abandoned upload still runs"
            time.sleep(0.05)
    message = str(caught.value)
    assert seconds < 2 + push_module.STOP_GRACE + 5, seconds  # the export itself takes a second or two
    assert message.startswith(f"the push to the Hub at http://***@127.0.0.1:{port} did not finish within its time "
                              "limit of 2 s"), message
    assert "\n" not in message and SECRET_PASSWORD not in message and SECRET_TOKEN not in message


def test_a_refused_push_chains_no_secret_and_writes_none(artifacts, tmp_path, monkeypatch):
    """Push raised its one-line HubError "from None", but the refusal it replaced stayed as its __context__, holding
    the server's echo of 'Authorization: Bearer hf_...': printed by a script that walks the chain, or by a logger
    that shows it. Every exception of the chain is redacted now, and nothing written holds the token."""
    import huggingface_hub.constants
    from test_errors import chain_text

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where push stages its export
    with FakeHub(token=SECRET_TOKEN) as hub:
        hub.echo_headers = True
        hub.refuse = {"create"}
        with pytest.raises(HubError, match="refused creating the repository") as caught:
            push(artifacts["source"], "alice/refused", token=SECRET_TOKEN, endpoint=hub.url)
    text, length = chain_text(caught.value)
    assert length >= 2 and "request headers" in text, text[-2000:]  # the refusal is still chained, redacted
    assert SECRET_TOKEN not in text, text[-3000:]
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or SECRET_TOKEN.encode() not in path.read_bytes(), path


def test_sigterm_during_a_push_removes_its_staged_export(artifacts, tmp_path):
    """A push stages its export in a temporary folder (22 MB for the shipped model); SIGTERM during the upload left
    it behind. The signal now ends the push like Ctrl-C: the temporary folder goes, status 143."""
    import signal
    import time

    from fake_hub import slow_endpoint

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with slow_endpoint(0.5) as endpoint:
        env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
        env.update(HF_ENDPOINT=endpoint, HF_TOKEN=SECRET_TOKEN, HF_HUB_DISABLE_TELEMETRY="1", TMPDIR=str(scratch))
        run = subprocess.Popen([sys.executable, "-m", "scratchformer.cli", "push", str(artifacts["source"]),
                                "alice/killed"], env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        try:
            deadline = time.monotonic() + TIMEOUT
            staged = []
            while not staged and run.poll() is None and time.monotonic() < deadline:
                staged = list(scratch.glob("scratchformer-push-*/export/checksums.sha256"))
                time.sleep(0.1)
            assert staged, run.communicate(timeout=10)
            time.sleep(1)  # the upload has begun: its first request waits on the slow server
            run.send_signal(signal.SIGTERM)
            _, stderr = run.communicate(timeout=60)
        finally:
            if run.poll() is None:
                run.kill()
    assert run.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert list(scratch.iterdir()) == [], stderr[-3000:]


@pytest.mark.parametrize("repo_id", ["me/..", "../..", "me/../../tmp", "me/.", "a/b/c", "/abs", "me/",
                                     "me/a\\b", "me/a b", "me/a--b", ".."])
def test_push_refuses_a_bad_repo_id_before_touching_any_file(artifacts, hub, tmp_path, monkeypatch, repo_id):
    scratch = tmp_path / "tmp"  # where push stages its export: it must not lose a file or gain a folder
    scratch.mkdir()
    (scratch / "keep.txt").write_text("someone else's file")
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    before = tree(tmp_path)
    with pytest.raises(HubError, match="repo id"):
        push(artifacts["source"], repo_id, token=hub.token, endpoint=hub.url, overwrite=True)
    assert tree(tmp_path) == before
    assert hub.log == []  # nothing was sent


def test_cli_refuses_a_bad_repo_id_with_exit_2(artifacts, tmp_path, capsys):
    assert cli_main(["push", str(artifacts["source"]), "me/.."]) == 2
    assert capsys.readouterr().err.startswith("scratchformer push: error: invalid repo id 'me/..'")
    assert cli_main(["export", str(artifacts["source"]), str(tmp_path / "x"), "--repo-id", "a/b/c"]) == 2
    assert ("scratchformer export: error: invalid repo id 'a/b/c': Repo id must be in the form 'repo_name' or "
            "'namespace/repo_name'") in capsys.readouterr().err  # huggingface_hub's validator says it
    assert not (tmp_path / "x").exists()


def test_check_folder_names_weights_that_are_not_floats(artifacts, tmp_path):
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "int-weights"
    shutil.copytree(artifacts["folder"], folder)
    tensors = load_file(folder / "model.safetensors")
    name = sorted(key for key in tensors if key.endswith(".weight"))[0]
    save_file({**tensors, name: tensors[name].to(torch.int32)}, folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(HubError, match=re.escape(f"holds weights that are not floating-point numbers ({name}: I32)")):
        check_folder(folder, checksums=False)


def test_card_metadata_is_written_as_given(artifacts, tmp_path):
    """The card's licence, languages and datasets are the user's: written as given (quoted YAML, so a value cannot
    break the card), whether or not the Hub knows them; the Hub says, when the card is pushed, what it does not read."""
    from huggingface_hub import ModelCard

    out = export(artifacts["source"], tmp_path / "x", license="cc-by-sa-4.0", language=["en", "pt-BR", "code"],
                 datasets=["wikitext", "alice/kjv-web"])
    data = ModelCard.load(out / "README.md").data
    assert (data.license, data.language, data.datasets) == ("cc-by-sa-4.0", ["en", "pt-BR", "code"],
                                                            ["wikitext", "alice/kjv-web"])
    odd = export(artifacts["source"], tmp_path / "y", license="../../etc/passwd", language="english: yes",
                 datasets=["me/data/extra"])
    data = ModelCard.load(odd / "README.md").data
    assert (data.license, data.language, data.datasets) == ("../../etc/passwd", "english: yes", ["me/data/extra"])


# ---------------------------------------------------------------------------------------------------- embeddings


def test_feature_extraction_pipeline_returns_encoder_states(artifacts, tmp_path):
    result = run_without_scratchformer(
        f"""
        import torch
        from transformers import pipeline
        expected = torch.load({str(artifacts["expected"])!r})
        extractor = pipeline("feature-extraction", model={str(artifacts["folder"])!r}, trust_remote_code=True)
        assert type(extractor.model).__name__ == "ScratchformerEncoderModel", type(extractor.model)
        for i, sentence in enumerate({SENTENCES!r}):
            states = torch.tensor(extractor(sentence))[0]
            n = int(expected["mask"][i].sum())
            assert states.shape == (n, expected["encoded"].shape[-1]), states.shape
            assert torch.allclose(states, expected["encoded"][i, :n], atol=1e-5), i
        print("PIPELINE-OK")
        """,
        tmp_path,
        timeout=TIMEOUT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "PIPELINE-OK" in result.stdout


@pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is None,
                    reason="sentence-transformers is not installed")
def test_sentence_transformers_loads_our_mean_pooling(artifacts, tmp_path):
    """The export is a native sentence-transformers folder (modules.json: Transformer + Pooling): no "creating a new
    one with mean pooling" fallback, and the vectors are our pooling (mean over the real tokens) to 1e-6."""
    result = run_without_scratchformer(
        f"""
        import logging
        import torch
        logging.basicConfig(level=logging.WARNING, format="LOG %(levelname)s %(name)s: %(message)s")
        from sentence_transformers import SentenceTransformer
        expected = torch.load({str(artifacts["expected"])!r})
        model = SentenceTransformer({str(artifacts["folder"])!r}, trust_remote_code=True, device="cpu")
        names = [type(module).__name__ for module in model]
        assert names == ["Transformer", "Pooling"], names
        vectors = torch.as_tensor(model.encode({SENTENCES!r}, batch_size=2))
        assert vectors.shape == expected["mean"].shape, vectors.shape
        error = (vectors - expected["mean"]).abs().max().item()
        assert error < 1e-6, error
        print("ST-OK", error)
        """,
        tmp_path,
        timeout=TIMEOUT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ST-OK" in result.stdout
    log = result.stdout + result.stderr
    assert "LOG WARNING" not in log and "mean pooling" not in log, log[-3000:]


# ---------------------------------------------------------------------------------------------------- safety


def broken_copies(folder: Path, root: Path) -> dict[str, tuple[Path, str]]:
    """Copies of an export with one defect each, and the file name the error must mention."""
    copies = {}

    def copy(name: str, culprit: str) -> Path:
        target = root / name
        shutil.copytree(folder, target)
        copies[name] = (target, culprit)
        return target

    weights = copy("truncated", "model.safetensors") / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    weights = copy("garbled-header", "model.safetensors") / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[8:40] = b"#" * 32
    weights.write_bytes(bytes(data))
    (copy("no-modeling-code", "modeling_scratchformer.py") / "modeling_scratchformer.py").unlink()
    (copy("no-config-code", "configuration_scratchformer.py") / "configuration_scratchformer.py").unlink()
    config_path = copy("newer-format", "config.json") / "config.json"
    config = json.loads(config_path.read_text())
    config["scratchformer_format"] = 99
    config_path.write_text(json.dumps(config))
    # weights only as a pickle whose loading would create a file: it must never be unpickled
    pickled = copy("pickle-only", "model.safetensors")
    (pickled / "model.safetensors").unlink()
    (pickled / "pytorch_model.bin").write_bytes(pickle.dumps(_Touch(str(root / "UNPICKLED"))))
    return copies


class _Touch:
    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


def test_check_folder_names_each_defect(artifacts, tmp_path):
    copies = broken_copies(artifacts["folder"], tmp_path)
    extra = tmp_path / "stray-pickle"
    shutil.copytree(artifacts["folder"], extra)
    (extra / "optimizer.pt").write_bytes(b"not really")
    copies["stray-pickle"] = (extra, "optimizer.pt")
    for name, (folder, culprit) in copies.items():
        with pytest.raises(HubError) as error:
            check_folder(folder)
        assert culprit in str(error.value), (name, str(error.value))
    with pytest.raises(HubError, match="pytorch_model.bin: pickled weights are never loaded"):
        export(copies["pickle-only"][0], tmp_path / "from-pickle")
    assert not (tmp_path / "UNPICKLED").exists()


def test_the_exported_code_imports_only_torch_transformers_the_standard_library_and_its_siblings(artifacts):
    """What Hub users run needs nothing they may lack: each code file of an export imports torch, transformers,
    huggingface_hub (which transformers brings), the standard library, and its siblings by ``from .sibling``."""
    import ast

    folder = artifacts["folder"]
    siblings = {path.stem for path in folder.glob("*.py")}
    assert siblings == {"paper_scratchformer", "modeling_scratchformer", "configuration_scratchformer",
                        "card_scratchformer"}
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                assert node.level == 1 and node.module in siblings, (path.name, node.lineno)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for module in [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module]:
                    assert module.split(".")[0] in {"torch", "transformers", "huggingface_hub",
                                                    *sys.stdlib_module_names}, (path.name, node.lineno, module)


def test_loading_a_broken_folder_names_the_file(artifacts, tmp_path):
    copies = broken_copies(artifacts["folder"], tmp_path)
    cases = {name: (str(folder), culprit) for name, (folder, culprit) in copies.items()}
    result = run_without_scratchformer(
        f"""
        from transformers import AutoModelForSeq2SeqLM
        for name, (folder, culprit) in {cases!r}.items():
            try:
                AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True)
            except Exception as error:
                message = str(error)
                assert culprit in message, (name, message)
                print(name, "->", type(error).__name__, message.splitlines()[0][:160])
            else:
                raise AssertionError(name + " loaded")
        print("ERRORS-OK")
        """,
        tmp_path,
        timeout=TIMEOUT,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "ERRORS-OK" in result.stdout
    assert "safetensors only" in result.stdout  # the pickle-only folder is refused, not unpickled
    assert not (tmp_path / "UNPICKLED").exists()


def test_installed_package_refuses_a_newer_format_naming_config_json(artifacts, tmp_path):
    from transformers import AutoConfig

    copies = broken_copies(artifacts["folder"], tmp_path)
    with pytest.raises(ValueError, match=r"scratchformer_format=99 .*config.json was written by a newer"):
        AutoConfig.from_pretrained(copies["newer-format"][0])
    with pytest.raises(OSError, match="model.safetensors .*truncated or corrupted"):
        ScratchformerForConditionalGeneration.from_pretrained(copies["truncated"][0])


def flip_bytes_in_the_tensor_data(weights: Path, count: int = 2000) -> None:
    """Invert ``count`` bytes spread over the tensor data of a safetensors file; the header and the size stay."""
    data = bytearray(weights.read_bytes())
    start = 8 + int.from_bytes(data[:8], "little")
    for i in range(count):
        data[start + (i * 7919) % (len(data) - start)] ^= 0xFF
    weights.write_bytes(bytes(data))


def test_damaged_weights_are_named_by_load_compare_export_and_check_folder(artifacts, tmp_path, capsys):
    """2,000 flipped bytes inside the tensor data (header intact) loaded, compared and exported without a word:
    safetensors has no checksum. The export's checksums.sha256 (sha256sum's format) now names the damaged file."""
    import hashlib

    from scratchformer.errors import ScratchformerError
    from scratchformer.integrity import safetensors_file_problem
    from scratchformer.loading import load

    damaged = tmp_path / "damaged"
    shutil.copytree(artifacts["folder"], damaged)
    weights = damaged / "model.safetensors"
    assert (damaged / "checksums.sha256").read_text() == "".join(
        f"{hashlib.sha256((damaged / name).read_bytes()).hexdigest()}  {name}\n"
        for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"))
    flip_bytes_in_the_tensor_data(weights)
    assert safetensors_file_problem(weights) is None  # the header and the size are intact: only the checksum tells
    named = "model.safetensors is damaged: its sha256 is "
    for task in ("encoder", "seq2seq"):
        with pytest.raises(ScratchformerError, match=named):
            load(damaged, task=task)
    for command in (["compare", "--no-defaults", "--model", str(damaged), "--no-plots", "--output",
                     str(tmp_path / "compared")], ["export", str(damaged), str(tmp_path / "re-exported")]):
        assert cli_main(command) == 2, command
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and named in err and str(damaged) in err, err
    assert not (tmp_path / "re-exported").exists()
    with pytest.raises(HubError, match=named):
        check_folder(damaged)
    if shutil.which("sha256sum"):  # the same file checks with the standard tool
        assert subprocess.run(["sha256sum", "--check", "--quiet", "checksums.sha256"], cwd=artifacts["folder"],
                              capture_output=True).returncode == 0
        assert subprocess.run(["sha256sum", "--check", "--quiet", "checksums.sha256"], cwd=damaged,
                              capture_output=True).returncode != 0


def test_a_manifest_that_lists_no_weights_file_is_a_problem_not_a_pass(artifacts, tmp_path, capsys):
    """A checksums.sha256 that lists config.json alone protects nothing: damaged weights loaded behind it with no
    note. Every weights file must be listed; the error says what to do."""
    from scratchformer.errors import ScratchformerError
    from scratchformer.loading import load

    folder = tmp_path / "unlisted"
    shutil.copytree(artifacts["folder"], folder)
    manifest = folder / "checksums.sha256"
    manifest.write_text("".join(line + "\n" for line in manifest.read_text().splitlines()
                                if line.endswith("  config.json")))
    flip_bytes_in_the_tensor_data(folder / "model.safetensors")
    named = "checksums.sha256 lists no checksum for model.safetensors, so damage to it would go unnoticed"
    with pytest.raises(ScratchformerError, match=rf"{re.escape(named)}\): restore the file from a backup"):
        load(folder, task="seq2seq")
    with pytest.raises(HubError, match=re.escape(named)):
        check_folder(folder)
    assert cli_main(["export", str(folder), str(tmp_path / "out")]) == 2
    assert named in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_the_manifest_covers_the_tokenizer_and_an_older_manifest_without_it_still_verifies(artifacts, tmp_path):
    """Another tokenizer put into an exported folder (train-tokenizer --overwrite) passed its checksums: they
    listed the weights and the config only. The tokenizer's files are listed now; a manifest written before still
    checks what it lists."""
    from scratchformer.errors import ScratchformerError
    from scratchformer.loading import load

    folder = tmp_path / "swapped"
    shutil.copytree(artifacts["folder"], folder)
    listed = [line.split("  ")[1] for line in (folder / "checksums.sha256").read_text().splitlines()]
    assert {"tokenizer.json", "tokenizer_config.json"} <= set(listed), listed
    older = "".join(line + "\n" for line in (folder / "checksums.sha256").read_text().splitlines()
                    if not line.endswith(("tokenizer.json", "tokenizer_config.json")))
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    tokenizer["model"]["vocab"] = {token: len(tokenizer["model"]["vocab"]) - 1 - index
                                   for token, index in tokenizer["model"]["vocab"].items()}  # same size, other ids
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    with pytest.raises(ScratchformerError, match=r"\(tokenizer.json is damaged: its sha256 is "):
        load(folder, task="seq2seq")
    (folder / "checksums.sha256").write_text(older)  # the weights and the config only, as before
    model, _ = load(folder, task="seq2seq")
    assert model.config.d_model == artifacts["model"].config.d_model


@pytest.mark.parametrize("name", [b"caf\xe9-export", b"x" * 250], ids=["not-utf-8", "250-bytes"])
def test_an_export_into_a_folder_name_that_is_not_utf8_or_250_bytes_long_works(artifacts, tmp_path, name):
    """A folder name that is not UTF-8 ended the export in a traceback (the card's title could not be written), and a
    valid 250-byte name was refused (the staging folder's name, the name plus 16 bytes, passed 255). Both export now;
    the card titles a name that is not UTF-8 with U+FFFD for the bytes that are not."""
    out = Path(os.fsdecode(bytes(tmp_path) + b"/" + name))
    assert cli_main(["export", str(artifacts["source"]), str(out)]) == 0
    check_folder(out)
    assert os.listdir(tmp_path) == [os.fsdecode(name)]  # no staging folder left beside it
    title = (out / "README.md").read_text(encoding="utf-8").split("# ", 1)[1].split("\n", 1)[0]
    assert title == name.decode("utf-8", "replace")
    if not name.isascii():  # inside a folder so named, the tokenizers library cannot write: one line, nothing made
        inside = out / "inner"
        with pytest.raises(HubError, match=f"^cannot export to {re.escape(str(inside))}: the path of the folder it "
                                           "goes in is not valid UTF-8"):
            export(artifacts["source"], inside)
        assert not inside.exists()


def test_a_symlink_loop_is_one_line_for_export_as_for_compare(artifacts, tmp_path, capsys):
    """export raised RuntimeError('Symlink loop') (Path.resolve) where compare refused the same folder cleanly."""
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    for command, message in ((["export", str(loop), str(tmp_path / "out")], "is a loop of symbolic links"),
                             (["export", str(artifacts["source"]), str(loop)], "is a loop of symbolic links"),
                             (["compare", "--no-defaults", "--model", str(loop), "--no-plots", "--output",
                               str(tmp_path / "c")], f"{loop} is a loop of symbolic links")):
        assert cli_main(command) == 2, command
        err = capsys.readouterr().err
        assert err.startswith(f"scratchformer {command[0]}: error: ") and message in err, err
        assert err.count("\n") == 1 and "Traceback" not in err, err
    with pytest.raises(HubError, match="loop of symbolic links"):
        export(artifacts["model"], loop, artifacts["tokenizer"])  # a model in memory, OUT a loop
    assert loop.is_symlink() and not (tmp_path / "out").exists()


def test_a_source_that_is_not_there_is_named_before_the_folder_that_would_contain_it(tmp_path, monkeypatch):
    """``scratchformer export mine .`` where no folder ``mine`` exists said that the export folder "contains the
    source folder": the missing source is the mistake, and it is said first. (``small`` is now the shipped alias.)"""
    monkeypatch.chdir(tmp_path)
    for out in (tmp_path, tmp_path / "out"):
        with pytest.raises(HubError, match="^mine is not a folder: pass a folder saved with save_pretrained"):
            export("mine", out)
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------------- cards


def test_export_keeps_the_source_card_its_metadata_and_its_files(artifacts, tmp_path):
    """A hand-written card and the files it shows travel with the export; the generated sections are added once,
    and exporting the export again does not repeat them."""
    from huggingface_hub import ModelCard

    source = tmp_path / "run"
    shutil.copytree(artifacts["source"], source)
    (source / "README.md").write_text(
        "---\nlicense: mit\nlanguage: fr\nbase_model: someone/base\ntags:\n- my-tag\n- text2text-generation\n---\n\n"
        "# My model\n\nHand-written words about the training.\n\n![curve](loss_curve.png)\n")
    (source / "loss_curve.png").write_bytes(b"\x89PNG a plot")
    (source / "senses.json").write_text('{"roc_auc": 0.6}')
    (source / "WORDNET_LICENSE").write_text("WordNet 3.0 Copyright 2006 by Princeton University.")
    (source / "trainer_state.json").write_text("{}")  # Trainer bookkeeping: not a card asset
    first = export(source, tmp_path / "first", data_sources=["A corpus (CC BY-SA 4.0)"])
    second = export(first, tmp_path / "second")
    for folder in (first, second):
        names = {p.name for p in folder.iterdir()}
        assert names == EXPORTED | {"loss_curve.png", "senses.json", "WORDNET_LICENSE"}, names
        assert (folder / "loss_curve.png").read_bytes() == b"\x89PNG a plot"
        card = ModelCard.load(folder / "README.md")
        assert card.data.license == "mit" and card.data.language == "fr" and card.data.base_model == "someone/base"
        assert "my-tag" in card.data.tags and "text2text-generation" not in card.data.tags
        hand_written, generated = card.text.split(GENERATED_MARK)
        assert "# My model" in hand_written and "Hand-written words" in hand_written and "## Uses" not in hand_written
        assert generated.count("## Uses") == 1 and generated.count("## Citation") == 1
        assert card.text.count("# My model") == 1
    assert "- A corpus (CC BY-SA 4.0)" in (first / "README.md").read_text()


def test_model_push_to_hub_writes_our_card_not_the_empty_template(artifacts, hub, tmp_path):
    """``model.push_to_hub`` (transformers' API) gives a new repo our card; a repo that has a card keeps it."""
    code = textwrap.dedent(f"""
        from scratchformer import ScratchformerForConditionalGeneration
        model = ScratchformerForConditionalGeneration.from_pretrained({str(artifacts["source"])!r})
        model.push_to_hub("alice/pushed", commit_message="model only", tags=["my-tag"])
    """)
    push_once = subprocess.run([sys.executable, "-c", code], env=hub_env(hub), cwd=tmp_path, capture_output=True,
                               text=True, timeout=TIMEOUT)
    assert push_once.returncode == 0, push_once.stderr[-3000:]
    repo = hub.repos["alice/pushed"]
    card = repo.files["README.md"].decode()
    assert "This is the model card of a 🤗 transformers model" not in card  # transformers' template
    for part in ("library_name: transformers", "pipeline_tag: feature-extraction", "- custom_code", "- my-tag",
                 "# pushed", 'AutoModel.from_pretrained("alice/pushed", trust_remote_code=True)',
                 "## Uses and limitations", "## Training data", "@inproceedings{vaswani2017attention"):
        assert part in card, part
    assert {"config.json", "model.safetensors", "modeling_scratchformer.py", "paper_scratchformer.py",
            "card_scratchformer.py"} <= set(repo.files)
    repo.files["README.md"] = b"---\nlicense: mit\n---\n# A card someone wrote\n"
    push_again = subprocess.run([sys.executable, "-c", code], env=hub_env(hub), cwd=tmp_path, capture_output=True,
                                text=True, timeout=TIMEOUT)
    assert push_again.returncode == 0, push_again.stderr[-3000:]
    assert repo.files["README.md"] == b"---\nlicense: mit\n---\n# A card someone wrote\n"  # kept
    assert len(repo.commits) == 2


# ------------------------------------------------------------------------------------- dtype and permissions


def _modes(folder: Path) -> dict[str, int]:
    """The permission bits of ``folder`` ("."), and of everything in it."""
    return {".": folder.stat().st_mode & 0o777,
            **{path.relative_to(folder).as_posix(): path.stat().st_mode & 0o777 for path in folder.rglob("*")}}


@pytest.fixture
def umask():
    """Set the process umask for one test (``umask(0o022)``) and restore it afterwards."""
    before = os.umask(0o022)
    os.umask(before)
    yield os.umask
    os.umask(before)


def test_export_keeps_the_dtype_of_the_source_weights_and_config(artifacts, tmp_path):
    """A source stored in float16 whose config says float32 (as the shipped checkpoint) exports the same way: half
    the size of float32, and loaders still give float32; --dtype stores another dtype, the config's stays."""
    from safetensors.torch import load_file

    from scratchformer.cli.export import DTYPES as CLI_DTYPES
    from scratchformer.hub.sources import DTYPES, stored_dtype
    from scratchformer.loading import load

    assert CLI_DTYPES == DTYPES
    half = tmp_path / "half"
    copy.deepcopy(artifacts["model"]).half().save_pretrained(half)  # the fixture's model stays as it is
    artifacts["tokenizer"].save_pretrained(half)
    config = json.loads((half / "config.json").read_text())
    (half / "config.json").write_text(json.dumps({**config, "dtype": "float32"}))
    assert stored_dtype(half) == "float16"

    kept = export(half, tmp_path / "kept")
    assert stored_dtype(kept) == "float16"
    assert json.loads((kept / "config.json").read_text())["dtype"] == "float32"
    source_weights, kept_weights = load_file(half / "model.safetensors"), load_file(kept / "model.safetensors")
    assert source_weights.keys() == kept_weights.keys()
    assert all(torch.equal(source_weights[key], kept_weights[key]) for key in source_weights)  # bit for bit
    model, _ = load(kept, task="seq2seq")
    assert model.dtype == torch.float32  # what config.json says, as for the source

    assert cli_main(["export", str(half), str(tmp_path / "float32"), "--dtype", "float32"]) == 0
    wide = tmp_path / "float32"
    assert stored_dtype(wide) == "float32"
    assert json.loads((wide / "config.json").read_text())["dtype"] == "float32"
    ratio = (wide / "model.safetensors").stat().st_size / (kept / "model.safetensors").stat().st_size
    assert 1.9 < ratio < 2.1, ratio

    model = artifacts["model"]  # in memory, float32: exported as bfloat16, left as it was
    export(model, tmp_path / "bf16", artifacts["tokenizer"], dtype=torch.bfloat16)
    assert model.dtype == torch.float32
    assert stored_dtype(tmp_path / "bf16") == "bfloat16"
    assert json.loads((tmp_path / "bf16" / "config.json").read_text())["dtype"] == "float32"
    with pytest.raises(HubError, match="cannot store the weights as 'int8': choose one of float32, float16"):
        export(model, tmp_path / "int8", artifacts["tokenizer"], dtype="int8")
    assert not (tmp_path / "int8").exists()


def test_exporting_the_shipped_checkpoint_keeps_its_float16_size(tmp_path):
    from scratchformer.hub.sources import stored_dtype
    from scratchformer.loading import pretrained_path

    source = pretrained_path("small")
    folder = export(source, tmp_path / "small")
    assert stored_dtype(folder) == stored_dtype(source) == "float16"
    size, source_size = (folder / "model.safetensors").stat().st_size, (source / "model.safetensors").stat().st_size
    assert abs(size - source_size) < 0.01 * source_size, (size, source_size)  # not float32's twice the size
    by_alias = export("small", tmp_path / "alias")  # the alias load() reads ("small is not a folder" before)
    assert (by_alias / "model.safetensors").read_bytes() == (folder / "model.safetensors").read_bytes()


@pytest.mark.parametrize("mask, folder_mode, file_mode", [(0o022, 0o755, 0o644), (0o027, 0o750, 0o640)])
def test_export_gives_the_permissions_of_the_umask(artifacts, tmp_path, umask, mask, folder_mode, file_mode):
    """Not drwx------ (a temporary folder's) nor -rw------- (the weights, written through a private file): what
    mkdir and cp give under the umask, for a new OUT and for files replaced in an earlier export."""
    (artifacts["source"] / "loss_curve.png").write_bytes(b"\x89PNG a plot")
    (artifacts["source"] / "loss_curve.png").chmod(0o600)  # a card asset's own mode does not travel
    try:
        umask(mask)
        folder = export(artifacts["source"], tmp_path / "out")
        export(artifacts["source"], tmp_path / "out", overwrite=True)
    finally:
        (artifacts["source"] / "loss_curve.png").unlink()
    modes = _modes(folder)
    assert {"model.safetensors", "loss_curve.png", "1_Pooling/config.json"} <= set(modes)
    assert {name: mode for name, mode in modes.items() if mode != (folder_mode if (folder / name).is_dir()
                                                                   else file_mode)} == {}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging folder left


# ------------------------------------------------------------------------------ the remote code's version check


def _import_with_transformers(version: str, folder: Path, module: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """Import ``module`` (``configuration_scratchformer`` or ``modeling_scratchformer``) of the code files in
    ``folder``, as Hub users' transformers does, where ``transformers`` is a stand-in whose ``__version__`` is
    ``version`` and which has nothing else (as transformers 4.x has no ``PreTrainedConfig``)."""
    root = tmp_path / f"v{version}"
    (root / "transformers").mkdir(parents=True)
    (root / "transformers" / "__init__.py").write_text(f"__version__ = {version!r}\n")
    (root / "remote").mkdir()
    (root / "remote" / "__init__.py").write_text("")
    for name in ("configuration_scratchformer.py", "modeling_scratchformer.py"):
        shutil.copy(folder / name, root / "remote" / name)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = f"import sys; sys.path.insert(0, {str(root)!r}); import remote.{module}"
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True,
                          timeout=TIMEOUT)


@pytest.mark.parametrize("module, version, refused", [
    ("configuration_scratchformer", "4.57.0", True),
    ("configuration_scratchformer", "5.3.2", True),
    ("configuration_scratchformer", "5.4.0.dev0", False),
    ("configuration_scratchformer", "5.24.0", False),
    ("modeling_scratchformer", "4.57.0", True),
])
def test_the_exported_code_says_which_transformers_it_needs(artifacts, tmp_path, module, version, refused):
    """Hub users with transformers 4.x get "needs transformers >= 5.4", not a bare "cannot import name
    'PreTrainedConfig'"; from 5.4 on the check lets the import go on (here it then fails on the stand-in's missing
    names, which shows that the check passed)."""
    done = _import_with_transformers(version, artifacts["folder"], module, tmp_path)
    assert done.returncode != 0
    last_line = done.stderr.strip().splitlines()[-1]
    if refused:
        assert last_line == (f"ImportError: Scratchformer's model code ({module}.py) needs transformers >= 5.4, but "
                             f'transformers {version} is installed: pip install -U "transformers>=5.4"'), last_line
    else:
        assert "needs transformers" not in done.stderr
        assert re.match(r"ImportError: cannot import name '\w+' from 'transformers'", last_line), last_line


def test_the_version_check_uses_only_the_standard_library_and_transformers(artifacts):
    """The check runs before any other import of transformers, and imports nothing a Hub user may lack."""
    for name in ("configuration_scratchformer.py", "modeling_scratchformer.py"):
        text = (artifacts["folder"] / name).read_text()
        check = text.index('needs transformers >= 5.4')
        first_from_import = text.index("\nfrom transformers import")
        assert text.index("\nimport transformers\n") < check < first_from_import
        assert "\nimport torch\n" not in text[:check]


# ------------------------------------------------------------------------------------ exports: overflow, races, kill


def test_an_export_whose_weights_overflow_the_dtype_is_refused_naming_the_tensor(artifacts, tmp_path, capsys):
    """export --dtype float16 wrote inf for a weight above 65504, exited 0, and the checksums vouched for it. Now
    the cast is refused in one line naming the tensor and its largest value, and nothing is written; a dtype the
    values fit (bfloat16) still exports, and a model whose weights are already inf or NaN is refused too."""
    from safetensors.torch import load_file

    model = copy.deepcopy(artifacts["model"])
    with torch.no_grad():
        model.model.encoder.layers[0].feed_forward.fc2.weight[0, 0] = 70000.0
    source = tmp_path / "big"
    model.save_pretrained(source)
    artifacts["tokenizer"].save_pretrained(source)
    name = "model.encoder.layers.0.feed_forward.fc2.weight"
    capsys.readouterr()
    assert cli_main(["export", str(source), str(tmp_path / "half"), "--dtype", "float16"]) == 2
    err = capsys.readouterr().err
    err = err[err.index("scratchformer export: error: "):]  # after the loader's progress bar
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"scratchformer export: error: cannot store the weights as float16: {name} holds values "
                          "up to 70000, beyond float16's largest number 65504 (1 values would become inf)"), err
    assert not (tmp_path / "half").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["big"]
    with pytest.raises(HubError, match=f"{re.escape(name)} holds values up to 70000"):
        export(model, tmp_path / "half", artifacts["tokenizer"], dtype=torch.float16)  # in memory: the same
    assert cli_main(["export", str(source), str(tmp_path / "bf16"), "--dtype", "bfloat16"]) == 0
    stored = load_file(tmp_path / "bf16" / "model.safetensors")[name]
    assert torch.isfinite(stored).all() and abs(stored[0, 0].item() - 70000.0) < 70000.0 * 2 ** -7  # bf16 rounding
    with torch.no_grad():
        model.model.encoder.layers[0].feed_forward.fc2.weight[0, 1] = float("nan")
    with pytest.raises(HubError, match=f"^the export is not published: its weight {re.escape(name)} holds NaN or infinite values; the model is broken"):
        export(model, tmp_path / "nan", artifacts["tokenizer"])
    assert not (tmp_path / "nan").exists()


RACE = """
import sys
from scratchformer.hub import export
try:
    export(sys.argv[1], sys.argv[2])
    print("EXPORTED")
except Exception as error:
    print("REFUSED", error)
"""


def test_two_exports_started_together_never_mix_their_files(artifacts, tmp_path):
    """The issue's case as it happened: two processes export two different models into one new folder at the same
    time. Exactly one succeeds (the first to rename its staging folder to OUT; the other finds OUT there, or its
    rename fails); the folder holds that model's files only (its checksums agree)."""
    other = tmp_path / "other"
    model = copy.deepcopy(artifacts["model"])
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(1.0)
    model.save_pretrained(other)
    artifacts["tokenizer"].save_pretrained(other)
    out = tmp_path / "out"
    runs = [subprocess.Popen([sys.executable, "-c", RACE, str(source), str(out)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for source in (artifacts["source"], other)]
    results = [run.communicate(timeout=TIMEOUT) for run in runs]
    outcomes = [stdout.strip().splitlines()[-1] if stdout.strip() else stderr[-2000:] for stdout, stderr in results]
    assert sorted(line.split()[0] for line in outcomes) == ["EXPORTED", "REFUSED"], outcomes
    refusal = next(line for line in outcomes if line.startswith("REFUSED"))
    assert "is not empty" in refusal or "Directory not empty" in refusal, refusal
    check_folder(out)  # checksums.sha256 agrees with model.safetensors: one export's files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other", "out"]


def test_sigterm_during_an_export_removes_its_staging_folder(artifacts, tmp_path):
    """SIGTERM while the export is being written left a staging folder (22 MB for the shipped model). Now the
    signal ends the export like Ctrl-C: the staging folder goes, OUT is not created, status 143."""
    import signal
    import time

    ready = tmp_path / "ready"
    script = textwrap.dedent(f"""
        import pathlib, sys, time
        import scratchformer.hub
        from scratchformer.cli import main
        export_module = sys.modules["scratchformer.hub.export"]  # scratchformer.hub.export is the function
        def stalled_check(*args, **kwargs):  # the staging folder is complete: wait here to be killed
            pathlib.Path({str(ready)!r}).write_text("staged")
            time.sleep(120)
        export_module.check_folder = stalled_check
        raise SystemExit(main(["export", {str(artifacts["source"])!r}, {str(tmp_path / "out")!r}]))
    """)
    run = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not ready.exists() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ready.exists(), run.communicate(timeout=10)
        staged = [p.name for p in tmp_path.iterdir() if ".export-" in p.name]
        assert len(staged) == 1 and (tmp_path / staged[0] / "model.safetensors").is_file(), staged
        run.send_signal(signal.SIGTERM)
        _, stderr = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ready"], stderr[-3000:]


def test_the_card_names_every_exported_auto_class_and_its_fill_mask_example_runs_without_our_package(tmp_path):
    """The exported card says what config.json maps (AutoModelForMaskedLM included) and the silent tokenizer path;
    its fill-mask snippet, run as written in a process without scratchformer, gives the in-process top 5."""
    from transformers import pipeline

    from scratchformer import pretrained_path
    from scratchformer.models.modeling_scratchformer import AUTO_MAP

    folder = export(pretrained_path("small"), tmp_path / "export")
    card = (folder / "README.md").read_text()
    how_to_use = card.split("## How to use", 1)[1].split("###", 1)[0]
    mapped = json.loads((folder / "config.json").read_text())["auto_map"]
    assert set(mapped) == set(AUTO_MAP) and "AutoModelForMaskedLM" in mapped
    for auto_class in mapped:
        assert f"`{auto_class}`" in how_to_use, auto_class
    assert 'PreTrainedTokenizerFast.from_pretrained("path/to/this/folder")' in how_to_use  # no --repo-id given
    snippet = card.split("### Filling in a masked token", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    snippet = snippet.replace('"path/to/this/folder"', repr(str(folder)))
    *setup, last = snippet.strip().splitlines()
    call = last.split("  #", 1)[0]
    result = run_without_scratchformer("\n".join(setup) + f"\nimport json\nprint('RESULT', json.dumps({call}))",
                                       tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    remote = json.loads(result.stdout.split("RESULT ", 1)[1])
    fill = pipeline("fill-mask", model=str(folder))
    local = fill(call.split("fill(", 1)[1].rstrip(")").replace("{fill.tokenizer.mask_token}", fill.tokenizer.mask_token)
                 .strip("f\""))
    assert [r["token_str"] for r in remote] == [r["token_str"] for r in local] and len(remote) == 5
    assert max(abs(a["score"] - b["score"]) for a, b in zip(remote, local)) < 1e-5
