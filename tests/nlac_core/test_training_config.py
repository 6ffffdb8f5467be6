import pytest

from nlac_core.training import SFTRunConfig


def test_it_round_trips_a_config_through_json_types():
    config = SFTRunConfig(learning_rate=1e-4, max_steps=10, lora=True, lora_target_modules=["q_proj", "v_proj"])
    data = config.to_dict()
    assert data["lora_target_modules"] == ["q_proj", "v_proj"]
    assert SFTRunConfig.from_dict(data) == config
    assert SFTRunConfig.from_dict(SFTRunConfig().to_dict()) == SFTRunConfig()


@pytest.mark.parametrize("changes, field", [
    ({"learning_rate": 0}, "learning_rate"),
    ({"learning_rate": float("nan")}, "learning_rate"),
    ({"max_steps": 0}, "max_steps"),
    ({"per_device_batch_size": 1.5}, "per_device_batch_size"),
    ({"per_device_batch_size": True}, "per_device_batch_size"),
    ({"max_length": 8}, "max_length"),
    ({"lora_dropout": 1.0}, "lora_dropout"),
    ({"warmup_ratio": -0.1}, "warmup_ratio"),
    ({"lr_scheduler": "warm-restarts"}, "lr_scheduler"),
    ({"lora_target_modules": []}, "lora_target_modules"),
    ({"bf16": "yes"}, "bf16"),
])
def test_it_names_the_field_of_a_bad_value(changes, field):
    with pytest.raises(ValueError, match=rf"SFTRunConfig\.{field}:"):
        SFTRunConfig.from_dict(changes)


def test_it_rejects_an_unknown_field_instead_of_training_with_a_default():
    with pytest.raises(ValueError, match="unknown field.*'learnig_rate'"):
        SFTRunConfig.from_dict({"learnig_rate": 1e-4})
    with pytest.raises(ValueError, match="expected a JSON object"):
        SFTRunConfig.from_dict([1, 2])


def test_it_replaces_fields_with_validation():
    assert SFTRunConfig().replace(max_steps=3).max_steps == 3
    with pytest.raises(ValueError, match="epochs"):
        SFTRunConfig().replace(epochs=-1)
