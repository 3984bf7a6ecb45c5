"""Sharded training: the ``accelerate`` configs in ``examples/accelerate/`` and FSDP2 through the Trainer.

- every config parses with accelerate's own config loader; the FSDP one (FSDP2, our layers as the units,
  FULL_STATE_DICT) and its Trainer-option twin give the same plugin settings; the DeepSpeed ZeRO-2/3 ones are
  checked for structure only (DeepSpeed needs GPUs; it is not installed here);
- FSDP2 on CPU through the Trainer (slow): ``accelerate launch --config_file examples/accelerate/fsdp.yaml`` with 2
  processes (gloo), through ``tests/fsdp_on_cpu.py``, which lifts accelerate's one CPU restriction (see there);
  4 steps, ``--resume`` to 6: FSDP's own checkpoint layout, complete per our checks, our code files and
  ``auto_map``, a final model that ``from_pretrained`` loads, and the weights of plain DDP for the same 6 steps;
- what our model needs under FSDP2 (one module for the tied token table, a state dict without its second path)
  and the warning when FSDP is asked for where accelerate does not run it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO_ROOT
from safetensors.torch import load_file
from test_training import corpus, train_losses  # noqa: F401

from scratchformer import ScratchformerConfig, ScratchformerForConditionalGeneration
from scratchformer.models import CODE_FILES  # what a checkpoint carries
from scratchformer.models.modeling_scratchformer import AUTO_MAP
from scratchformer.training import config_from_args
from scratchformer.training.checkpoints import checkpoint_problems
from scratchformer.training.sharding import with_repeated_modules, without_repeated_modules

CONFIGS = REPO_ROOT / "examples" / "accelerate"
MODELS_DIR = REPO_ROOT / "scratchformer" / "models"
LAYERS = ScratchformerForConditionalGeneration._no_split_modules


def load_accelerate_config(name: str):
    from accelerate.commands.config.config_args import load_config_from_file

    return load_config_from_file(str(CONFIGS / name))


def test_accelerate_configs_parse_and_say_what_they_shard():
    ddp = load_accelerate_config("ddp.yaml")
    assert ddp.distributed_type.value == "MULTI_GPU" and not ddp.fsdp_config and not ddp.deepspeed_config

    fsdp = load_accelerate_config("fsdp.yaml").fsdp_config
    assert fsdp["fsdp_version"] == 2 and fsdp["fsdp_auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP"
    assert fsdp["fsdp_transformer_layer_cls_to_wrap"].split(",") == LAYERS == ["ScratchformerEncoderLayer",
                                                                               "ScratchformerDecoderLayer"]
    assert fsdp["fsdp_state_dict_type"] == "FULL_STATE_DICT"  # one model.safetensors that from_pretrained loads

    # the same settings as Trainer options (torchrun ... --fsdp --fsdp_config examples/accelerate/fsdp_config.json)
    from accelerate.utils import FullyShardedDataParallelPlugin

    _, args = config_from_args(["--train-files", "a.txt", "--output-dir", "o", "--fsdp", "--fsdp_config",
                                str(CONFIGS / "fsdp_config.json")])
    plugin = FullyShardedDataParallelPlugin(**args.fsdp_plugin_args)
    assert (plugin.fsdp_version, plugin.transformer_cls_names_to_wrap, plugin.state_dict_type.name,
            plugin.reshard_after_forward) == (2, LAYERS, "FULL_STATE_DICT", fsdp["fsdp_reshard_after_forward"])

    for stage in (2, 3):
        config = load_accelerate_config(f"deepspeed_zero{stage}.yaml")
        assert config.distributed_type.value == "DEEPSPEED"
        path = REPO_ROOT / config.deepspeed_config["deepspeed_config_file"]  # relative to the repository root
        ds = json.loads(path.read_text())
        assert ds["zero_optimization"]["stage"] == stage
        assert {ds[k] for k in ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                                "gradient_clipping")} == {"auto"}  # the Trainer's options fill them in
        assert "optimizer" not in ds and "scheduler" not in ds  # the Trainer's AdamW and the paper's schedule stay
    assert ds["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] is True  # ZeRO-3 saves one file


def test_slurm_script_is_valid_bash_with_one_torchrun_per_machine():
    script = REPO_ROOT / "examples" / "slurm_train.sbatch"
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    assert "#SBATCH --ntasks-per-node=1" in text and "srun --kill-on-bad-exit=1 torchrun" in text
    assert "--rdzv-backend c10d" in text and "-m scratchformer.cli train" in text and "--resume" in text


def test_deepspeed_configs_are_accepted_by_the_trainer():
    pytest.importorskip("deepspeed", reason="DeepSpeed is not installed (it needs GPUs); structure checked above")
    for stage in (2, 3):
        _, args = config_from_args(["--train-files", "a.txt", "--output-dir", "o", "--deepspeed",
                                    str(CONFIGS / f"deepspeed_zero{stage}.json")])
        assert args.deepspeed


def test_tied_token_table_under_fsdp_saves_and_loads_without_its_second_path():
    config = ScratchformerConfig(vocab_size=50, d_model=16, encoder_layers=1, decoder_layers=1,
                                 encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=16,
                                 decoder_ffn_dim=16)
    model = ScratchformerForConditionalGeneration(config)
    model.set_input_embeddings(model.get_input_embeddings())  # what prepare_sharding does under FSDP
    assert model.model.decoder.embeddings.word_embeddings is model.model.encoder.embeddings.word_embeddings
    model.register_state_dict_post_hook(without_repeated_modules)
    model.register_load_state_dict_pre_hook(with_repeated_modules)
    state = model.state_dict()
    assert "model.decoder.embeddings.word_embeddings.weight" not in state
    assert "model.encoder.embeddings.word_embeddings.weight" in state and "lm_head.weight" in state
    fresh = ScratchformerForConditionalGeneration(config)
    fresh.set_input_embeddings(fresh.get_input_embeddings())
    fresh.register_load_state_dict_pre_hook(with_repeated_modules)
    fresh.load_state_dict(state, strict=True)  # the second path is filled in from the first
    for name, value in model.state_dict().items():
        assert torch.equal(fresh.state_dict()[name], value), name


def test_checkpoint_checks_know_the_fsdp_and_deepspeed_layouts(tmp_path, corpus):  # noqa: F811
    import shutil

    from test_training import tiny

    from scratchformer.training import run_training

    options, args = tiny(tmp_path, corpus, max_steps=2, save_steps=2)
    run_training(options, args)
    plain = Path(args.output_dir) / "checkpoint-2"
    assert checkpoint_problems(plain) == []

    fsdp = shutil.copytree(plain, tmp_path / "fsdp" / "checkpoint-2")  # FULL_STATE_DICT: optimizer.bin (+ model)
    (fsdp / "optimizer.pt").rename(fsdp / "optimizer.bin")
    shutil.copy(fsdp / "scheduler.pt", fsdp / "pytorch_model_fsdp.bin")
    assert checkpoint_problems(fsdp) == []
    (fsdp / "optimizer.bin").write_bytes((fsdp / "optimizer.bin").read_bytes()[:100])
    assert checkpoint_problems(fsdp) == ["optimizer.bin is truncated or not a torch.save file"]

    deepspeed = shutil.copytree(plain, tmp_path / "ds" / "checkpoint-2")  # the engine's own folder, named by latest
    (deepspeed / "optimizer.pt").unlink()
    assert checkpoint_problems(deepspeed) == ["no optimizer.pt"]
    (deepspeed / "global_step2").mkdir()
    (deepspeed / "latest").write_text("global_step2")
    assert checkpoint_problems(deepspeed) == []


def test_fsdp_asked_for_where_accelerate_does_not_run_it_is_said(monkeypatch):
    """On CPU accelerate drops an FSDP plugin without a word (its multi-CPU mode is plain DDP): we say so. And a
    half-precision final save is refused under sharding (the Trainer gathers the weights itself)."""
    from types import SimpleNamespace

    from scratchformer.errors import TrainingSetupError
    from scratchformer.training.sharding import prepare_sharding

    model = ScratchformerForConditionalGeneration(ScratchformerConfig(
        vocab_size=50, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16))
    options = SimpleNamespace(save_dtype="float32")
    for fsdp, env in ((True, "false"), (None, "true")):  # --fsdp, or accelerate launch with an FSDP config
        monkeypatch.setenv("ACCELERATE_USE_FSDP", env)
        said = []
        trainer = SimpleNamespace(is_fsdp_enabled=False, is_deepspeed_enabled=False, args=SimpleNamespace(fsdp=fsdp))
        prepare_sharding(options, trainer, model, said.append)
        assert len(said) == 1 and "FSDP was asked for, but accelerate does not run it here" in said[0]
    assert model.model.decoder.embeddings.word_embeddings is not model.model.encoder.embeddings.word_embeddings

    trainer = SimpleNamespace(is_fsdp_enabled=True, is_deepspeed_enabled=False, args=SimpleNamespace(fsdp=True))
    prepare_sharding(options, trainer, model, said.append)
    assert model.model.decoder.embeddings.word_embeddings is model.model.encoder.embeddings.word_embeddings
    with pytest.raises(TrainingSetupError, match="--save-dtype float16 is not supported with FSDP or DeepSpeed"):
        prepare_sharding(SimpleNamespace(save_dtype="float16"), trainer, model, said.append)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(launcher: list[str], words: list[str]) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.run([*launcher, *words], capture_output=True, text=True, timeout=400, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


@pytest.mark.slow
def test_fsdp2_through_the_trainer_on_cpu_resumes_and_saves_a_loadable_model(tmp_path, corpus):  # noqa: F811
    bin_dir = Path(sys.executable).parent
    fsdp_launch = [str(bin_dir / "accelerate"), "launch", "--config_file", str(CONFIGS / "fsdp.yaml"),
                   "--num_processes", "2", "--main_process_port", str(free_port()),
                   str(REPO_ROOT / "tests" / "fsdp_on_cpu.py")]
    words = ["train", "--train-files", str(corpus), "--preset", "tiny", "--tokenizer-vocab-size", "300",
             "--max-length", "32", "--batch-size", "8", "--eval-steps", "0", "--save-steps", "2",
             "--logging-steps", "1", "--learning-rate", "3e-3", "--warmup-steps", "1", "--no-progress-bar",
             "--max-eval-samples", "16"]
    fsdp, ddp = tmp_path / "fsdp", tmp_path / "ddp"
    fsdp_words = [*words, "--output-dir", str(fsdp), "--cache-dir", str(tmp_path / "cache-fsdp")]
    said = launch(fsdp_launch, [*fsdp_words, "--max-steps", "4"])
    fsdp_launch[fsdp_launch.index("--main_process_port") + 1] = str(free_port())
    said += launch(fsdp_launch, [*fsdp_words, "--max-steps", "6", "--resume"])
    assert "FSDP was asked for" not in said and "continuing" in said

    for folder in (fsdp / "checkpoint-4", fsdp / "checkpoint-6"):
        assert (folder / "optimizer.bin").is_file() and (folder / "pytorch_model_fsdp.bin").is_file()  # FSDP's own
        assert checkpoint_problems(folder) == [], folder
    for folder in (fsdp, fsdp / "checkpoint-6"):
        for code in CODE_FILES:  # ours, not torch's FSDP modules (FSDP2 renames the model's class)
            assert (folder / code).read_text() == (MODELS_DIR / code).read_text(), (folder, code)
        assert not list(folder.glob("_fsdp*.py"))
        assert json.loads((folder / "config.json").read_text())["auto_map"]["AutoModelForSeq2SeqLM"] == \
            AUTO_MAP["AutoModelForSeq2SeqLM"]
    model = ScratchformerForConditionalGeneration.from_pretrained(fsdp)
    assert model.config.vocab_size <= 300

    # the same 6 steps as plain data parallel (torchrun, DDP): the same losses and weights
    launch([str(bin_dir / "torchrun"), "--standalone", "--nproc-per-node", "2", "-m", "scratchformer.cli"],
           [*words, "--output-dir", str(ddp), "--cache-dir", str(tmp_path / "cache-ddp"), "--max-steps", "6"])
    sharded, plain = train_losses(fsdp), train_losses(ddp)
    assert sorted(sharded) == list(range(1, 7))
    for step in plain:
        assert sharded[step] == pytest.approx(plain[step], abs=1e-5), step
    a, b = load_file(fsdp / "model.safetensors"), load_file(ddp / "model.safetensors")
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=1e-4, rtol=0, msg=name)
