"""LoRA (zerollm.nn.lora) on a whole model, and its round trips with Hugging Face PEFT (zerollm.interop.peft).

The layer pair itself is checked against torch and finite differences in tests/test_layers.py (the "lora"
cases of zerollm.teach.gradcheck). Here: B = 0 changes nothing, merged = unmerged, and zerollm's LoRA model
against transformers + peft on the very same weights: logits, every adapter's gradient, merge_and_unload,
for a GPT-2-layout and a Llama-layout model, both directions.
"""

import json

import numpy as np
import pytest

from zerollm.interop import hf
from zerollm.model.config import GPTConfig
from zerollm.io.errors import ZeroLLMError
from zerollm.model.gpt import GPT
from zerollm.nn.lora import LoRAConfig

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")

LAYOUTS = {
    "gpt2": dict(vocab_size=13, block_size=12, n_layer=2, n_head=2, n_embd=8),
    "llama": dict(vocab_size=13, block_size=12, n_layer=2, n_head=4, n_kv_head=2, n_embd=16, norm="rmsnorm",
                  pos="rope", mlp="swiglu", bias=False, n_inner=24, tie_embeddings=False),
    # Qwen2 (biases on q, k, v) and Qwen3 (QK-norm, a head size of 6 on a width of 16): PEFT's Llama names
    "qwen2": dict(vocab_size=13, block_size=12, n_layer=2, n_head=4, n_kv_head=1, n_embd=16, norm="rmsnorm",
                  pos="rope", mlp="swiglu", bias=False, qkv_bias=True, n_inner=24),
    "qwen3": dict(vocab_size=13, block_size=12, n_layer=2, n_head=4, n_kv_head=2, n_embd=16, norm="rmsnorm",
                  pos="rope", mlp="swiglu", bias=False, qk_norm=True, head_dim=6, n_inner=24, tie_embeddings=False),
}
TARGETS = {"gpt2": ("c_attn", "c_proj", "c_fc"), "llama": ("c_attn", "o_proj", "gate_proj", "up_proj", "down_proj"),
           "qwen2": ("q_proj", "v_proj", "o_proj", "down_proj"),
           "qwen3": ("c_attn", "o_proj", "gate_proj", "up_proj", "down_proj")}
IDX = np.array([[1, 5, 2, 7, 3, 9], [4, 4, 0, 12, 6, 8]])
TGT = np.roll(IDX, -1, axis=1)


def model_of(layout, dtype="float64", targets=None, seed=0):
    """A LoRA model whose weights are float32 numbers (so a float32 export loses nothing) and whose B != 0."""
    model = GPT(GPTConfig(**LAYOUTS[layout], dtype=dtype), seed=seed)
    for p in model.params.values():
        p[...] = p.astype(np.float32)
    model.add_lora(LoRAConfig(r=3, alpha=5.0, targets=targets or TARGETS[layout]), np.random.default_rng(seed))
    rng = np.random.default_rng(seed + 1)
    for name, a in model.lora.adapters.items():
        a[...] = (rng.standard_normal(a.shape) * 0.3).astype(np.float32)
    return model


def peft_twin(model, tmp_path):
    """transformers + peft on zerollm's export of the base and of the adapters, in float64."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM
    base_dir, adapter_dir = tmp_path / "base", tmp_path / "adapter"
    hf.export(model, base_dir)
    from zerollm.interop.peft import save_adapter
    save_adapter(model, adapter_dir, str(base_dir))
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float64, attn_implementation="eager")
    return PeftModel.from_pretrained(base, adapter_dir, is_trainable=True).double()


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_b_zero_gives_exactly_the_base_logits(layout):
    model = GPT(GPTConfig(**LAYOUTS[layout]), seed=3).eval()
    before, _ = model.forward(IDX)
    model.add_lora(LoRAConfig(r=4, targets=TARGETS[layout]), np.random.default_rng(0))
    after, _ = model.forward(IDX)
    assert np.array_equal(before, after)
    assert any(np.abs(a).max() > 0 for name, a in model.lora.adapters.items() if name.endswith("lora_A"))


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_logits_and_every_adapter_gradient_match_peft(layout, tmp_path):
    model = model_of(layout)
    twin = peft_twin(model, tmp_path)
    logits, loss = model.train().forward(IDX, TGT)
    grads = model.backward()
    assert set(grads) == set(model.lora.adapters)            # nothing of the base is trained
    out = twin(input_ids=torch.from_numpy(IDX))
    t_loss = torch.nn.functional.cross_entropy(out.logits.reshape(-1, 13), torch.from_numpy(TGT).reshape(-1))
    t_loss.backward()
    # Llama's RMSNorm computes in float32 inside transformers, even in a float64 model
    tol = 1e-10 if layout == "gpt2" else 1e-6
    assert rel(logits, out.logits.detach().numpy()) < tol
    assert abs(loss - t_loss.item()) < tol
    named = dict(twin.named_parameters())
    from zerollm.interop.peft import _export_modules
    from zerollm.interop.hf.configs import export_family
    for s in model.lora.sites:
        for module, cols in _export_modules(model.config, export_family(model.config), s):
            tA = named[f"base_model.model.{module}.lora_A.default.weight"].grad.numpy().T   # (i, r)
            tB = named[f"base_model.model.{module}.lora_B.default.weight"].grad.numpy().T   # (r, o)
            assert rel(grads[s.name + ".lora_B"][:, cols], tB) < tol * 100, module
            if len(_export_modules(model.config, export_family(model.config), s)) == 1:
                assert rel(grads[s.name + ".lora_A"], tA) < tol * 100, module
    assert all(p.grad is None for n, p in named.items() if "lora_" not in n)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_merged_equals_unmerged_and_peft_merge_and_unload(layout, tmp_path):
    model = model_of(layout)
    merged = model.merged()
    assert merged.lora is None
    a, _ = model.eval().forward(IDX)
    b, _ = merged.forward(IDX)
    assert rel(b, a) < 1e-12
    twin = peft_twin(model, tmp_path).merge_and_unload()
    theirs = {k: v.detach().numpy() for k, v in twin.state_dict().items()}
    from zerollm.interop.hf.exporting import hf_arrays
    _, ours = hf_arrays(GPT(merged.config, init=False).load_state_dict(merged.params))
    for name, value in ours.items():
        assert rel(theirs[name], value) < 1e-6, name


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_an_adapter_made_with_peft_loads_back(layout, tmp_path):
    """peft on the exported base: get_peft_model, B made non-zero, save_pretrained; load_adapter gives its logits."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    from zerollm.interop.peft import load_adapter
    base = GPT(GPTConfig(**LAYOUTS[layout]), seed=5)
    hf.export(base, tmp_path / "base")
    t_base = AutoModelForCausalLM.from_pretrained(tmp_path / "base", attn_implementation="eager")
    targets = ["c_attn", "c_proj"] if layout == "gpt2" else ["q_proj", "v_proj", "down_proj"]
    twin = get_peft_model(t_base, LoraConfig(r=2, lora_alpha=6, target_modules=targets,
                                             fan_in_fan_out=layout == "gpt2"))
    with torch.no_grad():
        for n, p in twin.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)
    twin.save_pretrained(tmp_path / "adapter")
    expected = twin.eval()(input_ids=torch.from_numpy(IDX)).logits.detach().numpy()
    ours, _ = load_adapter(base, tmp_path / "adapter").eval().forward(IDX)
    assert rel(ours, expected) < 1e-4
    assert base.lora.config.r == 2 and base.lora.config.scale == 3.0


def _adapter_dir(tmp_path, **config):
    model = model_of("gpt2", dtype="float32")
    from zerollm.interop.peft import save_adapter
    folder = save_adapter(model, tmp_path / "a", "base")
    file = tmp_path / "a" / "adapter_config.json"
    file.write_text(json.dumps({**json.loads(file.read_text()), **config}))
    return folder


@pytest.mark.parametrize("option, value", [("use_dora", True), ("rank_pattern", {"c_attn": 4}),
                                           ("use_rslora", True), ("modules_to_save", ["ln_f"])])
def test_unsupported_peft_options_are_refused_by_name(tmp_path, option, value):
    from zerollm.interop.peft import load_adapter
    folder = _adapter_dir(tmp_path, **{option: value})
    with pytest.raises(ZeroLLMError, match=option):
        load_adapter(GPT(GPTConfig(**LAYOUTS["gpt2"]), seed=0), folder)


def test_an_adapter_for_another_base_is_refused(tmp_path):
    from zerollm.interop.peft import load_adapter
    folder = _adapter_dir(tmp_path)
    with pytest.raises(ZeroLLMError, match="another base"):
        load_adapter(GPT(GPTConfig(**LAYOUTS["gpt2"]), seed=1), folder)          # other weights, same shapes
    with pytest.raises(ZeroLLMError, match="another base"):
        load_adapter(GPT(GPTConfig(**{**LAYOUTS["gpt2"], "n_embd": 12, "n_head": 2}), seed=0), folder)


@pytest.mark.parametrize("targets, fragment", [(("nope",), "matches no linear layer"),
                                               (("c_attn", "q_proj"), "same columns")])
def test_bad_targets_are_clear_errors(targets, fragment):
    model = GPT(GPTConfig(**LAYOUTS["llama"]), seed=0)
    with pytest.raises(ZeroLLMError, match=fragment):
        model.add_lora(LoRAConfig(r=2, targets=targets), np.random.default_rng(0))


@pytest.mark.parametrize("field, value, words", [
    ("lora_alpha", "x", "lora_alpha must be a number, got 'x'"),
    ("r", [4], "r must be a whole number >= 1, got [4]"),
    ("lora_dropout", [8], "lora_dropout must be a number, got [8]"),
    ("r", "4", "r must be a whole number >= 1, got '4'"),
    ("r", True, "r must be a whole number >= 1, got True"),
    ("r", 4.7, "r must be a whole number >= 1, got 4.7"),
    ("r", 0, "r must be a whole number >= 1, got 0"),
    ("lora_alpha", -1, "lora_alpha must be a number > 0"),
    ("lora_dropout", 1.5, "lora_dropout must be in [0, 1)"),
])
def test_a_config_value_of_the_wrong_type_names_the_file_and_the_field(tmp_path, field, value, words):
    from zerollm.interop.peft import load_adapter
    folder = _adapter_dir(tmp_path, **{field: value})
    with pytest.raises(ZeroLLMError) as err:
        load_adapter(GPT(GPTConfig(**LAYOUTS["gpt2"]), seed=0), folder)
    assert str(err.value).startswith(f"{folder}/adapter_config.json: {words}"), err.value


def test_r_written_as_a_float_with_no_fraction_loads(tmp_path):
    from zerollm.interop.peft import load_adapter
    model = load_adapter(GPT(GPTConfig(**LAYOUTS["gpt2"]), seed=0), _adapter_dir(tmp_path, r=3.0))
    assert model.lora.config.r == 3 and isinstance(model.lora.config.r, int)


@pytest.mark.parametrize("r", [4, 10**6, 10**9])
def test_an_r_the_tensors_do_not_have_is_refused_before_anything_is_allocated(tmp_path, monkeypatch, r):
    """The adapter's tensors are rank 3: an r of 10^9 in the config used to allocate the adapters first."""
    from zerollm.interop.peft import load_adapter
    folder = _adapter_dir(tmp_path, r=r)

    def allocate(self, config, rng):
        raise AssertionError(f"add_lora was called with r={config.r} before the shapes were checked")

    monkeypatch.setattr(GPT, "add_lora", allocate)
    with pytest.raises(ZeroLLMError, match=rf"has shapes \(3, 8\), \(24, 3\) but this model needs \({r}, 8\)"):
        load_adapter(GPT(GPTConfig(**LAYOUTS["gpt2"]), seed=0), folder)


def test_an_adapter_without_weights_is_damaged_not_a_flag_error(tmp_path):
    from zerollm.interop.peft import WEIGHTS, load_adapter
    from zerollm.io.safetensors import save_file
    folder = _adapter_dir(tmp_path)
    save_file({}, tmp_path / "a" / WEIGHTS)
    with pytest.raises(ZeroLLMError, match="holds no lora_A / lora_B weights; the adapter is damaged"):
        load_adapter(GPT(GPTConfig(**LAYOUTS["gpt2"]), seed=0), folder)
