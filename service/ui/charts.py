"""Charts as inline SVG, drawn on the server: nothing to fetch, nothing to build.

Every text that goes into the markup is escaped here (labels are ours, but a category or a
verdict label still passes through `escape`), and the result is `Markup` for the templates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from markupsafe import Markup, escape

# one colour per verdict (and per series), readable on white
COLORS: Mapping[str, str] = {
    "passed": "#2e7d32",
    "failed": "#c62828",
    "cheat": "#6a1b9a",
    "timeout": "#ef6c00",
    "oom": "#ad1457",
    "compile_error": "#795548",
    "runtime_error": "#d84315",
    "infra_error": "#546e7a",
    "cancelled": "#9e9e9e",
    "none": "#bdbdbd",
}
PALETTE = ("#1565c0", "#ef6c00", "#2e7d32", "#6a1b9a", "#c62828", "#00838f", "#5d4037")

W, H, PAD_L, PAD_B, PAD_T = 640, 180, 44, 22, 10


def color(name: str, index: int = 0) -> str:
    return COLORS.get(name, PALETTE[index % len(PALETTE)])


def _frame(top: float, unit: str, x_labels: Sequence[str]) -> list[str]:
    parts = [
        f'<line x1="{PAD_L}" y1="{H - PAD_B}" x2="{W}" y2="{H - PAD_B}" class="axis"/>',
        f'<line x1="{PAD_L}" y1="{PAD_T}" x2="{PAD_L}" y2="{H - PAD_B}" class="axis"/>',
        f'<text x="{PAD_L - 4}" y="{PAD_T + 8}" class="tick" text-anchor="end">'
        f"{escape(_num(top))}{escape(unit)}</text>",
        f'<text x="{PAD_L - 4}" y="{H - PAD_B}" class="tick" text-anchor="end">0</text>',
    ]
    if x_labels:
        for i in sorted({0, len(x_labels) // 2, len(x_labels) - 1}):
            x = _x(i, len(x_labels))
            parts.append(
                f'<text x="{x:.1f}" y="{H - 6}" class="tick" text-anchor="middle">'
                f"{escape(x_labels[i])}</text>"
            )
    return parts


def _x(i: int, n: int) -> float:
    return PAD_L + (W - PAD_L - 8) * (i + 0.5) / max(n, 1)


def _y(v: float, top: float) -> float:
    return H - PAD_B - (H - PAD_B - PAD_T) * (v / top if top else 0)


def _num(v: float) -> str:
    return f"{v:.0f}" if v >= 10 or v == int(v) else f"{v:.2g}"


def _svg(title: str, parts: list[str], legend: Sequence[tuple[str, str]]) -> Markup:
    keys = "".join(
        f'<span class="key"><i style="background:{c}"></i>{escape(name)}</span>'
        for name, c in legend
    )
    body = "".join(parts)
    return Markup(
        f'<figure class="chart"><figcaption>{escape(title)}</figcaption>'
        f'<svg viewBox="0 0 {W} {H}" role="img" aria-label="{escape(title)}">{body}</svg>'
        f'<div class="legend">{keys}</div></figure>'
    )


def lines(
    title: str,
    series: Mapping[str, Sequence[float | None]],
    x_labels: Sequence[str],
    *,
    unit: str = "",
) -> Markup:
    """One polyline per series; a None is a gap (no data that minute)."""
    values = [v for s in series.values() for v in s if v is not None]
    top = max(values, default=0.0) or 1.0
    parts = _frame(top, unit, x_labels)
    legend = []
    for index, (name, points) in enumerate(series.items()):
        c = PALETTE[index % len(PALETTE)]
        legend.append((name, c))
        run: list[str] = []
        for i, v in enumerate([*points, None]):
            if v is None:
                if len(run) > 1:
                    parts.append(
                        f'<polyline points="{" ".join(run)}" fill="none" stroke="{c}" '
                        'stroke-width="2"/>'
                    )
                elif run:
                    x, y = run[0].split(",")
                    parts.append(f'<circle cx="{x}" cy="{y}" r="2.5" fill="{c}"/>')
                run = []
            else:
                run.append(f"{_x(i, len(points)):.1f},{_y(v, top):.1f}")
    return _svg(title, parts, legend)


def stacked(title: str, columns: Sequence[Mapping[str, int]], x_labels: Sequence[str]) -> Markup:
    """One bar per column, stacked by key (e.g. the verdicts that ended each minute)."""
    names = sorted({k for col in columns for k in col}, key=lambda k: (k not in COLORS, k))
    top = float(max((sum(c.values()) for c in columns), default=0) or 1)
    parts = _frame(top, "", x_labels)
    width = max((W - PAD_L - 8) / max(len(columns), 1) - 1, 1)
    for i, col in enumerate(columns):
        base = 0.0
        for name in names:
            n = col.get(name, 0)
            if not n:
                continue
            y0, y1 = _y(base, top), _y(base + n, top)
            parts.append(
                f'<rect x="{_x(i, len(columns)) - width / 2:.1f}" y="{y1:.1f}" '
                f'width="{width:.1f}" height="{y0 - y1:.1f}" fill="{color(name)}">'
                f"<title>{escape(x_labels[i] if i < len(x_labels) else '')} "
                f"{escape(name)}: {n}</title></rect>"
            )
            base += n
    return _svg(title, parts, [(n, color(n, i)) for i, n in enumerate(names)])


def bars(title: str, items: Mapping[str, int]) -> Markup:
    """Horizontal bars, largest first (e.g. the cheat categories seen)."""
    rows = sorted(items.items(), key=lambda kv: (-kv[1], kv[0]))
    height = max(24 * len(rows) + 8, 40)
    top = max((n for _, n in rows), default=0) or 1
    parts = []
    for i, (name, n) in enumerate(rows):
        y = 4 + 24 * i
        w = (W - 200) * n / top
        parts.append(
            f'<text x="150" y="{y + 15}" class="tick" text-anchor="end">{escape(name)}</text>'
            f'<rect x="156" y="{y}" width="{w:.1f}" height="18" fill="{color(name, i)}"/>'
            f'<text x="{160 + w:.1f}" y="{y + 14}" class="tick">{n}</text>'
        )
    if not rows:
        parts.append(f'<text x="{W / 2}" y="24" class="tick" text-anchor="middle">none</text>')
    body = "".join(parts)
    return Markup(
        f'<figure class="chart"><figcaption>{escape(title)}</figcaption>'
        f'<svg viewBox="0 0 {W} {height}" role="img" aria-label="{escape(title)}">{body}</svg>'
        "</figure>"
    )
