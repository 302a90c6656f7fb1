"""Draws a Grafana dashboard's panels from a Prometheus server's data, where no Grafana runs.

usage: render_panels.py PROMETHEUS_URL DASHBOARD_JSON OUT_PNG [MINUTES]

Every panel's queries run as Grafana runs them (query_range over the last MINUTES, instant
queries for instant targets), with the dashboard's variables at "All"; each panel becomes a
plot of the same title, legends and unit. Needs matplotlib (bench/kubernetes_dashboard.sh
installs it into a virtual environment).
"""

import json
import re
import sys
import time
import urllib.parse
import urllib.request

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

UNITS = {
    "bytes": (2**20, "MiB"),
    "s": (1, "s"),
    "percentunit": (0.01, "%"),
    "short": (1, ""),
}


def query(url, expr, minutes, instant):
    now = time.time()
    if instant:
        params = {"query": expr, "time": f"{now:.3f}"}
        path = "/api/v1/query"
    else:
        params = {
            "query": expr,
            "start": f"{now - minutes * 60:.3f}",
            "end": f"{now:.3f}",
            "step": "5",
        }
        path = "/api/v1/query_range"
    with urllib.request.urlopen(url + path + "?" + urllib.parse.urlencode(params)) as r:
        body = json.load(r)
    if body["status"] != "success":
        raise SystemExit(f"{expr}: {body}")
    return body["data"]["result"]


def legend(fmt, labels):
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt)


def main():
    url, dashboard, out = sys.argv[1:4]
    minutes = float(sys.argv[4]) if len(sys.argv) > 4 else 5
    dash = json.load(open(dashboard))
    panels = dash["panels"]
    fig, axes = plt.subplots(3, 2, figsize=(14, 12))
    layout = [axes[0][0], axes[1][0], axes[1][1], axes[2][0], axes[2][1]]
    axes[0][1].axis("off")
    # The first panel spans the dashboard's width, as in the JSON.
    axes[0][0].set_position([0.06, 0.70, 0.88, 0.24])
    t0 = time.time()
    for ax, panel in zip(layout, panels):
        scale, unit = UNITS.get(panel["fieldConfig"]["defaults"].get("unit", "short"), (1, ""))
        ax.set_title(panel["title"], fontsize=11, loc="left")
        if panel["type"] == "bargauge":
            target = panel["targets"][0]
            expr = target["expr"].replace("$namespace", ".*").replace("$pod", ".*")
            rows = query(url, expr, minutes, True)
            rows.sort(key=lambda r: float(r["value"][1]))
            names = [legend(target["legendFormat"], r["metric"]) for r in rows]
            values = [float(r["value"][1]) / scale for r in rows]
            ax.barh(names, values, color="#5794f2")
            ax.set_xlabel(unit)
            continue
        for target in panel["targets"]:
            expr = target["expr"].replace("$namespace", ".*").replace("$pod", ".*")
            for series in query(url, expr, minutes, False):
                xs = [float(t) - t0 for t, _ in series["values"]]
                ys = [float(v) / scale for _, v in series["values"]]
                ax.plot(xs, ys, label=legend(target["legendFormat"], series["metric"]), lw=1.2)
        ax.set_xlabel("seconds")
        ax.set_ylabel(unit)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(dash["title"] + " (drawn from Prometheus, not Grafana)", fontsize=13)
    fig.subplots_adjust(left=0.06, right=0.8, hspace=0.45, wspace=0.7, top=0.93, bottom=0.05)
    axes[0][0].set_position([0.06, 0.70, 0.70, 0.23])
    fig.savefig(out, dpi=80)


if __name__ == "__main__":
    main()
