"""LoRA adapters to and from Hugging Face PEFT's adapter directories.

    ADAPTER/adapter_config.json          {"peft_type": "LORA", "r", "lora_alpha", "target_modules", ...}
    ADAPTER/adapter_model.safetensors    base_model.model.<module>.lora_A.weight (r, in)
                                         base_model.model.<module>.lora_B.weight (out, r)

PEFT's lora_A and lora_B are nn.Linear weights, stored (out, in): ours are A (in, r) and B (r, out), so
each is the other's transpose. GPT-2's Conv1D stores its base weight (in, out), which PEFT is told with
``fan_in_fan_out: true`` (only the base weight is affected). zerollm fuses q/k/v into c_attn and Llama's
gate/up into c_fc; an adapter on the fused c_attn becomes three PEFT adapters q_proj, k_proj, v_proj that
share A, each with its columns of B: x A B_q, x A B_k, x A B_v are exactly the three parts of x A B.

modules_to_save (whole modules that train beside the adapters; zerollm's --lora-modules-to-save) are the
token table and the head: PEFT keeps a trained copy of each and saves it as base_model.model.<module>.weight
(transformer.wte / model.embed_tokens, lm_head). PEFT's copy of a tied table unties it (the head keeps the
base's), so a tied zerollm model writes its one trained table twice, as the token table and as lm_head, and
reads back only an adapter whose two copies are equal. The adapter's base digest leaves those tables out:
the adapter replaces them, so it fits any base that differs from its own only there.

Only what zerollm implements is read: options like DoRA, rsLoRA, rank/alpha patterns, LoRA biases or
modules_to_save other than those tables are refused by name rather than silently ignored.
"""

import math
import os

import numpy as np

from zerollm.training.checkpoint import weights_digest
from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import read_json, require_regular, write_json
from zerollm.interop.hf.configs import export_family
from zerollm.interop.hf.exporting import hf_arrays, repeat_kv
from zerollm.interop.hf.weights import PREFIX
from zerollm.nn.lora import SAVABLE, LoRAConfig, sites
from zerollm.io.safetensors import load_file, load_metadata, save_file
from zerollm.io.validate import require_finite

CONFIG, WEIGHTS = "adapter_config.json", "adapter_model.safetensors"
_KEY = "base_model.model."
# PEFT options zerollm does not implement -> the value that means "off"
_UNSUPPORTED = {"use_dora": False, "use_rslora": False, "rank_pattern": {}, "alpha_pattern": {}, "bias": "none",
                "layers_to_transform": None, "layers_pattern": None, "lora_bias": False,
                "target_parameters": None, "exclude_modules": None, "megatron_config": None, "use_qalora": False,
                "trainable_token_indices": None, "layer_replication": None}
_FIX = "write the value PeftModel.save_pretrained wrote, or save the adapter again"


# ----------------------------------------------------------------------------
# the module names on each side

_LLAMA = {"attn.q_proj": "self_attn.q_proj", "attn.k_proj": "self_attn.k_proj", "attn.v_proj": "self_attn.v_proj",
          "attn.c_proj": "self_attn.o_proj", "mlp.gate_proj": "mlp.gate_proj", "mlp.up_proj": "mlp.up_proj",
          "mlp.c_proj": "mlp.down_proj"}
_GPT2 = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")
_TABLES = {"gpt2": {"wte.weight": "wte"}, "llama": {"wte.weight": "embed_tokens"}}   # the token table's module


def _table_module(family, param):
    """The Hugging Face module of a table zerollm trains whole ("wte.weight" -> "transformer.wte")."""
    if param == "lm_head.weight":
        return "lm_head"
    return PREFIX[family] + _TABLES.get(family, _TABLES["llama"])[param]


def _saved_tables(model, family):
    """{Hugging Face module: float32 array} of the tables ``model``'s LoRA trains whole (modules_to_save); a
    tied table twice, as the token table and as lm_head (PEFT's copy of the token table unties the head)."""
    out = {_table_module(family, p): model.params[p].astype(np.float32) for p in model.lora.saved}
    if model.config.tie_embeddings and "wte.weight" in model.lora.saved:
        out["lm_head"] = out[_table_module(family, "wte.weight")]
    return out


def _module(family, site_name):
    """The Hugging Face module of one of our sites ("h.0.attn.q_proj" -> "model.layers.0.self_attn.q_proj"),
    or None when that layout has no module for it alone."""
    _, i, rest = site_name.split(".", 2)
    if family == "gpt2":
        return f"{PREFIX[family]}h.{i}.{rest}" if rest in _GPT2 else None
    return f"{PREFIX[family]}layers.{i}.{_LLAMA[rest]}" if rest in _LLAMA else None


def _export_modules(cfg, family, site):
    """[(Hugging Face module, its columns of the site's output)]: one module, or a fused site's parts."""
    own = _module(family, site.name)
    if own is not None:
        return [(own, slice(0, site.n_out))]
    parts = [p for p in sites(cfg) if p.linear == site.linear and p.name != site.name
             and site.cols.start <= p.cols.start and p.cols.stop <= site.cols.stop]
    mods = [(_module(family, p.name), slice(p.cols.start - site.cols.start, p.cols.stop - site.cols.start))
            for p in parts]
    return mods if mods and all(m for m, _ in mods) else []


# ----------------------------------------------------------------------------
# writing

def save_adapter(model, path, base_path=None):
    """Write ``model``'s adapters as a PEFT adapter directory at ``path`` (a folder being filled)."""
    lora, cfg = model.lora, model.config
    family = export_family(cfg)
    tensors, targets = {}, []
    for s in lora.sites:
        modules = _export_modules(cfg, family, s)
        if not modules:
            raise ZeroLLMError(f"the {family} layout has no PEFT module for the adapter on {s.name}; train the "
                               "GPT-2 layout with --lora-targets c_attn,c_proj,c_fc")
        A, B = lora.adapters[s.name + ".lora_A"], lora.adapters[s.name + ".lora_B"]   # (i, r), (r, o)
        if family == "gpt2" and s.name.endswith("attn.c_attn") and cfg.n_kv_head != cfg.n_head:
            B = repeat_kv(B, cfg.n_head, cfg.n_kv_head, cfg.head_size)               # as the export repeats kv
        for module, cols in modules:
            tensors[f"{_KEY}{module}.lora_A.weight"] = np.ascontiguousarray(A.T, np.float32)
            tensors[f"{_KEY}{module}.lora_B.weight"] = np.ascontiguousarray(B[:, cols].T, np.float32)
            targets.append(module)
    tables = _saved_tables(model, family)
    tensors.update({f"{_KEY}{module}.weight": np.ascontiguousarray(a) for module, a in tables.items()})
    c = lora.config
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": c.r, "lora_alpha": c.alpha,
              "lora_dropout": c.dropout, "target_modules": targets, "fan_in_fan_out": family == "gpt2",
              "bias": "none", "inference_mode": True, "init_lora_weights": True, "use_rslora": False,
              "use_dora": False, "modules_to_save": [m.rsplit(".", 1)[-1] for m in tables] or None,
              "rank_pattern": {}, "alpha_pattern": {}, "base_model_name_or_path": base_path}
    if tables and cfg.tie_embeddings:
        config["ensure_weight_tying"] = True     # PEFT then keeps its two copies of the table tied (else it warns)
    os.makedirs(path, exist_ok=True)
    write_json(os.path.join(path, CONFIG), config)
    save_file(tensors, os.path.join(path, WEIGHTS),
              {"format": "pt", "zerollm.base_digest": base_digest(model, skip=tables)})
    return path


def base_digest(model, skip=()):
    """The digest of the base as transformers sees it (the exported arrays): the same for the zerollm model an
    adapter was trained on and for that model exported and loaded back. ``skip``: the modules the adapter
    brings whole (modules_to_save), left out: any base that differs only there fits the adapter."""
    arrays = hf_arrays(model)[1]
    return weights_digest({k: a for k, a in arrays.items() if k.removesuffix(".weight") not in skip})


# ----------------------------------------------------------------------------
# reading

def read_config(path):
    """adapter_config.json, checked: a LoRA adapter without options zerollm does not implement."""
    file = require_regular(os.path.join(path, CONFIG), "PEFT adapter config")
    if not os.path.isfile(file):
        raise ZeroLLMError(f"--adapter {path}: no {CONFIG}; give a PEFT LoRA adapter directory "
                           "(what PeftModel.save_pretrained writes)")
    config = read_json(file, what="PEFT adapter config")
    if not isinstance(config, dict) or config.get("peft_type") != "LORA":
        raise ZeroLLMError(f"{file}: peft_type is {config.get('peft_type') if isinstance(config, dict) else None!r}; "
                           "zerollm reads LoRA adapters only")
    bad = [k for k, off in _UNSUPPORTED.items() if config.get(k, off) not in (off, None, {}, False, "none")
           or (k == "bias" and config.get(k, "none") != "none")]
    if bad:
        raise ZeroLLMError(f"{file}: PEFT options zerollm does not implement: {', '.join(bad)}; train the adapter "
                           "without them")
    return config


def lora_settings(config, file):
    """(r, alpha, dropout) of an adapter_config.json, checked: a value of the wrong type is an error naming
    the file and the field, not a traceback. Missing fields take PEFT's defaults (r=8, lora_alpha=8,
    lora_dropout=0). r may be written 4 or 4.0, never "4", true or 4.7.

    >>> lora_settings({"r": 4.0, "lora_alpha": 8}, "a/adapter_config.json")
    (4, 8.0, 0.0)
    >>> lora_settings({"r": 4.7}, "a/adapter_config.json")
    Traceback (most recent call last):
    zerollm.io.errors.ZeroLLMError: a/adapter_config.json: r must be a whole number >= 1, got 4.7; ...
    """
    def number(key, default, want="a number"):
        value = config.get(key, default)
        if value is None and key == "lora_dropout":
            return 0.0
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ZeroLLMError(f"{file}: {key} must be {want}, got {value!r}; {_FIX}")
        return value

    whole = "a whole number >= 1"
    r = number("r", 8, whole)
    if r != int(r) or r < 1:
        raise ZeroLLMError(f"{file}: r must be {whole}, got {r!r}; {_FIX}")
    alpha, dropout = float(number("lora_alpha", 8)), float(number("lora_dropout", 0.0))
    if alpha <= 0:
        raise ZeroLLMError(f"{file}: lora_alpha must be a number > 0, got {alpha!r}; {_FIX}")
    if not 0 <= dropout < 1:
        raise ZeroLLMError(f"{file}: lora_dropout must be in [0, 1), got {dropout!r}; {_FIX}")
    return int(r), alpha, dropout


def load_adapter(model, path):
    """``model`` with the PEFT adapter at ``path`` attached as zerollm LoRA adapters (in place); returns it."""
    path = os.fspath(path)
    config = read_config(path)
    r, alpha, dropout = lora_settings(config, os.path.join(path, CONFIG))
    family = export_family(model.config)
    saving = _modules_to_save(config, os.path.join(path, CONFIG))
    weights = require_regular(os.path.join(path, WEIGHTS), "PEFT adapter's weights")
    if not os.path.isfile(weights):
        raise ZeroLLMError(f"--adapter {path}: no {WEIGHTS} (zerollm reads safetensors adapters only)")
    digest = load_metadata(weights).get("zerollm.base_digest")
    skip = {_table_module(family, SAVABLE[m]) for m in saving}
    if digest is not None and digest != base_digest(model, skip=skip):
        raise ZeroLLMError(f"--adapter {path} was made for another base model (its base digest differs); "
                           "use the model it was trained on")
    tensors = load_file(weights)
    require_finite(tensors, weights, np.float32)           # before _found_modules casts them to float32
    tables = _found_tables(tensors, model, saving, weights)
    found = _found_modules(tensors, weights)
    site_of = {_module(family, s.name): s for s in sites(model.config) if _module(family, s.name)}
    unknown = sorted(set(found) - set(site_of))
    if unknown:
        raise ZeroLLMError(f"--adapter {path} adapts modules this model does not have ({', '.join(unknown[:4])}); "
                           "it was made for another base model")
    _check_shapes(found, site_of, r, path)                 # before add_lora allocates r (in + out) per module
    model.add_lora(LoRAConfig(r=r, alpha=alpha, dropout=dropout, targets=tuple(site_of[m].name for m in found),
                              modules_to_save=tuple(m for m in ("wte", "lm_head") if m + ".weight" in tables)),
                   np.random.default_rng(0))
    for param, table in tables.items():
        model.params[param][...] = table
    for module, (A, B) in found.items():
        name = site_of[module].name
        model.lora.adapters[name + ".lora_A"][...] = A.T
        model.lora.adapters[name + ".lora_B"][...] = B.T
    module_of = {site_of[m].name: m for m in found}
    model.lora.check_fold(model.params, weights, lambda s: f"{_KEY}{module_of[s.name]} (lora_A, lora_B)")
    return model


def _check_shapes(found, site_of, r, path):
    """Every lora_A is (r, in) and every lora_B (out, r) for its module and the config's r: checked before
    anything is allocated, so an r the tensors do not have (1e9 in a damaged config) is this error, not
    gigabytes of adapters made first."""
    for module, (A, B) in found.items():
        site = site_of[module]
        need_A, need_B = (r, site.n_in), (site.n_out, r)
        if A.shape != need_A or B.shape != need_B:
            raise ZeroLLMError(f"--adapter {path}: {module} has shapes {A.shape}, {B.shape} but this model needs "
                               f"{need_A}, {need_B} (r={r} in {CONFIG}); it was made for another base model, or "
                               f"{CONFIG} does not belong to {WEIGHTS}")


def _modules_to_save(config, file):
    """zerollm's names ("wte", "lm_head") of an adapter_config.json's modules_to_save; an error naming any
    module zerollm cannot train whole. PEFT matches a module whose name ends with the entry, so
    "transformer.wte" and "wte" are the same module."""
    listed = config.get("modules_to_save") or []
    if not isinstance(listed, list) or not all(isinstance(m, str) for m in listed):
        raise ZeroLLMError(f"{file}: modules_to_save must be a list of module names, got {listed!r}; {_FIX}")
    names = [m.rsplit(".", 1)[-1] for m in listed]
    bad = [m for m, n in zip(listed, names) if n not in SAVABLE]
    if bad:
        raise ZeroLLMError(f"{file}: modules_to_save names {', '.join(bad)}; zerollm trains only the token table "
                           "(wte, embed_tokens) and lm_head whole: train the adapter without the others")
    return tuple(dict.fromkeys(names))


def _found_tables(tensors, model, saving, where):
    """{zerollm parameter: array in the model's dtype} of the tables the adapter brings whole (``saving``,
    from modules_to_save), taken out of ``tensors``. On a tied model the token table and lm_head are one array:
    an adapter must bring the two equal (as save_adapter writes them), since PEFT's separate copies may differ."""
    tables = {}
    for key in [k for k in tensors if k.endswith(".weight") and ".lora_" not in k]:
        module = key.removeprefix(_KEY).removesuffix(".weight").rsplit(".", 1)[-1]
        if module in saving:
            tables.setdefault(SAVABLE[module], []).append(tensors.pop(key))
    missing = [m for m in saving if SAVABLE[m] not in tables]
    if missing:
        raise ZeroLLMError(f"{where}: modules_to_save lists {missing[0]} but the adapter holds no weights for it; "
                           "the adapter is damaged")
    if model.config.tie_embeddings and tables:
        both = tables.pop("wte.weight", []) + tables.pop("lm_head.weight", [])
        if len(both) != 2 or not np.array_equal(both[0], both[1]):
            raise ZeroLLMError(f"{where}: this model ties lm_head to the token table (one array), but the adapter "
                               "trains them apart; use a base with an untied head, or train the adapter with "
                               "modules_to_save holding the same table as the token table and lm_head")
        tables["wte.weight"] = both[:1]
    out = {}
    for param, (table, *more) in tables.items():
        shape = model.params[param].shape
        if more or table.shape != shape:
            raise ZeroLLMError(f"{where}: its {param.split('.')[0]} is {table.shape}, but this model's is {shape} "
                               "(one table); it was made for another base model")
        out[param] = table.astype(model.params[param].dtype)
    return out


def _found_modules(tensors, where):
    """{HF module name: (lora_A (r, in), lora_B (out, r))} from the adapter's tensors."""
    found = {}
    for key, a in tensors.items():
        module, _, part = key.removeprefix(_KEY).rpartition(".lora_")
        if part not in ("A.weight", "B.weight", "A.default.weight", "B.default.weight"):
            raise ZeroLLMError(f"{where}: unexpected tensor {key!r} (only lora_A / lora_B weights are supported)")
        found.setdefault(module, [None, None])["AB".index(part[0])] = a.astype(np.float32)
    if not found:
        raise ZeroLLMError(f"{where} holds no lora_A / lora_B weights; the adapter is damaged")
    half = [m for m, (A, B) in found.items() if A is None or B is None]
    if half:
        raise ZeroLLMError(f"{where}: {half[0]} has only one of lora_A / lora_B; the adapter is damaged")
    return {m: tuple(ab) for m, ab in found.items()}
