"""Point labels that do not overlap: each label at the first candidate offset around its point that overlaps no
earlier label and no point (else the least overlap), with a leader line when it ends up far."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_DIRECTIONS = [(1, 0.3), (-1, 0.3), (0, 1), (0, -1), (1, 1), (-1, 1), (1, -1), (-1, -1)]  # tried in this order
_DISTANCES = (6, 14, 24, 36)  # points from the point to the label's anchor, near first
LEADER_FROM = 12  # points: a label anchored farther than this from its point gets a leader line
POINT_RADIUS = 5  # pixels kept clear around every point


def _overlap(a: Any, b: Any) -> float:
    """Area shared by two bounding boxes (display pixels)."""
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return w * h if w > 0 and h > 0 else 0.0


def place_labels(ax: Any, xy: Sequence[tuple[float, float]], labels: Sequence[str], fontsize: float = 8,
                 **text_kwargs: Any) -> list[Any]:
    """Annotate the points ``xy`` (data coordinates) of ``ax`` with ``labels`` without overlaps; returns the
    annotations. Call it after the axis limits are final (after scattering and setting margins)."""
    from matplotlib.transforms import Bbox

    renderer = ax.figure.canvas.get_renderer()
    occupied = [Bbox.from_extents(x - POINT_RADIUS, y - POINT_RADIUS, x + POINT_RADIUS, y + POINT_RADIUS)
                for x, y in (ax.transData.transform(p) for p in xy)]  # display pixels
    axes_box = ax.get_window_extent(renderer)
    placed = []
    for (x, y), label in zip(xy, labels):
        best = None
        for distance in _DISTANCES:
            for dx, dy in _DIRECTIONS:
                ha = "left" if dx > 0 else "right" if dx < 0 else "center"
                va = "bottom" if dy > 0.5 else "top" if dy < -0.5 else "center"
                text = ax.annotate(label, (x, y), xytext=(dx * distance, dy * distance), textcoords="offset points",
                                   ha=ha, va=va, fontsize=fontsize, **text_kwargs)
                box = text.get_window_extent(renderer).expanded(1.04, 1.1)
                cost = sum(_overlap(box, other) for other in occupied)
                cost += box.width * box.height - _overlap(box, axes_box)  # the part outside the axes counts too
                text.remove()
                if best is None or cost < best[0]:
                    best = (cost, dx * distance, dy * distance, ha, va, box)
                if cost == 0:
                    break
            if best[0] == 0:
                break
        _, ox, oy, ha, va, box = best
        far = (ox**2 + oy**2) ** 0.5 > LEADER_FROM
        arrow = dict(arrowstyle="-", color="0.45", lw=0.6, shrinkA=0, shrinkB=3) if far else None
        placed.append(ax.annotate(label, (x, y), xytext=(ox, oy), textcoords="offset points", ha=ha, va=va,
                                  fontsize=fontsize, arrowprops=arrow, **text_kwargs))
        occupied.append(box)
    return placed
