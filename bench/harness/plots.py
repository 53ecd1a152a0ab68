"""PNG plots for docs/benchmarks.md, drawn with matplotlib (installed by bench/compare)."""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FormatStrFormatter  # noqa: E402

COLORS = {"Shale": "#b5562f", "Redis": "#4a6fa5"}


def _color(name, index):
    return COLORS.get(name, f"C{index + 2}")


def throughput_over_time(series, path, title, unit="ops/s"):
    """`series`: [(panel title, {server: [count per second...]})], one panel each. The last
    count covers a partial second and is left out."""
    fig, axes = plt.subplots(len(series), 1, figsize=(9, 2.6 * len(series)), squeeze=False)
    for ax, (panel, by_server) in zip(axes[:, 0], series):
        for i, (server, values) in enumerate(by_server.items()):
            values = values[:-1] if len(values) > 1 else values
            ax.plot(range(1, len(values) + 1), values, label=server, color=_color(server, i), linewidth=1.5)
        ax.set_title(panel, fontsize=10)
        ax.set_ylabel(unit)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    axes[-1, 0].set_xlabel("second")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def latency_percentiles(rows, path):
    """`rows`: [(label, {server: {p50, p90, p99, p999}})]; grouped bars on a log scale."""
    quantiles = [("p50", "p50"), ("p90", "p90"), ("p99", "p99"), ("p999", "p99.9")]
    fig, axes = plt.subplots(1, len(rows), figsize=(3.2 * len(rows), 3.6), squeeze=False)
    for ax, (label, by_server) in zip(axes[0], rows):
        width = 0.8 / max(len(by_server), 1)
        for i, (server, latency) in enumerate(by_server.items()):
            xs = [q + i * width for q in range(len(quantiles))]
            ax.bar(xs, [latency[key] for key, _ in quantiles], width, label=server, color=_color(server, i))
        ax.set_xticks([q + 0.4 - width / 2 for q in range(len(quantiles))], [name for _, name in quantiles])
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
        ax.tick_params(axis="y", which="minor", labelsize=7)
        ax.set_title(label, fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    axes[0, 0].set_ylabel("latency (ms)")
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def ratios(rows, path, baseline="Redis"):
    """`rows`: [(label, {server: qps})]; horizontal bars of each server's qps over the baseline's."""
    others = sorted({name for _, by in rows for name in by if name != baseline}, key=lambda n: n != "Shale")
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(rows) + 1.2))
    height = 0.8 / max(len(others), 1)
    for i, server in enumerate(others):
        ys = [r + i * height for r in range(len(rows))]
        values = [by.get(server, 0) / by[baseline] if by.get(baseline) else 0 for _, by in rows]
        ax.barh(ys, values, height, label=f"{server}/{baseline}", color=_color(server, i))
    ax.set_yticks([r + 0.4 - height / 2 for r in range(len(rows))], [label for label, _ in rows], fontsize=8)
    ax.invert_yaxis()
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel(f"throughput relative to {baseline} (same run)")
    ax.grid(alpha=0.3, axis="x")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def image_path(img_dir, name):
    os.makedirs(img_dir, exist_ok=True)
    return os.path.join(img_dir, name)
