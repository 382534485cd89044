"""Prometheus text exposition and its JSON twin (`/v1/stats`), from one snapshot."""
from __future__ import annotations

from aotx.route_metrics import LANES, SURFACES


def _histogram(lines: list[str], name: str, help_: str, snap) -> None:
    lines += [f"# HELP {name} {help_}", f"# TYPE {name} histogram"]
    for bound, count in zip(snap.buckets, snap.counts):
        lines.append(f'{name}_bucket{{le="{bound}"}} {count}')
    lines.append(f'{name}_bucket{{le="+Inf"}} {snap.count}')
    lines.append(f"{name}_sum {snap.sum:.6f}")
    lines.append(f"{name}_count {snap.count}")


def _simple(lines: list[str], name: str, kind: str, help_: str, value) -> None:
    lines += [f"# HELP {name} {help_}", f"# TYPE {name} {kind}", f"{name} {value}"]


def render_prometheus(service) -> str:
    routes = service.routes.snapshot()
    stats = service.engine.stats()
    lines = ["# HELP aotx_route_requests_total Requests a wire surface handed to the engine, by lane.",
             "# TYPE aotx_route_requests_total counter"]
    for s in SURFACES:
        for lane in LANES:
            lines.append(f'aotx_route_requests_total{{surface="{s}",lane="{lane}"}} {routes[(s, lane)]}')
    _simple(lines, "aotx_prompt_tokens_total", "counter", "Prompt tokens run through the model.",
            stats.prompt_tokens_total)
    _simple(lines, "aotx_generation_tokens_total", "counter", "Tokens sampled.",
            stats.generation_tokens_total)
    lines += ["# HELP aotx_requests_finished_total Finished requests by finish reason.",
              "# TYPE aotx_requests_finished_total counter"]
    for reason, n in sorted(stats.requests_finished_total.items()):
        lines.append(f'aotx_requests_finished_total{{reason="{reason}"}} {n}')
    _simple(lines, "aotx_queue_depth", "gauge", "Requests waiting for admission.", stats.queue_depth)
    _simple(lines, "aotx_running_requests", "gauge", "Requests being decoded.", stats.running)
    _simple(lines, "aotx_kv_pages_in_use", "gauge", "KV pages owned by sequences.", stats.kv_pages_in_use)
    _simple(lines, "aotx_kv_pages_total", "gauge", "KV pages in the pool.", stats.kv_pages_total)
    _simple(lines, "aotx_batch_width", "gauge", "Decode rows in the latest step.", stats.last_batch_width)
    _simple(lines, "aotx_batch_width_max", "gauge", "Most decode rows in one step.", stats.max_batch_width)
    _simple(lines, "aotx_engine_steps_total", "counter", "Engine steps run.", stats.steps_total)
    _histogram(lines, "aotx_time_to_first_token_seconds", "Submission to first sampled token.",
               stats.time_to_first_token)
    _histogram(lines, "aotx_inter_token_latency_seconds", "Time between a request's tokens.",
               stats.inter_token_latency)
    return "\n".join(lines) + "\n"


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
