#!/usr/bin/env bash
# Render the mixin (mixin/) into the files users and the chart consume:
#   alerts/misschedule-exporter.rules.yaml        the Prometheus rule file
#   dashboards/misschedule-exporter.json          the Grafana dashboard
#   charts/misschedule-exporter/files/rules.format.yaml
#   charts/misschedule-exporter/files/dashboard.format.json
#                                                 the same, rendered with the mixin's own config
#                                                 left open as printf verbs: %[1]s the exporter's
#                                                 job (the chart's own), %[2]d DaemonSetDrainStuck's
#                                                 threshold (prometheusRule.drainStuckSeconds)
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
  # The same with the chart's values left open: the chart fills them in with printf, so it
  # never edits rule text and the mixin stays the one owner of every expression. A literal %
  # would be read as a verb: there is none, and the check below keeps it so.
  local open='(import "mixin/mixin.libsonnet") + { _config+:: { misscheduleExporterSelector: "job=\"%[1]s\"", drainStuckSeconds: "%[2]d" } }'
  jsonnet -S -e "std.manifestYamlDoc(($open).prometheusAlerts, indent_array_in_object=true, quote_keys=false)" \
    >"$out/chart/rules.format.yaml"
  jsonnet -e "($open).grafanaDashboards[\"misschedule-exporter.json\"]" >"$out/chart/dashboard.format.json"
  if grep -n '%' "$out/chart/rules.format.yaml" "$out/chart/dashboard.format.json" | grep -v '%\[1\]s' | grep -v '%\[2\]d'; then
    echo "mixin: a literal % in the rules or dashboard would break the chart's printf" >&2
    exit 1
  fi
}

targets=(
  "alerts/misschedule-exporter.rules.yaml:alerts/misschedule-exporter.rules.yaml"
  "dashboards/misschedule-exporter.json:dashboards/misschedule-exporter.json"
  "chart/rules.format.yaml:charts/misschedule-exporter/files/rules.format.yaml"
  "chart/dashboard.format.json:charts/misschedule-exporter/files/dashboard.format.json"
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
