#!/usr/bin/env bash
# Render the mixin (mixin/) into the files users and the chart consume:
#   alerts/misschedule-exporter.rules.yaml        the Prometheus rule file
#   dashboards/misschedule-exporter.json          the Grafana dashboard
#   charts/misschedule-exporter/files/drain-stuck-expr.format
#                                                 DaemonSetDrainStuck's expression with %d for
#                                                 the chart's prometheusRule.drainStuckSeconds
# scripts/mixin.sh --check renders into a scratch directory and fails on any difference
# (tests/mixin.rs runs it). Needs Debian's jsonnet.
set -euo pipefail
cd "$(dirname "$0")/.."

render() {
  local out=$1
  mkdir -p "$out/alerts" "$out/dashboards" "$out/chart"
  {
    echo "# Generated from mixin/ by scripts/mixin.sh: edit the mixin, then run the script."
    echo "# Alerts that replace kubernetes-mixin's KubeDaemonSetMisScheduled: docs/alerting.md, docs/runbooks.md."
    jsonnet -S -e 'std.manifestYamlDoc((import "mixin/mixin.libsonnet").prometheusAlerts, indent_array_in_object=true, quote_keys=false)'
  } >"$out/alerts/misschedule-exporter.rules.yaml"
  jsonnet -e '(import "mixin/mixin.libsonnet").grafanaDashboards["misschedule-exporter.json"]' \
    >"$out/dashboards/misschedule-exporter.json"
  # The same expression with the threshold left open: the chart fills it in with printf, so it
  # never edits rule text and the mixin stays the one owner of the expression.
  local expr
  expr=$(jsonnet -S -e '
    local m = (import "mixin/mixin.libsonnet") + { _config+:: { drainStuckSeconds: "%d" } };
    [r.expr for r in m.prometheusAlerts.groups[0].rules if r.alert == "DaemonSetDrainStuck"][0]
  ')
  printf '%s\n' "$expr" >"$out/chart/drain-stuck-expr.format"
}

targets=(
  "alerts/misschedule-exporter.rules.yaml:alerts/misschedule-exporter.rules.yaml"
  "dashboards/misschedule-exporter.json:dashboards/misschedule-exporter.json"
  "chart/drain-stuck-expr.format:charts/misschedule-exporter/files/drain-stuck-expr.format"
)

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
jsonnetfmt --test mixin/*.libsonnet mixin/*/*.libsonnet || {
  echo "mixin: not formatted; run: jsonnetfmt -i mixin/*.libsonnet mixin/*/*.libsonnet" >&2
  exit 1
}
render "$scratch"
if [ "${1:-}" = --check ]; then
  status=0
  for t in "${targets[@]}"; do
    diff -u "${t#*:}" "$scratch/${t%%:*}" || { echo "mixin: ${t#*:} is stale; run scripts/mixin.sh" >&2; status=1; }
  done
  exit $status
fi
for t in "${targets[@]}"; do cp "$scratch/${t%%:*}" "${t#*:}"; done
echo "mixin: rendered ${#targets[@]} files"
