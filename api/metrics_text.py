"""The JSON figures of `/v1/stats` (the Prometheus exposition of the same figures: api.metrics_registry)."""
from __future__ import annotations

from aotx.route_metrics import LANES, SURFACES


def _hist_doc(snap) -> dict:
    return {"buckets": [{"le": b, "count": c} for b, c in zip(snap.buckets, snap.counts)],
            "sum": snap.sum, "count": snap.count}


def stats_document(service) -> dict:
    routes = service.routes.snapshot()
    stats = service.engine.stats()
    return {
        "model": service.model_id,
        "backend": service.backend_name,
        "routes": {s: {lane: routes[(s, lane)] for lane in LANES} for s in SURFACES},
        "engine": {
            "queue_depth": stats.queue_depth, "running": stats.running,
            "kv_pages_in_use": stats.kv_pages_in_use, "kv_pages_total": stats.kv_pages_total,
            "prompt_tokens_total": stats.prompt_tokens_total,
            "generation_tokens_total": stats.generation_tokens_total,
            "finished": dict(stats.requests_finished_total),
            "last_batch_width": stats.last_batch_width, "max_batch_width": stats.max_batch_width,
            "steps_total": stats.steps_total,
            "decode_rows_total": stats.decode_rows_total, "decode_steps_total": stats.decode_steps_total,
            "device_busy_seconds": stats.device_busy_s, "device_idle_seconds": stats.device_idle_s,
            "time_to_first_token_seconds": _hist_doc(stats.time_to_first_token),
            "inter_token_latency_seconds": _hist_doc(stats.inter_token_latency),
        },
    }
