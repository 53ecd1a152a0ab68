"""docs/benchmarks.md: one table per experiment with each server's figures and the ratio
against Redis measured in the same run."""

BASELINE = "Redis"


def _ops(value):
    return f"{value:,.0f}"


def _latency_cell(latency):
    if not latency:
        return "—"
    if "p99" in latency:
        return f"{latency['p99']:.2f}"
    # YCSB: per operation type.
    return " ".join(f"{op[0]} {figures['p99']:.2f}" for op, figures in latency.items())


def table(rows, servers, label="command"):
    """Markdown lines for rows of `experiments.Row`."""
    names = [s.name for s in servers]
    others = [n for n in names if n != BASELINE]
    started = [s.name for s in servers if s.started_here]
    head = ([label, "options"] + [f"{n} ops/s" for n in names] + [f"{n}/{BASELINE}" for n in others]
            + [f"{n} CPU µs/op" for n in started] + [f"{n} p99 ms" for n in names])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        base = row.results.get(BASELINE)
        cells = [row.name, f"`{row.detail}`" if row.detail else ""]
        cells += [_ops(row.results[n].qps) if n in row.results else "—" for n in names]
        cells += [f"**{row.results[n].qps / base.qps:.2f}**" if base and n in row.results else "—" for n in others]
        cells += [f"{row.results[n].cpu_us:.1f}" if n in row.results and row.results[n].cpu_us is not None else "—"
                  for n in started]
        cells += [_latency_cell(row.results[n].latency) if n in row.results else "—" for n in names]
        lines.append("| " + " | ".join(cells) + " |")
    return lines
