"""Per-model default sampling parameters: what a request that names no temperature / top_p gets.

As vLLM applies a model's ``generation_config``, each parameter a request leaves out (or sends as
null) takes the served model's default; an explicit value always wins, temperature 0 included.
``aotx serve`` / ``aotx boot`` ``--default-temperature`` / ``--default-top-p`` override the table.
The defaults are shown on the model object of ``/v1/models`` (``sampling_defaults``).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SamplingDefaults:
    temperature: float = 1.0
    top_p: float = 1.0

    def json(self) -> dict:
        return {"temperature": self.temperature, "top_p": self.top_p}


# HuggingFaceTB/SmolLM2-135M-Instruct, model card ("How to use"): generate(..., temperature=0.2,
# top_p=0.9, do_sample=True). At 1.0 the 135M model's answers are noise (FIELD-NOTES, issue 14).
MODEL_DEFAULTS = {"smollm2-135m-instruct": SamplingDefaults(temperature=0.2, top_p=0.9)}
FALLBACK = SamplingDefaults()


def defaults_for(model_id: str, temperature: float | None = None, top_p: float | None = None) -> SamplingDefaults:
    """The model's table entry (FALLBACK: 1.0 / 1.0 for a model without one), overridden where given."""
    base = MODEL_DEFAULTS.get(model_id, FALLBACK)
    return SamplingDefaults(base.temperature if temperature is None else float(temperature),
                            base.top_p if top_p is None else float(top_p))


def resolved(defaults: SamplingDefaults, temperature: float | None, top_p: float | None) -> tuple[float, float]:
    """(temperature, top_p): each one given wins, an absent one (None) is the default's."""
    return (defaults.temperature if temperature is None else float(temperature),
            defaults.top_p if top_p is None else float(top_p))
