"""The loss covers the completion only: checked on the batches TRL's own pipeline builds for our trainer."""

import pytest

from nlac_core.training import SFTRunConfig, to_examples
from nlac_core.training.sft import make_trainer
from tests.nlac_core.sft_helpers import records

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trainer(tmp_path_factory, embedded_model_dir):
    trainer, _ = make_trainer(to_examples(records()), embedded_model_dir, tmp_path_factory.mktemp("state"),
                              SFTRunConfig(max_steps=1, max_length=256))
    return trainer


def test_it_masks_every_prompt_token_and_keeps_the_whole_completion(trainer):
    tokenizer = trainer.processing_class
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(len(records()))])
    for row, record in enumerate(records()):
        ids, labels, mask = batch["input_ids"][row], batch["labels"][row], batch["attention_mask"][row]
        trained = labels != -100
        first = int(trained.nonzero()[0])
        # everything before the completion, the chat template's assistant header included, is masked
        assert tokenizer.decode(ids[:first]).endswith("<|im_start|>assistant\n")
        assert not trained[:first].any()
        # the completion and its end-of-turn token are trained, contiguously; padding is not
        completion = record["completion"][0]["content"]
        assert tokenizer.decode(labels[trained]) == completion + "<|im_end|>\n"
        assert trained.sum() == (mask == 1).sum() - first
        assert (labels[mask == 0] == -100).all()


def test_it_drops_the_provenance_before_tokenizing(trainer):
    assert set(trainer.train_dataset.column_names) <= {"input_ids", "labels", "prompt", "completion"}
