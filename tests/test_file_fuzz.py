"""Files read back from disk, mutated at random: every reader answers with a ZeroLLMError or a value,
never another exception. A mutation sets one field to a JSON value of another kind (or an absurd one),
deletes it, or adds an unknown field; hypothesis draws them and shrinks any failure to the smallest."""

import json
from dataclasses import asdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zerollm.model.config import GPTConfig
from zerollm.io.errors import ZeroLLMError
from zerollm.interop.hf.configs import config_to_hf, hf_to_config
from zerollm.tokenizers import BPETokenizer, ByteTokenizer, CharTokenizer, load_tokenizer
from zerollm.training.trainer import TrainConfig
from zerollm.io.validate import dataclass_from_dict, generator_from_state

EXAMPLES = 150
JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.sampled_from([0, -1, 1, 2 ** 31, 2 ** 63]),
              st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=6)


def mutations(base):
    """A strategy of copies of the dict ``base`` with one or two fields changed, removed or added."""
    keys = sorted(base)

    @st.composite
    def mutate(draw):
        data = json.loads(json.dumps(base))
        for _ in range(draw(st.integers(1, 2))):
            action = draw(st.sampled_from(["set", "delete", "add"]))
            key = draw(st.sampled_from(keys))
            if action == "set":
                data[key] = draw(JSON_VALUES)
            elif action == "delete":
                data.pop(key, None)
            else:
                data[draw(st.text(min_size=1, max_size=6))] = draw(JSON_VALUES)
        return data
    return mutate()


def only_clear_errors(fn, *args):
    try:
        fn(*args)
    except ZeroLLMError:
        pass


FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                             HealthCheck.too_slow])
SMALL = GPTConfig(vocab_size=50, block_size=16, n_layer=1, n_head=2, n_embd=8)


@FUZZ
@given(data=mutations(SMALL.to_dict()))
def test_checkpoint_model_section(data):
    only_clear_errors(dataclass_from_dict, GPTConfig, data, "config.json", "model")


@FUZZ
@given(data=mutations(asdict(TrainConfig())))
def test_checkpoint_train_section(data):
    only_clear_errors(dataclass_from_dict, TrainConfig, data, "config.json", "train")


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_hf_config(family):
    cfg = SMALL if family == "gpt2" else GPTConfig(**{**SMALL.to_dict(), "norm": "rmsnorm", "pos": "rope",
                                                      "mlp": "swiglu", "n_inner": 24, "tie_embeddings": False})

    @FUZZ
    @given(data=mutations(config_to_hf(cfg, family)))
    def fuzz(data):
        only_clear_errors(hf_to_config, data, "config.json")
    fuzz()


@pytest.mark.parametrize("tokenizer", [ByteTokenizer(), CharTokenizer.train("hello world"),
                                       BPETokenizer.train("hello hello world " * 5, 262)],
                         ids=["byte", "char", "bpe"])
def test_tokenizer_file(tokenizer, tmp_path):
    path = tmp_path / "tokenizer.json"

    @FUZZ
    @given(data=mutations(tokenizer.to_dict()))
    def fuzz(data):
        path.write_text(json.dumps(data))
        only_clear_errors(load_tokenizer, path)
    fuzz()


@FUZZ
@given(data=mutations({"bit_generator": "PCG64", "state": {"state": 1, "inc": 3}, "has_uint32": 0,
                       "uinteger": 0}))
def test_rng_state(data):
    only_clear_errors(generator_from_state, data, "rng.json")
